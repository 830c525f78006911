"""Statistics of the auditor: pure functions of counts, sample sizes and confidence.

Every function here takes hit counts and sample sizes (never samples) and returns a frozen result
that names its method, in the manner of ``scipy.stats.binomtest(...).proportion_ci(method='exact')``.

Soundness argument (used by :func:`dpharness.auditors.audit`)
-------------------------------------------------------------
For an event S chosen *before* the certification samples are drawn, and a direction (D over D'),
let p1 = Pr[M(D) ∈ S] and p0 = Pr[M(D') ∈ S]. The Clopper-Pearson one-sided bounds satisfy
Pr[p1 < p1_lo] <= a and Pr[p0 > p0_hi] <= a. If the mechanism is (ε, δ)-DP then p1 <= e^ε p0 + δ, so
on the event that both bounds hold, ln((p1_lo − δ) / p0_hi) <= ln((p1 − δ)/p0) <= ε. With m
(event, direction) candidates certified at once and a = α / (2m) per one-sided bound (Bonferroni),
the maximum over candidates is <= ε with probability >= 1 − α = confidence.

The bound is finite whenever the sample sizes are: a Clopper-Pearson upper bound is > 0 even for
zero hits, so zero hits on one side never gives ``inf`` by itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special as _sp

from dpharness import _validate as _v
from dpharness.errors import ParameterError

__all__ = [
    "ProportionBound",
    "EpsilonBound",
    "DeltaBound",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "clopper_pearson_interval",
    "bonferroni_level",
    "epsilon_lower_bound",
    "delta_lower_bound",
    "projected_epsilon",
]


@dataclass(frozen=True)
class ProportionBound:
    """One-sided (or two-sided) exact bounds on binomial proportions; arrays when the inputs were arrays.

    ``level`` is the probability that a single bound fails (its tail mass), ``method`` names the bound."""

    low: np.ndarray | float
    high: np.ndarray | float
    hits: np.ndarray | int
    n: np.ndarray | int
    level: float
    method: str


@dataclass(frozen=True)
class EpsilonBound:
    """Certified lower bound on ε from counts of m (event, direction) candidates at once.

    ``epsilon`` is the maximum over candidates of ln((p1_lo − δ) / p0_hi) (0 when no candidate is
    positive); ``index`` the best candidate (-1 when none is positive); ``per_candidate`` all values
    (``-inf`` where p1_lo <= δ); ``p1_low``/``p0_high`` the bounds; ``level`` the tail mass of each
    one-sided bound (α / (2m))."""

    epsilon: float
    index: int
    per_candidate: np.ndarray
    p1_low: np.ndarray
    p0_high: np.ndarray
    delta: float
    confidence: float
    candidates: int
    level: float
    method: str


@dataclass(frozen=True)
class DeltaBound:
    """Certified lower bound on δ at a given ε: max over candidates of p1_lo − e^ε p0_hi, clipped at 0."""

    delta: float
    index: int
    per_candidate: np.ndarray
    epsilon: float
    confidence: float
    candidates: int
    level: float
    method: str


# --------------------------------------------------------------------------- validation


def _counts(hits, n, name: str) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(hits)
    m = np.asarray(n)
    if (
        k.dtype == object
        or m.dtype == object
        or not (np.issubdtype(k.dtype, np.integer) and np.issubdtype(m.dtype, np.integer))
    ):
        # allow integral floats such as 3.0 from callers' arithmetic
        try:
            kf = np.asarray(hits, dtype=float)
            mf = np.asarray(n, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ParameterError(f"{name}={hits!r:.60} is not a count; pass non-negative integers.") from exc
        if not (
            np.all(np.isfinite(kf))
            and np.all(kf == np.floor(kf))
            and np.all(np.isfinite(mf))
            and np.all(mf == np.floor(mf))
        ):
            raise ParameterError(f"{name}={hits!r:.60} (n={n!r:.60}) are not whole numbers; pass integer counts.")
        k, m = kf.astype(np.int64), mf.astype(np.int64)
    k, m = np.broadcast_arrays(k.astype(np.int64), m.astype(np.int64))
    if np.any(m < 1):
        raise ParameterError(f"n={n!r:.60} must be >= 1; pass positive sample sizes.")
    if np.any(k < 0) or np.any(k > m):
        raise ParameterError(
            f"{name}={hits!r:.60} must lie in 0..n (n={n!r:.60}); pass counts of hits among n samples."
        )
    return k, m


def _level(level) -> float:
    level = float(_v.probability("level", level, open_left=True, open_right=True))
    return level


def _confidence(confidence) -> float:
    return float(_v.probability("confidence", confidence, open_left=True, open_right=True))


def _scalar_or_array(x: np.ndarray, like) -> np.ndarray | float:
    return float(x) if np.ndim(like) == 0 and np.ndim(x) == 0 else x


# --------------------------------------------------------------------------- Clopper-Pearson


# A quantile from scipy's inverse incomplete beta is checked forward with the incomplete beta itself:
# scipy 1.17.1's betaincinv / betainccinv (Boost ibeta_inv) return wrong quantiles at some arguments
# (a = 1000 exactly with b above ~6·10^7: betaincinv(1000, 10^9 − 999, 0.025) = 1.9e-6, whose lower tail
# is 1.0, not 0.025; the upper quantile drifts from b ~ 3·10^6), which made equal counts certify ε = 0.58.
# Where the forward tail exceeds the level by more than float noise, the quantile is solved again by
# bisection on the (accurate) forward function, and always rounded to the conservative side.
_FORWARD_TOL = 1e-9


def _solve_tail(tail, level: float, lo: float, hi: float, conservative_down: bool) -> float:
    """The x in [lo, hi] with tail(x) <= level, as close to tail(x) = level as bisection in floats gets,
    on the conservative side (``tail`` is monotone: increasing in x when ``conservative_down``)."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        ok = tail(mid) <= level
        if conservative_down:
            lo, hi = (mid, hi) if ok else (lo, mid)
        else:
            lo, hi = (lo, mid) if ok else (mid, hi)
    return lo if conservative_down else hi


def _checked(
    values: np.ndarray, active: np.ndarray, a: np.ndarray, b: np.ndarray, level: float, lower: bool
) -> np.ndarray:
    """``values`` with every active entry whose forward tail exceeds ``level`` re-solved (see above)."""
    out = np.array(values, dtype=float, copy=True)
    flat, fa, fb, act = (
        out.reshape(-1),
        np.broadcast_to(a, out.shape).reshape(-1),
        np.broadcast_to(b, out.shape).reshape(-1),
        np.broadcast_to(active, out.shape).reshape(-1),
    )
    for i in np.flatnonzero(act):
        ai, bi = float(fa[i]), float(fb[i])
        if lower:  # Pr[Beta(a, b) <= L] <= level; a smaller L is safe
            tail = lambda x, ai=ai, bi=bi: float(_sp.betainc(ai, bi, x))  # noqa: E731
            if not tail(flat[i]) <= level * (1 + _FORWARD_TOL):
                flat[i] = _solve_tail(tail, level, 0.0, float(flat[i]), conservative_down=True)
        else:  # Pr[Beta(a, b) >= U] <= level; a larger U is safe
            tail = lambda x, ai=ai, bi=bi: float(_sp.betaincc(ai, bi, x))  # noqa: E731
            if not tail(flat[i]) <= level * (1 + _FORWARD_TOL):
                flat[i] = _solve_tail(tail, level, float(flat[i]), 1.0, conservative_down=False)
    return out


def clopper_pearson_lower(hits, n, level: float) -> np.ndarray | float:
    """Exact one-sided lower bound L with Pr[p < L] <= ``level``: the ``level`` quantile of Beta(k, n−k+1)
    (``scipy.special.betaincinv``, as ``scipy.stats.beta.ppf``, checked forward with ``betainc``); 0 when k = 0."""
    k, m = _counts(hits, n, "hits")
    level = _level(level)
    a, b = np.maximum(k, 1), m - k + 1
    with np.errstate(invalid="ignore"):
        lo = np.where(k > 0, _sp.betaincinv(a, b, level), 0.0)
    lo = _checked(np.asarray(lo, dtype=float), k > 0, a, b, level, lower=True)
    return _scalar_or_array(lo, hits)


def clopper_pearson_upper(hits, n, level: float) -> np.ndarray | float:
    """Exact one-sided upper bound U with Pr[p > U] <= ``level``: the 1−``level`` quantile of Beta(k+1, n−k)
    (checked forward with ``betaincc``); 1 when k = n.

    U > 0 for every k (for k = 0 it is 1 − level^(1/n))."""
    k, m = _counts(hits, n, "hits")
    level = _level(level)
    a, b = k + 1, np.maximum(m - k, 1)
    with np.errstate(invalid="ignore"):
        hi = np.where(k < m, _sp.betainccinv(a, b, level), 1.0)
    hi = _checked(np.asarray(hi, dtype=float), k < m, a, b, level, lower=False)
    return _scalar_or_array(hi, hits)


def clopper_pearson_interval(hits, n, confidence: float = 0.95) -> ProportionBound:
    """Two-sided exact interval at ``confidence`` (each tail (1−confidence)/2), as
    ``scipy.stats.binomtest(k, n).proportion_ci(confidence, method='exact')``."""
    confidence = _confidence(confidence)
    tail = (1.0 - confidence) / 2.0
    k, m = _counts(hits, n, "hits")
    return ProportionBound(
        low=clopper_pearson_lower(hits, n, tail),
        high=clopper_pearson_upper(hits, n, tail),
        hits=hits,
        n=n,
        level=tail,
        method="Clopper-Pearson exact (two-sided)",
    )


def bonferroni_level(confidence: float, candidates: int) -> float:
    """Tail mass of each one-sided bound when ``candidates`` (event, direction) pairs are certified
    together: α / (2m), two one-sided bounds per candidate."""
    confidence = _confidence(confidence)
    candidates = _v.integer("candidates", candidates, minimum=1)
    return (1.0 - confidence) / (2.0 * candidates)


# --------------------------------------------------------------------------- ε and δ bounds


def _paired_bounds(hits1, n1, hits0, n0, confidence: float, candidates: int | None):
    """Bonferroni-adjusted one-sided Clopper-Pearson bounds for each candidate: (p1_lo, p0_hi, m, level)."""
    k1, m1 = _counts(np.atleast_1d(hits1), np.atleast_1d(n1), "hits1")
    k0, m0 = _counts(np.atleast_1d(hits0), np.atleast_1d(n0), "hits0")
    k1, m1, k0, m0 = np.broadcast_arrays(k1, m1, k0, m0)
    m = int(k1.size) if candidates is None else _v.integer("candidates", candidates, minimum=max(1, int(k1.size)))
    level = bonferroni_level(confidence, m)
    p1 = np.atleast_1d(clopper_pearson_lower(k1, m1, level))
    p0 = np.atleast_1d(clopper_pearson_upper(k0, m0, level))
    return p1, p0, m, level


def epsilon_lower_bound(
    hits1, n1, hits0, n0, *, confidence: float = 0.95, delta: float = 0.0, candidates: int | None = None
) -> EpsilonBound:
    """Certified lower bound on ε from m candidates' counts (arrays of length m, or scalars).

    ``hits1``/``n1``: hits of each candidate event on the side where it should be *more* likely
    (numerator), ``hits0``/``n0`` on the other side. ``candidates`` (default: the number of entries)
    is the Bonferroni count m; pass a larger m when more candidates were certified elsewhere."""
    confidence = _confidence(confidence)
    delta = float(_v.probability("delta", delta, open_right=True))
    p1, p0, m, level = _paired_bounds(hits1, n1, hits0, n0, confidence, candidates)
    num = p1 - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(num > 0, np.log(np.where(num > 0, num, 1.0)) - np.log(p0), -np.inf)
    per = np.where((num > 0) & (p0 <= 0), np.inf, per)  # unreachable for finite n: p0_hi > 0
    if per.size and np.max(per) > 0:
        idx = int(np.argmax(per))
        eps = float(per[idx])
    else:
        idx, eps = -1, 0.0
    what = "ln(p1_lo / p0_hi)" if delta == 0 else f"ln((p1_lo - {delta:g}) / p0_hi)"
    return EpsilonBound(
        epsilon=eps,
        index=idx,
        per_candidate=per,
        p1_low=p1,
        p0_high=p0,
        delta=delta,
        confidence=confidence,
        candidates=m,
        level=level,
        method=f"Clopper-Pearson exact one-sided bounds, Bonferroni over {m} candidate(s) (each tail {level:.3g}); {what}",
    )


def delta_lower_bound(
    hits1, n1, hits0, n0, *, epsilon: float, confidence: float = 0.95, candidates: int | None = None
) -> DeltaBound:
    """Certified lower bound on δ at ``epsilon``: max over candidates of p1_lo − e^ε p0_hi (>= 0)."""
    confidence = _confidence(confidence)
    epsilon = float(_v.nonnegative("epsilon", epsilon))
    p1, p0, m, level = _paired_bounds(hits1, n1, hits0, n0, confidence, candidates)
    per = p1 - math.exp(epsilon) * p0 if epsilon < 700 else np.where(p0 > 0, -np.inf, p1)
    if per.size and np.max(per) > 0:
        idx = int(np.argmax(per))
        d = float(per[idx])
    else:
        idx, d = -1, 0.0
    return DeltaBound(
        delta=d,
        index=idx,
        per_candidate=per,
        epsilon=epsilon,
        confidence=confidence,
        candidates=m,
        level=level,
        method=f"Clopper-Pearson exact one-sided bounds, Bonferroni over {m} candidate(s); p1_lo - e^{epsilon:g} p0_hi",
    )


def projected_epsilon(p1_hat, p0_hat, n: "int | np.ndarray", level: float, delta: float = 0.0) -> np.ndarray:
    """Heuristic for ranking events on training data (never a certificate): the Clopper-Pearson bound
    ln((p1_lo − δ)/p0_hi) that counts n·p1_hat, n·p0_hat among n certification samples would give
    (``n`` one size for all, or one per estimate)."""
    p1 = np.clip(np.asarray(p1_hat, dtype=float), 0.0, 1.0)
    p0 = np.clip(np.asarray(p0_hat, dtype=float), 0.0, 1.0)
    # round the expected counts to whole hits, tolerating the float error of p·n (7/10^5 · 10^5 is 6.99…)
    k1 = np.floor(p1 * n + 1e-9)
    k0 = np.maximum(np.ceil(p0 * n - 1e-9), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k1 > 0, _sp.betaincinv(np.maximum(k1, 1), n - k1 + 1, level), 0.0)
        hi = np.where(k0 < n, _sp.betainccinv(k0 + 1, np.maximum(n - k0, 1), level), 1.0)
        num = lo - delta
        out = np.where(num > 0, np.log(np.where(num > 0, num, 1.0)) - np.log(hi), -np.inf)
    return out


# =========================================================================== projections at expected counts
# (block added for tail events, dpharness.auditors.tails; heuristics for CHOOSING events, never certificates)

__all__ += ["projected_epsilon_expected", "projected_delta"]


def _projected_bounds(p1_hat, p0_hat, n: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Clopper-Pearson bounds (p1_lo, p0_hi) at the *expected* counts n·p1_hat, n·p0_hat, read as real
    numbers (the Beta quantiles interpolate the exact bound between integer counts, so the projection
    is continuous in p and can be maximised over a threshold without the steps of floor/ceil)."""
    p1 = np.clip(np.asarray(p1_hat, dtype=float), 0.0, 1.0)
    p0 = np.clip(np.asarray(p0_hat, dtype=float), 0.0, 1.0)
    k1, k0 = p1 * n, p0 * n
    tiny = 1e-12
    with np.errstate(invalid="ignore", divide="ignore", under="ignore"):
        lo = np.where(k1 > tiny, _sp.betaincinv(np.maximum(k1, tiny), np.maximum(n - k1 + 1, tiny), level), 0.0)
        hi = np.where(k0 < n - tiny, _sp.betainccinv(k0 + 1, np.maximum(n - k0, tiny), level), 1.0)
    return lo, hi


def _projection_args(n, level) -> tuple[int, float]:
    n = _v.integer("n", n, minimum=1)
    level = _level(level)
    return n, level


def projected_epsilon_expected(p1_hat, p0_hat, n: int, level: float, delta: float = 0.0) -> np.ndarray:
    """Heuristic for choosing events (never a certificate): ln((p1_lo − δ)/p0_hi), the ε bound that
    :func:`epsilon_lower_bound` would return with each one-sided bound at tail mass ``level`` if the
    n certification samples a side showed exactly the expected counts n·p1_hat and n·p0_hat
    (real-valued counts; ``-inf`` where p1_lo <= δ). Unlike :func:`projected_epsilon` it is
    continuous in the probabilities, so it can be maximised over an extrapolated tail."""
    n, level = _projection_args(n, level)
    delta = float(_v.probability("delta", delta, open_right=True))
    lo, hi = _projected_bounds(p1_hat, p0_hat, n, level)
    num = lo - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(num > 0, np.log(np.where(num > 0, num, 1.0)) - np.log(hi), -np.inf)


def projected_delta(p1_hat, p0_hat, n: int, level: float, epsilon: float) -> np.ndarray:
    """Heuristic for choosing events (never a certificate): p1_lo − e^ε p0_hi, the δ bound that
    :func:`delta_lower_bound` would return (before clipping at 0) at the expected counts n·p1_hat,
    n·p0_hat with each one-sided bound at tail mass ``level``; negative where nothing would be
    certified."""
    n, level = _projection_args(n, level)
    epsilon = float(_v.nonnegative("epsilon", epsilon))
    lo, hi = _projected_bounds(p1_hat, p0_hat, n, level)
    return lo - math.exp(min(epsilon, 700.0)) * hi


# =========================================================================== end of the block for tail events


# =========================================================================== what an audit of n samples can certify

__all__ += ["CertifiableRange", "certifiable_range"]


@dataclass(frozen=True)
class CertifiableRange:
    """What an audit certifying on ``n`` samples a side, at ``level`` per one-sided bound, can certify.

    * ``ceiling``: the largest bound it could return — :func:`epsilon_lower_bound` when the event's
      counts are maximally separated (all ``n`` samples in the event on one side, none on the other).
      A claim at or above it cannot be refuted at this size, whatever the mechanism.
    * ``floor``: its detection floor — the smallest ε at which an event of probability 1/2 on one
      input and e^(−ε)/2 on the other, seen at exactly its expected counts, would certify a positive
      bound (:func:`projected_epsilon_expected`). A mechanism whose best event is of that kind and whose
      true ε is below the floor typically certifies 0 at this size; rarer events need a larger ε.
    """

    n: int
    level: float
    delta: float
    floor: float
    ceiling: float
    method: str


def certifiable_range(n: int, level: float, delta: float = 0.0) -> CertifiableRange:
    """The detection floor and the ceiling (:class:`CertifiableRange`) of an audit certifying on ``n``
    samples a side with each one-sided Clopper-Pearson bound at tail mass ``level`` (the audit's
    Bonferroni share, ``EpsilonBound.level``) and δ = ``delta``: pure functions of the sample size."""
    n, level = _projection_args(n, level)
    delta = float(_v.probability("delta", delta, open_right=True))
    ceiling = max(0.0, float(epsilon_lower_bound(n, n, 0, n, confidence=1 - 2 * level, delta=delta).epsilon))

    def certifies(eps: float) -> bool:
        return bool(projected_epsilon_expected(0.5, 0.5 * math.exp(-eps), n, level, delta) > 0)

    lo, hi = 0.0, max(ceiling, 1e-9)
    if not certifies(hi):  # at this size no event of probability 1/2 certifies anything
        floor = math.inf
    else:
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if certifies(mid) else (mid, hi)
        floor = hi
    return CertifiableRange(
        n=n,
        level=level,
        delta=delta,
        floor=floor,
        ceiling=ceiling,
        method=(
            f"Clopper-Pearson at tail mass {level:.3g} a bound, {n} samples a side: ceiling = the bound of counts "
            f"{n} vs 0; floor = the smallest ε whose event of probability 1/2 vs e^-ε/2 certifies > 0 at its "
            "expected counts"
        ),
    )
