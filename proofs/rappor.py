"""Proof for basic one-time RAPPOR with one-hot encoding, general k (Erlingsson, Pihur & Korolova
2014, §3), and its gallery twin ``rappor_unhalved`` (same law, log-odds ε instead of ε/2).

Preconditions: one record x ∈ {0..k−1}; neighbours any x ≠ x' (local DP); L = log_odds ≥ 0.
Pseudocode: b = onehot(x); each bit independently kept w.p. e^L/(1+e^L), flipped w.p. 1/(1+e^L).
Postcondition: sup loss = 2L: the one-hot vectors differ in exactly the bits x and x', each bit a
binary randomized response with loss ±L; every other bit's factor cancels."""

from __future__ import annotations

import itertools

import sympy as sp

from dpharness.core import exact

from ._common import check_law, judge_pure
from ._kernel import ProofBuilder, sym
from ._model import Proof
from dpharness.mechanisms import rappor as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove", "model_pmf"]


def model_pmf(k: int, L, x: int, y) -> sp.Expr:
    keep, flip = sp.exp(L) / (1 + sp.exp(L)), 1 / (1 + sp.exp(L))
    agree = sum(1 for j in range(k) if int(y[j]) == (1 if j == x else 0))
    return keep**agree * flip ** (k - agree)


def _outputs(k: int) -> list:
    """All outputs for k <= 6; otherwise the structured ones: zeros, ones, one-hots, two-hots of bits 0/1."""
    if k <= 6:
        return [tuple(o) for o in itertools.product((0, 1), repeat=k)]
    outs = {tuple([0] * k), tuple([1] * k)}
    for j in range(k):
        outs.add(tuple(1 if i == j else 0 for i in range(k)))
    for a, b in itertools.product((0, 1), repeat=2):
        outs.add(tuple([a, b] + [0] * (k - 2)))
    return sorted(outs)


@proves(_mechs.Rappor, _mechs.RapporUnhalved)
def prove(mechanism) -> Proof:
    pb = ProofBuilder(mechanism)
    k, L_val = int(mechanism.k), exact(mechanism.log_odds)
    pb.precondition(
        f"input: one record in {{0..{k - 1}}}, one-hot encoded into {k} bits; neighbours: any two different records"
    )
    pb.precondition(f"parameters: k = {k}, log_odds L = {L_val} (exact), f = 2/(1 + e^L)")
    pb.precondition(
        "numeric model: exact -- f read as the binary value the code uses; each bit flips with probability exactly f/2 (dpharness.mechanisms._exact)"
    )
    if getattr(mechanism, "buggy", False):
        pb.precondition(f"gallery variant: {mechanism.bug}")
    pb.pseudocode("b = onehot(x); for each bit j independently: y_j = b_j w.p. 1 - f/2 = e^L/(1+e^L), else 1 - b_j")
    pb.postcondition("sup over x != x' and y of ln P(y|x) - ln P(y|x') = 2L")

    with pb.phase("derive"):
        L = sym("L", nonnegative=True)
        keep, flip = sp.exp(L) / (1 + sp.exp(L)), 1 / (1 + sp.exp(L))
        pb.check("each bit's law sums to 1", sp.Eq(keep + flip, 1), "algebra")
        pb.fact(
            "independence: ln P(y|x) = Σ_j ln P_j(y_j | b_j) (bits flipped independently)",
            "the sampler draws k independent uniforms, one per bit",
        )
        pb.fact(
            "onehot(x) and onehot(x') differ exactly in bits x and x'; the other k - 2 factors cancel",
            "one-hot encoding, x != x'",
        )
        bit = {True: sp.log(keep) - sp.log(flip), False: sp.log(flip) - sp.log(keep)}
        pb.check("a differing bit reported as b_j contributes ln(keep/flip) = L", sp.Eq(bit[True], L), "expand_log")
        pb.check(
            "a differing bit reported as 1 - b_j contributes ln(flip/keep) = -L", sp.Eq(bit[False], -L), "expand_log"
        )
        for a, b in itertools.product((True, False), repeat=2):
            v = (L if a else -L) + (L if b else -L)
            pb.check(
                f"[case bit x {'kept' if a else 'flipped'}, bit x' {'kept' if b else 'flipped'}] loss {v} <= 2L",
                sp.Le(v, 2 * L),
                "L >= 0",
            )
        pb.fact("the four cases are exhaustive", "each differing bit is kept or flipped")
        bound = 2 * L_val

    with pb.phase("implementation"):
        outs = _outputs(k)
        check_law(pb, mechanism, (0, 1), lambda x: outs, lambda x, y: model_pmf(k, L_val, x, y))

    with pb.phase("judge"):
        y = tuple(1 if j == 0 else 0 for j in range(k))
        p, q = model_pmf(k, L_val, 0, y), model_pmf(k, L_val, 1, y)
        w = judge_pure(
            pb,
            bound,
            p=p,
            q=q,
            data=0,
            neighbor=1,
            output=y,
            description="y = onehot(x): both differing bits reported truthfully, ratio e^{2L}",
        )
    return pb.finish(bound, witness=w)
