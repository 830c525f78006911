"""Numbers printed so that what is printed stays true: an upper bound (a proven ε or δ, a claim) is
rounded up, a lower bound (a certified lower end) down, so that the printed number, read back, is
itself a bound. A claim of 1.8291 proved is shown as ``1.8291`` (or ``1.83``), never ``1.829``, a
value the proof does not cover.

A float whose shortest decimal form has at most ``digits + 2`` significant digits is printed in that
form (it reads back as the same float, so it is the bound itself); any other is rounded outward at
``digits`` significant digits, exactly (:class:`decimal.Decimal` holds the float's binary value)."""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

__all__ = ["fmt_upper", "fmt_lower"]


def _shortest(v: float) -> tuple[str, int]:
    """A float's shortest decimal form (``repr``, without a trailing ``.0``) and its number of
    significant digits."""
    text = repr(v)
    if text.endswith(".0"):
        text = text[:-2]
    mantissa = text.lower().split("e")[0].lstrip("-").replace(".", "").strip("0")
    return text, max(len(mantissa), 1)


def special(x: Any) -> str | float:
    """How a value that is not an ordinary number prints (None, not a number, NaN, ±∞), else it as a
    float: the one rule both the nearest (``_run.fmt``) and the outward formats start from."""
    if x is None:
        return "—"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    return v


def _outward(x: Any, digits: int, rounding: str) -> str:
    v = special(x)
    if isinstance(v, str):
        return v
    if v == 0:
        return "0"
    text, n = _shortest(v)
    if n <= digits + 2:
        return text  # the shortest form: reads back as this very float
    d = Decimal(v)  # the exact binary value
    exponent = d.adjusted() - digits + 1
    q = d.quantize(Decimal(1).scaleb(exponent), rounding=rounding)
    return f"{float(q):.{digits}g}"  # q has at most `digits` digits (+1 on a carry: 9.9995 -> 10.00)


def fmt_upper(x: Any, digits: int = 4) -> str:
    """``x`` as an upper bound: its shortest form if short, else rounded up at ``digits`` significant
    digits (the printed number, read back, is >= ``x``)."""
    return _outward(x, digits, ROUND_CEILING)


def fmt_lower(x: Any, digits: int = 4) -> str:
    """``x`` as a lower bound: its shortest form if short, else rounded down at ``digits`` significant
    digits (the printed number, read back, is <= ``x``)."""
    return _outward(x, digits, ROUND_FLOOR)
