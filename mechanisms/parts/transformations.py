"""Transformations: exact data maps with stability maps (OpenDP's transformations). Record-wise maps
(:func:`clamp`, :func:`column`, :func:`map_records`, :func:`clip_norm`: 1-stable under add/remove and
substitution) and aggregates computed exactly on the records' binary values (:func:`count`, :func:`sum`,
:func:`sum_squares`, :func:`sum_products`, :func:`histogram`; the sums by vectorised error-free
extraction, :mod:`dpharness.mechanisms._exactsum`, equal to the rational sum of the doubles), with
their stability under add/remove and substitution. Proved in :mod:`dpharness.proofs.parts.transformations`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Sequence

import numpy as np

from dpharness import _validate as _v
from dpharness.core import AddRemove
from dpharness.errors import ParameterError
from dpharness.mechanisms import _rowwise
from dpharness.mechanisms._exactsum import (
    exact_sum,
    exact_sum_products,
    exact_sum_squares,
    exact_sums_by,
    sums_by_units,
)

from ._base import (
    _INF,
    _ITERATE_STATE,
    Distance,
    Space,
    Transformation,
    _float_exact,
    _frac,
    _need,
    _scalar_distance,
    _show,
    register,
)

__all__ = [
    "Clamp",
    "MapRecords",
    "ClipNorm",
    "Column",
    "Count",
    "Sum",
    "SumSquares",
    "SumProducts",
    "Histogram",
    "clamp",
    "column",
    "count",
    "sum",
    "sum_squares",
    "sum_products",
    "histogram",
    "map_records",
    "clip_norm",
]


@dataclass(frozen=True)
class Clamp(Transformation):
    """Record-wise clamp of every column to ``[lo, hi]`` (exact on floats). 1-stable: a record-wise
    map keeps neighbouring data sets neighbouring under add/remove and substitution."""

    per_key_role = "record-wise"
    rowwise = True

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


@dataclass(frozen=True)
class MapRecords(Transformation):
    """Record-wise map by a user function: each record ``r`` becomes ``fn(r)`` (inside
    :func:`iterate`: ``fn(state, r)``, the current state as its first argument), a number or
    ``columns`` numbers. 1-stable under add/remove and substitution: the added, removed or substituted
    record maps to one record, every other record to itself. The values are unbounded: clip them
    (:func:`clip_norm`, :func:`clamp`) before an aggregate. ``fn`` must be a pure function of its
    arguments (no state kept between calls); the proof states it.

    ``fn`` is called on one record at a time, by construction (:mod:`dpharness.mechanisms._rowwise`):
    compiled with numba and looped over the rows in compiled code (``compiled=True``, or an
    ``numba.njit`` function; ``path`` says :data:`~dpharness.mechanisms._rowwise.COMPILED`), from Python
    on each record (the default), or, with ``vectorized=True`` (a function of arrays of rows), on a
    one-row array per row; on every path the row is a copy of its own (never a view whose ``base`` is the
    batch). It never sees another record, so row k's value cannot depend on the batch.

    The map is total, so no input makes a release raise: a call of ``fn`` that raises, or returns
    anything but ``columns`` numbers, maps the record to 0 in every column; NaN becomes 0, and ±∞ the
    largest double of that sign (then clipped like any other value). Stability holds for this total
    map: it is still one record in, one record out."""

    rowwise = True

    fn: Callable = field(compare=False)
    columns: int = 1
    vectorized: bool = False
    compiled: bool = False
    path: str = field(init=False, default=_rowwise.PYTHON)

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ParameterError(
                f"fn={self.fn!r} is not callable; pass a function of one record (inside dp.iterate: of "
                "the state and one record)."
            )
        object.__setattr__(self, "columns", _v.integer("columns", self.columns, minimum=1))
        object.__setattr__(self, "path", _rowwise.choose_path("fn", self.fn, self.compiled, self.vectorized))

    def describe(self) -> str:
        return f"map_records({getattr(self.fn, '__name__', 'fn')}" + (
            f", columns={self.columns})" if self.columns > 1 else ")"
        )

    def user_code(self, short: bool = False) -> tuple[str, ...]:
        """How ``fn`` runs (said by the proof's assumptions and, ``short``, the gate line)."""
        return (f"{self.describe()}: {_rowwise.path_phrase(self.path, 'row', short)}",)

    def out_space(self, space: Space) -> Space:
        _need(space, "records", "map_records")
        return Space("records", self.columns, (-_INF,) * self.columns, (_INF,) * self.columns, None)

    def stability(self, space: Space, d: Distance) -> Distance:
        return d

    def apply(self, value: Any) -> Any:
        arr = np.asarray(value, dtype=float)
        state = _ITERATE_STATE.get(None)
        return self.apply_rows(arr, None if state is None else np.tile(state, (len(arr), 1)))

    def apply_rows(self, rows: Any, states: np.ndarray | None) -> Any:
        """``apply`` on rows, row k with its own state ``states[k]`` (None outside an iteration): ``fn``
        on each row alone, on the path ``self.path``, with the same total rule on every path."""
        arr = np.asarray(rows, dtype=float)
        if self.path == _rowwise.COMPILED:  # on no rows too: compiled (or refused) whatever the data
            out = _rowwise.compiled_map(self.fn, arr, states, self.columns)
        else:
            one_row = self.path == _rowwise.ONE_ROW
            out = np.zeros((len(arr), self.columns))
            # each row (and state) a copy of its own: a view's ``base`` is the whole batch, which fn could read
            # or write (row k's value would then depend on the other rows, and the records change in place)
            for k in range(len(arr)):
                if one_row:  # a function of arrays of rows, given one row
                    out[k] = self._row(arr[k : k + 1].copy(), None if states is None else states[k : k + 1].copy())
                else:
                    out[k] = self._row(arr[k].copy(), None if states is None else states[k].copy())
        return out[:, 0] if self.columns == 1 else out

    def _row(self, record: Any, state: Any) -> np.ndarray:
        """The map's value on one record (or a one-row array of it), made total (the rule the proof
        states): a call that raises, or returns anything but ``columns`` numbers, gives 0 in every column;
        NaN gives 0; ±∞ gives ±(the largest double), which the clipping step that must follow bounds like
        any other value. A raise on one neighbour only would otherwise be an output the privacy proof
        never saw."""
        try:
            with np.errstate(all="ignore"):
                row = np.asarray(self.fn(record) if state is None else self.fn(state, record), dtype=float).ravel()
        except (Exception, SystemExit):  # noqa: BLE001 - the total rule: a failing call is the all-zero record
            # (SystemExit too: sys.exit() in the function on one record would end one neighbour's release)
            return np.zeros(self.columns)
        if row.shape != (self.columns,):
            return np.zeros(self.columns)
        return np.nan_to_num(row, nan=0.0, posinf=_MAX_DOUBLE, neginf=-_MAX_DOUBLE)


@dataclass(frozen=True)
class ClipNorm(Transformation):
    """Record-wise norm clipping: a record ``v`` (one or more columns) becomes ``v·min(1, bound/‖v‖)``
    in the ``norm`` ("l1", "l2", "linf"), computed in floats and then checked exactly (rationals): a
    record whose clipped norm still exceeds ``bound`` is shrunk by one part in 2^50 until it does not,
    so ‖output‖ <= bound holds exactly. One column (given as a 1-D array or as one column) and "linf":
    exactly ``clamp(−bound, bound)`` per column. 1-stable (record-wise).

    The box the aggregates that follow read (:meth:`out_space`): a clamped column lies in its domain
    ``[lo, hi]`` clamped to ``[−bound, bound]``; under "l1"/"l2" on several columns a record is scaled by a
    factor in (0, 1], so each column keeps its sign and moves towards 0, and lies in
    ``[max(−bound, min(lo, 0)), min(bound, max(hi, 0))]`` (not in ``[lo, hi]``: the record [0.9, 10] in
    [0.9, 1] × [0, 10] clipped to l2 norm 1 has first column 0.09)."""

    rowwise = True

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
        if space.dim == 1 or self.norm == "linf":  # each column clamped to [−b, b] (apply), so is its box
            return Space(
                "records",
                space.dim,
                tuple(min(max(a, -b), b) for a in space.lo),
                tuple(max(min(c, b), -b) for c in space.hi),
                None,
            )
        # scaled by a factor in (0, 1]: each column between 0 and its value, and within [−b, b]
        return Space(
            "records",
            space.dim,
            tuple(max(-b, min(a, Fraction(0))) for a in space.lo),
            tuple(min(b, max(c, Fraction(0))) for c in space.hi),
            None,
        )

    def stability(self, space: Space, d: Distance) -> Distance:
        return d

    def apply(self, value: Any) -> Any:
        arr = np.asarray(value, dtype=float)
        b = float(self.bound)
        if arr.ndim == 1 or arr.shape[1] == 1 or self.norm == "linf":  # one column: its norm is |v|, a clamp
            return np.clip(arr, -b, b)
        order = 1 if self.norm == "l1" else 2
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            # each row's norm as m·r, m its largest |coordinate| and r the norm of the row over m (in
            # [1, dim]): no overflow for coordinates near the largest double (a norm of inf would
            # scale such a record to 0) and no underflow for subnormal ones
            m = np.max(np.abs(arr), axis=1) if arr.shape[1] else np.zeros(len(arr))
            safe = np.where(m > 0, m, 1.0)
            r = np.linalg.norm(arr / safe[:, None], ord=order, axis=1)
            limit = b / safe  # the row is longer than b iff r > limit (inf for m tiny: never)
            over = (m > 0) & (r > limit)
            scale = np.where(over, limit / r, 1.0)  # r > limit >= 0 where selected
        out = arr * scale[:, None]
        bq = Fraction(b)
        # the float norm and scaling err by a few ulps either way: every row the float computation puts
        # within 2^-30 of the bound, or above it, is checked exactly and shrunk until its norm is <= b
        # (a row of norm b(1 + 2^-53) — [0.6, 0.8] in l2, [1, 1e-17] in l1 — passed as within b); all
        # such rows at once, each shrunk as many times as it alone would be
        rows = np.flatnonzero((m > 0) & (r >= limit * (1 - 2.0**-30)))
        while rows.size:
            rows = rows[_norms_exceed(out[rows], bq, order)]
            out[rows] = out[rows] * (1 - 2.0**-50)
        return out


_MAX_DOUBLE = float(np.finfo(float).max)


def _norms_exceed(v: np.ndarray, bound: Fraction, order: int) -> np.ndarray:
    """Per row of ``v``, whether its exact norm exceeds ``bound`` (l1: Σ|v_j| > bound, l2: Σ v_j² > bound²),
    from exact sums per row (an integer ``u`` times ``2**e`` exceeds a rational ``c`` iff ``u > floor(c /
    2**e)``)."""
    rows, cols = v.shape
    codes = np.repeat(np.arange(rows), cols)
    if order == 1:
        units, exponent = sums_by_units(codes, np.abs(v).ravel(), rows)
        limit = bound
    else:
        units, exponent = sums_by_units(codes, v.ravel(), rows, squares=True)
        limit = bound * bound
    return np.asarray(units > math.floor(limit / Fraction(2) ** exponent), dtype=bool)


@dataclass(frozen=True)
class Column(Transformation):
    """Record-wise: keep column ``j`` of multi-column records (1-stable)."""

    per_key_role = "record-wise"
    rowwise = True

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

    per_key_role = "aggregate"

    def describe(self) -> str:
        return "count()"

    def out_space(self, space: Space) -> Space:
        _need(space, "records", "count")
        return Space("scalar", 1, (Fraction(0),), (_INF,), Fraction(1))

    def stability(self, space: Space, d: Distance) -> Distance:
        return _scalar_distance(Fraction(1) if isinstance(d.relation, AddRemove) else Fraction(0))

    def apply(self, value: Any) -> Any:
        return Fraction(len(np.asarray(value)))

    def apply_by(self, value: Any, codes: np.ndarray, n_groups: int) -> list[Fraction]:
        """``apply`` on each group's records at once: ``codes`` (one integer in ``[0, n_groups)`` per
        record) names each record's group."""
        return [Fraction(int(c)) for c in np.bincount(codes, minlength=n_groups).tolist()]

    def apply_by_units(self, value: Any, codes: np.ndarray, n_groups: int) -> tuple[np.ndarray, int]:
        """:meth:`apply_by` as integers (int64) and the exponent 0."""
        return np.bincount(codes, minlength=n_groups).astype(np.int64), 0

    def add_direction(self, space: Space) -> int | None:
        return 1


def _bounded(space: Space, what: str) -> tuple[Fraction, Fraction]:
    lo, hi = space.lo[0], space.hi[0]
    if lo == -_INF or hi == _INF:
        raise ParameterError(
            f"{what} needs bounded records, but they are in [{_show(lo)}, {_show(hi)}]; "
            "put dp.clamp(lo, hi) before it or declare bounded records."
        )
    return lo, hi


def _contribution(lo: Fraction, hi: Fraction, d: Distance) -> Fraction:
    """Stability of a sum of per-record contributions in [lo, hi]: max(|lo|, |hi|) under add/remove
    (one contribution appears or vanishes), hi − lo under substitution (one contribution changes)."""
    return max(abs(lo), abs(hi)) if isinstance(d.relation, AddRemove) else hi - lo


@dataclass(frozen=True)
class Sum(Transformation):
    """The exact sum of one-column records in ``[L, U]``. Stability: ``max(|L|, |U|)`` (add/remove),
    ``U − L`` (substitution)."""

    per_key_role = "aggregate"

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
        return exact_sum(np.asarray(value, dtype=float))

    def apply_by(self, value: Any, codes: np.ndarray, n_groups: int) -> list[Fraction]:
        """``apply`` on each group's records at once (``codes`` as in :meth:`Count.apply_by`)."""
        return exact_sums_by(codes, np.asarray(value, dtype=float), n_groups)

    def apply_by_units(self, value: Any, codes: np.ndarray, n_groups: int) -> tuple[np.ndarray, int]:
        """:meth:`apply_by` as integers and one exponent: group j's sum is ``units[j] · 2**exponent``
        (exactly the Fractions :meth:`apply_by` gives, without building them)."""
        return sums_by_units(codes, np.asarray(value, dtype=float), n_groups)

    def sum_terms(self, value: Any) -> np.ndarray:
        """The doubles whose exact sum (per group) :meth:`apply_by_units` gives, one per record."""
        return np.asarray(value, dtype=float).reshape(-1)

    def add_direction(self, space: Space) -> int | None:
        lo, hi = self.contribution(space)
        return 1 if lo >= 0 else -1 if hi <= 0 else None


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
            raise ParameterError(
                f"sum_squares() takes one-column records, got {space.dim}; put dp.column(j) before it."
            )
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
        return exact_sum_squares(np.asarray(value, dtype=float))

    def add_direction(self, space: Space) -> int | None:
        lo, hi = self.contribution(space)
        return 1 if lo >= 0 else -1 if hi <= 0 else None


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
            raise ParameterError(
                f"sum_products({self.i}, {self.j}) but records have {space.dim} column(s); "
                f"pass columns below {space.dim}."
            )
        for c in (self.i, self.j):
            if space.lo[c] == -_INF or space.hi[c] == _INF:
                raise ParameterError(
                    f"sum_products needs bounded columns; column {c} is unbounded. Put dp.clamp(lo, hi) before it."
                )
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
        return exact_sum_products(arr[:, self.i], arr[:, self.j])

    def add_direction(self, space: Space) -> int | None:
        lo, hi = self.contribution(space)
        return 1 if lo >= 0 else -1 if hi <= 0 else None


@dataclass(frozen=True)
class Histogram(Transformation):
    """Counts of one-column records per bin: ``edges`` (bins ``[e_k, e_{k+1})``, the last one closed)
    or ``categories`` (exact equality). Records in no bin are not counted. Each record is in at most
    one bin, so the count vector moves by L1 1 (add/remove) or 2 (substitution), L∞ 1, L2² 1 or 2."""

    edges: tuple | None = None
    categories: tuple | None = None

    def __post_init__(self) -> None:
        if (self.edges is None) == (self.categories is None):
            raise ParameterError(
                "histogram needs exactly one of edges=... or categories=...; pass e.g. "
                "dp.histogram(edges=[0, 10, 20]) or dp.histogram(categories=[0, 1, 2])."
            )
        # every edge and category is a value a float represents exactly, since records are compared with it as
        # floats: distinct (increasing) as numbers is then distinct (increasing) as the floats the sampler compares
        if self.edges is not None:
            e = tuple(_float_exact("edges", x, "a bin edge") for x in self.edges)
            if len(e) < 2 or any(Fraction(a) >= Fraction(b) for a, b in zip(e, e[1:])):
                raise ParameterError(
                    f"edges={self.edges!r} must be at least 2 increasing numbers; pass sorted bin edges."
                )
            object.__setattr__(self, "edges", e)
        else:
            assert self.categories is not None  # exactly one of edges and categories (checked above)
            cats = tuple(_float_exact("categories", c, "a category") for c in self.categories)
            if len(cats) < 1 or len({Fraction(c) for c in cats}) != len(cats):
                raise ParameterError(
                    f"categories={self.categories!r} must be distinct values; pass a list of categories."
                )
            object.__setattr__(self, "categories", cats)

    @property
    def bins(self) -> int:
        if self.edges is not None:
            return len(self.edges) - 1
        assert self.categories is not None  # exactly one of edges and categories (__post_init__)
        return len(self.categories)

    def describe(self) -> str:
        if self.edges is not None:
            return f"histogram(edges={list(self.edges)})"
        assert self.categories is not None  # exactly one of edges and categories (__post_init__)
        return f"histogram(categories={list(self.categories)})"

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
            assert self.categories is not None  # exactly one of edges and categories (__post_init__)
            counts = np.array([int(np.sum(arr == float(c))) for c in self.categories])
        return tuple(Fraction(int(c)) for c in counts)

    def add_direction(self, space: Space) -> int | None:
        return 1


register(Clamp, MapRecords, ClipNorm, Column, Count, Sum, SumSquares, SumProducts, Histogram)


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


def map_records(fn: Callable, *, columns: int = 1, compiled: bool = False, vectorized: bool = False) -> MapRecords:
    """Map every record by ``fn`` (a number, or ``columns`` numbers, per record; inside
    :func:`iterate` ``fn(state, record)``). Clip the result before aggregating it.

    ``fn`` sees one record at a time, always (the proof treats it as per-record, so it is run so):

    * ``compiled=True`` (or ``fn`` an ``numba.njit`` function): the fast path. ``fn`` is compiled with
      numba and called on every row by a compiled loop, so row k's value is ``fn`` of row k alone, bit for
      bit whatever the batch (needs the ``numba`` extra; without it, the per-record path, and the proof
      says so). Write ``fn`` with numpy arrays, numbers and math (what ``numba.njit`` compiles).
    * the default: ``fn`` called from Python once per record (slow on large inputs and long iterations).
    * ``vectorized=True``: ``fn`` is a function of arrays of rows (``fn(records)``, inside
      :func:`iterate` ``fn(states, records)``). It is called on a one-row array per row, never on a
      batch: a batched call could mix rows (centre them, winsorise them, or a matrix product whose last
      bits depend on the batch), which no proof of a per-record map covers. Use ``compiled=True`` for speed."""
    _v.choice("vectorized", vectorized, (True, False))
    _v.choice("compiled", compiled, (True, False))
    return MapRecords(fn, columns, vectorized, compiled)


def clip_norm(bound: Any, *, norm: str = "l2") -> ClipNorm:
    """Clip every record to norm at most ``bound`` (``norm`` "l1", "l2" or "linf"), exactly."""
    return ClipNorm(bound, norm)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
