"""Rounding family: value ranges narrower than a binade crossed with the last bits of the output.

A rounding step that depends on the input (round-half-even on one input and truncation on the
other, a bias in the last bit of a sum computed in a different order, an integer mechanism that
rounds to an even grid except in some range) changes how often the last bits of outputs in a narrow
value range take each pattern. Averaged over a whole binade (the float-structure family's cells) such
a bias is diluted by the rest of the binade; on the right sub-range it stands out: Mironov (2012) and
Haney et al. (2022) (see :mod:`dpharness.auditors.floats`) describe leaks of this kind.

Features (each a histogram over cells; the proposed events are likelihood-ratio sets and single cells
whose two sides' training frequencies differ by a large ratio, plus the unions of cells seen on one
side only):

* floats: ``(sign, binary exponent, top k bits of the mantissa, low b bits of the mantissa)`` for
  ``(k, b)`` in :data:`FLOAT_SPLITS`, i.e. each binade cut into ``2^k`` equal sub-ranges;
* integers: ``x mod 2^b`` for ``b`` in 1..3 (an odd output on an otherwise even grid), and
  ``(sign, bit length, top k bits below the leading bit, x mod 2^b)`` for ``(k, b)`` in
  :data:`INT_SPLITS`.
"""

from __future__ import annotations

import numpy as np

from dpharness.core import Event

from .. import events as _ev
from ._protocol import Proposal, ProposalContext

__all__ = [
    "FLOAT_SPLITS",
    "INT_SPLITS",
    "RESIDUE_BITS",
    "float_subrange_bits",
    "int_subrange_bits",
    "int_residues",
    "RoundingFamily",
    "propose_rounding",
]

FLOAT_SPLITS = ((3, 1), (5, 1))  # (sub-range bits k, low mantissa bits b)
INT_SPLITS = ((2, 1), (4, 1))
RESIDUE_BITS = (1, 2, 3)
_MAX_COORDS = 4
_MANT = np.uint64((1 << 52) - 1)


# --------------------------------------------------------------------------- features


def float_subrange_bits(x: np.ndarray, k: int, b: int) -> np.ndarray:
    """Key ``(sign, exponent, top k mantissa bits, low b mantissa bits)`` of each double (int64)."""
    return _ev.by_blocks(_float_subrange_bits, x, k, b)


def _float_subrange_bits(x: np.ndarray, k: int, b: int) -> np.ndarray:
    v = np.asarray(x, dtype=np.float64).reshape(-1) + 0.0
    bits = v.view(np.uint64)
    key = bits >> np.uint64(52 - k)  # sign, exponent (12 bits) and the top k mantissa bits
    key <<= np.uint64(b)
    bits &= np.uint64((1 << b) - 1)  # the low b bits of the mantissa (v is this function's own copy)
    key |= bits
    return key.view(np.int64)


def _describe_float(key: int, k: int, b: int) -> str:
    key = int(key)
    low, top, head = key & ((1 << b) - 1), (key >> b) & ((1 << k) - 1), key >> (k + b)
    sign, expo = "-" if head >> 11 else "+", head & 0x7FF
    if expo == 0:
        where = f"{sign}subnormal, sub-range {top + 1}/{1 << k}"
    else:
        e = expo - 1023
        lo, hi = 2.0**e * (1 + top / (1 << k)), 2.0**e * (1 + (top + 1) / (1 << k))
        where = f"|x| in [{lo!r}, {hi!r}) sign {sign}"
    return f"({where}, last {b} mantissa bit{'s' if b > 1 else ''} = {low:0{b}b})"


def int_residues(x: np.ndarray, b: int) -> np.ndarray:
    """``x mod 2^b`` of each integer output (int64)."""
    return np.asarray(x).reshape(-1).astype(np.int64) & ((1 << b) - 1)


def int_subrange_bits(x: np.ndarray, k: int, b: int) -> np.ndarray:
    """Key ``(sign, bit length of |x|, top k bits of |x| below its leading bit, x mod 2^b)`` (int64)."""
    return _ev.by_blocks(_int_subrange_bits, x, k, b)


def _int_subrange_bits(x: np.ndarray, k: int, b: int) -> np.ndarray:
    v = np.asarray(x).reshape(-1).astype(np.int64)
    mag = np.abs(v)
    length = np.zeros(len(v), np.int64)
    nz = mag > 0
    length[nz] = np.floor(np.log2(mag[nz].astype(np.float64))).astype(np.int64) + 1
    # float log2 may be off by one near powers of two above 2^53: correct it exactly
    over = nz & (length < 63) & ((mag >> np.minimum(length, 62)) > 0)
    length[over] += 1
    under = nz & (length > 1) & ((mag >> np.maximum(length - 1, 0)) == 0)
    length[under] -= 1
    below = np.maximum(length - 1, 0)  # bits below the leading one
    shift = below - k
    top = np.where(shift >= 0, mag >> np.maximum(shift, 0), mag << np.maximum(-shift, 0)) & ((1 << k) - 1)
    sign = (v < 0).astype(np.int64)
    return (((sign << 7) | length) << (k + b)) | (top << b) | (v & ((1 << b) - 1))


def _describe_int(key: int, k: int, b: int) -> str:
    key = int(key)
    low, top, head = key & ((1 << b) - 1), (key >> b) & ((1 << k) - 1), key >> (k + b)
    sign, length = "-" if head >> 7 else "+", head & 0x7F
    if length == 0:
        return f"(x = 0, x mod {1 << b} = {low})"
    lo = 2 ** (length - 1)
    width = lo / (1 << k)
    return f"(|x| in [{lo + top * width:g}, {lo + (top + 1) * width:g}) sign {sign}, x mod {1 << b} = {low})"


class _Feature:
    """``feature(column of outputs)`` as a picklable callable (one instance per feature, so that the
    events of one feature share the cached keys of a chunk)."""

    def __init__(self, fn, column: int | None, *args) -> None:
        self.fn, self.column, self.args = fn, column, args

    def __call__(self, out) -> np.ndarray:
        arr = np.asarray(out)
        col = arr.reshape(-1) if self.column is None else arr.reshape(len(arr), -1)[:, self.column]
        if col.dtype.kind in "iu" and col.dtype.itemsize <= 2 and len(col) > 4 * 256**col.dtype.itemsize:
            # 8- and 16-bit integers (bits, small counts): the feature, elementwise, of every value the
            # dtype holds, read off by each row's bit pattern — the same keys as computing it row by row
            unsigned = np.dtype(f"u{col.dtype.itemsize}")
            values = np.arange(256**col.dtype.itemsize, dtype=unsigned).view(col.dtype)
            return np.take(self.fn(values, *self.args), col.view(unsigned))
        return self.fn(col, *self.args)


# --------------------------------------------------------------------------- proposal


def _features(floating: bool, column: int | None) -> list[tuple[str, _Feature, object]]:
    out: list[tuple[str, _Feature, object]] = []
    if floating:
        for k, b in FLOAT_SPLITS:
            out.append(
                (
                    f"sub-binade range (1/{1 << k} binade) and last {b} mantissa bit{'s' if b > 1 else ''}",
                    _Feature(float_subrange_bits, column, k, b),
                    lambda key, k=k, b=b: _describe_float(key, k, b),
                )
            )
    else:
        for b in RESIDUE_BITS:
            out.append((f"residue mod {1 << b}", _Feature(int_residues, column, b), lambda key: str(int(key))))
        for k, b in INT_SPLITS:
            out.append(
                (
                    f"sub-range (1/{1 << k} of its power of two) and residue mod {1 << b}",
                    _Feature(int_subrange_bits, column, k, b),
                    lambda key, k=k, b=b: _describe_int(key, k, b),
                )
            )
    return out


def propose_rounding(train_a, train_b, *, max_events: int, max_coords: int = _MAX_COORDS) -> list[tuple[Event, bool]]:
    """Rounding events (event, one-sided flag) for float or integer scalars, or the first
    ``max_coords`` coordinates of vectors."""
    a, b = np.asarray(train_a), np.asarray(train_b)
    floating = np.issubdtype(a.dtype, np.floating)
    if not (floating or np.issubdtype(a.dtype, np.integer) or a.dtype == bool):
        return []
    if a.dtype == bool:
        return []  # one bit: the histogram family already has every event
    cols: list[int | None] = [None] if a.ndim <= 1 else list(range(min(a.reshape(len(a), -1).shape[1], max_coords)))
    feats = [(col, f) for col in cols for f in _features(floating, col)]
    per = max(2, max_events // len(feats))
    out: list[tuple[Event, bool]] = []
    for col, (what, feat, describe) in feats:
        label = "output" if col is None else f"coordinate {col}"
        fa, fb = feat(a), feat(b)
        singles = _ev.best_single_keys(
            fa, fb, max_events=max(1, per // 2), label=label, transform=feat, describe=describe
        )
        sets = _ev._discrete_events(
            fa,
            fb,
            None,
            None,
            max_events=max(1, per - len(singles)),
            object_kind=False,
            label=label,
            transform=feat,
            describe=describe,
        )
        for e in singles + sets:
            out.append((Event(e.contains, e.description.replace(label, f"{what} of the {label}", 1)), False))
        for e, _ in _ev.one_sided_events(fa, fb, label=label, transform=feat, describe=describe):
            out.append((Event(e.contains, e.description.replace(label, f"{what} of the {label}", 1)), True))
    return out


class RoundingFamily:
    """Sub-binade value range × last bits (floats, unless ``ideal_numerics``) and residues ×
    sub-ranges (integers): see the module docstring."""

    name = "rounding"

    def applies(self, kind: str, ctx: ProposalContext) -> bool:
        if kind in ("float", "float-vector"):
            return not ctx.ideal_numerics
        return kind in ("discrete", "discrete-vector")

    def propose(self, train_a, train_b, ctx: ProposalContext) -> list[Proposal]:
        return [
            Proposal(e, self.name, one_sided)
            for e, one_sided in propose_rounding(train_a, train_b, max_events=ctx.max_events)
        ]
