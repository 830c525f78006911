"""Floating-point structure events: outputs whose float grid or ulp pattern is possible under one
input and not (or rarely) under the other.

Mironov (2012), "On significance of the least significant bits for differential privacy", §3:
textbook ``x + Laplace(b)`` computed in doubles leaks x through *which* doubles can be produced —
``fl(1 + y)`` for y ∈ (−1, −1/2) is a multiple of 2^-53, whereas y itself, output for x = 0, has
ulp 2^-54 there, so half of the outputs in [1/4, 1/2) are impossible for x = 1. Haney et al. (2022),
"Precision-based attacks and interval refining: how to break, then fix, differential privacy on
finite computers", generalise this to other precision-based distinguishers.

Three features of an output x (a float64), each turned into histogram events by the discrete
likelihood-ratio proposer (and into unions of the values seen on one side only, for leaks into
outputs one input never produces), then ranked and certified like any other event:

* the float cell ``(sign, binary exponent, number of trailing zero bits of the 52-bit mantissa)``;
  its distribution differs between inputs when one side's outputs lie on a coarser grid;
* the position of the lowest set bit, ``v(x) = log2`` of the weight of the last 1 bit of x (the
  2-adic valuation of x as a dyadic rational): outputs on a grid of step 2^-k have ``v >= -k``
  wherever they lie, so an output off that grid on one input only (an odd last bit on an
  otherwise even grid) is one cell whatever its exponent;
* round trips ``fl(fl(x − c) + c) == x`` for shifts c taken from the audited pair (and ±1),
  paired with the sign and exponent: true for every output that is ``fl(c + y)`` of some double y,
  and often false otherwise.

Outputs already on a fixed coarse grid (e.g. multiples of 2^-20) have the same structure under
both inputs, so these events carry only the genuine (bounded) likelihood ratio and do not fire.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from dpharness.core import Event

from . import events as _ev

__all__ = [
    "float_cells",
    "lowest_bit",
    "round_trip_cells",
    "shifts_from_pair",
    "propose_float_structure",
    "float_structure_proposals",
]

_MANT = np.uint64((1 << 52) - 1)


def float_cells(x: np.ndarray) -> np.ndarray:
    """Key ``sign << 20 | exponent << 8 | trailing_zero_bits`` of each double (int64)."""
    return _ev.by_blocks(_float_cells, x)


def _float_cells(x: np.ndarray) -> np.ndarray:
    v = np.asarray(x, dtype=np.float64).reshape(-1) + 0.0
    b = v.view(np.uint64)
    tz = _trailing_zeros(b & _MANT)
    b >>= np.uint64(52)  # sign and exponent (v is this function's own copy)
    key = b & np.uint64(0x7FF)
    key <<= np.uint64(8)  # exponent << 8
    b >>= np.uint64(11)
    b <<= np.uint64(20)  # sign << 20
    key |= b
    out = key.view(np.int64)
    out |= tz
    return out


def _trailing_zeros(mant: np.ndarray) -> np.ndarray:
    """Trailing zero bits of each 52-bit mantissa (52 for 0), int64: the bits below the lowest set
    bit are ``(mant - 1) & ~mant``, counted by ``np.bitwise_count`` (all 52 when ``mant`` is 0)."""
    if not hasattr(np, "bitwise_count"):  # numpy < 2.0: the lowest set bit's exponent as a double
        low = np.negative(mant)  # two's complement: ~mant + 1 (wrapping)
        low &= mant  # the lowest set bit
        low |= (mant == 0).view(np.uint8).astype(np.uint64) << np.uint64(52)  # 0 has 52 trailing zeros
        return (low.astype(np.float64).view(np.uint64) >> np.uint64(52)).view(np.int64) - 1023
    below = mant - np.uint64(1)  # wraps for 0: all ones, cut to the mantissa's 52 below
    below &= ~mant
    below &= _MANT
    return np.bitwise_count(below).astype(np.int64)


_ZERO_BIT = 2000  # lowest_bit key of 0.0 (it has no set bit)


def lowest_bit(x: np.ndarray) -> np.ndarray:
    """Exponent v of the weight 2^v of the lowest set bit of each double (int64; 2000 for 0.0)."""
    return _ev.by_blocks(_lowest_bit, x)


def _lowest_bit(x: np.ndarray) -> np.ndarray:
    v = np.asarray(x, dtype=np.float64).reshape(-1) + 0.0
    b = v.view(np.uint64)
    out = _trailing_zeros(b & _MANT)
    expo = b >> np.uint64(52)
    expo &= np.uint64(0x7FF)
    expo = expo.view(np.int64)
    np.maximum(expo, 1, out=expo)  # subnormals: the weight of the last bit is 2^-1074, as for exponent 1
    out += expo
    out -= 1075
    out[v == 0] = _ZERO_BIT
    return out


def _describe_lowest(key: int) -> str:
    key = int(key)
    return "0.0" if key == _ZERO_BIT else f"2^{key}"


def describe_cell(key: int) -> str:
    key = int(key)
    sign, expo, tz = key >> 20, (key >> 8) & 0x7FF, key & 0xFF
    s = "-" if sign else "+"
    if expo == 0:
        where = f"{s}subnormal"
    else:
        e = expo - 1023
        where = f"|x| in [2^{e}, 2^{e + 1}) sign {s}"
    return f"({where}, {tz} trailing zero mantissa bits)"


def round_trip_cells(x: np.ndarray, shifts: Sequence[float]) -> np.ndarray:
    """Key ``sign, exponent, bits [fl(fl(x − c) + c) == x for c in shifts]`` of each double."""
    return _ev.by_blocks(_round_trip_cells, x, tuple(shifts))


def _round_trip_cells(x: np.ndarray, shifts: Sequence[float]) -> np.ndarray:
    """The keys of :func:`round_trip_cells` on one block: each round trip into one scratch array, its
    bit gathered in a byte per output (``shifts_from_pair`` gives at most 6 shifts; more take a wider
    word), and the sign and exponent shifted above them once (three times faster than a temporary per
    operation; the same keys)."""
    v = np.asarray(x, dtype=np.float64).reshape(-1) + 0.0
    b = v.view(np.uint64)
    bits = np.zeros(len(v), dtype=np.uint8 if len(shifts) <= 8 else np.int64)
    trip = np.empty_like(v)
    same = np.empty(len(v), dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):
        for i, c in enumerate(shifts):
            np.subtract(v, c, out=trip)
            trip += c
            np.equal(trip, v, out=same)
            bits |= same.astype(bits.dtype) << bits.dtype.type(i)
    key = (b >> np.uint64(52)).view(np.int64)  # sign and exponent: at most 0xFFF
    key <<= len(shifts)
    key |= bits
    return key


def shifts_from_pair(data: Any, neighbor: Any, limit: int = 6) -> tuple[float, ...]:
    """Candidate additive shifts: numeric values of the pair (entries of small arrays, sums, means), and ±1."""
    vals: list[float] = []
    for d in (data, neighbor):
        try:
            arr = np.asarray(d, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            continue
        if arr.size == 0 or not np.all(np.isfinite(arr)):
            continue
        if arr.size <= 8:
            vals.extend(arr.tolist())
        vals.extend([float(arr.sum()), float(arr.mean())])
    vals.extend([1.0, -1.0])
    out: list[float] = []
    for v in vals:
        if v != 0 and np.isfinite(v) and v not in out:
            out.append(float(v))
    return tuple(out[:limit])


def _histogram_proposals(fa, fb, *, per: int, label: str, what: str, transform, describe) -> list[tuple[Event, bool]]:
    """Likelihood-ratio histogram events over keys, and unions of the keys seen on one side only."""
    out: list[tuple[Event, bool]] = []
    for e in _ev._discrete_events(
        fa, fb, None, None, max_events=per, object_kind=False, label=label, transform=transform, describe=describe
    ):
        out.append((Event(e.contains, e.description.replace(label, f"{what} of the {label}", 1)), False))
    for e, _favours_a in _ev.one_sided_events(fa, fb, label=label, transform=transform, describe=describe):
        out.append((Event(e.contains, e.description.replace(label, f"{what} of the {label}", 1)), True))
    return out


class _Picked:
    """A feature of one coordinate (or of the whole scalar output): ``feature(pick(outputs))``."""

    def __init__(self, feature: Callable[..., np.ndarray], column: int | None, *args) -> None:
        self.feature, self.column, self.args = feature, column, args

    def __call__(self, out) -> np.ndarray:
        arr = np.asarray(out, dtype=np.float64)
        col = arr.reshape(-1) if self.column is None else arr.reshape(len(arr), -1)[:, self.column]
        return self.feature(col, *self.args)


def _scalar_events(
    a: np.ndarray, b: np.ndarray, *, max_events: int, shifts: Sequence[float], label: str, column: int | None
) -> list[tuple[Event, bool]]:
    per = max(2, max_events // 3)
    out = _histogram_proposals(
        float_cells(a),
        float_cells(b),
        per=per,
        label=label,
        what="float cell (sign, exponent, trailing zero bits)",
        transform=_Picked(float_cells, column),
        describe=describe_cell,
    )
    out += _histogram_proposals(
        lowest_bit(a),
        lowest_bit(b),
        per=per,
        label=label,
        what="weight of the lowest set bit",
        transform=_Picked(lowest_bit, column),
        describe=_describe_lowest,
    )
    if shifts:
        sh = tuple(shifts)

        def words(k, sh=sh):
            k = int(k)
            bits = [(k >> i) & 1 for i in range(len(sh))]
            e = (k >> len(sh)) & 0x7FF
            s = "-" if (k >> (len(sh) + 11)) & 1 else "+"
            fails = [repr(c) for c, ok in zip(sh, bits) if not ok]
            trip = f"x-c+c != x for c in [{', '.join(fails)}]" if fails else "x-c+c == x for every shift c"
            return f"(sign {s}, exponent {e - 1023}, {trip})"

        out += _histogram_proposals(
            round_trip_cells(a, sh),
            round_trip_cells(b, sh),
            per=per,
            label=label,
            what="float round-trip pattern",
            transform=_Picked(round_trip_cells, column, sh),
            describe=words,
        )
    return out


def float_structure_proposals(
    train_a, train_b, *, max_events: int, shifts: Sequence[float] = (1.0, -1.0), max_coords: int = 8
) -> list[tuple[Event, bool]]:
    """Float-structure events with a flag each: True for the unions of cells seen on one side only
    (candidates for outputs one input never produces), False for likelihood-ratio histogram sets."""
    a = np.asarray(train_a)
    b = np.asarray(train_b)
    if not np.issubdtype(a.dtype, np.floating):
        return []
    if a.ndim <= 1:
        return _scalar_events(
            a.reshape(-1), b.reshape(-1), max_events=max_events, shifts=shifts, label="output", column=None
        )
    a2, b2 = a.reshape(len(a), -1), b.reshape(len(b), -1)
    k = min(a2.shape[1], max_coords)
    out: list[tuple[Event, bool]] = []
    for j in range(k):
        out.extend(
            _scalar_events(
                a2[:, j], b2[:, j], max_events=max(2, max_events // k), shifts=shifts, label=f"coordinate {j}", column=j
            )
        )
    return out


def propose_float_structure(
    train_a, train_b, *, max_events: int, shifts: Sequence[float] = (1.0, -1.0), max_coords: int = 8
) -> list[Event]:
    """Float-structure events for float scalars or the first ``max_coords`` coordinates of float vectors."""
    return [
        e
        for e, _ in float_structure_proposals(
            train_a, train_b, max_events=max_events, shifts=shifts, max_coords=max_coords
        )
    ]
