"""The snapping mechanism: I. Mironov, "On significance of the least significant bits for
differential privacy", CCS 2012, §5 (Theorem 1 in §5.2).

``f̃(x) = clamp_B(⌊clamp_B(x) ⊕ S ⊗ λ ⊗ LN(U*)⌉_Λ)``: clamp the answer to [-B, B], add Laplace
noise computed in doubles from a uniform U* over the doubles of (0, 1) (each double drawn with
probability equal to the length of the reals that round to it) and a uniform sign S, round to
the nearest multiple of Λ -- the smallest power of two >= λ -- and clamp again. The rounding
erases the low-order bits that betray x in the textbook implementation. For sensitivity-1
answers and ``λ < B < 2^46 λ`` it is ``(1/λ + 2^-49 B/λ)``-DP (Theorem 1).

Implementation notes: U* is sampled exactly as Mironov requires (:func:`._exact.uniform_double`: the
exponent ``e`` from the leading zero bits of the bit stream, never capped, and a uniform 52-bit mantissa,
down to the subnormals). numpy's ``Generator.geometric(0.5)``, used before, is a search on one 53-bit
double and never exceeds 53: U* >= 2^-53 and |noise| <= 36.74 λ, so at the defaults the output 38 was
impossible from x = 0 and possible from x = 1 (no finite ε). The scale λ the code multiplies by is
``float(scale)`` (the proof reads that double; :meth:`calibrated` rounds it up to one), and every output must be within reach of every clamped
input with a U* among the normal doubles, ``2B + Λ <= 708 λ`` (``1022 ln 2 = 708.4``): beyond
``1074 ln 2 λ = 744.4 λ`` an output at the edge of the noise's reach from one input is out of it from a
neighbour (no finite ε), and between the two the subnormal U* are too coarse for the theorem's
ratio (a run of a few multiples of 2^-1074 against another). The logarithm is Mironov's LN, correctly rounded
(:func:`._exact.correctly_rounded_log`: the extended-precision logarithm rounded to a double where it is
clear of a rounding midpoint, else 200 bits in mpmath); numpy's float64 ``log``, used before, is within
an ulp but not the nearest double on about 0.25% of draws. Division/multiplication by the power of two
Λ is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import BoundedChange, FunctionLaw, InputSpec, Mechanism, PureDP, RealInterval, exact
from dpharness.errors import ParameterError
from dpharness.registry import register

from ._exact import correctly_rounded_log, uniform_double
from ._literature import exact_ratio, log_laplace_interval as _log_laplace_interval, sym_laplace_cdf
from ._noise import float_up

__all__ = ["Snapping", "snapping_epsilon", "power_of_two_at_least"]

_SLACK = Fraction(1, 2**49)
_REACH = 708  # 1022 ln 2 = 708.4: every output needs |LN(U*)| <= 708 λ, a U* among the normal doubles


def snapping_epsilon(scale: Any, B: Any) -> Fraction | float:
    """Mironov's bound ``1/λ + 2^-49 B/λ`` for sensitivity 1 (exact for exact inputs)."""
    try:
        return (1 + _SLACK * Fraction(B)) / Fraction(scale)
    except (TypeError, ValueError):
        return (1 + 2.0**-49 * float(B)) / float(scale)


def power_of_two_at_least(x: Any) -> Fraction:
    """The smallest power of two >= x (exact)."""
    x = Fraction(x)
    k = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** k < x:
        k += 1
    while Fraction(2) ** (k - 1) >= x:
        k -= 1
    return Fraction(2) ** k


@register
@dataclass(frozen=True, kw_only=True)
class Snapping(Mechanism):
    """Snapping mechanism (Mironov 2012 §5): output ``clamp_B(Λ·round((clamp_B(x) + L)/Λ))``,
    ``L ~ Lap(0, scale)``, Λ = smallest power of two >= scale.

    pmf (real-arithmetic law; outputs are the multiples kΛ with |kΛ| < B, and ±B): with
    ``x' = clamp_B(x)`` and K the largest k with kΛ < B,
    ``P(kΛ) = P((k - 1/2)Λ <= x' + L < (k + 1/2)Λ)`` for |k| <= K,
    ``P(B) = P(x' + L >= (K + 1/2)Λ)``, ``P(-B) = P(x' + L < -(K + 1/2)Λ)``.
    Neighbours: ``|x - x'| <= 1`` (sensitivity 1, as in Theorem 1). Claim: PureDP(ε) with
    ``ε >= 1/λ + 2^-49 B/λ`` (Theorem 1; side condition λ < B < 2^46 λ).
    Defaults: B = 64, scale = λ = 1 + 2^-43 (= (1 + 2^-49 B)/ε at ε = 1), hence Λ = 2, claim PureDP(1).
    Output: float64 ``(size,)``, multiples of Λ within [-B, B] (or ±B)."""

    name: ClassVar[str] = "snapping"
    source: ClassVar[str] = "Mironov 2012, §5 (snapping mechanism, Theorem 1)"

    B: Any = 64
    scale: Any = Fraction(2**43 + 1, 2**43)

    def _check(self) -> None:
        _v.positive("B", self.B)
        _v.positive("scale", self.scale)
        if not Fraction(self.scale) < Fraction(self.B):
            raise ParameterError(
                f"B={self.B!r} must exceed scale={self.scale!r} (Mironov's side condition λ < B); "
                "pass a larger B or a smaller scale."
            )
        if not Fraction(self.B) < 2**46 * Fraction(self.scale):
            raise ParameterError(
                f"B={self.B!r} must be below 2**46 * scale (Mironov's side condition B < 2^46 λ); pass a smaller B."
            )
        if not 2 * Fraction(self.B) + self.Lam <= _REACH * Fraction(self.scale):
            raise ParameterError(
                f"B={self.B!r} is too large for scale={self.scale!r}: the noise reaches at most "
                f"{_REACH}·λ, so 2B + Λ must not exceed it (an output at the edge of its reach from one input "
                "is out of reach from a neighbour: no finite ε); pass B <= "
                f"{float((_REACH * Fraction(self.scale) - self.Lam) / 2):g}."
            )

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, B: Any = 64):
        """``scale = (1 + 2^-49 B)/ε`` rounded up to a double, claim PureDP(ε)."""
        epsilon = _v.positive("epsilon", epsilon)
        B = _v.positive("B", B)
        num = 1 + _SLACK * Fraction(B) if isinstance(B, (int, Fraction)) else 1 + 2.0**-49 * float(B)
        scale = exact_ratio(num, epsilon)
        if Fraction(float(scale)) != Fraction(scale):
            scale = float_up(scale)
        return cls(B=B, scale=scale, claim=PureDP(epsilon))

    @property
    def Lam(self) -> Fraction:
        """Λ, the smallest power of two >= scale (exact)."""
        return power_of_two_at_least(self.scale)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(RealInterval(), BoundedChange(1, "l1"), "vector", dim=1, any_data=True)

    def example_pair(self) -> tuple[Any, Any]:
        """0 vs 1."""
        return np.array([0.0]), np.array([1.0])

    def _sample(self, data, size, rng):
        B = float(self.B)
        lam = float(self.scale)
        Lam = float(self.Lam)
        x = min(max(float(np.asarray(data).reshape(-1)[0]), -B), B)
        u = uniform_double(size, rng)  # exact U*: not numpy's geometric, which stops at 53
        sign = np.where(rng.integers(0, 2, size, dtype=np.int8) == 1, 1.0, -1.0)
        y = x + sign * (lam * correctly_rounded_log(u))  # Mironov's LN: the nearest double to ln(U*)
        snapped = np.rint(y / Lam) * Lam
        return np.clip(snapped, -B, B)

    def _K(self) -> int:
        """The largest k with kΛ < B."""
        q = Fraction(self.B) / self.Lam
        return math.ceil(q) - 1

    def _law(self, data):
        B = float(self.B)
        lam = float(self.scale)
        Lam = float(self.Lam)
        x = min(max(float(np.asarray(data).reshape(-1)[0]), -B), B)
        K = self._K()
        y = sp.Symbol("y", real=True)
        xs, ls, Ls, Bs = (
            exact(x),
            exact(self.scale),
            sp.Rational(self.Lam.numerator, self.Lam.denominator),
            exact(self.B),
        )
        F = lambda t: sym_laplace_cdf(t - xs, ls)  # noqa: E731
        expr = sp.Piecewise(
            (1 - F((K + sp.Rational(1, 2)) * Ls), sp.Eq(y, Bs)),
            (F(-(K + sp.Rational(1, 2)) * Ls), sp.Eq(y, -Bs)),
            (F(y + Ls / 2) - F(y - Ls / 2), True),
        )
        outcomes = tuple([-B] + [k * Lam for k in range(-K, K + 1)] + [B])

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            out = np.asarray(outputs, dtype=float).reshape(-1)
            k = out / Lam
            interior = (np.mod(k, 1) == 0) & (np.abs(k) <= K) & np.isfinite(k)
            lo = np.where(out == B, (K + 0.5) * Lam, np.where(out == -B, -np.inf, (k - 0.5) * Lam))
            hi = np.where(out == B, np.inf, np.where(out == -B, -(K + 0.5) * Lam, (k + 0.5) * Lam))
            ok = interior | (out == B) | (out == -B)
            return np.where(ok, _log_laplace_interval(lo - x, hi - x, lam), -np.inf)

        return FunctionLaw("discrete", log_prob, (y,), expr, outcomes=outcomes)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
