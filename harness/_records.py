"""One reader of records at the release boundary: a numpy array, a pandas frame or a Dask partition becomes
the float (or, for integer records, int64) array the mechanism's sampler reads, by one set of rules, so no
input type can take a path the others do not (STYLE 19).

* **Number columns** (every column that is not an identity or label column): dtypes bool, int, uint and
  float are accepted; an integer that a double cannot hold exactly (beyond 2**53 in magnitude) is
  refused (where the column's domain reaches beyond 2**53, every 64-bit integer or object column, by its
  dtype: refusing the one record would make one neighbour's release raise), as are complex, timedelta,
  datetime, string and object dtypes, on every input type, by dtype
  (or, for an object column, by the type of what it holds), and never with a value in the message. A
  missing value (NaN, None, ``pd.NA``) in a number column is outside every record domain and refused.
  Integer records (``IntegerRange``) read a float column's whole numbers as the integers; a fraction, NaN
  or ±inf there is outside the domain and refused (count and first position, no value), never truncated.
* **Identity columns**: the user column of ``dp.bound_contributions`` and the key column of a
  ``dp.group_by(keys=None)``. Their values are compared exactly whatever their type: integers at any
  size, strings, UUIDs, categoricals, datetimes and timedeltas (as pandas Timestamps and Timedeltas,
  whether the column is a datetime64 dtype or holds them as objects), any hashable value; never through
  a double. Values are normalised
  once (:func:`normalise`): numpy scalars become Python values, ``-0.0`` is ``0.0``, ``True`` is ``1.0``,
  every number is read by its value whatever its type (``Decimal("1")`` and ``1+0j`` are ``1.0``, a
  ``Decimal`` that no double holds is its exact Fraction, a complex number with an imaginary part is
  itself), a whole number a double holds exactly is that double, and every missing value (None, NaN,
  NaT, ``pd.NA``, a ``Decimal`` NaN, signalling or not) is the one value None; inside a tuple (a named
  tuple is its tuple) or frozenset each element likewise; a datetime or duration is a pandas Timestamp
  (in UTC when it has a time zone) or Timedelta at the finest unit that holds it; a str or bytes subclass
  is its str or bytes. So equal values have one form, whichever the data holds first. Values that are not
  hashable (lists, arrays) are outside an identity column's domain: refused naming the column. The sampler sees each distinct value as a stand-in number inside the
  column's declared bounds (the value itself when every value present is a double inside them;
  otherwise evenly spaced stand-ins in the values' sorted order), and the release names the normalised
  values again. The law of contribution bounding and of a group-by depends on those columns only
  through which records share a value and the values' order (the order in which users and keys draw),
  so the release on the stand-ins is the release on the data: the proof, about data sets in the
  declared domain, covers it. A user id that is missing is refused (records without an owner cannot be
  bounded per user); a missing key is the key None, a key like any other. Integer records
  (``IntegerRange``) hold integers only, so their key column is a number column: the keys are the
  integers present, each a record of the domain.
* **Label columns** (the key column of a ``dp.group_by`` with declared label keys): each record carries
  its label's position in the keys; a label that is not a key (and a missing value, unless None is a
  key, and a value that is not hashable) is carried as a number inside the declared bounds that is no
  position, so it is dropped like a number outside declared numeric keys: no label in the data can make
  a release raise.
"""

from __future__ import annotations

import datetime
import decimal
import numbers
from dataclasses import dataclass, field
import math
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from ._validate import beyond_doubles, not_extended, not_masked
from .errors import ParameterError

_EXACT = 2**53  # integers of at most this magnitude are doubles exactly


class _Missing:
    """The one missing value (None, NaN, NaT and pd.NA all read as it); one object in every process: it
    pickles as a reference to :data:`MISSING` (a Dask worker's distinct values reach the client pickled)."""

    def __repr__(self) -> str:
        return "None"

    def __reduce__(self) -> str:
        return "MISSING"


MISSING = _Missing()


def _is_missing(v: Any) -> bool:
    if v is None or v is MISSING:
        return True
    if isinstance(v, (float, np.floating)):
        return bool(v != v)
    if isinstance(v, decimal.Decimal):
        return v.is_nan()  # NaN and the signalling sNaN (which pandas' own check cannot compare)
    if isinstance(v, (complex, np.complexfloating)):
        return bool(v.real != v.real or v.imag != v.imag)
    if isinstance(v, (np.datetime64, np.timedelta64)):
        return bool(np.isnat(v))
    name = type(v).__name__
    return name in ("NAType", "NaTType")


def normalise(v: Any) -> Any:
    """One value of an identity or label column, normalised (see the module docstring): MISSING for
    every missing value; numbers as a double when one holds them exactly, else exactly (int, Fraction)."""
    if _is_missing(v):
        return MISSING
    if isinstance(v, (np.datetime64, np.timedelta64)):
        v = _pandas_time(v)  # as a datetime64 column reads it (.item() gives an int at ns: a number's identity)
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, tuple):  # a named tuple equals its plain tuple: (1, "a") is (1.0, "a"), (nan,) is (None,)
        return tuple(normalise(x) for x in v)
    if isinstance(v, frozenset):
        return frozenset(normalise(x) for x in v)
    if isinstance(v, (datetime.datetime, datetime.timedelta)):  # a pandas Timestamp or Timedelta is one too
        return _canonical_time(v)
    if isinstance(v, (str, bytes)) and type(v) not in (str, bytes):  # a subclass (a StrEnum) equals its str
        return str.__str__(v) if isinstance(v, str) else bytes(v)
    if isinstance(v, complex):  # a number like any other: 1+0j is 1.0 (it equals it), else itself, exactly
        return normalise(v.real) if v.imag == 0 else complex(v.real + 0.0, v.imag + 0.0)
    if isinstance(v, decimal.Decimal):  # not a numbers.Real, but a number: Decimal("1") is 1.0 (it equals it)
        return float(v) if v.is_infinite() else normalise(Fraction(v))
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, float):
        return v + 0.0  # -0.0 -> 0.0
    if isinstance(v, int):
        return v if abs(v) > _EXACT and _double(v) != v else float(v)
    if isinstance(v, numbers.Real):  # Fraction, Decimal: exact
        try:
            q = Fraction(v)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            return v
        f = _double(q)
        return f if f is not None and Fraction(f) == q else (int(q) if q.denominator == 1 else q)
    return v


def _double(q: int | Fraction) -> float | None:
    """``float(q)``, or None where no finite double is that close (``float`` raises OverflowError from
    about 2**1024 on: a user id 10**400 is an identity like any other, held exactly)."""
    try:
        return float(q)
    except OverflowError:
        return None


def _canonical_time(v: Any) -> Any:
    """A datetime or duration as the one value every equal one is: a pandas Timestamp (in UTC when it has a
    time zone: equal instants in two zones are equal) or Timedelta, at the finest unit of ns, us, ms, s that
    holds it (a Timestamp at "s" equals the one at "ns"), so the key a release names does not depend on
    which of several equal forms the data held first; a duration beyond pandas' range stays a timedelta."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - no pandas: Python's own values (equal ones print alike)
        return v.astimezone(datetime.timezone.utc) if getattr(v, "tzinfo", None) is not None else v
    try:
        t = pd.Timestamp(v) if isinstance(v, datetime.datetime) else pd.Timedelta(v)
    except (ValueError, OverflowError):  # beyond pandas' range (a timedelta over 292 years)
        return v
    if isinstance(t, pd.Timestamp) and t.tzinfo is not None:
        t = t.tz_convert("UTC")
    for unit in ("ns", "us", "ms", "s"):
        try:
            at = t.as_unit(unit)
        except (ValueError, OverflowError):
            continue
        if at == t:
            return at
    return t


def _pandas_time(v: Any) -> Any:
    """A numpy datetime64 or timedelta64 as a pandas Timestamp or Timedelta (what a datetime64 or timedelta64
    column holds), or, beyond pandas' range, as numpy's own Python value."""
    try:
        import pandas as pd

        return pd.Timestamp(v) if isinstance(v, np.datetime64) else pd.Timedelta(v)
    except Exception:  # noqa: BLE001 - no pandas, or out of its range
        return v


def _rank(v: Any) -> int:
    return 2 if v is MISSING else 0 if isinstance(v, (int, float, Fraction)) else 1


_ORDERED = (str, bytes, datetime.date, datetime.timedelta)  # their values of one type always compare


def _order(v: Any) -> tuple:
    """A total order of normalised values that depends on the values only: numbers by value, then labels by
    type name and then by value where every two values of the type compare (str, bytes, dates, durations,
    a pandas Timestamp by (has a time zone, its UTC time), a Period by (frequency, ordinal), a tuple by
    its elements' keys, a frozenset by its elements' sorted keys), else by repr; None last. (The values'
    own '<' was tried first, and repr for all on a TypeError: one record with a value that did not compare
    reordered the others; a frozenset's '<' is inclusion, not a total order.)"""
    rank = _rank(v)
    if rank != 1:
        return (rank, "", 0 if rank == 2 else v)
    name = type(v).__name__
    if isinstance(v, complex):
        return (1, name, (v.real, v.imag))
    if isinstance(v, tuple):
        return (1, name, tuple(_order(x) for x in v))
    if isinstance(v, frozenset):
        return (1, name, tuple(sorted(_order(x) for x in v)))
    if name == "Timestamp" and hasattr(v, "tz_localize"):  # UTC when zoned (normalise): (zoned, wall time)
        return (1, name, (v.tzinfo is not None, v.tz_localize(None) if v.tzinfo is not None else v))
    if name == "Period" and hasattr(v, "ordinal"):
        return (1, name, (str(v.freqstr), int(v.ordinal)))
    if isinstance(v, _ORDERED) and not (isinstance(v, datetime.datetime) and v.tzinfo is not None):
        return (1, name, v)
    return (1, name, repr(v))


def sort_values(values: Sequence) -> list:
    """Distinct normalised values in one order that depends on the values only (never on the order the data
    holds them, nor on which other values it holds): :func:`_order` (two classes of one name whose keys
    do not compare: by repr, never a raise)."""
    if all(type(v) is str for v in values):
        return sorted(values)
    try:
        return sorted(values, key=_order)
    except TypeError:
        return sorted(values, key=lambda v: (_rank(v), type(v).__module__, type(v).__qualname__, repr(v)))


# --------------------------------------------------------------------------- columns of the input


def _is_frame(data: Any) -> bool:
    return hasattr(data, "columns") and hasattr(data, "dtypes")


def columns_of(data: Any, columns: Sequence[str] | None, width: int, name: str) -> list[tuple[str, Any]]:
    """The input's columns in order, as (name, column): a frame's by ``columns`` (default all), an array's
    by position (a 1-D array is one column)."""
    if _is_frame(data):
        cols = list(data.columns) if columns is None else list(columns)
        missing = [c for c in cols if c not in data.columns]
        if missing:
            raise ParameterError(f"columns={cols!r}: {missing[0]!r} is not a column of {name}; pass its column names.")
        twice = [c for c in dict.fromkeys(cols) if list(data.columns).count(c) > 1]
        if twice:
            raise ParameterError(
                f"{twice[0]!r} names {list(data.columns).count(twice[0])} columns of {name}; rename them apart "
                "(or pick columns by name with columns=[...] after renaming)."
            )
        return [(repr(c), data[c]) for c in cols]
    if columns is not None:
        raise ParameterError(f"columns={list(columns)!r} names frame columns, but {name} is an array; leave it out.")
    not_masked(name, data)
    try:
        arr = np.asarray(data) if not isinstance(data, np.ndarray) else data
    except ValueError as exc:  # rows of different lengths (numpy refuses an inhomogeneous shape)
        raise ParameterError(
            f"{name} is not an array of records ({exc}); pass rows of one length, or a numpy array or frame."
        ) from None
    if arr.ndim == 0:
        raise ParameterError(f"{name} is a single value; pass an array of records.")
    if arr.ndim == 1 and width > 1 and arr.size == 0:
        arr = arr.reshape(0, width)
    if arr.ndim == 1:
        return [("0", arr)]
    if arr.ndim != 2:
        raise ParameterError(f"{name} has shape {arr.shape}; pass records as a 2-D array (n, {width}).")
    return [(str(j), arr[:, j]) for j in range(arr.shape[1])]


def _dtype(col: Any) -> Any:
    return col.dtype if hasattr(col, "dtype") else np.asarray(col).dtype


def _kind(col: Any) -> str:
    dtype = _dtype(col)
    kind = getattr(dtype, "kind", "O")
    if type(dtype).__name__ == "CategoricalDtype":
        return "category"
    return kind


def numbers_of(col: Any, column: str, name: str, integer: bool = False, beyond: bool = False) -> np.ndarray:
    """A number column as float64 (int64 for ``integer`` records), exactly, or refused by dtype. ``beyond``:
    the column's domain holds reals beyond 2**53 in magnitude (:func:`~dpharness._validate.beyond_doubles`), where a 64-bit integer or an
    object column could hold an integer no double holds: such dtypes are refused whatever the values (a
    refusal of the one record would make one neighbour's release raise)."""
    dtype = _dtype(col)
    kind = _kind(col)
    not_extended(name, col, column)
    fix = "encode it as numbers, group by it (dp.group_by keys), or leave it out with columns=[...]"
    if kind == "O":
        values = np.asarray(col, dtype=object)
        if any(isinstance(v, np.floating) and v.dtype.itemsize > 8 for v in values.tolist()):
            raise ParameterError(
                f"column {column} of {name} (dtype object) holds extended-precision floats (numpy.longdouble), "
                "which a double may not hold; convert them (float(v) if rounding is what you mean)."
            )
        if not all(isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating)) for v in values.tolist()):
            raise ParameterError(f"column {column} of {name} has dtype object holding non-numbers; {fix}.")
    if beyond and (kind == "O" or (not integer and kind in "iu" and getattr(dtype, "itemsize", 8) >= 8)):
        raise ParameterError(
            f"column {column} of {name} has dtype {dtype} and its domain holds reals beyond 2**53, where such a "
            "column could hold integers a double cannot hold exactly; convert it to floats (.astype(float): it "
            "rounds such integers, only if that is what you mean) or declare bounds within ±2**53."
        )
    if kind == "O":
        if any(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and abs(int(v)) > _EXACT for v in values):
            raise ParameterError(
                f"column {column} of {name} (dtype object) holds integers beyond 2**53, which a double cannot hold "
                "exactly; recode them (e.g. as ranks) or declare the column an identity (the user column)."
            )
        if integer and any(isinstance(v, (float, np.floating)) for v in values.tolist()):
            return _whole(values.astype(float), column, name)  # the ints are doubles exactly (checked above)
        return values.astype(np.int64 if integer else float)
    if kind not in "biuf":
        raise ParameterError(f"column {column} of {name} has dtype {dtype}, which records cannot hold; {fix}.")
    if hasattr(col, "isna") and bool(np.asarray(col.isna()).any()) and kind != "f":
        raise ParameterError(
            f"column {column} of {name} (dtype {dtype}) has missing values, which no record domain holds; "
            "drop or fill them before the release."
        )
    if hasattr(col, "to_numpy"):
        raw = col.to_numpy(dtype=float if kind == "f" else (np.int64 if kind in "bi" else np.uint64))
    else:
        raw = np.asarray(col)
    if kind in "iu":
        if raw.size and (int(raw.max()) > _EXACT or (kind == "i" and int(raw.min()) < -_EXACT)):
            if not integer or (kind == "u" and int(raw.max()) >= 2**63):
                raise ParameterError(
                    f"column {column} of {name} (dtype {dtype}) holds integers beyond 2**53, which a double cannot "
                    "hold exactly; recode them (e.g. as ranks), or, for user ids, make it the user column of "
                    "dp.bound_contributions (read exactly as an identity)."
                )
        return raw.astype(np.int64 if integer else float)
    if integer:
        return raw.astype(np.int64) if kind == "b" else _whole(raw.astype(float), column, name)
    return raw.astype(float)


def _whole(raw: np.ndarray, column: str, name: str) -> np.ndarray:
    """Floats read as integer records: int64 when every one is a whole number in int64's range; else
    refused (NaN, ±inf or a fraction is outside every integer domain: never truncated), with the count and
    the first position, never a value."""
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(raw) & (np.floor(raw) == raw) & (np.abs(raw) < 2.0**63))
    if bad.any():
        where = np.flatnonzero(bad)
        raise ParameterError(
            f"column {column} of {name} has {where.size} value(s) that are not integers (the first at index "
            f"{int(where[0])}), outside the domain of the mechanism's integer records; round or filter them "
            "before the release (a fraction is never truncated here)."
        )
    return raw.astype(np.int64)


def identities_of(col: Any, column: str, name: str, labels: bool = False) -> tuple[np.ndarray, Any]:
    """An identity or label column, exactly: (codes, values): ``values[codes[i]]`` is row i's value;
    ``values`` distinct: a list of normalised values in no particular order, or, for a number column, a
    sorted numpy array (float64 when every value is a double exactly, else int64) read by :func:`as_list`.
    ``labels``: a label column, where an unhashable value is :data:`UNHASHABLE` (dropped) and not refused."""
    kind = _kind(col)
    dtype = _dtype(col)
    not_extended(name, col, column)
    if kind == "c":
        raise ParameterError(
            f"column {column} of {name} has dtype {dtype}; convert it to strings or integers before the release."
        )
    if kind in "mM":  # datetimes and timedeltas: pandas Timestamps / Timedeltas, exact (NaT is the missing value)
        import pandas as pd

        series = col if hasattr(col, "to_numpy") else pd.Series(np.asarray(col))
        return _objects(series.to_numpy(dtype=object))
    if kind == "category":
        col = col.cat.remove_unused_categories()  # a category no row holds is not a value of the column
        codes = np.asarray(col.cat.codes, dtype=np.int64)
        cats = list(col.cat.categories)
        values = [normalise(v) for v in cats]
        if (codes < 0).any():  # a missing value of a categorical
            codes = np.where(codes < 0, len(values), codes)
            values.append(MISSING)
        return _merge_equal(codes, values)
    if kind in "biuf":
        if hasattr(col, "to_numpy") and not isinstance(dtype, np.dtype):  # a nullable pandas column
            if bool(np.asarray(col.isna()).any()):  # pd.NA: exact values and None, as objects
                return _objects(col.to_numpy(dtype=object, na_value=None))
            arr = col.to_numpy(dtype={"i": np.int64, "u": np.uint64, "b": bool}.get(kind, float))
        else:
            arr = col.to_numpy() if hasattr(col, "to_numpy") else np.asarray(col)
        if arr.dtype == object:  # a nullable pandas column with pd.NA
            return _objects(arr)
        kind = arr.dtype.kind  # a nullable integer column may come out as floats with NaN
        if kind == "f":
            arr = arr + 0.0  # -0.0 -> 0.0
        uniq, codes = sorted_distinct(arr)
        if kind == "f" and uniq.size and np.isnan(uniq[-1]):  # NaNs sort last: missing values, one value
            values = [MISSING if v != v else v for v in uniq.tolist()]
            return _merge_equal(codes, values)
        if kind in "fb" or (uniq.size and -_EXACT <= int(uniq[0]) and int(uniq[-1]) <= _EXACT):
            return codes, uniq.astype(float)  # doubles exactly, sorted and distinct: kept as an array
        if kind == "i":
            return codes, uniq.astype(np.int64)  # exact integers, sorted and distinct
        return _merge_equal(codes, [normalise(v) for v in uniq.tolist()])
    return _objects(col if hasattr(col, "to_numpy") else np.asarray(col, dtype=object), column, name, labels)


def sorted_distinct(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(arr, return_inverse=True)`` of a 1-D number array (the distinct values sorted, NaNs one
    value last; each element's code, int64), from one unstable argsort: a code is the rank of the element's
    value among the distinct values, so the result does not depend on how ties are ordered. Faster than
    ``np.unique``'s and pandas' hashing on millions of distinct values (a SIMD argsort, no hash table)."""
    arr = np.asarray(arr).reshape(-1)
    if not len(arr):
        return arr.copy(), np.zeros(0, dtype=np.int64)
    if arr.dtype.kind in "iu":  # integers in a short range (codes, small keys): counted, not sorted
        low, high = arr.min(), arr.max()
        if int(high) - int(low) <= max(len(arr), 2**16):
            wide = np.uint64 if arr.dtype.kind == "u" else np.int64  # no overflow below or above
            offset = (arr.astype(wide) - wide(low)).astype(np.int64)
            held = np.bincount(offset) > 0
            rank = np.cumsum(held) - 1
            return (np.flatnonzero(held).astype(wide) + wide(low)).astype(arr.dtype), rank[offset]
    order = sorting_order(arr)
    ordered = arr[order]
    new = np.empty(len(arr), dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    if arr.dtype.kind in "fc":  # NaN != NaN: every NaN after the first is the same value (sorted last)
        new[1:] &= ~(np.isnan(ordered[1:]) & np.isnan(ordered[:-1]))
    codes = np.empty(len(arr), dtype=np.int64)
    codes[order] = np.cumsum(new) - 1
    return ordered[new], codes


_PACKED_TIES = 16  # sorting_order falls back to an argsort when more than 1/this of the elements tie


def sorting_order(arr: np.ndarray) -> np.ndarray:
    """A permutation that sorts the 1-D number array ``arr`` (``arr[order]`` is ``np.sort(arr)``; equal
    values in any order, as ``np.argsort``'s default). Integers, and floats without NaN: each element's
    order-preserving 64-bit key (its value less the smallest, shifted right just enough) is packed above
    its index and the packed integers are sorted by numpy's SIMD sort, several times an argsort's speed;
    the runs of one shifted key that hold two unequal values are put in order by their full keys (a
    sort of those runs only; equal values, as user ids read more than once, tie in any order). Anything
    else, or too many such ties: ``np.argsort``."""
    return _ordered(arr)[0]


def _ordered(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`sorting_order`'s permutation, and the elements' order-preserving keys in that order when they
    were made on the way (None otherwise): :func:`sorted_with_order` reads the sorted values from them."""
    arr = np.asarray(arr).reshape(-1)
    n = len(arr)
    if n < 2 or n >= 2**32 or arr.dtype.kind not in "iuf" or arr.dtype.itemsize > 8:
        return np.argsort(arr), None
    if arr.dtype.kind == "f":
        bits = arr.astype(np.float64, copy=False).view(np.uint64)
        if np.isnan(arr).any():
            return np.argsort(arr), None  # NaNs sort last
        key = np.where(bits >> np.uint64(63) == 1, ~bits, bits | np.uint64(1 << 63))  # -0.0 just below 0.0
    elif arr.dtype.kind == "i":
        key = arr.astype(np.int64, copy=False).view(np.uint64) ^ np.uint64(1 << 63)
    else:
        key = arr.astype(np.uint64, copy=False)
    low = key.min()
    index_bits = (n - 1).bit_length()
    shift = max(0, (int(key.max()) - int(low)).bit_length() - (64 - index_bits))
    packed = key - low
    if shift:
        packed >>= np.uint64(shift)
    packed <<= np.uint64(index_bits)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    order = (packed & np.uint64((1 << index_bits) - 1)).astype(np.intp)
    if not shift:  # the keys themselves: equal only for equal values
        packed >>= np.uint64(index_bits)
        packed += low
        return order, packed
    packed >>= np.uint64(index_bits)
    top = packed  # each position's shifted key
    tie = top[1:] == top[:-1]
    if not tie.any():
        return order, None
    full = key[order]
    unequal = np.flatnonzero(tie & (full[1:] != full[:-1]))  # equal values tie in any order: no full key needed
    if not len(unequal):
        return order, full
    # the runs of one shifted key holding two unequal values, whole (top is sorted: a run is a search away)
    shared = np.unique(top[unequal])
    starts, stops = np.searchsorted(top, shared, "left"), np.searchsorted(top, shared, "right")
    if int((stops - starts).sum()) > n // _PACKED_TIES:
        return np.argsort(arr), None
    sizes = stops - starts
    at = np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))  # their positions
    run = np.repeat(np.arange(len(shared)), sizes)
    members = order[at]
    order[at] = members[np.lexsort((key[members], run))]
    full[at] = key[order[at]]
    return order, full


def sorted_with_order(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(arr[order], order)`` for :func:`sorting_order`'s ``order`` of an int64 or float64 array without
    NaN or -0.0 (equal values have one key: the sorted values read back from the sorted keys where the
    sort made them, bit for bit, with no gather of ``arr``)."""
    arr = np.asarray(arr).reshape(-1)
    order, keys = _ordered(arr)
    if keys is None or arr.dtype not in (np.int64, np.float64):
        return arr[order], order
    if arr.dtype == np.int64:
        keys ^= np.uint64(1 << 63)
        return keys.view(np.int64), order
    negative = keys >> np.uint64(63) == 0  # a negative double's key is its bits inverted
    keys ^= np.uint64(1 << 63)
    keys[negative] = ~(keys[negative] ^ np.uint64(1 << 63))
    return keys.view(np.float64), order


def sorted_unique(arr: np.ndarray) -> np.ndarray:
    """``np.unique(arr)`` of a 1-D number array (sorted, NaNs one value last) from ``np.sort``: numpy 2.4's
    ``np.unique`` hashes first and takes seconds on millions of distinct values, a SIMD sort milliseconds."""
    ordered = np.sort(np.asarray(arr).reshape(-1))
    if len(ordered) < 2:
        return ordered
    new = np.empty(len(ordered), dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    if ordered.dtype.kind in "fc":  # NaN != NaN: every NaN after the first is the same value (sorted last)
        new[1:] &= ~(np.isnan(ordered[1:]) & np.isnan(ordered[:-1]))
    return ordered[new]


def as_list(values: Any) -> list:
    """Distinct values as the list of their normalised values (a number array's elements as numbers)."""
    if isinstance(values, np.ndarray):
        return values.tolist() if values.dtype == float else [normalise(v) for v in values.tolist()]
    return list(values)


def merge_distinct(parts: list) -> Any:
    """The distinct values of several parts (partitions): one sorted array when every part is an array and
    those holding values have one dtype, else a list."""
    arrays = [p for p in parts if isinstance(p, np.ndarray)]
    held = [a for a in arrays if len(a)]  # an empty part's dtype says nothing (an empty int column is int64)
    if len(arrays) == len(parts) and len({a.dtype for a in held}) <= 1:
        return sorted_unique(np.concatenate(held)) if held else (arrays[0][:0] if arrays else [])
    return list(dict.fromkeys(v for p in parts for v in as_list(p)))


def identity_hash(values: Any) -> np.ndarray:
    """A 64-bit hash of each distinct identity value (an array or list from :func:`identities_of`), the same
    in every process for values that normalise to one value (:func:`normalise`: 5 in an int64 column and
    5.0 in a float one), so equal identities read from different partitions hash alike. Different values
    may share a hash (only equal values must): a value of a type other than float, int and str hashes to
    0."""
    if isinstance(values, np.ndarray):
        if values.dtype.kind == "f":
            return (values.astype(np.float64) + 0.0).view(np.uint64)
        ints = values.astype(np.int64, copy=False)
        doubles = ints.astype(float)
        with np.errstate(invalid="ignore"):
            back = doubles.astype(np.int64)  # 2**63 (from ints near it) does not come back: kept an int
        # -2**63 is a double exactly (normalise reads it as one): hashed as that double, as in a list
        exact = back == ints
        exact &= doubles < 2.0**63
        out = ints.view(np.uint64).copy()
        np.copyto(out, doubles.view(np.uint64), where=exact)
        return out
    out = np.zeros(len(values), dtype=np.uint64)
    strings = [i for i, v in enumerate(values) if isinstance(v, str)]  # a str subclass equals its str
    if strings:
        import pandas as pd

        out[strings] = pd.util.hash_array(np.array([str(values[i]) for i in strings], dtype=object))
    for i, v in enumerate(values):
        if type(v) is float:
            out[i] = np.array([v + 0.0]).view(np.uint64)[0]
        elif type(v) is int:
            out[i] = v % 2**64
    return out


class _Unhashable:
    """The one label standing for every value of a label column that is not hashable: no key equals it, so
    its records are dropped like those of any label that is not a key. One object in every process, as
    :data:`MISSING`."""

    def __repr__(self) -> str:
        return "<unhashable>"

    def __reduce__(self) -> str:
        return "UNHASHABLE"


UNHASHABLE = _Unhashable()


def _objects(arr: Any, column: str = "?", name: str = "data", labels: bool = False) -> tuple[np.ndarray, list]:
    """Labels of any hashable type (an object array, or a pandas column read by pandas' own factorize). A
    value pandas cannot read (a signalling Decimal NaN, an unhashable value) sends the column through the
    same normalisation one value at a time; there an unhashable value is :data:`UNHASHABLE` in a label
    column (``labels``), and refused in an identity column (its values are compared as hashable values)."""
    try:
        import pandas as pd

        raw_codes, uniq = pd.factorize(arr, use_na_sentinel=True)
    except Exception:  # noqa: BLE001 - no pandas, or a value pandas cannot hash or compare: one at a time
        return _objects_one_by_one(arr, column, name, labels)
    codes = np.asarray(raw_codes, dtype=np.int64)
    values = np.asarray(uniq, dtype=object).tolist()
    if not all(type(v) is str for v in values):  # strings are their own normalised values
        values = [normalise(v) for v in values]
    if (codes < 0).any():
        codes = np.where(codes < 0, len(values), codes)
        values.append(MISSING)
    return _merge_equal(codes, values)


def _objects_one_by_one(arr: Any, column: str, name: str, labels: bool) -> tuple[np.ndarray, list]:
    index: dict = {}
    items = arr.tolist() if hasattr(arr, "tolist") else list(arr)
    codes = np.empty(len(items), dtype=np.int64)
    for i, v in enumerate(items):
        value = normalise(v)
        try:
            codes[i] = index.setdefault(value, len(index))
        except TypeError:  # not hashable (or its equality is not a truth value)
            if not labels:
                raise ParameterError(
                    f"column {column} of {name} holds values that are not hashable; a user or key column's values "
                    "are compared exactly as hashable values: convert them (e.g. lists to tuples or strings) "
                    "before the release."
                ) from None
            codes[i] = index.setdefault(UNHASHABLE, len(index))
    return codes, list(index)


def _merge_equal(codes: np.ndarray, values: list) -> tuple[np.ndarray, list]:
    """Codes of values that normalise to one value (1 and True, 0.0 and -0.0) made one code."""
    index: dict = {}
    remap = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        remap[i] = index.setdefault(v, len(index))
    if len(index) == len(values):
        return codes, values
    return remap[codes], list(index)


# --------------------------------------------------------------------------- stand-ins


def stand_ins(values: list, lo: Fraction, hi: Fraction) -> np.ndarray:
    """Strictly increasing doubles in [lo, hi], one per value of ``values`` (sorted, distinct): the values
    themselves when each is a double in [lo, hi], else evenly spaced between lo and hi, or, where those
    round to equal doubles (narrow bounds), evenly spaced among the doubles of [lo, hi] (their ordinals):
    distinct for as many values as [lo, hi] holds doubles, at least :data:`MIN_IDENTITY_DOUBLES` for every
    identity column :func:`reader` accepts."""
    if all(isinstance(v, float) and math.isfinite(v) and lo <= Fraction(v) <= hi for v in values):
        return np.array(values, dtype=float)
    k = len(values)
    flo, fhi = float(lo), float(hi)
    if k == 1:
        out = np.array([flo / 2 + fhi / 2])
    else:
        t = np.arange(k) / (k - 1)
        out = flo * (1 - t) + fhi * t  # no overflow for bounds near the largest double
    out = np.clip(out, flo, fhi)
    if k > 1 and not np.all(out[1:] > out[:-1]):
        out = _spread_doubles(k, lo, hi)
    return out


MIN_IDENTITY_DOUBLES = 2**48  # doubles an identity column's bounds hold at least (more than any data set's ids)


def _ordinal(x: float) -> int:
    """The position of the double ``x`` among the doubles (0.0 and -0.0 at 0; consecutive doubles differ
    by 1)."""
    bits = int(np.array([x + 0.0]).view(np.int64)[0])
    return bits if bits >= 0 else -(bits & (2**63 - 1))


def _double_room(lo: Fraction, hi: Fraction) -> tuple[int, int]:
    """The ordinals of the least and the greatest double in [lo, hi] (bounds that hold a double)."""
    flo, fhi = float(lo), float(hi)
    if Fraction(flo) < lo:
        flo = math.nextafter(flo, math.inf)
    if Fraction(fhi) > hi:
        fhi = math.nextafter(fhi, -math.inf)
    return _ordinal(flo), _ordinal(fhi)


def _spread_doubles(k: int, lo: Fraction, hi: Fraction) -> np.ndarray:
    """``k`` >= 2 strictly increasing doubles in [lo, hi], evenly spaced by ordinal; ParameterError when
    [lo, hi] holds fewer than ``k`` doubles (never for an identity column :func:`reader` accepted: it
    holds more doubles than a process holds identities)."""
    first, last = _double_room(lo, hi)
    span = last - first
    if span < k - 1:
        raise ParameterError(
            f"the records' bounds [{float(lo)!r}, {float(hi)!r}] hold too few doubles for {k} distinct "
            "identities; declare wider bounds for the user or key column."
        )
    q, r = divmod(span, k - 1)
    i = np.arange(k, dtype=np.uint64)
    offset = i * np.uint64(q) + (i * np.uint64(r)) // np.uint64(k - 1)  # floor(i·span/(k−1)) <= span < 2**64
    ordinal = ((np.uint64(first + 2**63) + offset) ^ np.uint64(2**63)).view(np.int64)
    bits = np.where(ordinal >= 0, ordinal, np.int64(-(2**63)) | -ordinal)
    return bits.view(np.float64)


def check_identity_room(j: int, lo: Fraction, hi: Fraction, role: str) -> None:
    """An identity column's bounds hold at least :data:`MIN_IDENTITY_DOUBLES` doubles, or ParameterError from
    the structure alone (before any record is read): the stand-ins of its distinct values are distinct
    doubles in them, so narrower bounds would make the release raise on data with more distinct values
    than they hold (a raise on one neighbour only)."""
    first, last = _double_room(lo, hi)
    if last - first + 1 < MIN_IDENTITY_DOUBLES:
        raise ParameterError(
            f"records bounds [{float(lo)!r}, {float(hi)!r}] hold {max(last - first + 1, 0)} doubles, fewer than "
            f"2**48: column {j} (the {role} column) is read as identities that stand in as distinct doubles in "
            "those bounds, so data with more distinct values would make the release raise; declare wider "
            "bounds (e.g. RealBox(0, 1, ...) holds 2**62 doubles)."
        )


def outside(keys: Sequence[float], lo: Fraction, hi: Fraction, integer: bool = False) -> float:
    """A double in [lo, hi] that is none of ``keys``: records carrying it belong to no declared key. For
    ``integer`` records (which hold integers only: a fraction would be truncated to a key) an integer."""
    taken = {float(k) for k in keys}
    flo, fhi = float(lo), float(hi)
    if integer:
        for whole in (-1, len(keys), math.ceil(lo), math.floor(hi)):
            if lo <= whole <= hi and float(whole) not in taken:
                return float(whole)
        raise ParameterError(
            f"the integer records' bounds [{flo:g}, {fhi:g}] hold no integer that is not a key's position, so "
            "a label that is not a key could not be dropped; widen the bounds (hi >= the number of keys)."
        )
    for c in (-0.5, len(keys) - 0.5, 0.5, flo, fhi, flo / 2 + fhi / 2):
        if lo <= Fraction(c) <= hi and c not in taken:
            return float(c)
    ordered = sorted(taken | {flo, fhi})
    for a, b in zip(ordered, ordered[1:]):
        mid = a / 2 + b / 2
        if a < mid < b and mid not in taken:
            return mid
    raise ParameterError("the key column's bounds hold no number that is not a key; widen the records' bounds.")


# --------------------------------------------------------------------------- the roles of the columns


@dataclass
class Identity:
    """An identity column: its distinct normalised values in order and their stand-ins."""

    column: int
    role: str  # "user" or "key"
    values: Any = field(default_factory=list)  # a list, or a sorted array (see identities_of)
    numbers: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def fix(self, values: Any, lo: Fraction, hi: Fraction) -> None:
        if isinstance(values, np.ndarray):  # sorted and distinct already
            self.values = values
            inside = values.dtype == float and (
                not len(values)
                or (np.isfinite(values[[0, -1]]).all() and lo <= Fraction(values[0]) <= Fraction(values[-1]) <= hi)
            )
            self.numbers = values if inside else stand_ins([None] * len(values), lo, hi)
            return
        self.values = sort_values(values)
        self.numbers = stand_ins(self.values, lo, hi) if self.values else np.zeros(0)

    def lookup(self, values: Any) -> np.ndarray:
        """The stand-ins of ``values`` (a part's distinct values, all among this column's)."""
        return self.numbers[self.positions(values)] if len(values) else np.zeros(0)

    def positions(self, values: Any) -> np.ndarray:
        """The positions of ``values`` (a part's distinct values, all among this column's) in its values."""
        if isinstance(self.values, np.ndarray) and isinstance(values, np.ndarray) and values.dtype == self.values.dtype:
            return np.searchsorted(self.values, values)
        at = {v: i for i, v in enumerate(as_list(self.values))}
        return np.array([at[v] for v in as_list(values)], dtype=np.int64)


@dataclass
class Reader:
    """How each column of one mechanism's input is read (see the module docstring)."""

    width: int
    lo: tuple
    hi: tuple
    integer: bool = False
    identities: dict = field(default_factory=dict)  # column -> Identity
    labels: dict = field(default_factory=dict)  # column -> (positions by normalised label, the drop number)

    def distinct(self, data: Any, columns: Sequence[str] | None, name: str, only: Any = None) -> dict:
        """Column -> the distinct values of each identity column of ``data`` (see :func:`identities_of`;
        ``only``: those columns)."""
        cols = columns_of(data, columns, self.width, name)
        self._check_width(cols, name)
        wanted = self.identities if only is None else only
        return {j: _used(*identities_of(cols[j][1], cols[j][0], name)) for j in wanted}

    def fix(self, found: dict) -> None:
        """The identity columns' values over the whole input (merged from every partition): the columns
        of ``found``."""
        for j, ident in self.identities.items():
            if j not in found:
                continue
            values = found[j]
            if ident.role == "user":
                refuse_missing_users(j, values)
            ident.fix(values, self.lo[j], self.hi[j])

    def read(
        self, data: Any, columns: Sequence[str] | None, name: str, fix: Any = False, found: dict | None = None
    ) -> np.ndarray:
        """The records the sampler reads (identity columns as their stand-ins, after :meth:`fix`; with
        ``fix`` True, the identities of ``data`` alone are fixed first, in the same pass; ``fix`` a set of
        columns: those only). ``found``: filled with each identity column's (codes, values); a column it
        holds already is read as those (codes, values), not from ``data``."""
        cols = columns_of(data, columns, self.width, name)
        n = len(cols[0][1]) if cols else 0
        found = {} if found is None else found
        for j in self.identities:
            if j < len(cols) and j not in found:
                found[j] = identities_of(cols[j][1], cols[j][0], name)
        if fix:
            fixed = found if fix is True else {j: found[j] for j in fix if j in found}
            self.fix({j: _used(codes, values) for j, (codes, values) in fixed.items()})
        read = [self._column(j, column, col, found, name) for j, (column, col) in enumerate(cols)]
        self._check_width(cols, name)
        out = np.empty((n, len(cols)), dtype=np.int64 if self.integer else float)
        for j, values in enumerate(read):
            out[:, j] = values
        return out[:, 0] if out.shape[1] == 1 and self.width == 1 else out

    def column(self, data: Any, j: int, name: str) -> np.ndarray:
        """Column ``j`` of ``data`` (its columns in the records' order) as :meth:`read` reads it: a label or
        number column, or an identity column after :meth:`fix`."""
        cols = columns_of(data, None, self.width, name)
        self._check_width(cols, name)
        found = {j: identities_of(cols[j][1], cols[j][0], name)} if j in self.identities else {}
        return self._column(j, *cols[j], found, name)

    def _column(self, j: int, column: str, col: Any, found: dict, name: str) -> np.ndarray:
        n = len(col)
        if j in self.identities:
            codes, values = found[j]
            return self.identities[j].lookup(values)[codes] if n else np.zeros(0)
        if j in self.labels:
            positions, drop = self.labels[j]
            codes, values = identities_of(col, column, name, labels=True)
            lookup = np.array([positions.get(v, drop) for v in values], dtype=float)
            return lookup[codes] if n else np.zeros(0)
        return numbers_of(col, column, name, self.integer, beyond_doubles(self.lo[j], self.hi[j]))

    def _check_width(self, cols: list, name: str) -> None:
        if len(cols) != self.width:
            raise ParameterError(
                f"{name} has {len(cols)} column(s) but the mechanism's records have {self.width}; pass "
                f"{self.width} columns (columns=[...] picks them from a frame)."
            )


def refuse_missing_users(j: int, values: Any) -> None:
    """A user column's distinct values (:func:`identities_of`) hold no missing id, or ParameterError."""
    if not isinstance(values, np.ndarray) and any(v is MISSING for v in values):
        raise ParameterError(
            f"column {j} (the user column) has missing user ids; records without an owner cannot be "
            "bounded per user: drop them or give them ids before the release."
        )


def _used(codes: np.ndarray, values: Any) -> Any:
    """The values some row holds."""
    if isinstance(values, np.ndarray):
        return values  # from np.unique: every value is held
    return [values[c] for c in np.flatnonzero(np.bincount(codes, minlength=len(values))).tolist()] if len(codes) else []


def reader(m: Any) -> Reader:
    """The reader of ``m``'s input: identity, label and number columns from its structure alone."""
    from .core import IntegerRange
    from .mechanisms.parts import PartsMechanism
    from .mechanisms.parts.combinators import Parallel
    from .mechanisms.parts.grouping import BoundContributions, GroupBy, discovered_head

    space = m.space
    width = space.dim
    r = Reader(width, tuple(space.lo), tuple(space.hi), integer=isinstance(m.records, IntegerRange))
    if not isinstance(m, PartsMechanism):
        return r
    from .mechanisms.parts._base import walk_nodes

    nodes = walk_nodes(m.steps)
    group_bys = [n for n in nodes if type(n) is GroupBy]
    # a column some step reads as a value stays a number column (exact doubles): its stand-ins would move
    # with the other values present, so only a column read through equality and order is an identity
    for b in (n for n in nodes if type(n) is BoundContributions):
        if not any(reads_column(x.part, b.user) for x in group_bys):
            r.identities[b.user] = Identity(b.user, "user")
    g = discovered_head(m.steps)
    # integer records hold integers only: their keys are the integers present, read in the domain (stand-ins
    # for other values would be fractions, which the records truncate into other keys)
    if g is not None and not reads_column(g.part, g.by) and not r.integer:
        r.identities[g.by] = Identity(g.by, "key")
    for j, ident in r.identities.items():
        check_identity_room(j, space.lo[j], space.hi[j], ident.role)
    for n in nodes:
        if type(n) in (GroupBy, Parallel) and n.labelled and n.by not in r.identities:
            positions = {normalise(k): float(i) for i, k in enumerate(n.keys)}
            if n.by in r.labels and r.labels[n.by][0] != positions:
                from .errors import UnsupportedError

                raise UnsupportedError(f"column {n.by} is grouped with two different key lists; use one per column")
            drop = outside(range(len(n.keys)), space.lo[n.by], space.hi[n.by], r.integer)
            r.labels[n.by] = (positions, drop)
    return r


def reads_column(part: Any, j: int) -> bool:
    """Whether a group-by's per-key ``part`` may read column ``j`` of the records as a value (conservative:
    a clamp acts per column, ``column(i)`` keeps one column, ``count`` reads no value; any other step
    before a ``column`` may read every column)."""
    from .mechanisms.parts.grouping import simple_parts
    from .mechanisms.parts.transformations import Clamp, Column, Count

    if part is None:
        return False
    for pre, agg, _ in simple_parts(part):
        for step in pre:
            if type(step) is Column:
                if step.j == j:
                    return True
                break
            if type(step) is not Clamp:
                return True
        else:
            if type(agg) is not Count:
                return True
    return False
