"""Shared derivation for exponential-mechanism proofs (the generic exponential mechanism and the
exponential-mechanism median): the privacy loss of output r on neighbours u, u' is

    L_r = ln P_u(r) - ln P_u'(r) = β(u_r − u'_r) + [ln Σ_j e^{β u'_j} − ln Σ_j e^{β u_j}]

(McSherry & Talwar 2007, Thm 6; Dwork & Roth 2014, Thm 3.10). With ``u'_r >= u_r − Δ`` the first
term is at most βΔ; with ``u'_j <= u_j + Δ`` log-sum-exp monotonicity bounds the second by βΔ.
Hence L_r <= 2βΔ, approached (not attained) as the other candidates' utilities grow."""

from __future__ import annotations

from typing import Any, Iterable, Protocol

import sympy as sp

from ._kernel import slack, sym
from ._lemmas import logsumexp_monotone_generic
from ._model import Obligation

__all__ = ["derive_bound", "loss_closed_form", "gap_for_loss"]


class _Derivation(Protocol):
    """What :func:`derive_bound` writes to: a ProofBuilder, or a collector of a family lemma's obligations."""

    def check(self, statement: str, formula: Any, justification: str, *, use_z3: bool = True) -> Obligation: ...

    def add(self, obligations: Iterable[Obligation]) -> list[Obligation]: ...

    def note(self, text: str) -> None: ...


def derive_bound(pb: _Derivation, beta: sp.Expr, delta: sp.Expr, n_terms: int | None) -> sp.Expr:
    """Add the obligations of L_r <= 2βΔ to ``pb`` (symbolic β, Δ, then instantiated) and return
    the instantiated bound. The log-sum-exp lemma is argued on one generic candidate
    (:func:`~dpharness.proofs._lemmas.logsumexp_monotone_generic`), so the obligations do not depend
    on the number of candidates; ``n_terms`` (None: an output space too large to count) is only reported."""
    b, d = sym("beta", positive=True), sym("Delta", positive=True)
    u, s = sym("u_r"), slack("s_r")
    # u'_r = u_r − Δ + s_r with s_r >= 0 (linf neighbours: u'_r >= u_r − Δ)
    pb.check(
        "score term: β(u_r − u'_r) <= βΔ where u'_r = u_r − Δ + s_r, s_r >= 0",
        sp.Le(b * (u - (u - d + s)), b * d),
        "linf sensitivity with slack variable; β > 0",
    )
    # one generic candidate j, whatever the number of candidates (the proof's size does not grow with it)
    pb.add(logsumexp_monotone_generic(b, d))
    if n_terms is not None:
        pb.note(
            f"log-sum-exp monotonicity argued on a generic candidate: holds for the n = {n_terms} candidates "
            "(and any other number)"
        )
    s2 = slack("s_lse")
    pb.check(
        "loss: β(u_r − u'_r) + (ln Z(u') − ln Z(u)) <= 2βΔ",
        sp.Le(b * (d - s) + (b * d - s2), 2 * b * d),
        "sum of the two bounds (slacks s_r, s_lse >= 0 for the gaps)",
    )
    bound = 2 * beta * delta
    pb.check(
        "instantiate 2βΔ with the mechanism's parameters",
        sp.Eq((2 * b * d).subs({b: beta, d: delta}), bound),
        "substitution",
        use_z3=False,
    )
    return bound


def loss_closed_form(beta: sp.Expr, delta: sp.Expr, n: int, gap: sp.Expr) -> sp.Expr:
    """Exact loss of output 0 on u = (0, g, ..., g), u' = (−Δ, g+Δ, ..., g+Δ) (n candidates):
    βΔ + ln((e^{−βΔ} + (n−1)e^{β(g+Δ)}) / (1 + (n−1)e^{βg})), increasing to 2βΔ as g -> ∞."""
    p = 1 / (1 + (n - 1) * sp.exp(beta * gap))
    p2 = sp.exp(-beta * delta) / (sp.exp(-beta * delta) + (n - 1) * sp.exp(beta * (gap + delta)))
    return sp.log(p) - sp.log(p2)


def gap_for_loss(beta: float, delta: float, n: int, target: float) -> float | None:
    """A utility gap g (float, to be made exact by the caller) at which the closed-form loss
    exceeds ``target``; None when 2βΔ <= target (no such g)."""
    import math

    if 2 * beta * delta <= target:
        return None
    # loss = βΔ + ln((a + A x)/(1 + x)) with x = (n−1)e^{βg}, a = e^{−βΔ}, A = e^{βΔ}; need
    # (a + A x)/(1 + x) > t = e^{target − βΔ}  <=>  x > (t − a)/(A − t)
    a, A = math.exp(-beta * delta), math.exp(beta * delta)
    t = math.exp(target - beta * delta)
    if t <= a:
        return 0.0
    x = (t - a) / (A - t)
    g = math.log(max(x, 1e-300) / (n - 1)) / beta
    return g
