"""REFUTED from a privacy-loss distribution: a composition's witness when its certified LOWER bracket
is above the claim.

The PLD route (:func:`dpharness.proofs.parts._pld_route`) brackets δ(ε) of the product of the leaves'
worst pairs. The lower end bounds the true δ of the mechanism from below only on a neighbouring pair
that attains every leaf's worst pair at once. This module looks for such a pair among the mechanism's
extreme pairs and, when it finds one and the lower end exceeds the claimed δ, records the refutation.

It does so only where the law on the pair is exactly the product of those leaf pairs:

* every noise measurement is a scalar grid Laplace or grid Gaussian. These are independent integer
  noises around the rounded centres, a symmetric law, so a pair at shift −D has the same loss law as
  one at +D.
* nothing is post-processed: the witness's event is a set of raw outputs.
* there is no random subsample or adaptive round: the centres are fixed by the data set.
* the multiset of (noise, parameter, |shift|) over the leaves whose centres move equals the PLD's
  leaf entries.

Leaves whose centres do not move have the same law on both sides and add no loss. The witness's
event is the optimal set S = {y : Σ_i L_i(y_i) > ε}, with L_i each moving leaf's exact log-ratio. On
it, P_D(S) − e^ε P_D'(S) = δ_pair(ε) >= the certified lower end. The event's membership is computed
in floats (a near-optimal set for audits); the verdict rests on the certified lower end, which bounds
sup_S, not on the float event.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness.core import Event, Witness

__all__ = ["attaining_pair", "describe_pair", "refute"]

# extreme pairs examined for one whose leaf shifts match the PLD entries
_MAX_PAIRS = 64
# leaves listed on a pair: a structure with more (a long repeat) is not searched
_MAX_LEAVES = 4096


def _leaf_entry(leaf: Any, shift: int) -> tuple | None:
    from dpharness.mechanisms.parts.noise import GridGaussian, GridLaplace

    m = leaf.measurement
    if type(m) is GridLaplace:
        return ("laplace", Fraction(m.t), shift)
    if type(m) is GridGaussian:
        return ("gaussian", Fraction(m.tau2), shift)
    return None


class _LossAbove:
    """Membership of the optimal event: Σ_i L_i(y_i) > ε over the moving leaves' columns (picklable)."""

    def __init__(self, columns: list, eps: float) -> None:
        # (column, kind, param as float, centre on D, centre on D', grid step)
        self.columns = columns
        self.eps = eps

    def __call__(self, out: np.ndarray) -> np.ndarray:
        arr = np.asarray(out, dtype=float)
        if arr.ndim == 1:
            arr = arr[:, None]
        loss = np.zeros(arr.shape[0])
        for col, kind, param, c, c2, g in self.columns:
            u = np.rint(arr[:, col] / g)
            if kind == "laplace":
                loss += (np.abs(u - c2) - np.abs(u - c)) / param
            else:
                loss += ((u - c2) ** 2 - (u - c) ** 2) / (2 * param)
        return loss > self.eps


def _matching_pair(m: Any, wanted: Counter) -> tuple | None:
    """The first extreme pair whose moving leaves' (noise, parameter, |shift|) multiset is ``wanted``,
    with the moving columns; None when no examined pair attains every leaf's worst pair."""
    from dpharness.mechanisms.parts._law import extreme_pairs, leaves

    for d, d2 in extreme_pairs(m)[:_MAX_PAIRS]:
        a, b = leaves(m, d), leaves(m, d2)
        if len(a) != len(b) or any(len(x.centres) != 1 for x in a + b):
            return None
        got: Counter = Counter()
        columns = []
        for col, (la, lb) in enumerate(zip(a, b)):
            c, c2 = la.centres[0], lb.centres[0]
            shift = abs(c2 - c)
            if shift == 0:
                continue
            entry = _leaf_entry(la, shift)
            if entry is None:
                return None
            got[entry] += 1
            kind, param, _ = entry
            columns.append((col, kind, float(param), c, c2, float(la.g)))
        if got == wanted:
            return d, d2, columns
    return None


def attaining_pair(m: Any, counted: dict, shapes: tuple = ("dataset",)) -> tuple | None:
    """(D, D', moving columns) of the first extreme pair whose output laws are exactly the product of the
    PLD entries ``counted`` (every leaf moved by its worst shift at once), or None: no examined pair
    attains it, or the structure is not one where a pair's law is that product (see the module
    docstring). Only then is the PLD's lower end a lower bound on the mechanism's own δ(ε) or ε(δ).
    ``shapes``: the input shapes searched (a lower end may be stated for one vector input too; a
    refutation is sought on data sets only)."""
    from dpharness.mechanisms.parts._structure import has_post, has_sampling, leaf_count, measurement_leaves
    from dpharness.mechanisms.parts.noise import GridGaussian, GridLaplace

    if m is None or getattr(m, "shape", None) not in shapes or has_sampling(m.steps) or has_post(m.steps):
        return None
    if leaf_count(m.steps) > _MAX_LEAVES:
        return None
    if any(type(x) not in (GridLaplace, GridGaussian) for x in measurement_leaves(m.steps)):
        return None
    if any(len(e) != 3 for e in counted):
        return None
    return _matching_pair(m, Counter({e: n for e, n in counted.items() if e[2] != 0}))


def describe_pair(found: tuple) -> str:
    d, d2, _ = found
    return f"D = {np.asarray(d).tolist()}, D' = {np.asarray(d2).tolist()}"


def refute(pb: Any, m: Any, counted: dict, lower: Any, eps_claim: Fraction, delta_claim: Fraction) -> bool:
    """Refute the (ε, δ) claim when some extreme pair attains every leaf's worst pair and the certified
    lower end of that product's δ(ε) exceeds the claimed δ. ``counted``: the PLD route's leaf entries
    with their multiplicities; ``lower``: its optimistic composition. Returns whether it refuted."""
    # δ(ε) decreases in ε: for a LOWER bound at the claimed ε, evaluate at a float at or above it
    eps_f = float(eps_claim)
    if Fraction(eps_f) < eps_claim:
        eps_f = math.nextafter(eps_f, math.inf)
    lo = lower.delta(eps_f)
    if not Fraction(lo) > delta_claim:
        return False
    found = attaining_pair(m, counted)
    if found is None:
        pb.note(
            "PLD lower end above the claim, but no examined neighbouring pair attains every leaf's worst shift at "
            "once: not refuted (UNPROVEN)"
        )
        return False
    d, d2, columns = found
    event = Event(
        _LossAbove(columns, eps_f),
        f"Σ of the {len(columns)} moving leaves' privacy losses > ε = {eps_f:.6g} (the optimal event)",
    )
    how = (
        f"this pair moves every leaf by its worst shift, so its output laws are exactly the product of the leaves' "
        f"worst pairs; the certified lower end of that product's δ(ε = {eps_f:.6g}) is {lo:.6g} > claimed δ = "
        f"{float(delta_claim):.6g}"
    )
    w = Witness(
        d, d2, event, None, None, f"the optimal event S = {{{event.description}}}: P_D(S) − e^ε P_D'(S) >= {lo:.6g}"
    )
    pb.refute(
        w,
        how + " (optimistic connect-the-dots discretisation with every rounding and float error bounded "
        "downward, dpharness.proofs._pld)",
        delta_checked=True,
    )
    return True
