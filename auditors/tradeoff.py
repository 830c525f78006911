"""Certified trade-off curves (f-DP) from an audit's counts, and the μ-GDP and ε bounds they imply.

Trade-off functions (Dong, Roth & Su 2022, "Gaussian differential privacy", JRSS-B, Def. 2.1): for
two output laws P and Q and a rejection rule φ (reject "the output came from P"), the type I error
is α_φ = E_P[φ] and the type II error β_φ = 1 − E_Q[φ]; the trade-off function is
T(P, Q)(α) = inf{β_φ : α_φ <= α}. A mechanism M is f-DP when T(M(D), M(D')) >= f for every
neighbouring pair (in both orders, the neighbour relation being symmetric). Every trade-off function
is convex, continuous, non-increasing and below 1 − α (DRS Prop. 2.2); these are the only
properties used here.

Which side is which. The auditor certifies each (event S, direction) with exact one-sided
Clopper-Pearson bounds (:mod:`.stats`): on its *numerator* side Pr[S] >= p1_lo, on its
*denominator* side Pr[S] <= p0_hi, each failing with probability at most ``level`` = α/(2m), m the
Bonferroni count of the audit. Read S as a rejection region with P = the denominator side's law
(the null) and Q = the numerator side's law (the alternative):

    α = P(S) <= p0_hi =: α_hi,      β = 1 − Q(S) <= 1 − p1_lo =: β_hi.

The test "reject on S" achieves (α, β), so T(P, Q)(α) <= β, and as T is non-increasing,
T(P, Q)(α_hi) <= T(P, Q)(α) <= β <= β_hi: each certified point (α_hi, β_hi) lies on or above the
true curve. Its complement test 1 − φ, for (Q, P), achieves type I error β and type II error α, so
T(Q, P)(β_hi) <= α_hi: the reflected point is certified for the other order of the same pair with no
further interval. These are the very intervals of the audit's ε bound (same counts, same levels), so
with probability >= the audit's confidence the ε bound and every point hold together: no new α is
spent. (The complement event S^c in the *same* order would need the opposite one-sided bounds,
which the audit did not pay for; it is not used.)

What follows from the points, for one pair and one order (every statement holds on the event that
all intervals hold):

* *Envelope.* With (0, 1) and (1, 0) (T(0) <= 1, T(1) = 0), the lower convex hull U of the points
  bounds T from above on [0, 1]: T <= U at each point, and convexity carries it to every chord.
  U is convex with U(1) = 0, hence non-increasing. :meth:`TradeoffBound.envelope`.
* *μ-GDP.* A μ-GDP mechanism has T >= G_μ, G_μ(α) = Φ(Φ^{-1}(1 − α) − μ) (DRS Def. 2.7). A point
  with β_hi < G_μ(α_hi) contradicts it; as G_μ(α) decreases in μ, that happens exactly for
  μ < μ_i = Φ^{-1}(1 − α_hi) − Φ^{-1}(β_hi). So μ_lb = max(0, max_i μ_i) is a certified lower
  bound on any μ for which M is μ-GDP. G_μ is convex, so lying below every point means lying below
  the whole envelope: the maximum over the points is exact, the hull adds nothing. μ_i is symmetric
  in (α, β), so the reflected points give the same value.
* *(ε, δ).* M is (ε, δ)-DP iff it is f_{ε,δ}-DP with f_{ε,δ}(α) = max(0, 1 − δ − e^ε α,
  e^{−ε}(1 − δ − α)) (DRS Prop. 2.5, after Wasserman & Zhou 2010 and Kairouz, Oh & Viswanath
  2015). A point below f_{ε,δ} needs ε < ln((1 − δ − β_hi)/α_hi) or ε < ln((1 − δ − α_hi)/β_hi).
  The first is the audit's own ln((p1_lo − δ)/p0_hi); the second is the complement event in the
  other direction, ln((P(S^c)_lo − δ)/Q(S^c)_hi), certified by the same intervals. Their maximum is
  :attr:`TradeoffBound.epsilon`, >= the audit's ε bound at the same δ.

Curves to compare with (:func:`epsilon_delta_curve`, :func:`gaussian_curve`, :func:`laplace_curve`,
:func:`discrete_laplace_curve`): a certified point *below* a claimed curve certifies that the claim
is false; a true curve never has a certified point below it except with probability <= 1 −
confidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special as _sp

from dpharness import _validate as _v
from dpharness.errors import ParameterError

from . import stats as _stats

__all__ = [
    "TradeoffBound",
    "certified_tradeoff",
    "tradeoff_from_audit",
    "epsilon_delta_curve",
    "gaussian_curve",
    "laplace_curve",
    "discrete_laplace_curve",
]

_ORDERS = ("data, neighbor", "neighbor, data")


@dataclass(frozen=True)
class TradeoffBound:
    """Certified points on trade-off curves, from m (event, direction) candidates' counts.

    Candidate i's point is on T(P_i, Q_i), P_i the law of its denominator side and Q_i of its
    numerator side: ``alpha[i]`` = p0_hi >= P_i(S_i) (type I error of "reject on S_i") and
    ``beta[i]`` = 1 − p1_lo >= 1 − Q_i(S_i) (type II error), so T(P_i, Q_i)(alpha[i]) <= beta[i].
    ``pair[i]`` is the audited pair's index and ``numerator_is_data[i]`` says whether Q_i is the
    law on that pair's ``data`` (then P_i is the law on its ``neighbor``). :meth:`points` gives them
    in one order of a pair, reflected where needed.

    ``mu``: certified lower bound on μ for μ-GDP (0 when no point is below G_0(α) = 1 − α);
    ``mu_index`` its candidate (-1: none). ``epsilon``: certified lower bound on ε at ``delta``
    from the points (module docstring; >= the audit's bound); ``epsilon_index`` its candidate.
    ``level``: the tail mass of each one-sided bound, α/(2m); ``confidence``: the probability that all
    points hold together."""

    alpha: np.ndarray
    beta: np.ndarray
    pair: np.ndarray
    numerator_is_data: np.ndarray
    mu: float
    mu_index: int
    per_candidate_mu: np.ndarray
    epsilon: float
    epsilon_index: int
    delta: float
    confidence: float
    candidates: int
    level: float
    method: str

    def points(self, pair: int | None = None, order: str = "data, neighbor") -> tuple[np.ndarray, np.ndarray]:
        """Certified points (α_hi, β_hi) on T(M(data), M(neighbor)) (``order="data, neighbor"``) or on
        T(M(neighbor), M(data)) (``"neighbor, data"``) of audited pair ``pair`` (default: every pair,
        pooled: a claim is refuted by a point of any pair, each pair's curve being >= f)."""
        order = _v.choice("order", order, _ORDERS)
        keep = np.ones(len(self.alpha), bool) if pair is None else (self.pair == _v.integer("pair", pair, minimum=0))
        # a candidate is on T(den, num): on T(data, neighbor) when the numerator is the neighbor side
        direct = ~self.numerator_is_data if order == "data, neighbor" else self.numerator_is_data
        a = np.where(direct, self.alpha, self.beta)[keep]
        b = np.where(direct, self.beta, self.alpha)[keep]
        return a, b

    def envelope(self, pair: int | None = None, order: str = "data, neighbor") -> tuple[np.ndarray, np.ndarray]:
        """Vertices (α, β) of the certified upper envelope U of the trade-off curve of ``pair`` in ``order``:
        the lower convex hull of its points with (0, 1) and (1, 0), α increasing. T <= U on [0, 1]
        (``numpy.interp(a, *envelope)`` evaluates U). ``pair`` may be omitted only when one pair was
        audited: a hull of points from different pairs bounds no one curve (convexity is per curve)."""
        if pair is None:
            pairs = np.unique(self.pair)
            if len(pairs) > 1:
                raise ParameterError(
                    f"pair=None: the points come from pairs {pairs.tolist()}; pass pair=<index> "
                    "(an envelope is a statement about one pair's curve)."
                )
        a, b = self.points(pair, order)
        return _lower_hull(np.concatenate([[0.0, 1.0], a]), np.concatenate([[1.0, 0.0], b]))

    def below(self, curve, pair: int | None = None, order: str = "data, neighbor") -> np.ndarray:
        """Whether each certified point lies strictly below ``curve`` (a callable α -> f(α)): a point
        below a claimed f certifies that the claim is false for that pair."""
        a, b = self.points(pair, order)
        return b < np.asarray(curve(a), dtype=float)


# --------------------------------------------------------------------------- curves


def epsilon_delta_curve(alpha, epsilon: float, delta: float = 0.0) -> np.ndarray:
    """f_{ε,δ}(α) = max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)): the trade-off curve of (ε, δ)-DP
    (Dong, Roth & Su 2022, Prop. 2.5); ``epsilon=inf`` gives 0 (no constraint)."""
    a = _alphas(alpha)
    if not (isinstance(epsilon, (float, np.floating)) and epsilon == math.inf):
        epsilon = float(_v.nonnegative("epsilon", epsilon))
    delta = float(_v.probability("delta", delta))
    if epsilon == math.inf:
        return np.zeros_like(a)
    with np.errstate(over="ignore"):
        return np.maximum.reduce(
            [np.zeros_like(a), 1 - delta - math.exp(min(epsilon, 700.0)) * a, math.exp(-epsilon) * (1 - delta - a)]
        )


def gaussian_curve(alpha, mu: float) -> np.ndarray:
    """G_μ(α) = Φ(Φ^{-1}(1 − α) − μ): the trade-off curve of N(0, 1) against N(μ, 1), i.e. of the
    Gaussian mechanism with μ = Δ/σ (Dong, Roth & Su 2022, Def. 2.7); Φ^{-1}(1 − α) is computed
    as −Φ^{-1}(α), accurate for small α."""
    a = _alphas(alpha)
    mu = float(_v.nonnegative("mu", mu))
    return _sp.ndtr(-_sp.ndtri(a) - mu)


def laplace_curve(alpha, mu: float) -> np.ndarray:
    """The trade-off curve of Lap(0, 1) against Lap(μ, 1), i.e. of the (continuous) Laplace
    mechanism with μ = Δ/b (Dong, Roth & Su 2022, Appendix; derived from the threshold tests
    "reject when x > t", which are Neyman-Pearson optimal as the likelihood ratio is monotone)::

        1 − e^μ α            for α < e^{−μ}/2      (t >= μ)
        e^{−μ} / (4α)        for e^{−μ}/2 <= α <= 1/2   (0 <= t <= μ)
        e^{−μ} (1 − α)       for α > 1/2           (t < 0)"""
    a = _alphas(alpha)
    mu = float(_v.nonnegative("mu", mu))
    em = math.exp(-mu)
    with np.errstate(divide="ignore", over="ignore"):
        mid = np.where(a > 0, em / (4 * np.where(a > 0, a, 1.0)), 1.0)
        return np.where(a < em / 2, 1 - a / em, np.where(a <= 0.5, mid, em * (1 - a)))


def discrete_laplace_curve(alpha, steps: int, step_over_scale: float) -> np.ndarray:
    """The exact trade-off curve of the discrete Laplace law P(y) ∝ exp(−s|y|) on the integers
    against the same law shifted by ``steps`` = k >= 0 (s = ``step_over_scale``: the grid step over
    the scale, as in ``dpharness.mechanisms.Laplace``: k = effective_sensitivity/g, s = g/b).

    The likelihood ratio is monotone in y, so the optimal tests reject on {y >= j}, randomising on
    the boundary atom; the curve is the piecewise-linear interpolation of their points. With
    r = e^{−s}, α_j = P_0(Y >= j) and β_j = P_k(Y < j) (sums of the geometric tails)::

        j >= k + 1:      α_j = r^j/(1 + r),            β_j = 1 − r^{−k} α_j   (one line)
        1 <= j <= k + 1: α_j = r^j/(1 + r),            β_j = r^{k+1−j}/(1 + r)  (vertices on α β = r^{k+1}/(1+r)²)
        j <= 1:          α_j = 1 − r^{1−j}/(1 + r),    β_j = r^k (1 − α_j)      (one line)

    As g -> 0 with k g = Δ it tends to :func:`laplace_curve` at μ = Δ/b; at every fixed g it is a
    little below it in the middle part (r/(1 + r)² < 1/4)."""
    a = _alphas(alpha)
    k = _v.integer("steps", steps, minimum=0)
    s = float(_v.positive("step_over_scale", step_over_scale))
    r = math.exp(-s)
    c = 1.0 / (1.0 + r)
    ks = k * s
    low_end = math.exp(-(k + 1) * s) * c  # α_{k+1}
    high_end = r * c  # α_1
    out = np.empty_like(a)
    tail = a <= low_end
    out[tail] = 1.0 - a[tail] * math.exp(ks) if ks < 700 else 0.0
    head = a >= high_end
    out[head] = math.exp(-ks) * (1.0 - a[head])
    mid = ~tail & ~head
    if np.any(mid):
        am = a[mid]
        # α_j = r^j c decreases in j; the segment [α_{j+1}, α_j] holding am has j = floor(-ln(am/c)/s)
        j = np.clip(np.floor(-np.log(am / c) / s), 1, k)
        a_hi = np.exp(-j * s) * c  # α_j
        a_lo = np.exp(-(j + 1) * s) * c  # α_{j+1}
        b_at_hi = np.exp(-(k + 1 - j) * s) * c  # β_j
        b_at_lo = np.exp(-(k - j) * s) * c  # β_{j+1}
        w = np.clip((a_hi - am) / (a_hi - a_lo), 0.0, 1.0)
        out[mid] = b_at_hi + w * (b_at_lo - b_at_hi)
    return np.clip(out, 0.0, 1.0)


# --------------------------------------------------------------------------- certified points


def certified_tradeoff(
    hits1,
    n1,
    hits0,
    n0,
    *,
    confidence: float = 0.95,
    candidates: int | None = None,
    delta: float = 0.0,
    pair=None,
    numerator_is_data=None,
) -> TradeoffBound:
    """Certified trade-off points, μ-GDP and ε lower bounds from m (event, direction) candidates' counts.

    Arguments as :func:`dpharness.auditors.epsilon_lower_bound`: ``hits1``/``n1`` the hits of each
    event on its numerator side (where it should be likelier; the alternative Q), ``hits0``/``n0``
    on its denominator side (the null P); ``candidates`` the Bonferroni count m (default: the number
    of entries; pass the audit's when it certified more); each one-sided bound at α/(2m),
    α = 1 − ``confidence``. ``pair`` (default 0) and ``numerator_is_data`` (default True) label
    each candidate for :meth:`TradeoffBound.points`. ``delta``: the δ at which
    :attr:`TradeoffBound.epsilon` is computed. The math is in the module docstring."""
    confidence = float(_v.probability("confidence", confidence, open_left=True, open_right=True))
    delta = float(_v.probability("delta", delta, open_right=True))
    eb = _stats.epsilon_lower_bound(hits1, n1, hits0, n0, confidence=confidence, delta=0.0, candidates=candidates)
    size = eb.p1_low.size
    pair = np.zeros(size, np.int64) if pair is None else np.broadcast_to(np.asarray(pair), (size,)).astype(np.int64)
    fwd = (
        np.ones(size, bool)
        if numerator_is_data is None
        else np.broadcast_to(np.asarray(numerator_is_data), (size,)).astype(bool)
    )
    if np.any(pair < 0):
        raise ParameterError(f"pair={pair.tolist()!r:.60} must be >= 0; pass the audited pairs' indices.")
    alpha = np.asarray(eb.p0_high, dtype=float)
    beta = 1.0 - np.asarray(eb.p1_low, dtype=float)
    mus = _mu_points(alpha, beta)
    mu_index = int(np.argmax(mus)) if size and np.max(mus) > 0 else -1
    mu = float(mus[mu_index]) if mu_index >= 0 else 0.0
    eps = _epsilon_points(alpha, beta, delta)
    eps_index = int(np.argmax(eps)) if size and np.max(eps) > 0 else -1
    epsilon = float(eps[eps_index]) if eps_index >= 0 else 0.0
    method = (
        f"Clopper-Pearson exact one-sided bounds, Bonferroni over {eb.candidates} candidate(s) (each tail "
        f"{eb.level:.3g}); point (p0_hi, 1 - p1_lo) on T(denominator, numerator) and its reflection; "
        f"mu = max(Phi^-1(1 - alpha) - Phi^-1(beta)); Dong, Roth & Su 2022"
    )
    return TradeoffBound(
        alpha=alpha,
        beta=beta,
        pair=pair,
        numerator_is_data=fwd,
        mu=mu,
        mu_index=mu_index,
        per_candidate_mu=mus,
        epsilon=epsilon,
        epsilon_index=eps_index,
        delta=delta,
        confidence=confidence,
        candidates=eb.candidates,
        level=eb.level,
        method=method,
    )


def tradeoff_from_audit(result) -> TradeoffBound | None:
    """The certified trade-off points of an :class:`~dpharness.auditors.AuditResult`, from the
    certification counts it records in ``extra["certification"]`` (at the confidence of the look
    that gave its bound: for a sequential audit that look's share, so the points and the ε bound
    hold together at the audit's ``confidence``). None for a result without them (an audit that
    certified no event, or a result cached before they were recorded)."""
    rec = (getattr(result, "extra", None) or {}).get("certification")
    if not rec or not rec.get("events"):
        return None
    rows = np.asarray([e[:6] for e in rec["events"]], dtype=np.int64)
    return certified_tradeoff(
        rows[:, 2],
        rows[:, 3],
        rows[:, 4],
        rows[:, 5],
        confidence=rec["confidence"],
        candidates=rec["candidates"],
        delta=float(result.delta),
        pair=rows[:, 0],
        numerator_is_data=rows[:, 1].astype(bool),
    )


# --------------------------------------------------------------------------- private helpers


def _alphas(alpha) -> np.ndarray:
    a = np.atleast_1d(np.asarray(alpha, dtype=float))
    if not np.all((a >= 0) & (a <= 1)):
        raise ParameterError(f"alpha={alpha!r:.60} must lie in [0, 1]; pass type I errors.")
    return a


def _mu_points(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """μ_i = Φ^{-1}(1 − α_i) − Φ^{-1}(β_i), written −Φ^{-1}(α_i) − Φ^{-1}(β_i) (no cancellation in 1 − α);
    -inf where α_i or β_i is 1, +inf where either is 0 (never, for finite samples)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -_sp.ndtri(alpha) - _sp.ndtri(beta)


def _epsilon_points(alpha: np.ndarray, beta: np.ndarray, delta: float) -> np.ndarray:
    """max(ln((1 − δ − β)/α), ln((1 − δ − α)/β)) per point (-inf where neither numerator is positive)."""
    out = []
    for x, y in ((beta, alpha), (alpha, beta)):
        num = 1.0 - delta - x
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(num > 0, np.log(np.where(num > 0, num, 1.0)) - np.log(y), -np.inf)
        out.append(np.where((num > 0) & (y <= 0), np.inf, v))
    return np.maximum(out[0], out[1])


def _lower_hull(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of the lower convex hull of the points (x, y), x increasing (Andrew's monotone chain)."""
    order = np.lexsort((y, x))
    hull: list[tuple[float, float]] = []
    for i in order:
        p = (float(x[i]), float(y[i]))
        if hull and hull[-1][0] == p[0]:
            continue  # same α: the lower β came first
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) <= 0:  # hull[-1] on or above the chord
                hull.pop()
            else:
                break
        hull.append(p)
    hx, hy = zip(*hull)
    return np.array(hx), np.array(hy)
