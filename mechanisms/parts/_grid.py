"""The grid every noise-adding family rounds to: the rounded centres ``floor(v/g + 1/2)`` (exact integers),
the float release ``g * (c + noise)``, the limit on noise scales in grid steps, and the rule bounding
the distance of rounded centres (:func:`grid_steps`, which the prover states and calibrations use).
Shared by the noise, selection, threshold and grouping families."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness.errors import ParameterError

from ._base import Distance, Space, _frac, _rhu

# the exact discrete Laplace sampler's smallest scale, in grid steps (mechanisms._exact.discrete_laplace)
LAPLACE_MIN_UNITS = Fraction(1, 2**1000)


def _centres_units(units: np.ndarray, exponent: int, g: Fraction) -> np.ndarray:
    """``_centres`` of the scalar values ``units[i] · 2**exponent`` (Python ints), in integer arithmetic
    on the whole array: floor(v/g + 1/2) = floor((2·u·g_d + 2**E·g_n) / (2**(E+1)·g_n)) with E = −exponent
    (or v = u·2**exponent an integer multiple when exponent >= 0)."""
    gn, gd = g.numerator, g.denominator
    u = np.asarray(units)
    if u.dtype != object and len(u):  # machine integers: int64 arithmetic when nothing can overflow
        big = max(-int(u.min()), int(u.max()))
        num_max = 2 * big * (gd << max(exponent, 0)) + (gn << max(-exponent, 0))
        den = 2 * gn if exponent >= 0 else gn << (1 - exponent)
        if num_max < 2**62 and den < 2**62:
            u64 = u.astype(np.int64)
            if exponent >= 0:
                num64 = 2 * u64 * (gd << exponent) + gn
            else:
                num64 = 2 * u64 * gd + (gn << -exponent)
            return num64 // den  # floor division, as Python's //
    u = np.asarray(units, dtype=object)
    if exponent >= 0:
        num, den = 2 * u * (gd << exponent) + gn, 2 * gn
    else:
        num, den = 2 * u * gd + (gn << -exponent), gn << (1 - exponent)
    centres = num // den
    if not len(centres):
        return np.zeros(0, dtype=np.int64)
    return _int_array(centres.tolist())


def _int_array(centres: Any) -> np.ndarray:
    """Exact integer centres as int64 where every one fits with room for noise (``|c| < 2**62``), else as
    an object array of Python ints: no centre is ever capped."""
    values = [int(c) for c in centres]
    if all(-(2**62) < c < 2**62 for c in values):
        return np.array(values, dtype=np.int64)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def centres_of_sums(codes: np.ndarray, x: np.ndarray, n_groups: int, g: Fraction) -> np.ndarray:
    """``_centres`` of the exact sums of the doubles ``x`` per group (``codes[k]`` in ``[0, n_groups)`` the
    group of ``x[k]``), as int64 (as Python ints in an object array when one is beyond ``2**62``), equal to the
    exact computation at every input.

    A filter, then exact arithmetic where it cannot decide: float sums ``S`` by ``numpy.bincount``
    (recursive summation: ``|S − v| <= γ_{n−1} Σ|x|`` with ``γ_k = k·u/(1 − k·u)``, ``u = 2**-53``; Higham,
    *Accuracy and Stability of Numerical Algorithms*, 2002, §4.2) enclose each exact sum ``v`` in
    ``[S − B, S + B]`` with ``B = (n + 2)·2**-51 · Σ|x|`` (computed the same way and over twice the bound,
    so its own rounding is covered); the float evaluation of ``(S ± B)/g + 1/2`` is widened by ``2**-40``
    of its magnitude (over 2**10 times its few roundings, and the rounding of ``g`` to a double). A group
    whose widened interval lies within one integer step has that floor as its centre; the others (ties,
    near-ties, values beyond ``2**50`` steps, non-finite float sums) get the exact sum
    (:func:`~dpharness.mechanisms._exactsum.sums_by_units`) and :func:`_centres_units`."""
    from dpharness.mechanisms._exactsum import sums_by_units

    x = np.ascontiguousarray(x, dtype=np.float64).ravel()
    codes = np.asarray(codes, dtype=np.intp).ravel()
    out = np.zeros(n_groups, dtype=np.int64)
    if n_groups == 0:
        return out
    if x.size and 4 * x.size < n_groups:  # most groups empty (sum 0, centre 0): only the others are computed,
        present, inverse = np.unique(codes, return_inverse=True)  # each summed in the same order as below
        some = centres_of_sums(inverse.reshape(-1), x, len(present), g)
        out = out.astype(some.dtype)  # object when a centre is beyond int64's room
        out[present] = some
        return out
    gf = float(g)
    sure = np.zeros(n_groups, dtype=bool)
    if x.size and np.isfinite(gf) and gf >= 2.0**-1000 and gf <= 2.0**1000:
        with np.errstate(all="ignore"):  # overflow gives inf or nan, which the test below rejects
            s = np.bincount(codes, weights=x, minlength=n_groups)
            b = np.bincount(codes, weights=np.abs(x), minlength=n_groups) * ((x.size + 2) * 2.0**-51) + 2.0**-1000
            lo = (s - b) / gf + 0.5
            hi = (s + b) / gf + 0.5
            slack = ((np.abs(s) + b) / gf + 1.0) * 2.0**-40
            c_lo, c_hi = np.floor(lo - slack), np.floor(hi + slack)
            sure = (c_lo == c_hi) & (np.abs(c_lo) <= 2.0**50)
        out[sure] = c_lo[sure].astype(np.int64)
    elif not x.size:
        return _centres_units(np.zeros(n_groups, dtype=object), 0, g)
    unsure = np.flatnonzero(~sure)
    if unsure.size:
        where = np.full(n_groups, -1, dtype=np.intp)
        where[unsure] = np.arange(unsure.size)
        rows = where[codes] >= 0
        units, exponent = sums_by_units(where[codes[rows]], x[rows], unsure.size)
        exact = _centres_units(units, exponent, g)
        if exact.dtype == object:  # a centre beyond int64's room: every centre as a Python int
            out = out.astype(object)
        out[unsure] = exact
    return out


def _centres(value: Any, g: Fraction, saturate: bool = True) -> list[int]:
    """The rounded centres ``floor(v/g + 1/2)`` of every coordinate, exact integers of any size; with
    ``saturate`` (the threshold and selection families, whose proofs state it) saturated to
    ``[−2**52, 2**52]``. The noise families add noise to the exact centres: no released value is capped."""
    if isinstance(value, np.ndarray):
        vals = [Fraction(float(x)) for x in value.ravel().tolist()]
    else:
        vals = list(value) if isinstance(value, tuple) else [value]
    if not saturate:
        return [_rhu(Fraction(v) / g) for v in vals]
    # saturate at ±2**52 grid steps: a score beyond it is compared as if at the bound, never as an error
    # (whether a mechanism raises is itself an output). Saturation is 1-Lipschitz in each coordinate, so
    # the centres' distances, and the proof, are unchanged.
    return [max(-_MAX_UNITS, min(_MAX_UNITS, _rhu(Fraction(v) / g))) for v in vals]


_MAX_SCALE_UNITS = Fraction(2**45)


_MAX_UNITS = 2**52


def _check_scale_units(name: str, value: Any, granularity: Any) -> None:
    units = _frac(name, value) / Fraction(granularity)
    if units > _MAX_SCALE_UNITS:
        need = _frac(name, value) / _MAX_SCALE_UNITS
        k = need.numerator.bit_length() - need.denominator.bit_length()  # 2**(k-1) < need < 2**(k+1)
        k += Fraction(2) ** k < need  # the least power of two >= need, exactly (no float of a huge scale)
        fix = f"pass granularity={2.0**k!r} or coarser" if k <= 1023 else "pass a smaller scale (or budget)"
        raise ParameterError(
            f"{name}={value!r} is about 2**{units.numerator.bit_length() - units.denominator.bit_length()} grid "
            f"steps of granularity={granularity!r}, above the 2**45 limit where outputs stay exact grid floats; "
            f"{fix}."
        )


def _release(centres: Any, noise: np.ndarray, g: Fraction) -> np.ndarray:
    """Float outputs ``g * (c + noise)``: exact while |c + noise| < 2**53, else the round-to-nearest
    of the exact grid value (a deterministic function of the exact integer: post-processing)."""
    if isinstance(centres, np.ndarray) and centres.dtype in (np.int64, object):
        c = centres
    else:
        c = (
            np.asarray(centres, dtype=object)
            if any(abs(x) >= 2**62 for x in centres)
            else np.asarray(centres, dtype=np.int64)
        )
    if c.dtype == object or int(np.abs(noise).max(initial=0)) >= 2**62 - int(np.abs(c).max(initial=0)):
        units = noise.astype(object) + c.astype(object)
        return np.vectorize(lambda u: _nearest(u, g), otypes=[float])(units)
    units = noise + c
    return units.astype(float) * float(g)


def _nearest(units: int, g: Fraction) -> float:
    """The double nearest the exact grid value ``units·g`` (±inf beyond the largest double)."""
    try:
        return float(Fraction(int(units)) * g)
    except OverflowError:
        return math.copysign(math.inf, units)


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


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
