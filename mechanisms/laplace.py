"""The Laplace mechanism on a power-of-two grid (Dwork, McSherry, Nissim & Smith 2006,
"Calibrating noise to sensitivity in private data analysis", TCC; grid output following the
fix of Mironov 2012, "On significance of the least significant bits for differential privacy", CCS).

The textbook version ``x + numpy.random.laplace(0, b)`` leaks through the float representation
of its output (Mironov 2012); it lives in the gallery as ``textbook_laplace``. Here each
coordinate is snapped to the grid ``g*Z`` (``g`` = ``granularity``, a power of two) and noise is a
discrete Laplace on the grid with the same scale, so every output is an exact grid point whose
law depends on the data only through the snapped centre."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness import _validate as _v
from dpharness.core import (
    BoundedChange, Claim, FunctionLaw, InputSpec, Mechanism, PureDP, RealInterval,
)
from dpharness.registry import register

from ._noise import (
    DEFAULT_GRANULARITY, check_granularity, grid_laplace_law, grid_laplace_sample, grid_sensitivity,
    ratio_up, to_units,
)

__all__ = ["Laplace"]


@register
@dataclass(frozen=True, kw_only=True)
class Laplace(Mechanism):
    """The Laplace mechanism on a vector of query answers, output on the grid ``g*Z``.

    With ``c = g * floor(x/g + 1/2)`` (coordinate-wise snapping), ``b = scale`` and output
    ``y`` in ``(g*Z)^dim``::

        P(y | x) = prod_i tanh(g/(2b)) * exp(-|y_i - c_i| / b)

    (a discrete Laplace on the grid: the grid analogue of the density exp(-|y-x|/b)/(2b)).
    Neighbours: query vectors at L1 distance <= ``sensitivity`` (``BoundedChange(sensitivity, "l1")``).
    Snapping keeps that distance except for rounding: the snapped vectors are at L1 distance at
    most :attr:`effective_sensitivity` = ``(ceil(Δ/g) + dim - 1) * g`` (exactly Δ when dim = 1 and Δ
    is a multiple of g).
    Claim: ε-DP with ε = effective_sensitivity / scale (defaults: Δ = 1, scale = 1, ε = 1)."""

    name = "laplace"
    source = "seed: Dwork, McSherry, Nissim & Smith 2006; grid output after Mironov 2012"

    scale: Any = 1
    sensitivity: Any = 1
    dim: int = 1
    granularity: float = DEFAULT_GRANULARITY
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.positive("scale", self.scale)
        _v.positive("sensitivity", self.sensitivity)
        _v.integer("dim", self.dim, minimum=1)
        check_granularity("granularity", self.granularity)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, sensitivity: Any = 1, dim: int = 1,
                   granularity: float = DEFAULT_GRANULARITY) -> "Laplace":
        """scale = effective_sensitivity / ε, rounded up; claims ε-DP."""
        claim = PureDP(epsilon)
        _v.positive("sensitivity", sensitivity)
        _v.integer("dim", dim, minimum=1)
        g = check_granularity("granularity", granularity)
        scale = ratio_up(grid_sensitivity(sensitivity, g, dim), claim.epsilon)
        return cls(scale=scale, sensitivity=sensitivity, dim=dim, granularity=granularity, claim=claim)

    @property
    def effective_sensitivity(self) -> Fraction:
        """Bound on the L1 distance of the snapped centres of two neighbouring inputs (exact)."""
        return grid_sensitivity(self.sensitivity, self.granularity, self.dim)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(RealInterval(), BoundedChange(self.sensitivity, "l1"), "vector", dim=self.dim)

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        centre = to_units("data", data, self.granularity)
        out = grid_laplace_sample(centre, self.scale, self.granularity, size, rng)
        return out[:, 0] if self.dim == 1 else out

    def _law(self, data: Any) -> FunctionLaw:
        centre = to_units("data", data, self.granularity)
        names = ("y",) if self.dim == 1 else tuple(f"y{i}" for i in range(self.dim))
        return grid_laplace_law(centre, self.scale, self.granularity, names)

    def example_pair(self) -> tuple[Any, Any]:
        """``[a, 0, ...]`` vs ``[a + Δ, 0, ...]``, with ``a`` chosen so the snapped centres are
        ``ceil(Δ/g) * g`` apart (``a = 0`` when Δ is a multiple of g)."""
        g = Fraction(self.granularity)
        delta = Fraction(self.sensitivity)
        frac = delta / g - math.floor(delta / g)
        a = g * (Fraction(1, 2) - frac) if frac else Fraction(0)
        x = np.zeros(self.dim)
        y = np.zeros(self.dim)
        x[0] = float(a)
        y[0] = float(a + delta)
        if Fraction(y[0]) - Fraction(x[0]) > delta:  # float rounding pushed the pair apart
            y[0] = math.nextafter(y[0], -math.inf)
        return x, y
