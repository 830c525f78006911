"""The proof of a mechanism declared from parts: the walk's account (:mod:`._walk`) judged against the
claim. The verdict compares the tightest accounting that applies with the claim (pure ε, zCDP/Rényi,
advanced composition, the exact discrete-Gaussian profile, the privacy-loss distribution). A pure-DP
claim whose derived bound is exceeded is REFUTED only with an exact counterexample evaluated on the
code's own law (and never through a post-processing step, which may discard information)."""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import sympy as sp

from dpharness.core import ApproxDP, BoundedChange, Event, PureDP, RenyiDP, Witness, exact
from dpharness.errors import ParameterError
from dpharness.mechanisms.parts import COMPOSITE_SEALED, Composite, PartsMechanism
from dpharness.mechanisms.parts._base import walk_nodes
from dpharness.mechanisms.parts._law import extreme_pairs, leaves
from dpharness.mechanisms.parts._structure import (
    has_post,
    user_code,
    has_sampling,
    input_distance,
    leaf_count,
    measurement_leaves,
)
from dpharness.mechanisms.parts.combinators import Parallel
from dpharness.mechanisms.parts.noise import GridLaplace
from dpharness.mechanisms.parts.sampling import FixedSample, PoissonSample
from dpharness.proof_registry import patched_code, proves

from .. import _account as A
from .. import _lemmas as lemmas
from .._kernel import ProofBuilder, confirm_violation, exact_sign, exceeds, sym
from .._model import Obligation, Proof, unproven
from . import grouping
from ._walk import _F, Profile, _Walk


def _zcdp_log_delta(rho: sp.Expr, eps: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """(ln δ, α): ρ-zCDP gives (ε, δ)-DP with δ = e^{(α−1)(αρ − ε)}/(α−1) · (1 − 1/α)^α for every α > 1
    (Canonne, Kamath & Steinke 2020, Prop. 12). α is chosen numerically and rounded to a simple
    rational (any α > 1 is valid); ln δ at that α is an exact closed form."""
    r, e = float(rho), float(eps)
    best = (math.inf, 2.0)
    for a in np.concatenate([np.linspace(1.0001, 3, 300), np.geomspace(3, 1e9, 600)]).tolist():
        val = (a - 1) * (a * r - e) - math.log(a - 1) + a * math.log1p(-1 / a)  # Python floats: inf, no warning
        if val < best[0]:
            best = (val, float(a))
    alpha = sp.Rational(Fraction(best[1]).limit_denominator(64))
    if alpha <= 1:
        alpha = sp.Rational(65, 64)
    log_delta = (alpha - 1) * (alpha * rho - eps) - sp.log(alpha - 1) + alpha * sp.log(1 - 1 / alpha)
    return log_delta, alpha


def _exp_up(log_value: sp.Expr) -> float:
    """A float at or above e^{log_value}, evaluated in log space (mpmath at 40 digits, then one float step
    up): never sympy's exp of a closed form, which expands powers of huge rationals (minutes for ε = 10^6);
    a value below the smallest subnormal is reported as that subnormal, above the largest double as ∞."""
    import mpmath

    with mpmath.workdps(40):
        x = mpmath.exp(mpmath.mpf(str(sp.N(log_value, 40))))
        f = float(x)
        return f if f == math.inf or mpmath.mpf(f) >= x else math.nextafter(f, math.inf)


def _dg_delta_bounds(eps: sp.Expr, d: int, tau2: Fraction) -> tuple[float, float]:
    """Rigorous [lo, hi] around δ(ε) = P[Y > a1] − e^ε P[Y > a2], a1 = ετ²/d − d/2, a2 = ετ²/d + d/2,
    Y ~ N_Z(0, τ²), from sum–integral comparisons (valid when τ√(2π) > 1). Evaluated with mpmath at
    60 digits; the endpoints are widened by 1e-40 (relative) and 1e-300 (absolute) in the safe direction."""
    import mpmath

    with mpmath.workdps(60):
        t2 = mpmath.mpf(tau2.numerator) / tau2.denominator
        tau = mpmath.sqrt(t2)
        c = tau * mpmath.sqrt(2 * mpmath.pi)
        if c <= 2:  # the comparison bounds on Z need τ√(2π) > 1; too loose below 2 to be useful
            return 0.0, 1.0
        z_lo, z_hi = c - 1, c + 1
        tail = lambda x: c * mpmath.erfc(x / (tau * mpmath.sqrt(2))) / 2  # ∫_x^∞ f = τ√(2π) Φ̄(x/τ)

        def s_bounds(m: int) -> tuple:
            """Bounds on P[Y >= m]."""
            if m >= 1:
                return tail(m) / z_hi, tail(m - 1) / z_lo
            lo_c, hi_c = s_bounds(1 - m)  # P[Y >= m] = 1 − P[Y <= m − 1] = 1 − P[Y >= 1 − m]
            return 1 - hi_c, 1 - lo_c

        e = mpmath.mpf(str(sp.N(eps, 70)))
        dd = mpmath.mpf(d)
        a1 = e * t2 / dd - dd / 2
        a2 = e * t2 / dd + dd / 2
        m1 = int(mpmath.floor(a1)) + 1
        m2 = int(mpmath.floor(a2)) + 1
        s1, s2 = s_bounds(m1), s_bounds(m2)
        ee = mpmath.exp(e)
        lo = s1[0] - ee * s2[1]
        hi = s1[1] - ee * s2[0]
        widen = mpmath.mpf(10) ** -40
        return float(lo - abs(lo) * widen - mpmath.mpf(10) ** -300), float(
            hi + abs(hi) * widen + mpmath.mpf(10) ** -300
        ) * (1 + 2**-50)


_MAX_ENCLOSURE_TAU2 = 10**6


_MAX_ENCLOSURE_SHIFT = 10**4  # and it sums ~ d terms for a shift of d grid steps


def _judge(pb: ProofBuilder, prof: Profile, m: PartsMechanism | None = None) -> tuple[sp.Expr | None, float | None]:
    claim = pb.claim
    if prof.delta != 0:  # an (ε, δ) part (partition selection): basic composition with its exact δ
        pb.route = ROUTE_PARTITION
        return grouping.judge(pb, prof, m)
    if isinstance(claim, PureDP):
        pb.route = ROUTE_PURE
        if prof.eps is None:
            pb.add(
                [
                    Obligation(
                        "pure ε-DP: every noise is pure DP",
                        sp.false,
                        "a Gaussian measurement is not pure DP",
                        "lemma",
                        False,
                        "not pure DP",
                    )
                ]
            )
            return None, None
        pb.claim_bound(prof.eps)
        return prof.eps, None
    if isinstance(claim, RenyiDP):
        alpha, eps_c = exact(claim.alpha), exact(claim.epsilon)
        bound = alpha * prof.rho
        if prof.eps is not None:
            bound = sp.Min(bound, prof.eps)
        pb.fact(
            f"Rényi DP of order α = {alpha}: ρ-zCDP gives D_α <= αρ; pure ε-DP gives D_α <= ε",
            "Bun & Steinke 2016 Def. 1.1; D_α <= D_∞",
        )
        pb.route = ROUTE_RENYI
        pb.claim_bound(bound, eps_c, what="Rényi ε")
        return bound, None
    eps_c, delta_c = exact(claim.epsilon), exact(claim.delta)
    # (a) pure
    if prof.eps is not None and not exceeds(prof.eps, eps_c):
        pb.note("pure DP with the derived ε implies (ε, δ)-DP for every δ >= 0")
        pb.route = ROUTE_PURE
        pb.claim_bound(prof.eps)
        return prof.eps, 0.0
    # (a'') a single k-ary randomized response (Warner: k = 2): its exact profile, the same for every pair
    if prof.rr_1d is not None and m is not None:
        pb.route = ROUTE_RR
        return _rr_profile(pb, m, prof, eps_c, delta_c)
    # (a') a single scalar grid Laplace: the exact profile of its dominating pair
    if prof.laplace_1d is not None and m is not None:
        pb.route = ROUTE_LAPLACE
        return _laplace_profile(pb, m, prof, eps_c, delta_c)
    # (b) a single scalar discrete Gaussian: its exact (ε, δ) profile (CKS 2020 Thm 7), evaluated by
    # interval arithmetic for small τ² and by sum-integral comparison bounds for large τ²
    if prof.gaussian_1d is not None:
        tau2, d_units = prof.gaussian_1d
        if tau2 <= _MAX_ENCLOSURE_TAU2 and d_units <= _MAX_ENCLOSURE_SHIFT:
            from ..discrete_gaussian import delta_enclosure

            lo, hi, _ = delta_enclosure(eps_c, d_units, tau2)
            how = "truncated sum plus geometric tail bound in interval arithmetic (mpmath.iv)"
        else:
            lo, hi = _dg_delta_bounds(eps_c, d_units, tau2)
            how = (
                "sum–integral comparison: for f(y) = e^{−y²/(2τ²)} decreasing on [0, ∞), ∫_m^∞ f <= Σ_{y>=m} f(y) "
                "<= ∫_{m−1}^∞ f (m >= 1) and τ√(2π) − 1 <= Z <= τ√(2π) + 1; tails by erfc at 60 digits, "
                "rounded outward"
            )
        claimed = Fraction(int(delta_c.p), int(delta_c.q)) if delta_c.is_Rational else Fraction(float(delta_c))
        ok = Fraction(hi) <= claimed
        pb.add(
            [
                Obligation(
                    f"δ(ε = {eps_c}) of the discrete Gaussian (τ² = {float(tau2):.6g}) for a {d_units}-sensitive "
                    f"integer query: δ ∈ [{lo:.6g}, {hi:.6g}] <= claimed δ = {claim.delta}",
                    sp.Le(sym("delta_eps"), delta_c),
                    "δ = P[Y > ετ²/Δ − Δ/2] − e^ε P[Y > ετ²/Δ + Δ/2] for every Δ-sensitive integer query "
                    "(Canonne, Kamath & Steinke 2020, Thm 7); " + how,
                    "exact",
                    bool(ok),
                    f"bounds [{lo!r}, {hi!r}]",
                )
            ]
        )
        if ok:
            pb.route = ROUTE_GAUSSIAN
            return eps_c, hi
        if Fraction(lo) > claimed:
            pb.note(
                f"the exact profile's lower end δ(ε = {eps_c}) >= {lo:.6g} exceeds the claimed δ: no other accounting "
                "of this one measurement (zCDP, PLD: each an upper bound on the same δ(ε)) can prove the claim"
            )
            return _derived_at_claimed_delta(pb, prof, m, eps_c, delta_c)
    # (c) zCDP conversion, in log space
    log_delta, alpha = _zcdp_log_delta(prof.rho, eps_c)
    gap = sp.log(delta_c) - log_delta
    sign = exact_sign(gap)
    zc = Obligation(
        f"ρ-zCDP with ρ = {prof.rho} ⇒ (ε, δ)-DP at α = {alpha}: ln δ = (α−1)(αρ−ε) − ln(α−1) + α ln(1−1/α) "
        f"<= ln(claimed δ = {claim.delta})",
        sp.Le(log_delta, sp.log(delta_c), evaluate=False),
        "Canonne, Kamath & Steinke 2020 Prop. 12 (valid at every α > 1); exact evaluation",
        "exact",
        sign in (0, 1),
        f"sign of the gap: {sign}",
    )
    delta_value = _exp_up(log_delta)
    if zc.discharged:
        pb.add([zc])
        pb.route = ROUTE_ZCDP
        return eps_c, delta_value
    # (d) advanced composition over the account's units (every unit counted; ε₀ the largest)
    units = A.advanced_units(prof)
    if units is not None:
        k, e0 = units
        adv, e_tot, d_tot = lemmas.advanced_composition(k, e0, 0, delta_c)
        if not exceeds(e_tot, eps_c):
            pb.check(
                f"the structure is a composition of k = {k} units, each ε_i-DP with ε_i <= ε₀ = {e0}",
                sp.And(*[sp.Le(u, e0) for u in prof.units.distinct]),
                "the walk's account: every unit of every node",
            )
            pb.add(adv)
            pb.claim_bound(e_tot)
            pb.route = ROUTE_ADVANCED
            return e_tot, float(delta_c)
    # (e) privacy-loss distributions: the product of the leaves' worst pairs, composed with certified error
    pld = _pld_route(pb, prof, eps_c, delta_c, m)
    if pld is not None:
        pb.route = ROUTE_PLD
        return eps_c, pld
    pb.add([zc])
    return _derived_at_claimed_delta(pb, prof, m, eps_c, delta_c)


def _derived_at_claimed_delta(
    pb: ProofBuilder, prof: Profile, m: PartsMechanism | None, eps_c: sp.Expr, delta_c: sp.Expr
) -> tuple[sp.Expr | None, float | None]:
    """An (ε, δ) claim no route proves: what the accounting proves at the claim's own δ, the smallest
    ε over the routes (:func:`epsilon_at`) with its certified lower end where there is one,
    as the proof's (bound, delta_bound). Not the δ the zCDP conversion gives at the claimed ε, which
    exceeds 1 (a vacuous bound) far below the mechanism's ε. (None, None) when no route gives a finite ε."""
    delta = float(delta_c)
    if Fraction(delta) != (Fraction(int(delta_c.p), int(delta_c.q)) if delta_c.is_Rational else Fraction(delta)):
        delta = math.nextafter(delta, -math.inf)  # ε(δ) decreases in δ: a smaller δ is the safe side
    at = epsilon_at(prof, m, delta)
    if not math.isfinite(at.upper):
        return None, None
    pb.route = at.route
    pb.bound_lower = at.lower
    between = f"∈ [{at.lower:.6g}, {at.upper:.6g}]" if at.lower is not None else f"<= {at.upper:.6g}"
    pb.note(
        f"at the claimed δ = {delta:.6g} the accounting proves ε(δ) {between} ({at.route}"
        + (f"; the lower end attained on {at.pair}" if at.lower is not None and at.pair else "")
        + f"), above the claimed ε = {eps_c}"
    )
    return sp.Float(at.upper, 17), delta


# the accounting a bound rests on (Proof.route)
ROUTE_PURE = "pure ε"
ROUTE_RENYI = "Rényi (zCDP and pure ε)"
ROUTE_RR = "exact randomized-response profile"
ROUTE_LAPLACE = "exact Laplace profile"
ROUTE_GAUSSIAN = "exact discrete Gaussian profile"
ROUTE_ZCDP = "zCDP conversion"
ROUTE_ADVANCED = "advanced composition"
ROUTE_PLD = "PLD (privacy-loss distribution)"
ROUTE_PARTITION = "partition selection (basic composition with its exact δ)"

_MAX_PLD_LEAVES = 64

_MAX_WITNESS_LEAVES = 4096


_MAX_PLD_LOSS = 256


def _typical_loss(entry: tuple) -> float:
    """The scale of a leaf's privacy loss: D/t (Laplace), D²/(2τ²) + D/τ (Gaussian: the loss is normal
    with mean D²/(2τ²) and standard deviation D/τ), L (randomized response); a subsampled leaf's is at
    most its leaf's."""
    kind, a, b = entry[:3]
    if kind == "laplace":
        return float(Fraction(b) / Fraction(a))
    if kind == "gaussian":
        return float(Fraction(b) ** 2 / (2 * Fraction(a))) + b / math.sqrt(float(a))
    return float(sp.N(b))


_MAX_PLD_TOTAL = 10**8


@functools.lru_cache(maxsize=16)
def _leaf_pair(entry: tuple, pessimistic: bool, w: float | None = None):
    """The certified PLD pair of one leaf entry of the account on the loss grid of spacing ``w`` (None:
    the default), or None when none is built here. Cached: a deterministic function of the entry, and the
    pairs are never modified (the privacy profile and a report re-read the pairs a proof built)."""
    from .. import _pld, _pld_shift

    grid = {} if w is None else {"w": w}
    kind, a, b = entry[:3]
    if len(entry) == 4:
        return _pld_shift.shift_pair(kind, a, b, entry[3], pessimistic=pessimistic, **grid)
    if kind == "laplace":
        return _pld.discrete_laplace(a, b, pessimistic=pessimistic, **grid)
    if kind == "gaussian":
        return _pld.discrete_gaussian(a, b, pessimistic=pessimistic, **grid)
    return _pld.randomized_response(a, b, pessimistic=pessimistic, **grid)


def _composed(counted: dict, pessimistic: bool):
    """The composition of every leaf: each distinct leaf self-composed by squaring, then all composed.
    Cached (a deterministic function of the leaves and their counts, never modified): a proof, the
    headline of an unproven claim, the privacy profile and the accountant's answers read one composition."""
    return _composed_items(tuple(counted.items()), pessimistic)


_FINE_ABOVE = 1000  # more leaves than this: finer loss grids are tried too (:func:`_composed_items`)
_MAX_HALVINGS = 3
_FINE_BUCKETS = 2**17  # a finer grid only while every leaf's typical losses span at most this many buckets
_FINE_GAIN = 1e-3  # a finer grid is kept, and the next one tried, when it moves ε(1e-5) by this much


@functools.lru_cache(maxsize=8)
def _composed_items(items: tuple, pessimistic: bool):
    """:func:`_composed` of the leaves ``items`` ((entry, count) pairs). The grid's error grows with the
    number T of leaves (a loss rounded per leaf: about T·w; connected dots: about T·w²), so beyond 1 000
    leaves the grid is halved while the composition's ε(1e-5) improves by 0.1% (lower, or higher for a
    lower bound), at most 3 times and while every leaf's typical losses span at most 2^17 buckets. Each
    candidate is a certified bound on the same δ(ε), so the one kept is too, whichever it is."""
    from .. import _pld

    def on_grid(w: float | None):
        parts = []
        for entry, n in items:
            pair = _leaf_pair(entry, pessimistic, w)
            if pair is None:
                return None
            parts.append(_pld.self_compose(pair, n) if n > 1 else pair)
        return _pld.compose(parts)

    best = on_grid(None)
    if best is None or sum(n for _, n in items) <= _FINE_ABOVE:
        return best
    span = max(2 * _typical_loss(entry) for entry, _ in items) / _pld.DEFAULT_W  # buckets on the default grid
    score = best.epsilon(1e-5)
    for halvings in range(1, _MAX_HALVINGS + 1):
        if span * 2**halvings > _FINE_BUCKETS or not math.isfinite(score):
            break
        finer = on_grid(_pld.DEFAULT_W / 2**halvings)
        if finer is None:
            break
        got = finer.epsilon(1e-5)
        gain = (score - got) if pessimistic else (got - score)
        if not gain > _FINE_GAIN * abs(score):
            break
        best, score = finer, got
    return best


def _leaf_text(entry: tuple) -> str:
    kind, a, b = entry[:3]
    names = {
        "laplace": f"discrete Laplace t = {a}",
        "gaussian": f"discrete Gaussian τ² = {a}",
        "rr": f"randomized response k = {a}",
    }
    text = names[kind] + (f", shift {b}" if kind != "rr" else f", L = {b}")
    return text + (f", Poisson-subsampled at rate {entry[3]}" if len(entry) == 4 else "")


def _pld_leaves(prof: Profile) -> dict | None:
    """The PLD route's distinct leaf entries with their multiplicities, or None where the route does not
    apply (no PLD entries, too many leaves, or a leaf whose loss grid would be too large)."""
    if not prof.pld or len(prof.pld) > _MAX_PLD_TOTAL:
        return None
    counted = dict(prof.pld.counts)
    if len(counted) > _MAX_PLD_LEAVES or any(_typical_loss(e) > _MAX_PLD_LOSS for e in counted):
        return None
    return counted


def _lower_where_tight(counted: dict, upper: Any, eps_ref: float) -> Any:
    """The optimistic composition (the bracket's lower end). It rounds every loss down, losing up to w per
    leaf: computed only where that loss is at most 5% of ``eps_ref`` (the upper ε at the δ of interest)."""
    n = sum(counted.values())
    return _composed(counted, False) if n * upper.forward.w <= 0.05 * max(eps_ref, 0.1) else None


def certified_lower(m: Any, counted: dict, upper: Any, eps_ref: float) -> tuple[Any, str | None]:
    """The PLD's lower end as a lower bound on the mechanism itself: (the optimistic composition, the
    neighbouring pair that attains it) when one extreme pair moves every leaf by its worst shift at once
    (:func:`.._pld_witness.attaining_pair`), else (None, None). The lower end of the product of worst
    pairs bounds only that product; it bounds the mechanism's δ(ε) only on a pair whose law is it."""
    from .. import _pld_witness

    found = _pld_witness.attaining_pair(m, counted, shapes=("dataset", "vector"))
    if found is None:
        return None, None
    lower = _lower_where_tight(counted, upper, eps_ref)
    return (lower, _pld_witness.describe_pair(found)) if lower is not None else (None, None)


def _pld_route(
    pb: ProofBuilder, prof: Profile, eps_c: sp.Expr, delta_c: sp.Expr, m: PartsMechanism | None = None
) -> float | None:
    """δ(ε) of the composition by privacy-loss distributions (:mod:`._pld`, :mod:`._pld_shift`): each
    leaf's worst pair (centres 0 and D grid steps; the hockey-stick divergence of discrete Laplace,
    discrete Gaussian and randomized response grows with the shift; a Poisson-subsampled leaf's
    dominating pairs), their product dominating the composition (Zhu, Dong & Wang 2022, Thm 10),
    discretised pessimistically (losses rounded up, or split between neighbouring grid losses by
    connecting the dots) with every rounding, truncation and floating-point error bounded upward.
    Repeated leaves are self-composed by squaring. Adds the obligation and returns the certified δ when
    it is within the claim, else None (and a note with the bracket); a claim below the certified lower
    end is refuted when one neighbouring pair attains every leaf's worst pair (:mod:`.._pld_witness`)."""
    counted = _pld_leaves(prof)
    if counted is None:
        return None
    upper = _composed(counted, True)
    if upper is None:
        return None
    eps_f = float(eps_c)
    if (
        Fraction(eps_f) > Fraction(str(sp.N(eps_c, 40)))
        if not eps_c.is_Rational
        else Fraction(eps_f) > Fraction(int(eps_c.p), int(eps_c.q))
    ):
        eps_f = math.nextafter(eps_f, -math.inf)  # δ(ε) decreases in ε: a smaller ε is the safe side
    hi = upper.delta(eps_f)
    claimed = Fraction(int(delta_c.p), int(delta_c.q)) if delta_c.is_Rational else Fraction(float(delta_c))
    ok = Fraction(hi) <= claimed
    leaves_text = "; ".join(f"{n} × {_leaf_text(e)}" if n > 1 else _leaf_text(e) for e, n in counted.items())
    up_eps = upper.epsilon(float(delta_c))
    leaves_n = sum(counted.values())
    lower, pair = certified_lower(m, counted, upper, up_eps)
    lo_eps = lower.epsilon(float(delta_c)) if lower is not None else None
    if lo_eps is not None:
        bracket = f"ε(δ = {float(delta_c):.6g}) ∈ [{lo_eps:.6g}, {up_eps:.6g}] (the lower end attained on {pair})"
    elif pair is None:
        bracket = (
            f"ε(δ = {float(delta_c):.6g}) <= {up_eps:.6g} (no lower end: a lower end is stated only where one "
            "neighbouring pair is shown to move every leaf by its worst shift at once; none is here, and the product "
            "of worst pairs may be above the truth)"
        )
    else:
        bracket = (
            f"ε(δ = {float(delta_c):.6g}) <= {up_eps:.6g} (no certified lower end: rounding {leaves_n} leaves' "
            f"losses down would lose up to {leaves_n * upper.forward.w:.3g} nats)"
        )
    if not ok:
        between = f"∈ [{lower.delta(eps_f):.6g}, {hi:.6g}]" if lower is not None else f"<= {hi:.6g}"
        pb.note(
            f"PLD accounting (the product of the leaves' worst pairs: {leaves_text}): δ(ε = {eps_f:.6g}) "
            f"{between}, above the claimed δ = {float(delta_c):.6g}; the same accounting gives {bracket}"
        )
        if lower is not None and eps_c.is_Rational:
            from .. import _pld_witness

            _pld_witness.refute(pb, m, counted, lower, Fraction(int(eps_c.p), int(eps_c.q)), claimed)
        return None
    pb.add(
        [
            Obligation(
                f"privacy-loss distribution of the composition ({leaves_text}): δ(ε = {eps_f:.6g}) <= {hi:.6g} "
                f"<= claimed δ = {float(delta_c):.6g}; bracket {bracket}",
                sp.Le(sym("delta_pld"), delta_c),
                "each leaf's worst pair (centres 0 and D: the hockey-stick divergence of a log-concave integer "
                "noise grows with the shift; a Poisson-subsampled leaf's dominating pairs, Zhu, Dong & Wang 2022, "
                "Thm 11); the product of dominating pairs dominates the composition (Zhu, Dong & Wang 2022, "
                "Thm 10); pessimistic discretisation (losses rounded up, or split between the neighbouring grid "
                "losses by connecting the dots, Doroshenko et al. 2022), masses bounded above, tails moved to +∞, "
                "convolution error bounded in the 2-norm and added upward (dpharness.proofs._pld, ._pld_shift)",
                "numeric (certified upper bound)",
                True,
                f"δ upper bound {hi!r}",
            )
        ]
    )
    return hi


# --------------------------------------------------------------------------- the routes read at one δ
# (the headline of a claim not proved, and the accountant's answers, :mod:`.._answers`)


def _zcdp_epsilon(rho: sp.Expr, delta: float) -> float:
    """ε(δ) of ρ-zCDP: CKS 2020 Prop. 12 solved for ε, ε = αρ − (ln δ + ln(α − 1) − α ln(1 − 1/α))/(α − 1),
    valid at every α > 1: at the best α of the grid :func:`_zcdp_log_delta` searches, evaluated at 40
    digits and rounded up."""
    import mpmath

    r = float(rho)
    if r == 0:
        return 0.0
    ld = math.log(delta)
    best = (math.inf, 2.0)
    for a in np.concatenate([np.linspace(1.0001, 3, 300), np.geomspace(3, 1e9, 600)]).tolist():
        e = a * r - (ld + math.log(a - 1) - a * math.log1p(-1 / a)) / (a - 1)
        if e < best[0]:
            best = (e, a)
    with mpmath.workdps(40):
        a = mpmath.mpf(best[1])
        rr = mpmath.mpf(str(sp.N(rho, 40)))
        e = a * rr - (mpmath.log(mpmath.mpf(delta)) + mpmath.log(a - 1) - a * mpmath.log(1 - 1 / a)) / (a - 1)
        return max(0.0, math.nextafter(float(e), math.inf))


@dataclass(frozen=True)
class RouteValue:
    """One route's figure: ``upper`` (certified by that route; ∞ when none applies), ``lower`` (a
    certified lower end of the mechanism's true value, or None), ``route``, ``pair`` (the neighbouring
    pair attaining the lower end)."""

    upper: float
    lower: float | None
    route: str
    pair: str | None = None


def _float_up(x: Any) -> float:
    """A float at or above the real number ``x`` (a sympy expression or a number)."""
    e = sp.sympify(x)
    if e.is_Rational:
        f = float(e)
        return f if Fraction(f) >= Fraction(int(e.p), int(e.q)) else math.nextafter(f, math.inf)
    return math.nextafter(float(sp.N(e, 30)), math.inf)


def _finite_rho(prof: Any) -> float | None:
    try:
        rho = float(prof.rho)
    except (TypeError, ValueError):
        return None
    return rho if math.isfinite(rho) else None


def _pld_pair_of(
    prof: Any, m: Any, *, delta: float | None = None, epsilon: float | None = None
) -> tuple[Any, Any, str | None]:
    """(the certified upper PLD, the certified lower PLD or None, the pair attaining it) of the account;
    the lower end is sought where it is tight at ``delta`` (or at ``epsilon``), as :func:`_pld_route` does."""
    counted = _pld_leaves(prof)
    if counted is None:
        return None, None, None
    upper = _composed(counted, True)
    if upper is None:
        return None, None, None
    if m is None:
        return upper, None, None
    reference = upper.epsilon(delta) if delta is not None else float(epsilon if epsilon is not None else 1.0)
    lower, pair = certified_lower(m, counted, upper, reference if math.isfinite(reference) else 1.0)
    return upper, lower, pair


def epsilon_at(prof: Any, m: Any, delta: float, *, pld: bool = True) -> RouteValue:
    """The smallest ε the routes that read the account certify at ``delta`` (and the PLD's certified
    lower end, where one pair attains it): pure ε, the zCDP conversion, advanced composition, the PLD
    (``pld=False``: not built); for an account with an exact δ₀ (partition selection), its ε from δ₀ on.
    ∞ when no route applies."""
    options: list[tuple[float, str]] = []
    if prof.delta != 0:
        if prof.eps is not None and exact_sign(sp.Rational(Fraction(delta)) - prof.delta) in (0, 1):
            options.append((_float_up(prof.eps), ROUTE_PARTITION))
        best = min(options, default=(math.inf, "none"))
        return RouteValue(best[0], None, best[1])
    if prof.eps is not None:
        options.append((_float_up(prof.eps), ROUTE_PURE))
    lower = pair = None
    if delta > 0:
        rho = _finite_rho(prof)
        if rho is not None:
            options.append((_zcdp_epsilon(prof.rho, delta), ROUTE_ZCDP))
        units = A.advanced_units(prof)
        if units is not None:
            k, e0 = units
            _, e_tot, _ = lemmas.advanced_composition(k, e0, 0, sp.Rational(Fraction(delta)))
            options.append((_float_up(e_tot), ROUTE_ADVANCED))
        gaussian = _gaussian_epsilon(prof.gaussian_1d, delta) if prof.gaussian_1d is not None else math.inf
        if math.isfinite(gaussian):
            options.append((gaussian, ROUTE_GAUSSIAN))
        # one discrete Gaussian with its exact profile: its PLD is never tighter, and not built
        upper, low, pair = (
            _pld_pair_of(prof, m, delta=delta) if pld and not math.isfinite(gaussian) else (None, None, None)
        )
        if upper is not None:
            e_up = upper.epsilon(delta)  # certified, but not always the smallest the PLD certifies:
            if math.isfinite(e_up) and e_up > 0:  # the smallest float with a certified δ(ε) <= delta, by bisection
                e_up = _invert(upper.delta, delta, e_up)
            options.append((max(e_up, 0.0), ROUTE_PLD))
            if low is not None:
                lower = max(low.epsilon(delta), 0.0)
    best = min(options, default=(math.inf, "none"))
    if lower is not None and not lower > 0:
        lower = None  # ε >= 0 is no information
    if lower is not None:
        lower = min(lower, best[0])
    return RouteValue(best[0], lower, best[1], pair if lower is not None else None)


def _gaussian_epsilon(g1: tuple, delta: float) -> float:
    """A certified ε with δ(ε) <= ``delta`` for one discrete Gaussian (τ², shift D): the smallest on a float
    bisection of the rigorous upper end of δ(ε) (:func:`_dg_delta_bounds`, CKS 2020 Thm 7
    by sum–integral comparison); ∞ where those bounds do not apply (τ√(2π) <= 2)."""
    tau2, d = g1

    def delta_hi(e: float) -> float:
        return _dg_delta_bounds(sp.Rational(Fraction(e)), d, tau2)[1]

    if _dg_delta_bounds(sp.Integer(0), d, tau2) == (0.0, 1.0):  # τ√(2π) <= 2: no bounds
        return math.inf
    hi = 1.0
    while delta_hi(hi) > delta:
        hi *= 2
        if hi > 1e6:
            return math.inf
    return _invert(delta_hi, delta, hi, steps=64)


def _invert(delta_of: Callable[[float], float], delta: float, hi: float, steps: int = 200) -> float:
    """An ε in [0, hi] with delta_of(ε) <= delta (non-increasing), near the smallest, by float bisection
    (``hi`` must satisfy it)."""
    lo = 0.0
    if delta_of(0.0) <= delta:
        return 0.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if not lo < mid < hi:
            break
        if delta_of(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def _worst_pair(m: PartsMechanism) -> tuple[Any, Any, Any, sp.Expr] | None:
    """The extreme pair with the largest exact pointwise loss at the output y = the rounded centres on
    D, all noise grid Laplace: loss = Σ_j |c_j − c'_j| / t_j. None when the structure has other noise."""
    if any(not isinstance(x, GridLaplace) for x in measurement_leaves(m.steps)):
        return None
    best = None
    for d, d2 in extreme_pairs(m)[:64]:
        a, b = leaves(m, d), leaves(m, d2)
        loss = sp.Integer(0)
        for la, lb in zip(a, b):
            t = _F(la.measurement.t)
            loss += sp.Add(*[sp.Abs(ca - cb) for ca, cb in zip(la.centres, lb.centres)]) / t
        if best is None or exact_sign(loss - best[3]) == 1:
            y = [float(c * la.g) for la in a for c in la.centres]
            best = (d, d2, y, loss)
    return best


def _local_worst_pair(m: PartsMechanism) -> tuple[Any, Any, list, sp.Expr]:
    """Local randomizers on one record: the first pair (d, d') of records and the output y = every
    leaf's truthful report on d; loss = ln P_d(y) − ln P_d'(y) from the exact law ``law`` reads
    (each leaf's pmf ratio: e^L for randomized response, p/(1 − p) for Warner, ((1 − f/2)/(f/2))² for
    RAPPOR, whose one-hot bits differ in two places)."""
    d, d2 = extreme_pairs(m)[0]
    ratio = sp.Integer(1)
    y: list = []
    for a, b in zip(leaves(m, d), leaves(m, d2)):
        out = a.truthful_output()
        ratio = ratio * a.prob(out) / b.prob(out)
        y.extend(out)
    return d, d2, y, sp.log(sp.simplify(ratio))


@proves(Composite, sealed=COMPOSITE_SEALED)
def prove_composite(c: Composite) -> Proof:
    """A catalog class declared from parts: the proof of its declaration (the structure its sampler runs)."""
    return _prove(c, c.parts)


@proves(PartsMechanism)
def prove(m: PartsMechanism) -> Proof:
    return _prove(m, m)


def _structure_refusal(subject: Any, m: Any) -> str | None:
    """Why the structure the sampler will execute is not one the walk proves, re-checked at every proof
    (it may have been swapped in, or its classes patched, after construction), or None."""
    if type(m) is not PartsMechanism:
        return (
            f"the declaration is a {type(m).__qualname__}, not a dpharness.parts mechanism; the walk proves only "
            "structures dp.mechanism(...) builds"
        )
    if m.claim != subject.claim:
        return f"the declaration claims {m.claim.describe()}, the mechanism {subject.claim.describe()}; they must be one claim"
    try:
        m._check()
    except ParameterError as exc:
        return f"its structure is refused: {exc}"
    patched = patched_code(type(m), *{type(s) for s in walk_nodes(m.steps)})
    if patched is not None:
        return f"{patched} was replaced after its class statement ran (patched code); the family's lemma is about the code as defined"
    return None


def prove_at_distance(subject: Any, distance: int) -> Proof:
    """The proof of a parts mechanism (or a catalog class declared from parts) for neighbours at
    ``distance`` (k records added/removed or substituted)."""
    return _prove(subject, subject.parts if isinstance(subject, Composite) else subject, distance)


def _prove(subject: Any, m: PartsMechanism, distance: int = 1) -> Proof:
    refusal = _structure_refusal(subject, m)
    if refusal is not None:
        return unproven(subject, f"no proof: {refusal}")
    pb = ProofBuilder(subject)
    space = m.space
    d0 = input_distance(m.relation, space)
    pb.precondition(f"input: {m.input_spec.describe()}")
    if m.shape == "record":
        pb.precondition(
            f"input: one record, one of k = {len(space.record_categories)} categories; any two different records are "
            "neighbours (local DP)"
        )
        pb.precondition(
            "numeric model: each local randomizer samples its law exactly (randomized response lies with "
            "probability exactly (k − 1)/(e^L + k − 1), dpharness.mechanisms._exact.randomized_response; "
            "Warner lies and RAPPOR flips by _exact.bernoulli with the exact rationals 1 − p and f/2); "
            "parameters read as their exact binary values"
        )
    else:
        pb.precondition(
            "numeric model: records read as their exact binary values; aggregates computed exactly; each noise "
            "measurement rounds its input to its grid exactly and adds integer noise from an exact sampler "
            "(discrete Laplace / discrete Gaussian, Canonne, Kamath & Steinke 2020); the float released is a "
            "deterministic function of the exact grid value (post-processing)"
        )
    pb.pseudocode(m.steps.describe())
    if has_post(m.steps):
        pb.precondition(
            "every post-processing function is a pure function of the noisy outputs it receives (called once "
            "per run; no state kept between calls, no access to the data)"
        )
    ran = user_code(m.steps)
    if ran:
        pb.precondition(
            "user functions run on one record (an iteration's update: one run) at a time, as the proof reads "
            "them: " + "; ".join(ran)
        )
        pb.precondition(
            "every user function is a pure function of its arguments (no state kept between calls, no access to "
            "the data): running it on one row at a time keeps other rows out of its arguments, not out of state "
            "a Python function keeps (a global, a closure); compiled code that could keep any (numba.objmode, a "
            "foreign function) is refused"
        )
    walk = _Walk(pb)
    if isinstance(m.relation, BoundedChange):
        pb.fact(
            f"input distance: {d0.describe()} (from {m.relation.describe()} on vectors of {space.dim})",
            "norm inequalities: ||v||₂ <= ||v||₁, ||v||₁ <= √dim ||v||₂, ||v||₁ <= dim ||v||∞",
        )
    with pb.phase("derive"):
        prof = walk.walk("", m.steps, space, d0)
        assert isinstance(prof, Profile)  # a mechanism's steps are randomized: a profile, not (space, distance)
        if distance > 1:
            prof = _at_distance(pb, m, prof, distance)
    pb.postcondition(
        f"(ε, δ) = ({prof.eps}, {prof.delta})"
        if prof.delta != 0
        else f"ε = {prof.eps} (pure)"
        if prof.eps is not None
        else f"ρ = {prof.rho} (zCDP)"
    )
    with pb.phase("judge"):
        bound, delta_bound = _judge(pb, prof, m)
        witness = None
        local = m.shape == "record"
        # the noise perturbs a random subsample, or the pairs are k apart: no fixed distance-1 worst output here
        sampled = has_sampling(m.steps) or distance > 1
        # the witness routes list every leaf on a pair; a structure with more leaves is judged, not witnessed
        many = leaf_count(m.steps) > _MAX_WITNESS_LEAVES
        if many:
            pb.note(f"no witness sought: {leaf_count(m.steps)} noise leaves (more than {_MAX_WITNESS_LEAVES})")
        worst = None if sampled or many else (_local_worst_pair(m) if local else _worst_pair(m))
        if worst is not None:
            d, d2, y, loss = worst
            out = y[0] if len(y) == 1 else np.array(y)
            how = (
                "any two records: the loss at y = the truthful report on D (RAPPOR: its one-hot bits) is the sum of "
                "the leaves' ε"
                if local
                else "extreme neighbouring pair: the loss at y = the rounded centres on D is Σ |c − c'|/t"
            )
            witness = Witness(d, d2, None, None if has_post(m.steps) else out, float(sp.N(loss, 20)), how)
            if isinstance(m.claim, PureDP) and not has_post(m.steps):
                eps_c = exact(m.claim.epsilon)
                p, q = sp.Integer(1), sp.exp(-loss)
                if exceeds(loss, eps_c) and confirm_violation(p * 1, q, eps_c) and _on_exact_range(y):
                    law_name = "local randomizers'" if local else "discrete-Laplace"
                    pb.refute(
                        witness,
                        f"at y = {y}: ln P_D(y) − ln P_D'(y) = {loss} > ε = {eps_c} (exact, from the "
                        f"code's own {law_name} law)",
                    )
        elif (
            isinstance(m.claim, ApproxDP)
            and prof.gaussian_1d is not None
            and not has_post(m.steps)
            and not (sampled or many)
        ):
            witness = _gaussian_refutation(pb, m, prof)
        elif prof.eps is None and isinstance(m.claim, PureDP):
            pb.note("no refutation attempted: a Gaussian measurement is not pure DP (the claim is not provable)")
        if (
            isinstance(m.claim, PureDP)
            and has_post(m.steps)
            and prof.eps is not None
            and exceeds(prof.eps, exact(m.claim.epsilon))
        ):
            pb.note("the derived bound exceeds the claim; not refuted, since post-processing may discard information")
    if witness is None and pb.witness is None and distance == 1:
        d, d2 = extreme_pairs(m)[0]
        witness = Witness(d, d2, None, None, None, "extreme neighbouring pair (the largest stability of the structure)")
    return pb.finish(bound, witness=witness, delta_bound=delta_bound)


def _at_distance(pb: ProofBuilder, m: PartsMechanism, prof: Profile, k: int) -> Profile:
    if m.shape != "dataset":
        pb.add(
            [
                Obligation(
                    f"neighbours at distance {k}",
                    sp.false,
                    "a distance counts records of a data set; this "
                    "mechanism's input is one record or a vector (its relation already fixes how far apart "
                    "inputs are)",
                    "lemma",
                    False,
                    "distance applies to data sets only",
                )
            ]
        )
        return prof
    nodes = walk_nodes(m.steps)
    shifts = not any(isinstance(n, (Parallel, PoissonSample, FixedSample)) for n in nodes)
    out = A.group(prof, k, shifts)
    pb.precondition(
        f"neighbours at distance {k}: data sets that differ by {k} records ({m.relation.describe()} applied {k} times)"
    )
    pb.fact(
        f"group privacy at distance k = {k}: ε → kε = {out.eps}"
        if out.eps is not None
        else f"group privacy at distance k = {k}",
        f"Dwork & Roth 2014, Thm 2.2 (pure ε); Bun & Steinke 2016, Prop. 1.9 (ρ → k²ρ = {out.rho})",
    )
    if out.pld:
        pb.fact(
            f"PLD at distance {k}: each scalar leaf's centres move by at most {k} times their distance-1 bound (the "
            "triangle inequality along a path of neighbours): its worst pair is the shift by k·D",
            "the walk's stability bounds are per neighbouring pair; the hockey-stick divergence grows with the shift",
        )
    return out


def _gaussian_refutation(pb: ProofBuilder, m: PartsMechanism, prof: Profile) -> Witness | None:
    """For one scalar discrete Gaussian: on the extreme pair whose centres are d grid steps apart, the
    event S = {y on D's side beyond the loss threshold} has P_D(S) − e^ε P_D'(S) = δ(ε) exactly: the
    witness (for audits); when the rigorous lower bound on that δ exceeds the claimed δ, the claim is
    REFUTED with it."""
    from dpharness.core import Event

    assert prof.gaussian_1d is not None  # called only for a profile with one scalar discrete Gaussian
    tau2 = prof.gaussian_1d[0]
    eps_c, delta_c = exact(m.claim.epsilon), exact(m.claim.delta)
    for d, d2 in extreme_pairs(m)[:8]:
        (a,), (b,) = leaves(m, d), leaves(m, d2)
        c, c2 = a.centres[0], b.centres[0]
        shift = abs(c2 - c)
        if shift == 0:
            continue
        if tau2 <= _MAX_ENCLOSURE_TAU2 and shift <= _MAX_ENCLOSURE_SHIFT:
            from ..discrete_gaussian import delta_enclosure

            lo, _, _ = delta_enclosure(eps_c, shift, tau2)
        else:
            lo, _ = _dg_delta_bounds(eps_c, shift, tau2)
        violated = Fraction(lo) > Fraction(int(sp.Rational(delta_c).p), int(sp.Rational(delta_c).q))
        e_f = float(eps_c)
        m1 = math.floor(e_f * float(tau2) / shift - shift / 2) + 1
        g = float(a.g)
        if c2 > c:
            cut = (c - m1) * g
            event = Event.threshold(cut, above=False)
        else:
            cut = (c + m1) * g
            event = Event.threshold(cut, above=True)
        w = Witness(
            d,
            d2,
            event,
            None,
            None,
            f"the optimal event S = {event.description} for the pair with the largest "
            f"shift: P_D(S) − e^ε P_D'(S) = δ(ε) >= {lo:.6g}",
        )
        if violated:
            pb.refute(
                w,
                f"on this pair the optimal event {event.description} has P_D(S) − e^ε P_D'(S) = δ(ε) >= {lo:.6g} "
                f"> claimed δ = {m.claim.delta} (rigorous lower bound; CKS 2020 Thm 7 is exact for the pair)",
                delta_checked=True,
            )
        return w
    return None


def _rr_profile(
    pb: ProofBuilder, m: PartsMechanism, prof: Profile, eps_c: sp.Expr, delta_c: sp.Expr
) -> tuple[sp.Expr, float]:
    """(ε', δ) below the pure bound for one k-ary randomized response (Warner: k = 2, L = ln(p/(1 − p))):
    every pair of records has the same hockey-stick divergence, δ(ε') = (e^L − e^{ε'})/(e^L + k − 1)
    (:class:`._common.RandomizedResponseProfile`). REFUTED on the first pair of records with the event
    {y = the data's category} when δ(ε') exceeds the claimed δ (never through post-processing)."""
    from .._common import RandomizedResponseProfile

    assert prof.rr_1d is not None  # called for a profile with one randomized response
    k, L = prof.rr_1d
    d, d2 = extreme_pairs(m)[0]
    refutation = RandomizedResponseProfile(k, L).judge(pb, prof.eps, eps_c, delta_c, data=d, neighbor=d2)
    if refutation is not None:
        w, detail = refutation
        if has_post(m.steps):
            pb.note(
                "δ(ε) exceeds the claim before post-processing; not refuted, since post-processing may discard information"
            )
        else:
            w = Witness(
                d, d2, Event.point(d), d, w.loss, f"the truthful report y = {d!r} on data {d!r}, neighbour {d2!r}"
            )
            pb.refute(w, detail.replace("P(0|0) - e^ε P(0|1)", f"P({d}|{d}) - e^ε P({d}|{d2})"), delta_checked=True)
    delta = (sp.exp(L) - sp.exp(eps_c)) / (sp.exp(L) + k - 1)
    return eps_c, max(0.0, float(sp.N(delta, 20)))


def _laplace_profile(
    pb: ProofBuilder, m: PartsMechanism, prof: Profile, eps_c: sp.Expr, delta_c: sp.Expr
) -> tuple[sp.Expr, float]:
    """(ε', δ) below the pure bound for one scalar grid Laplace: δ(ε') of the dominating pair (centres K
    grid steps apart; monotone likelihood ratio and Neyman–Pearson, :class:`._common.LaplaceProfile`).
    REFUTED on the extreme pair whose centres are K steps apart when δ(ε') exceeds the claimed δ (never
    through post-processing, whose outputs the half-line event does not describe)."""
    from .._common import LaplaceProfile

    assert prof.laplace_1d is not None  # called for a profile with one grid Laplace
    K, scale, g = prof.laplace_1d
    best = None
    for d, d2 in extreme_pairs(m)[:64]:
        (a,), (b,) = leaves(m, d), leaves(m, d2)
        shift = b.centres[0] - a.centres[0]
        if best is None or abs(shift) > abs(best[2]):
            best = (d, d2, shift, a.centres[0])
    assert best is not None  # a scalar measurement has extreme pairs
    d, d2, shift, centre = best
    profile = LaplaceProfile(
        steps=K,
        scale=scale,
        g=g,
        centre=centre,
        direction=1 if shift >= 0 else -1,
        witness_steps=None if has_post(m.steps) else abs(shift),
    )
    refutation = profile.judge(pb, prof.eps, eps_c, delta_c, data=d, neighbor=d2)
    if refutation is not None:
        pb.refute(*refutation, delta_checked=True)
    return eps_c, float(sp.N(profile.delta(eps_c)[0], 20))


def _on_exact_range(y: list[float]) -> bool:
    return all(abs(v) < 2.0**52 for v in y)
