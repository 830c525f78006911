"""Privacy maps of the local randomizers (:mod:`dpharness.mechanisms.parts.local`) on one record
(``input="record"``, any two records neighbours): k-ary randomized response (the pmf ratio is e^L, 1 or
e^{−L}, symbolically in k and L), Warner's randomized response (binary randomized response with
L = ln(p/(1 − p))), RAPPOR's bit flipping (one-hot encodings differ in two bits, each a binary randomized
response: 2 ln((1 − f/2)/(f/2)); Erlingsson, Pihur & Korolova 2014), each proved once per family and
instantiated at the node's parameter, with the node's law (as the audit reads it) checked to be the
lemma's pmf."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import sympy as sp

from dpharness.mechanisms.parts._base import Distance, Space
from dpharness.mechanisms.parts._law import LocalLeaf
from dpharness.mechanisms.parts.local import LocalRandomizedResponse, LocalRandomizer, LocalRappor, LocalWarner

from .. import _account as A
from .._kernel import discharge, sym
from .._model import Obligation
from ._walk import _F, Profile, account


def _argued(statement: str, justification: str) -> Obligation:
    return Obligation(statement, sp.true, justification, "structural", True, "argued in the justification")


@functools.lru_cache(maxsize=None)
def _rr_family() -> tuple[Obligation, ...]:
    """k-ary randomized response, symbolically in k and L (k never enumerated): for x ≠ x' the pmf
    ratio P(y|x)/P(y|x') is e^L (y = x), e^{−L} (y = x') or 1 (otherwise), so ε = L."""
    K = sym("k", integer=True, positive=True)
    L = sym("L", nonnegative=True)
    Z = sp.exp(L) + K - 1
    p_true, p_other = sp.exp(L) / Z, 1 / Z
    obs = [
        discharge(
            "pmf: P(y = x) = e^L/Z and P(y = c) = 1/Z for each of the k − 1 other categories c, Z = e^L + k − 1; "
            "it sums to 1",
            sp.Eq(p_true + (K - 1) * p_other, 1),
            "algebra",
        ),
        discharge(
            "every category has positive probability (Z > 0), so every loss is finite",
            sp.And(sp.Gt(p_true, 0), sp.Gt(p_other, 0)),
            "e^L > 0 and k >= 1",
        ),
    ]
    for hyp, loss, value in (
        ("y = x, so y ≠ x'", sp.log(p_true) - sp.log(p_other), L),
        ("y = x', so y ≠ x", sp.log(p_other) - sp.log(p_true), -L),
        ("y ∉ {x, x'} (k >= 3)", sp.log(p_other) - sp.log(p_other), sp.Integer(0)),
    ):
        obs.append(
            discharge(
                f"[case {hyp}] ln P(y|x) − ln P(y|x') = {value} (Z cancels in log space)",
                sp.Eq(loss, value),
                "expand_log; Z > 0",
            )
        )
        obs.append(discharge(f"[case {hyp}] the loss {value} is <= L", sp.Le(value, L), "L >= 0"))
    obs.append(
        _argued(
            "the three cases are exhaustive for x ≠ x', so sup_y ln P(y|x) − ln P(y|x') = L (attained at y = x): "
            "ε = L, pure DP for any two records",
            "y = x, y = x', or neither (Kairouz, Oh & Viswanath 2014)",
        )
    )
    return tuple(obs)


@functools.lru_cache(maxsize=None)
def _warner_family() -> tuple[Obligation, ...]:
    """Warner's randomized response with truth probability p in (0, 1) is k-ary randomized response at
    k = 2 with L = ln(p/(1 − p)) (then ε = L; L >= 0 iff p >= 1/2, checked at each node)."""
    r = sym("r", positive=True)  # r = p/(1 − p) > 0 for p in (0, 1), and p = r/(1 + r)
    p = r / (1 + r)
    L = sp.log(r)
    return (
        discharge(
            "p ↦ r = p/(1 − p) is inverted by p = r/(1 + r): (r/(1 + r))/(1 − r/(1 + r)) = r",
            sp.Eq(p / (1 - p), r),
            "algebra",
        ),
        discharge(
            "with L = ln r = ln(p/(1 − p)): P(y = x) = p = e^L/(e^L + 2 − 1) and P(y ≠ x) = 1 − p = 1/(e^L + 2 − 1), "
            "the pmf of k-ary randomized response at k = 2",
            sp.And(sp.Eq(p, sp.exp(L) / (sp.exp(L) + 1)), sp.Eq(1 - p, 1 / (sp.exp(L) + 1))),
            "exp(ln r) = r, r > 0",
        ),
        _argued(
            "hence ε = L = ln(p/(1 − p)) by the k-ary randomized response lemma (its hypothesis L >= 0 is p >= 1/2)",
            "Warner 1965; the same law, so the same privacy loss",
        ),
    )


@functools.lru_cache(maxsize=None)
def _rappor_family() -> tuple[Obligation, ...]:
    """RAPPOR's permanent randomized response on a one-hot encoding (Erlingsson, Pihur & Korolova 2014,
    §3, with Bloom-filter size k and one hash): each bit flipped independently with probability f/2;
    with ℓ = ln((1 − f/2)/(f/2)), ε = 2ℓ (two bits differ between any two records)."""
    r = sym("r", positive=True)  # r = (2 − f)/f > 0 for f in (0, 2), and f = 2/(1 + r)
    f = 2 / (1 + r)
    ell = sym("ell", nonnegative=True)
    keep, flip = sp.exp(ell) / (1 + sp.exp(ell)), 1 / (1 + sp.exp(ell))
    obs = [
        discharge(
            "f ↦ r = (1 − f/2)/(f/2) = (2 − f)/f is inverted by f = 2/(1 + r)",
            sp.Eq((1 - f / 2) / (f / 2), r),
            "algebra",
        ),
        discharge(
            "with ℓ = ln r: a bit is flipped with probability f/2 = 1/(1 + e^ℓ) and kept with probability "
            "1 − f/2 = e^ℓ/(1 + e^ℓ)",
            sp.And(
                sp.Eq(f / 2, 1 / (1 + sp.exp(sp.log(r)))), sp.Eq(1 - f / 2, sp.exp(sp.log(r)) / (1 + sp.exp(sp.log(r))))
            ),
            "exp(ln r) = r, r > 0",
        ),
        discharge(
            "each bit's law sums to 1 and both outcomes have positive probability",
            sp.And(sp.Eq(keep + flip, 1), sp.Gt(keep, 0), sp.Gt(flip, 0)),
            "algebra; e^ℓ > 0",
        ),
        _argued(
            "independence: ln P(y|x) = Σ_j ln P(y_j | b_j), b = onehot(x)", "the sampler draws k independent flips"
        ),
        _argued(
            "onehot(x) and onehot(x') differ exactly in bits x and x' (x ≠ x'); the other k − 2 factors are equal "
            "and cancel in ln P(y|x) − ln P(y|x')",
            "one-hot encoding",
        ),
        discharge(
            "a differing bit reported as its value under x contributes ln(keep/flip) = ℓ",
            sp.Eq(sp.log(keep) - sp.log(flip), ell),
            "expand_log",
        ),
        discharge(
            "a differing bit reported as its value under x' contributes ln(flip/keep) = −ℓ",
            sp.Eq(sp.log(flip) - sp.log(keep), -ell),
            "expand_log",
        ),
    ]
    for a, b in itertools.product((True, False), repeat=2):
        v = (ell if a else -ell) + (ell if b else -ell)
        how = {True: "reported as under x", False: "reported as under x'"}
        obs.append(discharge(f"[case bit x {how[a]}, bit x' {how[b]}] loss {v} <= 2ℓ", sp.Le(v, 2 * ell), "ℓ >= 0"))
    obs.append(
        _argued(
            "the four cases are exhaustive, so sup_y ln P(y|x) − ln P(y|x') = 2ℓ (attained at y = onehot(x)): "
            "ε = 2ℓ = 2 ln((1 − f/2)/(f/2))",
            "Erlingsson, Pihur & Korolova 2014, Thm 1 (h = 1)",
        )
    )
    return tuple(obs)


def local(walk: Any, path: str, m: LocalRandomizer, space: Space) -> Profile:
    """A local randomizer on one record: its family's lemma, instantiated at the node's parameter,
    and the node's law (as ``law`` reads it) checked to be the lemma's pmf."""
    k = len(space.record_categories)
    truth, other = LocalLeaf(m, space.record_categories[0], space).probabilities()
    rr = None
    if isinstance(m, LocalRandomizedResponse):
        walk._family("k-ary randomized response", _rr_family())
        L = _F(m.L)
        model = (sp.exp(L) / (sp.exp(L) + k - 1), 1 / (sp.exp(L) + k - 1))
        eps, rr = L, (k, L)
        walk.evaluate(
            path,
            f"{m.describe()} on k = {k} categories: L = {L} >= 0, so ε = L = {eps}",
            sp.Ge(L, 0),
            "the family's privacy map (hypothesis L >= 0), exact arithmetic",
        )
    elif isinstance(m, LocalWarner):
        walk._family("k-ary randomized response", _rr_family())
        walk._family("Warner randomized response", _warner_family())
        p = _F(m.p_exact)
        model = (p, 1 - p)
        eps = sp.log(p / (1 - p))
        rr = (2, eps)
        walk.evaluate(
            path,
            f"{m.describe()}: binary randomized response with L = ln(p/(1 − p)) = {eps} >= 0 "
            f"(p = {p} >= 1/2), so ε = L",
            sp.Ge(eps, 0),
            "the family's reduction to k-ary randomized response at k = 2; exact evaluation",
        )
    else:
        walk._family("RAPPOR bit flipping", _rappor_family())
        assert isinstance(m, LocalRappor)  # the third family this map is registered for
        f = _F(m.f_exact)
        model = (1 - f / 2, f / 2)
        ell = sp.log((2 - f) / f)
        eps = 2 * ell
        walk.evaluate(
            path,
            f"{m.describe()} on k = {k} categories: per-bit log-odds ℓ = ln((1 − f/2)/(f/2)) = {ell} "
            f">= 0 (f = {f} <= 1), so ε = 2ℓ = {eps}",
            sp.Ge(ell, 0),
            "the family's privacy map (hypothesis ℓ >= 0); exact evaluation",
        )
    walk.evaluate(
        path,
        f"the node's law (as dpharness.mechanisms.parts._law reads it) is the lemma's pmf: "
        f"({truth}, {other}) per {'bit (kept, flipped)' if isinstance(m, LocalRappor) else 'report (truth, each other category)'}",
        sp.And(sp.Eq(truth, model[0]), sp.Eq(other, model[1])),
        "exact comparison",
    )
    return A.leaf(eps, eps**2 / 2, None if rr is None else ("rr", *rr), None if rr is None else (("rr", *rr),))


@account(LocalRandomizedResponse, LocalWarner, LocalRappor)
def _local(walk: Any, path: str, m: LocalRandomizer, space: Space, d: Distance) -> Profile:
    return local(walk, path, m, space)
