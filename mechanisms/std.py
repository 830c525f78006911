"""Noisy standard deviation from three noisy sums (count, sum, sum of squares), each released
with grid-Laplace noise at ε/3 (Dwork, McSherry, Nissim & Smith 2006 — Laplace mechanism on
bounded queries; sequential composition, Dwork & Roth 2014 Thm. 3.16; the seed's "std from 3 sums").

Records are clamped to ``[lo, hi]`` (the domain; a no-op for valid data) and snapped to the grid
``g*Z``; the sums are computed exactly in integer grid units, the sum of squares (exact in units
of g²) is snapped to units of g. :meth:`NoisyStd.finalize` turns the three noisy sums into a
standard deviation (post-processing)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness import _validate as _v
from dpharness.core import AddRemove, Claim, FunctionLaw, InputSpec, Mechanism, PureDP, RealInterval
from dpharness.registry import register

from ._noise import (
    DEFAULT_GRANULARITY, check_granularity, check_units, exact_dot, grid_laplace_law, grid_laplace_sample,
    bound_units, ratio_up, rescale_to_units, to_units,
)

__all__ = ["NoisyStd", "sum_sensitivities"]


def sum_sensitivities(ulo: int, uhi: int, granularity: float) -> tuple[Fraction, Fraction, Fraction]:
    """Add/remove sensitivities (exact values) of (count, linear sum, quadratic sum) of snapped
    records: 1, B·g and ceil(B²·g)·g with B = max(|lo|, |hi|) in units (a quadratic sum is exact in
    units of g² and snapped to g, so its change B²g² rounds up to the next grid step)."""
    g = Fraction(granularity)
    b = max(abs(ulo), abs(uhi))
    return Fraction(1), b * g, math.ceil(b * b * g) * g


@register
@dataclass(frozen=True, kw_only=True)
class NoisyStd(Mechanism):
    """Three noisy sums (n, Σx, Σx²) of records in ``[lo, hi]``; :meth:`finalize` gives the std.

    ``scale`` is the noise scale per unit of sensitivity: statistic ``i`` (snapped centre ``c_i``,
    sensitivity Δ_i = 1, B, ceil(B²g)g — see :func:`sum_sensitivities`) gets grid-Laplace noise of
    scale ``b_i = scale·Δ_i``, so each spends 1/scale = ε/3. Output ``y`` in ``(g*Z)^3``::

        P(y | x) = prod_{i=1..3} tanh(g/(2 b_i)) exp(-|y_i - c_i| / b_i)

    Neighbours: add/remove one record (``AddRemove()``).
    Claim: ε-DP with ε = 3/scale (defaults lo = 0, hi = 1, scale = 3: ε = 1)."""

    name = "noisy_std"
    source = "seed: standard deviation from 3 noisy sums at ε/3 each (Laplace mechanism + composition), grid output"

    lo: Any = 0
    hi: Any = 1
    scale: Any = 3
    granularity: float = DEFAULT_GRANULARITY
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        check_granularity("granularity", self.granularity)
        bound_units(self.lo, self.hi, self.granularity)
        _v.positive("scale", self.scale)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, lo: Any = 0, hi: Any = 1,
                   granularity: float = DEFAULT_GRANULARITY) -> "NoisyStd":
        """scale = 3/ε (rounded up): ε/3 per sum; claims ε-DP."""
        claim = PureDP(epsilon)
        return cls(lo=lo, hi=hi, scale=ratio_up(3, claim.epsilon), granularity=granularity, claim=claim)

    @property
    def sensitivities(self) -> tuple[Fraction, Fraction, Fraction]:
        return sum_sensitivities(*bound_units(self.lo, self.hi, self.granularity), self.granularity)

    @property
    def noise_scales(self) -> tuple:
        """Scale of each sum's noise, ``scale·Δ_i`` rounded up."""
        return tuple(ratio_up(Fraction(self.scale) * d, 1) for d in self.sensitivities)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(RealInterval(self.lo, self.hi), AddRemove(), "dataset")

    def _centres(self, data) -> np.ndarray:
        g = float(self.granularity)
        m = to_units("data", np.clip(np.asarray(data, dtype=float), float(self.lo), float(self.hi)), g)
        count = int(to_units("count", np.array([float(len(m))]), g)[0])
        s1 = exact_dot(m, np.ones_like(m))
        s2 = rescale_to_units(exact_dot(m, m), Fraction(g))
        check_units("the sums", [s1, s2])
        return np.array([count, s1, s2], dtype=np.int64)

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        return grid_laplace_sample(self._centres(data), list(self.noise_scales), self.granularity, size, rng)

    def _law(self, data: Any) -> FunctionLaw:
        return grid_laplace_law(self._centres(data), list(self.noise_scales), self.granularity,
                                ("y_n", "y_sum", "y_sumsq"))

    @staticmethod
    def finalize(outputs: np.ndarray) -> np.ndarray:
        """Post-processing: sqrt(max(Σx²/n - (Σx/n)², 0)) with n = max(noisy count, 1), per row."""
        out = np.asarray(outputs, dtype=float).reshape(-1, 3)
        n = np.maximum(out[:, 0], 1.0)
        mean = out[:, 1] / n
        return np.sqrt(np.maximum(out[:, 2] / n - mean * mean, 0.0))

    def example_pair(self) -> tuple[Any, Any]:
        """``[hi]`` vs ``[hi, e]`` with ``e`` the bound of larger magnitude: all three sums move by
        their full sensitivity at once."""
        lo, hi = float(self.lo), float(self.hi)
        extreme = hi if abs(hi) >= abs(lo) else lo
        return np.array([hi]), np.array([hi, extreme])
