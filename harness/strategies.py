"""Hypothesis strategies for neighbouring inputs, honouring a declared neighbour relation.

>>> from hypothesis import given
>>> from dpharness import AddRemove, IntegerRange
>>> from dpharness.strategies import neighboring_datasets
>>> @given(neighboring_datasets(records=IntegerRange(0, 9), relation=AddRemove()))
... def test_count_is_private(pair):
...     data, neighbor = pair
...     ...

Every strategy draws a pair ``(data, neighbor)`` with ``relation.is_neighbour(data, neighbor)``
true (and, for a single-record input, two different records):

* ``AddRemove()``: data sets (numpy arrays, shape ``(n,)`` or ``(n, columns)``) differing by one
  record added or removed at a random position; which side is larger is drawn too.
* ``Substitute()``: equal-size data sets (at least one record) differing in exactly one record; with
  ``shape="record"`` two different single records (local DP).
* ``BoundedChange(sensitivity, norm)``: query-answer vectors of length ``dim`` whose difference has
  the given norm at most ``sensitivity`` (drawn with a small safety margin so float rounding keeps
  the pair neighbouring) and is non-zero.

``records`` is a record strategy or a :class:`~dpharness.Domain` (``Finite``, ``IntegerRange``,
``RealInterval``, ``RealBox``); unbounded real intervals are drawn within ±``bound``.
:func:`mechanism_inputs` reads both from a mechanism's ``input_spec``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from . import _validate as _v
from .core import AddRemove, BoundedChange, Domain, Finite, IntegerRange, RealBox, RealInterval, Relation, Substitute
from .errors import ParameterError

__all__ = ["records_from_domain", "neighboring_datasets", "neighboring_records", "mechanism_inputs"]

_MARGIN = 1e-6  # relative safety margin under the sensitivity for BoundedChange pairs


def records_from_domain(domain: Domain, *, bound: float = 1e6) -> st.SearchStrategy:
    """One record of ``domain``; infinite real bounds are replaced by ±``bound``."""
    if isinstance(domain, Finite):
        return st.sampled_from(domain.values)
    if isinstance(domain, IntegerRange):
        return st.integers(domain.lo, domain.hi)
    if isinstance(domain, RealInterval):
        lo = max(float(domain.lo), -bound)
        hi = min(float(domain.hi), bound)
        if not lo < hi:
            raise ParameterError(f"bound={bound!r} leaves no room inside {domain.describe()}; pass a larger bound.")
        return st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False)
    if isinstance(domain, RealBox):
        coord = st.floats(
            float(domain.lo), float(domain.hi), allow_nan=False, allow_infinity=False, allow_subnormal=False
        )
        return st.lists(coord, min_size=domain.dim, max_size=domain.dim).map(lambda r: np.array(r, dtype=float))
    raise ParameterError(
        f"domain={domain!r} is not a dpharness Domain; pass Finite, IntegerRange, RealInterval or RealBox."
    )


def _record_strategy(records: Any) -> st.SearchStrategy:
    if isinstance(records, Domain):
        return records_from_domain(records)
    if isinstance(records, st.SearchStrategy):
        return records
    raise ParameterError(
        f"records={records!r} is neither a hypothesis strategy nor a Domain; pass e.g. IntegerRange(0, 9) "
        "or hypothesis.strategies.integers(0, 9)."
    )


def _as_dataset(rows: list) -> np.ndarray:
    if rows and np.ndim(rows[0]) > 0:
        return np.array(rows, dtype=float).reshape(len(rows), -1)
    return np.array(rows)


def _same(a: Any, b: Any) -> bool:
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def neighboring_records(records: Any) -> st.SearchStrategy:
    """Two different single records (the neighbours of a local-DP mechanism's input)."""
    rec = _record_strategy(records)
    return st.tuples(rec, rec).filter(lambda p: not _same(p[0], p[1]))


@st.composite
def _add_remove(draw: st.DrawFn, rec: st.SearchStrategy, min_size: int, max_size: int) -> tuple[np.ndarray, np.ndarray]:
    base = draw(st.lists(rec, min_size=min_size, max_size=max_size))
    extra = draw(rec)
    pos = draw(st.integers(0, len(base)))
    bigger = base[:pos] + [extra] + base[pos:]
    small, big = _as_dataset(base), _as_dataset(bigger)
    if small.size == 0 and big.ndim > 1:
        small = np.empty((0, big.shape[1]), dtype=big.dtype)
    elif small.size == 0:
        small = np.empty((0,), dtype=big.dtype)
    return (big, small) if draw(st.booleans()) else (small, big)


@st.composite
def _substitute(draw: st.DrawFn, rec: st.SearchStrategy, min_size: int, max_size: int) -> tuple[np.ndarray, np.ndarray]:
    base = draw(st.lists(rec, min_size=max(min_size, 1), max_size=max(max_size, 1)))
    i = draw(st.integers(0, len(base) - 1))
    new = draw(rec.filter(lambda r: not _same(r, base[i])))
    other = list(base)
    other[i] = new
    a, b = _as_dataset(base), _as_dataset(other)
    return (a, b) if draw(st.booleans()) else (b, a)


@st.composite
def _bounded_change(
    draw: st.DrawFn,
    rec: st.SearchStrategy,
    relation: BoundedChange,
    dim: int,
    integral: bool,
    contains: Callable[[Any], bool],
) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([draw(rec) for _ in range(dim)])
    sens = float(relation.sensitivity)
    if integral:
        budget = int(math.floor(sens + 1e-12))
        if budget < 1:
            raise ParameterError(
                f"sensitivity={relation.sensitivity!r} is below 1 for integer records; "
                "no two different integer vectors are neighbours."
            )
        # an integer change of norm <= budget: spend the budget coordinate by coordinate
        d = np.zeros(dim, dtype=np.int64)
        if relation.norm == "linf":
            for j in range(dim):
                d[j] = draw(st.integers(-budget, budget))
        else:
            left = budget if relation.norm == "l1" else budget * budget
            for j in draw(st.permutations(range(dim))):
                cap = left if relation.norm == "l1" else int(math.isqrt(left))
                d[j] = draw(st.integers(-cap, cap))
                left -= abs(int(d[j])) if relation.norm == "l1" else int(d[j]) ** 2
        if not d.any():
            d[draw(st.integers(0, dim - 1))] = draw(st.sampled_from([-1, 1]))
        y = x.astype(np.int64) + d
    else:
        direction = np.array(
            draw(st.lists(st.floats(-1, 1, allow_nan=False, allow_subnormal=False), min_size=dim, max_size=dim))
        )
        if not np.any(np.abs(direction) > 1e-3):
            direction[draw(st.integers(0, dim - 1))] = 1.0
        norm = {
            "l1": np.abs(direction).sum(),
            "l2": math.sqrt(float((direction**2).sum())),
            "linf": np.abs(direction).max(),
        }[relation.norm]
        t = draw(st.floats(1e-3, 1.0, allow_nan=False))
        y = x + direction / norm * (t * sens * (1 - _MARGIN))
    if not contains(y):
        y = x - (y - x)  # reflect back into a bounded domain
    return (x, y) if draw(st.booleans()) else (y, x)


def neighboring_datasets(
    records: Any = None,
    relation: Relation | None = None,
    *,
    shape: str | None = None,
    min_size: int = 0,
    max_size: int = 8,
    dim: int = 1,
) -> st.SearchStrategy:
    """A strategy for neighbouring pairs ``(data, neighbor)`` under ``relation`` (see the module docstring).

    ``records``: record strategy or Domain; ``shape``: ``"dataset"`` (default for AddRemove/Substitute),
    ``"record"`` (Substitute only: two single records) or ``"vector"`` (default for BoundedChange);
    ``min_size``/``max_size``: data-set sizes; ``dim``: vector length for BoundedChange."""
    if relation is None or not isinstance(relation, Relation):
        raise ParameterError(
            f"relation={relation!r} is not a neighbour relation; pass AddRemove(), Substitute() "
            "or BoundedChange(sensitivity, norm)."
        )
    if records is None:
        raise ParameterError("records=None; pass a Domain (e.g. IntegerRange(0, 9)) or a hypothesis strategy.")
    min_size = _v.integer("min_size", min_size, minimum=0)
    max_size = _v.integer("max_size", max_size, minimum=min_size)
    dim = _v.integer("dim", dim, minimum=1)
    if shape is None:
        shape = "vector" if isinstance(relation, BoundedChange) else "dataset"
    _v.choice("shape", shape, ("record", "dataset", "vector"))
    if isinstance(relation, BoundedChange) != (shape == "vector"):
        raise ParameterError(
            f"shape={shape!r} does not fit relation={relation!r}; BoundedChange goes with "
            "shape='vector', AddRemove/Substitute with 'dataset' (or 'record')."
        )
    rec = _record_strategy(records)
    if shape == "record":
        if not isinstance(relation, Substitute):
            raise ParameterError(f"relation={relation!r} does not fit shape='record'; pass Substitute().")
        return neighboring_records(rec)
    if isinstance(relation, AddRemove):
        return _add_remove(rec, min_size, max_size)
    if isinstance(relation, Substitute):
        if max_size < 1:
            raise ParameterError(f"max_size={max_size} leaves no record to substitute; pass max_size >= 1.")
        return _substitute(rec, min_size, max_size)
    if isinstance(relation, BoundedChange):
        domain = records if isinstance(records, Domain) else None
        integral = isinstance(domain, (IntegerRange,)) or (
            isinstance(domain, Finite) and all(isinstance(v, (int, np.integer)) for v in domain.values)
        )
        if isinstance(domain, Finite):
            raise ParameterError(
                "records=Finite(...) with BoundedChange is not supported; pass IntegerRange or RealInterval."
            )

        def contains(y: Any, _d: Domain | None = domain) -> bool:
            return True if _d is None else bool(np.all(_d.contains(y)))

        pairs = _bounded_change(rec, relation, dim, integral, contains)
        return pairs.filter(lambda p: relation.is_neighbour(p[0], p[1]) and contains(p[0]) and contains(p[1]))
    raise ParameterError(f"relation={relation!r} is not supported; pass AddRemove(), Substitute() or BoundedChange().")


def mechanism_inputs(mechanism: Any, **kwargs: Any) -> st.SearchStrategy:
    """Neighbouring pairs for ``mechanism`` read from its ``input_spec`` (domain, relation, shape, dim, size)."""
    spec = mechanism.input_spec
    if spec.shape == "vector":
        kwargs.setdefault("dim", spec.dim or 1)
    if spec.shape == "dataset" and spec.size is not None:
        kwargs.setdefault("min_size", spec.size)
        kwargs.setdefault("max_size", spec.size)
    return neighboring_datasets(records=spec.domain, relation=spec.relation, shape=spec.shape, **kwargs)
