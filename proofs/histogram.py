"""Proof for the gallery twin ``noisy_histogram_scale_bug`` (the noisy histogram on the grid, Dwork,
McSherry, Nissim & Smith 2006, calibrated with scale ε instead of Δ/ε). The correct
``noisy_histogram`` is declared from parts and proved by :mod:`dpharness.proofs.parts`.

Preconditions: records are bin indices in {0..bins−1}; neighbours per ``relation``; b = scale.
Pseudocode: c_j = #records in bin j (snapped to g·Z); y_j = c_j + g·DiscreteLaplace(b/g) i.i.d.
Postcondition: sup loss = ||c − c'||₁/b ≤ Δ/b with Δ = 1 (add/remove: one count moves by 1) or
2 (substitution: one count down, another up), times the grid's rounding when g > 1."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import sympy as sp

from dpharness.core import AddRemove, exact

from . import _lemmas as lemmas
from ._common import check_law_ratio, judge_pure
from ._gridstats import rhu
from ._kernel import ProofBuilder
from ._model import Proof
from .laplace import laplace_l1_steps
from dpharness.mechanisms import histogram as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove"]


@proves(_mechs.NoisyHistogramScaleBug)
def prove(mechanism) -> Proof:
    pb = ProofBuilder(mechanism)
    bins = int(mechanism.bins)
    relation = mechanism.relation
    b_val = exact(mechanism.scale)
    g = Fraction(getattr(mechanism, "granularity", 1))
    g_val = exact(g)
    add_remove = isinstance(relation, AddRemove)
    pb.precondition(
        f"records: bin indices in {{0..{bins - 1}}}; neighbours: "
        f"{'add/remove one record' if add_remove else 'substitute one record'}"
    )
    pb.precondition(f"parameters: scale b = {b_val} (exact), granularity g = {g_val}")
    pb.precondition(
        "numeric model: counts exact integers; grid-Laplace noise modelled as the exact two-sided geometric"
    )
    if getattr(mechanism, "buggy", False):
        pb.precondition(f"gallery variant: {mechanism.bug}")
    pb.pseudocode("c_j = g·floor(#{i: x_i = j}/g + 1/2); y_j = c_j + g·DL(b/g), independently per bin")
    pb.postcondition("sup_y ln P(y|D) - ln P(y|D') = ||c - c'||_1/b <= Δ_g/b")

    with pb.phase("derive"):
        laplace_l1_steps(pb, bins, grid="grid pmf per bin")
        # one record contributes the indicator vector e_j of its bin
        e = lambda j: sp.Matrix([1 if i == j else 0 for i in range(bins)])
        l1 = lambda v: sum(abs(t) for t in v)
        if add_remove:
            changed = 1
            ok = all(l1(e(j)) == 1 for j in range(bins))
            pb.evaluate(
                "add/remove: c' - c = ±e_j, so ||c - c'||_1 = 1 for every bin j",
                sp.Eq(1, 1) if ok else sp.false,
                f"exact, all {bins} bins",
            )
        else:
            changed = 2
            worst = max(l1(e(j) - e(k)) for j in range(bins) for k in range(bins))
            pb.evaluate(
                "substitution: c' - c = e_j - e_k, so ||c - c'||_1 <= 2 (= 2 when j != k)",
                sp.Eq(worst, 2),
                f"exact, all {bins}² pairs of bins",
            )
        per_bin = math.ceil(1 / g)
        if g > 1:
            pb.add(lemmas.grid_rounding())
        pb.evaluate(
            f"grid: each changed count moves its snapped centre by at most ceil(1/g) = {per_bin} grid units",
            sp.Eq(sp.ceiling(1 / g_val), per_bin),
            "rounding lemma (exact when g divides 1)",
        )
        delta_g = exact(changed * per_bin * g)
        pb.precondition(
            f"grid: the snapped sensitivity is Δ_g = {delta_g} ({'equal to' if delta_g == changed else 'above'} "
            f"the count sensitivity {changed})"
        )
        bound = delta_g / b_val

    with pb.phase("judge"):
        d = np.array([0])
        d2 = np.array([0, 0]) if add_remove else np.array([1])
        counts = lambda data: [rhu(Fraction(int(np.sum(np.asarray(data) == j))) / g) for j in range(bins)]
        c, c2 = counts(d), counts(d2)
        dist = exact(sum(abs(a - b) for a, b in zip(c, c2)) * g)
        T = sp.tanh(g_val / (2 * b_val))
        p, q = T**bins, T**bins * sp.exp(-dist / b_val)
        y = np.array([float(u * g) for u in c])
        w = judge_pure(
            pb,
            bound,
            p=p,
            q=q,
            data=d,
            neighbor=d2,
            output=y,
            description="y = the snapped counts of D: the triangle inequality is tight in every changed bin",
        )
        check_law_ratio(pb, mechanism, d, d2, y, sp.log(p) - sp.log(q))
    return pb.finish(bound, witness=w)
