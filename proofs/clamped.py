"""Proof for the gallery twin ``clamped_sum_unclamped`` (a clamped noisy sum, Dwork, McSherry,
Nissim & Smith 2006, that forgets to clamp). The correct clamped count, sum and mean are declared
from parts and proved by :mod:`dpharness.proofs.parts`.

Preconditions: neighbours per the mechanism's ``relation`` (add/remove or substitution);
records snapped to g·Z; scale b > 0.
Pseudocode (intended): c = Σ_i g·floor(clamp(x_i)/g + 1/2) (exact, integer units);
y = c + g·DiscreteLaplace(b/g).
Postcondition (intended): sup loss <= Δ/b with Δ derived from the snapped bounds by interval
arithmetic: add/remove max(|L|, |H|), substitution H − L. The implementation is checked against
that model on records outside the bounds; it matches the unclamped model instead, whose loss is
unbounded, and an exact counterexample refutes the claim."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import sympy as sp

from dpharness.core import AddRemove, exact
from dpharness.mechanisms import clamped as _mechs
from dpharness.proof_registry import proves

from ._gridstats import GridStat, clamp_snap_steps, contribution_sensitivity, prove_grid_stats, rhu, units
from ._kernel import ProofBuilder
from ._model import Proof

__all__ = ["prove_sum_unclamped"]


def _relation_words(relation) -> str:
    return "add/remove one record" if isinstance(relation, AddRemove) else "substitute one record"


def _extreme(mechanism, g: Fraction) -> float:
    lo, hi = float(mechanism.lo), float(mechanism.hi)
    return hi if abs(units(hi, g)) >= abs(units(lo, g)) else lo


def _on_grid(value: float, g: Fraction) -> float:
    """``value`` with its magnitude capped at 2^50·g, so the mechanism (which refuses |x/g| >= 2^52) accepts it."""
    cap = float(2**50 * g)
    return max(-cap, min(cap, value))


def _big(mechanism) -> float:
    """A record far outside the bounds whose unclamped contribution alone exceeds the claim."""
    need = 4 * max(
        float(exact(mechanism.claim.epsilon)) * float(exact(mechanism.scale)),
        abs(float(mechanism.lo)),
        abs(float(mechanism.hi)),
        1.0,
    )
    return _on_grid(float(2 ** math.ceil(math.log2(need))), Fraction(mechanism.granularity))


@proves(_mechs.ClampedSumUnclamped)
def prove_sum_unclamped(mechanism) -> Proof:
    pb = ProofBuilder(mechanism)
    relation = mechanism.relation
    g = Fraction(mechanism.granularity)
    pb.precondition(f"neighbours: {_relation_words(relation)} (the mechanism's relation field)")
    pb.precondition(f"granularity g = {exact(g)}; records and bounds read as the binary doubles the code uses")
    pb.precondition(
        "numeric model: statistics computed exactly in integer grid units; grid-Laplace noise modelled "
        "as the exact two-sided geometric"
    )
    pb.precondition(f"gallery variant: {mechanism.bug}")
    pb.pseudocode("c = Σ_i g·floor(clamp(x_i, lo, hi)/g + 1/2); y = c + g·DiscreteLaplace(b/g)")
    ulo, uhi, obs = clamp_snap_steps(mechanism.lo, mechanism.hi, g)
    m = sp.Symbol("m", integer=True)
    du, obs2 = contribution_sensitivity(
        "sum", Fraction(ulo), Fraction(uhi), relation, var_bounds={m: (ulo, uhi)}, contribution=m
    )
    st = GridStat("sum", du, exact(mechanism.scale), obs + obs2)
    pb.postcondition(
        f"sup loss <= Δ/b with Δ = {exact(st.delta_units * g)} from the snapped bounds "
        f"[{exact(ulo * g)}, {exact(uhi * g)}]"
    )
    lo, hi = float(mechanism.lo), float(mechanism.hi)
    e = _extreme(mechanism, g)
    big = _big(mechanism)
    if isinstance(relation, AddRemove):
        pair = (np.array([hi]), np.array([hi, e]))
        alt_pair = (np.array([hi]), np.array([hi, big]))
    else:
        pair = (np.array([lo]), np.array([hi]))
        alt_pair = (np.array([lo]), np.array([big]))
    clamp = lambda d: [sum(rhu(min(max(Fraction(float(v)), Fraction(lo)), Fraction(hi)) / g) for v in np.ravel(d))]
    raw = lambda d: [sum(rhu(Fraction(float(v)) / g) for v in np.ravel(d))]
    probes = [np.array([big]), np.array([_on_grid(lo - 3 * (hi - lo) - 1, g), hi])]
    return prove_grid_stats(
        pb,
        mechanism,
        [st],
        g=g,
        centres=clamp,
        pair=pair,
        probes=probes,
        alt_centres=raw,
        alt_pair=alt_pair,
        alt_words="records are NOT clamped, so one record moves the sum without bound (sensitivity and ε unbounded)",
    )
