"""Selection parts: a quantile score over candidates, the exponential mechanism (= report noisy max with
Gumbel noise, and its one-shot top-k), and report noisy max with exponential noise (= permute-and-flip)
or with Laplace noise on a grid. Each samples its law exactly; each privacy map is proved once in
:mod:`dpharness.proofs.parts.selection` and instantiated at the node's input distance.

Used as::

    from dpharness import parts as dp, PureDP, AddRemove, RealInterval

    median_and_count = dp.mechanism(
        name="median_age_and_count", records=RealInterval(0, 120), relation=AddRemove(),
        steps=dp.compose(dp.clamp(0, 120) >> dp.quantile(0.5, candidates=range(0, 121), scale=2),
                         dp.count() >> dp.laplace(scale=2)),
        claim=PureDP(1),
    )
    top3 = dp.histogram(categories=[1, 2, 3, 4, 5]) >> dp.report_noisy_max(scale=6, noise="gumbel", k=3)

References: McSherry & Talwar 2007 (the exponential mechanism); Smith 2011 and OpenDP's
``make_quantile_score_candidates`` (the quantile score); Dwork & Roth 2014 §3.3-3.4 (report noisy max,
Claim 3.9; the exponential mechanism, Thm 3.10); McKenna & Sheldon 2020 and Ding, Kifer et al. 2021
(report noisy max with exponential noise is permute-and-flip); Durfee & Rogers 2019, "Practical
differentially private top-k selection with pay-what-you-get composition", Lemma 4.2 (one-shot Gumbel
top-k has the law of k peeling exponential mechanisms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Iterable, Sequence, overload

import numpy as np

from dpharness import _validate as _v
from dpharness.core import AddRemove
from dpharness.errors import ParameterError, UnsupportedError

from dpharness.mechanisms._noise import check_granularity

from ._base import (
    Distance,
    Measurement,
    Space,
    Step,
    Transformation,
    _budget,
    _chain,
    _float_exact,
    _need,
    _plain,
    register,
)
from ._grid import LAPLACE_MIN_UNITS, _centres, _check_scale_units

__all__ = [
    "QuantileScore",
    "ExponentialSelection",
    "NoisyMaxExponential",
    "NoisyMaxLaplace",
    "SelectionBudget",
    "STEP_TYPES",
    "quantile_score",
    "exponential",
    "quantile",
    "report_noisy_max",
    "SelectionLeaf",
]

_MAX_CANDIDATES = 2**12  # the exact sampler's cost grows with the number of candidates
_INF = math.inf


def _scale(name: str, value: Any) -> Any:
    value = _plain(name, value)
    if Fraction(value) <= 0:
        raise ParameterError(f"{name}={value!r} must be > 0; pass a positive noise scale.")
    return value


@overload
def _labels(name: str, values: None) -> None: ...
@overload
def _labels(name: str, values: Iterable[Any]) -> tuple: ...
def _labels(name: str, values: Any) -> tuple | None:
    """Distinct values, each exactly a float (they are released as floats)."""
    if values is None:
        return None
    try:
        vals = tuple(values)
    except TypeError:
        raise ParameterError(f"{name}={values!r} is not a sequence; pass a list of numbers.") from None
    vals = tuple(_float_exact(name, v, "a candidate") for v in vals)
    if not 1 <= len(vals) <= _MAX_CANDIDATES:
        raise ParameterError(f"{name} has {len(vals)} values; pass between 1 and {_MAX_CANDIDATES}.")
    return vals


# --------------------------------------------------------------------------- the quantile score


@dataclass(frozen=True)
class QuantileScore(Transformation):
    """The quantile utility of each candidate (OpenDP's ``make_quantile_score_candidates``, Smith 2011),
    on one-column records, exactly in rational arithmetic::

        u(c) = −| (1 − α)·#{x < c} − α·#{x > c} |          (higher is better; 0 at an exact α-quantile)

    for each of the k ``candidates`` (strictly increasing, each exactly a float: records are compared with
    them as floats). ``alpha`` in [0, 1] is read exactly (a float as its binary value). Output: the vector
    of k utilities (multiples of 1/den(α)).

    Stability (L∞ of the utility vector): under add/remove one record moves #{x < c} or #{x > c} by 1 (or
    neither, x = c), so Δ = max(α, 1 − α); under substitution one record moves from one of {< c, = c, > c}
    to another, changing (1 − α)#{x < c} − α#{x > c} by at most (1 − α) + α = 1, so Δ = 1 (OpenDP: the
    known-size case). The L1 and squared-L2 bounds are k·Δ and k·Δ². Not monotone (the utilities of
    candidates below and above an added record move in opposite directions)."""

    alpha: Any
    candidates: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", _plain("alpha", self.alpha))
        if not 0 <= Fraction(self.alpha) <= 1:
            raise ParameterError(f"alpha={self.alpha!r} must be in [0, 1]; pass e.g. alpha=0.5 for the median.")
        cands = _labels("candidates", self.candidates)
        if any(Fraction(a) >= Fraction(b) for a, b in zip(cands, cands[1:])):
            raise ParameterError(
                f"candidates={self.candidates!r} must be strictly increasing; pass sorted distinct values."
            )
        object.__setattr__(self, "candidates", cands)

    @property
    def alpha_exact(self) -> Fraction:
        return Fraction(self.alpha)

    def sensitivity(self, relation: Any) -> Fraction:
        a = self.alpha_exact
        return max(a, 1 - a) if isinstance(relation, AddRemove) else Fraction(1)

    def describe(self) -> str:
        c = self.candidates
        shown = ", ".join(map(str, c)) if len(c) <= 4 else f"{c[0]}, {c[1]}, ..., {c[-1]}"
        return f"quantile_score(alpha={self.alpha!r}, candidates=[{shown}] ({len(c)}))"

    def out_space(self, space: Space) -> Space:
        _need(space, "records", "quantile_score")
        if space.dim != 1:
            raise ParameterError(
                f"quantile_score takes one-column records, got {space.dim}; put dp.column(j) before it."
            )
        k = len(self.candidates)
        return Space("vector", k, (-_INF,) * k, (Fraction(0),) * k, Fraction(1, self.alpha_exact.denominator))

    def stability(self, space: Space, d: Distance) -> Distance:
        delta = self.sensitivity(d.relation)
        k = len(self.candidates)
        return Distance(None, k * delta, k * delta * delta, delta)

    def apply(self, value: Any) -> Any:
        return self.from_counts(self.counts(value))

    def counts(self, value: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(#{x < c}, #{x > c})`` per candidate (int64, exact float comparisons): all the score reads of
        the records, so the counts of disjoint parts of the records add to those of their union (a Dask
        frame's partitions, :func:`dpharness.release`)."""
        x = np.sort(np.asarray(value, dtype=float).ravel())
        c = np.asarray([float(v) for v in self.candidates])
        lt = np.searchsorted(x, c, side="left").astype(np.int64)  # #{x < c}
        gt = (len(x) - np.searchsorted(x, c, side="right")).astype(np.int64)  # #{x > c}
        return lt, gt

    def from_counts(self, counts: tuple[np.ndarray, np.ndarray]) -> tuple:
        """The utilities from :meth:`counts` (exact rationals)."""
        lt, gt = counts
        a = self.alpha_exact
        return tuple(-abs((1 - a) * int(lo) - a * int(g)) for lo, g in zip(lt.tolist(), gt.tolist()))


# --------------------------------------------------------------------------- selections on a vector


def _vector_in(space: Space, what: str) -> int:
    if space.kind != "vector":
        raise ParameterError(
            f"{what} selects among the coordinates of a vector of scores, but the previous step gives "
            f"{space.describe()}; put a vector-valued step before it (e.g. dp.histogram(categories=...) "
            "or dp.quantile_score(...))."
        )
    return space.dim


def _utilities(value: Any) -> list[Fraction]:
    if isinstance(value, tuple):
        return [Fraction(v) for v in value]
    arr = np.asarray(value, dtype=float).ravel()
    return [Fraction(v) for v in arr.tolist()]


@dataclass(frozen=True)
class ExponentialSelection(Measurement):
    """The exponential mechanism over the coordinates of a score vector u (McSherry & Talwar 2007), which is
    report noisy max with Gumbel noise of ``scale`` (the argmax of u_i + Gumbel(scale) has this law)::

        P(i) = exp(u_i / scale) / Σ_j exp(u_j / scale).

    ``k`` > 1: one-shot noisy top-k with Gumbel noise, the ordered indices of the k largest u_i + G_i, whose
    law is that of k peeling exponential mechanisms (Durfee & Rogers 2019, Lemma 4.2)::

        P(i_1, ..., i_k) = Π_m exp(u_{i_m}/scale) / Σ_{j ∉ {i_1..i_{m−1}}} exp(u_j/scale).

    Releases the indices, or ``labels[i]`` when labels are given (the quantile's candidates). Privacy map
    (pure DP) for utilities at L∞ distance Δ: ε = k·2Δ/scale, and ε = k·Δ/scale when the scores move
    monotonically (all up or all down: a histogram under add/remove). Sampler: exact
    (:func:`._exact.categorical_exp`, exact conditional Bernoullis against interval enclosures), the
    utilities and scale read as exact rationals."""

    scale: Any
    k: int = 1
    labels: tuple | None = None
    derived: str = ""  # how the scale was derived from a budget (dp.exponential(epsilon=...)); shown, never read

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _scale("scale", self.scale))
        object.__setattr__(self, "k", _v.integer("k", self.k, minimum=1))
        object.__setattr__(self, "labels", _labels("labels", self.labels))

    @property
    def scale_exact(self) -> Fraction:
        return Fraction(self.scale)

    def describe(self) -> str:
        extra = "" if self.k == 1 else f", k={self.k}"
        if self.labels is not None:
            extra += f", labels=({len(self.labels)} values)"
        return f"exponential(scale={self.scale!r}{extra})" + (f" [{self.derived}]" if self.derived else "")

    def out_width(self, space: Space) -> int:
        dim = _vector_in(space, self.describe())
        if self.k > dim:
            raise ParameterError(f"k={self.k} but the score vector has {dim} coordinates; pass k <= {dim}.")
        if self.labels is not None and len(self.labels) != dim:
            raise ParameterError(
                f"labels has {len(self.labels)} values but the score vector has {dim}; pass one label per score."
            )
        return self.k

    def log_weights(self, value: Any) -> list[Fraction]:
        s = self.scale_exact
        return [u / s for u in _utilities(value)]

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        idx = _peel(self.log_weights(value), self.k, size, rng)
        return _emit(idx, self.labels)


def _categorical(log_weights: list[Fraction], size: int, rng: np.random.Generator) -> np.ndarray:
    """Exact draws of i with probability e^{a_i}/Σ e^{a_j}; the heaviest indices are tried first (the same
    law, fewer stages)."""
    from dpharness.mechanisms._exact import categorical_exp

    order = sorted(range(len(log_weights)), key=lambda i: -log_weights[i])
    picked = categorical_exp([log_weights[i] for i in order], size, rng)
    return np.asarray(order, dtype=np.int64)[picked]


def _peel(log_weights: list[Fraction], k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """(size, k) ordered indices drawn without replacement with weights e^{a_i} (k peeling exponential
    mechanisms): rows that share the indices drawn so far draw the next one together."""
    out = np.zeros((size, k), dtype=np.int64)
    groups: list[tuple[np.ndarray, tuple[int, ...]]] = [(np.arange(size), ())]
    for m in range(k):
        nxt: list[tuple[np.ndarray, tuple[int, ...]]] = []
        for rows, taken in groups:
            rest = [i for i in range(len(log_weights)) if i not in taken]
            picks = np.asarray(rest, dtype=np.int64)[
                _categorical([log_weights[i] for i in rest], len(rows), rng)
                if len(rest) > 1
                else np.zeros(len(rows), dtype=np.int64)
            ]
            out[rows, m] = picks
            if m + 1 < k:
                for v in np.unique(picks):
                    nxt.append((rows[picks == v], taken + (int(v),)))
        groups = nxt
    return out


def _emit(idx: np.ndarray, labels: tuple | None) -> np.ndarray:
    if labels is None:
        return idx
    return np.asarray([float(v) for v in labels])[idx]


@dataclass(frozen=True)
class NoisyMaxExponential(Measurement):
    """Report noisy max with one-sided exponential noise: the index of the largest u_i + E_i, E_i i.i.d.
    exponential with mean ``scale``; this is permute-and-flip (McKenna & Sheldon 2020; Ding, Kifer et al.
    2021): visit the indices in a uniformly random order and stop at i with probability
    exp(−(max u − u_i)/scale). Law (closed form; :func:`dpharness.mechanisms.report_noisy_max.rnm_exponential_probs`)::

        P(i) = p_i Σ_{S ⊆ others} (−1)^{|S|} Π_{j∈S} p_j/(|S| + 1),     p_j = exp((u_j − max u)/scale).

    Privacy map: ε = 2Δ/scale for scores at L∞ distance Δ (randomness alignment; Dwork & Roth 2014 Claim
    3.9's argument). Sampler: permute-and-flip, exact (a uniform permutation of integers; each flip is
    :func:`._exact.bernoulli_exp` at the exact rational (max u − u_i)/scale). Releases the index (or
    ``labels[i]``)."""

    scale: Any
    derived: str = ""  # how the scale was derived from a budget; shown, never read
    labels: tuple | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _scale("scale", self.scale))
        object.__setattr__(self, "labels", _labels("labels", self.labels))

    @property
    def scale_exact(self) -> Fraction:
        return Fraction(self.scale)

    def describe(self) -> str:
        return f"report_noisy_max(scale={self.scale!r}, noise='exponential')" + (
            f" [{self.derived}]" if self.derived else ""
        )

    def out_width(self, space: Space) -> int:
        dim = _vector_in(space, self.describe())
        if self.labels is not None and len(self.labels) != dim:
            raise ParameterError(f"labels has {len(self.labels)} values but the score vector has {dim}.")
        return 1

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        from dpharness.mechanisms._exact import bernoulli_exp

        u = _utilities(value)
        top = max(u)
        gaps = [(top - x) / self.scale_exact for x in u]
        n = len(u)
        order = rng.permuted(np.tile(np.arange(n, dtype=np.int64), (size, 1)), axis=1)
        out = np.full(size, -1, dtype=np.int64)
        for step in range(n):
            alive = np.flatnonzero(out < 0)
            if not len(alive):
                break
            cand = order[alive, step]
            for i in np.unique(cand):
                rows = alive[cand == i]
                keep = np.ones(len(rows), bool) if gaps[i] == 0 else np.asarray(bernoulli_exp(gaps[i], rng, len(rows)))
                out[rows[keep]] = i
        return _emit(out, self.labels).reshape(size, 1)


@dataclass(frozen=True)
class NoisyMaxLaplace(Measurement):
    """Report noisy max with Laplace noise on the grid ``g·Z``: each score is rounded to the grid,
    c_i = floor(u_i/g + 1/2) (saturated to ±2**52 steps), discrete Laplace noise K_i with P(k) ∝ exp(−|k|/t),
    t = scale/g, is added, and the first index of the largest c_i + K_i is released (ties, which have positive
    probability on the integers, go to the smallest index)::

        P(i) = Σ_y P(K = y − c_i) Π_{j<i} P(K < y − c_j) Π_{j>i} P(K <= y − c_j).

    ``granularity`` defaults to 1 (integer scores such as counts are not rounded).
    Privacy map: ε = 2D/t for rounded scores at most D grid steps apart in every coordinate (D = Δ/g when the
    scores are multiples of g, else ceil(Δ/g)): the randomness alignment of Dwork & Roth 2014 Claim 3.9 on the
    integers (the shift is an integer number of grid steps). Sampler: exact integers
    (:func:`._exact.discrete_laplace`); ``numpy.argmax`` returns the first maximal index."""

    scale: Any
    granularity: Any = 1
    derived: str = ""  # how the scale was derived from a budget; shown, never read
    labels: tuple | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _scale("scale", self.scale))
        object.__setattr__(self, "granularity", _plain("granularity", self.granularity))
        check_granularity("granularity", self.granularity)
        _check_scale_units("scale", self.scale, self.granularity)
        if Fraction(self.scale) / Fraction(self.granularity) < LAPLACE_MIN_UNITS:
            raise ParameterError(f"scale={self.scale!r} is below 2**-1000 grid steps; pass a larger scale.")
        object.__setattr__(self, "labels", _labels("labels", self.labels))

    @property
    def g(self) -> Fraction:
        return Fraction(self.granularity)

    @property
    def t(self) -> Fraction:
        return Fraction(self.scale) / self.g

    def describe(self) -> str:
        g = self.granularity
        return (
            f"report_noisy_max(scale={self.scale!r}, noise='laplace'"
            + ("" if g == 1 else f", granularity={g!r}")
            + ")"
            + (f" [{self.derived}]" if self.derived else "")
        )

    def out_width(self, space: Space) -> int:
        dim = _vector_in(space, self.describe())
        if self.labels is not None and len(self.labels) != dim:
            raise ParameterError(f"labels has {len(self.labels)} values but the score vector has {dim}.")
        return 1

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        from dpharness.mechanisms._exact import discrete_laplace

        c = _centres(value if isinstance(value, tuple) else tuple(_utilities(value)), self.g)
        noise = discrete_laplace(self.t, (size, len(c)), rng)
        noisy = (
            noise.astype(object) + np.asarray(c, dtype=object)
            if noise.dtype == object
            else noise.astype(np.int64) + np.asarray(c, dtype=np.int64)
        )
        idx = (
            np.asarray([int(np.argmax(r)) for r in noisy], dtype=np.int64)
            if noisy.dtype == object
            else np.argmax(noisy, axis=1).astype(np.int64)
        )
        return _emit(idx, self.labels).reshape(size, 1)


STEP_TYPES = frozenset({QuantileScore, ExponentialSelection, NoisyMaxExponential, NoisyMaxLaplace})
MEASUREMENT_TYPES = frozenset({ExponentialSelection, NoisyMaxExponential, NoisyMaxLaplace})
register(QuantileScore)


# --------------------------------------------------------------------------- exact laws (read by _law)


class SelectionLeaf:
    """One selection measurement and the exact score vector it selects from on some input; ``log_prob``
    of its ``width`` output columns (float, for audits), ``outcomes`` its finite support."""

    def __init__(self, measurement: Any, value: Any, space: Space) -> None:
        self.measurement = measurement
        self.value = value
        self.space = space
        self.utilities = _utilities(value)
        m = measurement
        self.width = m.k if isinstance(m, ExponentialSelection) else 1
        self._table = self._probabilities()

    def _probabilities(self) -> dict:
        """{ordered index tuple: probability} (floats)."""
        m, u = self.measurement, self.utilities
        n = len(u)
        if isinstance(m, ExponentialSelection):
            a = np.asarray([float(x) for x in m.log_weights(self.value)])
            from itertools import permutations

            if math.perm(n, m.k) > 20_000:
                raise UnsupportedError(
                    f"{m.describe()}: {math.perm(n, m.k)} ordered outputs; the law lists at most 20000."
                )
            table = {}
            for combo in permutations(range(n), m.k):
                lp, left = 0.0, np.ones(n, bool)
                for i in combo:
                    w = a[left]
                    top = w.max()
                    lp += a[i] - (top + math.log(np.exp(w - top).sum()))
                    left[i] = False
                table[combo] = lp
            return table
        if isinstance(m, NoisyMaxExponential):
            from dpharness.mechanisms.report_noisy_max import rnm_exponential_probs

            p = rnm_exponential_probs(np.asarray([float(x) for x in u]), float(m.scale_exact))
            return {(i,): math.log(v) if v > 0 else -math.inf for i, v in enumerate(p)}
        return {(i,): math.log(v) if v > 0 else -math.inf for i, v in enumerate(_grid_laplace_max_probs(m, u))}

    def outputs(self) -> list[tuple]:
        labels = self.measurement.labels
        return [tuple(float(labels[i]) if labels is not None else i for i in key) for key in self._table]

    def log_prob(self, cols: np.ndarray) -> np.ndarray:
        labels = self.measurement.labels
        lookup = {}
        for key, lp in self._table.items():
            lookup[tuple(float(labels[i]) if labels is not None else float(i) for i in key)] = lp
        rows = np.asarray(cols, dtype=float).reshape(len(cols), -1)
        return np.asarray([lookup.get(tuple(r.tolist()), -math.inf) for r in rows])


def leaf(step: Any, value: Any, space: Space, walk: Any = None) -> SelectionLeaf:
    """The family's leaf (read by :mod:`._law`)."""
    return SelectionLeaf(step, value, space)


register(*MEASUREMENT_TYPES, leaf=leaf)


def _grid_laplace_max_probs(m: NoisyMaxLaplace, u: list[Fraction]) -> np.ndarray:
    """P(first argmax = i) for discrete Laplace noise on the rounded scores, summed over the noisy maximum y
    within 60t + 2 of the scores' range (the omitted mass is below e^{−60} relatively)."""
    c = np.asarray(_centres(tuple(u), m.g), dtype=float)
    t = float(m.t)
    w = math.ceil(60 * t) + 2
    if (c.max() - c.min()) + 2 * w > 2_000_000:
        raise UnsupportedError(f"{m.describe()}: the law sums over more than 2e6 grid points; audit on samples.")
    y = np.arange(c.min() - w, c.max() + w + 1)
    lq = -1.0 / t  # ln q
    log_norm = math.log(-math.expm1(lq)) - math.log1p(math.exp(lq))  # ln((1 − q)/(1 + q))

    def log_cdf_le(k: np.ndarray) -> np.ndarray:  # ln P(K <= k)
        neg = k < 0
        out = np.empty_like(k, dtype=float)
        out[neg] = -k[neg] * lq - math.log1p(math.exp(lq))
        kk = k[~neg]
        out[~neg] = np.log1p(-np.exp((kk + 1) * lq) / (1 + math.exp(lq)))
        return out

    probs = np.zeros(len(c))
    for i in range(len(c)):
        lp = log_norm + np.abs(y - c[i]) * lq
        for j in range(len(c)):
            if j != i:
                lp = lp + (log_cdf_le(y - c[j] - 1) if j < i else log_cdf_le(y - c[j]))
        probs[i] = np.exp(lp).sum()
    return probs


# --------------------------------------------------------------------------- public constructors


def quantile_score(alpha: Any, *, candidates: Sequence) -> QuantileScore:
    """The vector of quantile utilities u(c) = −|(1 − α)#{x < c} − α#{x > c}| over ``candidates``."""
    return QuantileScore(alpha, _sequence("candidates", candidates))


def _sequence(name: str, values: Any) -> tuple:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ParameterError(f"{name}={values!r} is not a sequence of numbers; pass e.g. {name}=range(0, 121).")
    return tuple(values)


@dataclass(frozen=True)
class SelectionBudget(Step):
    """A selection given the budget it may spend instead of its scale: ``kind`` ``"exponential"``
    (Gumbel / the exponential mechanism, ``k`` indices, ``labels``), ``"exponential_noise"``
    (permute-and-flip) or ``"laplace"`` (grid Laplace noisy max, ``granularity``); ``epsilon`` None: its
    share of the enclosing ``dp.compose(..., epsilon=...)``.

    A placeholder, never a registered step: ``dpharness.parts.mechanism`` replaces it with the selection
    whose scale the family's privacy map gives at the scores' distance (``scale = c·k·Δ/ε`` with c = 2, or
    1 on monotone scores; ``2Δ/ε``; ``t = 2D/ε`` grid steps), before anything is sampled or proved."""

    kind: str
    epsilon: Any = None
    k: int = 1
    labels: tuple | None = None
    granularity: Any = 1
    is_budget: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _budget("epsilon", self.epsilon))
        object.__setattr__(self, "k", _v.integer("k", self.k, minimum=1))
        object.__setattr__(self, "labels", _labels("labels", self.labels))
        object.__setattr__(self, "granularity", _plain("granularity", self.granularity))
        check_granularity("granularity", self.granularity)

    @property
    def budgeted(self) -> bool:
        return self.epsilon is not None

    def describe(self) -> str:
        what = f"epsilon={self.epsilon!r}" if self.epsilon is not None else "budget from the enclosing compose"
        return f"{'exponential' if self.kind == 'exponential' else 'report_noisy_max'}({what}, kind={self.kind!r})"

    def resolve(self, scale: Any, derived: str) -> Measurement:
        """The concrete selection at ``scale`` (validated by its own constructor)."""
        if self.kind == "exponential":
            return ExponentialSelection(scale, self.k, self.labels, derived)
        if self.kind == "exponential_noise":
            return NoisyMaxExponential(scale, derived)
        return NoisyMaxLaplace(scale, self.granularity, derived)


def _one_of(scale: Any, epsilon: Any, what: str) -> None:
    if scale is not None and epsilon is not None:
        raise ParameterError(
            f"{what}(scale={scale!r}, epsilon={epsilon!r}): pass the scale= or the budget epsilon= it "
            "should spend, not both."
        )


def exponential(scale: Any = None, *, k: int = 1, labels: Sequence | None = None, epsilon: Any = None) -> Step:
    """The exponential mechanism on a vector of scores u: index i with probability ∝ exp(u_i/scale)
    (``labels[i]`` when given; ``k`` > 1: the ordered one-shot Gumbel top-k). ε = 2kΔ/scale (kΔ/scale
    on monotone scores). Or ``epsilon=``: ``dp.mechanism`` derives the scale from the scores' distance."""
    _one_of(scale, epsilon, "exponential")
    labels = None if labels is None else _sequence("labels", labels)
    if scale is None:
        return SelectionBudget("exponential", epsilon, k, labels)
    return ExponentialSelection(scale, k, labels)


def quantile(alpha: Any, *, candidates: Sequence, scale: Any = None, epsilon: Any = None) -> Step:
    """The ``alpha``-quantile of one-column records by the exponential mechanism over ``candidates``
    (the quantile score of OpenDP's ``make_quantile_score_candidates``, then P(c) ∝ exp(u(c)/scale));
    releases the chosen candidate. ε = 2Δ/scale, Δ = max(α, 1 − α) (add/remove) or 1 (substitution).
    Or ``epsilon=``: ``dp.mechanism`` derives the scale (2Δ/ε). See :mod:`dpharness.mechanisms.parts.selection`."""
    _one_of(scale, epsilon, "quantile")
    cands = _sequence("candidates", candidates)
    score = QuantileScore(alpha, cands)  # validates the candidates first (its messages name candidates=)
    chosen = (
        SelectionBudget("exponential", epsilon, 1, cands) if scale is None else ExponentialSelection(scale, 1, cands)
    )
    return _chain(score, chosen)


def report_noisy_max(
    scale: Any = None, noise: str = "laplace", k: int = 1, *, granularity: Any = 1, epsilon: Any = None
) -> Step:
    """The index of the largest noisy score (``noise`` "laplace" on a grid, "gumbel" (``k`` > 1: one-shot
    top-k) or "exponential" (permute-and-flip)). See :mod:`dpharness.mechanisms.parts.selection`."""
    _v.choice("noise", noise, ("laplace", "gumbel", "exponential"))
    k = _v.integer("k", k, minimum=1)
    if noise != "gumbel" and k != 1:
        raise ParameterError(
            f"k={k} with noise={noise!r}: one-shot top-k is proved for Gumbel noise only; pass noise='gumbel' or k=1."
        )
    if noise != "laplace" and granularity != 1:
        raise ParameterError(f"granularity={granularity!r} applies to noise='laplace' only; drop it.")
    _one_of(scale, epsilon, "report_noisy_max")
    if scale is None:
        kind = {"gumbel": "exponential", "exponential": "exponential_noise", "laplace": "laplace"}[noise]
        return SelectionBudget(kind, epsilon, k, None, granularity)
    if noise == "gumbel":
        return ExponentialSelection(scale, k)
    if noise == "exponential":
        return NoisyMaxExponential(scale)
    return NoisyMaxLaplace(scale, granularity)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
