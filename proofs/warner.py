"""Proof for Warner's two-coin randomized response (Warner 1965).

Preconditions: one private bit x ∈ {0, 1}; neighbours 0 and 1 (local DP); t = p_truth, q = p_yes ∈ [0, 1].
Pseudocode: with probability t answer x; otherwise answer 1 with probability q.
Postcondition: sup loss = max(ln P(1|1)/P(1|0), ln P(0|0)/P(0|1)) (∞ when a denominator is 0)."""

from __future__ import annotations

import sympy as sp

from dpharness.core import exact

from ._common import check_law, judge_pure
from ._kernel import ProofBuilder, exact_sign, slack
from ._model import Proof
from dpharness.mechanisms import warner as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove", "model_pmf"]


def model_pmf(t, q, x, y) -> sp.Expr:
    p1 = t * x + (1 - t) * q
    return p1 if y == 1 else 1 - p1


@proves(_mechs.WarnerRR)
def prove(mechanism) -> Proof:
    pb = ProofBuilder(mechanism)
    t_val, q_val = exact(mechanism.p_truth), exact(mechanism.p_yes)
    pb.precondition("input: one private bit; neighbours: the records 0 and 1 (local DP)")
    pb.precondition(f"parameters: p_truth t = {t_val}, p_yes q = {q_val} (exact)")
    pb.precondition(
        "numeric model: exact -- p read as the binary value the code uses; the sampler lies with probability exactly 1 − p (dpharness.mechanisms._exact)"
    )
    pb.pseudocode("with probability t report x; otherwise report 1 with probability q, else 0")
    pb.postcondition("sup over (x, x', y) of ln P(y|x) - ln P(y|x') = max(ln P(1|1)/P(1|0), ln P(0|0)/P(0|1))")

    with pb.phase("derive"):
        # symbolic: P(1|1) - P(1|0) = t >= 0, so the losses towards y = 1 from x = 1, and towards
        # y = 0 from x = 0, are the non-negative ones; the other two are their negatives.
        t, q = slack("t"), slack("q")
        p11, p10 = model_pmf(t, q, 1, 1), model_pmf(t, q, 0, 1)
        pb.check("P(1|1) - P(1|0) = t >= 0", sp.Ge(p11 - p10, 0), "t >= 0")
        pb.check("P(0|0) - P(0|1) = t >= 0", sp.Ge((1 - p10) - (1 - p11), 0), "t >= 0")
        pb.fact(
            "the four (x, x', y) losses are ±A, ±B with A = ln P(1|1)/P(1|0), B = ln P(0|0)/P(0|1); sup = max(A, B)",
            "x' = 1 - x; ln(a/b) = -ln(b/a)",
        )
        probs = {(x, y): model_pmf(t_val, q_val, x, y) for x in (0, 1) for y in (0, 1)}
        cand = []  # (loss, data, neighbor, output)
        for y, x, x2 in ((1, 1, 0), (0, 0, 1)):
            p, qq = probs[(x, y)], probs[(x2, y)]
            if exact_sign(p) == 0:
                continue
            loss = sp.oo if exact_sign(qq) == 0 else sp.log(p / qq)
            cand.append((loss, x, x2, y, p, qq))
        best = cand[0]
        for c in cand[1:]:
            if c[0] is sp.oo or (best[0] is not sp.oo and exact_sign(c[0] - best[0]) == 1):
                best = c
        bound, x, x2, y, p, qq = best
        pb.evaluate("instantiate: the worst of the two non-negative losses", sp.Ge(bound, 0), "exact evaluation")

    with pb.phase("implementation"):
        check_law(pb, mechanism, (0, 1), lambda x: [0, 1], lambda x, y: model_pmf(t_val, q_val, x, y))

    with pb.phase("judge"):
        if bound is sp.oo:
            pb.note(f"P({y}|{x2}) = 0 while P({y}|{x}) > 0: the loss is infinite")
        w = judge_pure(
            pb,
            bound,
            p=p,
            q=qq,
            data=x,
            neighbor=x2,
            output=y,
            description=f"report {y}: P({y}|{x})/P({y}|{x2}) is the largest ratio",
        )
    return pb.finish(bound, witness=w)
