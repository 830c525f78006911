"""Noisy Pearson correlation from six noisy sums (n, Σx, Σy, Σx², Σy², Σxy), each released with
grid-Laplace noise at ε/6 (Dwork, McSherry, Nissim & Smith 2006 — Laplace mechanism on bounded
queries; sequential composition, Dwork & Roth 2014 Thm. 3.16; the seed's "correlation from 6 sums").

Records are pairs ``(x, y)`` in ``[lo, hi]^2``, snapped to the grid ``g*Z``; linear sums are exact
in grid units, quadratic sums exact in units of g² and snapped to g. :meth:`NoisyPearson.finalize`
turns the six noisy sums into a correlation (post-processing)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness import _validate as _v
from dpharness.core import AddRemove, Claim, FunctionLaw, InputSpec, Mechanism, PureDP, RealBox
from dpharness.registry import register

from ._noise import (
    DEFAULT_GRANULARITY, check_granularity, check_units, exact_dot, grid_laplace_law, grid_laplace_sample,
    bound_units, ratio_up, rescale_to_units, to_units,
)
from .std import sum_sensitivities

__all__ = ["NoisyPearson"]

_NAMES = ("y_n", "y_sx", "y_sy", "y_sxx", "y_syy", "y_sxy")


@register
@dataclass(frozen=True, kw_only=True)
class NoisyPearson(Mechanism):
    """Six noisy sums (n, Σx, Σy, Σx², Σy², Σxy) of pairs in ``[lo, hi]^2``; :meth:`finalize` gives
    the correlation.

    ``scale`` is the noise scale per unit of sensitivity: statistic ``i`` (snapped centre ``c_i``,
    sensitivity Δ_i = 1, B, B, Q, Q, Q with B = max(|lo|, |hi|) and Q = ceil(B²/g)·g on the grid)
    gets grid-Laplace noise of scale ``b_i = scale·Δ_i``, so each spends 1/scale = ε/6.
    Output ``y`` in ``(g*Z)^6``::

        P(y | x) = prod_{i=1..6} tanh(g/(2 b_i)) exp(-|y_i - c_i| / b_i)

    Neighbours: add/remove one pair (``AddRemove()``).
    Claim: ε-DP with ε = 6/scale (defaults lo = -1, hi = 1, scale = 6: ε = 1)."""

    name = "noisy_pearson"
    source = "seed: Pearson correlation from 6 noisy sums at ε/6 each (Laplace mechanism + composition), grid output"

    lo: Any = -1
    hi: Any = 1
    scale: Any = 6
    granularity: float = DEFAULT_GRANULARITY
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        check_granularity("granularity", self.granularity)
        bound_units(self.lo, self.hi, self.granularity)
        _v.positive("scale", self.scale)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, lo: Any = -1, hi: Any = 1,
                   granularity: float = DEFAULT_GRANULARITY) -> "NoisyPearson":
        """scale = 6/ε (rounded up): ε/6 per sum; claims ε-DP."""
        claim = PureDP(epsilon)
        return cls(lo=lo, hi=hi, scale=ratio_up(6, claim.epsilon), granularity=granularity, claim=claim)

    @property
    def sensitivities(self) -> tuple[Fraction, ...]:
        one, lin, quad = sum_sensitivities(*bound_units(self.lo, self.hi, self.granularity), self.granularity)
        return (one, lin, lin, quad, quad, quad)

    @property
    def noise_scales(self) -> tuple:
        """Scale of each sum's noise, ``scale·Δ_i`` rounded up."""
        return tuple(ratio_up(Fraction(self.scale) * d, 1) for d in self.sensitivities)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(RealBox(self.lo, self.hi, 2), AddRemove(), "dataset")

    def _centres(self, data) -> np.ndarray:
        g = float(self.granularity)
        arr = np.clip(np.asarray(data, dtype=float).reshape(-1, 2), float(self.lo), float(self.hi))
        mx, my = to_units("data", arr[:, 0], g), to_units("data", arr[:, 1], g)
        count = int(to_units("count", np.array([float(len(mx))]), g)[0])
        ones = np.ones_like(mx)
        gf = Fraction(g)
        c = [count, exact_dot(mx, ones), exact_dot(my, ones),
             rescale_to_units(exact_dot(mx, mx), gf), rescale_to_units(exact_dot(my, my), gf),
             rescale_to_units(exact_dot(mx, my), gf)]
        check_units("the sums", c)
        return np.array(c, dtype=np.int64)

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        return grid_laplace_sample(self._centres(data), list(self.noise_scales), self.granularity, size, rng)

    def _law(self, data: Any) -> FunctionLaw:
        return grid_laplace_law(self._centres(data), list(self.noise_scales), self.granularity, _NAMES)

    @staticmethod
    def finalize(outputs: np.ndarray) -> np.ndarray:
        """Post-processing: (Σxy - ΣxΣy/n) / sqrt((Σx² - (Σx)²/n)(Σy² - (Σy)²/n)) with
        n = max(noisy count, 1), clipped to [-1, 1]; NaN where a noisy variance is not positive."""
        o = np.asarray(outputs, dtype=float).reshape(-1, 6)
        n = np.maximum(o[:, 0], 1.0)
        cov = o[:, 5] - o[:, 1] * o[:, 2] / n
        vx = o[:, 3] - o[:, 1] ** 2 / n
        vy = o[:, 4] - o[:, 2] ** 2 / n
        ok = (vx > 0) & (vy > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = cov / np.sqrt(np.where(ok, vx * vy, 1.0))
        return np.where(ok, np.clip(r, -1.0, 1.0), np.nan)

    def example_pair(self) -> tuple[Any, Any]:
        """``[(hi, hi)]`` vs ``[(hi, hi), (e, e)]`` with ``e`` the bound of larger magnitude: all six
        sums move by their full sensitivity at once."""
        lo, hi = float(self.lo), float(self.hi)
        e = hi if abs(hi) >= abs(lo) else lo
        return np.array([[hi, hi]]), np.array([[hi, hi], [e, e]])
