"""Proof for the noisy standard deviation from three noisy sums (n, Σx, Σx²) at ε/3 each
(Laplace mechanism on bounded queries, Dwork, McSherry, Nissim & Smith 2006; sequential
composition, Dwork & Roth 2014 Thm 3.16; post-processing, Thm 2.1).

Preconditions: add/remove one record; records in [lo, hi], clamped and snapped to g·Z.
Pseudocode: c = (n, Σ m_i, floor(Σ m_i²·g + 1/2)) in grid units (m_i the snapped records);
y_j = c_j + g·DiscreteLaplace(b_j/g); finalize(y) = std (post-processing).
Postcondition: sup loss <= Σ_j Δ_j/b_j with Δ = (1, B, ceil(B²g)·g), B = max(|L|, |H|) (interval
arithmetic; the sum of squares is snapped, so the rounding lemma applies)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp

from dpharness.core import AddRemove, exact

from . import _lemmas as lemmas
from ._gridstats import (
    GridStat, accepts, clamp_snap_steps, contribution_sensitivity, first_accepted, prove_grid_stats, quadratic_safe_units, rhu,
)
from ._kernel import ProofBuilder
from ._model import Proof
from dpharness.mechanisms import std as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove", "square_interval", "product_interval", "linear_and_quadratic_stats", "witness_pairs"]


def square_interval(ulo: int, uhi: int) -> tuple[int, int]:
    """Interval arithmetic: {m² : m ∈ [ulo, uhi]}."""
    lo = 0 if ulo <= 0 <= uhi else min(ulo * ulo, uhi * uhi)
    return lo, max(ulo * ulo, uhi * uhi)


def product_interval(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Interval arithmetic: {s·t : s ∈ a, t ∈ b} (extremes at the corners)."""
    corners = [x * y for x in a for y in b]
    return min(corners), max(corners)


def linear_and_quadratic_stats(mechanism, g: Fraction, scales, names: list[str], kinds: list[str]) -> list[GridStat]:
    """GridStats for count ('n'), linear sums ('x'), squares ('xx') and cross products ('xy') of
    clamped, snapped records, under add/remove."""
    rel = AddRemove()
    ulo, uhi, clamp_obs = clamp_snap_steps(mechanism.lo, mechanism.hi, g)
    m, k = sp.Symbol("m", integer=True), sp.Symbol("k", integer=True)
    out = []
    for name, kind, b in zip(names, kinds, scales):
        if kind == "n":
            du, obs = contribution_sensitivity(name, Fraction(1), Fraction(1), rel, snap_factor=1 / g)
        elif kind == "x":
            du, obs = contribution_sensitivity(name, Fraction(ulo), Fraction(uhi), rel, var_bounds={m: (ulo, uhi)}, contribution=m)
            obs = clamp_obs + obs
        elif kind == "xx":
            a, c = square_interval(ulo, uhi)
            du, obs = contribution_sensitivity(name + " (in units of g²)", Fraction(a), Fraction(c), rel,
                                               var_bounds={m: (ulo, uhi)}, contribution=m ** 2, snap_factor=g)
        else:
            a, c = product_interval((ulo, uhi), (ulo, uhi))
            du, obs = contribution_sensitivity(name + " (in units of g²)", Fraction(a), Fraction(c), rel,
                                               var_bounds={m: (ulo, uhi), k: (ulo, uhi)}, contribution=m * k, snap_factor=g)
        out.append(GridStat(name, du, exact(b), obs))
    return out


def _extreme(mechanism, g: Fraction) -> float:
    lo, hi = float(mechanism.lo), float(mechanism.hi)
    return hi if abs(rhu(Fraction(hi) / g)) >= abs(rhu(Fraction(lo) / g)) else lo


def _representable_records(mechanism, g: Fraction) -> list[float]:
    """Record values in [lo, hi] on the grid, largest magnitude first: the bound of larger magnitude, the
    other bound, and the extreme clipped to where squares and products still fit the grid (|units| < 2^52;
    with wide bounds a record at the bound makes the quadratic sums unrepresentable and the mechanism
    refuses it)."""
    lo, hi = float(mechanism.lo), float(mechanism.hi)
    e = _extreme(mechanism, g)
    m = quadratic_safe_units(g)
    out = [e, lo if e == hi else hi]
    for v in (float(m * g), -float(m * g), float((m // 2) * g), -float((m // 2) * g)):
        if lo <= v <= hi:
            out.append(v)
    out.append(float(rhu(Fraction(lo + (hi - lo) / 2) / g) * g))
    vals = [v for i, v in enumerate(out) if lo <= v <= hi and v not in out[:i]]
    return sorted(vals, key=lambda v: -abs(v))


def witness_pairs(mechanism, g: Fraction, record) -> tuple[tuple, list]:
    """(pair, probes) for the quadratic-statistics proofs, chosen among inputs the mechanism accepts:
    ``[e]`` vs ``[e, e']`` moves every sum by its full sensitivity when it fits, else ``[]`` vs ``[v]`` with
    the largest representable record v; ``record(v)`` builds one record from a value."""
    vals = _representable_records(mechanism, g)
    e = _extreme(mechanism, g)
    empty = np.asarray([record(0.0)])[:0]
    cands = [(np.asarray([record(e)]), np.asarray([record(e), record(e)]))]
    cands += [(empty, np.asarray([record(v)])) for v in vals]
    pair = first_accepted(mechanism, cands)
    probes = [d for d in (np.asarray([record(v) for v in vals[:3]]), np.asarray([record(vals[-1])]))
              if accepts(mechanism, d)]
    return pair, probes


@proves(_mechs.NoisyStd)
def prove(mechanism) -> Proof:
    pb = ProofBuilder(mechanism)
    g = Fraction(mechanism.granularity)
    lo, hi = float(mechanism.lo), float(mechanism.hi)
    pb.precondition("neighbours: add/remove one record")
    pb.precondition(f"records in [{lo}, {hi}] (clamped by the mechanism, a no-op for valid data), snapped to g = {exact(g)}")
    pb.precondition("numeric model: sums computed exactly in integer units; grid-Laplace noise modelled as the exact "
                    "two-sided geometric")
    pb.pseudocode("c = (n, Σm, floor(Σm²·g + 1/2)); y_j = c_j + g·DL(b_j/g); std = finalize(y)")
    pb.postcondition("sup loss <= Δ_n/b_n + Δ_s/b_s + Δ_q/b_q (each ε/3 at calibration)")
    stats = linear_and_quadratic_stats(mechanism, g, mechanism.noise_scales, ["count", "sum", "sum of squares"],
                                       ["n", "x", "xx"])
    pb.add(lemmas.post_processing("finalize: sqrt(max(Σx²/n - (Σx/n)², 0)) of the three noisy sums"))

    def centres(d):
        ms = [rhu(min(max(Fraction(float(v)), Fraction(lo)), Fraction(hi)) / g) for v in np.ravel(d)]
        return [rhu(Fraction(len(ms)) / g), sum(ms), rhu(Fraction(sum(v * v for v in ms)) * g)]

    pair, probes = witness_pairs(mechanism, g, lambda v: v)
    return prove_grid_stats(pb, mechanism, stats, g=g, centres=centres, pair=pair, probes=probes)
