"""Tail events for (ε, δ) audits of scalar outputs: half-lines ``output >= t`` / ``output <= t`` whose
threshold is chosen by extrapolating each side's tail beyond the training samples.

Why the tail. For a Gaussian pair the events that certify ε at a small δ (or δ at ε) are half-lines
far in the tail: with P = N(Δ, σ²), Q = N(0, σ²) the best event at ε is ``{x >= σ²ε/Δ + Δ/2}``
(the likelihood-ratio threshold), and there P(S) − e^ε Q(S) = δ(ε) exactly. At (ε, δ) = (1, 1e-5)
that is ~3.6σ out, where a training set of 10^5 outputs holds a handful of samples — too few to
rank thresholds by their empirical counts. So thresholds are chosen on a *model* of each side's tail:

* *Tail model* (semiparametric, per side and per tail): beyond the (k+1)-th largest training output
  u (k ≈ 20% of the side, between 25 and 50 000), the exceedances Y = X − u are fitted by the
  exponential family with density ∝ exp(−βY − γY²) on Y >= 0, γ >= 0 — a truncated Gaussian
  (γ > 0, exact for Gaussian noise) or an exponential (γ = 0, exact for Laplace noise). Its
  sufficient statistics are E[Y] and E[Y²], so the maximum-likelihood fit is the moment match
  (solved in one variable through the inverse Mills ratio). Integer outputs are fitted through the
  uniform dequantisation X + U(0, 1), whose moments are exact functions of the integer ones
  (Sheppard), so no randomness enters. Below u the empirical survival function is used.
* *Choice of t*: on a grid from the pooled median out to where the larger fitted tail holds about
  half an expected certification hit, each (tail, direction) maximises the *projected certified*
  bound — the Clopper-Pearson bound that ``cert_n`` certification samples would give at their
  expected counts, each one-sided bound at the Bonferroni tail mass α/(2·max_events)
  (:func:`~dpharness.auditors.stats.projected_epsilon_expected` for ε at the claimed δ,
  :func:`~dpharness.auditors.stats.projected_delta` for δ at ε). Not the training ratio: a far
  threshold with a large ratio but a handful of certification hits certifies little.

Soundness does not depend on the model. The model only chooses thresholds from training samples;
the events are fixed before certification samples are drawn, and certification counts them exactly
(:func:`~dpharness.auditors.stats.epsilon_lower_bound`). A wrong fit costs power, never validity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special as _sp

from dpharness import _validate as _v
from dpharness.core import Event
from dpharness.errors import ParameterError

from . import stats as _stats

__all__ = ["TailCandidate", "tail_candidates", "propose_tail_events"]

_MIN_SIDE = 100  # training outputs a side below which no tail is extrapolated
_TAIL_FRACTION = 0.2
_TAIL_MIN, _TAIL_MAX = 25, 50_000
_MIN_DISTINCT = 3  # distinct exceedance values needed to fit a tail (else: empirical only)
_GRID = 800  # thresholds scanned per tail (continuous outputs)
_A_RANGE = 40.0  # standardised truncation point of the truncated Gaussian is kept in ±this
_FAR_HITS = 0.5  # the scan stops where the larger fitted tail expects this many certification hits


@dataclass(frozen=True)
class TailCandidate:
    """A proposed tail event with what its choice rests on.

    ``event``: ``output >= threshold`` (``upper``) or ``output <= threshold``; ``forward``: the event
    is likelier on ``train_a``'s side (``train_a`` is the numerator of the ratio); ``objective``:
    ``"epsilon at delta"`` or ``"delta at epsilon"`` (which projection this threshold maximises);
    ``projected_epsilon`` / ``projected_delta``: the projected certified bounds at the threshold
    (heuristics from the fitted tails, never certificates); ``p_numerator`` / ``p_denominator``: the
    fitted probabilities of the event on the two sides."""

    event: Event
    threshold: float
    upper: bool
    forward: bool
    objective: str
    projected_epsilon: float
    projected_delta: float
    p_numerator: float
    p_denominator: float


# --------------------------------------------------------------------------- tail model


@dataclass(frozen=True)
class _Tail:
    """Fitted upper tail of one side: P(X >= t) = mass · G(t − origin) for t > u."""

    u: float
    origin: float  # u for continuous outputs, u + 1 for integers (dequantised)
    mass: float  # share of the side's outputs beyond u
    gaussian: bool  # truncated Gaussian (True) or exponential (False) exceedances
    m: float  # truncated Gaussian: mean and sd of the untruncated law of Y
    s: float
    mean: float  # exponential: mean of Y
    log_norm: float  # log Φ(m/s), the truncated mass (truncated Gaussian)

    def log_sf(self, t: np.ndarray) -> np.ndarray:
        y = np.maximum(np.asarray(t, dtype=float) - self.origin, 0.0)
        if self.gaussian:
            g = _sp.log_ndtr(-(y - self.m) / self.s) - self.log_norm
        else:
            g = -y / self.mean
        return math.log(self.mass) + g


def _mills(a: float) -> float:
    """φ(a)/Φ(a) (inverse Mills ratio of N(0,1) truncated below at −a), stably."""
    return math.exp(-0.5 * a * a - 0.5 * math.log(2 * math.pi) - float(_sp.log_ndtr(a)))


def _moment_ratio(a: float) -> float:
    """E[Y²]/E[Y]² for Y = s(a + Z), Z ~ N(0,1) truncated to Z >= −a (so that Y >= 0)."""
    lam = _mills(a)
    return (a * a + a * lam + 1.0) / (a + lam) ** 2


def _fit_moments(mean_y: float, mean_y2: float) -> tuple[bool, float, float, float, float]:
    """Moment match (= maximum likelihood) of exp(−βY − γY²), γ >= 0, on Y >= 0:
    (gaussian, m, s, mean, log_norm)."""
    ratio = mean_y2 / (mean_y * mean_y)
    lo_r, hi_r = _moment_ratio(_A_RANGE), _moment_ratio(-_A_RANGE)
    if ratio >= hi_r:  # as heavy as an exponential or heavier: the exponential fit (γ = 0)
        return False, 0.0, 0.0, mean_y, 0.0
    if ratio <= lo_r:
        a = _A_RANGE
    else:
        from scipy.optimize import brentq

        a = brentq(lambda x: _moment_ratio(x) - ratio, -_A_RANGE, _A_RANGE, xtol=1e-10)
    s = mean_y / (a + _mills(a))
    return True, a * s, s, 0.0, float(_sp.log_ndtr(a))


def _fit_tail(x: np.ndarray, n_total: int, lattice: bool) -> _Tail | None:
    """Fit the upper tail of the sorted finite outputs ``x`` of one side (``n_total`` outputs in all)."""
    n = len(x)
    if n < _MIN_SIDE:
        return None
    k = int(min(max(round(_TAIL_FRACTION * n), _TAIL_MIN), _TAIL_MAX, n - 1))
    u = float(x[n - k - 1])
    exceed = x[np.searchsorted(x, u, side="right") :]
    if len(exceed) < _TAIL_MIN // 2 or len(np.unique(exceed)) < _MIN_DISTINCT:
        return None
    if lattice:
        y = exceed - (u + 1.0)  # integers >= 0; dequantised Y = y + U(0, 1)
        mean_y = float(np.mean(y)) + 0.5
        mean_y2 = float(np.mean(y * y)) + float(np.mean(y)) + 1.0 / 3.0
        origin = u + 1.0
    else:
        y = exceed - u
        mean_y, mean_y2 = float(np.mean(y)), float(np.mean(y * y))
        origin = u
    if not (mean_y > 0 and math.isfinite(mean_y2)):
        return None
    gaussian, m, s, mean, log_norm = _fit_moments(mean_y, mean_y2)
    return _Tail(
        u=u, origin=origin, mass=len(exceed) / n_total, gaussian=gaussian, m=m, s=s, mean=mean, log_norm=log_norm
    )


def _survival(x: np.ndarray, n_total: int, p_plus_inf: float, tail: _Tail | None, t: np.ndarray) -> np.ndarray:
    """P(X >= t): empirical up to the tail's start u, the fitted tail beyond (plus any mass at +inf)."""
    emp = (len(x) - np.searchsorted(x, t, side="left")) / n_total + p_plus_inf
    if tail is None:
        return emp
    model = np.exp(tail.log_sf(t)) + p_plus_inf
    return np.where(t > tail.u, model, emp)


# --------------------------------------------------------------------------- thresholds


def _scan_end(tails: list[_Tail | None], x_max: float, scale: float, cert_n: int, lattice: bool) -> float:
    """Where the larger fitted tail expects about ``_FAR_HITS`` certification hits (the scan's end)."""
    fitted = [tl for tl in tails if tl is not None]
    if not fitted:
        return x_max
    target = math.log(_FAR_HITS / cert_n)
    end = max(tl.u for tl in fitted)
    step = max(scale, 1.0 if lattice else 0.0) * 0.25
    for _ in range(400):
        if max(float(tl.log_sf(np.array([end]))[0]) for tl in fitted) <= target:
            break
        end += step
        step *= 1.25
    return max(end, x_max)


def _grid(lo: float, hi: float, lattice: bool) -> np.ndarray:
    if lattice:
        lo_i, hi_i = math.floor(lo), math.ceil(hi)
        if hi_i - lo_i + 1 <= 4 * _GRID:
            return np.arange(lo_i, hi_i + 1, dtype=float)
        return np.unique(np.round(np.linspace(lo_i, hi_i, 4 * _GRID)))
    return np.linspace(lo, hi, _GRID)


def _resolution(scale: float) -> float:
    """Thresholds are rounded to about a thousandth of the outputs' spread (short, readable numbers)."""
    if not (scale > 0 and math.isfinite(scale)):
        return 0.0
    return 10.0 ** (math.floor(math.log10(scale)) - 3)


def _round(t: float, res: float, lattice: bool) -> float:
    if lattice:
        return float(round(t))
    if res <= 0:
        return float(t)
    digits = max(0, -int(math.floor(math.log10(res))))
    return float(round(round(t / res) * res, digits))


def _upper_tail_candidates(
    a: np.ndarray,
    b: np.ndarray,
    na: int,
    nb: int,
    inf_a: float,
    inf_b: float,
    *,
    lattice: bool,
    scale: float,
    delta: float,
    epsilon: float | None,
    cert_n: int,
    level: float,
) -> list[tuple]:
    """(t, forward, objective, proj_eps, proj_delta, p1, p0) for the upper tail of sorted finite a, b."""
    ta, tb = _fit_tail(a, na, lattice), _fit_tail(b, nb, lattice)
    pooled = np.concatenate([a, b])
    if len(pooled) == 0:
        return []
    start = float(np.median(pooled))
    x_max = float(pooled.max())
    end = _scan_end([ta, tb], x_max, scale, cert_n, lattice)
    if not end > start:
        return []
    t = _grid(start, end, lattice)
    sa, sb = _survival(a, na, inf_a, ta, t), _survival(b, nb, inf_b, tb, t)
    out = []
    for forward, p1, p0 in ((True, sa, sb), (False, sb, sa)):
        je = _stats.projected_epsilon_expected(p1, p0, cert_n, level, delta)
        if not np.any(np.isfinite(je)):
            continue
        i = int(np.argmax(je))
        if not p1[i] > p0[i]:
            continue  # this direction favours the other side on this tail: not relevant
        eps_target = epsilon
        if eps_target is None and delta > 0:
            # the fitted tails' own ε at δ: the supremum over the scan of ln((p1 − δ)/p0)
            with np.errstate(divide="ignore", invalid="ignore"):
                pop = np.where(
                    (p1 > delta) & (p0 > 0),
                    np.log(np.maximum(p1 - delta, 1e-300)) - np.log(np.maximum(p0, 1e-300)),
                    -np.inf,
                )
            eps_target = float(np.max(pop)) if np.any(np.isfinite(pop)) else None
            if eps_target is not None:
                eps_target = max(eps_target, 0.0)
        jd = _stats.projected_delta(p1, p0, cert_n, level, eps_target) if eps_target is not None else None
        d_at_i = float(jd[i]) if jd is not None else float("nan")
        out.append((float(t[i]), forward, "epsilon at delta", float(je[i]), d_at_i, float(p1[i]), float(p0[i])))
        if jd is not None:
            j = int(np.argmax(jd))
            if jd[j] > 0 and j != i:
                out.append(
                    (float(t[j]), forward, "delta at epsilon", float(je[j]), float(jd[j]), float(p1[j]), float(p0[j]))
                )
    return out


# --------------------------------------------------------------------------- public


def _scalar(name: str, train) -> tuple[np.ndarray, bool]:
    arr = np.asarray(train)
    if (
        arr.dtype == object
        or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool)
        or np.issubdtype(arr.dtype, np.complexfloating)
    ):
        raise ParameterError(
            f"{name} has dtype {arr.dtype}; tail events need real scalar outputs (floats or integers)."
        )
    if arr.ndim > 1 and int(np.prod(arr.shape[1:])) != 1:
        raise ParameterError(
            f"{name} has shape {arr.shape}; tail events need one scalar output per sample (shape (n,))."
        )
    lattice = not np.issubdtype(arr.dtype, np.floating)
    x = arr.reshape(-1).astype(float)
    if len(x) == 0:
        raise ParameterError(f"{name} is empty; pass the training outputs of one side (at least one sample).")
    return x, lattice


def tail_candidates(
    train_a, train_b, *, max_events: int, delta: float, cert_n: int, confidence: float, epsilon: float | None = None
) -> list[TailCandidate]:
    """Tail events with the projection each was chosen by, best projected ε first (see the module doc).

    ``train_a``/``train_b``: training outputs of the two sides (scalars: floats or integers);
    ``delta``: the claim's δ (ε is projected at it); ``cert_n``: certification samples a side;
    ``confidence``: the audit's confidence; ``max_events``: the Bonferroni count the projection
    assumes (and the most events returned); ``epsilon``: the ε at which δ is projected (default:
    the fitted tails' own ε at ``delta``; none when ``delta`` is 0). Sides with fewer than 100
    outputs give no extrapolated tail (empirical thresholds only)."""
    max_events = _v.integer("max_events", max_events, minimum=1)
    delta = float(_v.probability("delta", delta, open_right=True))
    cert_n = _v.integer("cert_n", cert_n, minimum=1)
    confidence = float(_v.probability("confidence", confidence, open_left=True, open_right=True))
    if epsilon is not None:
        epsilon = float(_v.nonnegative("epsilon", epsilon))
        if not math.isfinite(epsilon):
            raise ParameterError(
                f"epsilon={epsilon!r} is not finite; pass the finite ε at which to project δ, or None."
            )
    xa, lat_a = _scalar("train_a", train_a)
    xb, lat_b = _scalar("train_b", train_b)
    return _candidates(
        xa,
        xb,
        lattice=lat_a and lat_b,
        max_events=max_events,
        delta=delta,
        cert_n=cert_n,
        confidence=confidence,
        epsilon=epsilon,
    )


def _candidates(
    xa: np.ndarray,
    xb: np.ndarray,
    *,
    lattice: bool,
    max_events: int,
    delta: float,
    cert_n: int,
    confidence: float,
    epsilon: float | None,
) -> list[TailCandidate]:
    na, nb = len(xa), len(xb)
    level = _stats.bonferroni_level(confidence, max_events)
    fa, fb = xa[np.isfinite(xa)], xb[np.isfinite(xb)]
    pooled = np.concatenate([fa, fb])
    if len(pooled) == 0:
        return []
    scale = float(np.std(pooled))
    res = _resolution(scale)
    raw: list[tuple] = []
    for upper in (True, False):
        sign = 1.0 if upper else -1.0
        a, b = np.sort(sign * fa), np.sort(sign * fb)
        inf_a = float(np.count_nonzero(sign * xa == np.inf)) / na
        inf_b = float(np.count_nonzero(sign * xb == np.inf)) / nb
        for t, fwd, objective, pe, pd, p1, p0 in _upper_tail_candidates(
            a,
            b,
            na,
            nb,
            inf_a,
            inf_b,
            lattice=lattice,
            scale=scale,
            delta=delta,
            epsilon=epsilon,
            cert_n=cert_n,
            level=level,
        ):
            raw.append((pe, upper, _round(sign * t, res, lattice), fwd, objective, pd, p1, p0))
    raw.sort(key=lambda r: -r[0])
    out: list[TailCandidate] = []
    seen: set = set()
    for pe, upper, t, fwd, objective, pd, p1, p0 in raw:
        if (upper, t) in seen:
            continue
        seen.add((upper, t))
        shown = int(t) if lattice else t
        out.append(
            TailCandidate(
                event=Event.threshold(shown, upper),
                threshold=t,
                upper=upper,
                forward=fwd,
                objective=objective,
                projected_epsilon=pe,
                projected_delta=pd,
                p_numerator=p1,
                p_denominator=p0,
            )
        )
        if len(out) >= max_events:
            break
    return out


def propose_tail_events(
    train_a, train_b, *, max_events: int, delta: float, cert_n: int, confidence: float, epsilon: float | None = None
) -> list[Event]:
    """Half-line events ``output >= t`` / ``output <= t`` in both tails, for each direction that the
    fitted tails favour, with t chosen to maximise the projected certified ε at ``delta`` (and δ at
    the fitted ε, where a positive δ is projected) for ``cert_n`` certification samples a side at
    ``confidence`` with ``max_events`` candidates union-bounded (see the module doc; at most
    ``max_events`` events, typically 2 to 4). ``epsilon`` (optional): the claim's ε, at which δ is
    then projected instead of at the fitted ε — the threshold that best tests the claim itself.
    Only training outputs choose the events."""
    return [
        c.event
        for c in tail_candidates(
            train_a, train_b, max_events=max_events, delta=delta, cert_n=cert_n, confidence=confidence, epsilon=epsilon
        )
    ]
