"""Pair search for callables: which neighbouring inputs to audit a function on when the user
declares the input space instead of a pair.

A callable carries no input spec, so the user states the space:

* :class:`Scalars` ``(lo, hi, sensitivity)``: ``fn(x)`` for a number x in [lo, hi]; neighbours
  ``|x − x'| <= sensitivity``;
* :class:`Vectors` ``(dim, lo, hi, sensitivity, norm)``: ``fn(v)`` for a float vector of length
  ``dim`` with entries in [lo, hi]; neighbours ``||v − v'||_norm <= sensitivity``;
* :class:`Datasets` ``(records, relation, size)``: ``fn(records)`` for a list of records of a
  domain (:class:`~dpharness.core.RealInterval`, :class:`~dpharness.core.IntegerRange`,
  :class:`~dpharness.core.Finite`) with ``size[0] <= len <= size[1]``, or for multi-column records
  (:class:`~dpharness.core.RealBox` ``(lo, hi, dim)``: the rows of a model's training set) a float64
  array of shape ``(len, dim)``; neighbours per :class:`~dpharness.core.AddRemove` or
  :class:`~dpharness.core.Substitute`.

Every relation is decided exactly: floats are read as their binary values (``Fraction(x)``), so a
pair is a neighbour pair of the declared space with no tolerance.

:func:`callable_pairs` builds candidates in groups and screens them on samples:

1. *boundary*: the range's ends with a partner at exactly the sensitivity (large magnitudes);
2. *zero and one*: 0 and 1 against partners at the sensitivity (when in range);
3. *powers of two*: pairs with one side a power of two and pairs straddling a binade boundary
   (``2^k − tiny`` against ``2^k − tiny + sensitivity``): where the spacing of doubles changes;
4. *tiny steps*: x against the next double (bugs that live in the low-order bits);
5. *StatDP patterns* for vectors and data sets (Ding, Wang, Wang, Zhang and Kifer, "Detecting
   Violations of Differential Privacy", CCS 2018, Table 1; :func:`.neighbours.statdp_patterns`),
   for data sets also records at 0, 1, powers of two and the domain's ends added or substituted;
6. *random*: seeded pairs over the space;
7. *threshold scan* (data sets): a record's multiplicity is varied until the probability that the
   output differs from its output at multiplicity 0 (where nothing is released) crosses 0.05, 0.5 and
   0.95; the pairs of multiplicities n and n + 1 straddling each crossing are candidates. This is where
   a release thresholded on a count (private partition selection, a thresholded query) pays its ε
   terms; the search finds it with no knowledge of the threshold (:func:`_threshold_scan`).

Multi-column records (``RealBox``) get their own groups, on small data sets (sizes 1, 2, 3, 5 and 10,
where sensitivity bugs show; 0 too for add/remove): *box corners* (data sets of corners of the
declared box, one record changed to another corner), *outliers at the bounds* (records at the
box's centre, or 0, with a corner added or substituted), *duplicates* (a record added that is
already there n times, or substituted by a copy of another) and *random* rows in the box.

Floating-point bugs are what such audits find: textbook ``x + Laplace(b)`` in doubles leaks x
through the set of reachable doubles (Mironov 2012, "On significance of the least significant
bits for differential privacy", §3), and whether that shows depends on the pair — 0 vs 1 reveals
it within 10^5 samples, 10 vs 11 does not at 2·10^5. The groups are interleaved (one of each in
turn) so a small budget still tries each kind.

Screen (successive halving within ``budget`` samples in all, both sides, every candidate): half
the budget spreads evenly over the candidates, the other half over the best few. A pair's score
is the best, over cheap features of its samples, of the bound an event on that feature would be
expected to certify at 10^6 samples a side: thresholds on scalar outputs, coordinates and a
mean-difference projection of vectors; histograms (fitted on one half of the samples, judged on
the other) of discrete outputs, of rows, and of the float structure of float outputs — the float
cell (sign, exponent, trailing zero bits of the mantissa, :func:`.floats.float_cells`) and the
round-trip pattern ``fl(fl(x − c) + c) == x`` (:func:`.floats.round_trip_cells`).

The screen only RANKS pairs: nothing is certified here. The screening samples come from their own
seed stream (never the audit's training or certification streams), and the auditor's union bound
counts every returned pair. Deterministic for a seed when the sampler is vectorised (a per-call
``fn(data)`` draws its own randomness, so its ranking may vary between runs).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness import _validate as _v
from dpharness._run import short_repr
from dpharness.core import (
    AddRemove,
    BoundedChange,
    Domain,
    Finite,
    InputSpec,
    IntegerRange,
    RealBox,
    RealInterval,
    Substitute,
)
from dpharness.errors import MechanismError, ParameterError

from . import events as _ev
from . import floats as _fl
from ._runner import Sampler, signature
from .neighbours import _best, _draw_records, _projected, _random_pairs, _REF_SAMPLES, _Z, statdp_patterns

__all__ = ["Scalars", "Vectors", "Datasets", "callable_pairs", "MIN_BUDGET"]

MIN_BUDGET = 2_000  # the smallest screening budget accepted (samples in all)
_RecordDomain = RealInterval | IntegerRange | Finite | RealBox  # the record domains Datasets accepts
_MIN_PER_SIDE = 100  # stage-1 samples a side per screened candidate, at least
_SEARCH_STREAM = 0x5EA4C4  # first spawn key of the screen's seeds (audit phases use 0 and 1)
_SHADE = 1.0  # standard errors by which screen estimates are shaded before projecting
_MAX_COLUMNS = 8  # output coordinates screened one by one
_LARGE_N = 1_000  # the largest data set the search builds (unless the size range forces more)
_RANDOM_PAIRS = 8
_MAX_DIM = 10_000  # exact (Fraction) validation of every candidate stays cheap up to here
_BOX_SIZES = (
    1,
    10,
    2,
    5,
    3,
)  # data set sizes of the RealBox groups (small: where sensitivity bugs show), in screen order
_MAX_CORNERS = 16  # corners of a RealBox enumerated in full up to 2^4; beyond, a structured subset
_MAX_BOX_DIM = 1_000  # columns of a RealBox record the search accepts
_SCAN_MAX = 4_096  # the largest multiplicity of a record the threshold scan builds
_SCAN_TARGETS = (0.05, 0.5, 0.95)  # release probabilities at which the scan places a pair
_SCAN_PER_SIDE = 200  # outputs a multiplicity the scan draws, at most
_SCAN_PROBE = 16  # outputs at multiplicity 0 that must all be one value (nothing released) for the scan to run
_SCAN_STAGE = 3  # the screen's seed stage of the scan's draws (stages 1 and 2: the screen itself)


# --------------------------------------------------------------------------- exact arithmetic


def _frac(value: Any) -> Fraction:
    """An exact Fraction of a finite real (floats: their binary value)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise TypeError(f"{value!r} is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} is not finite")
    return Fraction(value)


def _within(a: list, b: list, norm: str, bound: Fraction) -> bool:
    """Exactly ``0 < ||a − b||_norm <= bound`` for equal-length lists of ints and floats, in integer
    arithmetic over a common denominator (the same decision as
    :meth:`dpharness.core.BoundedChange.is_neighbour`, without a Fraction per entry)."""
    if len(a) != len(b):
        return False
    ra = [x.as_integer_ratio() for x in a]
    rb = [x.as_integer_ratio() for x in b]
    den = math.lcm(*(d for _, d in ra), *(d for _, d in rb))
    diffs = [abs(na * (den // da) - nb * (den // db)) for (na, da), (nb, db) in zip(ra, rb)]
    if not any(diffs):
        return False
    if norm == "l1":
        return sum(diffs) * bound.denominator <= bound.numerator * den
    if norm == "l2":
        return sum(d * d for d in diffs) * bound.denominator**2 <= bound.numerator**2 * den * den
    return max(diffs) * bound.denominator <= bound.numerator * den


def _float_inside(value: Fraction | float, lo: Fraction, hi: Fraction) -> float:
    """The double nearest ``value`` within [lo, hi] (exactly inside; ±inf and NaN go to an end)."""
    if isinstance(value, float) and not math.isfinite(value):
        value = hi if value > 0 else lo
    x = float(min(max(Fraction(value), lo), hi))
    while Fraction(x) < lo:
        x = math.nextafter(x, math.inf)
    while Fraction(x) > hi:
        x = math.nextafter(x, -math.inf)
    return x


# --------------------------------------------------------------------------- input spaces


@dataclass(frozen=True)
class Scalars:
    """One real number per input: ``fn(x)`` with x a float in ``[lo, hi]``.

    Neighbours: ``x != x'`` and ``|x − x'| <= sensitivity`` exactly (floats read as their binary
    values). Candidate inputs are Python floats."""

    lo: Any
    hi: Any
    sensitivity: Any

    def __post_init__(self) -> None:
        _v.real("lo", self.lo)
        _v.real("hi", self.hi)
        _v.ordered("lo", self.lo, "hi", self.hi)
        _v.positive("sensitivity", self.sensitivity)

    def contains(self, x: Any) -> bool:
        """Exactly ``lo <= x <= hi`` for a finite real x."""
        try:
            q = _frac(x)
        except (TypeError, ValueError):
            return False
        return _frac(self.lo) <= q <= _frac(self.hi)

    def is_neighbour(self, data: Any, neighbor: Any) -> bool:
        if not (self.contains(data) and self.contains(neighbor)):
            return False
        d = abs(_frac(data) - _frac(neighbor))
        return 0 < d <= _frac(self.sensitivity)

    def validate_pair(self, data: Any, neighbor: Any) -> tuple[Any, Any]:
        """``(data, neighbor)`` unchanged, or ParameterError saying what is wrong."""
        for name, x in (("data", data), ("neighbor", neighbor)):
            if not self.contains(x):
                raise ParameterError(
                    f"{name}={x!r:.60} is not a real number in [{self.lo}, {self.hi}]; "
                    "pass a number inside the declared range."
                )
        if not self.is_neighbour(data, neighbor):
            raise ParameterError(
                f"data={data!r} and neighbor={neighbor!r} are not neighbours (need 0 < |data - neighbor| "
                f"<= sensitivity={self.sensitivity}); pass two different numbers at most that far apart."
            )
        return data, neighbor

    def describe(self) -> str:
        return f"numbers in [{self.lo}, {self.hi}], neighbours at distance <= {self.sensitivity}"


@dataclass(frozen=True)
class Vectors:
    """Real vectors of length ``dim`` with entries in ``[lo, hi]``: ``fn(v)`` with v a float64 array.

    Neighbours: ``v != v'`` and ``||v − v'||_norm <= sensitivity`` exactly
    (:meth:`dpharness.core.BoundedChange.is_neighbour`; ``norm`` is ``"l1"``, ``"l2"`` or ``"linf"``)."""

    dim: int
    lo: Any
    hi: Any
    sensitivity: Any
    norm: str = "l1"

    def __post_init__(self) -> None:
        _v.integer("dim", self.dim, minimum=1, maximum=_MAX_DIM)
        _v.real("lo", self.lo)
        _v.real("hi", self.hi)
        _v.ordered("lo", self.lo, "hi", self.hi)
        _v.positive("sensitivity", self.sensitivity)
        _v.choice("norm", self.norm, ("l1", "l2", "linf"))

    @property
    def _relation(self) -> BoundedChange:
        return BoundedChange(self.sensitivity, self.norm)

    def _spec(self) -> InputSpec:
        return InputSpec(RealInterval(self.lo, self.hi), self._relation, "vector", dim=self.dim)

    def contains(self, v: Any) -> bool:
        """A real vector of shape ``(dim,)`` with every entry exactly in [lo, hi]."""
        arr = np.asarray(v)
        if arr.shape != (self.dim,) or not (
            np.issubdtype(arr.dtype, np.integer) or (np.issubdtype(arr.dtype, np.floating) and arr.dtype.itemsize <= 8)
        ):
            return False  # bools, objects, complex and extended precision are not vectors of this space
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
            return False
        return _frac(self.lo) <= _frac(arr.min().item()) and _frac(arr.max().item()) <= _frac(self.hi)

    def is_neighbour(self, data: Any, neighbor: Any) -> bool:
        if not (self.contains(data) and self.contains(neighbor)):
            return False
        return _within(np.asarray(data).tolist(), np.asarray(neighbor).tolist(), self.norm, _frac(self.sensitivity))

    def validate_pair(self, data: Any, neighbor: Any) -> tuple[Any, Any]:
        """``(data, neighbor)`` unchanged, or ParameterError saying what is wrong."""
        for name, x in (("data", data), ("neighbor", neighbor)):
            if not self.contains(x):
                raise ParameterError(
                    f"{name}={x!r:.60} is not a real vector of shape ({self.dim},) with entries in "
                    f"[{self.lo}, {self.hi}]; pass a vector of the declared space."
                )
        if not self.is_neighbour(data, neighbor):
            raise ParameterError(
                f"data and neighbor are not neighbours under '{self._relation.describe()}'; "
                "pass two different vectors within the sensitivity."
            )
        return data, neighbor

    def describe(self) -> str:
        return (
            f"{self.dim}-vectors in [{self.lo}, {self.hi}]^{self.dim}, neighbours at "
            f"{self.norm.upper()} distance <= {self.sensitivity}"
        )


@dataclass(frozen=True)
class Datasets:
    """Lists of records: ``fn(records)`` with ``size[0] <= len(records) <= size[1]`` and each record in
    ``records`` (a RealInterval, IntegerRange or Finite domain; candidates hold Python floats, ints or
    the Finite values themselves; or a RealBox of multi-column records with finite bounds: candidates
    are float64 arrays of shape ``(len, dim)``, one row a record, and a data set is any sequence of
    such rows).

    Neighbours: ``relation`` exactly (AddRemove: one record added or removed, as multisets;
    Substitute: same length, one position changed)."""

    records: _RecordDomain
    relation: Any
    size: tuple

    def __post_init__(self) -> None:
        if not isinstance(self.records, (RealInterval, IntegerRange, Finite, RealBox)):
            raise ParameterError(
                f"records={self.records!r:.80} is not a supported record domain; pass RealInterval(lo, hi), "
                "IntegerRange(lo, hi), Finite(values) or RealBox(lo, hi, dim)."
            )
        if isinstance(self.records, RealBox):  # RealBox itself refuses infinite bounds and lo >= hi
            box = self.records
            if box.dim > _MAX_BOX_DIM:
                raise ParameterError(
                    f"records={box!r:.80} has dim={box.dim} columns; the search takes at most "
                    f"{_MAX_BOX_DIM}: pass fewer columns, or data and neighbor explicitly."
                )
        if not isinstance(self.relation, (AddRemove, Substitute)):
            raise ParameterError(
                f"relation={self.relation!r:.80} is not a data set relation; pass AddRemove() or Substitute()."
            )
        if not isinstance(self.size, (tuple, list)) or len(self.size) != 2:
            raise ParameterError(f"size={self.size!r:.60} is not a (min_n, max_n) pair; pass e.g. size=(0, 100).")
        lo = _v.integer("size[0]", self.size[0], minimum=0)
        hi = _v.integer("size[1]", self.size[1], minimum=0)
        if lo > hi:
            raise ParameterError(f"size={tuple(self.size)!r}: min_n={lo} exceeds max_n={hi}; pass min_n <= max_n.")
        if isinstance(self.relation, AddRemove) and lo == hi:
            raise ParameterError(
                f"size={tuple(self.size)!r} allows one length only, so no two data sets differ by one "
                "record; widen it to (min_n, max_n) with max_n > min_n, or use Substitute()."
            )
        if isinstance(self.relation, Substitute) and hi < 1:
            raise ParameterError(
                f"size={tuple(self.size)!r} allows only empty data sets, which have no substitution "
                "neighbours; pass max_n >= 1."
            )
        object.__setattr__(self, "size", (lo, hi))

    def contains(self, data: Any) -> bool:
        """A list (or 1-D sequence) of records of the domain with an allowed length."""
        try:
            rows = list(data)
        except TypeError:
            return False
        if not self.size[0] <= len(rows) <= self.size[1]:
            return False
        return all(_record_in(self.records, r) for r in rows)

    def is_neighbour(self, data: Any, neighbor: Any) -> bool:
        if not (self.contains(data) and self.contains(neighbor)):
            return False
        a, b = list(data), list(neighbor)
        if isinstance(self.relation, Substitute):
            return len(a) == len(b) and sum(1 for x, y in zip(a, b) if not _same_record(x, y)) == 1
        if abs(len(a) - len(b)) != 1:
            return False
        small, big = (a, b) if len(a) < len(b) else (b, a)
        left: dict[tuple, int] = {}
        for r in big:
            left[_record_key(r)] = left.get(_record_key(r), 0) + 1
        for r in small:
            k = _record_key(r)
            if not left.get(k):
                return False
            left[k] -= 1
        return True

    def validate_pair(self, data: Any, neighbor: Any) -> tuple[Any, Any]:
        """``(data, neighbor)`` unchanged, or ParameterError saying what is wrong."""
        for name, x in (("data", data), ("neighbor", neighbor)):
            if not self.contains(x):
                raise ParameterError(
                    f"{name}={x!r:.60} is not a list of {self.size[0]}..{self.size[1]} records in "
                    f"{self.records.describe()}; pass a data set of the declared space."
                )
        if not self.is_neighbour(data, neighbor):
            raise ParameterError(
                f"data and neighbor are not neighbours under '{self.relation.describe()}'; "
                "change exactly what the relation allows."
            )
        return data, neighbor

    def describe(self) -> str:
        return (
            f"data sets of {self.size[0]}..{self.size[1]} records in {self.records.describe()}, "
            f"neighbours: {self.relation.describe()}"
        )


def _number(r: Any) -> int | float | Fraction | None:
    """A finite real as a Python int, float or Fraction (None otherwise). Python compares and hashes
    these exactly across types (``0.1 == Fraction(0.1)``, ``1 == 1.0``), so no conversion is needed."""
    if isinstance(r, np.generic):
        r = r.item()
    if isinstance(r, bool) or not isinstance(r, (int, float, Fraction)):
        return None
    if isinstance(r, float) and not math.isfinite(r):
        return None
    return r


def _row_values(r: Any) -> tuple | None:
    """A multi-column record (a 1-D numeric array, list or tuple) as a tuple of exact numbers; None
    for anything else (bools, objects, non-finite entries, nested rows)."""
    if isinstance(r, np.ndarray):
        if (
            r.ndim != 1
            or r.dtype == bool
            or not (
                np.issubdtype(r.dtype, np.integer) or (np.issubdtype(r.dtype, np.floating) and r.dtype.itemsize <= 8)
            )
        ):
            return None
        r = r.tolist()
    elif not isinstance(r, (list, tuple)):
        return None
    vals = tuple(_number(x) for x in r)
    return None if any(v is None for v in vals) else vals


def _record_key(r: Any) -> tuple:
    """Numbers by their exact value (as the core relations compare them), rows of numbers by their
    exact values, anything else by repr."""
    q = _number(r)
    if q is not None:
        return ("n", q)
    row = _row_values(r)
    return ("v", row) if row is not None else ("o", repr(r))


def _same_record(x: Any, y: Any) -> bool:
    return _record_key(x) == _record_key(y)


def _record_in(domain: _RecordDomain, r: Any) -> bool:
    """Exact membership of one record (mixed int/float/Fraction comparisons are exact in Python)."""
    if isinstance(domain, Finite):
        return any(_same_record(r, v) or (type(r) is type(v) and r == v) for v in domain.values)
    if isinstance(domain, RealBox):
        row = _row_values(r)
        return row is not None and len(row) == domain.dim and all(domain.lo <= q <= domain.hi for q in row)
    q = _number(r)
    if q is None:
        return False
    if isinstance(domain, IntegerRange):
        return q == int(q) and domain.lo <= q <= domain.hi
    return domain.lo <= q <= domain.hi


# --------------------------------------------------------------------------- candidates


def _scalar_pairs(lo_q: Fraction, hi_q: Fraction, s_q: Fraction) -> list[tuple[float, float, str]]:
    """Curated scalar pairs (possibly invalid or repeated: callers validate), grouped by kind."""
    L, H, S = _float_inside(lo_q, lo_q, hi_q), _float_inside(hi_q, lo_q, hi_q), float(s_q)
    inside = lambda x: lo_q <= Fraction(x) <= hi_q  # noqa: E731
    partner = lambda a, target: _scalar_partner(a, target, lo_q, hi_q, s_q)  # noqa: E731

    out: list[tuple[float, float, str]] = []

    def add(a: float, target: float, group: str) -> None:
        b = partner(a, target)
        if b is not None and b != a:
            out.append((float(a), float(b), group))

    # 1. the ends, against partners at exactly the sensitivity (the largest magnitudes in range)
    add(L, L + S, "boundary")
    add(H, H - S, "boundary")
    # 2. zero and one
    for x in (0.0, 1.0):
        if inside(x):
            add(x, x + S, "zero and one")
            add(x, x - S, "zero and one")
    if inside(0.0) and inside(1.0):
        add(0.0, 1.0, "zero and one")
    # 3. powers of two: one side a power of two, or straddling a binade boundary
    for p in _powers_of_two(L, H, S):
        below = math.nextafter(p, -math.inf) if p > 0 else math.nextafter(p, math.inf)
        add(p, p - S, "powers of two")
        add(p, p + S, "powers of two")
        add(below, below + S if p > 0 else below - S, "powers of two")
        add(p - S / 2 if p > 0 else p + S / 2, p + S / 2 if p > 0 else p - S / 2, "powers of two")
    # 4. tiny steps: the next double
    for x in [0.0, 1.0] + _powers_of_two(L, H, S)[:2] + [L, H]:
        if inside(x):
            add(x, math.nextafter(x, math.inf), "tiny steps")
            add(x, math.nextafter(x, -math.inf), "tiny steps")
    return out


def _scalar_partner(a: float, target: float, lo_q: Fraction, hi_q: Fraction, s_q: Fraction) -> float | None:
    """The double nearest ``target`` inside [lo, hi] and within the sensitivity of ``a`` (None when
    ``a`` is outside or float rounding leaves no such double near ``target``)."""
    if not (math.isfinite(a) and lo_q <= Fraction(a) <= hi_q):
        return None
    b = _float_inside(target, lo_q, hi_q)
    for _ in range(64):
        if abs(Fraction(b) - Fraction(a)) <= s_q:
            return b
        b = math.nextafter(b, a)
    return None


def _powers_of_two(L: float, H: float, S: float) -> list[float]:
    """A few powers of two (and their negatives) inside [L, H]: 1, 2, 1/2, the sensitivity's scale,
    and the two largest in range."""
    top = max(abs(L), abs(H))
    exps = [0, math.ceil(math.log2(S)) if S > 0 else 0, 1, -1]
    if top > 0:
        k = math.floor(math.log2(top))
        exps += [k, k - 1]
    out: list[float] = []
    for e in dict.fromkeys(exps):
        if -1074 <= e <= 1023:
            for p in (math.ldexp(1.0, e), -math.ldexp(1.0, e)):
                if L <= p <= H and p not in out:
                    out.append(p)
    return out[:8]


def _random_scalars(
    lo_q: Fraction, hi_q: Fraction, s_q: Fraction, rng: np.random.Generator, count: int
) -> list[tuple[float, float, str]]:
    L, H, S = float(lo_q), float(hi_q), float(s_q)
    out = []
    for i in range(count):
        if i % 2 == 0:
            u = float(rng.random())
            a = L * (1.0 - u) + H * u  # no overflow for ranges wider than the largest double
        else:  # a log-uniform magnitude: lands in binades a uniform draw rarely visits
            top = max(abs(L), abs(H), 2.0**-20)
            mag = float(2.0 ** rng.uniform(-20, math.log2(top)))
            negative = H <= 0 or (L < 0 and rng.random() < 0.5)
            a = -mag if negative else mag
        a = _float_inside(a, lo_q, hi_q)
        step = S * (1.0 if i % 3 != 2 else float(rng.uniform(0.0, 1.0)))
        step = step if rng.random() < 0.5 else -step
        out.append((a, a + step, "random"))
    return out


def _vector_candidates(space: Vectors, rng: np.random.Generator) -> list[tuple[Any, Any, str]]:
    spec = space._spec()
    d = space.dim
    out: list[tuple[Any, Any, str]] = []
    lo_q, hi_q, s_q = _frac(space.lo), _frac(space.hi), _frac(space.sensitivity)
    # float structure in one coordinate (a one-coordinate change within the sensitivity fits every norm)
    for a0, b0, group in _scalar_pairs(lo_q, hi_q, s_q):
        a = np.full(d, a0, dtype=float)
        b = a.copy()
        b[0] = b0
        out.append((a, b, group))
    out += [(np.asarray(a, float), np.asarray(b, float), "StatDP patterns") for a, b in statdp_patterns(spec)]
    out += [
        (np.asarray(a, float), np.asarray(b, float), "random") for a, b in _random_pairs(spec, rng, _RANDOM_PAIRS, None)
    ]
    return out


def _repair_vector(space: Vectors, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Clip ``b`` into the box (which only moves it towards ``a``) and, when float rounding put it just
    beyond the sensitivity, shrink the step slightly; None when no nearby valid pair is found."""
    if not space.contains(a):
        return None
    lo, hi = (
        float(_float_inside(_frac(space.lo), _frac(space.lo), _frac(space.hi))),
        float(_float_inside(_frac(space.hi), _frac(space.lo), _frac(space.hi))),
    )
    b = np.clip(np.asarray(b, float), lo, hi)
    for shrink in (0.0, 2.0**-50, 2.0**-40, 2.0**-30):
        c = b if shrink == 0.0 else a + (b - a) * (1.0 - shrink)
        if space.is_neighbour(a, c):
            return a, c
    return None


def _dataset_sizes(space: Datasets) -> list[int]:
    lo, hi = space.size
    if isinstance(space.relation, AddRemove):  # the smaller side's length; the other has one more
        big = min(hi - 1, max(lo, _LARGE_N))
        return list(dict.fromkeys([lo, min(lo + 1, hi - 1), big]))
    start = max(lo, 1)
    big = min(hi, max(start, _LARGE_N))
    return list(dict.fromkeys([start, min(start + 1, hi), big]))


def _record_values(domain: _RecordDomain) -> list:
    """Records for float-structure pairs: 0, 1, 1/2, a tiny positive value and the domain's ends."""
    if isinstance(domain, Finite):
        vals = list(domain.values)
        return vals if len(vals) <= 6 else vals[:3] + vals[-3:]
    if isinstance(domain, IntegerRange):
        ints = [domain.lo, domain.hi, 0, 1, -1, (domain.lo + domain.hi) // 2]
        return [int(v) for v in dict.fromkeys(ints) if domain.lo <= v <= domain.hi]
    lo, hi = float(domain.lo), float(domain.hi)
    cand = [0.0, 1.0, 0.5, 2.0**-30]
    if math.isfinite(lo):
        cand.append(lo)
    if math.isfinite(hi):
        cand.append(hi)
        if hi > 0:
            cand.append(math.ldexp(1.0, math.floor(math.log2(hi))))
    return [v for v in dict.fromkeys(cand) if lo <= v <= hi]


def _as_records(domain: Domain, rows) -> list:
    vals = np.asarray(rows).tolist() if isinstance(rows, np.ndarray) else list(rows)
    if isinstance(domain, RealInterval):
        return [float(v) for v in vals]
    if isinstance(domain, IntegerRange):
        return [int(v) for v in vals]
    return vals


def _box_sizes(space: Datasets) -> list[int]:
    """Sizes of the RealBox groups' data sets (the smaller side's under add/remove): 1, 10, 2, 5, 3
    where allowed, 0 last under add/remove; the smallest allowed size when none of these is."""
    lo, hi = space.size
    if isinstance(space.relation, AddRemove):
        sizes = [n for n in _BOX_SIZES if lo <= n <= hi - 1] + ([0] if lo == 0 else [])
        return sizes or [lo]
    sizes = [n for n in _BOX_SIZES if max(lo, 1) <= n <= hi]
    return sizes or [max(lo, 1)]


def _box_corners(box: RealBox) -> list[np.ndarray]:
    """Corners of the box as float64 rows exactly inside it: all low, all high, then the rest (every
    corner up to 2^4 of them; beyond, one coordinate high, one coordinate low and the alternating
    patterns)."""
    lo_q, hi_q = Fraction(box.lo), Fraction(box.hi)
    lo, hi, d = _float_inside(lo_q, lo_q, hi_q), _float_inside(hi_q, lo_q, hi_q), box.dim
    if 2**d <= _MAX_CORNERS:
        bits = [np.array(b, bool) for b in itertools.product((False, True), repeat=d)]
    else:
        eye = np.eye(d, dtype=bool)
        alt = np.arange(d) % 2 == 0
        bits = [np.zeros(d, bool), np.ones(d, bool), alt, ~alt, *eye[:4], *~eye[:4]]
    bits.sort(key=lambda b: 0 if not b.any() else 1 if b.all() else 2)
    out: list[np.ndarray] = []
    for b in bits:
        row = np.where(b, hi, lo)
        if not any(np.array_equal(row, o) for o in out):
            out.append(row)
    return out


def _box_candidates(space: Datasets, rng: np.random.Generator) -> list[tuple[Any, Any, str]]:
    """Candidate pairs of data sets of multi-column records (float64 arrays of shape (n, dim)), in
    the groups *box corners*, *outliers at the bounds*, *duplicates* and *random* (module docstring).
    Unvalidated: the caller keeps exact neighbours only."""
    box, rel = space.records, space.relation
    assert isinstance(box, RealBox)  # the caller's branch for box records
    d = box.dim
    lo_q, hi_q = Fraction(box.lo), Fraction(box.hi)
    corners = _box_corners(box)
    c_lo, c_hi = corners[0], corners[min(1, len(corners) - 1)]
    others = corners[2:6]
    centre = np.full(d, _float_inside((lo_q + hi_q) / 2, lo_q, hi_q))
    interior = [centre] + ([np.zeros(d)] if lo_q < 0 < hi_q else [])
    add = isinstance(rel, AddRemove)
    out: list[tuple[Any, Any, str]] = []

    def ds(rows: list) -> np.ndarray:
        return np.array(rows, dtype=np.float64).reshape(len(rows), d)

    def pair(rows: list, new: np.ndarray, group: str, at: int = -1) -> None:
        if add:
            out.append((ds(rows), ds(rows + [new]), group))
        elif rows and not np.array_equal(rows[at], new):
            changed = list(rows)
            changed[at] = new
            out.append((ds(rows), ds(changed), group))

    sizes = _box_sizes(space)
    for n in sizes:
        # box corners: n copies of one corner and the opposite one; distinct corners in turn
        pair([c_lo] * n, c_hi, "box corners")
        pair([c_hi] * n, c_lo, "box corners")
        cycle = [corners[i % len(corners)] for i in range(n)]
        pair(cycle, c_hi if add else corners[(n - 1 + len(corners) // 2) % len(corners)], "box corners")
        for c in others:
            pair([c_lo] * n, c, "box corners")
        # outliers at the bounds: interior records, a corner added or substituted
        for base in interior:
            for c in [c_hi, c_lo, *others]:
                pair([base] * n, c, "outliers at the bounds")
        # duplicates: a record added that is there already (n copies), or one substituted by a copy of another
        if add and n >= 1:
            for r in (c_hi, c_lo, centre):
                pair([r] * n, r, "duplicates")
            pair([c_lo] * (n - 1) + [c_hi], c_hi, "duplicates")
        elif n >= 2:  # one of two corners among interior records becomes a copy of the other
            pair([centre] * (n - 2) + [c_hi, c_lo], c_hi, "duplicates")
            pair([centre] * (n - 2) + [c_lo, c_hi], c_lo, "duplicates")
    for i in range(_RANDOM_PAIRS):
        n = sizes[i % len(sizes)]
        rows = list(_draw_records(box, rng, n)) if n else []
        new = corners[int(rng.integers(0, len(corners)))] if i % 2 == 0 else _draw_records(box, rng, 1)[0]
        pair(rows, new, "random", at=int(rng.integers(0, n)) if n else -1)
    return out


def _dataset_candidates(space: Datasets, rng: np.random.Generator) -> list[tuple[Any, Any, str]]:
    dom, rel = space.records, space.relation
    if isinstance(dom, RealBox):
        return _box_candidates(space, rng)
    out: list[tuple[Any, Any, str]] = []
    vals = _record_values(dom)
    base_vals = vals[:2]
    sizes = _dataset_sizes(space)
    for n in sizes:
        # float structure: one record at 0, 1, 1/2, a tiny value or an end, on uniform bases
        for base in base_vals:
            rows = [base] * n
            for r in vals:
                group = _record_group(dom, r)
                if isinstance(rel, AddRemove):
                    out.append((list(rows), rows + [r], group))
                elif n >= 1 and not _same_record(rows[0], r):
                    out.append((list(rows), [r] + rows[1:], group))
    for n in sizes:
        spec = InputSpec(dom, rel, "dataset", size=n if n > 0 else None)
        for a, b in statdp_patterns(spec):
            out.append((_as_records(dom, a), _as_records(dom, b), "StatDP patterns"))
    lo_n, hi_n = space.size
    for _ in range(_RANDOM_PAIRS):
        if isinstance(rel, AddRemove):
            n = int(rng.integers(lo_n, min(hi_n - 1, max(lo_n, _LARGE_N)), endpoint=True))
        else:
            n = int(rng.integers(max(lo_n, 1), min(hi_n, max(lo_n, 1, _LARGE_N)), endpoint=True))
        a = _as_records(dom, _draw_records(dom, rng, n)) if n else []
        new = _as_records(dom, _draw_records(dom, rng, 1))[0]
        if isinstance(rel, AddRemove):
            out.append((a, a + [new], "random"))
        else:
            b = list(a)
            b[int(rng.integers(0, n))] = new
            out.append((a, b, "random"))
    return out


def _record_group(dom: _RecordDomain, r: Any) -> str:
    ends = [dom.values[0], dom.values[-1]] if isinstance(dom, Finite) else [dom.lo, dom.hi]
    if any(_same_record(r, e) for e in ends):
        return "boundary"
    return "zero and one" if any(_same_record(r, v) for v in (0, 1)) else "powers of two"


def _pair_key(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return "a" + repr([float(v).hex() for v in x.ravel().tolist()])
    if isinstance(x, list):
        return "l" + repr([_record_key(v) for v in x])
    return "s" + repr(_record_key(x))


def _candidates(space, rng: np.random.Generator, scanned: list | None = None) -> list[tuple[Any, Any, str]]:
    """Valid, distinct candidates (either orientation counts once), the groups interleaved; ``scanned``:
    the threshold scan's pairs (group "threshold scan"), first in the interleaving."""
    if isinstance(space, Scalars):
        lo_q, hi_q, s_q = _frac(space.lo), _frac(space.hi), _frac(space.sensitivity)
        raw: list[tuple[Any, Any, str]] = []
        for a, b, g in _scalar_pairs(lo_q, hi_q, s_q) + _random_scalars(lo_q, hi_q, s_q, rng, _RANDOM_PAIRS):
            # a random step may round past the range or the sensitivity
            partner = _scalar_partner(a, b, lo_q, hi_q, s_q)
            if partner is not None:
                raw.append((a, partner, g))
    elif isinstance(space, Vectors):
        raw = []
        for a, b, g in _vector_candidates(space, rng):
            ok = _repair_vector(space, a, b)
            if ok is not None:
                raw.append((ok[0], ok[1], g))
    else:
        raw = list(scanned or []) + _dataset_candidates(space, rng)
    seen: set = set()
    groups: dict[str, list] = {}
    for a, b, g in raw:
        if not space.is_neighbour(a, b):
            continue
        key = (_pair_key(a), _pair_key(b))
        if key in seen or key[::-1] in seen:
            continue
        seen.add(key)
        groups.setdefault(g, []).append((a, b, g))
    order = [
        g
        for g in (
            "threshold scan",
            "boundary",
            "zero and one",
            "box corners",
            "outliers at the bounds",
            "duplicates",
            "StatDP patterns",
            "powers of two",
            "tiny steps",
            "random",
        )
        if g in groups
    ]
    out: list[tuple[Any, Any, str]] = []
    queues = [list(groups[g]) for g in order]
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


# --------------------------------------------------------------------------- the threshold scan


def _scan_records(space: Datasets) -> tuple[Any, Any] | None:
    """The record whose multiplicity the scan varies and a filler record (another value of the domain,
    None when the domain has one value), or None when the scan does not apply. Multi-column records: the
    corner of the box with every column at the end of larger magnitude (whichever column a release is keyed
    on, its copies share the key, and every value column is at its extreme, where a clamped aggregate
    released with the key moves most), the opposite corner the filler."""
    dom = space.records
    if isinstance(dom, RealBox):
        corners = _box_corners(dom)
        if len(corners) < 2:
            return None
        c_lo, c_hi = corners[0], corners[1]
        return (c_hi, c_lo) if abs(float(c_hi[0])) >= abs(float(c_lo[0])) else (c_lo, c_hi)
    vals = list(dom.values) if isinstance(dom, Finite) else _record_values(dom)
    if not vals:
        return None
    r = vals[0] if isinstance(dom, Finite) else (1.0 if 1.0 in vals else vals[0])
    if isinstance(dom, IntegerRange):
        r = 1 if dom.lo <= 1 <= dom.hi else int(vals[0])
    others = [v for v in vals if not _same_record(v, r)]
    return r, (others[0] if others else None)


def _scan_layout(space: Datasets, filler: Any) -> tuple[int, int] | None:
    """(fixed length or -1, the largest multiplicity n such that the data sets of n and n + 1 copies
    are both in the space): under add/remove the data set is ``size[0]`` fillers plus n copies; under
    substitution it has a fixed length m and n of its records are the scanned one."""
    lo, hi = space.size
    if isinstance(space.relation, AddRemove):
        if lo > 0 and filler is None:
            return None
        top = min(hi - lo - 1, _SCAN_MAX)
        return (-1, top) if top >= 1 else None
    if filler is None:
        return None
    m = min(hi, max(lo, 1, _SCAN_MAX))
    return (m, m - 1) if m >= 2 else None


def _scan_data(space: Datasets, record: Any, filler: Any, length: int, n: int) -> Any:
    rows = [filler] * space.size[0] + [record] * n if length < 0 else [filler] * (length - n) + [record] * n
    if isinstance(space.records, RealBox):  # multi-column records: a float64 array of shape (len, dim)
        return np.array(rows, dtype=np.float64).reshape(len(rows), space.records.dim)
    return rows


def _row_keys(x: np.ndarray) -> list:
    """One hashable key per output row: its bytes (numeric rows) or its repr (other outputs)."""
    if x.dtype == object:
        return [repr(o) for o in x]
    flat = np.ascontiguousarray(x.reshape(len(x), -1))
    return [row.tobytes() for row in flat]


def _threshold_scan(sampler: Sampler, space: Datasets, seed: int, per_side: int) -> tuple[list, str, int]:
    """Pairs where the release probability of a record crosses 0.05, 0.5 and 0.95, a sentence saying
    what the scan found, and the callable outputs it drew.

    The output at multiplicity 0 must be one fixed value (nothing released: all of its first
    :data:`_SCAN_PROBE` outputs equal, else the scan stops there); the release probability
    at multiplicity n is the fraction of ``per_side`` outputs that differ from it. The scan doubles n
    until that fraction reaches the top target (or the space's largest multiplicity), then bisects for
    each target between the multiplicities measured on either side of it. Estimates on ``per_side``
    outputs are noisy and the probability need not be monotone: the pairs are candidates for the screen,
    which ranks them with every other candidate; nothing is certified here."""
    picked = _scan_records(space)
    if picked is None:
        return [], "", 0
    record, filler = picked
    layout = _scan_layout(space, filler)
    if layout is None:
        return [], "", 0
    length, top = layout
    used = 0
    measured: dict[int, float] = {}

    def outputs(n: int, size: int = per_side) -> np.ndarray | None:
        nonlocal used
        used += size
        try:
            return sampler(
                _scan_data(space, record, filler, length, n),
                size,
                _rng(seed, _SCAN_STAGE, n, 0),
                where=f"pair search (threshold scan, multiplicity {n})",
            )
        except MechanismError:
            return None

    base = outputs(0, _SCAN_PROBE)
    if base is None:
        return [], "threshold scan skipped (the callable failed at multiplicity 0)", used
    keys0 = set(_row_keys(base))
    if len(keys0) != 1:
        return [], "threshold scan skipped (the output varies at multiplicity 0, so no release event to scan)", used
    (nothing,) = keys0

    def released(n: int) -> float | None:
        if n not in measured:
            x = outputs(n)
            if x is None or signature(x) != signature(base):
                return None
            measured[n] = sum(k != nothing for k in _row_keys(x)) / len(x)
        return measured[n]

    n = 1
    while True:
        p = released(n)
        if p is None:
            return (
                [],
                f"threshold scan stopped (the callable failed or changed its output type at multiplicity {n})",
                used,
            )
        if p >= _SCAN_TARGETS[-1] or n >= top:
            break
        n = min(2 * n, top)
    if measured[n] < _SCAN_TARGETS[0]:
        return [], f"threshold scan: no release up to multiplicity {n} (record {short_repr(record)})", used
    out: list[tuple[Any, Any, str]] = []
    found: list[str] = []
    for t in _SCAN_TARGETS:
        lo = max([m for m, q in measured.items() if q < t], default=0)
        hi = min([m for m, q in measured.items() if q >= t and m > lo], default=None)
        if hi is None:
            continue
        while hi - lo > 1:
            mid = (lo + hi) // 2
            q = released(mid)
            if q is None:
                break
            if q >= t:
                hi = mid
            else:
                lo = mid
        a = _scan_data(space, record, filler, length, hi - 1)
        b = _scan_data(space, record, filler, length, hi)
        if not any(len(x) == len(a) and bool(np.all(np.asarray(x) == np.asarray(a))) for x, _b, _g in out):
            out.append((a, b, "threshold scan"))
            found.append(f"{hi - 1} vs {hi} (release probability ~{measured.get(hi, 0.0):.2f})")
    how = (
        f"threshold scan of record {short_repr(record)}'s multiplicity ({per_side} outputs a multiplicity): "
        + "; ".join(found)
    )
    return out, how, used


# --------------------------------------------------------------------------- the screen


def _shaded_projection(pa: np.ndarray, na: int, pb: np.ndarray, nb: int) -> np.ndarray:
    """The bound an event hit with frequencies ``pa`` / ``pb`` (estimated on ``na`` / ``nb`` samples)
    would be expected to certify at 10^6 samples a side, with both estimates shaded by one standard
    error (and ``pb`` by one more hit) against the event: rare lucky events rank low."""
    lo = np.maximum(pa - _SHADE * np.sqrt(pa * (1 - pa) / na), 0.0)
    hi = np.minimum(pb + _SHADE * np.sqrt(pb * (1 - pb) / nb) + 1.0 / nb, 1.0)
    return _projected(lo, hi, float(_REF_SAMPLES), _Z)


def _count_in(keys: np.ndarray, x: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(keys, x)
    idx_c = np.minimum(idx, len(keys) - 1)
    hit = (idx < len(keys)) & (keys[idx_c] == x)
    return np.bincount(idx_c[hit], minlength=len(keys))


def _split_histogram(ka: np.ndarray, kb: np.ndarray) -> float:
    """Best shaded projected bound of a set of output keys: keys ordered by their likelihood ratio on
    the first half of each side's samples, the sets of top-ranked keys judged on the second half."""
    ha, hb = len(ka) // 2, len(kb) // 2
    if min(ha, hb) < 20:
        return 0.0
    keys, inv = np.unique(np.concatenate([ka[:ha], kb[:hb]]), return_inverse=True)
    if len(keys) < 2:
        return 0.0
    ca = np.bincount(inv[:ha], minlength=len(keys))
    cb = np.bincount(inv[ha:], minlength=len(keys))
    lr = np.log((ca + 0.5) / (ha + 1.0)) - np.log((cb + 0.5) / (hb + 1.0))
    ea, eb = _count_in(keys, ka[ha:]), _count_in(keys, kb[hb:])
    na, nb = len(ka) - ha, len(kb) - hb
    best = 0.0
    for num, n_num, den, n_den, order in (
        (ea, na, eb, nb, np.argsort(-lr, kind="stable")),
        (eb, nb, ea, na, np.argsort(lr, kind="stable")),
    ):
        cn = np.cumsum(num[order]) / n_num
        cd = np.cumsum(den[order]) / n_den
        vals = _shaded_projection(cn, n_num, cd, n_den)
        vals[(cn >= 1.0) & (cd >= 1.0)] = -np.inf
        if len(vals):
            best = max(best, float(np.max(vals)))
    return best


def _object_keys(xa: np.ndarray | list, xb: np.ndarray | list) -> tuple[np.ndarray, np.ndarray]:
    """Integer keys of arbitrary outputs by first appearance of their repr (deterministic)."""
    table: dict[str, int] = {}

    def keys(xs):
        return np.array([table.setdefault(repr(o), len(table)) for o in xs], dtype=np.int64)

    return keys(xa), keys(xb)


def _scalar_score(a: np.ndarray, b: np.ndarray, shifts: tuple) -> float:
    if np.issubdtype(a.dtype, np.floating):
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        s = _best(fa, fb)
        s = max(s, _split_histogram(_fl.float_cells(fa), _fl.float_cells(fb)))
        if shifts:
            s = max(s, _split_histogram(_fl.round_trip_cells(fa, shifts), _fl.round_trip_cells(fb, shifts)))
        return max(s, _split_histogram(_ev.row_keys(fa), _ev.row_keys(fb)))  # atoms and grids
    ia, ib = a.astype(np.int64), b.astype(np.int64)
    return max(_best(ia.astype(float), ib.astype(float)), _split_histogram(ia, ib))


def _score(xa: np.ndarray, xb: np.ndarray, shifts: tuple) -> float:
    """Best shaded projected bound over the cheap features of one pair's samples."""
    kind = _ev.output_kind(xa)
    if kind == "object" or _ev.output_kind(xb) == "object":
        ka, kb = _object_keys(
            xa.reshape(len(xa), -1).tolist() if xa.dtype != object else xa,
            xb.reshape(len(xb), -1).tolist() if xb.dtype != object else xb,
        )
        return _split_histogram(ka, kb)
    if xa.dtype == bool:
        xa, xb = xa.astype(np.int64), xb.astype(np.int64)
    if kind in ("float", "discrete"):
        return _scalar_score(xa.reshape(-1), xb.reshape(-1), shifts)
    fa, fb = xa.reshape(len(xa), -1), xb.reshape(len(xb), -1)
    best = _split_histogram(_ev.row_keys(fa), _ev.row_keys(fb))
    for j in range(min(fa.shape[1], _MAX_COLUMNS)):
        best = max(best, _scalar_score(fa[:, j], fb[:, j], shifts))
    ga, gb = fa.astype(float), fb.astype(float)
    sd = np.sqrt((ga.var(axis=0) + gb.var(axis=0)) / 2)
    sd[sd == 0] = 1.0
    direction = (ga.mean(axis=0) - gb.mean(axis=0)) / sd**2
    if np.any(direction):
        best = max(best, _best(ga @ direction, gb @ direction))
    return best


def _rng(seed: int, stage: int, index: int, side: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_SEARCH_STREAM, stage, index, side)))


def _concat(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype == object or y.dtype == object:
        out = np.empty(len(x) + len(y), dtype=object)
        out[: len(x)] = list(x)
        out[len(x) :] = list(y)
        return out
    return np.concatenate([x, y])


# --------------------------------------------------------------------------- the search


def callable_pairs(
    sampler: Sampler, inputs: Scalars | Vectors | Datasets, *, seed: int, budget: int, max_pairs: int = 4
) -> tuple[list[tuple[Any, Any]], str]:
    """Up to ``max_pairs`` neighbouring pairs ``(data, neighbor)`` of ``inputs``, most promising first,
    and a sentence saying how they were found.

    ``sampler``: a :class:`dpharness.auditors._runner.Sampler` wrapping the callable.
    ``inputs``: the declared input space (:class:`Scalars`, :class:`Vectors` or :class:`Datasets`).
    ``seed``: makes the random candidates and the screening samples reproducible (vectorised
    samplers only). ``budget``: callable outputs the screen may draw in all (both sides, every
    candidate), at least :data:`MIN_BUDGET`. Every returned pair satisfies
    ``inputs.validate_pair`` exactly; all returned pairs give outputs of one shape and type.
    The ranking certifies nothing: an audit must count every returned pair in its union bound.

    Raises ParameterError for bad arguments and the sampler's MechanismError when the callable
    fails on every screened candidate (a failure on some is reported in the sentence)."""
    if not isinstance(sampler, Sampler):
        raise ParameterError(
            f"sampler={sampler!r:.80} is not a Sampler; wrap the callable as "
            "dpharness.auditors._runner.Sampler(fn, name, vectorized)."
        )
    if not isinstance(inputs, (Scalars, Vectors, Datasets)):
        raise ParameterError(
            f"inputs={inputs!r:.80} is not an input space; pass Scalars(lo, hi, sensitivity), "
            "Vectors(dim, lo, hi, sensitivity, norm) or Datasets(records, relation, size)."
        )
    seed = _v.integer("seed", seed, minimum=0)
    budget = _v.integer("budget", budget, minimum=MIN_BUDGET)
    max_pairs = _v.integer("max_pairs", max_pairs, minimum=1)
    return _search(sampler, inputs, seed, budget, max_pairs)


def first_candidate(space: Scalars | Vectors | Datasets, seed: int) -> tuple[Any, Any] | None:
    """The first candidate pair the search would screen without its threshold scan (None: the space has
    none): a representative pair on which an audit under a time budget times the callable before sizing
    the search."""
    try:
        cands = _candidates(space, _rng(seed, 0, 0, 0))
    except (ParameterError, ValueError, ArithmeticError):
        return None
    return (cands[0][0], cands[0][1]) if cands else None


def _search(sampler: Sampler, space, seed: int, budget: int, max_pairs: int) -> tuple[list[tuple[Any, Any]], str]:
    scanned: list = []
    scan_how, scan_used = "", 0
    if isinstance(space, Datasets):  # a fifth of the budget at most, over about 50 multiplicities
        scanned, scan_how, scan_used = _threshold_scan(
            sampler, space, seed, max(16, min(_SCAN_PER_SIDE, budget // 250))
        )
    cands = _candidates(space, _rng(seed, 0, 0, 0), scanned)
    if not cands:  # e.g. a sensitivity below the spacing of doubles: no two distinct doubles are neighbours
        raise ParameterError(
            f"inputs={space!r:.100} has no neighbouring pair of distinct doubles the search could find "
            "(is the sensitivity below the spacing of doubles in the range?); pass a larger "
            "sensitivity, or data and neighbor explicitly."
        )
    k = min(len(cands), (budget // 2) // (2 * _MIN_PER_SIDE))
    n1 = (budget // 2) // (2 * k)
    drawn: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    score: dict[int, float] = {}
    failures: list[str] = []
    first_error: MechanismError | None = None
    used = 0  # the screen's outputs (the scan's are scan_used, taken from the budget first)
    budget = max(budget - scan_used, MIN_BUDGET // 2)

    def draw(i: int, stage: int, n: int) -> tuple[np.ndarray, np.ndarray] | None:
        nonlocal first_error, used
        a, b, _g = cands[i]
        try:
            xa = sampler(a, n, _rng(seed, stage, i, 0), where=f"pair search (stage {stage}, candidate {i}, data side)")
            xb = sampler(
                b, n, _rng(seed, stage, i, 1), where=f"pair search (stage {stage}, candidate {i}, neighbor side)"
            )
        except MechanismError as exc:
            first_error = first_error or exc
            # the callable's own exception by its type only: its message may contain the data, and this
            # sentence ends in the audit's result
            why = f"it raised {type(exc.__cause__).__name__}" if exc.__cause__ is not None else str(exc)[:100]
            failures.append(f"data={short_repr(a)}, neighbor={short_repr(b)}: {why}")
            return None
        finally:
            used += 2 * n
        if signature(xa) != signature(xb):
            failures.append(
                f"data={short_repr(a)}, neighbor={short_repr(b)}: outputs of different shapes or types "
                f"({signature(xa)} vs {signature(xb)})"
            )
            return None
        return xa, xb

    for i in range(k):
        got = draw(i, 1, n1)
        if got is None:
            continue
        drawn[i] = got
        a, b, _g = cands[i]
        score[i] = _safe_score(*got, _fl.shifts_from_pair(a, b))
    if not score:
        raise first_error if first_error is not None else MechanismError("the callable gave no usable outputs")
    ranked = sorted(score, key=lambda i: (-score[i], i))
    m = min(len(ranked), max(2 * max_pairs, 4))
    finalists = ranked[:m]
    n2 = (budget - used) // (2 * m)
    final: dict[int, float] = {}
    if n2 >= 1:
        for i in finalists:
            got = draw(i, 2, n2)
            if got is None:
                score.pop(i)
                continue
            xa, xb = _concat(drawn[i][0], got[0]), _concat(drawn[i][1], got[1])
            if signature(xa) != signature(drawn[i][0]):
                score.pop(i)
                continue
            a, b, _g = cands[i]
            final[i] = _safe_score(xa, xb, _fl.shifts_from_pair(a, b))
    order = sorted(final, key=lambda i: (-final[i], i)) + [i for i in ranked if i not in final and i in score]
    if not order:
        raise first_error if first_error is not None else MechanismError("the callable gave no usable outputs")
    # an audit needs one output shape and type across its pairs: keep those of the best pair
    ref = signature(drawn[order[0]][0])
    other_shapes = sum(1 for i in order if signature(drawn[i][0]) != ref)
    chosen = [i for i in order if signature(drawn[i][0]) == ref][:max_pairs]
    pairs = [(cands[i][0], cands[i][1]) for i in chosen]
    groups = list(dict.fromkeys(g for _a, _b, g in cands[:k]))
    if isinstance(space, Datasets):
        sizes = sorted({min(len(a), len(b)) for a, b, _g in cands})
        groups.append(
            f"data sets of {_sizes_text(sizes)} records{' and one more' if isinstance(space.relation, AddRemove) else ''}; "
            f"{space.relation.describe()}"
        )
    how = (
        f"screened {k} of {len(cands)} candidate pairs ({', '.join(groups)}) on {used + scan_used} samples of the callable "
        f"({n1} a side each, {n1 + max(n2, 0)} for the best {len(finalists)}) and ranked them by the bound that "
        "threshold, histogram or float-cell events would be expected to certify (a ranking only; nothing is "
        "certified here)"
    )
    if scan_how:
        how += f"; {scan_how}"
    if failures:
        how += f"; {len(failures)} candidate(s) skipped because the callable failed on them (first: {failures[0]})"
    if other_shapes:
        how += f"; {other_shapes} candidate(s) set aside for giving outputs of another shape or type than the best pair"
    if not sampler.vectorized:
        how += "; the per-call callable draws its own randomness, so this ranking may differ between runs"
    return pairs, how


def _sizes_text(sizes: list[int]) -> str:
    if len(sizes) <= 6:
        return ", ".join(map(str, sizes))
    return f"{sizes[0]}..{sizes[-1]} ({len(sizes)} sizes)"


def _safe_score(xa: np.ndarray, xb: np.ndarray, shifts: tuple) -> float:
    try:
        with np.errstate(all="ignore"):
            s = _score(xa, xb, shifts)
    except (ArithmeticError, ValueError, TypeError, MemoryError):
        return 0.0  # the screen cannot judge these outputs: rank by the prior order alone
    return s if math.isfinite(s) else (1e6 if s > 0 else 0.0)
