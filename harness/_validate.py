"""Validation helpers used once at the public boundary (scipy's ``pdf`` -> ``_pdf_formula`` split).

Each helper returns the value it checked so calls read ``self_x = _v.positive("x", x)``."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

import numpy as np

from .errors import ParameterError


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def real(name: str, value: Any) -> float | int | Fraction | numbers.Real:
    """A finite real number (int, float, Fraction, numpy scalar). Bools are refused."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ParameterError(f"{name}={_show(value)} is not a real number; pass an int, float or Fraction.")
    if isinstance(value, np.floating) and value.dtype.itemsize > 8:
        raise ParameterError(
            f"{name}={_show(value)} is a {value.dtype} (extended precision), which a double, the type the code "
            "computes with, may not hold; pass a float, an int or a Fraction."
        )
    if isinstance(value, (float, np.floating)) and not math.isfinite(float(value)):
        raise ParameterError(f"{name}={_show(value)} is not finite; pass a finite number.")
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def positive(name: str, value: Any) -> float | int | Fraction:
    """A finite real number > 0."""
    value = real(name, value)
    if not value > 0:
        raise ParameterError(f"{name}={_show(value)} must be > 0; pass a positive finite number.")
    return value


def nonnegative(name: str, value: Any) -> float | int | Fraction:
    """A finite real number >= 0."""
    value = real(name, value)
    if not value >= 0:
        raise ParameterError(f"{name}={_show(value)} must be >= 0; pass a non-negative finite number.")
    return value


def probability(name: str, value: Any, *, open_left: bool = False, open_right: bool = False) -> float | int | Fraction:
    """A number in [0, 1] (ends excluded on request)."""
    value = real(name, value)
    lo_ok = value > 0 if open_left else value >= 0
    hi_ok = value < 1 if open_right else value <= 1
    if not (lo_ok and hi_ok):
        interval = ("(" if open_left else "[") + "0, 1" + (")" if open_right else "]")
        raise ParameterError(f"{name}={_show(value)} must lie in {interval}; pass a probability in that range.")
    return value


MAX_SAMPLES = 2**50  # samples a side an audit takes at most: counts stay exact in the doubles its statistics use
MIN_SAMPLES = 20  # samples a side an audit takes at least (fewer leave its certification no samples)


def integer(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """A Python or numpy integer within optional bounds (floats such as 2.0 are refused)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise ParameterError(f"{name}={_show(value)} is not an integer; pass an int.")
    value = int.__int__(value) if isinstance(value, int) else int(value)  # a plain int: one value for every reader
    if minimum is not None and value < minimum:
        raise ParameterError(f"{name}={value} must be >= {minimum}; pass a larger integer.")
    if maximum is not None and value > maximum:
        raise ParameterError(f"{name}={value} must be <= {maximum}; pass a smaller integer.")
    return value


def choice(name: str, value: Any, options: tuple) -> Any:
    if value not in options:
        raise ParameterError(f"{name}={_show(value)} is not one of {options}; pass one of them.")
    return value


def rng(name: str, value: Any) -> np.random.Generator:
    """Explicit randomness only: a numpy Generator (scipy's ``rng=`` convention)."""
    if not isinstance(value, np.random.Generator):
        raise ParameterError(
            f"{name}={_show(value)} is not a numpy.random.Generator; pass numpy.random.default_rng(seed)."
        )
    return value


def ordered(lo_name: str, lo: Any, hi_name: str, hi: Any) -> None:
    if not lo < hi:
        raise ParameterError(f"{lo_name}={_show(lo)} must be < {hi_name}={_show(hi)}; swap or widen the bounds.")


def labels(name: str, values: Any) -> None:
    """Every value of ``values`` a partition label: hashable and equal to itself (no NaN); the message
    names ``name`` and the type, never more than 40 characters of a value the caller declared."""
    for k in values:
        try:
            hash(k)
        except TypeError:
            raise ParameterError(
                f"{name} holds {type(k).__name__} {k!r:.40}, which is not hashable; pass strings or numbers."
            ) from None
        if isinstance(k, float) and k != k:
            raise ParameterError(f"{name} holds NaN; pass keys that equal themselves.")


def beyond_doubles(*bounds: Any) -> bool:
    """Whether a domain's bound lies beyond 2**53 in magnitude (an infinity included), where not every
    integer is a double: 64-bit integer inputs on such a domain are refused by their dtype, never by value."""
    return any(abs(b) > 2**53 for b in bounds)


def not_extended(name: str, values: Any, column: str | None = None) -> None:
    """``values`` (an array, a column) does not hold floats wider than a double (``numpy.longdouble``,
    float128): refused by dtype, since reading them as the doubles the code computes with would round them
    silently (two user ids one ulp of a long double apart would be one user)."""
    dtype = getattr(values, "dtype", None)
    if getattr(dtype, "kind", "") == "f" and getattr(dtype, "itemsize", 8) > 8:
        what = name if column is None else f"column {column} of {name}"
        raise ParameterError(
            f"{what} has dtype {dtype} (extended precision), whose values a double may not hold; convert it "
            "(.astype(float) if rounding to doubles is what you mean, or exact integers or strings for ids)."
        )


def not_masked(name: str, values: Any) -> None:
    """``values`` is not a numpy masked array (refused by its type, whatever its mask: ``numpy.asarray``
    reads the values under the mask as data)."""
    if isinstance(values, np.ma.MaskedArray):
        raise ParameterError(
            f"{name} is a numpy masked array, whose masked entries would be read as the values under the mask; "
            "pass the records you mean: np.ma.compress_rows(data) drops the rows with a masked entry, "
            "data.filled(v) fills them."
        )
