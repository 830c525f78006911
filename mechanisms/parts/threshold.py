"""Threshold parts: above threshold / the sparse vector technique over a sequence of queries on the records,
with discrete Laplace noise on a grid, stopping after ``c`` answers above the threshold. The sampler is
exact; the privacy map is proved once in :mod:`dpharness.proofs.parts.threshold` and instantiated at the
queries' derived sensitivity.

Used as::

    from dpharness import parts as dp, PureDP, AddRemove, RealInterval

    cuts = range(20, 120, 2)                         # 50 queries: how many records are at least k years old
    older_than = dp.mechanism(
        name="older_than", records=RealInterval(0, 120), relation=AddRemove(),
        steps=dp.clamp(0, 120) >> dp.above_threshold(
            40, queries=[dp.histogram(edges=[k, 120]) for k in cuts], scale=2, c=1),
        claim=PureDP(0.75),                          # monotone counts: 1/2 + 1/4
    )

Algorithm (Lyu, Su & Li 2017, Algorithm 1; with c = 1 it is Dwork & Roth 2014 Algorithm 1,
AboveThreshold; for c > 1 the threshold noise is drawn once, not redrawn after each answer as in Dwork &
Roth's Algorithm 2, Sparse), on the grid ``g·Z`` as the grid noise parts do::

    T_g = floor(T/g + 1/2),  c_i = floor(q_i/g + 1/2) (saturated to ±2**52)   exact integers
    ρ ~ DLap(t_ρ), t_ρ = scale/g;  ν_i ~ DLap(t_ν), t_ν = query_scale/g       P(k) ∝ exp(−|k|/t), exact
    for i = 1..n: answer ⊤ (1) if c_i + ν_i >= T_g + ρ else ⊥ (0); after the c-th ⊤ every later
    answer is −1 (not answered)

Output: the n answers (1, 0 or −1), as the catalog's :class:`~dpharness.mechanisms.sparse_vector.SparseVector`.
Law of an answer vector a (conditional on ρ = r the answers are independent)::

    P(a) = Σ_r P(ρ = r) Π_{a_i = ⊤} P(ν >= T_g + r − c_i) Π_{a_i = ⊥} P(ν < T_g + r − c_i)

Privacy map (pure DP): queries whose rounded answers move by at most D grid steps each (D = Δ/g when the
answers are multiples of g, else ceil(Δ/g)): ε = D/t_ρ + 2·min(c, n)·D/t_ν, and ε = D/t_ρ + min(c, n)·D/t_ν
when the queries are monotone (on every neighbouring pair all answers move the same way, as counts under
add/remove do; Lyu, Su & Li 2017 §4.2). ``query_scale`` defaults to 2c·scale.

Each query is a transformation of the parts algebra (``dp.count()``, ``dp.histogram(edges=[k, hi])``,
``dp.column(j) >> dp.sum()``, ...) whose output is one number (its sensitivity derived per relation, as
everywhere in the algebra), or ``dp.query(fn, sensitivity=Δ)``: a user function of the records whose
sensitivity is STATED (a precondition of the proof, which the audit tests). On a vector input (a
histogram, or ``input="vector"``), ``queries`` is omitted: the queries are the vector's coordinates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Sequence

import numpy as np

from dpharness import _validate as _v
from dpharness.errors import ParameterError, UnsupportedError

from dpharness.mechanisms._noise import check_granularity

from ._base import (
    Chain,
    Measurement,
    Space,
    Step,
    Transformation,
    _plain,
    _rhu,
    check_structure,
    execute,
    register,
    walk_nodes,
)
from ._grid import LAPLACE_MIN_UNITS, _centres, _check_scale_units

__all__ = [
    "UserQuery",
    "AboveThreshold",
    "ThresholdLeaf",
    "STEP_TYPES",
    "MEASUREMENT_TYPES",
    "above_threshold",
    "query",
    "leaf",
    "add_direction",
]

TOP, BOT, NOT_ANSWERED = 1, 0, -1
_MAX_QUERIES = 4096
_MAX_UNITS = 2**52


# --------------------------------------------------------------------------- a user query


@dataclass(frozen=True)
class UserQuery(Step):
    """A query given by a user function ``fn(records) -> number`` with a STATED ``sensitivity`` Δ: on
    neighbouring data sets (the mechanism's relation) its answers differ by at most Δ. ``increasing``: adding
    a record never decreases the answer (removing never increases it), as for counts; the queries then get
    the monotone saving. Both are preconditions of the proof (stated, not derived), which ``dpharness
    audit`` tests. The answer is read as the exact value of the number returned (a float as its binary
    value); a non-finite answer is an error. Used only inside :func:`above_threshold`."""

    fn: Callable = field(compare=False)
    sensitivity: Any = 1
    increasing: bool = False

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ParameterError(f"fn={self.fn!r} is not callable; pass a function of the records returning a number.")
        object.__setattr__(self, "sensitivity", _plain("sensitivity", self.sensitivity))
        if Fraction(self.sensitivity) < 0:
            raise ParameterError(
                f"sensitivity={self.sensitivity!r} must be >= 0; pass the most the answer can move "
                "between neighbouring data sets."
            )
        if not isinstance(self.increasing, bool):
            raise ParameterError(f"increasing={self.increasing!r} must be True or False.")

    def describe(self) -> str:
        extra = ", increasing" if self.increasing else ""
        return f"query({getattr(self.fn, '__name__', 'fn')}, sensitivity={self.sensitivity!r}{extra})"

    def answer(self, value: Any) -> Fraction:
        out = self.fn(value)
        if isinstance(out, (np.integer, np.floating)):
            out = out.item()
        if isinstance(out, np.ndarray) and out.size == 1:
            out = out.reshape(-1)[0].item()
        # the messages name what came back, never its value: a query's answer on real data is not released
        if isinstance(out, bool) or not isinstance(out, (int, float, Fraction)):
            shape = f" of shape {out.shape}" if isinstance(out, np.ndarray) else ""
            raise ParameterError(
                f"query {self.describe()} returned a {type(out).__name__}{shape}, not one number; return one number."
            )
        if isinstance(out, float) and not math.isfinite(out):
            raise ParameterError(
                f"query {self.describe()} returned a float that is not finite (NaN or an infinity); return a finite "
                "number."
            )
        return Fraction(out)


# --------------------------------------------------------------------------- the measurement


def _positive_scale(name: str, value: Any, g: Fraction) -> Any:
    value = _plain(name, value)
    if Fraction(value) <= 0:
        raise ParameterError(f"{name}={value!r} must be > 0; pass a positive noise scale.")
    _check_scale_units(name, value, g)
    if Fraction(value) / g < LAPLACE_MIN_UNITS:
        raise ParameterError(f"{name}={value!r} is below 2**-1000 grid steps; pass a larger {name}.")
    return value


def _query_space(q: Any, space: Space, i: int) -> Space:
    """The space of query ``q``'s answer on records of ``space``: one number."""
    if isinstance(q, UserQuery):
        return Space("scalar", 1, (-math.inf,), (math.inf,), None)
    if not isinstance(q, (Transformation, Chain)):
        raise ParameterError(
            f"queries[{i}]={q!r} is not a query; pass transformations such as dp.count() or "
            "dp.histogram(edges=[k, hi]), or dp.query(fn, sensitivity=...)."
        )
    out, _ = check_structure(q, space)
    if out is None:
        raise ParameterError(f"queries[{i}]={q.describe()} releases noise; a query is a transformation only.")
    if out.kind not in ("scalar", "vector") or out.dim != 1:
        raise ParameterError(
            f"queries[{i}]={q.describe()} gives {out.describe()}; a query gives one number (e.g. "
            "dp.histogram(edges=[k, hi]) for one bin, dp.count(), dp.sum())."
        )
    return out


def _transformations_only(q: Any, i: int) -> None:
    for node in walk_nodes(q):
        if not isinstance(node, (Transformation, Chain, UserQuery)):
            raise ParameterError(f"queries[{i}] contains {node.describe()}; a query is made of transformations only.")


@dataclass(frozen=True)
class AboveThreshold(Measurement):
    """Above threshold / sparse vector (Lyu, Su & Li 2017, Alg. 1) with discrete Laplace noise on the grid
    ``granularity·Z``: see the module docstring for the algorithm, its law and its privacy map.

    ``threshold`` T (read exactly, rounded to the grid once); ``queries`` (None on a vector input: its
    coordinates); ``scale`` the threshold noise's, ``query_scale`` the queries' (default 2c·scale); ``c`` the
    number of ⊤ answers after which it stops; ``granularity`` a power of two (default 1: integer answers
    such as counts are not rounded)."""

    threshold: Any
    queries: tuple | None
    scale: Any
    query_scale: Any
    c: int = 1
    granularity: Any = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "granularity", _plain("granularity", self.granularity))
        check_granularity("granularity", self.granularity)
        g = Fraction(self.granularity)
        object.__setattr__(self, "c", _v.integer("c", self.c, minimum=1))
        object.__setattr__(self, "scale", _positive_scale("scale", self.scale, g))
        object.__setattr__(self, "query_scale", _positive_scale("query_scale", self.query_scale, g))
        object.__setattr__(self, "threshold", _plain("threshold", self.threshold))
        if abs(Fraction(self.threshold) / g) > _MAX_UNITS:
            raise ParameterError(
                f"threshold={self.threshold!r} is beyond 2**52 grid steps; pass a smaller threshold or "
                "a coarser granularity."
            )
        if self.queries is not None:
            qs = tuple(self.queries)
            if not 1 <= len(qs) <= _MAX_QUERIES:
                raise ParameterError(f"queries has {len(qs)} entries; pass between 1 and {_MAX_QUERIES}.")
            for i, q in enumerate(qs):
                if not isinstance(q, Step):
                    raise ParameterError(
                        f"queries[{i}]={q!r} is not a query; pass transformations such as dp.count() "
                        "or dp.query(fn, sensitivity=...)."
                    )
                _transformations_only(q, i)
            object.__setattr__(self, "queries", qs)

    # --- exact parameters
    @property
    def g(self) -> Fraction:
        return Fraction(self.granularity)

    @property
    def t_rho(self) -> Fraction:
        return Fraction(self.scale) / self.g

    @property
    def t_nu(self) -> Fraction:
        return Fraction(self.query_scale) / self.g

    @property
    def threshold_units(self) -> int:
        return _rhu(Fraction(self.threshold) / self.g)

    def describe(self) -> str:
        # every query in full: the description keys the gate's cache and the source hash
        n = (
            "queries=coordinates"
            if self.queries is None
            else f"queries=[{', '.join(q.describe() for q in self.queries)}] ({len(self.queries)})"
        )
        g = "" if self.granularity == 1 else f", granularity={self.granularity!r}"
        return (
            f"above_threshold({self.threshold!r}, {n}, scale={self.scale!r}, query_scale={self.query_scale!r}, "
            f"c={self.c}{g})"
        )

    def query_spaces(self, space: Space) -> list[Space]:
        assert self.queries is not None  # asked only of a threshold given queries=
        return [_query_space(q, space, i) for i, q in enumerate(self.queries)]

    def out_width(self, space: Space) -> int:
        if self.queries is None:
            if space.kind not in ("scalar", "vector"):
                raise ParameterError(
                    f"{self.describe()} on {space.describe()}: pass queries=[...] (transformations of "
                    "the records, e.g. dp.histogram(edges=[k, hi]) or dp.query(fn, sensitivity=...))."
                )
            return space.dim
        if space.kind != "records":
            raise ParameterError(
                f"{self.describe()}: queries run on records, but the previous step gives "
                f"{space.describe()}; drop queries= to compare the vector's coordinates."
            )
        self.query_spaces(space)
        return len(self.queries)

    def answers(self, value: Any, space: Space) -> list[Fraction]:
        """The exact answers q_1..q_n on ``value``."""
        if self.queries is None:
            if isinstance(value, tuple):
                return [Fraction(v) for v in value]
            arr = np.asarray(value, dtype=float).ravel()
            return [Fraction(v) for v in arr.tolist()]
        out = []
        for q in self.queries:
            if isinstance(q, UserQuery):  # its own copy: a query writing into the records changes no other answer
                out.append(q.answer(value.copy() if isinstance(value, np.ndarray) else value))
                continue
            a = execute(q, value, space, 1, None)  # type: ignore[arg-type]  # transformations only (_query_space): no rng read
            if isinstance(a, tuple):
                (a,) = a
            out.append(Fraction(a) if not isinstance(a, np.ndarray) else Fraction(float(a.reshape(-1)[0])))
        return out

    def centres(self, value: Any, space: Space) -> list[int]:
        return _centres(tuple(self.answers(value, space)), self.g)

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        from dpharness.mechanisms._exact import discrete_laplace

        c = self.centres(value, space)
        n = len(c)
        rho = discrete_laplace(self.t_rho, (size, 1), rng)
        nu = discrete_laplace(self.t_nu, (size, n), rng)
        if rho.dtype == object or nu.dtype == object:
            lhs = nu.astype(object) + np.asarray(c, dtype=object)
            rhs = rho.astype(object) + self.threshold_units
            above = np.vectorize(lambda a, b: a >= b, otypes=[bool])(lhs, rhs)
        else:
            above = nu.astype(np.int64) + np.asarray(c, dtype=np.int64) >= rho.astype(np.int64) + self.threshold_units
        codes = above.astype(np.int8)
        before = np.cumsum(above, axis=1) - above  # ⊤ answers strictly before each query
        codes[before >= self.c] = NOT_ANSWERED
        return codes.astype(float)


STEP_TYPES = frozenset({AboveThreshold, UserQuery})
MEASUREMENT_TYPES = frozenset({AboveThreshold})


# --------------------------------------------------------------------------- monotonicity (read by the prover)


def add_direction(q: Any, space: Space) -> int | None:
    """Under add/remove: +1 when adding a record never decreases the query's answer (and removing never
    increases it), −1 for the reverse, None when neither is known. Read off the query's structure: counts,
    one-bin histograms and sums of squares go up; a sum (of products) goes up when every contribution is
    >= 0 and down when every one is <= 0; record-wise steps (clamp, column) keep the records' bounds."""
    if isinstance(q, UserQuery):
        return 1 if q.increasing else None
    if isinstance(q, Chain):
        if isinstance(q.first, Transformation) and not isinstance(q.second, UserQuery):
            return add_direction(q.second, q.first.out_space(space))
        return None
    if isinstance(q, Transformation):
        return q.add_direction(space)
    return None


# --------------------------------------------------------------------------- exact law (read by _law)


def answer_patterns(n: int, c: int) -> np.ndarray:
    """Every answer vector the algorithm can output (rows over {1, 0, −1}), when there are at most 2**14."""
    total = sum(math.comb(n, k) for k in range(0, min(c, n) + 1))
    if total > 2**14:
        raise UnsupportedError(
            f"above_threshold over {n} queries with c = {c} has {total} outputs; the law lists at "
            "most 16384 (audit on samples)."
        )
    rows: list[list[int]] = []

    def walk(prefix: list[int], tops: int) -> None:
        if tops == c:
            rows.append(prefix + [NOT_ANSWERED] * (n - len(prefix)))
            return
        if len(prefix) == n:
            rows.append(prefix)
            return
        walk(prefix + [TOP], tops + 1)
        walk(prefix + [BOT], tops)

    walk([], 0)
    return np.array(rows, dtype=np.int8).reshape(-1, n)


def _log_survival(z: np.ndarray, t: float) -> np.ndarray:
    """ln P(ν >= z) for ν ~ DLap(t) (P(k) = (1 − q)/(1 + q) q^|k|, q = e^{−1/t}): q^z/(1 + q) for z >= 0,
    1 − q^{1−z}/(1 + q) for z < 0."""
    lq = -1.0 / t
    l1q = math.log1p(math.exp(lq))
    z = np.asarray(z, dtype=float)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = z[pos] * lq - l1q
    out[~pos] = np.log1p(-np.exp((1 - z[~pos]) * lq - l1q))
    return out


class ThresholdLeaf:
    """One :class:`AboveThreshold` measurement and the exact answers it compares on some input; ``log_prob``
    of its ``width`` output columns (float, for audits) and ``outputs`` (its finite support). Pattern
    probabilities sum over the threshold noise r from min(0, min_i(c_i − T_g)) − w to max(0, max_i(c_i − T_g)) + w,
    w = 60(t_ρ + t_ν) + 2: beyond the breakpoints every factor but one kind is within e^{−60} of its limit and
    the rest decays at least as e^{−|r|/t_ρ}, so the omitted mass is below about e^{−60} of the sum."""

    def __init__(self, measurement: AboveThreshold, value: Any, space: Space) -> None:
        self.measurement = measurement
        self.centres = measurement.centres(value, space)
        self.width = len(self.centres)

    def pattern_log_probs(self, codes: np.ndarray) -> np.ndarray:
        m = self.measurement
        tr, tn = float(m.t_rho), float(m.t_nu)
        gaps = [ci - m.threshold_units for ci in self.centres]
        w = math.ceil(60 * (tr + tn)) + 2
        lo, hi = min(0, min(gaps)) - w, max(0, max(gaps)) + w
        if hi - lo + 1 > 2_000_000:
            raise UnsupportedError(
                f"{m.describe()}: the law sums over more than 2e6 threshold values; audit on samples."
            )
        r = np.arange(lo, hi + 1, dtype=float)
        lq = -1.0 / tr
        log_norm = math.log(-math.expm1(lq)) - math.log1p(math.exp(lq))
        log_rho = log_norm + np.abs(r) * lq
        c = np.asarray(self.centres, dtype=float)
        z = m.threshold_units + r[None, :] - c[:, None]  # ⊤ iff ν >= z
        top = _log_survival(z, tn)  # (n, R)
        bot = _log_survival(-(z - 1), tn)  # P(ν <= z − 1) = P(ν >= 1 − z)
        codes = np.asarray(codes).reshape(-1, self.width)
        tops = (codes == TOP).astype(float)
        bots = (codes == BOT).astype(float)
        total = log_rho[None, :] + tops @ top + bots @ bot  # (P, R)
        mx = total.max(axis=1, keepdims=True)
        return mx[:, 0] + np.log(np.exp(total - mx).sum(axis=1))

    def outputs(self) -> list[tuple]:
        return [tuple(float(v) for v in row) for row in answer_patterns(self.width, self.measurement.c)]

    def log_prob(self, cols: np.ndarray) -> np.ndarray:
        rows = np.asarray(cols, dtype=float).reshape(len(cols), -1)
        out = np.full(len(rows), -math.inf)
        valid = np.all(np.isin(rows, (TOP, BOT, NOT_ANSWERED)), axis=1)
        tops = rows == TOP
        before = np.cumsum(tops, axis=1) - tops
        valid &= np.all((before >= self.measurement.c) == (rows == NOT_ANSWERED), axis=1)
        if valid.any():
            uniq, inverse = np.unique(rows[valid].astype(np.int8), axis=0, return_inverse=True)
            out[valid] = self.pattern_log_probs(uniq)[np.asarray(inverse).reshape(-1)]
        return out


def leaf(step: Any, value: Any, space: Space, walk: Any = None) -> ThresholdLeaf:
    return ThresholdLeaf(step, value, space)


register(UserQuery)
register(*MEASUREMENT_TYPES, leaf=leaf)


# --------------------------------------------------------------------------- public constructors


def query(fn: Callable, *, sensitivity: Any, increasing: bool = False) -> UserQuery:
    """A query for :func:`above_threshold` by a user function of the records, with a STATED
    ``sensitivity`` (a precondition of the proof, tested by the audit); ``increasing``: adding a record
    never decreases the answer."""
    return UserQuery(fn, sensitivity, increasing)


def above_threshold(
    threshold: Any,
    *,
    queries: Sequence | None = None,
    scale: Any,
    query_scale: Any = None,
    c: int = 1,
    granularity: Any = 1,
) -> AboveThreshold:
    """Above threshold / sparse vector (Lyu, Su & Li 2017, Alg. 1) over ``queries`` (transformations giving
    one number each, or :func:`query`; omitted on a vector input: its coordinates): for each in order, 1 if
    its noisy answer reaches the noisy threshold, else 0; −1 for every query after the ``c``-th 1. Discrete
    Laplace noise on the grid ``granularity·Z`` (``scale`` on the threshold, ``query_scale``, default
    2c·scale, on each query). ε = D/t_ρ + 2cD/t_ν (monotone queries: D/t_ρ + cD/t_ν). See
    :mod:`dpharness.mechanisms.parts.threshold`."""
    c = _v.integer("c", c, minimum=1)
    if query_scale is None:
        scale = _plain("scale", scale)
        query_scale = 2 * c * (Fraction(scale) if isinstance(scale, Fraction) else scale)
        if isinstance(query_scale, float) and Fraction(query_scale) != 2 * c * Fraction(scale):
            query_scale = 2 * c * Fraction(scale)
    if queries is not None:
        if isinstance(queries, (str, bytes)) or not hasattr(queries, "__iter__"):
            raise ParameterError(f"queries={queries!r} is not a sequence; pass a list of queries.")
        queries = tuple(queries)
    return AboveThreshold(threshold, queries, scale, query_scale, c, granularity)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
