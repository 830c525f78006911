"""Proof for k-ary randomized response (Kairouz, Oh & Viswanath 2014; Warner 1965 for k = 2).

Preconditions: input one record x ∈ {0..k−1}; neighbours any x ≠ x' (local DP); k ≥ 2; L ≥ 0.
Pseudocode: report x w.p. e^L/(e^L + k − 1), else a uniform other category.
Postcondition: sup_{x≠x', y} ln P(y|x) − ln P(y|x') = L (attained at y = x)."""

from __future__ import annotations

import sympy as sp

from dpharness.core import exact

from ._common import check_law, judge_pure
from ._kernel import ProofBuilder, sym
from ._model import Proof
from dpharness.mechanisms import randomized_response as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove", "model_pmf"]


def model_pmf(k, L, x, y) -> sp.Expr:
    """P(y | x) of k-RR with log-odds L."""
    z = sp.exp(L) + k - 1
    return sp.exp(L) / z if y == x else 1 / z


@proves(_mechs.RandomizedResponse)
def prove(mechanism) -> Proof:
    pb = ProofBuilder(mechanism)
    k, L_val = int(mechanism.k), exact(mechanism.log_odds)
    pb.precondition(f"input: one record in {{0..{k - 1}}}; neighbours: any two different records (local DP)")
    pb.precondition(f"parameters: k = {k}, log_odds L = {L_val} (exact), L >= 0")
    pb.precondition(
        "numeric model: exact -- L read as the binary value the code uses; the sampler reports the truth with probability exactly e^L/(e^L+k-1) (dpharness.mechanisms._exact)"
    )
    pb.pseudocode("y = x with probability e^L/(e^L + k - 1); otherwise y uniform over the k - 1 other categories")
    pb.postcondition("sup over x != x' and y of ln P(y|x) - ln P(y|x') = L")

    with pb.phase("derive"):
        K = sym("k", integer=True, positive=True)
        L = sym("L", nonnegative=True)
        Z = sp.exp(L) + K - 1
        p_true, p_other = sp.exp(L) / Z, 1 / Z
        pb.check("the pmf sums to 1: e^L/Z + (k-1)/Z = 1", sp.Eq(p_true + (K - 1) * p_other, 1), "algebra")
        cases = [
            ("y = x (so y != x')", sp.log(p_true) - sp.log(p_other), L),
            ("y = x' (so y != x)", sp.log(p_other) - sp.log(p_true), -L),
            ("y not in {x, x'} (k >= 3)", sp.log(p_other) - sp.log(p_other), sp.Integer(0)),
        ]
        for hyp, loss, value in cases:
            pb.check(
                f"[case {hyp}] loss ln P(y|x) - ln P(y|x') = {value} (normaliser Z cancels in log space)",
                sp.Eq(loss, value),
                "expand_log; Z > 0",
            )
            pb.check(f"[case {hyp}] loss <= L", sp.Le(value, L), "L >= 0")
        pb.fact("the three cases are exhaustive for x != x'", "y = x, y = x', or neither")
        bound = L_val
        pb.check("instantiate: L >= 0", sp.Ge(L_val, 0), "parameter")

    with pb.phase("implementation"):
        # a bounded sample of (input, output) pairs covering every case of the derivation (y = x, y = x',
        # y elsewhere): the derivation is over a generic pair, so the law check need not enumerate k² pairs
        inputs = sorted({0, 1, k // 2, k - 1})
        check_law(
            pb,
            mechanism,
            inputs,
            lambda x: sorted({0, 1, x, (x + 1) % k, k // 2, k - 1}),
            lambda x, y: model_pmf(k, L_val, x, y),
        )

    with pb.phase("judge"):
        p, q = model_pmf(k, L_val, 0, 0), model_pmf(k, L_val, 1, 0)
        w = judge_pure(
            pb,
            bound,
            p=p,
            q=q,
            data=0,
            neighbor=1,
            output=0,
            description="the truthful report y = x: P(0|0)/P(0|1) = e^L",
        )
    return pb.finish(bound, witness=w)
