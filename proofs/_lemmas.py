"""The lemma library. Each lemma returns its obligations: the side conditions (discharged by the
kernel: sympy, z3, exact evaluation) followed by the conclusion, whose checker is ``"lemma"`` and
which is discharged only when every side condition is.

Derived lemmas (triangle inequality, log-sum-exp monotonicity, the Gaussian privacy profile and its
Rényi divergence) are proved here from the densities with symbols; cited theorems (composition,
conversion, group privacy, post-processing) are instantiated with their side conditions checked.

References: Dwork & Roth 2014 (The Algorithmic Foundations of DP) Thm 2.1 (post-processing),
Thm 2.2 (group privacy), Thm 3.16 (basic composition), Thm 3.20 (advanced composition);
Balle & Wang 2018 (Improving the Gaussian mechanism), Thm 8; Mironov 2017 (Rényi DP), Prop. 1
(composition), Prop. 3 (conversion)."""

from __future__ import annotations

import functools
from typing import Sequence

import sympy as sp

from dpharness.core import exact

from ._kernel import check_cases, discharge, ordering_cases, slack, sym
from ._model import Obligation

__all__ = [
    "conclude",
    "phi",
    "triangle_inequality",
    "l1_triangle",
    "logsumexp_monotone",
    "logsumexp_monotone_generic",
    "gaussian_profile",
    "gaussian_profile_expr",
    "gaussian_rdp",
    "sequential_composition",
    "advanced_composition",
    "renyi_composition",
    "rdp_to_dp",
    "post_processing",
    "group_privacy",
]


def _num(v):
    """Exact sympy value: sympy expressions as they are (Floats refused), numbers via ``exact``."""
    return exact(v)


def conclude(name: str, formula: sp.Basic, side: Sequence[Obligation], justification: str) -> list[Obligation]:
    """The side conditions followed by the conclusion (discharged iff every side condition is)."""
    side = list(side)
    ok = all(o.discharged for o in side)
    return side + [
        Obligation(
            f"{name}: conclusion",
            formula,
            justification,
            "lemma",
            ok,
            "" if ok else "a side condition is not discharged",
        )
    ]


def phi(z: sp.Expr) -> sp.Expr:
    """The standard normal CDF Φ(z) = (1 + erf(z/√2))/2."""
    return (1 + sp.erf(z / sp.sqrt(2))) / 2


# --------------------------------------------------------------------------- triangle inequality


@functools.lru_cache(maxsize=None)
def _triangle() -> tuple:
    y, x, x2 = sym("y"), sym("x"), sym("x'")
    f = sp.Le(sp.Abs(y - x2) - sp.Abs(y - x), sp.Abs(x - x2))
    obs = check_cases(
        "triangle inequality |y-x'| - |y-x| <= |x-x'|",
        f,
        ordering_cases([y, x, x2]),
        "substitute the ordering with slack variables; linear arithmetic",
    )
    # tightness: equality when y <= min(x, x')
    d1, d2 = slack("t1"), slack("t2")
    tight = sp.Eq((sp.Abs(y - x2) - sp.Abs(y - x)).subs({x: y + d1, x2: y + d1 + d2}), sp.Abs(d2))
    obs.append(discharge("triangle inequality is attained for y <= x <= x'", tight, "algebra"))
    return tuple(obs), f


def triangle_inequality() -> list[Obligation]:
    """|y − x'| − |y − x| ≤ |x − x'| for all reals, by the 6 orderings of (y, x, x') with slack
    substitution; attained when y ≤ min(x, x')."""
    obs, f = _triangle()
    return conclude("triangle inequality", f, obs, "case split on orderings (all cases discharged)")


@functools.lru_cache(maxsize=None)
def _l1(dim: int) -> tuple:
    ys = [sym(f"y{i}") for i in range(dim)]
    xs = [sym(f"x{i}") for i in range(dim)]
    x2s = [sym(f"x'{i}") for i in range(dim)]
    lhs = sum(sp.Abs(y - b) - sp.Abs(y - a) for y, a, b in zip(ys, xs, x2s))
    rhs = sum(sp.Abs(a - b) for a, b in zip(xs, x2s))
    f = sp.Le(lhs, rhs)
    side = list(triangle_inequality())
    # the sum of coordinate-wise instances; z3 double-checks the summed statement for small dim. sympy is
    # not tried on it: its simplifications leave a sum of |·| terms of free reals undecided (the reason the
    # 1-D lemma splits into orderings), at 0.1 s of a cold proof
    ob = discharge(
        f"L1 triangle inequality in dimension {dim}",
        f,
        f"sum of {dim} instances of the 1-D triangle inequality",
        use_z3=dim <= 8,
        use_sympy=False,
    )
    if not ob.discharged and side[-1].discharged:
        ob = Obligation(
            ob.statement,
            f,
            f"sum of {dim} instances of the 1-D triangle inequality",
            "lemma",
            True,
            "each summand bounded by the 1-D lemma; inequalities add",
        )
    return tuple(side + [ob]), f


def l1_triangle(dim: int) -> list[Obligation]:
    """Σ_i (|y_i − x'_i| − |y_i − x_i|) ≤ ||x − x'||_1 (coordinate-wise triangle inequality, summed)."""
    obs, f = _l1(int(dim))
    return conclude(f"L1 triangle inequality (dim {dim})", f, obs, "sum of coordinate-wise triangle inequalities")


# --------------------------------------------------------------------------- log-sum-exp monotonicity


def logsumexp_monotone(n: int, beta: sp.Expr | None = None, shift: sp.Expr | None = None) -> list[Obligation]:
    """If u'_r ≤ u_r + c for every r (c ≥ 0), then ln Σ_r e^{β u'_r} ≤ ln Σ_r e^{β u_r} + β c (β > 0).

    Slack form: u'_r = u_r + c − s_r with s_r ≥ 0. Term-wise: e^{β u'_r} = e^{βc} e^{β u_r} e^{−β s_r}
    and e^{−β s_r} ≤ 1 because −β s_r ≤ 0 (exp increasing); sum the n terms, take logs (increasing).
    ``beta``/``shift`` default to symbols."""
    b = beta if beta is not None else sym("beta", positive=True)
    c = shift if shift is not None else sym("c", nonnegative=True)
    us = [sym(f"u{r}") for r in range(n)]
    ss = [slack(f"s{r}") for r in range(n)]
    side = []
    for r in range(n):
        side.append(
            discharge(
                f"exponent of term {r}: β(u'_{r}) <= β(u_{r} + c)",
                sp.Le(b * (us[r] + c - ss[r]), b * (us[r] + c)),
                "slack s_r >= 0, β > 0",
            )
        )
    lhs = sp.log(sum(sp.exp(b * (u + c - s)) for u, s in zip(us, ss)))
    rhs = sp.log(sum(sp.exp(b * u) for u in us)) + b * c
    term_sum = sp.Le(
        sum(sp.exp(b * (u + c - s)) for u, s in zip(us, ss)), sp.exp(b * c) * sum(sp.exp(b * u) for u in us)
    )
    ob = discharge(f"sum of the {n} term-wise bounds", term_sum, "exp increasing; add the n inequalities")
    if not ob.discharged and all(o.discharged for o in side):
        ob = Obligation(
            ob.statement,
            term_sum,
            "exp increasing (each exponent bounded above); inequalities add",
            "lemma",
            True,
            "term-wise exponent bounds discharged above; " + ob.detail,
        )
    side.append(ob)
    return conclude("log-sum-exp monotonicity", sp.Le(lhs, rhs), side, "log increasing; ln(e^{βc} S) = βc + ln S")


def logsumexp_monotone_generic(beta: sp.Expr | None = None, shift: sp.Expr | None = None) -> list[Obligation]:
    """:func:`logsumexp_monotone` for ANY number of terms, argued on one generic term j (so the proof's
    size does not depend on the number of terms): if u'_j ≤ u_j + c for every j (c ≥ 0, β > 0), then
    ln Σ_j e^{β u'_j} ≤ ln Σ_j e^{β u_j} + β c.

    Generic term (slack form u'_j = u_j + c − s_j, s_j ≥ 0): e^{β u'_j} = e^{βc} e^{β u_j} e^{−β s_j}
    (sympy) and −β s_j ≤ 0 (sympy), so e^{−β s_j} ≤ 1 (exp increasing); a finite sum of term-wise
    inequalities adds, for every number of terms; then ln is increasing and ln(e^{βc} S) = βc + ln S."""
    b = beta if beta is not None else sym("beta", positive=True)
    c = shift if shift is not None else sym("c", nonnegative=True)
    u, s = sym("u_j"), slack("s_j")
    side = [
        discharge(
            "[generic term j] exponent: β u'_j <= β(u_j + c) where u'_j = u_j + c − s_j, s_j >= 0",
            sp.Le(b * (u + c - s), b * (u + c)),
            "slack s_j >= 0, β > 0",
        ),
        discharge(
            "[generic term j] e^{β u'_j} = e^{βc} e^{β u_j} e^{−β s_j}",
            sp.Eq(sp.exp(b * (u + c - s)), sp.exp(b * c) * sp.exp(b * u) * sp.exp(-b * s)),
            "algebra",
        ),
        discharge(
            "[generic term j] the factor's exponent −β s_j <= 0, so e^{−β s_j} <= 1",
            sp.Le(-b * s, 0),
            "β > 0, s_j >= 0; exp increasing",
        ),
    ]
    S, S2 = sym("S", positive=True), sym("S'", positive=True)
    side.append(
        Obligation(
            "sum over the terms, for any number of terms: S' = Σ_j e^{β u'_j} <= e^{βc} Σ_j e^{β u_j} = e^{βc} S",
            sp.Le(S2, sp.exp(b * c) * S),
            "each term bounded above (generic term j); finite sums of inequalities add",
            "lemma",
            all(o.discharged for o in side),
            "" if all(o.discharged for o in side) else "a term step failed",
        )
    )
    side.append(
        discharge(
            "ln(e^{βc} S) = βc + ln S",
            sp.Eq(sp.expand_log(sp.log(sp.exp(b * c) * S)), b * c + sp.log(S)),
            "expand_log (S > 0)",
        )
    )
    side.append(
        discharge(
            "ln is increasing: S' <= e^{βc} S implies ln S' <= ln(e^{βc} S)",
            sp.Le(sp.log(S2), sp.log(sp.exp(b * c) * S)),
            "log monotone (z3 with the log/exp facts)",
            hypotheses=[sp.Le(S2, sp.exp(b * c) * S)],
        )
    )
    return conclude(
        "log-sum-exp monotonicity (any number of terms)", sp.Le(sp.log(S2), sp.log(S) + b * c), side, "the steps above"
    )


# --------------------------------------------------------------------------- Gaussian

_SIGMA, _DELTA, _EPS = sym("sigma", positive=True), sym("Delta", positive=True), sym("epsilon", nonnegative=True)


def gaussian_profile_expr(sigma: sp.Expr = _SIGMA, delta_l2: sp.Expr = _DELTA, eps: sp.Expr = _EPS) -> sp.Expr:
    """Balle & Wang 2018 Thm 8: δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)."""
    return phi(delta_l2 / (2 * sigma) - eps * sigma / delta_l2) - sp.exp(eps) * phi(
        -delta_l2 / (2 * sigma) - eps * sigma / delta_l2
    )


@functools.lru_cache(maxsize=None)
def _gaussian_profile() -> tuple:
    y, t = sym("y"), sym("t")
    s, D, e = _SIGMA, _DELTA, _EPS
    logpdf = lambda m: -((y - m) ** 2) / (2 * s**2) - sp.log(s * sp.sqrt(2 * sp.pi))
    obs = []
    loss = sp.expand(logpdf(0) - logpdf(D))  # ln p_0(y) - ln p_Δ(y), log space
    obs.append(
        discharge(
            "privacy loss of N(0,σ²) vs N(Δ,σ²) at y is Δ(Δ − 2y)/(2σ²)",
            sp.Eq(loss, D * (D - 2 * y) / (2 * s**2)),
            "expand the log densities",
        )
    )
    obs.append(discharge("the loss is strictly decreasing in y", sp.Lt(sp.diff(loss, y), 0), "derivative −Δ/σ² < 0"))
    thr = D / 2 - e * s**2 / D
    obs.append(
        discharge(
            "loss(y) = ε exactly at y* = Δ/2 − εσ²/Δ, so {loss > ε} = {y < y*}",
            sp.Eq(loss.subs(y, thr), e),
            "substitution",
        )
    )
    pdf0 = sp.exp(-(y**2) / (2 * s**2)) / (s * sp.sqrt(2 * sp.pi))
    cdf0 = sp.integrate(pdf0, (y, -sp.oo, t))  # P_{N(0,σ²)}[Y < t]
    obs.append(discharge("P_{N(0,σ²)}[Y < t] = Φ(t/σ) (Gaussian integral)", sp.Eq(cdf0, phi(t / s)), "sympy integrate"))
    # P_{N(Δ,σ²)}[Y < t] = P_{N(0,σ²)}[Y < t − Δ] by the substitution y -> y + Δ (Jacobian 1)
    p_first = phi(thr / s)
    p_second = phi((thr - D) / s)
    derived = p_first - sp.exp(e) * p_second  # δ(ε) = P_0[loss > ε] − e^ε P_Δ[loss > ε]
    bw = gaussian_profile_expr()
    obs.append(
        discharge(
            "derived δ(ε) = P_0[L > ε] − e^ε P_Δ[L > ε] equals Balle & Wang 2018 Thm 8",
            sp.Eq(derived, bw),
            "translation y -> y + Δ for the second probability; algebra",
        )
    )
    dd = sp.diff(bw, D)
    obs.append(
        discharge(
            "δ(ε) is increasing in Δ (the worst pair has ||x − x'||₂ = Δ)",
            sp.Ge(dd, 0),
            "derivative in Δ simplifies to φ(Δ/(2σ) − εσ/Δ)/σ ≥ 0",
        )
    )
    return tuple(obs), bw


def gaussian_profile() -> list[Obligation]:
    """The exact (ε, δ) profile of the Gaussian mechanism, derived from the densities and checked
    to equal Balle & Wang 2018 Thm 8 symbolically. In dimension d the L2 sensitivity reduces the
    problem to one dimension by rotation invariance of N(0, σ² I); δ(ε) is increasing in Δ, so the
    sup over neighbours is at ||x − x'||₂ = Δ. The profile is necessary and sufficient:
    the mechanism is (ε, δ)-DP iff δ ≥ δ(ε) (B&W Thm 8 / Thm 5)."""
    obs, bw = _gaussian_profile()
    return conclude(
        "Gaussian privacy profile",
        sp.Eq(sym("delta_of_eps"), bw),
        obs,
        "δ(ε) = sup_S P_0(S) − e^ε P_Δ(S) attained at S = {loss > ε}",
    )


@functools.lru_cache(maxsize=None)
def _gaussian_rdp() -> tuple:
    y = sym("y")
    s, D = _SIGMA, _DELTA
    a = sym("alpha", positive=True)
    obs = []
    square = sp.expand(a * y**2 + (1 - a) * (y - D) ** 2 - ((y - (1 - a) * D) ** 2 + a * (1 - a) * D**2))
    obs.append(
        discharge(
            "complete the square: αy² + (1−α)(y−Δ)² = (y − (1−α)Δ)² + α(1−α)Δ²", sp.Eq(square, 0), "polynomial identity"
        )
    )
    m = sym("m")
    gauss = sp.integrate(sp.exp(-((y - m) ** 2) / (2 * s**2)), (y, -sp.oo, sp.oo))
    obs.append(
        discharge("∫ exp(−(y − m)²/(2σ²)) dy = σ√(2π)", sp.Eq(gauss, s * sp.sqrt(2 * sp.pi)), "Gaussian integral")
    )
    # ∫ p^α q^{1−α} = exp(−α(1−α)Δ²/(2σ²));  D_α = ln(...)/(α − 1)
    d_alpha = sp.log(sp.exp(-a * (1 - a) * D**2 / (2 * s**2))) / (a - 1)
    obs.append(
        discharge(
            "D_α(N(0,σ²) || N(Δ,σ²)) = αΔ²/(2σ²)",
            sp.Eq(d_alpha, a * D**2 / (2 * s**2)),
            "log of the integral over α − 1",
        )
    )
    return tuple(obs), a * D**2 / (2 * s**2)


def gaussian_rdp() -> tuple[list[Obligation], sp.Expr]:
    """Rényi divergence of order α between N(0,σ²) and N(Δ,σ²): αΔ²/(2σ²) (Mironov 2017, Prop. 7),
    derived by completing the square. Returns (obligations, expression in alpha, sigma, Delta)."""
    obs, expr = _gaussian_rdp()
    return conclude("Gaussian RDP", sp.Eq(sym("D_alpha"), expr), obs, "monotone in Δ; worst pair at Δ"), expr


# --------------------------------------------------------------------------- composition and friends


def sequential_composition(
    epsilons: Sequence[sp.Expr],
    deltas: Sequence[sp.Expr] | None = None,
    *,
    total_eps: sp.Expr | None = None,
    total_delta: sp.Expr | None = None,
) -> list[Obligation]:
    """Basic composition (Dwork & Roth Thm 3.16): k mechanisms with independent randomness, each
    (ε_i, δ_i)-DP, compose to (Σε_i, Σδ_i)-DP. Side conditions: ε_i ≥ 0, δ_i ≥ 0; when totals are
    given, Σε_i ≤ total_eps and Σδ_i ≤ total_delta."""
    eps = [_num(e) for e in epsilons]
    dels = [_num(d) for d in (deltas or [0] * len(eps))]
    side = [
        discharge(f"ε_{i} >= 0 and δ_{i} >= 0", sp.And(sp.Ge(e, 0), sp.Ge(d, 0)), "parameters")
        for i, (e, d) in enumerate(zip(eps, dels))
    ]
    s_eps, s_del = sp.Add(*eps), sp.Add(*dels)
    if total_eps is not None:
        side.append(discharge("Σ ε_i <= total ε", sp.Le(s_eps, _num(total_eps)), "algebra"))
    if total_delta is not None:
        side.append(discharge("Σ δ_i <= total δ", sp.Le(s_del, _num(total_delta)), "algebra"))
    return conclude(
        "sequential composition",
        sp.And(sp.Eq(sym("eps_total"), s_eps), sp.Eq(sym("delta_total"), s_del)),
        side,
        "Dwork & Roth 2014 Thm 3.16 (independent randomness)",
    )


def advanced_composition(
    k: int, eps: sp.Expr, delta: sp.Expr, delta_prime: sp.Expr
) -> tuple[list[Obligation], sp.Expr, sp.Expr]:
    """Advanced composition (Dwork & Roth Thm 3.20): k-fold adaptive composition of (ε, δ)-DP is
    (ε', kδ + δ')-DP with ε' = √(2k ln(1/δ')) ε + k ε (e^ε − 1). Returns (obligations, ε', δ_total)."""
    eps, delta, dp = _num(eps), _num(delta), _num(delta_prime)
    side = [
        discharge("ε >= 0", sp.Ge(eps, 0), "parameter"),
        discharge("δ >= 0", sp.Ge(delta, 0), "parameter"),
        discharge("0 < δ' < 1", sp.And(sp.Gt(dp, 0), sp.Lt(dp, 1)), "parameter"),
        discharge("k >= 1", sp.Ge(sp.Integer(k), 1), "parameter"),
    ]
    e_total = sp.sqrt(2 * k * sp.log(1 / dp)) * eps + k * eps * (sp.exp(eps) - 1)
    d_total = k * delta + dp
    obs = conclude(
        "advanced composition",
        sp.And(sp.Eq(sym("eps_total"), e_total), sp.Eq(sym("delta_total"), d_total)),
        side,
        "Dwork & Roth 2014 Thm 3.20",
    )
    return obs, e_total, d_total


def renyi_composition(alpha: sp.Expr, epsilons: Sequence[sp.Expr]) -> tuple[list[Obligation], sp.Expr]:
    """Rényi composition (Mironov 2017 Prop. 1): (α, ε_i)-RDP mechanisms compose to (α, Σε_i)-RDP."""
    alpha = _num(alpha)
    eps = [_num(e) for e in epsilons]
    side = [discharge("α > 1", sp.Gt(alpha, 1), "parameter")] + [
        discharge(f"ε_{i} >= 0", sp.Ge(e, 0), "parameter") for i, e in enumerate(eps)
    ]
    total = sp.Add(*eps)
    return conclude("Rényi composition", sp.Eq(sym("eps_total"), total), side, "Mironov 2017 Prop. 1"), total


def rdp_to_dp(alpha: sp.Expr, eps_rdp: sp.Expr, delta: sp.Expr) -> tuple[list[Obligation], sp.Expr]:
    """RDP -> (ε, δ)-DP (Mironov 2017 Prop. 3): (α, ε)-RDP implies (ε + ln(1/δ)/(α − 1), δ)-DP."""
    alpha, eps_rdp, delta = _num(alpha), _num(eps_rdp), _num(delta)
    side = [
        discharge("α > 1", sp.Gt(alpha, 1), "parameter"),
        discharge("0 < δ < 1", sp.And(sp.Gt(delta, 0), sp.Lt(delta, 1)), "parameter"),
        discharge("ε_RDP >= 0", sp.Ge(eps_rdp, 0), "parameter"),
    ]
    eps = eps_rdp + sp.log(1 / delta) / (alpha - 1)
    return conclude("RDP to (ε, δ)-DP", sp.Eq(sym("eps_dp"), eps), side, "Mironov 2017 Prop. 3"), eps


def post_processing(description: str) -> list[Obligation]:
    """Post-processing (Dwork & Roth Thm 2.1): a map of the output that does not touch the data keeps
    the guarantee. Side condition (recorded, structural): the map reads only the mechanism's output."""
    side = [
        Obligation(
            f"post-processing map reads only the released output: {description}",
            sp.true,
            "structural: the function's arguments are the noisy outputs",
            "lemma",
            True,
        )
    ]
    return conclude("post-processing", sp.true, side, "Dwork & Roth 2014 Thm 2.1")


def group_privacy(k: int, eps: sp.Expr, delta: sp.Expr = 0) -> tuple[list[Obligation], sp.Expr, sp.Expr]:
    """Group privacy (Dwork & Roth Thm 2.2 and its (ε, δ) form): inputs at distance k get
    (kε, k e^{(k−1)ε} δ). Returns (obligations, kε, k e^{(k−1)ε} δ)."""
    eps, delta = _num(eps), _num(delta)
    side = [discharge("k >= 1", sp.Ge(sp.Integer(k), 1), "parameter"), discharge("ε >= 0", sp.Ge(eps, 0), "parameter")]
    e_k, d_k = k * eps, k * sp.exp((k - 1) * eps) * delta
    return (
        conclude(
            "group privacy",
            sp.And(sp.Eq(sym("eps_k"), e_k), sp.Eq(sym("delta_k"), d_k)),
            side,
            "Dwork & Roth 2014 Thm 2.2 (chain of k neighbours)",
        ),
        e_k,
        d_k,
    )


# --------------------------------------------------------------------------- grid rounding


@functools.lru_cache(maxsize=None)
def _grid_rounding() -> tuple:
    u, v = sym("u"), sym("v")
    m, n, c = sp.Symbol("m", integer=True), sp.Symbol("n", integer=True), sp.Symbol("c", integer=True)
    hyps = [
        sp.Le(m, u + sp.Rational(1, 2)),
        sp.Lt(u + sp.Rational(1, 2), m + 1),
        sp.Le(n, v + sp.Rational(1, 2)),
        sp.Lt(v + sp.Rational(1, 2), n + 1),
        sp.Le(u - v, c),
        sp.Le(v - u, c),
    ]
    f = sp.And(sp.Le(m - n, c), sp.Le(n - m, c))
    obs = [
        discharge(
            "rounding half up: |floor(u + 1/2) - floor(v + 1/2)| <= c for every integer c >= |u - v| "
            "(so <= ceil(|u - v|))",
            f,
            "m = floor(u + 1/2), n = floor(v + 1/2) as integer constraints: m <= u + 1/2 <= v + c + 1/2 < n + c + 1 (z3)",
            hypotheses=hyps,
            use_sympy=False,  # true only under the hypotheses, which sympy does not take
        )
    ]
    # summing over coordinates: S = Σ ceil(d_i) < Σ (d_i + 1) <= K + n_coords  =>  S <= ceil(K) + n_coords - 1
    S, k = sp.Symbol("S", integer=True), sp.Symbol("n_coords", integer=True, positive=True)
    D, K = sym("D", nonnegative=True), sym("K", positive=True)
    hyps2 = [sp.Lt(S, D + k), sp.Le(D, K), sp.Lt(c - 1, K), sp.Le(K, c)]
    obs.append(
        discharge(
            "Σ_i ceil(d_i) <= ceil(K) + n - 1 when Σ_i d_i <= K (n coordinates)",
            sp.Le(S, c + k - 1),
            "ceil(d) < d + 1 summed over n coordinates; S and ceil(K) integers (z3)",
            hypotheses=hyps2,
            use_sympy=False,  # as above: true only under the hypotheses
        )
    )
    return tuple(obs)


def grid_rounding() -> list[Obligation]:
    """Snapping to the grid with floor(·/g + 1/2) moves an L1 distance Δ to at most
    (ceil(Δ/g) + dim − 1)·g: per coordinate |r(u) − r(v)| ≤ ceil(|u − v|) (monotone, shift-equivariant
    rounding), summed with Σ ceil(d_i) ≤ ceil(Σ d_i) + dim − 1."""
    obs = list(_grid_rounding())
    return conclude("grid rounding", sp.true, obs, "both steps discharged by z3 (integer/real linear arithmetic)")
