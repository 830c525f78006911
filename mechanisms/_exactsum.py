"""Exact sums of float64 arrays at numpy speed: the exact rational value of the sum of the records'
binary doubles (and of their squares and pairwise products), with no Python loop per record. The
aggregates of :mod:`dpharness.mechanisms.parts.transformations` and
:mod:`dpharness.mechanisms.parts.grouping` release a function of this exact value
(the noise step rounds it to its grid exactly), so nothing here is a correctly rounded float: every
function returns the :class:`~fractions.Fraction` equal to ``sum(Fraction(v) for v in x)``.

Method: error-free extraction (Rump, Ogita & Oishi 2008, "Accurate floating-point summation part I:
faithful rounding", SIAM J. Sci. Comput. 31(1), Algorithm 3.2 *ExtractVector* and Lemma 3.3), with an
offset ``1.5 · 2**k`` that keeps every extracted part in one binade, so that it reads as an integer.
The argument is complete here. For ``n`` doubles ``p_i`` in one block:

1. ``a = max|p_i|`` (one max and one min), ``e`` with ``a < 2**e``, ``k = max(e + m, −1022)`` for a
   chosen ``m >= 2``, and ``β = 1.5 · 2**k``, a double.
2. ``t_i = fl(β + p_i)``. Since ``|p_i| < 2**(k − m) <= 2**(k − 2)``, ``β + p_i`` lies in
   ``[1.25 · 2**k, 1.75 · 2**k]``, and so does ``t_i`` (rounding is monotone and both ends are doubles):
   every ``t_i`` is a normal double (``k >= −1022``), finite (``k <= 1023``, see 5.) and in the binade
   ``[2**k, 2**(k+1))``, where the doubles are the multiples of ``2**(k − 52)``. So ``q_i = t_i − β`` is
   ``z_i · 2**(k − 52)`` for an integer ``z_i``, and for positive doubles of one binade the bit
   pattern is affine in the value: ``z_i = bits(t_i) − bits(β)`` exactly.
3. ``r_i = p_i − q_i = (β + p_i) − t_i`` is the rounding error of one addition, a double (Knuth, TAOCP
   vol. 2, §4.2.2; here directly: if ``|p_i| < 2**(k − 53)``, half a spacing, then ``t_i = β`` and
   ``r_i = p_i``; otherwise ``ulp(p_i) >= 2**(k − 105)`` divides ``p_i`` and ``q_i``, so ``r_i`` is a
   multiple of it of magnitude at most ``2**(k − 53) <= 2**52 · ulp(p_i)``), and ``|r_i| <= 2**(k − 53)``.
   It is computed exactly as ``fl(fl(β − t_i) + p_i)``: ``β − t_i = −q_i`` is a multiple of ``2**(k − 52)``
   of magnitude at most ``2**(k − 2)``, a double, so the subtraction is exact, and the addition's exact
   result ``r_i`` is a double, so it is exact too. Hence ``p_i = z_i · 2**(k − 52) + r_i`` exactly.
4. ``Σ z_i`` is summed as unsigned 64-bit integers, which wrap modulo ``2**64``: the bit patterns are
   summed and ``n · bits(β)`` subtracted in Python. As ``|q_i| <= |p_i| + |r_i| < 2**(k − m) +
   2**(k − 53)``, ``|z_i| <= 2**(52 − m)``, and with ``m = max(2, bitlength(n) − 10)``,
   ``|Σ z_i| <= n · 2**(52 − m) < 2**62``: the residue modulo ``2**64`` read as a signed number is the
   exact integer ``Σ z_i``. The block's sum is ``Σ z_i · 2**(k − 52) + Σ r_i``; ``k − 52 >= −1074``, so
   the first term is an integer number of units ``2**−1074`` (every double is one), kept as a Python int.
5. Repeat on the remainders ``r_i`` until they are all zero (``±0`` add nothing). ``max|r_i| <= 2**(k −
   53) < 2**(k − 52)``, so ``k' = max(k − 52 + m, −1022)`` satisfies step 1's condition for the next level
   without reading the remainders' extremes (read instead once they are compressed, from the third
   level on, to the non-zero ones). ``k' < k`` (``m < 52``), and at ``k = −1022`` the spacing is
   ``2**−1074`` and every remainder is zero: at most about ``2100 / (52 − m)`` levels, and two for data
   of one magnitude range (a double has 53 bits). If ``k`` would exceed 1023 (``a >= 2**(1023 − m)``:
   ``t_i`` could overflow), the block is split into its elements with ``|p_i| >= 2**−894``, summed scaled
   by ``2**−128`` (an exact scaling: the results are normal) and the total shifted back, and the others
   (far below the overflow).

The blocks are ``2**15`` elements (they stay in cache), and the blocks' integers are added in Python (a
few big-integer additions per block). Data of one magnitude range take two levels of four vectorised
operations each.

Grouped sums (:func:`exact_sums_by`) extract the same way, block by block, with ``m = max(2,
bitlength(n))`` for blocks of at most ``n`` values, and add ``u_i = β − t_i = −q_i`` per group with
``np.bincount`` (float64, in order): every partial sum of a group
is a multiple of ``2**(k − 52)`` of magnitude at most ``n (2**(k − m) + 2**(k − 53)) <= 2**(k + 1)``,
that is at most ``2**53`` spacings, so a double, and each addition is exact (in any order). Each
group's level sum is then an exact integer multiple of ``2**(k − 52)``. Sums of squares per group
(:func:`sums_by_units`) add the exact partial products below per group the same way.

Squares and products: each factor is split exactly into two halves of at most 26 significant bits
(Veltkamp's split, Dekker 1971, "A floating-point technique for extending the available precision",
Numer. Math. 18, §5; Ogita, Rump & Oishi 2005, Algorithm 3.2), so ``x·y = hx·hy + hx·ly + lx·hy + lx·ly``
with each partial product an exact double (at most 52 bits) when no overflow or underflow occurs: for
factors whose non-zero magnitudes are in ``[2**−485, 2**510)`` the products stay below ``2**1021`` and
are multiples of ``2**−1074`` (each low half is a multiple of ``ulp(x) >= 2**−537``). The partial
products are then summed exactly as above. Any other element (a subnormal, a tiny or a huge factor) is
first normalised exactly (``x = f · 2**s``, ``f`` in ``[0.5, 1)``, ``np.frexp``), its partial products
computed on the fractions (exact, at least ``2**−108``) and each scaled by ``2**(s − 512·b)``,
``b = floor(s / 512)``, into ``[2**−110, 2**511)`` (exact); the scaled products of each band ``b`` are
summed exactly and the band's integer carries the factor ``2**(512 b)``, so a product of two
subnormals (below ``2**−1074``) is still exact.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np

from dpharness.errors import ParameterError

__all__ = ["exact_sum", "exact_sum_squares", "exact_sum_products", "exact_sums_by", "sums_by_units"]

_BLOCK = 1 << 15  # elements extracted at once (in cache)
_GROUP_BLOCK = 1 << 15  # elements per block of a grouped sum
_UNIT = 1074  # results are integers in units of 2**-1074, the spacing of the subnormal doubles
_K_MIN, _K_MAX = -1022, 1023  # 1.5 * 2**k and the binade [2**k, 2**(k+1)) stay normal and finite
_SPLIT_SCALE = 128  # overflowing blocks: the large elements are summed scaled by 2**-128
_SPLIT_AT = 2.0**-894  # ... those at least this large (scaled, they stay normal: the scaling is exact)
_VELTKAMP = 134217729.0  # 2**27 + 1: splits a double into two halves of at most 26 bits
_SAFE_LO, _SAFE_HI = 2.0**-485, 2.0**510  # factors whose partial products are exact doubles
_BAND = 512  # exponent band of the normalised partial products
_ABS = (1 << 63) - 1  # the bits of |x|


def _bits(x: float) -> int:
    """The bit pattern of a double."""
    return int.from_bytes(struct.pack("<d", x), "little")


def _refuse_non_finite() -> None:
    raise ParameterError(
        "an aggregate received a value that is not finite (NaN or infinity); the exact sum is defined "
        "on finite records only: clamp or filter the data (dp.clamp(lo, hi)) before the aggregate."
    )


def _extremes(p: np.ndarray) -> tuple[float, float]:
    hi, lo = float(p.max()), float(p.min())
    if not (math.isfinite(hi) and math.isfinite(lo)):
        _refuse_non_finite()
    return hi, lo


def _level(hi: float, lo: float, m: int) -> int:
    """The exponent ``k`` of the extraction level for a block whose values lie in ``[lo, hi]``."""
    return max(math.frexp(max(hi, -lo))[1] + m, _K_MIN)


def _split_large(p: np.ndarray) -> int:
    """Units of ``Σ p`` for a block whose extraction would overflow: its large elements scaled by
    ``2**-128`` (exactly), the rest as they are."""
    large = np.abs(p) >= _SPLIT_AT
    scaled = p[large] * 2.0**-_SPLIT_SCALE
    return (_units(scaled) << _SPLIT_SCALE) + _units(p[~large])


def _block_units(p: np.ndarray, t: np.ndarray, r: tuple[np.ndarray, np.ndarray]) -> int:
    """``Σ p`` exactly, in units of ``2**-1074`` (see the module docstring, steps 1-5). A remainder is
    never ``−0.0`` (``x + (−x)`` is ``+0`` in round-to-nearest, and ``β − t_i`` is ``+0`` when zero), so the
    remainders are all zero iff the largest bit pattern among them is 0; the next level's ``k`` is the
    bound ``k − 52 + m`` (``|r_i| <= 2**(k − 53)``) while nothing is compressed, else from the extremes."""
    total = 0
    hi, lo = _extremes(p)
    if hi == 0.0 and lo == 0.0:
        return 0
    m = max(2, p.size.bit_length() - 10)
    k = _level(hi, lo, m)
    level = 0
    while True:
        n = p.size
        if k > _K_MAX:
            return total + _split_large(p)
        beta = math.ldexp(1.5, k)
        tt = t[:n]
        np.add(p, beta, out=tt)
        z = int(tt.view(np.uint64).sum(dtype=np.uint64)) - n * (((k + 1023) << 52) | (1 << 51))  # − n·bits(β)
        total += (((z + (1 << 63)) % (1 << 64)) - (1 << 63)) << (k - 52 + _UNIT)  # the signed residue
        rest = r[level & 1][:n]
        np.subtract(beta, tt, out=tt)
        np.add(tt, p, out=rest)
        p = rest
        level += 1
        if not rest.view(np.uint64).max():
            return total
        if level >= 2:  # what is left is sparse: compress it, and read its extremes
            p = p[np.flatnonzero(p)]
            m = max(2, p.size.bit_length() - 10)
            k = _level(*_extremes(p), m)
        else:
            k = max(k - 52 + m, _K_MIN)


def _units(x: np.ndarray) -> int:
    """``Σ x`` exactly, in units of ``2**-1074`` (a Python int), block by block."""
    x = np.ascontiguousarray(x, dtype=np.float64).ravel()
    if x.size == 0:
        return 0
    size = min(_BLOCK, x.size)
    t, r = np.empty(size), (np.empty(size), np.empty(size))
    return sum(_block_units(x[i : i + _BLOCK], t, r) for i in range(0, x.size, _BLOCK))


def _fraction(units: int, exponent: int = -_UNIT) -> Fraction:
    """``units · 2**exponent`` as a Fraction."""
    return Fraction(units << exponent) if exponent >= 0 else Fraction(units, 1 << -exponent)


def exact_sum(x: np.ndarray) -> Fraction:
    """The exact sum of the doubles of ``x`` (any shape; empty: 0). ParameterError if one is not finite."""
    return _fraction(_units(x))


# --------------------------------------------------------------------------- products and squares


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp's split ``x = hi + lo``, each of at most 26 significant bits (exact without overflow)."""
    c = x * _VELTKAMP
    hi = c - (c - x)
    return hi, x - hi


def _product_terms(x: np.ndarray, y: np.ndarray | None) -> list[np.ndarray]:
    """Exact doubles whose sum is ``Σ x_i y_i`` (``y`` None: ``Σ x_i²``), for factors in the safe range."""
    hx, lx = _split(x)
    if y is None:
        return [hx * hx, 2.0 * (hx * lx), lx * lx]
    hy, ly = _split(y)
    return [hx * hy, hx * ly, lx * hy, lx * ly]


def _all_safe(x: np.ndarray) -> bool:
    """Whether every non-zero ``|x_i|`` is in ``[2**-485, 2**510)`` (two reductions on the bit patterns:
    ``bits(|x|) − 1`` wraps a zero to the largest integer, out of the way of the minimum)."""
    hi, lo = _extremes(x)
    if max(hi, -lo) >= _SAFE_HI:
        return False
    low = x.view(np.uint64) & np.uint64(_ABS)
    low -= np.uint64(1)
    return int(low.min()) >= _bits(_SAFE_LO) - 1


def _safe(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    return (a < _SAFE_HI) & ((a >= _SAFE_LO) | (a == 0))


def _general_products(x: np.ndarray, y: np.ndarray, parts: dict[int, int]) -> None:
    """Add ``Σ x_i y_i`` for any finite factors to ``parts`` (exponent -> integer): the normalised
    fractions' exact partial products, scaled exactly into exponent bands of 512."""
    fx, sx = np.frexp(x)
    fy, sy = np.frexp(y)
    s = sx.astype(np.int64) + sy
    band = np.floor_divide(s, _BAND)
    offset = s - band * _BAND
    terms = _product_terms(fx, fy)
    for b in np.unique(band).tolist():
        rows = band == b
        units = sum(_units(np.ldexp(term[rows], offset[rows])) for term in terms)
        parts[b * _BAND - _UNIT] = parts.get(b * _BAND - _UNIT, 0) + units


def _products(x: np.ndarray, y: np.ndarray | None) -> Fraction:
    """``Σ x_i y_i`` (``y`` None: ``Σ x_i²``) exactly, block by block: a block whose factors are all in
    the safe range by its partial products, any other by its safe elements so and the rest in general."""
    x = np.ascontiguousarray(x, dtype=np.float64).ravel()
    if y is not None:
        y = np.ascontiguousarray(y, dtype=np.float64).ravel()
        if x.shape != y.shape:
            raise ParameterError(f"x has {x.size} values and y {y.size}; pass two arrays of the same length.")
    parts = {-_UNIT: 0}
    size = min(_BLOCK, x.size)
    t, r = np.empty(size), (np.empty(size), np.empty(size))
    for i in range(0, x.size, _BLOCK):
        bx = x[i : i + _BLOCK]
        by = None if y is None else y[i : i + _BLOCK]
        safe_x, safe_y = _all_safe(bx), by is None or _all_safe(by)  # each refuses a value not finite
        if not (safe_x and safe_y):
            safe = _safe(bx) if by is None else _safe(bx) & _safe(by)
            _general_products(bx[~safe], (bx if by is None else by)[~safe], parts)
            bx, by = bx[safe], None if by is None else by[safe]
        for term in _product_terms(bx, by):
            parts[-_UNIT] += _block_units(term, t, r) if term.size else 0
    low = min(parts)
    return _fraction(sum(u << (e - low) for e, u in parts.items()), low)


def exact_sum_squares(x: np.ndarray) -> Fraction:
    """The exact sum of the squares of the doubles of ``x``. ParameterError if one is not finite."""
    return _products(x, None)


def exact_sum_products(x: np.ndarray, y: np.ndarray) -> Fraction:
    """The exact sum of ``x_i · y_i`` over the doubles of two arrays of the same length."""
    return _products(x, y)


# --------------------------------------------------------------------------- grouped sums


def _grouped_units(codes: np.ndarray, p: np.ndarray, n_groups: int, acc: np.ndarray) -> None:
    """Add ``Σ p`` per group (``codes``) to ``acc`` (an object array of Python ints, units of
    ``2**-1074``): the extraction above with ``m = bitlength(n)``, the level sums by ``np.bincount``."""
    hi, lo = _extremes(p) if p.size else (0.0, 0.0)
    level = 0
    while hi != 0.0 or lo != 0.0:
        n = p.size
        m = max(2, n.bit_length())
        k = _level(hi, lo, m)
        if k > _K_MAX:
            large = np.abs(p) >= _SPLIT_AT
            part = np.zeros(n_groups, dtype=object)
            _grouped_units(codes[large], p[large] * 2.0**-_SPLIT_SCALE, n_groups, part)
            acc += part * (1 << _SPLIT_SCALE)
            codes, p = codes[~large], p[~large]
            hi, lo = _extremes(p) if p.size else (0.0, 0.0)
            continue
        beta = math.ldexp(1.5, k)
        t = p + beta
        np.subtract(beta, t, out=t)  # −q, exactly
        sums = np.bincount(codes, weights=t, minlength=n_groups)  # exact: multiples of 2**(k-52) below 2**(k+1)
        whole = np.ldexp(sums, 52 - k).astype(np.int64)  # exact integers of magnitude <= 2**53
        acc -= whole.astype(object) * (1 << (k - 52 + _UNIT))
        p = t + p  # the remainders, exactly
        level += 1
        hi, lo = _extremes(p)
        if level >= 2 and (hi != 0.0 or lo != 0.0):
            keep = np.flatnonzero(p)
            codes, p = codes[keep], p[keep]


def _grouped_blocks(codes: np.ndarray, x: np.ndarray, n_groups: int, acc: np.ndarray) -> None:
    """Add ``Σ x`` per group to ``acc``: two levels of the extraction on blocks of ``2**15`` (in cache) with
    the same ``k`` for every block (from the extremes of all of ``x``; a larger ``k`` than a block needs is
    still valid), so each level's integers add up across blocks in int64 (a block adds at most ``2**51``
    per group; flushed to ``acc`` every 1024 blocks); the few non-zero remainders left after the two
    levels, gathered from all blocks, by :func:`_grouped_units`."""
    if x.size == 0:
        return
    hi, lo = _extremes(x)
    if hi == 0.0 and lo == 0.0:
        return
    m = _GROUP_BLOCK.bit_length()  # 2**m > n for every block (the bound of _grouped_units)
    k1 = _level(hi, lo, m)
    if k1 > _K_MAX:
        _grouped_units(codes, x, n_groups, acc)  # splits the large values
        return
    levels = [(k, math.ldexp(1.5, k), np.zeros(n_groups, dtype=np.int64)) for k in (k1, max(k1 - 52 + m, _K_MIN))]
    size = min(_GROUP_BLOCK, x.size)
    t, r = np.empty(size), (np.empty(size), np.empty(size))
    tail_codes, tail = [], []

    def flush() -> None:
        for k, _, total in levels:
            acc[:] += total.astype(object) * (1 << (k - 52 + _UNIT))
            total[:] = 0

    for block, i in enumerate(range(0, x.size, _GROUP_BLOCK)):
        p, c = x[i : i + _GROUP_BLOCK], codes[i : i + _GROUP_BLOCK]
        n = p.size
        for (k, beta, total), rest in zip(levels, r):
            tt, rr = t[:n], rest[:n]
            np.add(p, beta, out=tt)
            np.subtract(beta, tt, out=tt)  # −q, exactly
            total -= np.ldexp(np.bincount(c, weights=tt, minlength=n_groups), 52 - k).astype(np.int64)
            np.add(tt, p, out=rr)  # the remainders, exactly
            p = rr
        if p.view(np.uint64).max():  # a remainder is never −0.0
            keep = np.flatnonzero(p)
            tail_codes.append(c[keep])
            tail.append(p[keep])
        if block % 1024 == 1023:
            flush()
    flush()
    if tail:
        _grouped_units(np.concatenate(tail_codes), np.concatenate(tail), n_groups, acc)


def sums_by_units(codes: np.ndarray, x: np.ndarray, n_groups: int, squares: bool = False) -> tuple[np.ndarray, int]:
    """Per group, the exact sum of the doubles of ``x`` (``squares``: of their squares) as integers and one
    exponent: group ``j`` sums to ``units[j] · 2**exponent`` (``units`` an object array of Python ints,
    compared and scaled at numpy's pace). ``codes`` as in :func:`exact_sums_by`."""
    x = np.ascontiguousarray(x, dtype=np.float64).ravel()
    codes = np.asarray(codes).ravel()
    if codes.shape != x.shape or (codes.size and not np.issubdtype(codes.dtype, np.integer)):
        raise ParameterError(f"codes has shape {codes.shape}; pass one integer group index per value ({x.size}).")
    if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= n_groups):
        raise ParameterError(f"codes must lie in [0, n_groups={n_groups}); pass group indices below n_groups.")
    codes = codes.astype(np.intp, copy=False)
    acc = np.zeros(n_groups, dtype=object)
    if not squares:
        _grouped_blocks(codes, x, n_groups, acc)
        return acc, -_UNIT
    if x.size:
        _extremes(x)  # refuses a value that is not finite
    safe = _safe(x)
    for term in _product_terms(x[safe], None):  # exact doubles, as in exact_sum_squares
        _grouped_blocks(codes[safe], term, n_groups, acc)
    if safe.all():
        return acc, -_UNIT
    # the others normalised, their exact partial products scaled into bands of 2**512 (as _general_products)
    fraction, s = np.frexp(x[~safe])
    s = 2 * s.astype(np.int64)
    band = np.floor_divide(s, _BAND)
    offset, rest = s - band * _BAND, codes[~safe]
    bands = {}
    for b in np.unique(band).tolist():
        rows = band == b
        bands[b * _BAND] = part = np.zeros(n_groups, dtype=object)
        for term in _product_terms(fraction[rows], None):
            _grouped_blocks(rest[rows], np.ldexp(term, offset[rows]), n_groups, part)
    low = min(0, *bands)
    acc = acc * (1 << -low)
    for e, part in bands.items():
        acc += part * (1 << (e - low))
    return acc, low - _UNIT


def exact_sums_by(codes: np.ndarray, x: np.ndarray, n_groups: int) -> list[Fraction]:
    """The exact sum of the doubles of ``x`` per group: ``codes`` (integers in ``[0, n_groups)``, one
    per value) names each value's group; an empty group sums to 0."""
    units, exponent = sums_by_units(codes, x, n_groups)
    return [_fraction(int(u), exponent) for u in units.tolist()]


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
