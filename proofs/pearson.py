"""Proof for the noisy Pearson correlation from six noisy sums (n, Σx, Σy, Σx², Σy², Σxy) at ε/6
each (Laplace mechanism on bounded queries, Dwork, McSherry, Nissim & Smith 2006; sequential
composition, Dwork & Roth 2014 Thm 3.16; post-processing, Thm 2.1).

Preconditions: add/remove one record (x, y) ∈ [lo, hi]², clamped and snapped to g·Z.
Pseudocode: c = (n, Σm, Σk, rd(Σm²g), rd(Σk²g), rd(Σmkg)) in grid units; y_j = c_j + g·DL(b_j/g).
Postcondition: sup loss <= Σ_j Δ_j/b_j with Δ = (1, B, B, Q, Q, Q), Q = ceil(B²g)·g, by interval
arithmetic on one record's contribution (squares and products of [L, H]) and the rounding lemma."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpharness.core import exact

from . import _lemmas as lemmas
from ._gridstats import accepts, prove_grid_stats, rhu
from ._kernel import ProofBuilder
from ._model import Proof
from .std import linear_and_quadratic_stats, witness_pairs
from dpharness.mechanisms import pearson as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove"]


@proves(_mechs.NoisyPearson)
def prove(mechanism) -> Proof:
    pb = ProofBuilder(mechanism)
    g = Fraction(mechanism.granularity)
    lo, hi = float(mechanism.lo), float(mechanism.hi)
    pb.precondition("neighbours: add/remove one record (a pair (x, y))")
    pb.precondition(f"records in [{lo}, {hi}]² (clamped by the mechanism), snapped to g = {exact(g)}")
    pb.precondition("numeric model: sums computed exactly in integer units; grid-Laplace noise modelled as the exact "
                    "two-sided geometric")
    pb.pseudocode("c = (n, Σm, Σk, floor(Σm²g + 1/2), floor(Σk²g + 1/2), floor(Σmk·g + 1/2)); y_j = c_j + g·DL(b_j/g)")
    pb.postcondition("sup loss <= Σ_j Δ_j/b_j (each ε/6 at calibration)")
    names = ["count", "sum x", "sum y", "sum x²", "sum y²", "sum xy"]
    stats = linear_and_quadratic_stats(mechanism, g, mechanism.noise_scales, names, ["n", "x", "x", "xx", "xx", "xy"])
    pb.add(lemmas.post_processing("finalize: the correlation formula of the six noisy sums"))

    def centres(d):
        arr = np.asarray(d, dtype=float).reshape(-1, 2)
        cl = lambda v: rhu(min(max(Fraction(float(v)), Fraction(lo)), Fraction(hi)) / g)
        mx = [cl(v) for v in arr[:, 0]]
        my = [cl(v) for v in arr[:, 1]]
        rd = lambda t: rhu(Fraction(t) * g)
        return [rhu(Fraction(len(mx)) / g), sum(mx), sum(my), rd(sum(a * a for a in mx)), rd(sum(b * b for b in my)),
                rd(sum(a * b for a, b in zip(mx, my)))]

    pair, probes = witness_pairs(mechanism, g, lambda v: [v, v])
    mixed = np.array([[lo, hi], [hi, lo], [(lo + hi) / 2, hi]])
    if accepts(mechanism, mixed):
        probes.append(mixed)
    return prove_grid_stats(pb, mechanism, stats, g=g, centres=centres, pair=pair, probes=probes)
