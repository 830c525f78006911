"""Exact output laws of mechanisms declared from parts, every family: the brute-force oracle's second engine.

Test support for ``tests/test_soundness_property.py``. ``tests/_exact_truth.py`` handles structures whose
every output coordinate is grid noise around a data-dependent centre (then a pair's privacy depends only
on the shifts of the centres). This module handles every family and combinator: selection, threshold,
grouping (with contribution bounding), sampling, repeat, iterate, truncated noise and the record-wise
maps. Like the first engine it shares no code with the library's law (``dpharness.mechanisms.parts._law``
and the families' ``leaf``/``_law`` helpers) or prover: it reads the public fields of the step structure
and is its own interpreter of what the sampler executes, from each part's documented algorithm:

* transformations as in ``_exact_truth`` (exact Fractions), plus ``map_records`` (the user function
  called on the float record, made total by the documented rule: a raise or a wrong length gives the
  all-zero record, NaN 0, ±∞ ± the largest double), ``clip_norm`` (one column or ``linf``: a clamp;
  ``l1`` exactly in rationals; ``l2`` by the float formula; a record whose clipping is not exact marks
  the data set *inexact*: a rounding to a grid within 2^-30 of a boundary then drops the data set) and
  ``quantile_score`` (u(c) = −|(1 − α)#{x < c} − α#{x > c}|, exact);
* the law of one data set is a product of independent *blocks* (in output order): :class:`Shift` (grid
  noise, discrete Laplace or Gaussian, around an integer centre), :class:`Finite` (a finite law, every
  probability enclosed in [lo, hi]), :class:`Select` (one group-by key: not released, or its noisy
  count >= T, with the key's per-key parts) and :class:`Mixture` (a mixture, with exact weights, of
  products of the other blocks: a random subsample, a random contribution bounding);
* selection: the exponential mechanism and its peeling top-k (exact products of softmax factors, mpmath),
  permute-and-flip (an average over every visiting order, each order's law a product of flips), report
  noisy max with discrete Laplace noise (a sum over the noisy maximum y of products of discrete Laplace
  pmfs and cdfs, y over a window, the rest of the mass enclosed by the tail of the winner's noise);
  above threshold: each answer pattern by a sum over the threshold noise r (window, tail enclosed);
  partition selection: the discrete Laplace tail formula; Poisson subsampling: a mixture over every
  subset (weights q^|S|(1 − q)^(n − |S|)); sampling without replacement: uniform over the m-subsets (a
  data set with fewer than m records gives the outcome "raise"); contribution bounding: a mixture over
  every visiting order of every user's records (each order equally likely), the kept records by the
  documented walk (a key among the first ℓ met, among the first m of its key, the first k such);
  iterate: the rounds' Markov chain over a finite state space (the update functions drawn by the test
  carry their breakpoints, ``breaks``), releasing the final state or the transcript of the release
  cells (the grid values −6..6 and the breakpoints, the same on every data set, and two tails: a
  post-processing of the releases, so a lower bound).

Data sets (:func:`enumerate_pairs`): every multiset of up to 3 records (fewer when the record grid is
large) from a small grid of values, and the pairs at distance 1..k under the relation (records added
and removed, substituted at a declared size, or whole users added: users hold 1-2 records under
distinct ids).

For a neighbouring pair (both directions) each block gives its own comparison (:class:`PairStats`): the
shift of two grid noises (exact closed forms of ``_exact_truth``), or the probabilities of a finite
partition of its outcomes under both laws (lower ends on the side whose privacy loss is measured, upper
ends on the other), merging outcomes only where that is post-processing (tails of discrete Laplace
noise beyond every centre are merged without loss: the likelihood ratio is constant there; grid values
of a mixture's coordinate are merged into blocks when there are more than 256). From them:
pure ε (Σ of the blocks' largest log-ratios), Rényi D_α (Σ over blocks), and δ(ε) = E_P[(1 − e^(ε − L))+]
of the product (losses rounded down to a grid, masses lower ends; outcomes impossible on the other side
count fully). Every quantity is therefore a rigorous LOWER bound on the mechanism's true parameter over
the enumerated pairs (floating point: every probability computed in floats is widened by 1e-9 relative,
every loss lowered before rounding). :func:`event_probabilities` and :func:`point_probability` enclose
the probability of a REFUTED witness's event or output on one data set (outcomes enumerated over a
window of each noise, the mass outside it added to the upper end).
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from _exact_truth import (
    Noise,
    _floor_index,
    _gaussian_log_z_upper,
    _gaussian_pld,
    _laplace_pld,
    _renyi_coordinate,
    _transform,
)

from dpharness import AddRemove, RealBox, Substitute
from dpharness.mechanisms import parts as dp
from dpharness.mechanisms.parts import grouping as _grouping
from dpharness.mechanisms.parts import selection as _selection
from dpharness.mechanisms.parts import threshold as _threshold

__all__ = [
    "Shift",
    "Finite",
    "Select",
    "Mixture",
    "law_of",
    "family_truth",
    "FamilyTruth",
    "event_probabilities",
    "point_probability",
    "PairTruth",
    "enumerate_pairs",
    "Ambiguous",
]

REL = 1e-9  # relative widening of every probability computed in floats
_MAX_UNITS = 2**52
_MAX_DOUBLE = float(np.finfo(float).max)
_MAX_CELLS = 200_000  # joint cells of one mixture comparison
_BINS = 2**13
_H_MIN = 2.0**-12


class Ambiguous(Exception):
    """A data set whose law the oracle cannot pin down exactly (an inexact clipping near a grid boundary):
    dropped from the enumeration (a subset of the pairs still gives a lower bound)."""


# --------------------------------------------------------------------------- noise pmfs, enclosed


def _lo(x: float) -> float:
    return x * (1 - REL)


def _hi(x: float) -> float:
    return x * (1 + REL)


class _Lap:
    """Discrete Laplace P(k) = (1 − q)/(1 + q) q^|k|, q = e^{−1/t} (floats, log space)."""

    def __init__(self, t: Fraction) -> None:
        self.t = t
        self.a = float(1 / Fraction(t))
        self.log1pq = math.log1p(math.exp(-self.a))
        self.log_norm = math.log(-math.expm1(-self.a)) - self.log1pq

    def log_pmf(self, k: np.ndarray) -> np.ndarray:
        return self.log_norm - np.abs(np.asarray(k, dtype=float)) * self.a

    def log_le(self, x: np.ndarray) -> np.ndarray:
        """ln P(K <= x), integer x."""
        x = np.asarray(x, dtype=float)
        out = np.empty_like(x)
        neg = x < 0
        out[neg] = x[neg] * self.a - self.log1pq
        with np.errstate(divide="ignore"):
            out[~neg] = np.log(-np.expm1(-(x[~neg] + 1) * self.a - self.log1pq))
        return out

    def log_ge(self, x: np.ndarray) -> np.ndarray:
        return self.log_le(-np.asarray(x, dtype=float))

    def _pos(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """P(a <= K <= b) for 0 <= a (b may be inf; 0 where a > b)."""
        with np.errstate(invalid="ignore", over="ignore"):
            n = b - a + 1
            fac = np.where(np.isinf(b), 1.0, -np.expm1(-np.where(np.isinf(b), 1.0, n) * self.a))
            out = np.exp(-a * self.a - self.log1pq) * fac
        return np.where(a > b, 0.0, out)

    def intervals(self, k1: np.ndarray, k2: np.ndarray) -> np.ndarray:
        """P(k1 <= K <= k2) elementwise (integers or ±inf)."""
        k1, k2 = np.asarray(k1, dtype=float), np.asarray(k2, dtype=float)
        a = k1 >= 0
        b = k2 < 0
        c = ~a & ~b
        out = np.zeros(np.broadcast(k1, k2).shape)
        out[a] = self._pos(k1[a], k2[a])
        out[b] = self._pos(-k2[b], -k1[b])
        out[c] = self._pos(np.ones(c.sum()), -k1[c]) + self._pos(np.zeros(c.sum()), k2[c])
        return out

    def interval(self, k1: float, k2: float) -> float:
        """P(k1 <= K <= k2) (integers or ±inf), by the geometric series on each side of 0."""
        if k1 > k2:
            return 0.0
        if k2 < 0:
            return self.interval(-k2, -k1)
        if k1 < 0:
            return self.interval(1, -k1) + self.interval(0, k2)
        head = -k1 * self.a - self.log1pq  # q^k1/(1 + q) = P(K >= k1)
        if k2 == math.inf:
            return math.exp(head)
        return math.exp(head + math.log(-math.expm1(-(k2 - k1 + 1) * self.a)))


class _Gauss:
    """Discrete Gaussian P(y) ∝ e^{−y²/(2τ²)}: pmf and tails enclosed (the normaliser between
    √(2πτ²) and its Poisson-summation upper bound; tails by sum–integral comparison)."""

    def __init__(self, tau2: Fraction) -> None:
        self.tau2 = float(tau2)
        self.tau = math.sqrt(self.tau2)
        self.log_z_hi = _gaussian_log_z_upper(self.tau2)
        self.log_z_lo = 0.5 * math.log(2 * math.pi * self.tau2)

    def pmf(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        e = -(np.asarray(y, dtype=float) ** 2) / (2 * self.tau2)
        return np.exp(e - self.log_z_hi), np.exp(e - self.log_z_lo)

    def _ge_pos(self, m: int) -> tuple[float, float]:
        """P(Y >= m), m >= 1: ∫_m^∞ f / Z_hi <= . <= ∫_{m−1}^∞ f / Z_lo."""
        c = math.sqrt(2 * math.pi * self.tau2) / 2
        s = self.tau * math.sqrt(2)
        return (
            c * math.erfc(m / s) * math.exp(-self.log_z_hi),
            min(1.0, c * math.erfc((m - 1) / s) * math.exp(-self.log_z_lo)),
        )

    def ge(self, m: int) -> tuple[float, float]:
        if m >= 1:
            return self._ge_pos(m)
        lo, hi = self._ge_pos(1 - m)  # P(Y >= m) = 1 − P(Y <= m − 1) = 1 − P(Y >= 1 − m)
        return max(0.0, 1 - hi), 1 - lo

    def le(self, m: int) -> tuple[float, float]:
        return self.ge(-m)

    def _integral(self, a: float, b: float) -> tuple[float, float]:
        """[lo, hi] around ∫_a^b e^{−x²/(2τ²)} dx, 0 <= a <= b (b may be inf), from erfc differences."""
        c = math.sqrt(2 * math.pi * self.tau2) / 2
        s = self.tau * math.sqrt(2)
        ea = math.erfc(a / s)
        eb = 0.0 if b == math.inf else math.erfc(b / s)
        err = 4e-16 * ea + 1e-300
        return max(0.0, c * (ea - eb - err)), c * (ea - eb + err)

    def interval(self, y1: float, y2: float) -> tuple[float, float]:
        """[lo, hi] around P(y1 <= Y <= y2) (integers or ±inf)."""
        if y1 > y2:
            return 0.0, 0.0
        if y2 < 0:
            return self.interval(-y2, -y1)
        if y1 < 0:
            a = self.interval(1, -y1)
            b = self.interval(0, y2)
            return a[0] + b[0], min(1.0, a[1] + b[1])
        if y2 - y1 <= 64:
            lo, hi = self.pmf(np.arange(y1, y2 + 1, dtype=float))
            return float(lo.sum()), min(1.0, float(hi.sum()))
        # f decreasing on [0, ∞): ∫_{y1}^{y2+1} f <= Σ_{y1}^{y2} f(y) <= f(y1) + ∫_{y1}^{y2} f
        lo = self._integral(y1, y2 + 1)[0]
        f1 = math.exp(-y1 * y1 / (2 * self.tau2))
        hi = f1 + self._integral(y1, y2)[1]
        return lo * math.exp(-self.log_z_hi), min(1.0, hi * math.exp(-self.log_z_lo))


# --------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class Shift:
    """One output coordinate g·(centre + N), N the integer noise ``noise``."""

    noise: Noise
    g: Fraction
    centre: int

    width = 1


@dataclass(frozen=True)
class Finite:
    """A finite law over outcomes (tuples of ``width`` floats), each probability in [lo, hi]."""

    table: tuple  # ((outcome, lo, hi), ...) sorted by outcome
    width: int

    @staticmethod
    def of(rows: dict, width: int) -> "Finite":
        """From {outcome: (lo, hi)}."""
        return Finite(tuple(sorted((k, float(v[0]), float(v[1])) for k, v in rows.items())), width)

    def as_dict(self) -> dict:
        return {k: (lo, hi) for k, lo, hi in self.table}


@dataclass(frozen=True)
class Select:
    """One encoded group-by key: count ``count`` (distinct units), threshold T, discrete Laplace scale t;
    when released (count + K >= T) the key's per-key parts follow (Shift blocks), else 0s."""

    t: Fraction
    T: int
    count: int
    parts: tuple  # Shift blocks (the part's coordinates on this key's records)

    @property
    def width(self) -> int:
        return 1 + len(self.parts)


@dataclass(frozen=True)
class Mixture:
    """Σ_i w_i · (product of the blocks ``comps[i][1]``), exact weights summing to 1."""

    comps: tuple  # ((weight Fraction, blocks tuple), ...)

    @property
    def width(self) -> int:
        return sum(b.width for b in self.comps[0][1])


def _mixture(items: list) -> Mixture:
    """A Mixture from (weight, blocks) pairs, equal components merged."""
    acc: dict = {}
    for w, blocks in items:
        acc[blocks] = acc.get(blocks, Fraction(0)) + w
    comps = tuple(sorted(((w, b) for b, w in acc.items()), key=lambda x: repr(x[1])))
    return Mixture(comps)


# --------------------------------------------------------------------------- the interpreter


@dataclass
class _Ctx:
    state: Any = None  # the iterate state (a tuple of floats) the map functions see
    inexact: bool = False  # some value is a float approximation of the exact clipping


def _fr(x: Any) -> Fraction:
    return Fraction(x.item() if isinstance(x, np.generic) else x)


def _records_array(value: list) -> np.ndarray:
    """Records (tuples of Fractions) as the float array the sampler holds: one column as 1-D."""
    if not value:
        return np.zeros(0)
    width = len(value[0])
    arr = np.array([[float(x) for x in r] for r in value], dtype=float)
    return arr[:, 0] if width == 1 else arr


def _map_records(t: Any, value: list, ctx: _Ctx) -> list:
    out = []
    cols = int(t.columns)
    for r in value:
        rec = np.float64(float(r[0])) if len(r) == 1 else np.array([float(x) for x in r], dtype=float)
        try:
            with np.errstate(all="ignore"):
                got = t.fn(rec) if ctx.state is None else t.fn(np.array(ctx.state, dtype=float), rec)
                row = np.asarray(got, dtype=float).ravel()
        except Exception:  # noqa: BLE001 - the documented total rule: a failing call is the all-zero record
            row = np.zeros(cols)
        if row.shape != (cols,):
            row = np.zeros(cols)
        row = np.nan_to_num(row, nan=0.0, posinf=_MAX_DOUBLE, neginf=-_MAX_DOUBLE)
        out.append(tuple(Fraction(float(x)) for x in row))
    return out


def _clip_norm(t: Any, value: list, ctx: _Ctx, one_d: bool) -> list:
    b = Fraction(float(t.bound))
    out = []
    for r in value:
        if one_d or t.norm == "linf":
            out.append(tuple(min(max(x, -b), b) for x in r))
            continue
        if t.norm == "l1":
            n = sum(abs(x) for x in r)
            if n <= b:
                out.append(r)
            else:
                ctx.inexact = True
                out.append(tuple(x * b / n for x in r))
            continue
        n2 = sum(x * x for x in r)
        if n2 <= b * b:
            out.append(r)
        else:
            ctx.inexact = True
            s = float(b) / math.sqrt(float(n2))
            out.append(tuple(Fraction(float(x) * s) for x in r))
    return out


def _quantile_score(t: Any, value: list) -> tuple:
    a = Fraction(t.alpha)
    xs = [r[0] for r in value]
    out = []
    for c in t.candidates:
        cf = Fraction(float(c))
        lt = sum(1 for x in xs if x < cf)
        gt = sum(1 for x in xs if x > cf)
        out.append(-abs((1 - a) * lt - a * gt))
    return tuple(out)


def _apply(t: Any, value: Any, ctx: _Ctx, one_d: bool) -> Any:
    if isinstance(t, dp.MapRecords):
        return _map_records(t, value, ctx)
    if isinstance(t, dp.ClipNorm):
        return _clip_norm(t, value, ctx, one_d)
    if isinstance(t, _selection.QuantileScore):
        return _quantile_score(t, value)
    if ctx.inexact and isinstance(t, (dp.Histogram, dp.Clamp)):
        raise TypeError("a comparison after an inexact clipping: not supported by the brute force")
    return _transform(t, value)


def _one_d_after(t: Any, value: Any, one_d: bool) -> bool:
    """Whether records after ``t`` are one-dimensional arrays in the sampler (scalars per record)."""
    if isinstance(t, dp.Column):
        return True
    if isinstance(t, dp.MapRecords):
        return int(t.columns) == 1
    return one_d


def _round(v: Fraction, g: Fraction, ctx: _Ctx) -> int:
    x = v / g + Fraction(1, 2)
    c = math.floor(x)
    if ctx.inexact:
        frac = x - c
        tol = Fraction(1, 2**30) * max(Fraction(1), abs(x))
        if frac < tol or 1 - frac < tol:
            raise Ambiguous(f"{float(v)!r} within 2^-30 of a rounding boundary of the grid {g}")
    return max(-_MAX_UNITS, min(_MAX_UNITS, c))


def _coords(value: Any) -> list:
    return list(value) if isinstance(value, tuple) else [value]


def _noise_blocks(step: Any, value: Any, ctx: _Ctx) -> tuple:
    if isinstance(value, list):
        raise TypeError("noise applied to records; aggregate first")
    g = _fr(step.granularity)
    if isinstance(step, dp.GridLaplace):
        noise = Noise("laplace", _fr(step.scale) / g)
    else:
        noise = Noise("gaussian", (_fr(step.sigma) / g) ** 2)
    return tuple(Shift(noise, g, _round(Fraction(v), g, ctx)) for v in _coords(value))


def _is_identity_post(step: Any) -> bool:
    return isinstance(step, dp.Post) and getattr(step.fn, "_exact_injective", False)


def _clip_post(step: Any) -> tuple | None:
    """(lo, hi) of truncated_geometric's clip, or None."""
    if not (isinstance(step, dp.Post) and step.vectorized and getattr(step.fn, "__name__", "") == "clip"):
        return None
    env = inspect.getclosurevars(step.fn).nonlocals
    return Fraction(env["lo_f"]), Fraction(env["hi_f"])


def _post(step: Any, blocks: tuple) -> tuple:
    if _is_identity_post(step):
        return blocks
    if isinstance(step, dp.Chain):
        return _post(step.second, _post(step.first, blocks))
    clip = _clip_post(step)
    if clip is not None:
        return tuple(_clipped(b, *clip) for b in blocks)
    raise TypeError(f"unsupported post-processing for the brute force: {step!r}")


def _clipped(b: Any, lo: Fraction, hi: Fraction) -> Finite:
    """clip(g·(c + K), lo, hi) for one grid Laplace coordinate with g = 1."""
    if not (isinstance(b, Shift) and b.noise.kind == "laplace" and b.g == 1 and hi - lo <= 64):
        raise TypeError("truncated noise: the brute force reads a discrete Laplace coordinate with a short range")
    lap = _Lap(b.noise.param)
    c = b.centre
    a, z = math.floor(lo), math.ceil(hi)
    rows = {}
    p = math.exp(float(lap.log_le(np.array([a - c]))[0]))
    rows[(float(lo),)] = (_lo(p), _hi(p))
    for y in range(a + 1, z):
        if lo < y < hi:
            p = math.exp(float(lap.log_pmf(np.array([y - c]))[0]))
            rows[(float(y),)] = (_lo(p), _hi(p))
    p = math.exp(float(lap.log_ge(np.array([z - c]))[0]))
    rows[(float(hi),)] = (_lo(p), _hi(p))
    return Finite.of(rows, 1)


def _run(step: Any, value: Any, ctx: _Ctx, one_d: bool) -> tuple:
    """The blocks of the randomized ``step`` on ``value`` (records: a list of tuples; aggregates:
    Fractions or tuples of Fractions)."""
    if isinstance(step, (dp.GridLaplace, dp.GridGaussian)):
        return _noise_blocks(step, value, ctx)
    if isinstance(step, dp.Chain):
        first = step.first
        if isinstance(first, _grouping.BoundContributions):
            return _bounded(step, value, ctx)
        if isinstance(first, dp.PoissonSample):
            return _poisson(first, step.second, value, ctx, one_d)
        if isinstance(first, dp.FixedSample):
            return _fixed(first, step.second, value, ctx, one_d)
        if isinstance(first, dp.Transformation):
            return _run(step.second, _apply(first, value, ctx, one_d), ctx, _one_d_after(first, value, one_d))
        return _post(step.second, _run(first, value, ctx, one_d))
    if isinstance(step, dp.Compose):  # each part sees the value as it is here (its own inexactness)
        return tuple(b for p in step.parts for b in _run(p, value, _Ctx(ctx.state, ctx.inexact), one_d))
    if isinstance(step, dp.Parallel):
        by = int(step.by)
        out = []
        for key in step.keys:
            k = Fraction(float(key))
            out.extend(_run(step.part, [r for r in value if r[by] == k], _Ctx(ctx.state, ctx.inexact), one_d))
        return tuple(out)
    if isinstance(step, dp.Repeat):
        return _run(step.part, value, ctx, one_d) * int(step.times)
    if isinstance(step, dp.Iterate):
        return (_iterate(step, value, ctx, one_d),)
    if isinstance(step, _selection.ExponentialSelection):
        return (_exponential(step, value),)
    if isinstance(step, _selection.NoisyMaxExponential):
        return (_permute_and_flip(step, value),)
    if isinstance(step, _selection.NoisyMaxLaplace):
        return (_noisy_max_laplace(step, value, ctx),)
    if isinstance(step, _threshold.AboveThreshold):
        return (_above_threshold(step, value, ctx, one_d),)
    if isinstance(step, _grouping.GroupBy):
        return _group_by(step, value, None, ctx, one_d)
    raise TypeError(f"unsupported step for the brute force: {step!r}")


# ---- selection


def _labelled(i: int, labels: Any) -> float:
    return float(labels[i]) if labels is not None else float(i)


def _utilities(value: Any) -> list:
    return [Fraction(v) for v in _coords(value)]


def _exponential(step: Any, value: Any) -> Finite:
    """P(i_1..i_k) = Π_m e^{u_{i_m}/s} / Σ_{j not yet drawn} e^{u_j/s} (peeling; k = 1: softmax)."""
    u = _utilities(value)
    s = Fraction(step.scale)
    k = int(step.k)
    rows = {}
    with mpmath.workdps(40):
        w = [mpmath.exp(mpmath.mpf(x.numerator) / x.denominator / (mpmath.mpf(s.numerator) / s.denominator)) for x in u]
        for combo in itertools.permutations(range(len(u)), k):
            p = mpmath.mpf(1)
            left = set(range(len(u)))
            for i in combo:
                p *= w[i] / sum(w[j] for j in left)
                left.discard(i)
            pf = float(p)
            rows[tuple(_labelled(i, step.labels) for i in combo)] = (_lo(pf), _hi(pf))
    return Finite.of(rows, k)


def _permute_and_flip(step: Any, value: Any) -> Finite:
    """Every visiting order equally likely; in an order the first index whose flip succeeds
    (probability e^{−(max u − u_i)/s}) wins (the maximum always succeeds)."""
    u = _utilities(value)
    s = Fraction(step.scale)
    top = max(u)
    n = len(u)
    probs = [mpmath.mpf(0)] * n
    with mpmath.workdps(40):
        p = [
            mpmath.exp(
                -mpmath.mpf((top - x).numerator) / (top - x).denominator / (mpmath.mpf(s.numerator) / s.denominator)
            )
            for x in u
        ]
        perms = list(itertools.permutations(range(n)))
        for order in perms:
            alive = mpmath.mpf(1)
            for i in order:
                probs[i] += alive * p[i] / len(perms)
                alive *= 1 - p[i]
        rows = {(_labelled(i, step.labels),): (_lo(float(probs[i])), _hi(float(probs[i]))) for i in range(n)}
    return Finite.of(rows, 1)


def _noisy_max_laplace(step: Any, value: Any, ctx: _Ctx) -> Finite:
    """P(i) = Σ_y P(K = y − c_i) Π_{j<i} P(K <= y − c_j − 1) Π_{j>i} P(K <= y − c_j): the first index
    of the largest c_j + K_j; y over a window, the winner's noise outside it enclosing the rest."""
    g = _fr(step.granularity)
    t = _fr(step.scale) / g
    c = [_round(x, g, ctx) for x in _utilities(value)]
    lap = _Lap(t)
    w = math.ceil(40 * float(t)) + 2
    y = np.arange(min(c) - w, max(c) + w + 1, dtype=float)
    rows = {}
    for i, ci in enumerate(c):
        lp = lap.log_pmf(y - ci)
        for j, cj in enumerate(c):
            if j != i:
                lp = lp + lap.log_le(y - cj - (1 if j < i else 0))
        inside = float(np.exp(lp).sum())
        tail = math.exp(float(lap.log_le(np.array([y[0] - 1 - ci]))[0])) + math.exp(
            float(lap.log_ge(np.array([y[-1] + 1 - ci]))[0])
        )
        rows[(_labelled(i, step.labels),)] = (_lo(inside), _hi(inside + tail))
    return Finite.of(rows, 1)


# ---- threshold


def _answers(step: Any, value: Any, ctx: _Ctx, one_d: bool) -> list:
    if step.queries is None:
        return _utilities(value)
    out = []
    for q in step.queries:
        if isinstance(q, _threshold.UserQuery):
            a = q.fn(_records_array(value))
            a = a.item() if isinstance(a, np.generic) else a
            if isinstance(a, np.ndarray):
                a = a.reshape(-1)[0].item()
            out.append(Fraction(a))
            continue
        v, od = value, one_d
        node = q
        while isinstance(node, dp.Chain):
            v = _apply(node.first, v, ctx, od)
            od = _one_d_after(node.first, v, od)
            node = node.second
        v = _apply(node, v, ctx, od)
        (a,) = _coords(v)
        out.append(Fraction(a))
    return out


def _patterns(n: int, c: int) -> list:
    rows: list = []

    def walk(prefix: list, tops: int) -> None:
        if tops == c:
            rows.append(prefix + [-1] * (n - len(prefix)))
            return
        if len(prefix) == n:
            rows.append(prefix)
            return
        walk(prefix + [1], tops + 1)
        walk(prefix + [0], tops)

    walk([], 0)
    return rows


def _above_threshold(step: Any, value: Any, ctx: _Ctx, one_d: bool) -> Finite:
    """Lyu, Su & Li 2017 Alg. 1 on the grid: answer i is 1 iff c_i + ν_i >= T_g + ρ, −1 after the c-th 1.
    P(pattern) = Σ_r P(ρ = r) Π_{answered} (P(ν >= T_g + r − c_i) or P(ν < T_g + r − c_i))."""
    g = _fr(step.granularity)
    tr, tn = _fr(step.scale) / g, _fr(step.query_scale) / g
    cs = [_round(a, g, ctx) for a in _answers(step, value, ctx, one_d)]
    Tg = math.floor(Fraction(step.threshold) / g + Fraction(1, 2))
    rho, nu = _Lap(tr), _Lap(tn)
    gaps = [ci - Tg for ci in cs]
    w = math.ceil(40 * float(max(tr, tn))) + 2
    r = np.arange(min(0, min(gaps)) - w, max(0, max(gaps)) + w + 1, dtype=float)
    log_rho = rho.log_pmf(r)
    tail = math.exp(float(rho.log_le(np.array([r[0] - 1]))[0])) + math.exp(float(rho.log_ge(np.array([r[-1] + 1]))[0]))
    rows = {}
    for pat in _patterns(len(cs), int(step.c)):
        lp = log_rho.copy()
        for ci, a in zip(cs, pat):
            z = Tg + r - ci  # ⊤ iff ν >= z
            if a == 1:
                lp = lp + nu.log_ge(z)
            elif a == 0:
                lp = lp + nu.log_le(z - 1)
        inside = float(np.exp(lp).sum())
        rows[tuple(float(a) for a in pat)] = (_lo(inside), _hi(inside + tail))
    return Finite.of(rows, len(cs))


# ---- grouping


def _group_by(step: Any, value: list, user: int | None, ctx: _Ctx, one_d: bool) -> tuple:
    """One Select block per encoded key: the count of records (``user`` None) or of distinct users under
    the key, and the part's blocks on the key's records."""
    by = int(step.by)
    t = Fraction(step.select.scale)
    T = math.ceil(Fraction(step.select.threshold))
    out = []
    for key in step.keys:
        k = Fraction(float(key))
        recs = [r for r in value if r[by] == k]
        count = len(recs) if user is None else len({r[user] for r in recs})
        parts = () if step.part is None else _run(step.part, recs, ctx, one_d)
        out.append(Select(t, T, count, parts))
    return tuple(out)


def _kept(records: list, order: tuple, b: Any) -> list:
    """The records one user keeps in this visiting order (the documented walk)."""
    met: list = []
    for i in order:
        key = records[i][int(b.by)]
        if key not in met:
            met.append(key)
    ell = b.max_partitions
    allowed = set(met if ell is None else met[: int(ell)])
    seen_of: Counter = Counter()
    eligible = []
    for i in order:
        key = records[i][int(b.by)]
        if key in allowed and seen_of[key] < int(b.max_per_partition):
            eligible.append(i)
        seen_of[key] += 1
    return [records[i] for i in eligible[: int(b.max_records)]]


def _bounded(step: Any, value: list, ctx: _Ctx) -> tuple:
    b, rest = step.first, step.second
    g, post = (rest.first, rest.second) if isinstance(rest, dp.Chain) else (rest, None)
    users: dict = {}
    for r in value:
        users.setdefault(r[int(b.user)], []).append(r)
    per_user = []
    for recs in users.values():
        dist: dict = {}
        perms = list(itertools.permutations(range(len(recs))))
        for order in perms:
            kept = tuple(sorted(_kept(recs, order, b)))
            dist[kept] = dist.get(kept, Fraction(0)) + Fraction(1, len(perms))
        per_user.append(list(dist.items()))
    items = []
    for combo in itertools.product(*per_user) if per_user else [()]:
        w = Fraction(1)
        kept: list = []
        for recs, wu in combo:
            w *= wu
            kept.extend(recs)
        blocks = _group_by(g, kept, int(b.user), ctx, False)
        items.append((w, blocks))
    out = (_mixture(items),)
    return out if post is None else _post(post, out)


# ---- sampling


def _poisson(sample: Any, rest: Any, value: list, ctx: _Ctx, one_d: bool) -> tuple:
    q = Fraction(sample.rate)
    n = len(value)
    acc: dict = {}
    for mask in itertools.product((0, 1), repeat=n):
        k = sum(mask)
        w = q**k * (1 - q) ** (n - k)
        if w == 0:
            continue
        kept = tuple(sorted(r for r, keep in zip(value, mask) if keep))
        acc[kept] = acc.get(kept, Fraction(0)) + w
    items = [(w, _run(rest, list(kept), ctx, one_d)) for kept, w in acc.items()]
    return (_mixture(items),)


def _fixed(sample: Any, rest: Any, value: list, ctx: _Ctx, one_d: bool) -> tuple:
    m = int(sample.size)
    n = len(value)
    if n < m:
        return (Finite.of({("raise",): (1.0, 1.0)}, 1),)
    subsets = list(itertools.combinations(range(n), m))
    acc: dict = {}
    for s in subsets:
        kept = tuple(sorted(value[i] for i in s))
        acc[kept] = acc.get(kept, Fraction(0)) + Fraction(1, len(subsets))
    items = [(w, _run(rest, list(kept), ctx, one_d)) for kept, w in acc.items()]
    return (_mixture(items),)


# ---- iterate


def _release_cells(blocks: tuple, step: Any) -> list:
    """[(release value passed to update, outcome, lo, hi)] for one round's scalar release, over cells on
    which the update is constant (the test's update functions carry their breakpoints, ``breaks``):
    output="state", the intervals between breakpoints (the final state depends on nothing else);
    output="releases", those refined by the grid values −6..6 (the same cells on every data set: the
    transcript of cells is a post-processing of the releases, so its divergence is a lower bound)."""
    (b,) = blocks
    if isinstance(b, Mixture) and all(len(c[1]) == 1 and isinstance(c[1][0], Finite) for c in b.comps):
        merged: dict = {}
        for w, (f,) in b.comps:
            for k, lo, hi in f.table:
                a, z = merged.get(k, (0.0, 0.0))
                merged[k] = (a + float(w) * lo, z + float(w) * hi)
        b = Finite.of({k: (_lo(lo), min(1.0, _hi(hi))) for k, (lo, hi) in merged.items()}, b.comps[0][1][0].width)
    if isinstance(b, Finite):
        if b.width != 1:
            raise TypeError("iterate: the brute force reads one released number per round")
        return [(k[0], k, lo, hi) for k, lo, hi in b.table]
    comps = [(Fraction(1), (b,))] if isinstance(b, Shift) else list(b.comps)
    if any(len(c[1]) != 1 or not isinstance(c[1][0], Shift) for c in comps):
        raise TypeError("iterate: the brute force reads one released grid number per round")
    shifts = [c[1][0] for c in comps]
    g = shifts[0].g
    breaks = getattr(step.update, "breaks", None)
    if breaks is None:
        raise TypeError("iterate: the update carries no breakpoints (breaks=...)")
    marks = tuple(sorted({m for x in breaks for m in (math.floor(Fraction(x) / g), math.floor(Fraction(x) / g) + 1)}))
    if step.output == "state":
        bounds = marks or (0,)
    else:  # the same cells on every data set (a post-processing of the releases): grid values −6..6 and the marks
        bounds = tuple(sorted(set(marks) | set(range(-6, 8))))
    partition = ("shift", bounds)
    lo = np.zeros(len(bounds) + 1)
    hi = np.zeros(len(bounds) + 1)
    for wgt, (s,) in comps:
        plo, phi = _shift_cells(s, partition)
        lo += float(wgt) * plo
        hi += float(wgt) * phi
    reps = [bounds[0] - 1] + list(bounds)  # a grid value inside each cell
    return [(float(r * g), ((i, len(bounds)),), lo[i], hi[i]) for i, r in enumerate(reps)]


def _iterate(step: Any, value: Any, ctx: _Ctx, one_d: bool) -> Finite:
    """Rounds of ``part``, each on the current state; after each, state = update(state, release).
    Outcome: the final state (output="state") or the transcript of release cells (output="releases").
    A round's law depends on the state only, and the next state on (state, cell) only: both cached."""
    cells_of: dict = {}
    next_of: dict = {}

    def cells(state: tuple) -> list:
        if state not in cells_of:
            sub = _Ctx(state=state, inexact=ctx.inexact)
            cells_of[state] = _release_cells(_run(step.part, value, sub, one_d), step)
            ctx.inexact = ctx.inexact or sub.inexact
        return cells_of[state]

    def nxt_state(state: tuple, rel: float) -> tuple:
        if (state, rel) not in next_of:
            got = np.asarray(step.update(np.array(state), np.float64(rel)), dtype=float).ravel()
            next_of[(state, rel)] = tuple(float(x) for x in got)
        return next_of[(state, rel)]

    dist = {(tuple(float(x) for x in step.init), ()): (1.0, 1.0)}
    for _ in range(int(step.times)):
        nxt: dict = {}
        for (state, trail), (plo, phi) in dist.items():
            for rel, outcome, lo, hi in cells(state):
                key = (nxt_state(state, rel), trail + outcome if step.output == "releases" else ())
                a, b2 = nxt.get(key, (0.0, 0.0))
                nxt[key] = (a + plo * lo, b2 + phi * hi)
        dist = nxt
    rows: dict = {}
    for (state, trail), (lo, hi) in dist.items():
        k = state if step.output == "state" else trail
        a, b2 = rows.get(k, (0.0, 0.0))
        rows[k] = (a + lo, b2 + hi)
    width = len(step.init) if step.output == "state" else int(step.times)
    return Finite(
        tuple(sorted(((k, lo, min(hi, 1.0)) for k, (lo, hi) in rows.items()), key=lambda x: repr(x[0]))), width
    )


def law_of(m: Any, data: Any) -> tuple:
    """The blocks of the mechanism ``m`` on ``data`` (a sequence of records, each a number or a sequence)."""
    recs = []
    for r in data:
        r = np.atleast_1d(np.asarray(r, dtype=float))
        recs.append(tuple(Fraction(float(x)) for x in r))
    one_d = not isinstance(m.records, RealBox)
    return _law(m.steps, recs, one_d)


def _law(steps: Any, recs: list, one_d: bool) -> tuple:
    ctx = _Ctx()
    return _run(steps, recs, ctx, one_d)


# --------------------------------------------------------------------------- cells of a block (mixtures)


def _shift_cells(s: Shift, partition: tuple) -> tuple[np.ndarray, np.ndarray]:
    """P over the cells (−∞, b_0 − 1], [b_0, b_1 − 1], ..., [b_last, ∞) of the integer c + N."""
    bounds = partition[1]
    edges = [-math.inf] + [b - s.centre for b in bounds] + [math.inf]
    if s.noise.kind == "laplace":
        e = np.array(edges, dtype=float)
        p = _Lap(s.noise.param).intervals(e[:-1], e[1:] - 1)
        return p * (1 - REL), np.minimum(p * (1 + REL), 1.0)
    gauss = _Gauss(s.noise.param)
    both = [gauss.interval(edges[i], edges[i + 1] - 1) for i in range(len(edges) - 1)]
    return np.array([x for x, _ in both]) * (1 - REL), np.minimum(np.array([y for _, y in both]) * (1 + REL), 1.0)


def _grid_bounds(centres: list, noise: Noise, marks: tuple = (), cells: int = 256) -> tuple:
    """Cell boundaries for one grid coordinate: every integer between the centres (discrete Laplace:
    beyond every centre the likelihood ratio of any two mixtures of shifts is constant, so the tails
    merge without loss; discrete Gaussian: a window of 3τ more), in blocks when there are more than
    ``cells``, and every mark (a value where a later function of the output changes)."""
    w = 0 if noise.kind == "laplace" else math.ceil(3 * math.sqrt(float(noise.param))) + 1
    lo, hi = min(list(centres) + list(marks)) - w, max(list(centres) + list(marks)) + w
    step = max(1, math.ceil((hi - lo) / cells))
    bounds = set(range(lo + 1, hi + 1, step)) | {hi} | set(marks)
    return tuple(sorted(bounds))


def _select_cells(s: Select, partition: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Cells: not released, then released with y = T..Y−1 and y >= Y (times the parts' cells)."""
    _, T, Y, part_parts = partition
    ny = Y - T + 1
    lap = _Lap(s.t)
    sel_lo = np.zeros(1 + ny)
    sel_hi = np.zeros(1 + ny)
    if s.count == 0:
        sel_lo[0] = sel_hi[0] = 1.0
    else:
        p0 = math.exp(float(lap.log_le(np.array([T - 1 - s.count]))[0]))
        ys = np.arange(T, Y, dtype=float) - s.count
        py = np.exp(lap.log_pmf(ys)) if len(ys) else np.zeros(0)
        pt = math.exp(float(lap.log_ge(np.array([Y - s.count]))[0]))
        vals = np.concatenate([[p0], py, [pt]])
        sel_lo, sel_hi = vals * (1 - REL), vals * (1 + REL)
    if not s.parts:
        return sel_lo, sel_hi
    plo, phi = np.ones(1), np.ones(1)
    for b, part in zip(s.parts, part_parts):
        lo_b, hi_b = _shift_cells(b, part)
        plo, phi = np.multiply.outer(plo, lo_b).ravel(), np.multiply.outer(phi, hi_b).ravel()
    lo = np.concatenate([[sel_lo[0]], np.multiply.outer(sel_lo[1:], plo).ravel()])
    hi = np.concatenate([[sel_hi[0]], np.multiply.outer(sel_hi[1:], phi).ravel()])
    return lo, hi


def _finite_cells(f: Finite, partition: tuple) -> tuple[np.ndarray, np.ndarray]:
    d = f.as_dict()
    keys = partition[1]
    return np.array([d.get(k, (0.0, 0.0))[0] for k in keys]), np.array([d.get(k, (0.0, 0.0))[1] for k in keys])


def _shift_partition(blocks: list, cells: int = 256) -> tuple:
    if len({(b.noise, b.g) for b in blocks}) != 1:
        raise AssertionError("the output layout depends on the data")
    return ("shift", _grid_bounds([b.centre for b in blocks], blocks[0].noise, (), cells))


def _partition(blocks: list, cells: int = 256) -> tuple:
    """The cells of one coordinate position, common to every component on both sides."""
    kinds = {type(b) for b in blocks}
    if len(kinds) != 1:
        raise AssertionError("the output layout depends on the data")
    b0 = blocks[0]
    if isinstance(b0, Shift):
        return _shift_partition(blocks, cells)
    if isinstance(b0, Finite):
        return ("finite", tuple(sorted({k for b in blocks for k, _, _ in b.table}, key=repr)))
    if isinstance(b0, Select):
        T = b0.T
        Y = max([T] + [b.count for b in blocks])
        parts = tuple(_shift_partition([b.parts[j] for b in blocks], 12) for j in range(len(b0.parts)))
        return ("select", T, Y, parts)
    raise TypeError(f"a nested mixture: {b0!r}")


def _cells(b: Any, partition: tuple) -> tuple[np.ndarray, np.ndarray]:
    kind = partition[0]
    if kind == "shift":
        return _shift_cells(b, partition)
    if kind == "finite":
        return _finite_cells(b, partition)
    return _select_cells(b, partition)


def _size(partition: tuple) -> int:
    if partition[0] == "shift":
        return len(partition[1]) + 1
    if partition[0] == "finite":
        return len(partition[1])
    _, T, Y, parts = partition
    return 1 + (Y - T + 1) * math.prod(_size(p) for p in parts)


def _mixture_cells(comps_p: list, comps_q: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(p_lo, p_hi, q_lo, q_hi) over the joint cells of two mixtures of products with one layout."""
    n = len(comps_p[0][1])
    if any(len(c[1]) != n for c in comps_p + comps_q):
        raise AssertionError("the output layout depends on the data")
    grid = sum(1 for b in comps_p[0][1] if isinstance(b, Shift))
    cells = max(4, min(256, int(_MAX_CELLS ** (1 / max(grid, 1))) - 2))
    parts = [_partition([c[1][j] for c in comps_p + comps_q], cells) for j in range(n)]
    if math.prod(_size(p) for p in parts) > _MAX_CELLS:
        raise Ambiguous("too many joint cells")

    def joint(comps: list) -> tuple[np.ndarray, np.ndarray]:
        lo = hi = None
        for w, blocks in comps:
            clo, chi = np.ones(1), np.ones(1)
            for b, part in zip(blocks, parts):
                blo, bhi = _cells(b, part)
                clo, chi = np.multiply.outer(clo, blo).ravel(), np.multiply.outer(chi, bhi).ravel()
            wf = float(w)
            lo = clo * wf if lo is None else lo + clo * wf
            hi = chi * wf if hi is None else hi + chi * wf
        return lo * (1 - REL), np.minimum(hi * (1 + REL), 1.0)

    plo, phi = joint(comps_p)
    qlo, qhi = joint(comps_q)
    return plo, phi, qlo, qhi


# --------------------------------------------------------------------------- a pair's comparison, per block


@dataclass(frozen=True)
class PairStats:
    """One block compared on (P, Q) in the direction P vs Q. ``shift``: (Noise, s) for two grid noises;
    else ``p`` (lower ends under P) and ``q`` (upper ends under Q) over a partition of the outcomes;
    ``sel``: for a group-by key with parts, (p0, q0, p_y, q_y, the parts' (Noise, s))."""

    shift: tuple | None = None
    p: Any = None
    q: Any = None
    sel: tuple | None = None

    def pure(self) -> Fraction | float:
        if self.shift is not None:
            noise, s = self.shift
            if s == 0:
                return Fraction(0)
            return math.inf if noise.kind == "gaussian" else Fraction(s) / noise.param
        if self.sel is not None:
            p0, q0, py, qy, parts = self.sel
            extra = sum((PairStats(shift=x).pure() for x in parts), Fraction(0))
            best = -math.inf
            if p0 > 0:
                best = math.inf if q0 == 0 else math.log(p0 / q0)
            for a, b in zip(py.tolist(), qy.tolist()):
                if a > 0:
                    best = max(best, math.inf if b == 0 else math.log(a / b) + float(extra))
            return max(best, 0.0)
        mask = self.p > 0
        if np.any(mask & (self.q == 0)):
            return math.inf
        if not mask.any():
            return 0.0
        return max(0.0, float(np.max(np.log(self.p[mask]) - np.log(self.q[mask]))))

    def renyi(self, alpha: int) -> float:
        if self.shift is not None:
            noise, s = self.shift
            return 0.0 if s == 0 else _renyi_coordinate(noise, s, alpha)
        if self.sel is not None:
            p0, q0, py, qy, parts = self.sel
            inner = sum(PairStats(shift=x).renyi(alpha) for x in parts)
            terms = []
            if p0 > 0:
                if q0 == 0:
                    return math.inf
                terms.append(alpha * math.log(p0) + (1 - alpha) * math.log(q0))
            for a, b in zip(py.tolist(), qy.tolist()):
                if a > 0:
                    if b == 0:
                        return math.inf
                    terms.append(alpha * math.log(a) + (1 - alpha) * math.log(b) + (alpha - 1) * inner)
            return _lse(terms) / (alpha - 1) if terms else 0.0
        mask = self.p > 0
        if np.any(mask & (self.q == 0)):
            return math.inf
        if not mask.any():
            return 0.0
        terms = alpha * np.log(self.p[mask]) + (1 - alpha) * np.log(self.q[mask])
        return max(0.0, _lse(terms.tolist()) / (alpha - 1))

    def loss_range(self) -> float:
        if self.shift is not None:
            from _exact_truth import _coordinate_range

            return _coordinate_range(*self.shift) if self.shift[1] else 0.0
        if self.sel is not None:
            p0, q0, py, qy, parts = self.sel
            from _exact_truth import _coordinate_range

            losses = [math.log(a / b) for a, b in zip(py.tolist(), qy.tolist()) if a > 0 and b > 0]
            if p0 > 0 and q0 > 0:
                losses.append(math.log(p0 / q0))
            inner = sum(_coordinate_range(*x) for x in parts if x[1])
            return (max(losses) - min(losses) if losses else 0.0) + inner
        mask = (self.p > 0) & (self.q > 0)
        if not mask.any():
            return 0.0
        losses = np.log(self.p[mask]) - np.log(self.q[mask])
        return float(losses.max() - losses.min())

    def pld(self, h: float) -> tuple[np.ndarray, np.ndarray, float]:
        """(bin indices, masses, mass of infinite loss): every loss rounded down to h·Z, masses lower ends."""
        if self.shift is not None:
            noise, s = self.shift
            if s == 0:
                return np.zeros(1, dtype=np.int64), np.ones(1), 0.0
            idx, mass = (_laplace_pld if noise.kind == "laplace" else _gaussian_pld)(noise.param, s, h)
            return idx, mass, 0.0
        if self.sel is not None:
            p0, q0, py, qy, parts = self.sel
            inf = 0.0
            idx_list, mass_list = [], []
            if p0 > 0:
                if q0 == 0:
                    inf += p0
                else:
                    idx_list.append(_floor_index(np.array([math.log(p0) - math.log(q0)]), h))
                    mass_list.append(np.array([p0]))
            pi, pm = np.zeros(1, dtype=np.int64), np.ones(1)
            for x in parts:
                if x[1] == 0:
                    continue
                xi, xm = PairStats(shift=x).pld(h)[:2]
                lo = int(xi.min())
                dense = np.bincount(xi - lo, weights=xm)
                acc = np.convolve(np.bincount(pi - int(pi.min()), weights=pm), dense)
                pi = np.nonzero(acc)[0].astype(np.int64) + int(pi.min()) + lo
                pm = acc[acc != 0]
            for a, b in zip(py.tolist(), qy.tolist()):
                if a <= 0:
                    continue
                if b == 0:
                    inf += a
                    continue
                k = int(_floor_index(np.array([math.log(a) - math.log(b)]), h)[0])
                idx_list.append(pi + k)
                mass_list.append(pm * a)
            if not idx_list:
                return np.zeros(0, dtype=np.int64), np.zeros(0), inf
            return np.concatenate(idx_list), np.concatenate(mass_list), inf
        fin = (self.p > 0) & (self.q > 0)
        inf = float(self.p[(self.p > 0) & (self.q == 0)].sum())
        losses = np.log(self.p[fin]) - np.log(self.q[fin])
        return _floor_index(losses, h), self.p[fin], inf


def _lse(terms: list) -> float:
    top = max(terms)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(t - top) for t in terms))


def _select_pair(a: Select, b: Select) -> tuple[PairStats, PairStats]:
    if (a.t, a.T, len(a.parts)) != (b.t, b.T, len(b.parts)):
        raise AssertionError("the output layout depends on the data")
    T, Y = a.T, max(a.T, a.count, b.count)

    def sel_probs(s: Select) -> tuple:
        part = ("select", T, Y, ())
        return _select_cells(Select(s.t, s.T, s.count, ()), part)

    alo, ahi = sel_probs(a)
    blo, bhi = sel_probs(b)
    parts_ab = tuple((x.noise, abs(x.centre - y.centre)) for x, y in zip(a.parts, b.parts))
    if any(x.noise != y.noise for x, y in zip(a.parts, b.parts)):
        raise AssertionError("the output layout depends on the data")
    fwd = PairStats(sel=(alo[0], bhi[0], alo[1:], bhi[1:], parts_ab))
    bwd = PairStats(sel=(blo[0], ahi[0], blo[1:], ahi[1:], parts_ab))
    return fwd, bwd


def _finite_pair(a: Finite, b: Finite) -> tuple[PairStats, PairStats]:
    da, db = a.as_dict(), b.as_dict()
    keys = sorted(set(da) | set(db), key=repr)
    alo = np.array([da.get(k, (0.0, 0.0))[0] for k in keys])
    ahi = np.array([da.get(k, (0.0, 0.0))[1] for k in keys])
    blo = np.array([db.get(k, (0.0, 0.0))[0] for k in keys])
    bhi = np.array([db.get(k, (0.0, 0.0))[1] for k in keys])
    return PairStats(p=alo, q=bhi), PairStats(p=blo, q=ahi)


def block_pairs(a: Any, b: Any) -> list[tuple[PairStats, PairStats]]:
    """The independent comparisons (forward, backward) of two blocks at one output position."""
    if isinstance(a, Shift) and isinstance(b, Shift):
        if (a.noise, a.g) != (b.noise, b.g):
            raise AssertionError("the output layout depends on the data")
        ps = PairStats(shift=(a.noise, abs(a.centre - b.centre)))
        return [(ps, ps)]
    if isinstance(a, Select) and isinstance(b, Select):
        return [_select_pair(a, b)]
    if isinstance(a, Finite) and isinstance(b, Finite):
        return [_finite_pair(a, b)]
    if isinstance(a, Mixture) and isinstance(b, Mixture):
        if len(a.comps) == 1 and len(b.comps) == 1 and len(a.comps[0][1]) == len(b.comps[0][1]):
            return [x for u, v in zip(a.comps[0][1], b.comps[0][1]) for x in block_pairs(u, v)]
        plo, phi, qlo, qhi = _mixture_cells(list(a.comps), list(b.comps))
        return [(PairStats(p=plo, q=qhi), PairStats(p=qlo, q=phi))]
    # one side raises (a Finite 'raise' outcome) and the other releases: disjoint outcomes
    if _raises(a) != _raises(b) and (_raises(a) or _raises(b)):
        one = np.array([1.0, 0.0])
        other = np.array([0.0, 1.0])
        return [(PairStats(p=one, q=other), PairStats(p=one, q=other))]
    raise AssertionError(f"the output layout depends on the data: {type(a).__name__} vs {type(b).__name__}")


def _raises(b: Any) -> bool:
    return isinstance(b, Finite) and [k for k, _, _ in b.table] == [("raise",)]


# --------------------------------------------------------------------------- a pair's privacy


class PairTruth:
    """The comparisons of every block of two laws, forward (P = law of D vs Q = law of D') and backward."""

    def __init__(self, la: tuple, lb: tuple) -> None:
        if len(la) != len(lb):
            raise AssertionError("the output layout depends on the data")
        both = [x for a, b in zip(la, lb) for x in block_pairs(a, b)]
        self.directions = ([f for f, _ in both], [g for _, g in both])
        self._pld: dict = {}

    def pure(self) -> Fraction | float:
        best: Fraction | float = Fraction(0)
        for stats in self.directions:
            total: Fraction | float = Fraction(0)
            for s in stats:
                total = total + s.pure()
            best = max(best, total)
        return best

    def renyi(self, alpha: int) -> float:
        return max(sum(s.renyi(alpha) for s in stats) for stats in self.directions)

    def delta(self, eps: float) -> tuple[float, int]:
        """(δ lower bound, direction 0/1 attaining it)."""
        best, which = 0.0, 0
        for d in (0, 1):
            if d not in self._pld:
                self._pld[d] = _product(self.directions[d])
            idx0, h, mass, inf = self._pld[d]
            val = inf
            if mass.size:
                losses = (idx0 + np.arange(mass.size)) * h
                val += float(np.dot(mass, -np.expm1(np.minimum(eps - losses, 0.0))))
            if val > best:
                best, which = val, d
        return best, which


def _product(stats: list) -> tuple[int, float, np.ndarray, float]:
    """(first bin index, h, masses, mass of infinite loss) of the privacy-loss distribution of the product
    of the blocks' comparisons: losses rounded down to h·Z, masses lower ends."""
    items = [s for s in stats if not (s.shift is not None and s.shift[1] == 0)]
    total = sum(s.loss_range() for s in items)
    h = max(_H_MIN, 2.0 ** math.ceil(math.log2(max(total, 1e-300) / _BINS)))
    while True:
        parts, keep_finite = [], 1.0
        for s in items:
            idx, mass, inf = s.pld(h)
            keep_finite *= 1 - min(1.0, inf)
            keep = mass > 0
            idx, mass = idx[keep], mass[keep]
            if idx.size == 0:
                parts.append((0, np.zeros(1)))
                continue
            lo = int(idx.min())
            parts.append((lo, np.bincount(idx - lo, weights=mass)))
        sizes = [d.size for _, d in parts]
        if sum(sizes) * max([1] + sizes) <= 3 * 10**7 or h >= 1:
            break
        h *= 2
    acc, acc_lo = np.ones(1), 0
    for lo, dense in parts:
        acc = np.convolve(acc, dense)
        acc_lo += lo
    return acc_lo, h, acc, 1 - keep_finite


# --------------------------------------------------------------------------- data sets and pairs


def _datasets(records: list, max_size: int) -> list[tuple]:
    return [b for n in range(max_size + 1) for b in itertools.combinations_with_replacement(range(len(records)), n)]


def _neighbours(d: tuple, R: int, k: int, relation: Any, sizes: set) -> list[tuple]:
    """Data sets (sorted index tuples) at distance 1..k of ``d`` under ``relation``, sizes in ``sizes``."""
    out = set()
    frontier = {d}
    for _ in range(k):
        nxt = set()
        for x in frontier:
            if isinstance(relation, AddRemove):
                for r in range(R):
                    nxt.add(tuple(sorted(x + (r,))))
                for i in set(x):
                    lst = list(x)
                    lst.remove(i)
                    nxt.add(tuple(lst))
            else:
                for i in set(x):
                    lst = list(x)
                    lst.remove(i)
                    for r in range(R):
                        if r != i:
                            nxt.add(tuple(sorted(lst + [r])))
        nxt = {y for y in nxt if len(y) in sizes}
        out |= nxt
        frontier = nxt
    out.discard(d)
    return sorted(out)


def _user_datasets(m: Any, values: list, k: int, max_users: int, max_records: int) -> tuple[list, list]:
    """Data sets of users (AddRemoveUser): each user a distinct id in the user column and 1..max_records
    records whose other columns come from ``values``; pairs differ by adding (or removing) 1..k users."""
    ucol = int(m.relation.user)
    dim = len(values)
    others = [j for j in range(dim) if j != ucol]
    rows = list(itertools.product(*[values[j] for j in others]))
    options = [
        c for n in range(1, max_records + 1) for c in itertools.combinations_with_replacement(range(len(rows)), n)
    ]
    ids = sorted(values[ucol])
    bases = [()]
    for n in range(1, max_users + 1):
        bases += list(itertools.combinations_with_replacement(range(len(options)), n))

    def build(users: tuple) -> list:
        recs = []
        for uid, opt in zip(ids, users):
            for r in options[opt]:
                rec = [None] * dim
                rec[ucol] = uid
                for j, v in zip(others, rows[r]):
                    rec[j] = v
                recs.append(tuple(rec))
        return sorted(recs)

    datasets: dict = {}
    pairs = []
    for base in bases:
        for extra in itertools.chain.from_iterable(
            itertools.combinations_with_replacement(range(len(options)), j) for j in range(1, k + 1)
        ):
            users = base + extra
            if len(users) > len(ids):
                continue
            a, b = tuple(build(base)), tuple(build(users))
            for x in (a, b):
                datasets.setdefault(x, len(datasets))
            pairs.append((datasets[a], datasets[b]))
    return [list(x) for x in datasets], pairs


def enumerate_pairs(
    m: Any, values: list, distance: int = 1, max_datasets: int = 400, user_shape: tuple = (1, 2)
) -> tuple[list, list]:
    """(data sets, index pairs) of neighbouring data sets at distance <= ``distance`` under ``m``'s
    relation, records from the grid ``values`` (one list per column)."""
    if isinstance(m.relation, dp.AddRemoveUser):
        return _user_datasets(m, values, distance, *user_shape)
    records = [tuple(r) for r in itertools.product(*values)]
    R = len(records)
    fixed = getattr(m, "size", None)
    max_size = 3
    while max_size > 1 and sum(math.comb(R + n - 1, n) for n in range(max_size + 1)) > max_datasets:
        max_size -= 1
    if isinstance(m.relation, AddRemove):
        sizes = set(range(max_size + 1))
    elif isinstance(m.relation, Substitute):
        sizes = {fixed} if fixed is not None else set(range(1, max_size + 1))
    else:
        raise TypeError(f"relation={m.relation!r}: not enumerated")
    base = [b for b in _datasets(records, max(sizes)) if len(b) in sizes]
    index = {b: i for i, b in enumerate(base)}
    pairs = set()
    for b in base:
        for nb in _neighbours(b, R, distance, m.relation, sizes):
            if nb in index:
                i, j = index[b], index[nb]
                pairs.add((min(i, j), max(i, j)))
    return [[records[i] for i in b] for b in base], sorted(pairs)


# --------------------------------------------------------------------------- the truth over every pair


class FamilyTruth:
    """Lower bounds on the mechanism's privacy over the enumerated pairs (same interface as
    ``_exact_truth.ExactTruth``): :meth:`pure_epsilon`, :meth:`delta`, :meth:`renyi`, and witnesses."""

    def __init__(self, pairs: list, examples: list, datasets: int, dropped: int) -> None:
        self.pair_truths = pairs  # PairTruth per distinct (law, law') pair
        self.examples = examples  # (D, D') per entry
        self.pairs = len(pairs)
        self.datasets = datasets
        self.dropped = dropped
        self._rows: list | None = None

    def pure_epsilon(self) -> Fraction | float:
        vals = [p.pure() for p in self.pair_truths]
        return max(vals, default=Fraction(0))

    def pure_witness(self) -> tuple | None:
        vals = [p.pure() for p in self.pair_truths]
        return self.examples[max(range(len(vals)), key=lambda i: vals[i])] if vals else None

    def renyi(self, alpha: Any) -> float:
        a = Fraction(alpha)
        if a.denominator != 1 or a < 2:
            raise ValueError(f"alpha={alpha!r}: integer orders >= 2")
        return max((p.renyi(int(a)) for p in self.pair_truths), default=0.0)

    def _delta_rows(self) -> list:
        if self._rows is None:
            score = []
            for i, p in enumerate(self.pair_truths):
                e = p.pure()
                score.append((min(float(e), 1e6), p.renyi(2), i))
            by_pure = sorted(score, key=lambda x: -x[0])[:24]
            by_renyi = sorted(score, key=lambda x: -x[1])[:24]
            self._rows = sorted({x[2] for x in by_pure + by_renyi})
        return self._rows

    def delta(self, eps: Any) -> float:
        e = float(eps)
        return max((self.pair_truths[i].delta(e)[0] for i in self._delta_rows()), default=0.0)

    def delta_witness(self, eps: Any) -> tuple | None:
        e = float(eps)
        rows = self._delta_rows()
        if not rows:
            return None
        i = max(rows, key=lambda k: self.pair_truths[k].delta(e)[0])
        return self.examples[i]


def family_truth(
    m: Any, values: list, *, distance: int = 1, max_datasets: int = 400, user_shape: tuple = (1, 2)
) -> FamilyTruth:
    """Enumerate the neighbouring pairs of ``m`` at ``distance`` over the record grid ``values`` and
    compare the exact laws of every distinct pair (data sets whose law is ambiguous are dropped)."""
    datasets, pairs = enumerate_pairs(m, values, distance, max_datasets, user_shape)
    one_d = not isinstance(m.records, RealBox)
    laws: list = []
    ids: dict = {}
    dropped = 0
    for d in datasets:
        try:
            law = _law(m.steps, d, one_d)
        except Ambiguous:
            dropped += 1
            laws.append(None)
            continue
        laws.append(ids.setdefault(law, len(ids)))
    by_id = {v: k for k, v in ids.items()}
    seen: dict = {}
    truths, examples = [], []
    for i, j in pairs:
        a, b = laws[i], laws[j]
        if a is None or b is None or a == b:
            continue
        key = (min(a, b), max(a, b))
        if key in seen:
            continue
        try:
            pt = PairTruth(by_id[key[0]], by_id[key[1]])
        except Ambiguous:
            dropped += 1
            continue
        seen[key] = len(truths)
        truths.append(pt)
        first, second = (datasets[i], datasets[j]) if a == key[0] else (datasets[j], datasets[i])
        examples.append((first, second))
    return FamilyTruth(truths, examples, len(datasets), dropped)


# --------------------------------------------------------------------------- the probability of an event


def _window(b: Shift, scale: float = 1.0) -> int:
    """Steps each side of the centre enumerated for an event: at ``scale`` 1 the rest of the mass is
    below about 1e-13 (and is added to the upper end)."""
    if b.noise.kind == "laplace":
        return max(2, math.ceil(scale * 30 * float(b.noise.param)) + 2)
    return max(2, math.ceil(scale * 8 * math.sqrt(float(b.noise.param))) + 2)


_WINDOW_SCALE = [1.0]  # shrunk while an event's product of outcomes is too large


def _shift_outcomes(b: Shift) -> tuple[list, np.ndarray, np.ndarray, float]:
    w = _window(b, _WINDOW_SCALE[0])
    ys = np.arange(b.centre - w, b.centre + w + 1)
    if b.noise.kind == "laplace":
        lap = _Lap(b.noise.param)
        p = np.exp(lap.log_pmf(ys - b.centre))
        lo, hi = p * (1 - REL), p * (1 + REL)
        rest = 2 * lap.interval(w + 1, math.inf) * (1 + REL)
    else:
        gauss = _Gauss(b.noise.param)
        lo, hi = gauss.pmf(ys - b.centre)
        lo, hi = lo * (1 - REL), hi * (1 + REL)
        rest = 2 * gauss.ge(w + 1)[1] * (1 + REL)
    return [(float(y * b.g),) for y in ys.tolist()], lo, hi, rest


def _select_outcomes(b: Select) -> tuple[list, np.ndarray, np.ndarray, float]:
    zero = (0.0,) * b.width
    if b.count == 0:
        return [zero], np.ones(1), np.ones(1), 0.0
    lap = _Lap(b.t)
    p0 = math.exp(float(lap.log_le(np.array([b.T - 1 - b.count]))[0]))
    outs, lo, hi, rest = [zero], [p0], [p0], 0.0
    w = math.ceil(30 * float(b.t)) + 2
    ys = list(range(b.T, max(b.T, b.count) + w + 1))
    po, plo, phi, prest = _product_outcomes(b.parts) if b.parts else ([()], np.ones(1), np.ones(1), 0.0)
    for y in ys:
        py = math.exp(float(lap.log_pmf(np.array([y - b.count]))[0]))
        outs.extend((float(y),) + o for o in po)
        lo.extend((py * plo).tolist())
        hi.extend((py * phi).tolist())
        rest += py * prest
    rest += math.exp(float(lap.log_ge(np.array([ys[-1] + 1 - b.count]))[0]))
    return outs, np.array(lo) * (1 - REL), np.array(hi) * (1 + REL), rest


def _mixture_outcomes(b: Mixture) -> tuple[list, np.ndarray, np.ndarray, float]:
    index: dict = {}
    lo: list = []
    hi: list = []
    rest = 0.0
    for w, blocks in b.comps:
        o, olo, ohi, r = _product_outcomes(blocks)
        wf = float(w)
        for k, a, z in zip(o, olo.tolist(), ohi.tolist()):
            if k not in index:
                index[k] = len(lo)
                lo.append(0.0)
                hi.append(0.0)
            lo[index[k]] += wf * a
            hi[index[k]] += wf * z
        rest += wf * r
    return list(index), np.array(lo) * (1 - REL), np.array(hi) * (1 + REL), rest


def _outcomes(b: Any) -> tuple[list, np.ndarray, np.ndarray, float]:
    """(outcomes as tuples of floats, lo, hi, upper bound on the mass outside them) for one block."""
    if isinstance(b, Shift):
        return _shift_outcomes(b)
    if isinstance(b, Finite):
        return (
            [k for k, _, _ in b.table],
            np.array([x for _, x, _ in b.table]),
            np.array([x for _, _, x in b.table]),
            0.0,
        )
    if isinstance(b, Select):
        return _select_outcomes(b)
    return _mixture_outcomes(b)


def _product_outcomes(blocks: tuple) -> tuple[list, np.ndarray, np.ndarray, float]:
    outs, lo, hi, rest = [()], np.ones(1), np.ones(1), 0.0
    for b in blocks:
        o, olo, ohi, r = _outcomes(b)
        if len(outs) * len(o) > 400_000:
            raise Ambiguous("too many outcomes to evaluate an event")
        outs = [x + y for x in outs for y in o]
        lo, hi = np.multiply.outer(lo, olo).ravel(), np.multiply.outer(hi, ohi).ravel()
        rest = rest + r  # a union bound on the mass outside the enumerated outcomes
    return outs, lo, hi, rest


def event_probabilities(law: tuple, contains: Any, columns: Any = None) -> tuple[float, float]:
    """[lo, hi] enclosing P(output ∈ S) under ``law`` for the event's vectorised membership ``contains``
    (over rows of output coordinates; one coordinate: a 1-D array). ``columns``: the output columns the
    membership reads (the other blocks are marginalised out: their columns are 0 in the rows passed).
    Outcomes are enumerated (grid noise over a window of its centre), the mass outside added to hi."""
    widths = [b.width for b in law]
    starts = np.cumsum([0] + widths)
    keep = [i for i in range(len(law)) if columns is None or any(starts[i] <= c < starts[i + 1] for c in columns)]
    for scale in (1.0, 0.5, 0.3, 0.2, 0.1, 0.05):
        _WINDOW_SCALE[0] = scale
        try:
            outs, lo, hi, rest = _product_outcomes(tuple(law[i] for i in keep))
            break
        except Ambiguous:
            continue
        finally:
            _WINDOW_SCALE[0] = 1.0
    else:
        raise Ambiguous("too many outcomes to evaluate an event")
    if any(not isinstance(x, float) for o in outs for x in o):
        raise TypeError("the law's outcomes are coarsened (a transcript of cells, or a raise): no event evaluated")
    arr = np.zeros((len(outs), int(starts[-1])))
    flat = np.array(outs, dtype=float).reshape(len(outs), -1)
    pos = [c for i in keep for c in range(starts[i], starts[i + 1])]
    arr[:, pos] = flat
    inside = np.asarray(contains(arr[:, 0] if arr.shape[1] == 1 else arr), dtype=bool).reshape(-1)
    return float(lo[inside].sum()), min(1.0, float(hi[inside].sum()) + rest)


def _point(b: Any, part: tuple) -> tuple[float, float]:
    """[lo, hi] enclosing P(block = part)."""
    if isinstance(b, Shift):
        v = Fraction(part[0]) / b.g
        if v.denominator != 1:
            return 0.0, 0.0
        k = int(v) - b.centre
        if b.noise.kind == "laplace":
            p = math.exp(float(_Lap(b.noise.param).log_pmf(np.array([k]))[0]))
            return _lo(p), _hi(p)
        lo, hi = _Gauss(b.noise.param).pmf(np.array([k]))
        return _lo(float(lo[0])), _hi(float(hi[0]))
    if isinstance(b, Finite):
        lo, hi = b.as_dict().get(tuple(part), (0.0, 0.0))
        return lo, hi
    if isinstance(b, Select):
        y, rest = part[0], part[1:]
        if y == 0:
            if any(x != 0 for x in rest):
                return 0.0, 0.0
            if b.count == 0:
                return 1.0, 1.0
            p = math.exp(float(_Lap(b.t).log_le(np.array([b.T - 1 - b.count]))[0]))
            return _lo(p), _hi(p)
        if b.count == 0 or y != math.floor(y) or y < b.T:
            return 0.0, 0.0
        p = math.exp(float(_Lap(b.t).log_pmf(np.array([int(y) - b.count]))[0]))
        lo, hi = _lo(p), _hi(p)
        at = 0
        for s in b.parts:
            a, z = _point(s, rest[at : at + s.width])
            lo, hi = lo * a, hi * z
            at += s.width
        return lo, hi
    lo = hi = 0.0
    for w, blocks in b.comps:
        a, z, at = 1.0, 1.0, 0
        for s in blocks:
            x, y2 = _point(s, part[at : at + s.width])
            a, z = a * x, z * y2
            at += s.width
        lo, hi = lo + float(w) * a, hi + float(w) * z
    return _lo(lo), _hi(hi)


def point_probability(law: tuple, point: Any) -> tuple[float, float]:
    """[lo, hi] enclosing P(output = point), block by block (independent blocks multiply)."""
    y = tuple(np.atleast_1d(np.asarray(point, dtype=float)).ravel().tolist())
    lo, hi, at = 1.0, 1.0, 0
    for b in law:
        a, z = _point(b, y[at : at + b.width])
        lo, hi = lo * a, hi * z
        at += b.width
    if at != len(y):
        raise AssertionError(f"the point has {len(y)} coordinates, the law {at}")
    return lo, hi
