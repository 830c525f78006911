"""Proofs for the clamped noisy count, sum and mean on the grid (Dwork, McSherry, Nissim & Smith
2006; clamping as in Dwork & Roth 2014 §3.3), and the gallery twin ``clamped_sum_unclamped``.

Preconditions: neighbours per the mechanism's ``relation`` (add/remove or substitution);
records clamped to [lo, hi] and snapped to g·Z; scales b > 0.
Pseudocode: c = Σ_i g·floor(clamp(x_i)/g + 1/2) (exact, integer units); y = c + g·DiscreteLaplace(b/g).
Postcondition: sup loss <= Δ/b with Δ derived from the snapped bounds by interval arithmetic:
add/remove max(|L|, |H|), substitution H − L (count: 1 and 0); the mean composes sum and count."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import sympy as sp

from dpharness.core import AddRemove, Substitute, exact

from ._gridstats import GridStat, clamp_snap_steps, contribution_sensitivity, prove_grid_stats, rhu, units
from ._kernel import ProofBuilder
from ._model import Proof
from dpharness.mechanisms import clamped as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove_count", "prove_sum", "prove_sum_unclamped", "prove_mean"]


def _relation_words(relation) -> str:
    return "add/remove one record" if isinstance(relation, AddRemove) else "substitute one record"


def _count_stat(relation, g: Fraction, scale) -> GridStat:
    du, obs = contribution_sensitivity("count", Fraction(1), Fraction(1), relation, snap_factor=1 / g)
    return GridStat("count", du, exact(scale), obs)


def _sum_stat(mechanism, relation, g: Fraction, scale) -> tuple[GridStat, int, int]:
    ulo, uhi, obs = clamp_snap_steps(mechanism.lo, mechanism.hi, g)
    m = sp.Symbol("m", integer=True)
    du, obs2 = contribution_sensitivity("sum", Fraction(ulo), Fraction(uhi), relation, var_bounds={m: (ulo, uhi)},
                                        contribution=m)
    return GridStat("sum", du, exact(scale), obs + obs2), ulo, uhi


def _extreme(mechanism, g: Fraction) -> float:
    lo, hi = float(mechanism.lo), float(mechanism.hi)
    return hi if abs(units(hi, g)) >= abs(units(lo, g)) else lo


def _big(mechanism, scale) -> float:
    """A record far outside the bounds whose unclamped contribution alone exceeds the claim."""
    need = 4 * max(float(exact(mechanism.claim.epsilon)) * float(exact(scale)), abs(float(mechanism.lo)),
                   abs(float(mechanism.hi)), 1.0)
    return _on_grid(float(2 ** math.ceil(math.log2(need))), Fraction(mechanism.granularity))


def _on_grid(value: float, g: Fraction) -> float:
    """``value`` with its magnitude capped at 2^50·g, so the mechanism (which refuses |x/g| >= 2^52) accepts it."""
    cap = float(2 ** 50 * g)
    return max(-cap, min(cap, value))


@proves(_mechs.ClampedCount)
def prove_count(mechanism) -> Proof:
    return _prove(mechanism, "ClampedCount")


@proves(_mechs.ClampedSum)
def prove_sum(mechanism) -> Proof:
    return _prove(mechanism, "ClampedSum")


@proves(_mechs.ClampedSumUnclamped)
def prove_sum_unclamped(mechanism) -> Proof:
    return _prove(mechanism, "ClampedSumUnclamped")


@proves(_mechs.ClampedMean)
def prove_mean(mechanism) -> Proof:
    return _prove(mechanism, "ClampedMean")


def _prove(mechanism, kind: str) -> Proof:
    """The clamped statistics' derivation; ``kind`` is the class the registered proof was written for."""
    pb = ProofBuilder(mechanism)
    relation = mechanism.relation
    g = Fraction(mechanism.granularity)
    pb.precondition(f"neighbours: {_relation_words(relation)} (the mechanism's relation field)")
    pb.precondition(f"granularity g = {exact(g)}; records and bounds read as the binary doubles the code uses")
    pb.precondition("numeric model: statistics computed exactly in integer grid units; grid-Laplace noise modelled "
                    "as the exact two-sided geometric")
    if getattr(mechanism, "buggy", False):
        pb.precondition(f"gallery variant: {mechanism.bug}")

    if kind == "ClampedCount":
        pb.pseudocode("c = g·floor(n/g + 1/2); y = c + g·DiscreteLaplace(b/g)")
        pb.postcondition("sup loss <= Δ/b with Δ = 1 (add/remove) or 0 (substitution)")
        st = _count_stat(relation, g, mechanism.scale)
        pb.precondition(f"grid: the count is snapped to g; sensitivity ceil(1/g)·g = {exact(st.delta_units * g)}")
        if isinstance(relation, AddRemove):
            pair = (np.array([0.0]), np.array([0.0, 0.0]))
        else:
            pair = (np.array([0.0]), np.array([1.0]))
        return prove_grid_stats(pb, mechanism, [st], g=g, centres=lambda d: [rhu(Fraction(len(d)) / g)], pair=pair)

    if kind in ("ClampedSum", "ClampedSumUnclamped"):
        pb.pseudocode("c = Σ_i g·floor(clamp(x_i, lo, hi)/g + 1/2); y = c + g·DiscreteLaplace(b/g)")
        st, ulo, uhi = _sum_stat(mechanism, relation, g, mechanism.scale)
        pb.postcondition(f"sup loss <= Δ/b with Δ = {exact(st.delta_units * g)} from the snapped bounds "
                         f"[{exact(ulo * g)}, {exact(uhi * g)}]")
        lo, hi = float(mechanism.lo), float(mechanism.hi)
        e = _extreme(mechanism, g)
        big = _big(mechanism, mechanism.scale)
        if isinstance(relation, AddRemove):
            pair = (np.array([hi]), np.array([hi, e]))
            alt_pair = (np.array([hi]), np.array([hi, big]))
        else:
            pair = (np.array([lo]), np.array([hi]))
            alt_pair = (np.array([lo]), np.array([big]))
        clamp = lambda d: [sum(rhu(min(max(Fraction(float(v)), Fraction(lo)), Fraction(hi)) / g) for v in np.ravel(d))]
        raw = lambda d: [sum(rhu(Fraction(float(v)) / g) for v in np.ravel(d))]
        probes = [np.array([big]), np.array([_on_grid(lo - 3 * (hi - lo) - 1, g), hi])]
        return prove_grid_stats(pb, mechanism, [st], g=g, centres=clamp, pair=pair, probes=probes,
                                alt_centres=raw, alt_pair=alt_pair,
                                alt_words="records are NOT clamped, so one record moves the sum without bound "
                                          "(sensitivity and ε unbounded)")

    if kind == "ClampedMean":
        b_s, b_c = mechanism.noise_scales
        st, ulo, uhi = _sum_stat(mechanism, relation, g, b_s)
        lo, hi = float(mechanism.lo), float(mechanism.hi)
        clamp_units = lambda d: sum(rhu(min(max(Fraction(float(v)), Fraction(lo)), Fraction(hi)) / g) for v in np.ravel(d))
        count_units = lambda d: rhu(Fraction(len(np.ravel(d))) / g)
        e = _extreme(mechanism, g)
        probes = [np.array([_on_grid(lo - 3 * (hi - lo) - 1, g)] + [hi] * (0 if isinstance(relation, AddRemove) else int(mechanism.n) - 1))]
        if isinstance(relation, AddRemove):
            pb.pseudocode("released (y_s, y_c) = (c_s + g·DL(b_s/g), n + g·DL(b_c/g)); finalize = y_s / max(y_c, 1)")
            pb.postcondition("sup loss <= Δ_s/b_s + 1/b_c (composition of the noisy sum and the noisy count)")
            cst = _count_stat(relation, g, b_c)
            pair = (np.array([hi]), np.array([hi, e]))
            from . import _lemmas as lemmas
            pb.add(lemmas.post_processing("finalize: noisy sum / max(noisy count, 1)"))
            return prove_grid_stats(pb, mechanism, [st, cst], g=g, centres=lambda d: [clamp_units(d), count_units(d)],
                                    pair=pair, probes=probes)
        n = int(mechanism.n)
        pb.pseudocode("released (y_s, n) with y_s = c_s + g·DL(b_s/g); the size n is public and fixed")
        pb.postcondition("sup loss <= Δ_s/b_s; the count coordinate is identical for neighbours of equal size")
        base = np.full(n, lo)
        other = base.copy()
        other[0] = hi
        from . import _lemmas as lemmas
        pb.add(lemmas.post_processing("finalize: noisy sum / n"))
        return prove_grid_stats(pb, mechanism, [st], g=g, centres=lambda d: [clamp_units(d)], pair=(base, other),
                                probes=probes, fixed=lambda d: [float(count_units(d) * g)])

    raise AssertionError(f"kind={kind!r}")  # pragma: no cover - the four registered proofs pass their kind
