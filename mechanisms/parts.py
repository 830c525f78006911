"""Mechanisms built from proven parts: transformations, noise measurements and combinators.

In the spirit of OpenDP's transformations and measurements (``make_chain``): a **transformation**
maps data exactly and carries a *stability map* (how far apart its outputs can be on neighbouring
inputs), a **measurement** adds noise and carries a *privacy map* (its privacy loss as a function
of the input distance), and **combinators** build larger mechanisms from smaller ones::

    from dpharness import parts as dp, PureDP, AddRemove, RealInterval

    noisy_mean = dp.mechanism(
        name="team_noisy_mean", records=RealInterval(0, 100), relation=AddRemove(),
        steps=dp.clamp(0, 100) >> dp.compose(dp.sum() >> dp.laplace(scale=200), dp.count() >> dp.laplace(scale=2))
              >> dp.post(lambda s, c: s / max(c, 1)),
        claim=PureDP(1),
    )

The value ``dp.mechanism(...)`` returns is a :class:`~dpharness.core.Mechanism`. Its sampler is the
step structure executed, and ``dpharness.prove`` walks the same structure (``dpharness.proofs.parts``)
adding one lemma per node, so the code that runs and the code that is proved are one thing.

Numeric model (exact at every accepted parameter)
-------------------------------------------------
* Records are read as the exact binary values of their floats; clamping is exact; every aggregate
  (count, sum, sum of squares, sum of products, histogram) is computed exactly in rational arithmetic.
* A noise measurement with granularity ``g`` (a power of two) rounds each exact value to the grid,
  ``c = floor(v/g + 1/2)`` (an exact integer), adds integer noise drawn by an exact sampler
  (discrete Laplace with scale ``t = scale/g``, discrete Gaussian with variance ``(σ/g)²``;
  Canonne, Kamath & Steinke 2020), and releases ``g * (c + noise)`` as a float. The float is the
  round-to-nearest of the exact grid value: a deterministic function of the exact integer output
  (post-processing), identical to it while ``|c + noise| < 2**53``.
* Parameters are read as the exact values the sampler uses (a float as its binary value).

Neighbour relations: ``AddRemove()`` or ``Substitute()`` on data sets of records, or
``BoundedChange(Δ, norm)`` on a vector of query answers (``input="vector"``); stability maps are
derived per relation.

Local randomizers (``input="record"``): the input is ONE record of a finite domain (``Finite`` or
``IntegerRange``: its k categories) and any two distinct records are neighbours (``Substitute()``,
local DP). The noise measurements on a record are k-ary randomized response
(:func:`randomized_response`), Warner's randomized response (:func:`warner`) and basic RAPPOR's
bit flipping on the one-hot encoding (:func:`rappor`); each samples exactly (a lie or flip
probability is never rounded) and releases category values (RAPPOR: 0/1 bits)::

    survey = dp.mechanism(name="survey", records=Finite((1, 2, 3)), relation=Substitute(), input="record",
                          steps=dp.randomized_response(log_odds=1), claim=PureDP(1))
"""

from __future__ import annotations

import builtins
import contextvars
import hashlib
import inspect
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from dpharness import _validate as _v
from dpharness.core import (
    AddRemove, BoundedChange, Claim, Domain, Finite, InputSpec, IntegerRange, Mechanism, OutputLaw, PureDP,
    RealBox, RealInterval, Relation, Substitute, record_definition,
)
from dpharness.errors import ParameterError

from ._noise import DEFAULT_GRANULARITY, check_granularity

__all__ = [
    "Step", "Transformation", "Measurement", "Space", "Distance", "Chain", "Compose", "Post", "Parallel",
    "GridLaplace", "GridGaussian",
    "clamp", "column", "count", "sum", "sum_squares", "sum_products", "histogram",
    "laplace", "discrete_laplace", "gaussian", "discrete_gaussian", "geometric", "truncated_geometric",
    "LocalRandomizer", "LocalRandomizedResponse", "LocalWarner", "LocalRappor", "randomized_response", "warner", "rappor",
    "quantile", "quantile_score", "exponential", "report_noisy_max", "above_threshold", "query",
    "bound_contributions", "group_by", "partition_select", "AddRemoveUser",  # noqa: F822 (module __getattr__)
    "compose", "post", "parallel", "repeat", "poisson_sample", "PoissonSample", "Repeat",
    "map_records", "clip_norm", "iterate", "MapRecords", "ClipNorm", "Iterate",
    "mechanism", "PartsMechanism", "Composite", "COMPOSITE_SEALED",
    "grid_steps", "input_space", "input_distance",
]

_INF = math.inf


def _plain(name: str, value: Any) -> int | float | Fraction:
    """The one value of a parameter, as a plain ``int``, ``float`` or ``Fraction`` (numpy scalars
    unwrapped). Every reader (the prover's ``Fraction(x)``, the sampler's ``float(x)``, the report's
    ``str(x)``) then reads the same number. A subclass of a number type is refused: it may answer
    ``float()``, ``Fraction()`` and comparisons differently (a parameter read two ways)."""
    if isinstance(value, (np.integer, np.floating)) and type(value).__module__ == "numpy":
        value = value.item()
    if type(value) not in (int, float, Fraction):
        if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
            raise ParameterError(f"{name}={value!r} is not a number; pass an int, float or Fraction.")
        raise ParameterError(f"{name}={value!r} is a {type(value).__qualname__}, a subclass of "
                             f"{type(value).__mro__[1].__qualname__}; pass a plain int, float or Fraction (a subclass "
                             "may read as different numbers to the sampler and the prover).")
    if type(value) is float and not math.isfinite(value):
        raise ParameterError(f"{name}={value!r} is not finite; pass a finite number.")
    if type(value) is Fraction and (type(value.numerator) is not int or type(value.denominator) is not int):
        value = Fraction(int.__int__(value.numerator), int.__int__(value.denominator))
    return value


def _frac(name: str, value: Any) -> Fraction:
    """The exact value of a parameter: ints and Fractions as they are, a float as its binary value."""
    return Fraction(_plain(name, value))


def _float_exact(name: str, value: Any, what: str) -> int | float | Fraction:
    """A plain parameter that a float represents exactly (the sampler compares records with it as a
    float); refused otherwise, naming the nearest float."""
    value = _plain(name, value)
    exact_value = Fraction(value)
    try:
        as_float = float(exact_value)
    except OverflowError:
        raise ParameterError(f"{name}={value!r} is beyond the float range; pass a smaller {what}.") from None
    if Fraction(as_float) != exact_value:
        raise ParameterError(f"{name}={value!r} is not a float: {what} is compared with records as a float, so pass a "
                             f"value a float represents exactly (e.g. {as_float!r}).")
    return value


def _rhu(v: Fraction) -> int:
    """floor(v + 1/2) of an exact rational (round half up)."""
    return math.floor(v + Fraction(1, 2))


# --------------------------------------------------------------------------- what flows between steps

@dataclass(frozen=True)
class Space:
    """The type of a value between steps.

    ``kind``: ``"records"`` (a data set of records; ``cols`` columns; each column's values in
    ``[lo[j], hi[j]]``), ``"scalar"`` (one exact number in ``[lo[0], hi[0]]``), ``"vector"``
    (``dim`` exact numbers) or ``"record"`` (ONE record, one of the k ``categories``: ints, or floats
    that are not integers, in the domain's order). ``quantum``: every value is an integer multiple
    of it (e.g. 1 for counts), or None. Bounds are exact Fractions or ±inf."""

    kind: str
    dim: int = 1
    lo: tuple = (-_INF,)
    hi: tuple = (_INF,)
    quantum: Fraction | None = None
    categories: tuple | None = None

    def describe(self) -> str:
        if self.kind == "record":
            cats = self.categories
            shown = ", ".join(map(str, cats)) if len(cats) <= 6 else f"{cats[0]}, {cats[1]}, ..., {cats[-1]}"
            return f"one record of {len(cats)} categories {{{shown}}}"
        rng = ", ".join(f"[{_show(a)}, {_show(b)}]" for a, b in zip(self.lo, self.hi))
        what = {"records": f"records of {self.dim} column(s)", "scalar": "a number", "vector": f"a vector of {self.dim}"}[self.kind]
        return f"{what} in {rng}" + (f", multiples of {self.quantum}" if self.quantum is not None else "")


def _show(x: Any) -> str:
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return str(x)


@dataclass(frozen=True)
class Distance:
    """How far apart a value can be on neighbouring inputs.

    For records: ``relation`` (neighbouring data sets under AddRemove / Substitute). For numbers and
    vectors: exact bounds on the L1 distance, the squared L2 distance and the L∞ distance, and
    ``monotone``: on every neighbouring pair the coordinates all move up or all move down (a histogram
    under add/remove), which selections read (the exponential mechanism's factor-2 saving)."""

    relation: Relation | None = None
    l1: Fraction = Fraction(0)
    l2sq: Fraction = Fraction(0)
    linf: Fraction = Fraction(0)
    monotone: bool = False  # every coordinate moves in the same direction (all up or all down)

    def describe(self) -> str:
        if self.relation is not None:
            return f"neighbouring data sets ({self.relation.describe()})"
        if self.l1 == self.linf and self.l2sq == self.l1 ** 2:
            return f"|v − v'| <= {self.l1}"
        return f"||v − v'||₁ <= {self.l1}, ||v − v'||₂² <= {self.l2sq}, ||v − v'||∞ <= {self.linf}"


def _scalar_distance(d: Fraction) -> Distance:
    return Distance(None, d, d * d, d)


# --------------------------------------------------------------------------- steps

class Step:
    """A node of a mechanism's structure. ``a >> b`` chains two steps."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        record_definition(cls)

    def __rshift__(self, other: Any) -> "Step":
        if not isinstance(other, Step):
            raise ParameterError(f"right side of >> is {other!r}; chain a dpharness.parts step (transformation, "
                                 "noise, dp.compose(...), dp.post(fn)).")
        return _chain(self, other)

    def describe(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


record_definition(Step)


class Transformation(Step):
    """Exact data map with a stability map. Subclasses implement ``out_space``, ``stability`` and ``apply``."""

    def out_space(self, space: Space) -> Space:
        raise NotImplementedError

    def stability(self, space: Space, d: Distance) -> Distance:
        raise NotImplementedError

    def apply(self, value: Any) -> Any:
        raise NotImplementedError


class Measurement(Step):
    """A randomized step: ``run(value, size, rng)`` returns ``size`` outputs (first axis indexes
    samples); its privacy is derived by ``dpharness.proofs.parts``."""

    def out_width(self, space: Space) -> int:
        """Number of output coordinates (1 for a scalar)."""
        raise NotImplementedError

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError


# --- transformations -----------------------------------------------------------------

def _need(space: Space, kind: str, what: str) -> None:
    if space.kind != kind:
        raise ParameterError(f"{what} takes {kind}, but the previous step gives {space.describe()}; "
                             f"reorder the steps (e.g. transformations on records come before the noise).")


@dataclass(frozen=True)
class Clamp(Transformation):
    """Record-wise clamp of every column to ``[lo, hi]`` (exact on floats). 1-stable: a record-wise
    map keeps neighbouring data sets neighbouring under add/remove and substitution."""

    lo: Any
    hi: Any

    def __post_init__(self) -> None:
        object.__setattr__(self, "lo", _float_exact("lo", self.lo, "a clamp bound"))
        object.__setattr__(self, "hi", _float_exact("hi", self.hi, "a clamp bound"))
        if not Fraction(self.lo) < Fraction(self.hi):
            raise ParameterError(f"lo={self.lo!r} must be below hi={self.hi!r}; pass clamp(lo, hi) with lo < hi.")

    def describe(self) -> str:
        return f"clamp({self.lo}, {self.hi})"

    def out_space(self, space: Space) -> Space:
        _need(space, "records", "clamp")
        lo, hi = _frac("lo", self.lo), _frac("hi", self.hi)
        los = tuple(max(lo, a) if a != -_INF else lo for a in space.lo)
        his = tuple(min(hi, b) if b != _INF else hi for b in space.hi)
        if any(a > b for a, b in zip(los, his)):
            raise ParameterError(f"clamp({self.lo}, {self.hi}) does not meet the record domain; pass bounds inside it.")
        return Space("records", space.dim, los, his, None)

    def stability(self, space: Space, d: Distance) -> Distance:
        return d

    def apply(self, value: Any) -> Any:
        lo, hi = float(self.lo), float(self.hi)
        return np.clip(np.asarray(value, dtype=float), lo, hi)


# the state of the running dp.iterate round on this thread, passed to dp.map_records functions
_ITERATE_STATE: contextvars.ContextVar = contextvars.ContextVar("dpharness_iterate_state")


@dataclass(frozen=True)
class MapRecords(Transformation):
    """Record-wise map by a user function: each record ``r`` becomes ``fn(r)`` (inside
    :func:`iterate`: ``fn(state, r)``, the current state as its first argument), a number or
    ``columns`` numbers. 1-stable under add/remove and substitution: the added, removed or substituted
    record maps to one record, every other record to itself. The values are unbounded: clip them
    (:func:`clip_norm`, :func:`clamp`) before an aggregate. ``fn`` must be a pure function of its
    arguments (no state kept between calls, no access to other records); the proof states it."""

    fn: Callable = field(compare=False)
    columns: int = 1

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ParameterError(f"fn={self.fn!r} is not callable; pass a function of one record (inside dp.iterate: of "
                                 "the state and one record).")
        object.__setattr__(self, "columns", _v.integer("columns", self.columns, minimum=1))

    def describe(self) -> str:
        return f"map_records({getattr(self.fn, '__name__', 'fn')}" + (f", columns={self.columns})" if self.columns > 1 else ")")

    def out_space(self, space: Space) -> Space:
        _need(space, "records", "map_records")
        return Space("records", self.columns, (-_INF,) * self.columns, (_INF,) * self.columns, None)

    def stability(self, space: Space, d: Distance) -> Distance:
        return d

    def apply(self, value: Any) -> Any:
        arr = np.asarray(value, dtype=float)
        state = _ITERATE_STATE.get(None)
        rows = [self.fn(r) if state is None else self.fn(state, r) for r in arr]
        out = np.asarray(rows, dtype=float).reshape(len(arr), -1) if rows else np.zeros((0, self.columns))
        if out.shape[1] != self.columns:
            raise ParameterError(f"map_records fn returned {out.shape[1]} value(s) per record, not columns={self.columns}; "
                                 "pass columns= the number of values it returns.")
        if not np.all(np.isfinite(out)):
            raise ParameterError(f"map_records fn returned a value that is not finite (record {int(np.argmin(np.isfinite(out).all(axis=1)))}); "
                                 "return finite numbers.")
        return out[:, 0] if self.columns == 1 else out


@dataclass(frozen=True)
class ClipNorm(Transformation):
    """Record-wise norm clipping: a record ``v`` (one or more columns) becomes ``v·min(1, bound/‖v‖)``
    in the ``norm`` ("l1", "l2", "linf"), computed in floats and then checked exactly (rationals): a
    record whose clipped norm still exceeds ``bound`` is shrunk by one part in 2^50 until it does not,
    so ‖output‖ <= bound holds exactly. One column: exactly ``clamp(−bound, bound)``. 1-stable
    (record-wise); every output column lies in ``[−bound, bound]``, the box the aggregates that follow
    read (for several columns this box is looser than the norm ball)."""

    bound: Any
    norm: str = "l2"

    def __post_init__(self) -> None:
        bound = _float_exact("bound", self.bound, "a clipping bound")
        if not Fraction(bound) > 0:
            raise ParameterError(f"bound={self.bound!r} must be > 0; pass the largest norm a record may keep.")
        object.__setattr__(self, "bound", bound)
        _v.choice("norm", self.norm, ("l1", "l2", "linf"))

    def describe(self) -> str:
        return f"clip_norm({self.bound}, norm={self.norm!r})"

    def out_space(self, space: Space) -> Space:
        _need(space, "records", "clip_norm")
        b = _frac("bound", self.bound)
        return Space("records", space.dim, tuple(max(-b, a) for a in space.lo), tuple(min(b, c) for c in space.hi), None)

    def stability(self, space: Space, d: Distance) -> Distance:
        return d

    def apply(self, value: Any) -> Any:
        arr = np.asarray(value, dtype=float)
        b = float(self.bound)
        if arr.ndim == 1 or self.norm == "linf":
            return np.clip(arr, -b, b)
        order = 1 if self.norm == "l1" else 2
        with np.errstate(divide="ignore", invalid="ignore"):
            norms = np.linalg.norm(arr, ord=order, axis=1)
            scale = np.where(norms > b, b / norms, 1.0)
        out = arr * scale[:, None]
        bq = Fraction(b)
        for i in np.flatnonzero(norms > b):  # the float scaling may overshoot by an ulp: check exactly
            while _norm_exceeds(out[i], bq, order):
                out[i] = out[i] * (1 - 2.0 ** -50)
        return out


def _norm_exceeds(v: np.ndarray, bound: Fraction, order: int) -> bool:
    values = [Fraction(x) for x in v.tolist()]
    if order == 1:
        return builtins.sum(abs(x) for x in values) > bound
    return builtins.sum(x * x for x in values) > bound * bound


@dataclass(frozen=True)
class Column(Transformation):
    """Record-wise: keep column ``j`` of multi-column records (1-stable)."""

    j: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "j", _v.integer("j", self.j, minimum=0))

    def describe(self) -> str:
        return f"column({self.j})"

    def out_space(self, space: Space) -> Space:
        _need(space, "records", "column")
        if self.j >= space.dim:
            raise ParameterError(f"j={self.j} but records have {space.dim} column(s); pass j < {space.dim}.")
        return Space("records", 1, (space.lo[self.j],), (space.hi[self.j],), None)

    def stability(self, space: Space, d: Distance) -> Distance:
        return d

    def apply(self, value: Any) -> Any:
        return np.asarray(value)[:, self.j]


@dataclass(frozen=True)
class Count(Transformation):
    """The number of records. Stability: 1 under add/remove, 0 under substitution."""

    def describe(self) -> str:
        return "count()"

    def out_space(self, space: Space) -> Space:
        _need(space, "records", "count")
        return Space("scalar", 1, (Fraction(0),), (_INF,), Fraction(1))

    def stability(self, space: Space, d: Distance) -> Distance:
        return _scalar_distance(Fraction(1) if isinstance(d.relation, AddRemove) else Fraction(0))

    def apply(self, value: Any) -> Any:
        return Fraction(len(np.asarray(value)))


def _bounded(space: Space, what: str) -> tuple[Fraction, Fraction]:
    lo, hi = space.lo[0], space.hi[0]
    if lo == -_INF or hi == _INF:
        raise ParameterError(f"{what} needs bounded records, but they are in [{_show(lo)}, {_show(hi)}]; "
                             "put dp.clamp(lo, hi) before it or declare bounded records.")
    return lo, hi


def _exact_values(arr: np.ndarray) -> list[Fraction]:
    return [Fraction(v) for v in np.asarray(arr, dtype=float).ravel().tolist()]


def _contribution(lo: Fraction, hi: Fraction, d: Distance) -> Fraction:
    """Stability of a sum of per-record contributions in [lo, hi]: max(|lo|, |hi|) under add/remove
    (one contribution appears or vanishes), hi − lo under substitution (one contribution changes)."""
    return max(abs(lo), abs(hi)) if isinstance(d.relation, AddRemove) else hi - lo


@dataclass(frozen=True)
class Sum(Transformation):
    """The exact sum of one-column records in ``[L, U]``. Stability: ``max(|L|, |U|)`` (add/remove),
    ``U − L`` (substitution)."""

    def describe(self) -> str:
        return "sum()"

    def contribution(self, space: Space) -> tuple[Fraction, Fraction]:
        _need(space, "records", "sum")
        if space.dim != 1:
            raise ParameterError(f"sum() takes one-column records, got {space.dim}; put dp.column(j) before it.")
        return _bounded(space, "sum()")

    def out_space(self, space: Space) -> Space:
        lo, hi = self.contribution(space)
        return Space("scalar", 1, (-_INF if lo < 0 else Fraction(0),), (_INF if hi > 0 else Fraction(0),), None)

    def stability(self, space: Space, d: Distance) -> Distance:
        lo, hi = self.contribution(space)
        return _scalar_distance(_contribution(lo, hi, d))

    def apply(self, value: Any) -> Any:
        return builtins.sum(_exact_values(value), Fraction(0))


@dataclass(frozen=True)
class SumSquares(Transformation):
    """The exact sum of squares of one-column records in ``[L, U]``; each square lies in
    ``[m, M]`` with ``M = max(L², U²)``, ``m = 0`` if ``L <= 0 <= U`` else ``min(L², U²)``.
    Stability: ``M`` (add/remove), ``M − m`` (substitution)."""

    def describe(self) -> str:
        return "sum_squares()"

    def contribution(self, space: Space) -> tuple[Fraction, Fraction]:
        _need(space, "records", "sum_squares")
        if space.dim != 1:
            raise ParameterError(f"sum_squares() takes one-column records, got {space.dim}; put dp.column(j) before it.")
        lo, hi = _bounded(space, "sum_squares()")
        top = max(lo * lo, hi * hi)
        bottom = Fraction(0) if lo <= 0 <= hi else min(lo * lo, hi * hi)
        return bottom, top

    def out_space(self, space: Space) -> Space:
        self.contribution(space)
        return Space("scalar", 1, (Fraction(0),), (_INF,), None)

    def stability(self, space: Space, d: Distance) -> Distance:
        lo, hi = self.contribution(space)
        return _scalar_distance(_contribution(lo, hi, d))

    def apply(self, value: Any) -> Any:
        return builtins.sum((v * v for v in _exact_values(value)), Fraction(0))


@dataclass(frozen=True)
class SumProducts(Transformation):
    """The exact sum over records of ``x_i * x_j`` (columns ``i`` and ``j``); each product lies in the
    interval spanned by the four corner products of the columns' bounds (interval arithmetic).
    Stability as for :class:`Sum` on that interval."""

    i: int = 0
    j: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "i", _v.integer("i", self.i, minimum=0))
        object.__setattr__(self, "j", _v.integer("j", self.j, minimum=0))

    def describe(self) -> str:
        return f"sum_products({self.i}, {self.j})"

    def contribution(self, space: Space) -> tuple[Fraction, Fraction]:
        _need(space, "records", "sum_products")
        if max(self.i, self.j) >= space.dim:
            raise ParameterError(f"sum_products({self.i}, {self.j}) but records have {space.dim} column(s); "
                                 f"pass columns below {space.dim}.")
        for c in (self.i, self.j):
            if space.lo[c] == -_INF or space.hi[c] == _INF:
                raise ParameterError(f"sum_products needs bounded columns; column {c} is unbounded. Put dp.clamp(lo, hi) before it.")
        corners = [a * b for a in (space.lo[self.i], space.hi[self.i]) for b in (space.lo[self.j], space.hi[self.j])]
        if self.i == self.j:
            lo, hi = space.lo[self.i], space.hi[self.i]
            corners.append(Fraction(0) if lo <= 0 <= hi else min(lo * lo, hi * hi))
            return min(corners[-1], lo * lo, hi * hi), max(lo * lo, hi * hi)
        return min(corners), max(corners)

    def out_space(self, space: Space) -> Space:
        lo, hi = self.contribution(space)
        return Space("scalar", 1, (-_INF if lo < 0 else Fraction(0),), (_INF if hi > 0 else Fraction(0),), None)

    def stability(self, space: Space, d: Distance) -> Distance:
        lo, hi = self.contribution(space)
        return _scalar_distance(_contribution(lo, hi, d))

    def apply(self, value: Any) -> Any:
        arr = np.asarray(value, dtype=float)
        if arr.size == 0:
            return Fraction(0)
        a, b = _exact_values(arr[:, self.i]), _exact_values(arr[:, self.j])
        return builtins.sum((x * y for x, y in zip(a, b)), Fraction(0))


@dataclass(frozen=True)
class Histogram(Transformation):
    """Counts of one-column records per bin: ``edges`` (bins ``[e_k, e_{k+1})``, the last one closed)
    or ``categories`` (exact equality). Records in no bin are not counted. Each record is in at most
    one bin, so the count vector moves by L1 1 (add/remove) or 2 (substitution), L∞ 1, L2² 1 or 2."""

    edges: tuple | None = None
    categories: tuple | None = None

    def __post_init__(self) -> None:
        if (self.edges is None) == (self.categories is None):
            raise ParameterError("histogram needs exactly one of edges=... or categories=...; pass e.g. "
                                 "dp.histogram(edges=[0, 10, 20]) or dp.histogram(categories=[0, 1, 2]).")
        # every edge and category is a value a float represents exactly, since records are compared with it as
        # floats: distinct (increasing) as numbers is then distinct (increasing) as the floats the sampler compares
        if self.edges is not None:
            e = tuple(_float_exact("edges", x, "a bin edge") for x in self.edges)
            if len(e) < 2 or any(Fraction(a) >= Fraction(b) for a, b in zip(e, e[1:])):
                raise ParameterError(f"edges={self.edges!r} must be at least 2 increasing numbers; pass sorted bin edges.")
            object.__setattr__(self, "edges", e)
        else:
            cats = tuple(_float_exact("categories", c, "a category") for c in self.categories)
            if len(cats) < 1 or len({Fraction(c) for c in cats}) != len(cats):
                raise ParameterError(f"categories={self.categories!r} must be distinct values; pass a list of categories.")
            object.__setattr__(self, "categories", cats)

    @property
    def bins(self) -> int:
        return len(self.edges) - 1 if self.edges is not None else len(self.categories)

    def describe(self) -> str:
        return f"histogram(edges={list(self.edges)})" if self.edges is not None else f"histogram(categories={list(self.categories)})"

    def out_space(self, space: Space) -> Space:
        _need(space, "records", "histogram")
        if space.dim != 1:
            raise ParameterError(f"histogram takes one-column records, got {space.dim}; put dp.column(j) before it.")
        m = self.bins
        return Space("vector", m, (Fraction(0),) * m, (_INF,) * m, Fraction(1))

    def stability(self, space: Space, d: Distance) -> Distance:
        if isinstance(d.relation, AddRemove):  # one bin gains (add) or loses (remove) one: monotone
            return Distance(None, Fraction(1), Fraction(1), Fraction(1), monotone=True)
        return Distance(None, Fraction(2), Fraction(2), Fraction(1))

    def apply(self, value: Any) -> Any:
        arr = np.asarray(value, dtype=float).ravel()
        if self.edges is not None:
            e = np.asarray([float(x) for x in self.edges])
            idx = np.searchsorted(e, arr, side="right") - 1
            idx[arr == e[-1]] = len(e) - 2
            ok = (idx >= 0) & (idx < len(e) - 1)
            counts = np.bincount(idx[ok], minlength=len(e) - 1)
        else:
            counts = np.array([int(np.sum(arr == float(c))) for c in self.categories])
        return tuple(Fraction(int(c)) for c in counts)


# --- noise measurements ----------------------------------------------------------------

def _centres(value: Any, g: Fraction) -> list[int]:
    """The rounded centres ``floor(v/g + 1/2)`` of every coordinate, saturated to ``[−2**52, 2**52]``."""
    if isinstance(value, np.ndarray):
        vals = [Fraction(float(x)) for x in value.ravel().tolist()]
    else:
        vals = list(value) if isinstance(value, tuple) else [value]
    # saturate at ±2**52 grid steps (as OpenDP's saturating sums do): a statistic beyond it is released
    # as if at the bound, never as an error (whether a mechanism raises is itself an output). Saturation
    # is 1-Lipschitz in each coordinate, so the centres' distances, and the proof, are unchanged.
    return [max(-_MAX_UNITS, min(_MAX_UNITS, _rhu(Fraction(v) / g))) for v in vals]


# Noise scales (in grid steps) above this would put typical outputs beyond 2**52 grid steps, where floats
# stop representing every grid point: refused at construction (pass a coarser granularity).
_MAX_SCALE_UNITS = Fraction(2 ** 45)
_MAX_UNITS = 2 ** 52


def _check_scale_units(name: str, value: Any, granularity: Any) -> None:
    units = _frac(name, value) / Fraction(granularity)
    if units > _MAX_SCALE_UNITS:
        need = _frac(name, value) / _MAX_SCALE_UNITS
        coarser = 2.0 ** math.ceil(math.log2(need))
        raise ParameterError(f"{name}={value!r} is {float(units):.3g} grid steps of granularity={granularity!r}, above the "
                             f"2**45 limit where outputs stay exact grid floats; pass granularity={coarser!r} or coarser.")


def _release(centres: list[int], noise: np.ndarray, g: Fraction) -> np.ndarray:
    """Float outputs ``g * (c + noise)``: exact while |c + noise| < 2**53, else the round-to-nearest
    of the exact grid value (a deterministic function of the exact integer: post-processing)."""
    c = np.asarray(centres, dtype=object) if any(abs(x) >= 2 ** 62 for x in centres) else np.asarray(centres, dtype=np.int64)
    if c.dtype == object or int(np.abs(noise).max(initial=0)) >= 2 ** 62 - int(np.abs(c).max(initial=0)):
        units = noise.astype(object) + c.astype(object)
        return np.vectorize(lambda u: float(u) * float(g), otypes=[float])(units)
    units = noise + c
    return units.astype(float) * float(g)


class _GridNoise(Measurement):
    """What the grid noise families share: each coordinate ``v_i`` is released as
    ``g * (floor(v_i/g + 1/2) + N_i)`` with ``N_i`` i.i.d. integer noise of the family, drawn by an
    exact sampler. Subclasses name their size parameter (``_amount``, meaning ``_meaning``), say what
    they are (``_word``) and draw the integer noise (``_noise``)."""

    granularity: Any
    _amount: ClassVar[str]
    _meaning: ClassVar[str]
    _word: ClassVar[str]

    def __post_init__(self) -> None:
        name = self._amount
        object.__setattr__(self, name, _plain(name, getattr(self, name)))
        object.__setattr__(self, "granularity", _plain("granularity", self.granularity))
        if _frac(name, getattr(self, name)) <= 0:
            raise ParameterError(f"{name}={getattr(self, name)!r} must be > 0; pass a positive noise {self._meaning}.")
        check_granularity("granularity", self.granularity)
        _check_scale_units(name, getattr(self, name), self.granularity)
        units = _frac(name, getattr(self, name)) / self.g
        if units < self._min_units:  # the exact sampler's smallest scale: refused here, not at the first draw
            raise ParameterError(f"{name}={getattr(self, name)!r} is below {self._min_units_text} grid steps of "
                                 f"granularity={self.granularity!r}, the smallest {self._meaning} the exact sampler "
                                 f"draws; pass a larger {name} or a finer granularity.")

    def describe(self) -> str:
        g = self.granularity
        return (f"{self._word}({self._amount}={getattr(self, self._amount)!r}"
                + ("" if g == DEFAULT_GRANULARITY else f", granularity={g!r}") + ")"
                + (f" [{self.derived}]" if self.derived else ""))

    def out_width(self, space: Space) -> int:
        if space.kind not in ("scalar", "vector"):
            raise ParameterError(f"{self._word} adds noise to numbers, but the previous step gives {space.describe()}; "
                                 "aggregate first (dp.count(), dp.sum(), dp.histogram(...)).")
        return space.dim

    def _noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    @property
    def g(self) -> Fraction:
        """The grid spacing, exact."""
        return Fraction(self.granularity)

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        g = self.g
        c = _centres(value, g)
        return _release(c, self._noise((size, len(c)), rng), g)


@dataclass(frozen=True)
class GridLaplace(_GridNoise):
    """Laplace noise on the grid ``g*Z``: each coordinate ``v_i`` is released as
    ``g * (floor(v_i/g + 1/2) + K_i)``, ``K_i`` i.i.d. discrete Laplace with ``P(k) ∝ exp(-|k|/t)``,
    ``t = scale/g``. Privacy map (pure DP): inputs at L1 distance ``Δ`` give rounded centres at most
    ``D`` grid steps apart (``D = Δ/g`` when values are multiples of ``g``; else
    ``ceil(Δ/g) + dim − 1``), and ``ε = D/t``."""

    scale: Any
    granularity: Any = DEFAULT_GRANULARITY
    derived: str = ""  # how the scale was derived from a budget (dp.laplace(epsilon=...)); shown, never read
    _min_units: ClassVar[Fraction] = Fraction(1, 2 ** 1000)  # t >= 2**-1000 (mechanisms._exact.discrete_laplace)
    _min_units_text: ClassVar[str] = "2**-1000"
    _amount: ClassVar[str] = "scale"
    _meaning: ClassVar[str] = "scale"
    _word: ClassVar[str] = "laplace"

    @property
    def scale_exact(self) -> Fraction:
        return Fraction(self.scale)

    @property
    def t(self) -> Fraction:
        return self.scale_exact / self.g

    def _noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        from ._exact import discrete_laplace

        return discrete_laplace(self.t, shape, rng)


@dataclass(frozen=True)
class GridGaussian(_GridNoise):
    """Discrete Gaussian noise on the grid ``g*Z`` (Canonne, Kamath & Steinke 2020): each coordinate is
    released as ``g * (floor(v_i/g + 1/2) + Y_i)``, ``Y_i`` i.i.d. with ``P(y) ∝ exp(-y²/(2τ²))``,
    ``τ = sigma/g``. Privacy map: ``ρ = D₂²/(2τ²)``-zCDP for rounded centres at squared L2 distance
    at most ``D₂²`` grid steps (Rényi DP ``α ρ`` at every order; (ε, δ) by conversion or, in one
    dimension, by the exact discrete-Gaussian profile)."""

    sigma: Any
    granularity: Any = DEFAULT_GRANULARITY
    derived: str = ""  # how sigma was derived from a budget (dp.gaussian(rho=...)); shown, never read
    _min_units: ClassVar[Fraction] = Fraction(1, 2 ** 16)  # τ² >= 2**-32 (mechanisms._exact.discrete_gaussian)
    _min_units_text: ClassVar[str] = "2**-16"
    _amount: ClassVar[str] = "sigma"
    _meaning: ClassVar[str] = "standard deviation"
    _word: ClassVar[str] = "gaussian"

    @property
    def tau2(self) -> Fraction:
        return (Fraction(self.sigma) / self.g) ** 2

    def _noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        from ._exact import discrete_gaussian

        return discrete_gaussian(self.tau2, shape, rng)


# --- local randomizers: noise measurements on one record -------------------------------

_MAX_CATEGORIES = 2 ** 16


def _need_record(space: Space, what: str) -> None:
    if space.kind != "record":
        raise ParameterError(f"{what} randomizes one record, but the previous step gives {space.describe()}; declare "
                             "dp.mechanism(input='record', records=Finite(values), relation=Substitute(), ...) with it as "
                             "the first step.")


def category_index(space: Space, value: Any) -> int:
    """The index of the record ``value`` among the space's categories (exact equality of numbers)."""
    v = record_value(value)
    for i, c in enumerate(space.categories):
        if v == c:
            return i
    raise ParameterError(f"record={value!r} is not one of the {len(space.categories)} categories; pass a record of the domain.")


def record_value(data: Any) -> Any:
    """A one-record input as a Python number (a numpy scalar or 0-d array unwrapped)."""
    return data.item() if isinstance(data, (np.ndarray, np.generic)) else data


def category_values(space: Space) -> np.ndarray:
    """The categories as the array the samplers release: int64 when every category is an integer,
    else float64 (every category is an exact float, see :func:`input_space`)."""
    cats = space.categories
    return np.asarray(cats, dtype=np.int64 if all(isinstance(c, int) for c in cats) else float)


class LocalRandomizer(Measurement):
    """A noise measurement on ONE record of k categories (``input="record"``; local DP: any two
    distinct records are neighbours). Its exact law is read by :mod:`._parts_law` and its family's
    privacy map is proved once, symbolically in k and the parameter, by :mod:`dpharness.proofs.parts`."""


@dataclass(frozen=True)
class LocalRandomizedResponse(LocalRandomizer):
    """k-ary randomized response (Warner 1965; Kairouz, Oh & Viswanath 2014) on one record of k
    categories: report the true category with probability ``e^L/(e^L + k − 1)``, else one of the
    other ``k − 1`` categories uniformly::

        P(y | x) = e^L/(e^L + k − 1)  if y = x,     1/(e^L + k − 1)  otherwise.

    Neighbours: any two records (local DP). Privacy map: ε = L (pure): the pmf ratio P(y|x)/P(y|x')
    is e^L, 1 or e^{−L}. Sampler: :func:`._exact.randomized_response` on the category's index (the
    lie probability ``(k − 1)/(e^L + k − 1)`` is exact at every L, e.g. 37 or 1000), mapped back to
    the category value. ``log_odds`` L >= 0 is read exactly (a float as its binary value)."""

    log_odds: Any

    def __post_init__(self) -> None:
        object.__setattr__(self, "log_odds", _plain("log_odds", self.log_odds))
        if _frac("log_odds", self.log_odds) < 0:
            raise ParameterError(f"log_odds={self.log_odds!r} must be >= 0; pass the log-odds of a truthful report (ε).")

    @property
    def L(self) -> Fraction:
        return _frac("log_odds", self.log_odds)

    def describe(self) -> str:
        return f"randomized_response(log_odds={self.log_odds!r})"

    def out_width(self, space: Space) -> int:
        _need_record(space, self.describe())
        return 1

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        from ._exact import randomized_response as exact_rr

        idx = exact_rr(category_index(space, value), len(space.categories), self.L, size, rng)
        return category_values(space)[idx].reshape(size, 1)


@dataclass(frozen=True)
class LocalWarner(LocalRandomizer):
    """Warner's randomized response (S. L. Warner, "Randomized response", JASA 60(309), 1965) on one
    record of two categories: report the truth with probability p, else the other category::

        P(y | x) = p  if y = x,     1 − p  otherwise        (1/2 <= p < 1).

    Neighbours: the two records (local DP). Privacy map: ε = ln(p/(1 − p)) (pure): binary randomized
    response with log-odds ln(p/(1 − p)). Sampler: a lie is :func:`._exact.bernoulli` with the exact
    rational 1 − p (``p`` an int/Fraction, a float read as its binary value)."""

    p: Any

    def __post_init__(self) -> None:
        object.__setattr__(self, "p", _plain("p", self.p))
        q = _frac("p", self.p)
        if not Fraction(1, 2) <= q < 1:
            raise ParameterError(f"p={self.p!r} must be in [1/2, 1) (the probability of a truthful report: p = 1 is not "
                                 "private, p < 1/2 lies more often than not); pass e.g. p=0.75.")

    @property
    def p_exact(self) -> Fraction:
        return _frac("p", self.p)

    def describe(self) -> str:
        return f"warner(p={self.p!r})"

    def out_width(self, space: Space) -> int:
        _need_record(space, self.describe())
        if len(space.categories) != 2:
            raise ParameterError(f"{self.describe()} randomizes one of two categories, but records have "
                                 f"{len(space.categories)}; pass records=Finite((a, b)) or use "
                                 "dp.randomized_response(log_odds) for k categories.")
        return 1

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        from ._exact import bernoulli

        i = category_index(space, value)
        lie = bernoulli(1 - self.p_exact, size, rng)
        return category_values(space)[np.where(lie, 1 - i, i)].reshape(size, 1)


@dataclass(frozen=True)
class LocalRappor(LocalRandomizer):
    """Basic RAPPOR's permanent randomized response (Erlingsson, Pihur & Korolova 2014, "RAPPOR",
    CCS, §3; a one-hot encoding in place of the Bloom filter) on one record of k categories: the
    record is one-hot encoded into k bits b, and each bit is replaced by a fair coin with probability
    f, i.e. flipped independently with probability f/2::

        P(y | x) = Π_j (1 − f/2)^[y_j = b_j] (f/2)^[y_j ≠ b_j],     b = onehot(x),  0 < f <= 1.

    Output: a 0/1 vector of length k (int64). Neighbours: any two records; their encodings differ in
    exactly two bits, so ε = 2 ln((1 − f/2)/(f/2)) (pure). Sampler: k independent
    :func:`._exact.bernoulli` flips with the exact rational f/2 (``f`` a float read as its binary value)."""

    f: Any

    def __post_init__(self) -> None:
        object.__setattr__(self, "f", _plain("f", self.f))
        q = _frac("f", self.f)
        if not 0 < q <= 1:
            raise ParameterError(f"f={self.f!r} must be in (0, 1] (the probability that a bit is replaced by a fair "
                                 "coin); pass e.g. f=0.5.")

    @property
    def f_exact(self) -> Fraction:
        return _frac("f", self.f)

    def describe(self) -> str:
        return f"rappor(f={self.f!r})"

    def out_width(self, space: Space) -> int:
        _need_record(space, self.describe())
        return len(space.categories)

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        from ._exact import bernoulli

        out = bernoulli(self.f_exact / 2, (size, len(space.categories)), rng).astype(np.int64)
        out[:, category_index(space, value)] ^= 1
        return out


@dataclass(frozen=True)
class Chain(Step):
    """``first >> second``: a transformation followed by a step. Stability maps compose; a
    measurement's privacy map is applied to the transformation's output distance."""

    first: Step
    second: Step

    def describe(self) -> str:
        return f"{self.first.describe()} >> {self.second.describe()}"


@dataclass(frozen=True)
class Compose(Step):
    """Sequential composition: every part runs on the same input with independent randomness; the
    output is the tuple of their outputs. Accounting: basic (ε and δ add), zCDP/Rényi (ρ adds), or
    advanced composition, whichever proves the claim."""

    parts: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(self.parts))
        if len(self.parts) < 1:
            raise ParameterError("compose() needs at least one part; pass e.g. dp.compose(dp.sum() >> dp.laplace(2), ...).")
        for p in self.parts:
            if not isinstance(p, Step):
                raise ParameterError(f"part={p!r} is not a dpharness.parts step; build parts with dp.sum() >> dp.laplace(...).")

    def describe(self) -> str:
        return "compose(" + ", ".join(p.describe() for p in self.parts) + ")"


@dataclass(frozen=True)
class Post(Step):
    """Post-processing by ``fn``: it receives the previous outputs as positional arguments (one per
    composed part) and may not read the data. Privacy is unchanged (Dwork & Roth 2014, Thm 2.1).
    ``vectorized=True`` (the library's own row-wise maps only): ``fn`` is called once on arrays of all
    runs (one row per run)."""

    fn: Callable = field(compare=False)
    vectorized: bool = False

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ParameterError(f"fn={self.fn!r} is not callable; pass a function of the noisy outputs.")
        if self.vectorized and not getattr(self.fn, "_dpharness_rowwise", False):
            # a function called once on all runs could mix runs (e.g. average them): only the library's own
            # row-wise maps are called vectorised
            raise ParameterError("vectorized=True is reserved for the library's row-wise maps; pass dp.post(fn), "
                                 "which calls fn once per run.")

    def describe(self) -> str:
        return f"post({getattr(self.fn, '__name__', 'fn')})"


@dataclass(frozen=True)
class Parallel(Step):
    """Parallel composition over disjoint partitions: records are split by the value of column
    ``by`` (exactly equal to one of ``keys``; others dropped) and ``part`` runs on each partition with
    independent randomness; the output concatenates the parts' outputs in the order of ``keys``.
    Under add/remove one record touches one partition (the part's loss under add/remove); under
    substitution it may move between two partitions (twice the add/remove loss) or change inside one
    (the part's substitution loss): the larger is taken."""

    part: Step
    by: int
    keys: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "by", _v.integer("by", self.by, minimum=0))
        # records are matched to keys as floats: each key is exactly a float, and distinct
        keys = tuple(_float_exact("keys", k, "a partition key") for k in self.keys)
        if not keys or len({Fraction(k) for k in keys}) != len(keys):
            raise ParameterError(f"keys={self.keys!r} must be distinct numbers; pass the partition keys.")
        object.__setattr__(self, "keys", keys)
        if not isinstance(self.part, Step):
            raise ParameterError(f"part={self.part!r} is not a dpharness.parts step.")

    def describe(self) -> str:
        return f"parallel({self.part.describe()}, by=column {self.by}, keys={list(self.keys)})"


@dataclass(frozen=True)
class PoissonSample(Step):
    """Poisson subsampling: every record is kept independently with probability exactly ``rate``
    (:func:`dpharness.mechanisms._exact.bernoulli`: the rate read as its exact value), a fresh
    subsample for every release, and what follows (``>>``) runs on the kept records and must end in
    noise. Privacy under add/remove neighbours: amplification by subsampling (ε-DP becomes
    ln(1 + rate·(e^ε − 1))-DP, Balle, Barthe & Gaboardi 2018; the privacy-loss distribution of one
    subsampled scalar noise by its dominating pair, Zhu, Dong & Wang 2022); under substitution it is
    not proved here (UNPROVEN)."""

    rate: Any

    def __post_init__(self) -> None:
        rate = _plain("rate", self.rate)
        if not 0 < Fraction(rate) <= 1:
            raise ParameterError(f"rate={self.rate!r} must be in (0, 1]; pass the probability of keeping each record.")
        object.__setattr__(self, "rate", rate)

    def describe(self) -> str:
        return f"poisson_sample({self.rate})"


@dataclass(frozen=True)
class Repeat(Step):
    """``times`` independent runs of ``part`` on the same input (fresh randomness each), outputs
    concatenated in order: sequential composition of ``times`` copies (ε and ρ multiply by ``times``;
    the privacy-loss distribution is the ``times``-fold self-composition)."""

    times: int
    part: Step

    def __post_init__(self) -> None:
        object.__setattr__(self, "times", _v.integer("times", self.times, minimum=1))
        if not isinstance(self.part, Step):
            raise ParameterError(f"part={self.part!r} is not a dpharness.parts step; pass e.g. dp.count() >> dp.gaussian(sigma=1).")

    def describe(self) -> str:
        return f"repeat({self.times}, {self.part.describe()})"


@dataclass(frozen=True)
class Iterate(Step):
    """Adaptive iteration: ``times`` rounds of ``part`` on the same input, each with fresh randomness;
    every :func:`map_records` in ``part`` receives the current state, and after each round
    ``state = update(state, release)`` (``release``: the round's noisy output). Releases the final
    state (``output="state"``) or every round's noisy output (``output="releases"``). Privacy: adaptive
    sequential composition of ``times`` rounds, each round's account the part's whatever the state
    (a record-wise map is 1-stable for every function); ``update`` is post-processing of the releases.
    ``update`` and the map functions must be pure functions of their arguments (no data access, no
    state kept between calls); the proof states it."""

    times: int
    part: Step
    init: Any = field(compare=False, default=None)
    update: Callable | None = field(compare=False, default=None)
    output: str = "state"

    def __post_init__(self) -> None:
        object.__setattr__(self, "times", _v.integer("times", self.times, minimum=1))
        if not isinstance(self.part, Step):
            raise ParameterError(f"part={self.part!r} is not a dpharness.parts step.")
        if self.update is None or not callable(self.update):
            raise ParameterError(f"update={self.update!r} is not callable; pass update(state, release) -> the next state.")
        init = np.array(self.init, dtype=float).reshape(-1) if self.init is not None else None
        if init is None or len(init) == 0 or not np.all(np.isfinite(init)):
            raise ParameterError(f"init={self.init!r} must be a non-empty sequence of finite numbers (the first state).")
        init.setflags(write=False)
        object.__setattr__(self, "init", init)
        _v.choice("output", self.output, ("state", "releases"))

    def describe(self) -> str:
        return (f"iterate({self.times}, {self.part.describe()}, update={getattr(self.update, '__name__', 'update')}, "
                f"output={self.output!r})")


def _chain(a: Step, b: Step) -> Step:
    if isinstance(a, Chain):  # keep chains right-nested: t1 >> (t2 >> m)
        return Chain(a.first, _chain(a.second, b))
    return Chain(a, b)


# --------------------------------------------------------------------------- public constructors

def clamp(lo: Any, hi: Any) -> Clamp:
    """Clamp every record (every column) to ``[lo, hi]``."""
    return Clamp(lo, hi)


def column(j: int) -> Column:
    """Keep column ``j`` of multi-column records."""
    return Column(j)


def count() -> Count:
    """The number of records (stability 1 under add/remove, 0 under substitution)."""
    return Count()


def sum() -> Sum:  # noqa: A001 - the natural name in this namespace
    """The exact sum of bounded one-column records."""
    return Sum()


def sum_squares() -> SumSquares:
    """The exact sum of squares of bounded one-column records."""
    return SumSquares()


def sum_products(i: int = 0, j: int = 1) -> SumProducts:
    """The exact sum over records of column i times column j."""
    return SumProducts(i, j)


def histogram(edges: Sequence | None = None, *, categories: Sequence | None = None) -> Histogram:
    """Counts per bin (``edges``) or per category (``categories``)."""
    return Histogram(None if edges is None else tuple(edges), None if categories is None else tuple(categories))


def _noise_or_budget(family: str, amount: str, value: Any, granularity: Any, **budget: Any) -> Step:
    given = {k: v for k, v in budget.items() if v is not None}
    if value is not None and given:
        named = ", ".join(f"{k}={v!r}" for k, v in given.items())
        raise ParameterError(f"{family}({amount}={value!r}, {named}): pass the noise {amount}= or the budget it should "
                             f"spend ({', '.join(k + '=' for k in budget)}), not both.")
    if value is not None:
        return (GridLaplace if family == "laplace" else GridGaussian)(value, granularity)
    from ._budget import NoiseBudget

    return NoiseBudget(family, granularity, **budget)


def laplace(scale: Any = None, *, epsilon: Any = None, granularity: Any = DEFAULT_GRANULARITY) -> Step:
    """Laplace noise of ``scale`` on the grid ``granularity * Z`` (exact discrete Laplace). Or give the
    budget instead, ``epsilon=``: ``dp.mechanism`` derives the scale from the stability of what precedes
    it (``scale = D·g/ε`` for centres at most D grid steps apart); with neither, the scale comes from
    the enclosing ``dp.compose(..., epsilon=...)``'s split."""
    return _noise_or_budget("laplace", "scale", scale, granularity, epsilon=epsilon)


def discrete_laplace(scale: Any = None, *, epsilon: Any = None) -> Step:
    """Discrete Laplace (two-sided geometric) noise on the integers: ``laplace(scale, granularity=1)``."""
    return _noise_or_budget("laplace", "scale", scale, 1, epsilon=epsilon)


geometric = discrete_laplace


def gaussian(sigma: Any = None, *, rho: Any = None, epsilon: Any = None, delta: Any = None,
             granularity: Any = DEFAULT_GRANULARITY) -> Step:
    """Gaussian noise of standard deviation ``sigma`` on the grid (exact discrete Gaussian). Or give the
    budget instead: ``rho=`` (zCDP: ``σ = g·D₂/√(2ρ)``, rounded up) or ``epsilon=`` with ``delta=`` (the
    smallest σ whose proven δ(ε) is within ``delta``); ``dp.mechanism`` derives σ from the stability of
    what precedes it. With none, σ comes from the enclosing ``dp.compose(...)``'s split."""
    return _noise_or_budget("gaussian", "sigma", sigma, granularity, rho=rho, epsilon=epsilon, delta=delta)


def discrete_gaussian(sigma: Any = None, *, rho: Any = None, epsilon: Any = None, delta: Any = None) -> Step:
    """The discrete Gaussian on the integers: ``gaussian(sigma, granularity=1)``."""
    return _noise_or_budget("gaussian", "sigma", sigma, 1, rho=rho, epsilon=epsilon, delta=delta)


def truncated_geometric(scale: Any, lo: Any, hi: Any) -> Step:
    """Two-sided geometric noise on the integers, the result clamped to ``[lo, hi]`` (post-processing)."""
    lo_f, hi_f = float(_float_exact("lo", lo, "a truncation bound")), float(_float_exact("hi", hi, "a truncation bound"))
    if not lo_f < hi_f:
        raise ParameterError(f"lo={lo!r} must be below hi={hi!r}; pass lo < hi.")
    def clip(y: np.ndarray) -> np.ndarray:
        return np.clip(y, lo_f, hi_f)

    clip._dpharness_rowwise = True  # type: ignore[attr-defined]
    return _chain(discrete_laplace(scale), Post(clip, vectorized=True))


def randomized_response(log_odds: Any) -> LocalRandomizedResponse:
    """k-ary randomized response on one record (``input="record"``): the truth with probability
    e^L/(e^L + k − 1), else a uniform other category; ε = ``log_odds``."""
    return LocalRandomizedResponse(log_odds)


def warner(p: Any) -> LocalWarner:
    """Warner's randomized response on one record of two categories: the truth with probability
    ``p`` in [1/2, 1); ε = ln(p/(1 − p))."""
    return LocalWarner(p)


def rappor(f: Any) -> LocalRappor:
    """Basic RAPPOR on one record: its one-hot encoding with each bit flipped with probability f/2
    (``f`` in (0, 1]); ε = 2 ln((1 − f/2)/(f/2))."""
    return LocalRappor(f)


def poisson_sample(rate: Any) -> PoissonSample:
    """Keep each record independently with probability ``rate`` (exactly), afresh for every release;
    chain the rest after it: ``dp.poisson_sample(0.01) >> dp.count() >> dp.gaussian(sigma=1)``."""
    return PoissonSample(rate)


def repeat(times: int, part: Step) -> Repeat:
    """``times`` independent runs of ``part`` (e.g. rounds of a subsampled Gaussian)."""
    return Repeat(times, part)


def quantile(alpha: Any, *, candidates: Sequence, scale: Any) -> Step:
    """The ``alpha``-quantile of one-column records by the exponential mechanism over ``candidates``
    (the quantile score of OpenDP's ``make_quantile_score_candidates``, then P(c) ∝ exp(u(c)/scale));
    releases the chosen candidate. ε = 2Δ/scale, Δ = max(α, 1 − α) (add/remove) or 1 (substitution).
    See :mod:`dpharness.mechanisms._parts_selection`."""
    from ._parts_selection import quantile as _quantile

    return _quantile(alpha, candidates=candidates, scale=scale)


def quantile_score(alpha: Any, *, candidates: Sequence) -> Step:
    """The vector of quantile utilities u(c) = −|(1 − α)#{x < c} − α#{x > c}| over ``candidates``."""
    from ._parts_selection import quantile_score as _score

    return _score(alpha, candidates=candidates)


def exponential(scale: Any, *, k: int = 1, labels: Sequence | None = None) -> Step:
    """The exponential mechanism on a vector of scores u: index i with probability ∝ exp(u_i/scale)
    (``labels[i]`` when given; ``k`` > 1: the ordered one-shot Gumbel top-k). ε = 2kΔ/scale (kΔ/scale
    on monotone scores)."""
    from ._parts_selection import exponential as _exponential

    return _exponential(scale, k=k, labels=labels)


def report_noisy_max(scale: Any, noise: str = "laplace", k: int = 1, *, granularity: Any = 1) -> Step:
    """The index of the largest noisy score (``noise`` "laplace" on a grid, "gumbel" (``k`` > 1: one-shot
    top-k) or "exponential" (permute-and-flip)). See :mod:`dpharness.mechanisms._parts_selection`."""
    from ._parts_selection import report_noisy_max as _rnm

    return _rnm(scale, noise, k, granularity=granularity)


def map_records(fn: Callable, *, columns: int = 1) -> MapRecords:
    """Map every record by ``fn`` (a number, or ``columns`` numbers, per record; inside
    :func:`iterate` ``fn(state, record)``). Clip the result before aggregating it."""
    return MapRecords(fn, columns)


def clip_norm(bound: Any, *, norm: str = "l2") -> ClipNorm:
    """Clip every record to norm at most ``bound`` (``norm`` "l1", "l2" or "linf"), exactly."""
    return ClipNorm(bound, norm)


def iterate(times: int, part: Step, *, init: Any, update: Callable, output: str = "state") -> Iterate:
    """``times`` adaptive rounds of ``part`` (DP-SGD: ``dp.poisson_sample(q) >> dp.map_records(grad) >>
    dp.clip_norm(C) >> dp.sum() >> dp.gaussian(sigma=σC)``, with ``update(θ, noisy_sum)`` the step)."""
    return Iterate(times, part, init, update, output)


def above_threshold(threshold: Any, *, queries: Sequence | None = None, scale: Any, query_scale: Any = None,
                    c: int = 1, granularity: Any = 1) -> Step:
    """Above threshold / sparse vector (Lyu, Su & Li 2017, Alg. 1) over ``queries`` (transformations giving
    one number each, or :func:`query`; omitted on a vector input: its coordinates): for each in order, 1 if
    its noisy answer reaches the noisy threshold, else 0; −1 for every query after the ``c``-th 1. Discrete
    Laplace noise on the grid ``granularity·Z`` (``scale`` on the threshold, ``query_scale``, default
    2c·scale, on each query). ε = D/t_ρ + 2cD/t_ν (monotone queries: D/t_ρ + cD/t_ν). See
    :mod:`dpharness.mechanisms._parts_threshold`."""
    from ._parts_threshold import above_threshold as _at

    return _at(threshold, queries=queries, scale=scale, query_scale=query_scale, c=c, granularity=granularity)


def query(fn: Callable, *, sensitivity: Any, increasing: bool = False) -> Step:
    """A query for :func:`above_threshold` by a user function of the records, with a STATED
    ``sensitivity`` (a precondition of the proof, tested by the audit); ``increasing``: adding a record
    never decreases the answer."""
    from ._parts_threshold import query as _query

    return _query(fn, sensitivity=sensitivity, increasing=increasing)


def bound_contributions(*, user: int, by: int, max_records: int, max_per_partition: int = 1,
                        max_partitions: int | None = None) -> Step:
    """Keep at most ``max_records`` records per user (id in column ``user``) and at most
    ``max_per_partition`` per (user, key in column ``by``), of at most ``max_partitions`` keys per user
    (default: no bound beyond ``max_records``), in a uniformly random order per user;
    declare ``relation=dp.AddRemoveUser(user=...)`` and chain ``>> dp.group_by(by=..., ...)``. See
    :mod:`dpharness.mechanisms._parts_grouping`."""
    from ._parts_grouping import bound_contributions as _bound

    return _bound(user=user, by=by, max_records=max_records, max_per_partition=max_per_partition,
                  max_partitions=max_partitions)


def group_by(*, by: int, keys: Sequence, select: Any, part: Step | None = None) -> Step:
    """Group records by column ``by`` over keys that come from the data; each present key's user count
    gets discrete Laplace noise and is released when it passes ``select`` (``dp.partition_select``);
    the release is encoded over the universe ``keys`` (the noisy count, or 0: not released). (ε, δ) =
    (L/t, 1 − (1 − p)^L), p = P(K >= ceil(threshold) − 1), L keys touched by one neighbour. ``part``:
    per-key ``dp.count()`` / ``dp.sum()`` ``>> dp.laplace(scale)`` (after record-wise clamp/column, or a
    ``dp.compose`` of such) on each key's records, released with the key."""
    from ._parts_grouping import group_by as _group_by

    return _group_by(by=by, keys=keys, select=select, part=part)


def partition_select(*, threshold: Any, scale: Any) -> Any:
    """Laplace thresholding: release a key iff its count plus discrete Laplace noise of ``scale``
    reaches ``threshold`` (>= 1). A parameter of :func:`group_by`."""
    from ._parts_grouping import partition_select as _select

    return _select(threshold=threshold, scale=scale)


def __getattr__(name: str) -> Any:
    if name == "AddRemoveUser":  # the user-level relation lives with its family (no import cycle at load)
        return _grouping().AddRemoveUser
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def compose(*parts: Step, epsilon: Any = None, delta: Any = None, rho: Any = None,
            weights: Sequence | None = None) -> Step:
    """Run every part on the same input (independent randomness); the output is their tuple. With a
    total budget (``epsilon=``, with ``delta=`` when a part is Gaussian, or ``rho=``), it is split over
    the parts by ``weights`` (equal by default) and each part's noise, declared without a scale
    (``dp.laplace()``, ``dp.gaussian()``), is calibrated to its share by ``dp.mechanism``."""
    if epsilon is None and delta is None and rho is None and weights is None:
        return Compose(tuple(parts))
    from ._budget import SplitBudget

    return SplitBudget(tuple(parts), epsilon, delta, rho, None if weights is None else tuple(weights))


def post(fn: Callable) -> Post:
    """Post-process the noisy outputs with ``fn``: called once per run with that run's outputs as
    positional arguments (one per composed part). The proof assumes ``fn`` is a pure function of
    them (no state kept between calls, no access to the data)."""
    return Post(fn, False)


def parallel(part: Step, *, by: int, keys: Sequence) -> Parallel:
    """Run ``part`` on each partition of the records by column ``by``'s value in ``keys``."""
    return Parallel(part, by, tuple(keys))


def grid_steps(space: Space, d: Distance, granularity: Any) -> tuple[Fraction, Fraction, str]:
    """``(D1, D2sq, how)``: bounds on the L1 distance and the squared L2 distance, in grid steps, of the
    rounded centres ``floor(v/g + 1/2)`` of two values at distance ``d`` (the rule the prover states
    and calibrations use). Values that are multiples of the grid round exactly; otherwise each
    coordinate gains less than one step: ``|r(u) − r(v)| <= ceil(|u − v|)``, so
    ``D1 = ceil(Δ1/g) + dim − 1`` and ``D2² <= Σ (d_i + 1)² <= Δ2²/g² + 2Δ1/g + dim`` (one coordinate:
    ``ceil(Δ/g)²``)."""
    g = Fraction(granularity)
    if d.l1 == 0:
        return Fraction(0), Fraction(0), "zero"
    q = space.quantum
    if q is not None and (q / g).denominator == 1:
        return d.l1 / g, d.l2sq / (g * g), "exact"
    steps = math.ceil(d.l1 / g)
    if space.dim == 1:
        return Fraction(steps), Fraction(steps) ** 2, "scalar"
    return Fraction(steps + space.dim - 1), d.l2sq / (g * g) + 2 * d.l1 / g + space.dim, "vector"


# --------------------------------------------------------------------------- structure walking (shared by sampler and prover)

def input_space(records: Domain, shape: str, dim: int | None) -> Space:
    """The space of the mechanism's input."""
    if shape == "record":
        cats = _categories(records)
        return Space("record", 1, (Fraction(min(cats)),), (Fraction(max(cats)),), None, cats)
    if shape == "vector":
        lo, hi = _domain_bounds(records)
        return Space("vector", int(dim), (lo,) * int(dim), (hi,) * int(dim),
                     Fraction(1) if isinstance(records, IntegerRange) else None)
    if isinstance(records, RealBox):
        lo = Fraction(_float_exact("lo", records.lo, "a record bound"))
        hi = Fraction(_float_exact("hi", records.hi, "a record bound"))
        return Space("records", records.dim, (lo,) * records.dim, (hi,) * records.dim, None)
    lo, hi = _domain_bounds(records)
    quantum = Fraction(1) if isinstance(records, IntegerRange) else None
    return Space("records", 1, (lo,), (hi,), quantum)


def _domain_bounds(records: Domain) -> tuple:
    """The exact bounds of the records as the sampler reads them (floats). Every bound and value must
    be exactly a float: records are read as floats, and rounding could carry a record past a bound
    that is not one (e.g. ``IntegerRange(0, 2**53 + 3)``: the record 2**53 + 3 is read as 2**53 + 4)."""
    if isinstance(records, (RealInterval, IntegerRange)):
        if isinstance(records, IntegerRange) and max(abs(int(records.lo)), abs(int(records.hi))) > 2 ** 53:
            raise ParameterError(f"records={records!r}: integer records are read as floats, exact only up to 2**53 in "
                                 "magnitude; pass an IntegerRange within ±2**53 (or scale the data down).")
        lo = -_INF if _is_inf(records.lo) else Fraction(_float_exact("lo", records.lo, "a record bound"))
        hi = _INF if _is_inf(records.hi) else Fraction(_float_exact("hi", records.hi, "a record bound"))
        return lo, hi
    if isinstance(records, Finite):
        vals = [Fraction(_float_exact("values", v, "a record value")) for v in records.values]
        return min(vals), max(vals)
    raise ParameterError(f"records={records!r} is not supported; pass RealInterval, IntegerRange, Finite or RealBox.")


def _is_inf(value: Any) -> bool:
    return isinstance(value, (float, np.floating)) and math.isinf(float(value))


def _categories(records: Domain) -> tuple:
    """The k categories of a one-record input, in the domain's order, as the values the samplers
    release: integers as ints (|v| < 2**53), other numbers as the float equal to them (refused when
    no float is)."""
    if isinstance(records, IntegerRange):
        k = int(records.hi) - int(records.lo) + 1
        if k > _MAX_CATEGORIES:
            raise ParameterError(f"records={records!r} has {k} categories, above {_MAX_CATEGORIES}; pass a smaller domain.")
        values = tuple(range(int(records.lo), int(records.hi) + 1))
    elif isinstance(records, Finite):
        values = records.values
    else:
        raise ParameterError(f"records={records!r} does not fit input='record'; pass Finite(values) or IntegerRange(lo, hi) "
                             "(the categories a local randomizer reports).")
    cats = []
    for v in values:
        q = _frac("values", v)
        if q.denominator == 1 and abs(q) < 2 ** 53:
            cats.append(int(q))
        elif Fraction(float(q)) == q:
            cats.append(float(q))
        else:
            raise ParameterError(f"values={records.values!r}: {v!r} is not exactly a float; pass categories that are "
                                 "ints or floats (they are released as such).")
    if len(set(cats)) != len(cats):
        raise ParameterError(f"values={records.values!r} repeats a category; pass distinct values.")
    if not 2 <= len(cats) <= _MAX_CATEGORIES:
        raise ParameterError(f"records={records!r} has {len(cats)} categories; pass between 2 and {_MAX_CATEGORIES}.")
    return tuple(cats)


def input_distance(relation: Relation, space: Space) -> Distance:
    """The distance of neighbouring inputs as the first step sees it."""
    if isinstance(relation, BoundedChange):
        delta = _frac("sensitivity", relation.sensitivity)
        m = space.dim
        if relation.norm == "l1":
            return Distance(None, delta, delta * delta, delta)
        if relation.norm == "linf":
            return Distance(None, m * delta, m * delta * delta, delta)
        # l2: ||d||_1 <= sqrt(m) ||d||_2; an exact rational upper bound on sqrt(m)
        root = math.isqrt(m)
        return Distance(None, delta * (root if root * root == m else root + 1), delta * delta, delta)
    return Distance(relation)


def measurement_leaves(step: Step) -> list:
    """Every noise measurement in the structure, in output order."""
    if isinstance(step, Measurement):
        return [step]
    if isinstance(step, Chain):
        return measurement_leaves(step.first) + measurement_leaves(step.second)
    if isinstance(step, Compose):
        return [m for p in step.parts for m in measurement_leaves(p)]
    if isinstance(step, Parallel):
        return measurement_leaves(step.part)
    if isinstance(step, (Repeat, Iterate)):
        return measurement_leaves(step.part) * step.times
    return []


def has_sampling(step: Step) -> bool:
    """Whether a random subsample feeds some part, or rounds adapt to earlier releases (the output law
    is then a mixture, not a product of fixed leaves)."""
    return any(isinstance(n, (PoissonSample, Iterate)) for n in walk_nodes(step))


def has_post(step: Step) -> bool:
    if isinstance(step, Post):
        return True
    if isinstance(step, Chain):
        return has_post(step.first) or has_post(step.second)
    if isinstance(step, Compose):
        return any(has_post(p) for p in step.parts)
    if isinstance(step, (Parallel, Repeat)):
        return has_post(step.part)
    if isinstance(step, Iterate):
        return True  # the state update post-processes the releases
    return False


def check_structure(step: Step, space: Space) -> tuple[Space | None, int]:
    """Validate the structure on ``space``: returns (the space of the value after the last
    transformation when the step is a transformation, else None) and the number of output columns."""
    if isinstance(step, Transformation):
        return step.out_space(space), 0
    if isinstance(step, Measurement):
        return None, step.out_width(space)
    if is_bounded_group(step):
        return None, _grouping().check_bounded(step, space)
    if type(step) is _grouping().BoundContributions:
        raise ParameterError(f"{step.describe()} must be followed by >> dp.group_by(by={step.by}, ...).")
    if isinstance(step, Chain) and isinstance(step.first, PoissonSample):
        _need(space, "records", "poisson_sample")
        out, width = check_structure(step.second, space)
        if out is not None:
            raise ParameterError(f"{step.describe()} releases no noise after the sample; end it with a noise measurement "
                                 "(e.g. >> dp.gaussian(sigma)).")
        return None, width
    if isinstance(step, PoissonSample):
        raise ParameterError(f"{step.describe()} must be followed by >> steps that end in noise "
                             "(e.g. dp.poisson_sample(0.01) >> dp.count() >> dp.gaussian(sigma=1)).")
    if isinstance(step, Repeat):
        out, width = check_structure(step.part, space)
        if out is not None:
            raise ParameterError(f"repeat part {step.part.describe()} releases no noise; end it with a noise measurement.")
        return None, -1 if width < 0 else width * step.times
    if isinstance(step, Iterate):
        out, width = check_structure(step.part, space)
        if out is not None:
            raise ParameterError(f"iterate part {step.part.describe()} releases no noise; end it with a noise measurement.")
        if step.output == "state":
            return None, len(step.init)
        return None, -1 if width < 0 else width * step.times
    if isinstance(step, Chain):
        mid, width = check_structure(step.first, space)
        if mid is None:
            if isinstance(step.second, Post):
                return None, -1  # post-processing: width decided by fn
            if isinstance(step.second, Chain) and isinstance(step.second.first, Post):
                return None, -1
            raise ParameterError(f"{step.second.describe()} follows a randomized step; only dp.post(fn) may follow noise "
                                 "(transformations must come before it).")
        return check_structure(step.second, mid)
    if isinstance(step, Compose):
        total = 0
        for p in step.parts:
            out, width = check_structure(p, space)
            if out is not None:
                raise ParameterError(f"compose part {p.describe()} releases no noise; end every part with a noise "
                                     "measurement (e.g. >> dp.laplace(scale)).")
            total = -1 if (width < 0 or total < 0) else total + width
        return None, total
    if isinstance(step, Parallel):
        _need(space, "records", "parallel")
        if step.by >= space.dim:
            raise ParameterError(f"by={step.by} but records have {space.dim} column(s); pass by < {space.dim}.")
        out, width = check_structure(step.part, space)
        if out is not None:
            raise ParameterError(f"parallel part {step.part.describe()} releases no noise; end it with a noise measurement.")
        return None, -1 if width < 0 else width * len(step.keys)
    if isinstance(step, Post):
        raise ParameterError("dp.post(fn) must follow a randomized step (noise or dp.compose(...)).")
    raise ParameterError(f"step={step!r} is not a dpharness.parts step.")


def execute(step: Step, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
    """Run the structure: transformations exactly, measurements with their exact samplers. Returns
    the transformed value for a transformation, else an array of ``size`` outputs."""
    if isinstance(step, Transformation):
        return step.apply(value)
    if isinstance(step, Measurement):
        out = step.run(value, space, size, rng)
        return out[:, 0] if out.shape[1] == 1 and space.kind in ("scalar", "record") else out
    if is_bounded_group(step):
        return _grouping().execute_bounded(step, value, space, size, rng)
    if isinstance(step, Chain) and isinstance(step.first, PoissonSample):
        return _subsampled(step.first, step.second, value, space, size, rng)
    if isinstance(step, Repeat):
        return _Tuple([execute(step.part, value, space, size, rng) for _ in range(step.times)])
    if isinstance(step, Iterate):
        return _iterated(step, value, space, size, rng)
    if isinstance(step, Chain):
        if isinstance(step.first, Transformation):
            return execute(step.second, step.first.apply(value), step.first.out_space(space), size, rng)
        first = execute(step.first, value, space, size, rng)
        return _post_chain(step.second, first)
    if isinstance(step, Compose):
        outs = [execute(p, value, space, size, rng) for p in step.parts]
        return _Tuple(outs)
    if isinstance(step, Parallel):
        arr = np.asarray(value, dtype=float)
        key_col = arr[:, step.by] if arr.ndim == 2 else arr
        outs = []
        for key in step.keys:
            part_data = arr[key_col == float(key)]
            outs.append(execute(step.part, part_data, space, size, rng))
        return _Tuple(outs)
    raise ParameterError(f"step={step!r} cannot run here; dp.post must follow a randomized step.")


class _Tuple(list):
    """Outputs of composed parts, before they are flattened into columns or passed to post."""


def _iterated(step: Iterate, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` independent runs, each ``times`` rounds with its own state (the rounds of one run are
    sequential: each round's map functions see the state the previous releases produced)."""
    outs = []
    for _ in range(size):
        state = np.array(step.init)
        releases = []
        for _ in range(step.times):
            token = _ITERATE_STATE.set(state)
            try:
                release = flatten(execute(step.part, value, space, 1, rng))[0]
            finally:
                _ITERATE_STATE.reset(token)
            releases.append(np.atleast_1d(release))
            state = np.asarray(step.update(state, release), dtype=float).reshape(-1)
            if state.shape != step.init.shape or not np.all(np.isfinite(state)):
                raise ParameterError(f"update returned a state of shape {state.shape} (or not finite); return "
                                     f"{len(step.init)} finite numbers, like init.")
        outs.append(state if step.output == "state" else np.concatenate(releases))
    out = np.asarray(outs)
    return out[:, 0] if out.shape[1] == 1 else out


def _subsampled(sample: PoissonSample, rest: Step, value: Any, space: Space, size: int,
                rng: np.random.Generator) -> np.ndarray:
    """``size`` releases, each on its own Poisson subsample: an exact Bernoulli(rate) per record and
    release; the releases that kept the same records run ``rest`` together (one call per distinct
    subsample, in a fixed order, so the same seed gives the same outputs)."""
    from ._exact import bernoulli

    arr = np.asarray(value)
    n = len(arr)
    if n == 0:
        return flatten(execute(rest, arr, space, size, rng))
    keep = bernoulli(sample.rate, (size, n), rng)
    patterns, inverse = np.unique(keep, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=len(patterns))
    rows, outs, start = [], [], 0
    for pattern, c in zip(patterns, counts):
        rows.append(order[start:start + c])
        outs.append(flatten(execute(rest, arr[pattern], space, int(c), rng)))
        start += c
    got = np.concatenate(outs)
    out = np.empty_like(got)
    out[np.concatenate(rows)] = got
    return out


def _post_chain(step: Step, outputs: Any) -> Any:
    if isinstance(step, Post):
        return _apply_post(step, outputs)
    if isinstance(step, Chain) and isinstance(step.first, Post):
        return _post_chain(step.second, _apply_post(step.first, outputs))
    raise ParameterError(f"{step.describe()} follows a randomized step; only dp.post(fn) may follow noise.")


def _apply_post(step: Post, outputs: Any) -> np.ndarray:
    args = list(outputs) if isinstance(outputs, _Tuple) else [outputs]
    args = [np.asarray(flatten(a)) for a in args]
    n = len(args[0])
    if step.vectorized:
        res = np.asarray(step.fn(*args))
        if res.shape[:1] != (n,):
            raise ParameterError(f"post fn with vectorized=True returned shape {res.shape}; return one row per run ({n}).")
        return res
    rows = [step.fn(*(a[i] if a.ndim == 1 else a[i] for a in args)) for i in range(n)]
    res = np.asarray(rows)
    if res.dtype == object:
        raise ParameterError("post fn returned values that are not numbers or equal-length number sequences; "
                             "return a number or a fixed-length tuple of numbers.")
    return res


def flatten(outputs: Any) -> np.ndarray:
    """Concatenate composed outputs into columns: shape (size,) for one column, (size, k) otherwise."""
    if not isinstance(outputs, _Tuple):
        return np.asarray(outputs)
    cols = []
    for o in outputs:
        o = flatten(o)
        cols.append(o.reshape(len(o), -1))
    out = np.concatenate(cols, axis=1)
    return out[:, 0] if out.shape[1] == 1 else out


# --------------------------------------------------------------------------- the mechanism value

@dataclass(frozen=True, kw_only=True)
class PartsMechanism(Mechanism):
    """A mechanism declared from parts (:func:`mechanism`). Its sampler executes ``steps``; its law is
    the product of its noise measurements' exact laws (when no post-processing follows); its proof is
    derived from the same structure by ``dpharness.proofs.parts``.

    Fields: ``label`` (registry name), ``records`` (record domain), ``relation``, ``steps``,
    ``shape`` (``"dataset"``, ``"vector"`` or ``"record"``: one record, local DP), ``dim`` (vector length), ``size`` (fixed data-set size,
    or None), ``claim``."""

    label: str
    records: Domain
    relation: Relation
    steps: Step
    shape: str = "dataset"
    dim: int | None = None
    size: int | None = None
    description: str = ""
    claim: Claim = PureDP(1)

    source = "declared from dpharness.parts"

    def _check(self) -> None:
        if not isinstance(self.label, str) or not self.label.isidentifier() or self.label != self.label.lower():
            raise ParameterError(f"name={self.label!r} must be a lower_snake identifier; pass e.g. name='team_noisy_mean'.")
        if not isinstance(self.records, Domain):
            raise ParameterError(f"records={self.records!r} is not a Domain; pass e.g. RealInterval(0, 100).")
        if not isinstance(self.relation, Relation):
            raise ParameterError(f"relation={self.relation!r} is not a Relation; pass AddRemove() or Substitute().")
        if not isinstance(self.steps, Step):
            raise ParameterError(f"steps={self.steps!r} is not a dpharness.parts step; build it with dp.count() >> dp.laplace(...).")
        _v.choice("input", self.shape, ("dataset", "vector", "record"))
        if self.shape == "vector":
            if not isinstance(self.relation, BoundedChange):
                raise ParameterError(f"relation={self.relation!r} does not fit vector input; pass BoundedChange(sensitivity, norm).")
            _v.integer("dim", self.dim, minimum=1)
            if isinstance(self.records, IntegerRange) and _frac("sensitivity", self.relation.sensitivity) < 1:
                # distinct integer vectors are at least 1 apart in every norm: no two inputs would be neighbours
                raise ParameterError(f"relation={self.relation!r} on integer vectors ({self.records.describe()}): no two "
                                     "distinct integer vectors are within a sensitivity below 1; pass a sensitivity >= 1 "
                                     "or a RealInterval domain.")
        elif self.shape == "record":
            if not isinstance(self.relation, Substitute):
                raise ParameterError(f"relation={self.relation!r} does not fit a one-record input; pass Substitute() "
                                     "(any two records are neighbours: local DP).")
            if self.dim is not None or self.size is not None:
                raise ParameterError(f"dim={self.dim!r}, size={self.size!r}: a one-record input has neither; drop them.")
        elif isinstance(self.relation, _grouping().AddRemoveUser):
            _grouping().check_user_level(self.relation, self.steps, self.space)
        elif not isinstance(self.relation, (AddRemove, Substitute)):
            raise ParameterError(f"relation={self.relation!r} does not fit data-set input; pass AddRemove() or Substitute().")
        if not isinstance(self.relation, _grouping().AddRemoveUser) and any(
                type(n) is _grouping().BoundContributions for n in walk_nodes(self.steps)):
            raise ParameterError("dp.bound_contributions(...) bounds each user's records for the add/remove-one-user "
                                 "relation; declare relation=dp.AddRemoveUser(user=...).")
        if self.size is not None:
            _v.integer("size", self.size, minimum=1)
            if isinstance(self.relation, AddRemove):
                raise ParameterError("size= fixes the number of records, which add/remove changes; use Substitute() or drop size.")
        _check_types(self.steps)
        _, width = check_structure(self.steps, self.space)
        if width == 0:
            raise ParameterError("steps release nothing random; end them with a noise measurement (e.g. >> dp.laplace(scale)).")

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    @property
    def space(self) -> Space:
        return input_space(self.records, self.shape, self.dim)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(self.records, self.relation, self.shape, dim=self.dim, size=self.size)

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        value = record_value(data) if self.shape == "record" else np.asarray(data, dtype=float)
        if self.shape == "dataset" and value.ndim == 1 and self.space.dim > 1:
            value = value.reshape(-1, self.space.dim)
        out = flatten(execute(self.steps, value, self.space, size, rng))
        return out[:, 0] if out.ndim == 2 and out.shape[1] == 1 else out

    def _law(self, data: Any) -> OutputLaw:
        from ._parts_law import law

        return law(self, data)

    def example_pair(self) -> tuple[Any, Any]:
        from ._parts_law import extreme_pairs

        return extreme_pairs(self)[0]

    def noise_parameters(self) -> dict[str, Any]:
        return {"steps": self.steps.describe(), "records": self.records.describe(),
                "relation": self.relation.describe()}

    def source_hash(self) -> str:
        """SHA-256 of the structure (every field of every node, in full: a description may abbreviate,
        e.g. a long candidate list) and the source of every user function."""
        h = hashlib.sha256(repr((self.label, _canonical(self.steps), self.records, self.relation, self.shape,
                                 self.dim, self.size, self.claim)).encode())
        for fn in _post_functions(self.steps) + _query_functions(self.steps):
            try:
                h.update(inspect.getsource(fn).encode())
            except (OSError, TypeError):
                h.update(repr(fn).encode())
        return h.hexdigest()

    def describe(self) -> str:
        return f"{self.label}: {self.steps.describe()} claiming {self.claim.describe()}"


def _canonical(value: Any) -> Any:
    """A full, deterministic description of a structure for hashing: every dataclass field of every
    node (functions by name only: their source is hashed separately), arrays and sequences in full."""
    import dataclasses

    if callable(value) and not isinstance(value, Step):
        return ("fn", getattr(value, "__qualname__", type(value).__qualname__))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__qualname__,
                tuple((f.name, _canonical(getattr(value, f.name))) for f in dataclasses.fields(value)))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, tuple(value.ravel().tolist()))
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(_canonical(v)) for v in value)))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), repr(_canonical(v))) for k, v in value.items())))
    return repr(value)


def _check_types(step: Any) -> None:
    """Every node must be exactly one of this module's step classes (not a subclass, wherever it is
    defined): the prover's lemmas are about these classes' code. Checked at construction and again by
    the prover (a structure swapped in after construction is caught there)."""
    if type(step).__module__ == f"{__package__}._budget":
        raise ParameterError(f"{step.describe()} is a budget, not yet a scale; declare the mechanism with "
                             "dpharness.parts.mechanism(...), which derives the scale (or pass scale=/sigma=).")
    if type(step) not in _STEP_TYPES and type(step) not in _family_step_types():
        raise ParameterError(f"steps contain {type(step).__qualname__} from {type(step).__module__}, which is not a "
                             "dpharness.parts step; build steps with the dp.* constructors (a subclass of a part would "
                             "change code its lemma is about).")
    for child in _children(step):
        _check_types(child)


_STEP_TYPES = frozenset({Clamp, Column, Count, Sum, SumSquares, SumProducts, Histogram, GridLaplace, GridGaussian,
                         LocalRandomizedResponse, LocalWarner, LocalRappor, Chain, Compose, Post, Parallel,
                         PoissonSample, Repeat, MapRecords, ClipNorm, Iterate})


def _family_modules() -> tuple:
    """The families kept in their own modules (selection, threshold, grouping); each lists its ``STEP_TYPES``."""
    from . import _parts_grouping, _parts_selection, _parts_threshold

    return (_parts_selection, _parts_threshold, _parts_grouping)


def _family_step_types() -> frozenset:
    """Step classes of the families kept in their own modules."""
    return frozenset().union(*(f.STEP_TYPES for f in _family_modules()))


def family_module(step: Any) -> Any:
    """The family module whose ``STEP_TYPES`` holds ``type(step)``, or None."""
    for f in _family_modules():
        if type(step) in f.STEP_TYPES:
            return f
    return None


def _children(step: Any) -> list:
    """The nodes directly under ``step`` (a threshold part's queries included)."""
    queries = getattr(step, "queries", None) if type(step) in _family_step_types() else None
    return [c for c in (getattr(step, "first", None), getattr(step, "second", None), getattr(step, "part", None),
                        *getattr(step, "parts", ()), *(queries or ())) if c is not None]


def _grouping():
    from . import _parts_grouping

    return _parts_grouping


def is_bounded_group(step: Any) -> bool:
    """``bound_contributions(...) >> group_by(...)``: a chain the grouping family runs and proves as one."""
    return isinstance(step, Chain) and type(step.first) is _grouping().BoundContributions


def walk_nodes(step: Step) -> list:
    """Every node of the structure, parents first."""
    return [step] + [n for c in _children(step) for n in walk_nodes(c)]


def _post_functions(step: Step) -> list:
    if isinstance(step, Post):
        return [step.fn]
    if isinstance(step, Chain):
        return _post_functions(step.first) + _post_functions(step.second)
    if isinstance(step, Compose):
        return [f for p in step.parts for f in _post_functions(p)]
    if isinstance(step, (Parallel, Repeat)):
        return _post_functions(step.part)
    if isinstance(step, Iterate):
        return [step.update] + _post_functions(step.part)
    if isinstance(step, MapRecords):
        return [step.fn]
    return []


def _query_functions(step: Step) -> list:
    """The user functions of family nodes (a threshold part's ``dp.query(fn, ...)``)."""
    return [n.fn for n in walk_nodes(step) if type(n) in _family_step_types() and callable(getattr(n, "fn", None))]


def mechanism(*, name: str, records: Domain, relation: Relation, steps: Step, claim: Claim,
              input: str = "dataset", dim: int | None = None, size: int | None = None,
              description: str = "") -> PartsMechanism:
    """A :class:`~dpharness.core.Mechanism` declared from parts.

    ``records``: the record domain (``RealInterval``, ``IntegerRange``, ``Finite``, ``RealBox``);
    ``relation``: ``AddRemove()`` or ``Substitute()`` (``BoundedChange(Δ, norm)`` with
    ``input="vector"``, ``dim=...``); ``steps``: transformations ``>>`` noise (``>> dp.post(fn)``);
    ``claim``: ``PureDP(ε)``, ``ApproxDP(ε, δ)`` or ``RenyiDP(α, ε)``; ``size``: a fixed number of
    records (substitution only). ``input="record"``: the input is ONE record of ``records``
    (``Finite`` or ``IntegerRange``), ``relation=Substitute()`` (any two records are neighbours,
    local DP), and ``steps`` are local randomizers (``dp.randomized_response``, ``dp.warner``,
    ``dp.rappor``, ``dp.compose`` of them, ``>> dp.post(fn)``)."""
    if not isinstance(claim, Claim):
        raise ParameterError(f"claim={claim!r} is not a Claim; pass PureDP(eps), ApproxDP(eps, delta) or RenyiDP(alpha, eps).")
    return PartsMechanism(label=name, records=records, relation=relation, steps=steps, shape=input, dim=dim,
                          size=size, description=description, claim=claim)


# --------------------------------------------------------------------------- catalog classes declared from parts

# What a Composite subclass may not redefine: everything else (its fields, ``_check``, ``structure``,
# ``calibrated``, helper properties) only feeds the declaration that is both executed and proved.
COMPOSITE_SEALED = ("_sample", "_law", "sample", "law", "__call__", "validate", "input_spec", "parts", "__post_init__",
                    "_build_parts", "example_pair", "source_hash", "__getattribute__", "__getattr__", "__setattr__",
                    "__init__", "__new__", "__init_subclass__", "__class_getitem__")


@dataclass(frozen=True, kw_only=True)
class Composite(Mechanism):
    """A mechanism class whose behaviour is a declaration from parts: subclasses keep named, validated
    parameters (``--set scale=...`` works) and implement :meth:`structure`, returning
    ``dp.mechanism(...)`` built from ``self``'s fields. The declaration is built once per value
    (:attr:`parts`); the sampler executes it and ``dpharness.prove`` walks it, so the two cannot differ.
    Redefining the sampler, the law or :attr:`parts` in a subclass voids the proof
    (:data:`COMPOSITE_SEALED`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._build_parts()

    def _build_parts(self) -> None:
        built = self.structure()
        if not isinstance(built, PartsMechanism):
            raise ParameterError(f"{type(self).__name__}.structure() returned {built!r}; return dp.mechanism(...).")
        if built.claim != self.claim:
            raise ParameterError(f"{type(self).__name__}.structure() must declare claim=self.claim.")
        object.__setattr__(self, "_cache_parts", built)

    def structure(self) -> PartsMechanism:
        """The declaration (``dp.mechanism(name=self.name, ..., claim=self.claim)``)."""
        raise NotImplementedError

    @property
    def parts(self) -> PartsMechanism:
        return self.__dict__["_cache_parts"]

    @property
    def input_spec(self) -> InputSpec:
        return self.parts.input_spec

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        return self.parts._sample(data, size, rng)

    def _law(self, data: Any) -> OutputLaw:
        return self.parts._law(data)

    def example_pair(self) -> tuple[Any, Any]:
        return self.parts.example_pair()


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
