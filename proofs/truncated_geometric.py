"""Proof for the truncated (range-restricted) geometric mechanism (Ghosh, Roughgarden & Sundararajan
2009, "Universally utility-maximizing privacy mechanisms", STOC, §2.1).

Preconditions: a count x ∈ {0..n}; neighbours |x − x'| ≤ 1; α = e^{−L}, L = log_odds > 0.
Pseudocode: y = clamp(x + two-sided geometric(α), 0, n): the tails beyond 0 and n are folded onto
the end points.
  P(y|x) = (1−α)/(1+α) · α^{|y−x|}   for 0 < y < n,
  P(0|x) = α^{x}/(1+α),   P(n|x) = α^{n−x}/(1+α).
Postcondition: sup loss = L, attained at y = 0 for x = 0, x' = 1 (and in every interior y ≤ x)."""

from __future__ import annotations

import numpy as np
import sympy as sp

from dpharness.core import exact

from . import _lemmas as lemmas
from ._common import check_law, judge_pure
from ._kernel import ProofBuilder, bounded_by, sym
from ._model import Proof
from dpharness.mechanisms import truncated_geometric as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove", "model_pmf"]


def model_pmf(n: int, L, x: int, y: int) -> sp.Expr:
    a = sp.exp(-L)
    if y == 0:
        return a**x / (1 + a)
    if y == n:
        return a ** (n - x) / (1 + a)
    return (1 - a) / (1 + a) * a ** abs(y - x)


def _field(mechanism, *names):
    for nm in names:
        if hasattr(mechanism, nm):
            return getattr(mechanism, nm)
    raise AttributeError(f"{type(mechanism).__name__} has none of {names}")


@proves(_mechs.TruncatedGeometric)
def prove(mechanism) -> Proof:
    pb = ProofBuilder(mechanism)
    n = int(_field(mechanism, "n"))
    L_val = exact(_field(mechanism, "log_odds", "epsilon_noise"))
    pb.precondition(
        f"input: a count x in {{0..{n}}}; neighbours: |x - x'| <= 1 ({mechanism.input_spec.relation.describe()})"
    )
    pb.precondition(f"parameters: n = {n}, log_odds L = {L_val} (exact), α = e^(-L)")
    pb.precondition(
        "numeric model: exact -- the two-sided geometric noise is drawn by the exact sampler with scale 1/L, L read as the binary value the code uses"
    )
    pb.pseudocode("y = min(max(x + Z, 0), n), Z two-sided geometric with P(Z = k) ∝ α^|k|")
    pb.postcondition("sup over |x - x'| <= 1 and y of ln P(y|x) - ln P(y|x') <= L")

    with pb.phase("derive"):
        L = sym("L", positive=True)
        a = sp.exp(-L)
        y, x, x2 = sym("y"), sym("x"), sym("x'")
        interior = sp.log((1 - a) / (1 + a) * a ** sp.Abs(y - x)) - sp.log((1 - a) / (1 + a) * a ** sp.Abs(y - x2))
        pb.check(
            "interior y: ln P(y|x) - ln P(y|x') = L(|y - x'| - |y - x|) (normaliser cancels)",
            sp.Eq(sp.expand_log(interior, force=False), L * (sp.Abs(y - x2) - sp.Abs(y - x))),
            "expand_log, 0 < α < 1",
        )
        pb.add(lemmas.triangle_inequality())
        d, _ = bounded_by(1, "s")
        pb.check("with |x - x'| = 1 - s (s >= 0): L·|x - x'| <= L", sp.Le(L * d, L), "slack substitution, L > 0")
        pb.check(
            "y = 0: ln P(0|x) - ln P(0|x') = L(x' - x) <= L·|x - x'|",
            sp.Eq(sp.expand_log(sp.log(a**x / (1 + a)) - sp.log(a**x2 / (1 + a))), L * (x2 - x)),
            "expand_log",
        )
        pb.check(
            "y = n: ln P(n|x) - ln P(n|x') = L(x - x') <= L·|x - x'|",
            sp.Eq(sp.expand_log(sp.log(a ** (n - x) / (1 + a)) - sp.log(a ** (n - x2) / (1 + a))), L * (x - x2)),
            "expand_log",
        )
        pb.check(
            "a signed difference is at most its absolute value: L·v <= L·|v|",
            sp.Le(L * y, L * sp.Abs(y)),
            "|v| >= v, L > 0",
        )
        pb.fact("the cases y = 0, 0 < y < n, y = n are exhaustive", "the output range is {0..n}")
        for xv in sorted({0, n // 2, n}):
            total = sum(model_pmf(n, L_val, xv, yv) for yv in range(n + 1))
            pb.check(
                f"the pmf sums to 1 at x = {xv} (folded tails: geometric series)",
                sp.Eq(sp.simplify(total), 1),
                "exact algebra",
            )
        bound = L_val

    with pb.phase("implementation"):
        xs = sorted({0, 1, n // 2, n - 1, n})
        check_law(pb, mechanism, xs, lambda x: list(range(n + 1)), lambda x, y: model_pmf(n, L_val, int(x), int(y)))

    with pb.phase("judge"):
        p, q = model_pmf(n, L_val, 0, 0), model_pmf(n, L_val, 1, 0)
        w = judge_pure(
            pb,
            bound,
            p=p,
            q=q,
            data=np.array([0]),
            neighbor=np.array([1]),
            output=0,
            description="y = 0: P(0|0)/P(0|1) = 1/α = e^L",
        )
    return pb.finish(bound, witness=w)
