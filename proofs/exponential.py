"""Proof for the generic exponential mechanism (McSherry & Talwar 2007; Dwork & Roth 2014, Thm 3.10)
and its gallery twin without the 1/2.

P_u(r) = exp(β u_r) / Σ_j exp(β u_j) over n candidates, neighbours ||u − u'||_∞ <= Δ.
Derived: the privacy loss of every output is at most 2βΔ (score term βΔ + log-sum-exp
monotonicity βΔ; :mod:`dpharness.proofs._expmech`). The bound is the supremum: on
u = (0, g, ..., g), u' = (−Δ, g+Δ, ..., g+Δ) the loss of output 0 increases to 2βΔ as g -> ∞, so
when 2βΔ exceeds the claim a finite g gives a counterexample, confirmed by exact evaluation
(REFUTED)."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from dpharness.core import Event, RealInterval, Witness

from ._expmech import derive_bound, gap_for_loss, loss_closed_form
from ._kernel import ProofBuilder, exceeds, param
from ._model import Proof
from dpharness.mechanisms import exponential as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove"]


_LAW_CHECK_MAX = 16  # law() is checked at n' = min(n, 16) candidates: building it costs O(n²) sympy work


def _conformance(pb: ProofBuilder, m: _mechs.ExponentialMechanism, beta: sp.Expr, n: int) -> bool:
    """The mechanism's own law must be the modelled pmf exp(β u_r)/Σ exp(β u_j) (checked numerically
    at two utility vectors): a proof of a model the implementation does not follow proves nothing.
    For n > 16 the law of the same class at n' = 16 candidates is checked (the law's code is generic in
    the number of candidates; building it at n = 1000 takes minutes)."""
    rng = np.random.default_rng(0)
    ok = True
    if n > _LAW_CHECK_MAX:
        m, n = m.replace(n_candidates=_LAW_CHECK_MAX), _LAW_CHECK_MAX
    spec = m.input_spec
    lo = spec.domain.lo if isinstance(spec.domain, RealInterval) and math.isfinite(spec.domain.lo) else -3.0
    hi = spec.domain.hi if isinstance(spec.domain, RealInterval) and math.isfinite(spec.domain.hi) else 3.0
    for _ in range(2):
        u = np.round(rng.uniform(float(lo), float(hi), n), 3)
        law = m.law(u)
        got = law.log_prob(np.arange(n))
        s = float(beta) * u
        want = s - np.logaddexp.reduce(s)
        ok &= bool(np.allclose(got, want, atol=1e-9))
    pb.note(
        f"model conformance: the mechanism's law() at n = {n} candidates equals exp(β u_r)/Σ exp(β u_j) at 2 random "
        "utility vectors" + ("" if ok else " -- FAILED: the implementation does not follow the modelled pmf")
    )
    return ok


def _params(m: _mechs.ExponentialMechanism) -> tuple[sp.Expr, sp.Expr, int]:
    return param(m.beta), param(m.sensitivity), int(m.n_candidates)


@proves(_mechs.ExponentialMechanism, _mechs.ExponentialNoHalf)
def prove(m: _mechs.ExponentialMechanism) -> Proof:
    pb = ProofBuilder(m)
    beta, delta, n = _params(m)
    eps = param(m.claim.epsilon)
    pb.precondition(f"neighbour relation: utility vectors with ||u − u'||_∞ <= Δ = {delta} (BoundedChange linf)")
    pb.precondition(f"parameters: β = {beta} > 0, Δ = {delta} > 0, n = {n} candidates")
    pb.precondition(
        "numeric model: exact -- utilities and β read as the exact binary values the sampler uses; the "
        "sampler draws each index with its exact probability e^{βu_r}/Σ e^{βu} (sequential Bernoullis "
        "against interval enclosures with lazily refined uniform bits, dpharness.mechanisms._exact)"
    )
    pb.pseudocode("return r with probability exp(β u_r) / Σ_j exp(β u_j)")
    pb.postcondition("for every output r: ln P_u(r) − ln P_u'(r) <= 2βΔ")
    with pb.phase("conformance"):
        conform = _conformance(pb, m, beta, n)
        if not conform:
            from ._model import Obligation

            pb.add(
                [
                    Obligation(
                        "implementation follows the modelled pmf",
                        sp.false,
                        "numeric comparison of law()",
                        "exact",
                        False,
                        "law() differs from exp(β u_r)/Σ exp(β u_j)",
                    )
                ]
            )
    with pb.phase("derive"):
        bound = derive_bound(pb, beta, delta, n)
        pb.claim_bound(bound)
    witness = None
    with pb.phase("witness"):
        witness = _witness(pb, m, beta, delta, n, eps, bound)
    return pb.finish(bound, witness=witness)


def _witness(
    pb: ProofBuilder,
    m: _mechs.ExponentialMechanism,
    beta: sp.Expr,
    delta: sp.Expr,
    n: int,
    eps: sp.Expr,
    bound: sp.Expr,
) -> Witness | None:
    """Refute when 2βΔ > ε (a finite gap g exceeds ε: exact check); otherwise a near-tight witness."""
    spec = m.input_spec
    lo = spec.domain.lo if isinstance(spec.domain, RealInterval) else -math.inf
    hi = spec.domain.hi if isinstance(spec.domain, RealInterval) else math.inf
    fb, fd = float(beta), float(delta)
    g_need = gap_for_loss(fb, fd, n, float(eps))
    refuting = g_need is not None
    if g_need is not None:
        g = sp.Rational(math.ceil(max(g_need, 0.0) * 16) + 16, 16)  # a margin above the float estimate
    else:
        g = sp.Rational(math.ceil(2 / max(fb, 1e-9)))  # loss near 2βΔ with P(0) still observable (auditor)
    # shift the pair into the domain when it is bounded: u = c + (0, g, ...), u' = c + (−Δ, g+Δ, ...)
    span = float(g + 2 * delta)
    if math.isfinite(hi) and math.isfinite(lo) and span > hi - lo:
        g = sp.Rational(math.floor((hi - lo - 2 * fd) * 16), 16)
        if g < 0:
            return None
    c = sp.Rational(0)
    if math.isfinite(lo) and lo > -fd:
        c = sp.nsimplify(lo) + delta
    if math.isfinite(hi) and float(c + g + delta) > hi:
        c = sp.nsimplify(hi) - g - delta
    u = [c] + [c + g] * (n - 1)
    u2 = [c - delta] + [c + g + delta] * (n - 1)
    loss = loss_closed_form(beta, delta, n, g)
    data = np.array([float(x) for x in u])
    neighbor = np.array([float(x) for x in u2])
    if any(sp.Rational(float(x)) != x for x in u + u2):
        return None
    desc = f"output 0 on u = {data.tolist()} vs u' = {neighbor.tolist()}: loss = {sp.N(loss, 12)} (closed form {loss})"
    w = Witness(
        data=data, neighbor=neighbor, event=Event.point(0), output=0, loss=float(sp.N(loss, 30)), description=desc
    )
    if refuting and exceeds(loss, eps):
        pb.refute(w, desc + f" > claimed ε = {eps}")
    elif refuting:
        pb.note(f"2βΔ = {bound} > ε = {eps} but the candidate witness (gap {g}) was not confirmed exactly")
    else:
        pb.note(f"tightness: {desc}; the supremum 2βΔ is approached as the gap g grows")
    return w
