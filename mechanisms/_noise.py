"""Shared vectorised noise samplers and grid helpers for the built-in mechanisms.

Everything that touches the output of a continuous built-in goes through integers: data are
snapped to the grid ``granularity * Z`` (``granularity`` a power of two), noise is an integer
drawn from a discrete distribution, and the output is ``granularity * (centre + noise)``. An
output therefore carries no low-order float bits that depend on the data (the attack of
Mironov 2012, "On significance of the least significant bits for differential privacy").

Conventions
-----------
* "units": an integer count of grid steps; ``value = units * granularity`` exactly.
* Rounding to the grid is ``round_half_up(y) = floor(y + 1/2)``, computed without the float
  ``y + 0.5`` pitfall. It is monotone and shift-equivariant (``r(y + n) = r(y) + n`` for integer
  ``n``), so ``|r(a) - r(b)| <= ceil(|a - b|)``: a sensitivity that is a multiple of the
  granularity is preserved exactly (see :func:`grid_sensitivity`).
* Discrete Laplace (two-sided geometric) with ``scale`` b on the integers:
  ``P(k) = tanh(1/(2b)) * exp(-|k|/b)``; sampled exactly (no float rounding of the law at any
  scale, low bits included) by :func:`dpharness.mechanisms._exact.discrete_laplace`, with a float
  ``b`` read as its exact binary value.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness import _validate as _v
from dpharness.errors import ParameterError

__all__ = [
    "bound_units",
    "DEFAULT_GRANULARITY",
    "check_granularity",
    "round_half_up",
    "to_units",
    "grid_sensitivity",
    "discrete_laplace",
    "discrete_laplace_logpmf",
    "two_sided_geometric",
    "on_grid_units",
    "grid_gaussian_units",
    "grid_gaussian_logpmf",
    "log_diff_ndtr",
]

DEFAULT_GRANULARITY = 2.0**-20
_MAX_UNITS = 2.0**52  # beyond this |value / granularity| the grid can no longer be represented exactly


def check_granularity(name: str, value: Any) -> float:
    """A granularity must be a positive power of two (so scaling by it is exact in binary floats)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, np.integer, np.floating)):
        raise ParameterError(f"{name}={value!r} is not a number; pass a power of two such as 2**-20.")
    g = float(value)
    if not (math.isfinite(g) and g > 0):
        raise ParameterError(f"{name}={value!r} must be a positive finite power of two; pass e.g. 2**-20.")
    mantissa, _ = math.frexp(g)
    if isinstance(value, np.floating):  # Fraction() refuses numpy floats other than float64
        exact = Fraction(*value.as_integer_ratio())
    else:
        exact = Fraction(int(value)) if isinstance(value, np.integer) else Fraction(value)
    if mantissa != 0.5 or exact != Fraction(g):
        raise ParameterError(f"{name}={value!r} is not a power of two; pass e.g. 2**-20 or 2**-10.")
    if not 2.0**-60 <= g <= 2.0**30:
        raise ParameterError(f"{name}={value!r} is outside [2**-60, 2**30]; pass a power of two in that range.")
    return g


def round_half_up(y: np.ndarray) -> np.ndarray:
    """``floor(y + 1/2)`` computed exactly for float arrays (``y - floor(y)`` is exact for |y| < 2**52)."""
    y = np.asarray(y, dtype=float)
    f = np.floor(y)
    return (f + (y - f >= 0.5)).astype(np.int64)


def to_units(name: str, values: Any, granularity: float) -> np.ndarray:
    """Snap real values to the grid: integer units ``floor(values / granularity + 1/2)``.

    ``values / granularity`` is exact (division by a power of two). Values too large for the grid
    raise ParameterError rather than silently losing precision."""
    arr = np.asarray(values, dtype=float) / granularity
    if arr.size and not np.all(np.abs(arr) < _MAX_UNITS):
        raise ParameterError(
            f"{name} has values of magnitude >= 2**52 * granularity={granularity!r}; "
            "pass smaller values or a coarser granularity."
        )
    return round_half_up(arr)


def bound_units(lo: Any, hi: Any, granularity: float) -> tuple[int, int]:
    """The snapped bounds in grid units, validated (lo < hi, distinct after snapping)."""
    _v.real("lo", lo)
    _v.real("hi", hi)
    _v.ordered("lo", lo, "hi", hi)
    ulo, uhi = (int(u) for u in to_units("lo/hi", np.array([float(lo), float(hi)]), granularity))
    if ulo == uhi:
        raise ParameterError(
            f"lo={lo!r} and hi={hi!r} snap to the same grid point; widen the bounds or use a finer granularity."
        )
    return ulo, uhi


def grid_sensitivity(sensitivity: Any, granularity: float, coordinates: int = 1) -> Fraction:
    """A bound on the L1 distance of the snapped inputs when the raw inputs are within L1
    ``sensitivity``: each coordinate's snapped difference is at most ``ceil(d_i/g) * g``, hence
    the sum is at most ``(ceil(Δ/g) + coordinates - 1) * g`` (exactly Δ for one coordinate when
    Δ is a multiple of g). Returned as an exact Fraction."""
    g = Fraction(granularity)
    steps = math.ceil(Fraction(sensitivity) / g)
    return (steps + (coordinates - 1 if steps > 0 else 0)) * g


def discrete_laplace(scale: Any, size, rng: np.random.Generator) -> np.ndarray:
    """Integers with pmf ``tanh(1/(2 scale)) * exp(-|k|/scale)`` (two-sided geometric), int64 array
    of shape ``size``, sampled exactly (:func:`dpharness.mechanisms._exact.discrete_laplace`).

    ``scale`` is a positive number (a float is read as its exact binary value; an int or Fraction
    as it is) or an array of floats broadcast against ``size`` (one scale per element, e.g. per
    coordinate). Scales outside [2**-1000, 2**1000] raise ParameterError. For scales above about
    2**56 a sample may not fit in int64; the array is then of dtype object (exact Python ints)."""
    from . import _exact

    shape = (int(size),) if np.ndim(size) == 0 else tuple(int(s) for s in size)
    if np.ndim(scale) == 0:
        return _exact.discrete_laplace(_exact.exact_rational("scale", scale), shape, rng)
    scales = np.broadcast_to(np.asarray(scale, dtype=float), shape)
    values = np.unique(scales)
    if len(values) == 1:
        return _exact.discrete_laplace(_exact.exact_rational("scale", float(values[0])), shape, rng)
    parts = []
    for v in values:  # one exact sampler per distinct scale, in a fixed (sorted) order
        mask = scales == v
        parts.append((mask, _exact.discrete_laplace(_exact.exact_rational("scale", float(v)), int(mask.sum()), rng)))
    dtype = object if any(p.dtype == object for _, p in parts) else np.int64
    out = np.empty(shape, dtype=dtype)
    for mask, p in parts:
        out[mask] = p
    return out


two_sided_geometric = discrete_laplace


def discrete_laplace_logpmf(k: np.ndarray, scale: float | np.ndarray) -> np.ndarray:
    """``log P(k)`` of the discrete Laplace with ``scale`` on the integers (float array; -inf off Z)."""
    k = np.asarray(k, dtype=float)
    b = np.asarray(scale, dtype=float)
    # log tanh(1/(2b)) = log((1 - q)/(1 + q)), q = exp(-1/b): log(-expm1(-1/b)) - log1p(exp(-1/b))
    log_norm = np.log(-np.expm1(-1.0 / b)) - np.log1p(np.exp(-1.0 / b))
    out = log_norm - np.abs(k) / b
    return np.where(np.equal(np.mod(k, 1), 0), out, -np.inf)


def on_grid_units(outputs: np.ndarray, granularity: float) -> tuple[np.ndarray, np.ndarray]:
    """``(units, ok)``: outputs divided by the granularity, and whether each is an exact grid point."""
    y = np.asarray(outputs, dtype=float) / granularity
    ok = np.isfinite(y) & (np.mod(y, 1) == 0) & (np.abs(y) < _MAX_UNITS)
    return np.where(ok, y, 0.0), ok


def grid_gaussian_units(centre: np.ndarray, sigma: float, granularity: float, size, rng) -> np.ndarray:
    """Integer units ``floor((centre + sigma * Z)/g + 1/2)``: a Gaussian rounded to the grid.

    ``centre`` is the raw (unrounded) input, so the output is a post-processing of the continuous
    Gaussian mechanism; its pmf at ``g*m`` is the Gaussian mass of the cell ``[g(m - 1/2), g(m + 1/2))``."""
    z = rng.standard_normal(size)
    y = np.asarray(centre, dtype=float) / granularity + z * (float(sigma) / granularity)
    return round_half_up(y)


def log_diff_ndtr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``log(Phi(b) - Phi(a))`` for ``a < b``, accurate in both tails and for narrow cells.

    The cell is reflected into the left half (``Phi(b) - Phi(a) = Phi(-a) - Phi(-b)``), then
    ``log Phi(b) + log(-expm1(log Phi(a) - log Phi(b)))`` avoids cancellation."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    flip = (a + b) > 0
    lo = np.where(flip, -b, a)
    hi = np.where(flip, -a, b)
    from scipy import special  # imported when used: building a mechanism (a warm gate's cache key) needs none of scipy

    lb = special.log_ndtr(hi)
    la = special.log_ndtr(lo)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = lb + np.log(-np.expm1(la - lb))
    return np.where(hi > lo, out, -np.inf)


def grid_gaussian_logpmf(outputs: np.ndarray, centre: np.ndarray, sigma: float, granularity: float) -> np.ndarray:
    """Log pmf of :func:`grid_gaussian_units` times the granularity, element-wise (off-grid: -inf)."""
    units, ok = on_grid_units(outputs, granularity)
    g = float(granularity)
    s = float(sigma)
    c = np.asarray(centre, dtype=float)
    a = ((units - 0.5) * g - c) / s
    b = ((units + 0.5) * g - c) / s
    return np.where(ok, log_diff_ndtr(a, b), -np.inf)


# --------------------------------------------------------------------------- calibration arithmetic


def _readings(value: Any) -> list[Fraction]:
    """The exact value a parameter is read as, in a one-element list: a float as its binary value
    (``Fraction(float)``, how ``dpharness.core.exact`` and hence the prover read it and how the
    sampler computes with it); ints and Fractions exactly. (A list so callers may take min/max.)"""
    if isinstance(value, (float, np.floating)):
        return [Fraction(float(value))]
    return [Fraction(value)]


def _exact(value: Any) -> Fraction:
    """The exact binary value of a float (or an int/Fraction as it is)."""
    return Fraction(float(value)) if isinstance(value, (float, np.floating)) else Fraction(value)


def ratio_up(numerator: Any, denominator: Any) -> float | int:
    """``numerator / denominator`` as a float rounded toward +inf (more noise: the safe direction
    for a scale or sigma); an int when the quotient is an exact integer. Floats are read as their
    exact binary values, for the inputs and for the result."""
    q = _exact(numerator) / _exact(denominator)
    if q.denominator == 1 and abs(q.numerator) < 2**53:
        return int(q)
    f = float(q)
    while Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def ratio_down(numerator: Any, denominator: Any) -> float | int | Fraction:
    """``numerator / denominator`` rounded toward 0 (less signal: the safe direction for beta or
    log-odds); an exact Fraction when the inputs are ints/Fractions. Floats are read as their exact
    binary values, for the inputs and for the result."""
    if not isinstance(numerator, (float, np.floating)) and not isinstance(denominator, (float, np.floating)):
        q = Fraction(numerator) / Fraction(denominator)
        return int(q) if q.denominator == 1 else q
    q = _exact(numerator) / _exact(denominator)
    f = float(q)
    while Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def log_up(x: Any) -> float:
    """``log(x)`` as a float rounded toward +inf (a safe claimed epsilon): its exact binary value
    exceeds ``log(x)`` (``x`` read exactly), checked at 50 digits."""
    import mpmath

    q = _exact(x)
    f = math.nextafter(math.log(x), math.inf)
    with mpmath.workdps(50):
        target = mpmath.log(mpmath.mpf(q.numerator) / q.denominator)
        while mpmath.mpf(f) <= target:
            f = math.nextafter(f, math.inf)
    return f


# --------------------------------------------------------------------------- grid Laplace: sampler and law


def grid_laplace_sample(
    centre_units: np.ndarray, scales: Any, granularity: float, size: int, rng: np.random.Generator
) -> np.ndarray:
    """``granularity * (centre_units + DiscreteLaplace(scale_i / granularity))`` for each coordinate,
    shape ``(size, m)`` floats (every value an exact grid point)."""
    centre_units = np.asarray(centre_units, dtype=np.int64).reshape(-1)
    scales = np.broadcast_to(np.asarray([float(s) for s in np.ravel(scales)]), centre_units.shape)
    g = float(granularity)
    m = centre_units.shape[0]
    noise = discrete_laplace(scales[0] / g if m == 1 else scales / g, (size, m), rng)
    return (centre_units + noise) * g


def grid_laplace_law(centre_units: np.ndarray, scales: Any, granularity: float, names: tuple[str, ...]):
    """The exact law of :func:`grid_laplace_sample`: a product of discrete Laplace pmfs on the grid,
    ``prod_i tanh(g/(2 b_i)) exp(-|y_i - c_i|/b_i)`` for ``y_i`` in ``g*Z`` (0 elsewhere)."""
    import sympy as sp

    from dpharness.core import FunctionLaw, exact

    centre_units = np.asarray(centre_units, dtype=np.int64).reshape(-1)
    m = centre_units.shape[0]
    scale_list = list(np.ravel(scales)) if np.ndim(scales) else [scales] * m
    if len(scale_list) == 1 and m > 1:
        scale_list = scale_list * m
    g = float(granularity)
    scale_units = np.array([float(s) / g for s in scale_list])

    def log_prob(outputs: np.ndarray) -> np.ndarray:
        out = np.asarray(outputs, dtype=float)
        rows = out.reshape(-1, m)
        units, ok = on_grid_units(rows, g)
        lp = np.where(ok, discrete_laplace_logpmf(units - centre_units, scale_units), -np.inf)
        return lp.sum(axis=1)

    g_exact = exact(Fraction(g))
    symbols = tuple(sp.Symbol(n, real=True) for n in names)
    expr = sp.Integer(1)
    for sym, c, b in zip(symbols, centre_units.tolist(), scale_list):
        b_exact = exact(b)
        expr = expr * sp.tanh(g_exact / (2 * b_exact)) * sp.exp(-sp.Abs(sym - int(c) * g_exact) / b_exact)
    return FunctionLaw("discrete", log_prob, symbols, expr)


# --------------------------------------------------------------------------- exact sums on the grid


def exact_sum(values: np.ndarray, bound: int) -> int:
    """The exact integer sum of an int64 array whose entries are at most ``bound`` in magnitude
    (numpy int64 when it cannot overflow, Python integers otherwise)."""
    values = np.asarray(values)
    if values.size * max(int(bound), 1) < 2**62:
        return int(values.sum(dtype=np.int64))
    return int(sum(int(v) for v in values.ravel().tolist()))


def check_units(name: str, units: Any) -> None:
    """Refuse statistics too large to be represented exactly on the grid (|units| >= 2**52)."""
    arr = np.abs(np.asarray([float(u) for u in np.ravel(units)]))
    if arr.size and not np.all(arr < _MAX_UNITS):
        raise ParameterError(
            f"{name} is too large for the grid (|value| >= 2**52 grid steps); pass fewer or smaller "
            "records, or a coarser granularity."
        )


def float_up(value: Any) -> float:
    """The smallest float whose exact binary value is >= ``value`` (an mpmath number or anything
    ``Fraction`` accepts) — for a sigma or scale computed to high precision."""
    import mpmath

    f = float(value)
    with mpmath.workdps(50):
        v = (
            value
            if isinstance(value, mpmath.mpf)
            else mpmath.mpf(Fraction(value).numerator) / Fraction(value).denominator
        )
        while mpmath.mpf(f) < v:
            f = math.nextafter(f, math.inf)
    return f


def float_down(value: Any) -> float:
    """The largest float whose exact binary value is <= ``value``."""
    import mpmath

    f = float(value)
    with mpmath.workdps(50):
        v = (
            value
            if isinstance(value, mpmath.mpf)
            else mpmath.mpf(Fraction(value).numerator) / Fraction(value).denominator
        )
        while mpmath.mpf(f) > v:
            f = math.nextafter(f, -math.inf)
    return f


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
