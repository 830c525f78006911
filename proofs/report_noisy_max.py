"""Proofs for report noisy max (Dwork & Roth 2014 §3.3) with Laplace and one-sided exponential
noise, by randomness alignment proved for EVERY number of candidates with a lemma on one generic pair
of candidates (:func:`dpharness.proofs._alignment.report_noisy_max_all_n`; Dwork & Roth 2014 Claim
3.9, Ding et al. 2019), cross-checked with z3 for the fixed number of candidates when k <= 8, and
refutations of the gallery variants that release the noisy maximum VALUE.

Index output: alignment ``η_i -> η_i + q_i − q'_i + Δ`` for the reported index i, others unchanged;
cost ``|q_i − q'_i + Δ|/b <= 2Δ/b`` (linf neighbours, scores may move in opposite directions).
The bound is the supremum: on q = (0, g, ..., g) vs q' = (−Δ, g+Δ, ..., g+Δ) the loss of index 0
tends to 2Δ/b (exactly 2Δ/b for exponential noise); both index laws have closed forms whose size does
not depend on k (:func:`equal_others_probability`), so a mutated claim is REFUTED exactly.

Value output, Laplace noise: V = max_i(q_i + η_i) is a post-processing of the Laplace mechanism on
the whole vector (L1 sensitivity kΔ), so kΔ/b is an upper bound; it is attained: with q = 0 and
q' = Δ·1, ``P_q(V <= t) = Π_i F(t − q_i) = 2^{−k} e^{kt/b}`` for t <= 0 and the ratio is
``e^{kΔ/b}`` exactly. Value output, exponential noise: the support [max q, ∞) moves with the data;
``P_{q'}(V < Δ) = 0 < P_q(V < Δ)``: no finite ε.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import sympy as sp

from dpharness.core import Event, Witness

from . import _alignment
from ._common import float_noise_gap
from ._kernel import ProofBuilder, confirm_violation, exceeds, param
from ._model import Obligation, Proof
from dpharness.mechanisms import report_noisy_max as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove", "pf_probability", "equal_others_probability"]

_Z3_CROSS_CHECK_MAX = 8  # the per-n z3 alignment check, a cross-check of the lemma, for k <= 8
_LAW_CHECK_MAX = 8  # the witness is cross-checked with law() of k' = min(k, 8) candidates (O(k²) quadrature)


def _common(pb: ProofBuilder, m: _mechs._NoisyMaxBase) -> tuple[sp.Expr, sp.Expr, int]:
    b, d, k = param(m.scale), param(m.sensitivity), int(m.n_candidates)
    pb.precondition(
        f"neighbour relation: score vectors with ||q − q'||_∞ <= Δ = {d} (BoundedChange linf; "
        "scores may move in opposite directions)"
    )
    pb.precondition(f"parameters: k = {k} candidates, noise scale b = {b} ({m.noise} noise), Δ = {d}")
    if isinstance(m, _mechs.ReportNoisyMaxExponential):
        pb.precondition(
            "numeric model: exact; the scores and b are read as the exact values of the code's numbers, and "
            "the sampler is permute-and-flip with exact acceptance probabilities (its law is derived below "
            "to be the argmax law this proof is about)"
        )
    else:
        pb.precondition(
            "numeric model: ideal reals (continuous noise; the float argmax ties/rounding of probability "
            "~2^-52 are not modelled)"
        )
    return b, d, k


def _permute_and_flip_is_the_argmax(pb: ProofBuilder) -> None:
    """The code of the exponential variant draws permute-and-flip; its law is argmax(q + Exp(mean b))
    (Ding, Kifer et al. 2021), derived here for every number of candidates."""
    pb.fact(
        "the sampler is permute-and-flip: the candidates in a uniformly random order, candidate r accepted with "
        "probability exactly p_r = exp((q_r − max q)/b), the first accepted output; so with m = k − 1, "
        "P_PF(i) = p_i Σ_{S ⊆ [k]∖{i}} P(exactly S precede i) Π_{j∈S} (1 − p_j), P(exactly S precede i) = "
        "|S|! (m − |S|)! / k!",
        "McKenna & Sheldon 2020, Algorithm 1, as executed by dpharness.mechanisms._exact.permute_and_flip "
        "(numpy's permuted: Fisher–Yates with unbiased bounded integers; each acceptance an exact Bernoulli); "
        "i sits at position |S| + 1 with S in any order before it and the rest after it",
    )
    pb.fact(
        "P[argmax(q + η) = i] = ∫ f_b(x − q_i) Π_{j≠i} F_b(x − q_j) dx = p_i ∫_0^1 Π_{j≠i} (1 − u p_j) du "
        "= p_i Σ_S Π_{j∈S} (1 − p_j) ∫_0^1 u^{|S|} (1 − u)^{m−|S|} du for η_j ~ Exp(mean b) i.i.d.",
        "the integrand vanishes below x = max q; substitute u = e^{−(x − max q)/b}, so F_b(x − q_j) = 1 − u p_j "
        "and f_b(x − q_i) dx = −p_i du; then expand each factor as (1 − u) + u (1 − p_j)",
    )
    integral, s, m = _beta_integral()
    pb.check(
        "∫_0^1 u^s (1 − u)^{m−s} du = s! (m − s)! / (m + 1)!, so the two sums agree term by term: the code's "
        "law is the argmax law the alignment is about, for every k",
        sp.Eq(integral, sp.factorial(s) * sp.factorial(m - s) / sp.factorial(m + 1)),
        "the Beta integral, evaluated by sympy for symbolic integers 0 <= s <= m",
        use_z3=False,
    )


@functools.cache
def _beta_integral() -> tuple[sp.Expr, sp.Symbol, sp.Symbol]:
    """``∫_0^1 u^s (1 − u)^{m−s} du`` as sympy evaluates it (about 0.8 s, once per process), in gammas."""
    u = sp.Symbol("u", positive=True)
    s, m = sp.symbols("s m", integer=True, nonnegative=True)
    # sympy gives a hypergeometric 2F1 at 1; Gauss's theorem (hyperexpand) writes it with gammas
    return sp.hyperexpand(sp.integrate(u**s * (1 - u) ** (m - s), (u, 0, 1))), s, m


@proves(
    _mechs.ReportNoisyMax,
    _mechs.ReportNoisyMaxExponential,
    _mechs.ReportNoisyMaxValueLaplace,
    _mechs.ReportNoisyMaxValueExponential,
)
def prove(m: _mechs._NoisyMaxBase) -> Proof:
    from dpharness.mechanisms.report_noisy_max import ReportNoisyMaxValueExponential, ReportNoisyMaxValueLaplace

    if isinstance(m, (ReportNoisyMaxValueLaplace, ReportNoisyMaxValueExponential)):
        return _prove_value(m)
    return _prove_index(m)


# --------------------------------------------------------------------------- index output


def pf_probability(q: list, b: sp.Expr, i: int) -> sp.Expr:
    """Exact P(argmax(q + E) = i), E_j ~ Exp(mean b) i.i.d. (permute-and-flip closed form):
    p_i Σ_{S ⊆ others} (−1)^{|S|} Π_{j∈S} p_j / (|S| + 1), p_j = exp((q_j − max q)/b)."""
    qmax = max(q)
    p = [sp.exp((qj - qmax) / b) for qj in q]
    others = [j for j in range(len(q)) if j != i]
    total = sp.Integer(0)
    for r in range(len(others) + 1):
        for S in itertools.combinations(others, r):
            total += (-1) ** r * sp.Mul(*[p[j] for j in S]) / (r + 1)
    return p[i] * total


def _prove_index(m: _mechs._NoisyMaxBase) -> Proof:
    pb = ProofBuilder(m)
    b, d, k = _common(pb, m)
    eps = param(m.claim.epsilon)
    noise = m.noise
    pb.pseudocode(f"η_i ~ {'Lap(0, b)' if noise == 'laplace' else 'Exp(mean b)'} i.i.d.; return argmax_i (q_i + η_i)")
    pb.postcondition("P[M(q) = i] <= e^{2Δ/b} P[M(q') = i] for every index i")
    with pb.phase("alignment (lemma over every n)"):
        lemma = _alignment.report_noisy_max_all_n(b, d, noise=noise)
        pb.add(lemma.obligations)
        pb.note(
            "randomness alignment proved for EVERY number of candidates by a lemma on one generic pair (output i, "
            f"other candidate j) with symbolic b, Δ; instantiated at k = {k}: 2Δ/b = {lemma.cost_bound}"
        )
    if k <= _Z3_CROSS_CHECK_MAX:
        with pb.phase("alignment cross-check (z3, fixed n)"):
            check = _alignment.report_noisy_max(k, b, d, eps, noise=noise)
            # the per-n claim comparison is made once below (claim_bound)
            pb.add([o for o in check.obligations if "claimed ε covers" not in o.statement])
            pb.note(f"cross-check: the alignment also checked with z3 for the FIXED number of candidates n = {k}")
    bound = lemma.cost_bound
    with pb.phase("derive"):
        pb.claim_bound(bound)
    with pb.phase("witness"):
        w = _index_witness(pb, m, b, d, k, eps, bound)
    with pb.phase("numeric model"):
        if isinstance(m, _mechs.ReportNoisyMaxExponential):
            _permute_and_flip_is_the_argmax(pb)  # the code draws this law exactly
        else:
            pb.add([float_noise_gap(noise, m.scale)])  # the code's noise is numpy's, in doubles: not proved
    return pb.finish(bound, witness=w)


def index_probability(q: list, b: sp.Expr, noise: str) -> sp.Expr:
    """Exact P(argmax(q + η) = 0). Exponential noise: the permute-and-flip closed form. Laplace noise:
    ∫ f_b(x) Π_{j>0} F_b(x − (q_j − q_0)) dx, a 1-D integral of piecewise exponentials, in closed form
    (:func:`dpharness.proofs._svt_exact.pattern_probability` with every other candidate "below")."""
    if noise == "exponential":
        return pf_probability(q, b, 0)
    from fractions import Fraction

    from ._svt_exact import BOT, pattern_probability, to_sympy

    qf = [Fraction(int(sp.Rational(x).p), int(sp.Rational(x).q)) for x in q]
    rel = [qj - qf[0] for qj in qf[1:]]
    bf = Fraction(int(sp.Rational(b).p), int(sp.Rational(b).q))
    return to_sympy(pattern_probability(rel, [BOT] * len(rel), 0, bf, bf))


def equal_others_probability(k: int, gap: sp.Expr, b: sp.Expr, noise: str) -> sp.Expr:
    """Exact P(argmax(q + η) = 0) for q = (0, g, ..., g) (k candidates, the k − 1 others tied at gap
    g > 0), a closed form whose size does not depend on k. With m = k − 1:

    * exponential noise (permute-and-flip, p_0 = e^{−g/b}, p_j = 1): ``p_0 Σ_r C(m, r)(−1)^r/(r+1)
      = e^{−g/b}/k``;
    * Laplace noise: ``∫ f(x) F(x − g)^m dx`` split at 0 and g: ``e^{−mg/b}/(2^{m+1}(m+1))``
      (x < 0) + ``e^{−mg/b}(e^{(m−1)g/b} − 1)/(2^{m+1}(m−1))`` (0 < x < g; ``(g/b)e^{−g/b}/4`` for
      m = 1) + ``e^{−g/b}(1 − 2^{−(m+1)})/(m+1)`` (x > g, substituting w = e^{−(x−g)/b}/2)."""
    g, m = sp.sympify(gap), k - 1
    if noise == "exponential":
        return sp.exp(-g / b) / k
    two = sp.Integer(2) ** (m + 1)
    left = sp.exp(-m * g / b) / (two * (m + 1))
    middle = (
        (g / b) * sp.exp(-g / b) / 4 if m == 1 else sp.exp(-m * g / b) * (sp.exp((m - 1) * g / b) - 1) / (two * (m - 1))
    )
    right = sp.exp(-g / b) * (1 - 1 / two) / (m + 1)
    return left + middle + right


def _index_witness(
    pb: ProofBuilder, m: _mechs._NoisyMaxBase, b: sp.Expr, d: sp.Expr, k: int, eps: sp.Expr, bound: sp.Expr
) -> Witness | None:
    """q = (0, g, ..., g) vs q' = (−Δ, g+Δ, ..., g+Δ), output 0: the loss approaches 2Δ/b as g grows
    (for exponential noise it equals 2Δ/b exactly). Probabilities in closed form
    (:func:`equal_others_probability`, size independent of k), compared exactly."""
    if not b.is_Rational:
        pb.note("noise scale is not rational: no exact witness computed")
        return None
    fb = float(b)
    d = sp.Rational(math.floor(d * 2**20), 2**20)  # a dyadic Δ' <= Δ: the float data are exact
    refuting = float(bound) > float(eps)
    tries = (2, 4, 8, 16, 32) if refuting else (2,)  # g = 2b: loss near 2Δ/b with P(0) observable
    for g_try in tries:
        g = sp.Integer(math.ceil(g_try * fb))
        q = [sp.Integer(0)] + [g] * (k - 1)
        q2 = [-d] + [g + d] * (k - 1)
        loss = sp.log(equal_others_probability(k, g, b, m.noise)) - sp.log(
            equal_others_probability(k, g + 2 * d, b, m.noise)
        )
        if refuting and exceeds(loss, eps):
            break
    data = np.array([float(x) for x in q])
    neighbor = np.array([float(x) for x in q2])
    lf = float(sp.N(loss, 30))
    desc = f"output 0 on q = {data.tolist()} vs q' = {neighbor.tolist()}: loss = {lf:.6g} (exact closed form)"
    w = Witness(data, neighbor, Event.point(0), 0, lf, desc)
    # cross-check the closed form with the mechanism's own law (quadrature / Gauss-Legendre) at k' = min(k, 8)
    # candidates: law() evaluates all k' probabilities, O(k'^2); the closed form is generic in k
    kc = min(k, _LAW_CHECK_MAX)
    mc = m if kc == k else m.replace(n_candidates=kc)
    lc = (
        lf
        if kc == k
        else float(
            sp.N(
                sp.log(equal_others_probability(kc, g, b, m.noise))
                - sp.log(equal_others_probability(kc, g + 2 * d, b, m.noise)),
                30,
            )
        )
    )
    c1 = float(mc.law(data[:kc]).log_prob(np.array([0]))[0])
    c2 = float(mc.law(neighbor[:kc]).log_prob(np.array([0]))[0])
    agree = abs((c1 - c2) - lc) < 1e-6 * max(1.0, abs(lc))
    pb.note(
        f"witness cross-check with the mechanism's law at k' = {kc} candidates: loss ≈ {c1 - c2:.6g} vs closed "
        f"form {lc:.6g}" + ("" if agree else " -- DISAGREES")
    )
    if not agree:
        pb.add(
            [
                Obligation(
                    f"closed-form index probability agrees with the mechanism's law (k' = {kc})",
                    sp.false,
                    "numeric comparison",
                    "exact",
                    False,
                    f"{c1 - c2} vs {lc}",
                )
            ]
        )
    if refuting and exceeds(loss, eps):  # (loss <= 2Δ/b <= ε otherwise: no sign to decide near 0)
        pb.refute(w, desc + f" > ε = {eps}")
    else:
        pb.note("tightness: " + desc + f"; the supremum 2Δ/b = {bound} is approached as the gap grows")
    return w


# --------------------------------------------------------------------------- value output (gallery)


def _prove_value(m: _mechs._NoisyMaxBase) -> Proof:
    pb = ProofBuilder(m)
    b, d, k = _common(pb, m)
    eps = param(m.claim.epsilon)
    pb.pseudocode("return V = max_i (q_i + η_i) (the noisy maximum VALUE, not its index)")
    q = np.zeros(k)
    q2 = np.full(k, float(d))
    if m.noise == "laplace":
        with pb.phase("derive"):
            bound = k * d / b
            pb.add(
                [
                    Obligation(
                        f"V is a post-processing of (q_i + η_i)_i, the Laplace mechanism on k = {k} scores "
                        f"of L1 sensitivity kΔ: loss <= kΔ/b = {bound}",
                        sp.true,
                        "Laplace mechanism (L1 triangle inequality) + post-processing (Dwork & Roth Thm 2.1)",
                        "lemma",
                        True,
                    )
                ]
            )
            pb.claim_bound(bound)
        with pb.phase("witness"):
            t = sp.Integer(0)
            p = sp.Mul(*[sp.exp((t - 0) / b) / 2 for _ in range(k)])  # P_q(V <= 0), all factors in the left tail
            p2 = sp.Mul(*[sp.exp((t - d) / b) / 2 for _ in range(k)])  # P_q'(V <= 0)
            loss = sp.log(p) - sp.log(p2)
            desc = (
                f"event V <= 0 on q = {q.tolist()} vs q' = {q2.tolist()}: P = 2^-{k} e^(0) vs 2^-{k} e^(-{k}Δ/b), "
                f"loss = {sp.simplify(loss)} = {float(sp.N(loss, 20)):.6g}"
            )
            w = Witness(q, q2, Event.threshold(0.0, above=False), None, float(sp.N(loss, 30)), desc)
            if confirm_violation(p, p2, eps):
                pb.refute(w, desc + f" > ε = {eps}")
            else:
                pb.note("attaining witness (no violation): " + desc)
        return pb.finish(bound, witness=w)
    # exponential noise: the support moves with the data
    with pb.phase("derive"):
        pb.add(
            [
                Obligation(
                    "V >= max_i q_i surely (one-sided noise): the support [max q, ∞) depends on the data",
                    sp.true,
                    "η_i >= 0",
                    "lemma",
                    True,
                )
            ]
        )
        pb.add(
            [
                Obligation(
                    "a finite bound on the privacy loss",
                    sp.false,
                    "support differs between neighbours",
                    "exact",
                    False,
                    "P_q'(V < max q') = 0 while P_q(V < max q') > 0",
                )
            ]
        )
    with pb.phase("witness"):
        p = sp.Mul(*[1 - sp.exp(-(d - 0) / b) for _ in range(k)])  # P_q(V < Δ) = Π (1 − e^{−Δ/b})
        p2 = sp.Integer(0)  # V' >= Δ surely
        desc = (
            f"event V < {float(d)} on q = {q.tolist()} vs q' = {q2.tolist()}: P_q = (1 − e^(−Δ/b))^{k} = "
            f"{float(sp.N(p, 20)):.6g} > 0, P_q' = 0 (V' >= max q' = Δ)"
        )
        fd = float(d)
        w = Witness(q, q2, Event(lambda out: np.asarray(out) < fd, f"output < {fd}"), None, math.inf, desc)
        if confirm_violation(p, p2, eps):
            pb.refute(w, desc + "; loss = ∞")
    return pb.finish(sp.oo, witness=w)
