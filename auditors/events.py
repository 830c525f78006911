"""Candidate events chosen on training samples: exact histograms for discrete outputs of any shape,
thresholds / intervals / atoms for continuous scalars, simple projections for float vectors.

Every proposer has the signature ``propose_*(train_a, train_b, *, max_events) -> list[Event]``:
``train_a`` are outputs on the data, ``train_b`` on the neighbour (first axis = samples). A proposer
only *suggests* events; the auditor ranks them on the same training samples and certifies the chosen
few on fresh samples, so nothing here needs to be (or is) statistically valid by itself.

Discrete outputs are compared through *keys*: the value itself for integer scalars, a 64-bit hash of
the row's bytes for vectors (RAPPOR bits, SVT answer patterns) and the object for hashable objects.
A hash collision merely merges two outcomes into one event, which is still a fixed set of outputs,
so certification stays sound.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from dpharness.core import Event, HalfLine
from dpharness.errors import MechanismError

__all__ = [
    "output_kind",
    "row_keys",
    "propose_discrete",
    "propose_thresholds",
    "propose_intervals",
    "propose_atoms",
    "propose_coordinates",
    "propose_projections",
    "propose_pattern_features",
    "set_event",
    "one_sided_events",
    "best_single_keys",
    "KeyMembership",
    "key_histogram",
    "histogram_counts",
    "pattern_codes",
    "distinct_outputs",
    "by_blocks",
]

_MAX_DISTINCT = 200_000  # outcomes seen in training beyond which the histogram keeps repeated ones only


# --------------------------------------------------------------------------- output kinds and keys


def output_kind(out: np.ndarray) -> str:
    """``"object"``, ``"discrete"`` (bool/int scalars), ``"discrete-vector"``, ``"float"`` or ``"float-vector"``."""
    arr = np.asarray(out)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        return "object"
    if np.issubdtype(arr.dtype, np.complexfloating):
        return "object"
    floating = np.issubdtype(arr.dtype, np.floating)
    if arr.ndim <= 1:
        return "float" if floating else "discrete"
    return "float-vector" if floating else "discrete-vector"


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (wrapping uint64 arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _as_u64(col: np.ndarray) -> np.ndarray:
    if np.issubdtype(col.dtype, np.floating):
        return (col.astype(np.float64) + 0.0).view(np.uint64)  # + 0.0 maps -0.0 to 0.0
    return col.astype(np.int64).view(np.uint64)


def row_keys(out: np.ndarray) -> np.ndarray:
    """One key per sample: int64 values for integer scalars, uint64 hashes of the row otherwise.

    Integer rows whose patterns fit in :data:`_MAX_CODES` codes (bit vectors, answer patterns) are
    hashed once per distinct pattern (:func:`pattern_codes`): the same keys, at the cost of packing."""
    arr = np.asarray(out)
    if arr.ndim <= 1:
        if np.issubdtype(arr.dtype, np.floating):
            return _as_u64(arr.reshape(-1))
        return arr.reshape(-1).astype(np.int64, copy=False)
    packed = cached(pattern_codes, arr)
    if packed is not None:
        code, table, _counts = packed
        return table[code]
    return _hash_rows(arr.reshape(len(arr), -1))


_MAX_CODES = 1 << 20  # integer row patterns are packed into codes when there are at most this many


def pattern_codes(out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Integer rows packed into one code each, ``sum_j (x_j - lo) * base^j`` (mixed radix, ``base``
    the rows' value range), when at most :data:`_MAX_CODES` codes exist: (code of each row, the
    :func:`row_keys` hash of each code's pattern — filled for the codes that occur —, rows per code).
    None for other outputs. The hash of a pattern is computed once, on the pattern itself, so
    ``table[code]`` is exactly the row's key."""
    arr = np.asarray(out)
    if arr.ndim <= 1 or not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool) or arr.size == 0:
        return None
    rows = arr.reshape(len(arr), -1)
    k = rows.shape[1]
    lo, hi = int(rows.min()), int(rows.max())
    base = hi - lo + 1
    if k > 40 or base**k > _MAX_CODES:
        return None
    code = np.zeros(len(rows), dtype=np.int64)
    for j in reversed(range(k)):
        code *= base
        code += rows[:, j]
        if lo:
            code -= lo
    counts = np.bincount(code, minlength=base**k)
    present = np.flatnonzero(counts)
    digits = np.empty((len(present), k), dtype=np.int64)
    rest = present.copy()
    for j in range(k):
        digits[:, j] = rest % base + lo
        rest //= base
    table = np.zeros(base**k, dtype=np.uint64)
    table[present] = _hash_rows(digits)
    return code, table, counts


def _hash_rows(rows: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = np.full(len(rows), np.uint64(rows.shape[1]) * _GOLD, dtype=np.uint64)
        for j in range(rows.shape[1]):
            h = _mix(h ^ (_as_u64(rows[:, j]) + np.uint64(j) * _GOLD))
    return h


_DISTINCT_SHARE = 4  # a chunk is read as distinct outputs with weights when it has at most 1/this as many
_DISTINCT_RANGE = 1 << 22  # integer (or grid) values spanning at most this many steps are counted by np.bincount
_PROBE = 4096  # outputs that suggest the grid of float outputs


def distinct_outputs(out) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct outputs of a chunk and how many rows hold each — ``(values, weights)`` with
    ``values`` of the chunk's dtype and trailing shape — when they are few (at most a quarter of the
    rows); None otherwise, or when finding them would cost a sort.

    An event is a set of outputs: whether a row is in it depends on that row alone, so its hits on
    the chunk are ``weights[event.contains(values)].sum()``, the same integer as on the rows. Found
    without sorting: integer scalars by ``np.bincount`` over their range; float scalars on a grid
    ``k·2^e`` (``e`` read from the lowest set bit of the first :data:`_PROBE` nonzero outputs, then
    checked exactly on every output; a chunk holding -0.0 is left alone, since ``k·2^e`` would give
    +0.0 back); integer vectors by their packed pattern codes (:func:`pattern_codes`)."""
    arr = np.asarray(out)
    n = len(arr)
    if n < 2 or arr.dtype == object:
        return None
    limit = n // _DISTINCT_SHARE
    if arr.ndim > 1:
        packed = cached(pattern_codes, arr)
        if packed is None:
            return None
        _code, _table, counts = packed
        present = np.flatnonzero(counts)
        if len(present) > limit:
            return None
        rows = arr.reshape(n, -1)
        k, lo = rows.shape[1], int(rows.min())
        base = int(rows.max()) - lo + 1
        digits = np.empty((len(present), k), dtype=np.int64)
        rest = present.copy()
        for j in range(k):
            digits[:, j] = rest % base + lo
            rest //= base
        return digits.astype(arr.dtype).reshape((len(present), *arr.shape[1:])), counts[present]
    flat = arr.reshape(-1)
    if np.issubdtype(flat.dtype, np.integer) or flat.dtype == bool:
        q, scale = flat.astype(np.int64, copy=False), None
    elif flat.dtype == np.float64:
        probe = flat[:_PROBE]
        probe = probe[probe != 0]
        if len(probe) == 0:
            return None
        from .floats import lowest_bit  # floats imports this module

        e = int(lowest_bit(probe).min())
        if not -1000 < e < 1000:
            return None
        scale = 2.0**e
        # the probe's span is a lower bound of the chunk's: a probe already spread over more grid steps
        # than are counted gives the chunk's answer (None) without scaling and scanning every output
        if not float(probe.max()) - float(probe.min()) <= _DISTINCT_RANGE * scale:
            return None
        s = flat * (1.0 / scale)  # exact: a power of two, far from overflow and underflow
        lo_f, hi_f = float(s.min()), float(s.max())
        if not (abs(lo_f) <= 2.0**52 and abs(hi_f) <= 2.0**52 and hi_f - lo_f <= _DISTINCT_RANGE):
            return None  # far apart, huge, or NaN
        q = s.astype(np.int64)
        if not np.array_equal(q, s):
            return None  # not all on the grid
        if lo_f <= 0 <= hi_f and np.any(np.signbit(flat[q == 0])):
            return None
    else:
        return None
    lo, hi = int(q.min()), int(q.max())
    if hi - lo > _DISTINCT_RANGE:
        return None
    counts = np.bincount(q - lo, minlength=hi - lo + 1)
    present = np.flatnonzero(counts)
    if len(present) > limit:
        return None
    values: np.ndarray = present + lo
    values = values.astype(flat.dtype) if scale is None else values.astype(np.float64) * scale
    return values, counts[present]


class _ObjectKeys:
    """Keys for object outputs: the objects themselves (arrays and lists become tuples)."""

    @staticmethod
    def keys(out) -> list:
        return [_hashable(o) for o in out]


def _hashable(o):
    """``o`` as a hashable key: an array or a list (nested ones too) as a tuple of its elements' keys."""
    if isinstance(o, np.ndarray):
        return tuple(_hashable(x) for x in o.ravel().tolist()) if o.dtype == object else tuple(o.ravel().tolist())
    if isinstance(o, list):
        return tuple(_hashable(x) for x in o)
    try:
        hash(o)
    except TypeError as exc:
        raise MechanismError(f"output {o!r:.60} is not hashable; return numbers, arrays or hashable objects.") from exc
    return o


def _show_key_value(kind: str, example) -> str:
    if kind == "object":
        return repr(example)
    arr = np.asarray(example)
    return repr(arr.item()) if arr.ndim == 0 else repr(arr.tolist())


# --------------------------------------------------------------------------- discrete histograms


def set_event(
    keys,
    *,
    object_kind: bool,
    label: str = "output",
    transform: Callable[[np.ndarray], np.ndarray] | None = None,
    shown: list | None = None,
) -> Event:
    """An event ``{outputs whose key is in keys}``; ``shown`` are example outcomes for the words."""
    shown = shown or []
    n = len(keys)
    if not shown:
        words = f"{label} is one specific value" if n == 1 else f"{label} in a set of {n} values"
    elif n == 1:
        words = f"{label} = {shown[0]}"
    elif n <= 6 and len(shown) == n:
        words = f"{label} in {{{', '.join(shown)}}}"
    else:
        words = f"{label} in a set of {n} values (e.g. {', '.join(shown[:4])}, ...)"
    contains: Callable[[Any], np.ndarray]
    if object_kind:
        keyset = frozenset(keys)

        def in_keyset(out, _s=keyset):
            return np.fromiter((k in _s for k in _ObjectKeys.keys(out)), dtype=bool, count=len(out))

        contains = in_keyset
    else:
        contains = KeyMembership(KeySet(keys), transform)
    return Event(contains, words)


class KeyMembership:
    """Membership in ``{outputs whose key — of ``transform(output)`` when a transform is given — is
    in keys}``, the set events of the histogram families. Being a set of keys, such an event is
    counted on a histogram of a chunk's keys (:func:`histogram_counts`)."""

    def __init__(self, keys: "KeySet", transform: Callable[[np.ndarray], np.ndarray] | None) -> None:
        self.keys, self.transform = keys, transform

    def __call__(self, out) -> np.ndarray:
        feats = out if self.transform is None else cached(self.transform, out)
        return member(cached(row_keys, feats), self.keys)


_SORT_GROUP = 12  # set events of one key function from which a chunk's keys are sorted for a histogram


def key_histogram(out, transform, *, allow_sort: bool = True) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct keys of ``row_keys(transform(out))`` (``out`` when no transform) and how many
    rows of ``out`` have each: packed row patterns or small-range integer keys by ``np.bincount``,
    other keys by ``np.unique`` (only with ``allow_sort``; otherwise None)."""
    feats = out if transform is None else cached(transform, out)
    arr = np.asarray(feats)
    if arr.ndim > 1:
        packed = cached(pattern_codes, arr)
        if packed is not None:
            _code, table, counts = packed
            present = np.flatnonzero(counts)
            return table[present], counts[present]
    keys = cached(row_keys, feats)
    if keys.size and keys.dtype == np.int64:
        lo, hi = int(keys.min()), int(keys.max())
        if hi - lo < max(2 * keys.size, 1 << 16):
            counts = np.bincount(keys - lo, minlength=hi - lo + 1)
            present = np.flatnonzero(counts)
            return present + lo, counts[present]
    if not allow_sort:
        return None
    return np.unique(keys, return_counts=True)


def histogram_counts(events, out) -> dict[int, int]:
    """Hits on ``out`` (one chunk of outputs) of the events among ``events`` that are sets of keys
    (:class:`KeyMembership`), their complements and half-lines of integer keys, read off one
    histogram of the chunk's keys per key function (shared by two or more such events; sorting the
    keys only for :data:`_SORT_GROUP` or more): {index in ``events``: hits}. Exactly the number of
    rows each event's membership function accepts; the other events are left to the caller."""
    groups: dict[int, tuple[Any, list]] = {}
    for i, ev in enumerate(events):
        f = getattr(ev, "contains", ev)
        inner = f.inside if isinstance(f, _Outside) else f
        if isinstance(inner, KeyMembership):
            t = inner.transform
        elif isinstance(f, _Beyond):
            t = f.transform
        else:
            continue
        groups.setdefault(id(t), (t, []))[1].append((i, f))
    hits: dict[int, int] = {}
    n = len(out)
    for transform, members in groups.values():
        if len(members) < 2 and not _large_set(members[0][1]):
            continue  # one event alone: testing its rows costs less than counting every key
        dense = _dense_counts(out, transform)
        if dense is not None:  # small-range integer keys: every event read off the counts by offset
            lo, per_key = dense
            left = []
            for i, f in members:
                if isinstance(f, _Beyond):
                    cut = f.bound - lo
                    part = per_key[: max(cut, 0)] if f.below else per_key[max(cut + 1, 0) :]
                    hits[i] = int(part.sum())
                    continue
                member = f.inside if isinstance(f, _Outside) else f
                assert isinstance(member, KeyMembership)  # grouped: a key set, its complement or a _Beyond
                inside = _dense_hits(member.keys, lo, per_key)
                if inside is None:
                    left.append((i, f))
                else:
                    hits[i] = n - inside if isinstance(f, _Outside) else inside
            if not left:
                continue
            members = left
        if len(members) < 2:
            continue  # a large set alone is worth counting by offset only
        hist = key_histogram(out, transform, allow_sort=len(members) >= _SORT_GROUP)
        if hist is None:
            continue
        uniq, counts = hist
        ascending = len(uniq) < 2 or bool(np.all(uniq[1:] > uniq[:-1]))
        for i, f in members:
            if isinstance(f, _Beyond):
                hits[i] = int(counts[uniq < f.bound].sum() if f.below else counts[uniq > f.bound].sum())
            elif isinstance(f, _Outside):
                assert isinstance(f.inside, KeyMembership)  # grouped: the complement of a key set
                hits[i] = n - _set_hits(f.inside.keys, uniq, counts, ascending)
            else:
                hits[i] = _set_hits(f.keys, uniq, counts, ascending)
    return hits


def range_counts(events, out) -> dict[int, tuple[int, int, int]]:
    """Hits on ``out`` (a 1-D float array) of the events among ``events`` that are half-lines
    (:class:`~dpharness.core.HalfLine` of a float bound) or intervals (:class:`_Interval`), read off
    the sorted outputs by binary search: {index in ``events``: (hits, first, end)}, the rows hit being
    those at sorted positions ``first`` to ``end`` (so two such events of the same positions on
    both sides of a pair have the same membership). Exactly the rows each membership accepts: NaN
    sorts last and no comparison accepts it; -0.0 and 0.0 compare equal wherever they sort. Other
    events, and other outputs, are left to the caller."""
    x = np.asarray(out)
    if x.ndim != 1 or x.dtype != np.float64:
        return {}
    found: list[tuple[int, float | None, float | None, bool]] = []  # (index, lo, hi, hi included)
    for i, ev in enumerate(events):
        f = getattr(ev, "contains", ev)
        if isinstance(f, _Interval) and type(f.lo) is float and type(f.hi) is float:
            found.append((i, f.lo, f.hi, False))  # lo <= x < hi
        elif isinstance(f, HalfLine) and type(f.t) is float:
            found.append((i, f.t, None, False) if f.above else (i, None, f.t, True))  # t <= x, or x <= t
    if not found:
        return {}
    s = cached(_sorted_floats, x)
    not_nan = int(np.searchsorted(s, np.nan, side="left"))  # NaN sorts last
    hits: dict[int, tuple[int, int, int]] = {}
    for i, lo, hi, closed in found:
        if (lo is not None and math.isnan(lo)) or (hi is not None and math.isnan(hi)):
            hits[i] = (0, 0, 0)  # a comparison with NaN accepts nothing
            continue
        first = 0 if lo is None else int(np.searchsorted(s, lo, side="left"))
        if hi is None:
            end = not_nan
        elif closed:
            end = min(int(np.searchsorted(s, hi, side="right")), not_nan)
        else:
            end = min(int(np.searchsorted(s, hi, side="left")), not_nan)
        end = max(end, first)
        hits[i] = (end - first, first, end)
    return hits


def _large_set(f) -> bool:
    """Whether a set event (or its complement) tests its rows by a lookup table or a hash, not by a
    few comparisons (then counting its keys by offset is cheaper)."""
    inner = f.inside if isinstance(f, _Outside) else f
    return isinstance(inner, KeyMembership) and inner.keys.mode in ("table", "hash")


def _dense_counts(out, transform) -> tuple[int, np.ndarray] | None:
    """``(lo, counts)`` with ``counts[j]`` the rows whose key (of ``transform(out)``) is ``lo + j``,
    for int64 keys of a small range (as :func:`key_histogram` counts them); None otherwise."""
    feats = out if transform is None else cached(transform, out)
    if np.ndim(feats) > 1:
        return None
    keys = cached(row_keys, feats)
    if keys.size and keys.dtype == np.int64:
        lo, hi = int(keys.min()), int(keys.max())
        if hi - lo < max(2 * keys.size, 1 << 16):
            if 0 <= lo <= hi - lo:  # counted from 0 (at most twice the range): no shifted copy of the keys
                return lo, np.bincount(keys, minlength=hi + 1)[lo:]
            return lo, np.bincount(keys - lo, minlength=hi - lo + 1)
    return None


def _dense_hits(keys: "KeySet", lo: int, per_key: np.ndarray) -> int | None:
    """Rows whose key is in ``keys``, from dense counts by key offset (None: keys not int64)."""
    k = keys.keys
    if k.dtype != np.int64:
        return None
    inside = k[(k >= lo) & (k < lo + len(per_key))]  # compared as Python ints: no wrap-around
    return int(per_key[inside - lo].sum())


def _set_hits(keys: "KeySet", uniq: np.ndarray, counts: np.ndarray, ascending: bool) -> int:
    """Rows whose key is in ``keys``, from the distinct keys ``uniq`` of a chunk and their ``counts``:
    a set much smaller than the histogram looks its keys up in it (``uniq`` ascending, same dtype),
    otherwise every distinct key is tested for membership in the set."""
    k = keys.keys
    if ascending and k.dtype == uniq.dtype and 8 * len(k) < len(uniq):
        pos = np.searchsorted(uniq, k)
        inside = pos < len(uniq)
        pos, k = pos[inside], k[inside]
        return int(counts[pos[uniq[pos] == k]].sum())
    return int(counts[keys(uniq)].sum())


_BLOCK = 1 << 16  # elements per block of an elementwise feature: its temporaries stay in the CPU's cache


def by_blocks(fn: Callable[..., np.ndarray], x, *args) -> np.ndarray:
    """``fn(x, *args)`` of an elementwise feature ``fn`` of the flattened ``x``, computed on blocks
    of :data:`_BLOCK` elements: the same values, without a chunk-sized temporary per operation
    (fresh memory for each, page faults and cache misses, cost more than the arithmetic)."""
    v = np.asarray(x).reshape(-1)
    if len(v) <= 2 * _BLOCK:
        return fn(v, *args)
    first = fn(v[:_BLOCK], *args)
    out = np.empty(len(v), dtype=first.dtype)
    out[:_BLOCK] = first
    for start in range(_BLOCK, len(v), _BLOCK):
        out[start : start + _BLOCK] = fn(v[start : start + _BLOCK], *args)
    return out


_CACHE: list[tuple] = []  # (function, argument, result): features of the current chunk, shared by events
_CACHE_SLOTS = 16


def _on_statistic(
    f: Callable[[np.ndarray], np.ndarray], contains: Callable[[np.ndarray], np.ndarray]
) -> Callable[[np.ndarray], np.ndarray]:
    """``contains`` read on the statistic ``f`` of the outputs (computed once per chunk, cached by identity)."""
    return lambda o: contains(cached(f, o))


def cached(fn: Callable, x):
    """``fn(x)`` remembered by the identity of ``x`` (many events of one chunk need the same keys/features)."""
    for f, arg, res in _CACHE:
        if f is fn and arg is x:
            return res
    res = fn(x)
    _CACHE.append((fn, x, res))
    if len(_CACHE) > _CACHE_SLOTS:
        del _CACHE[0]
    return res


def clear_cache() -> None:
    _CACHE.clear()
    _LAST_HISTOGRAM.clear()


def distinct_sorted(values) -> np.ndarray:
    """``np.unique(values)`` (the distinct values, ascending): an integer or bool array by one sort and a
    comparison of neighbours, any other by ``np.unique``. The same array; numpy 2's ``np.unique`` finds
    distinct integers by hashing first, about 100 times slower than sorting on 10^6 spread int64 or
    uint64 keys (0.7 s against 6 ms), which the proposers' key sets paid once per candidate event."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iub":
        return np.unique(arr)
    flat = np.sort(arr.reshape(-1))
    if len(flat) < 2:
        return flat
    new = np.empty(len(flat), dtype=bool)
    new[0] = True
    np.not_equal(flat[1:], flat[:-1], out=new[1:])
    return flat[new]


class KeySet:
    """Fast membership in a fixed set of integer keys (``np.isin`` without sorting the queries):
    comparisons for tiny sets, a lookup table when the keys span a small range, otherwise a
    multiplicative-hash bitmap that pre-filters a binary search."""

    def __init__(self, keys) -> None:
        s = distinct_sorted(keys)
        self.keys = s
        self.mode = "empty" if len(s) == 0 else "compare" if len(s) <= 4 else None
        if self.mode is None:
            lo, hi = int(s[0]), int(s[-1])
            if hi - lo <= max(1 << 20, 16 * len(s)):
                self.mode, self.lo, self.hi = "table", s[0], s[-1]
                self.table = np.zeros(hi - lo + 1, dtype=bool)
                self.table[(s - s[0]).astype(np.int64)] = True
            else:
                self.mode = "hash"
                self.bits = max(10, int(math.ceil(math.log2(8 * len(s)))))
                self.bitmap = np.zeros(1 << self.bits, dtype=bool)
                self.bitmap[self._hash(s)] = True

    def _hash(self, k: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return ((k.astype(np.uint64, copy=False) * _GOLD) >> np.uint64(64 - self.bits)).astype(np.int64)

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys)
        s = self.keys
        if self.mode == "empty":
            return np.zeros(len(keys), dtype=bool)
        if self.mode == "compare":
            hit = keys == s[0]
            for k in s[1:]:
                hit |= keys == k
            return hit
        out = np.zeros(len(keys), dtype=bool)
        if self.mode == "table":
            inside = np.flatnonzero((keys >= self.lo) & (keys <= self.hi))
            out[inside] = self.table[(keys[inside] - self.lo).astype(np.int64)]
            return out
        idx = np.flatnonzero(self.bitmap[self._hash(keys)])
        sub = keys[idx]
        pos = np.searchsorted(s, sub)
        pos[pos == len(s)] = 0
        out[idx] = s[pos] == sub
        return out


def member(keys: np.ndarray, key_set) -> np.ndarray:
    """``np.isin(keys, key_set)`` (see :class:`KeySet`)."""
    return (key_set if isinstance(key_set, KeySet) else KeySet(key_set))(keys)


_LAST_HISTOGRAM: list = []  # (keys_a, keys_b, object_kind, result) of the last call: a family's proposers share it


def _histogram(keys_a, keys_b, object_kind: bool):
    """Distinct keys with their counts on each side (the last call's result is reused when called
    again on the same two key arrays, as the proposers of one feature are)."""
    if _LAST_HISTOGRAM:
        la, lb, lk, res = _LAST_HISTOGRAM[0]
        if la is keys_a and lb is keys_b and lk == object_kind:
            return res
    res = _count_keys(keys_a, keys_b, object_kind)
    _LAST_HISTOGRAM[:] = [(keys_a, keys_b, object_kind, res)]
    return res


def _count_keys(keys_a, keys_b, object_kind: bool):
    if object_kind:
        counts: dict = {}
        for side, ks in ((0, keys_a), (1, keys_b)):
            for k in ks:
                c = counts.setdefault(k, [0, 0])
                c[side] += 1
        distinct = list(counts)
        ca = np.array([counts[k][0] for k in distinct], dtype=np.int64)
        cb = np.array([counts[k][1] for k in distinct], dtype=np.int64)
        return distinct, ca, cb
    keys_a, keys_b = np.asarray(keys_a), np.asarray(keys_b)
    if len(keys_a) and len(keys_b) and keys_a.dtype == keys_b.dtype and keys_a.dtype.kind in "iu":
        # the two sides counted apart (as on their concatenation, without building it)
        lo, hi = min(keys_a.min(), keys_b.min()), max(keys_a.max(), keys_b.max())
        span = int(hi) - int(lo)
        if span < max(4 * (len(keys_a) + len(keys_b)), 1 << 16):  # keys in a small range: count by offset
            ca = np.bincount((keys_a - lo).astype(np.int64, copy=False), minlength=span + 1)
            cb = np.bincount((keys_b - lo).astype(np.int64, copy=False), minlength=span + 1)
            seen = np.flatnonzero(ca + cb)
            return lo + seen.astype(keys_a.dtype), ca[seen].astype(np.int64), cb[seen].astype(np.int64)
    allk = np.concatenate([keys_a, keys_b])
    if allk.size and allk.dtype.kind in "iu":
        lo, hi = allk.min(), allk.max()
        span = int(hi) - int(lo)
        if span < max(4 * allk.size, 1 << 16):  # keys in a small range: count by offset, no sort
            off = (allk - lo).astype(np.int64)
            ca = np.bincount(off[: len(keys_a)], minlength=span + 1)
            cb = np.bincount(off[len(keys_a) :], minlength=span + 1)
            seen = np.flatnonzero(ca + cb)
            return lo + seen.astype(allk.dtype), ca[seen].astype(np.int64), cb[seen].astype(np.int64)
        # each side sorted on its own and the two sorted runs merged: the same distinct keys (ascending)
        # and counts as np.unique(allk, return_inverse=True), without sorting the pooled keys' indices
        ua, na = _sorted_counts(keys_a.astype(allk.dtype, copy=False))
        ub, nb = _sorted_counts(keys_b.astype(allk.dtype, copy=False))
        both = np.concatenate([ua, ub])
        both.sort(kind="stable")  # two sorted runs: a merge
        uniq, _n = _sorted_counts(both, presorted=True)
        ca = np.zeros(len(uniq), dtype=np.int64)
        cb = np.zeros(len(uniq), dtype=np.int64)
        ca[np.searchsorted(uniq, ua)] = na
        cb[np.searchsorted(uniq, ub)] = nb
        return uniq, ca, cb
    uniq, inv = np.unique(allk, return_inverse=True)
    ca = np.bincount(inv[: len(keys_a)], minlength=len(uniq)).astype(np.int64)
    cb = np.bincount(inv[len(keys_a) :], minlength=len(uniq)).astype(np.int64)
    return uniq, ca, cb


def _sorted_counts(keys: np.ndarray, *, presorted: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Distinct integer keys (ascending) and how many times each occurs: ``np.unique(keys,
    return_counts=True)`` (``presorted``: ``keys`` are sorted already)."""
    s = keys if presorted else np.sort(keys)
    if len(s) == 0:
        return s, np.zeros(0, dtype=np.int64)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    return s[starts], np.diff(np.append(starts, len(s))).astype(np.int64)


def _lr_sets(ca: np.ndarray, cb: np.ndarray, na: int, nb: int, max_events: int) -> list[np.ndarray]:
    """Index sets of outcomes: prefix sets of outcomes sorted by likelihood ratio (both ends) and single outcomes."""
    na, nb = max(na, 1), max(nb, 1)  # one side may have none of the outcomes (e.g. atoms of the other side)
    la = np.log((ca + 0.5) / na) - np.log((cb + 0.5) / nb)
    order = np.lexsort((-(ca + cb), -la))  # by ratio, ties: more mass first
    m = len(order)
    sizes = sorted(
        {j for j in list(range(1, min(m, 24) + 1)) + [int(round(1.5**i)) for i in range(1, 80)] if 1 <= j < m}
        | ({m - 1} if m > 1 else set())
    )
    sets: list[np.ndarray] = []
    for j in sizes:
        sets.append(order[:j])  # the outcomes most favouring the data
        sets.append(order[::-1][:j])  # the outcomes most favouring the neighbour
    # single outcomes with the most mass and an extreme ratio
    mass = (ca + cb).astype(float)
    single_score = np.abs(la) * np.sqrt(mass)
    for i in np.argsort(-single_score)[: max(1, max_events // 2)]:
        sets.append(np.array([i]))
    # deduplicate, keep order
    seen, out = set(), []
    for s in sets:
        key = tuple(sorted(s.tolist())) if len(s) < 64 else (len(s), int(s[0]), int(s[-1]), int(np.sum(s)))
        if key not in seen:
            seen.add(key)
            out.append(s)
    return _prefilter(out, ca, cb, na, nb, max_events)


def _prefilter(sets: list[np.ndarray], ca, cb, na, nb, max_events: int) -> list[np.ndarray]:
    """Keep the sets with the best quick score in either direction (the auditor ranks exactly later)."""
    if len(sets) <= max_events:
        return sets
    ka = np.array([ca[s].sum() for s in sets], dtype=float)
    kb = np.array([cb[s].sum() for s in sets], dtype=float)
    score = np.maximum(fast_score(ka, na, kb, nb), fast_score(kb, nb, ka, na))
    keep = np.argsort(-score, kind="stable")[:max_events]
    return [sets[i] for i in sorted(keep)]


def fast_score(k1, n1, k0, n0, z: float = 3.0) -> np.ndarray:
    """Cheap ranking proxy for ln(p1_lo / p0_hi) (Wilson-like bounds at z); not a certificate."""
    k1 = np.asarray(k1, dtype=float)
    k0 = np.asarray(k0, dtype=float)
    lo = np.maximum(k1 - z * np.sqrt(k1) - z * z / 2, 0.0) / n1
    hi = (k0 + z * np.sqrt(k0) + z * z) / n0
    with np.errstate(divide="ignore"):
        return np.where(lo > 0, np.log(np.maximum(lo, 1e-300)) - np.log(hi), -np.inf)


def _discrete_events(
    keys_a,
    keys_b,
    outs_a,
    outs_b,
    *,
    max_events: int,
    object_kind: bool,
    label: str,
    transform=None,
    describe=None,
    first_rows=None,
) -> list[Event]:
    """Likelihood-ratio histogram events over the keys of both sides (counted in any order).
    ``first_rows``: the ((keys, outputs) of each side) in which the words find the first output of a
    shown key, when not ``keys_a``/``outs_a`` and ``keys_b``/``outs_b`` themselves (rows in their
    original order that hold the same first row of each key)."""
    uniq, ca, cb = _histogram(keys_a, keys_b, object_kind)
    if len(uniq) == 0:
        return []
    if len(uniq) > _MAX_DISTINCT:
        keep = np.argsort(-(ca + cb), kind="stable")[:_MAX_DISTINCT]
        uniq = [uniq[i] for i in keep] if object_kind else uniq[keep]
        ca, cb = ca[keep], cb[keep]
    sets = _lr_sets(ca, cb, len(keys_a), len(keys_b), max_events)
    # representatives for the words, found only for the outcomes a description shows
    shown_keys = [[uniq[i] for i in st[:6].tolist()] if object_kind else uniq[st[:6]].tolist() for st in sets]
    rep: dict = {}
    if describe is None and not object_kind:
        rep = _first_outputs(
            distinct_sorted(np.concatenate([uniq[st[:6]] for st in sets])) if sets else uniq[:0],
            ((keys_a, outs_a), (keys_b, outs_b)) if first_rows is None else first_rows,
        )
    events = []
    for st, klist in zip(sets, shown_keys):
        ks = [uniq[i] for i in st.tolist()] if object_kind else uniq[st]
        if describe is not None:
            shown = [describe(k) for k in klist]
        elif object_kind:
            shown = [repr(k) for k in klist]
        else:
            shown = [rep.get(k, "?") for k in klist]
        events.append(set_event(ks, object_kind=object_kind, label=label, transform=transform, shown=shown))
    return events


def _first_outputs(wanted: np.ndarray, sides) -> dict:
    """{key: the words for the output of its first row}, for the integer keys in ``wanted``: the
    first row holding the key on the first side of ``sides`` ((keys, outputs) pairs) that has it.
    Each side is read in blocks of doubling size until every key still missing is found (frequent
    keys are found in the first rows)."""
    first: dict = {}
    missing = distinct_sorted(wanted)
    for side_keys, side_outs in sides:
        side_keys = np.asarray(side_keys)
        start, size = 0, 4096
        while len(missing) and start < len(side_keys):
            block = side_keys[start : start + size]
            rows = np.flatnonzero(KeySet(missing)(block))
            if len(rows):
                ks, idx = np.unique(block[rows], return_index=True)
                for k, i in zip(ks.tolist(), (start + rows[idx]).tolist()):
                    first[k] = _show_key_value("array", np.asarray(side_outs)[i])
                missing = missing[~np.isin(missing, ks)]
            start, size = start + size, 2 * size
    return first


def one_sided_events(
    keys_a,
    keys_b,
    *,
    object_kind: bool = False,
    label: str = "output",
    transform=None,
    describe=None,
    max_keys: int = 100_000,
    max_singles: int = 4,
) -> list[tuple[Event, bool]]:
    """Events ``{key in K_a}`` and ``{key in K_b}``, with ``K_a`` the keys seen on the data side only
    and ``K_b`` those seen on the neighbour side only (and the ``max_singles`` keys of each seen most
    often, one by one: the union may hold keys seen by chance on one side only), and
    ``{key not in S_b}``, ``{key not in S_a}`` with ``S_a``/``S_b`` all keys seen on each side; each
    with the side it favours (True: data).

    An output possible under one input and impossible under the other (a leak of infinite privacy
    loss) shows up as such keys however rare it is; these events collect them all at once. Sets of
    more than ``max_keys`` keys are left out (then the keys are mostly noise: continuous values)."""
    uniq, ca, cb = _histogram(keys_a, keys_b, object_kind)
    readable = describe is not None or object_kind or np.asarray(keys_a).dtype == np.int64
    out: list[tuple[Event, bool]] = []
    for mine, other, favours_a in ((ca, cb, True), (cb, ca, False)):
        idx = np.flatnonzero((mine > 0) & (other == 0))
        if len(idx) == 0 or len(idx) > max_keys or len(idx) == len(uniq):
            continue
        # the union, and the keys seen most often on their own (a chance key in the union dilutes it)
        idx = idx[np.argsort(-mine[idx], kind="stable")]
        # (smallest first: when two of them hold the same training outputs, ranking keeps the first)
        groups = [idx[j : j + 1] for j in range(min(max_singles, len(idx)))]
        groups += [idx[:j] for j in (2, 3) if j < len(idx)] + ([idx] if len(idx) > 1 else [])
        side = "data" if favours_a else "neighbor"
        for g in groups:
            ks = [uniq[i] for i in g.tolist()] if object_kind else uniq[g]
            klist = list(ks) if object_kind else np.asarray(ks).tolist()
            shown = [describe(k) if describe else repr(k) for k in klist[:6]] if readable else []
            ev = set_event(ks, object_kind=object_kind, label=label, transform=transform, shown=shown)
            out.append((Event(ev.contains, f"{ev.description} (seen in training on the {side} side only)"), favours_a))
    # outputs outside the other side's training support: also catches leaks into cells the
    # proposing half never saw (a rare leak may show first in the ranking half)
    for support, favours_a in ((cb, True), (ca, False)):
        idx = np.flatnonzero(support > 0)
        if len(idx) == 0 or len(idx) > max_keys:
            continue
        ks = [uniq[i] for i in idx.tolist()] if object_kind else uniq[idx]
        ev = set_event(ks, object_kind=object_kind, label=label, transform=transform)
        other = "neighbor" if favours_a else "data"
        words = f"{label} outside the {len(idx)} value(s) seen on the {other} side in training"
        out.append((Event(_Outside(ev.contains), words), favours_a))
        # ordered integer keys (lowest set bit, residues): beyond the other side's range, which a
        # chance new key of the other side's far tail leaves intact at the other end
        if not object_kind and np.asarray(keys_a).dtype == np.int64:
            lo, hi = int(uniq[idx[0]]), int(uniq[idx[-1]])
            for bound, below in ((lo, True), (hi, False)):
                end = describe(bound) if describe else str(bound)
                words = f"{label} {'below' if below else 'above'} {end}, the {'least' if below else 'greatest'} value seen on the {other} side in training"
                out.append((Event(_Beyond(bound, below, transform), words), favours_a))
    return out


class _Beyond:
    """``{key < bound}`` or ``{key > bound}`` for integer keys of (transformed) outputs."""

    def __init__(self, bound: int, below: bool, transform: Callable | None) -> None:
        self.bound, self.below, self.transform = bound, below, transform

    def __call__(self, out) -> np.ndarray:
        feats = out if self.transform is None else cached(self.transform, out)
        keys = cached(row_keys, feats)
        return keys < self.bound if self.below else keys > self.bound


class _Outside:
    """The complement of an event's membership function."""

    def __init__(self, inside: Callable) -> None:
        self.inside = inside

    def __call__(self, out) -> np.ndarray:
        return ~np.asarray(self.inside(out), dtype=bool)


def best_single_keys(
    keys_a, keys_b, *, max_events: int, label: str = "output", transform=None, describe=None
) -> list[Event]:
    """Events ``{key = k}`` for the keys whose two sides' training frequencies differ by the largest
    conservative ratio (:func:`fast_score`, either direction): a narrow cell with a moderate ratio
    and many hits, which likelihood-ratio prefix sets dilute with rare noisy keys."""
    uniq, ca, cb = _histogram(keys_a, keys_b, False)
    if len(uniq) < 2:
        return []
    na, nb = max(len(keys_a), 1), max(len(keys_b), 1)
    score = np.maximum(fast_score(ca, na, cb, nb), fast_score(cb, nb, ca, na))
    top = [i for i in np.argsort(-score, kind="stable")[:max_events] if np.isfinite(score[i])]
    return [
        set_event(
            uniq[[i]],
            object_kind=False,
            label=label,
            transform=transform,
            shown=[describe(uniq[i]) if describe else repr(uniq[i].item())],
        )
        for i in top
    ]


def propose_discrete(train_a, train_b, *, max_events: int) -> list[Event]:
    """Exact histogram of outcomes (integer scalars, integer vectors as row patterns, hashable
    objects); events are prefix sets of outcomes sorted by the likelihood ratio, and single outcomes."""
    kind = output_kind(train_a)
    if kind == "object":
        oa, ob = _ObjectKeys.keys(train_a), _ObjectKeys.keys(train_b)
        return _discrete_events(oa, ob, None, None, max_events=max_events, object_kind=True, label="output")
    ka, kb = row_keys(train_a), row_keys(train_b)
    label = "output" if np.asarray(train_a).ndim <= 1 else "output pattern"
    return _discrete_events(ka, kb, train_a, train_b, max_events=max_events, object_kind=False, label=label)


def propose_atoms(train_a, train_b, *, max_events: int) -> list[Event]:
    """Continuous outputs that repeat exactly (atoms, e.g. clamping bounds or a grid): histogram
    events over the repeated values only."""
    a = np.asarray(train_a, dtype=float).reshape(-1)
    b = np.asarray(train_b, dtype=float).reshape(-1)
    # atoms: the values seen at least twice in the pooled outputs (NaN never equals itself, so it is no
    # atom; -0.0 equals 0.0, as their keys do), read off the sorted outputs the thresholds share: a value
    # seen twice on its side or once on the other. The histogram counts keys in any order, so these are
    # its counts over the rows holding an atom (non-atoms fall out of every event); the words find each
    # shown key's first row in the outputs as drawn (the first row holding an atom's key holds an atom)
    sa, sb = cached(_sorted_floats, train_a), cached(_sorted_floats, train_b)
    atoms_a = sa[_repeats(sa) | _found_in(sa, sb)]
    atoms_b = sb[_repeats(sb) | _found_in(sb, sa)]
    if len(atoms_a) + len(atoms_b) == 0:
        return []
    return _discrete_events(
        row_keys(atoms_a),
        row_keys(atoms_b),
        atoms_a,
        atoms_b,
        max_events=max_events,
        object_kind=False,
        label="output",
        first_rows=((row_keys(a), a), (row_keys(b), b)),
    )


def _repeats(s: np.ndarray) -> np.ndarray:
    """Where a sorted float array holds a value it holds more than once (NaN never equals itself)."""
    out = np.zeros(len(s), dtype=bool)
    if len(s) > 1:
        same = s[1:] == s[:-1]
        out[1:] |= same
        out[:-1] |= same
    return out


def _found_in(s: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Where a sorted float array holds a value the sorted array ``other`` holds (NaN never equals itself)."""
    if len(other) == 0:
        return np.zeros(len(s), dtype=bool)
    pos = np.minimum(np.searchsorted(other, s), len(other) - 1)
    return other[pos] == s


# --------------------------------------------------------------------------- continuous scalars


def _sorted_floats(x) -> np.ndarray:
    """The outputs as a sorted 1-D float array (shared, read-only, by the scalar proposers of one pair):
    few distinct values on a grid (counts, sums of bits) are expanded from their histogram, the same
    array as sorting them."""
    flat = np.asarray(x, dtype=float).reshape(-1)
    distinct = distinct_outputs(flat)
    if distinct is not None:
        return np.repeat(*distinct)
    return np.sort(flat)


def _grid(a: np.ndarray, b: np.ndarray, points: int) -> np.ndarray:
    """Quantiles of the pooled outputs at ``points`` - 1 equally spaced levels (``a``, ``b`` sorted)."""
    pooled = np.concatenate([a, b])
    pooled.sort(kind="stable")  # two sorted runs: a merge
    return np.unique(_inverted_cdf_sorted(pooled, np.linspace(0, 1, points + 1)[1:-1]))


def _inverted_cdf_sorted(pooled: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.quantile(pooled, q, method="inverted_cdf")`` of a sorted float array, read off by index.

    numpy's order statistic (``ceil(n q) - 1``, computed as numpy does) plus 0.0, which is what its
    interpolation with weight 0 or 1 returns for finite data (``-0.0`` becomes ``0.0``); data with
    NaN, infinities or values that could overflow the interpolation go to ``np.quantile`` itself."""
    n = len(pooled)
    if n == 0 or not (np.isfinite(pooled[0]) and np.isfinite(pooled[-1])) or max(-pooled[0], pooled[-1]) > 1e300:
        return np.quantile(pooled, q, method="inverted_cdf")
    index = (n * q) - 1
    previous = np.floor(index)
    chosen = np.where(index - previous == 0, previous, previous + 1).astype(np.intp)
    chosen[chosen < 0] = 0
    np.minimum(chosen, n - 1, out=chosen)
    return pooled[chosen] + 0.0


def propose_thresholds(train_a, train_b, *, max_events: int, points: int = 512) -> list[Event]:
    """Events ``output >= t`` and ``output <= t`` over a quantile grid of the pooled training outputs."""
    a, b = cached(_sorted_floats, train_a), cached(_sorted_floats, train_b)
    g = _grid(a, b, points)
    if len(g) == 0:
        return []
    na, nb = len(a), len(b)
    ge_a = na - np.searchsorted(a, g, side="left")
    ge_b = nb - np.searchsorted(b, g, side="left")
    le_a = np.searchsorted(a, g, side="right")
    le_b = np.searchsorted(b, g, side="right")
    cand = []  # (score, t, above)
    for ka, kb, above in ((ge_a, ge_b, True), (le_a, le_b, False)):
        s = np.maximum(fast_score(ka, na, kb, nb), fast_score(kb, nb, ka, na))
        for i in np.argsort(-s)[:max_events]:
            cand.append((float(s[i]), float(g[i]), above))
    cand.sort(key=lambda c: -c[0])
    return [Event.threshold(t, above) for _, t, above in cand[:max_events]]


def propose_intervals(train_a, train_b, *, max_events: int, points: int = 128) -> list[Event]:
    """Events ``lo <= output < hi`` for all pairs of points of a quantile grid (cumulative counts)."""
    a, b = cached(_sorted_floats, train_a), cached(_sorted_floats, train_b)
    g = _grid(a, b, points)
    if len(g) < 2:
        return []
    na, nb = len(a), len(b)
    ca = np.searchsorted(a, g, side="left")
    cb = np.searchsorted(b, g, side="left")
    i, j = np.triu_indices(len(g), k=1)
    ka = (ca[j] - ca[i]).astype(float)
    kb = (cb[j] - cb[i]).astype(float)
    s = np.maximum(fast_score(ka, na, kb, nb), fast_score(kb, nb, ka, na))
    top = np.argsort(-s)[:max_events]
    return [_interval(float(g[i[t]]), float(g[j[t]])) for t in top if np.isfinite(s[t])]


def _interval(lo: float, hi: float) -> Event:
    return Event(_Interval(lo, hi), f"output in [{lo!r}, {hi!r})")


class _Interval:
    """``lo <= output < hi``, elementwise; on long 1-D chunks in blocks of :data:`_BLOCK` (the two
    comparisons' temporaries stay in cache: four times faster, the same booleans)."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi

    def __call__(self, out) -> np.ndarray:
        x = np.asarray(out)
        if x.ndim != 1 or len(x) <= 2 * _BLOCK:
            return (x >= self.lo) & (x < self.hi)
        res = np.empty(len(x), dtype=bool)
        below = np.empty(_BLOCK, dtype=bool)
        for start in range(0, len(x), _BLOCK):
            block, into = x[start : start + _BLOCK], res[start : start + _BLOCK]
            np.greater_equal(block, self.lo, out=into)
            np.less(block, self.hi, out=below[: len(block)])
            into &= below[: len(block)]
        return res


# --------------------------------------------------------------------------- vectors


def _coord_event(j: int, inner: Event) -> Event:
    def contains(out, j=j, f=inner.contains):
        arr = np.asarray(out)
        return f(arr.reshape(len(arr), -1)[:, j])

    return Event(contains, f"coordinate {j}: {inner.description}")


def propose_coordinates(train_a, train_b, *, max_events: int, max_coords: int = 64) -> list[Event]:
    """Per-coordinate events of vector outputs (thresholds for floats, histograms for integers)."""
    a = np.asarray(train_a)
    b = np.asarray(train_b)
    a2, b2 = a.reshape(len(a), -1), b.reshape(len(b), -1)
    k = a2.shape[1]
    floating = np.issubdtype(a.dtype, np.floating)
    per = max(2, max_events // max(1, min(k, max_coords)))
    out: list[Event] = []
    for j in range(min(k, max_coords)):
        if floating:
            inner = propose_thresholds(a2[:, j], b2[:, j], max_events=per, points=128)
        else:
            inner = propose_discrete(a2[:, j], b2[:, j], max_events=per)
        out.extend(_coord_event(j, e) for e in inner)
    return out


def _row_sum(o) -> np.ndarray:
    """The sum of the coordinates of each row (floats). Column by column where that is the value
    ``sum(axis=1)`` gives (which reduces each short row on its own, about five times slower): for
    one or two coordinates, and for integers small enough to be summed exactly in any order."""
    arr = np.asarray(o)
    rows = np.asarray(arr, dtype=float).reshape(len(arr), -1)
    k = rows.shape[1]
    exact = arr.dtype == bool or (arr.dtype.kind in "iu" and arr.dtype.itemsize <= 4 and k < (1 << 20))
    if not (k <= 2 or exact) or k == 0:
        return rows.sum(axis=1)
    out = rows[:, 0] + 0.0  # numpy's sums start from +0.0 (a row of -0.0 sums to 0.0)
    for j in range(1, k):
        out += rows[:, j]
    return out


def _row_max(o) -> np.ndarray:
    """The largest coordinate of each row, column by column (``max(axis=1)`` reduces each short row
    on its own, about ten times slower)."""
    rows = np.asarray(o, dtype=float).reshape(len(o), -1)
    out = rows[:, 0].copy()
    for j in range(1, rows.shape[1]):
        np.maximum(out, rows[:, j], out=out)
    return out


def propose_projections(train_a, train_b, *, max_events: int) -> list[Event]:
    """Thresholds on linear statistics of vector outputs: the sum of coordinates and the projection on
    the difference of the two training means (a Fisher-like direction), plus the maximum coordinate."""
    a = np.asarray(train_a, dtype=float)
    b = np.asarray(train_b, dtype=float)
    a2, b2 = a.reshape(len(a), -1), b.reshape(len(b), -1)
    k = a2.shape[1]
    stats: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = [
        ("sum of coordinates", _row_sum),
        ("maximum coordinate", _row_max),
    ]
    diff = a2.mean(axis=0) - b2.mean(axis=0)
    scale = np.sqrt(0.5 * (a2.var(axis=0) + b2.var(axis=0))) + 1e-12
    w = diff / scale**2
    if np.all(np.isfinite(w)) and np.any(w != 0):
        w = w / np.max(np.abs(w))
        wf = w.copy()
        shown = ", ".join(f"{x:.3g}" for x in wf[:6]) + (", ..." if k > 6 else "")
        stats.append((f"projection on ({shown})", lambda o: np.asarray(o, dtype=float).reshape(len(o), -1) @ wf))
    per = max(2, max_events // len(stats))
    out: list[Event] = []
    for name, f in stats:
        fa, fb = f(a2), f(b2)
        for e in propose_thresholds(fa, fb, max_events=per, points=256):
            # the statistic of a chunk is computed once for all its threshold events (cached by identity)
            out.append(Event(_on_statistic(f, e.contains), e.description.replace("output", name, 1)))
    return out


def _nonzero_coordinates(o) -> np.ndarray:
    """The number of nonzero coordinates of each row (int64), column by column: the counts of
    ``np.count_nonzero(axis=1)``, which reduces each short row on its own (several times slower)."""
    rows = np.asarray(o).reshape(len(o), -1)
    out = np.zeros(len(rows), dtype=np.int64)
    for j in range(rows.shape[1]):
        out += rows[:, j] != 0
    return out


def _integer_row_sum(o) -> np.ndarray:
    """The sum of the coordinates of each row in int64, column by column: integer addition (wrapping
    alike) gives ``astype(np.int64).sum(axis=1)`` whatever the order."""
    rows = np.asarray(o).reshape(len(o), -1)
    out = np.zeros(len(rows), dtype=np.int64)
    for j in range(rows.shape[1]):
        out += rows[:, j].astype(np.int64)
    return out


def propose_pattern_features(train_a, train_b, *, max_events: int) -> list[Event]:
    """Integer vectors: histograms of the number of nonzero coordinates and of the coordinate sum
    (coarser than whole patterns, so they still work when patterns are too many to count)."""
    a = np.asarray(train_a)
    b = np.asarray(train_b)
    feats = [
        ("number of nonzero coordinates", _nonzero_coordinates),
        ("sum of coordinates", _integer_row_sum),
    ]
    out: list[Event] = []
    per = max(2, max_events // 2)
    for name, f in feats:
        fa, fb = f(a), f(b)
        for e in _discrete_events(
            row_keys(fa), row_keys(fb), fa, fb, max_events=per, object_kind=False, label=name, transform=f
        ):
            out.append(e)
    return out
