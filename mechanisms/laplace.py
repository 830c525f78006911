"""The Laplace mechanism on a power-of-two grid (Dwork, McSherry, Nissim & Smith 2006,
"Calibrating noise to sensitivity in private data analysis", TCC; grid output following the
fix of Mironov 2012, "On significance of the least significant bits for differential privacy", CCS),
declared from parts (``dp.laplace(scale)`` on a vector of query answers).

The textbook version ``x + numpy.random.laplace(0, b)`` leaks through the float representation
of its output (Mironov 2012); it lives in the gallery as ``textbook_laplace``. Here each
coordinate is rounded to the grid ``g*Z`` (``g`` = ``granularity``, a power of two) and noise is a
discrete Laplace on the grid with the same scale, so every output is an exact grid point whose
law depends on the data only through the rounded centre."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpharness import _validate as _v
from dpharness.core import BoundedChange, Claim, PureDP, RealInterval
from dpharness.registry import register

from . import parts as dp
from ._noise import check_granularity, ratio_up
from .parts import Composite, PartsMechanism
from .parts.noise import fit_granularity, grid_distance

__all__ = ["Laplace"]


@register
@dataclass(frozen=True, kw_only=True)
class Laplace(Composite):
    """The Laplace mechanism on a vector of query answers, output on the grid ``g*Z``: ``dp.laplace(scale)``
    on input ``"vector"`` under ``BoundedChange(sensitivity, "l1")``.

    With ``c = g * floor(x/g + 1/2)`` (coordinate-wise rounding), ``b = scale`` and output
    ``y`` in ``(g*Z)^dim``::

        P(y | x) = prod_i tanh(g/(2b)) * exp(-|y_i - c_i| / b)

    (a discrete Laplace on the grid: the grid analogue of the density exp(-|y-x|/b)/(2b)).
    Neighbours: real query vectors at L1 distance <= ``sensitivity`` (``BoundedChange(sensitivity, "l1")``).
    Rounding keeps that distance except for the grid: the rounded vectors are at L1 distance at
    most :attr:`effective_sensitivity` = ``(ceil(Δ/g) + dim - 1) * g`` (exactly Δ when dim = 1 and Δ
    is a multiple of g).
    Claim: ε-DP with ε = effective_sensitivity / scale (defaults: Δ = 1, scale = 1, ε = 1).
    ``granularity=None`` is ``2**-20``, or the finest coarser power of two keeping ``scale`` within
    ``2**45`` grid steps."""

    name = "laplace"
    source = "seed: Dwork, McSherry, Nissim & Smith 2006; grid output after Mironov 2012; declared from parts"

    scale: Any = 1
    sensitivity: Any = 1
    dim: int = 1
    granularity: Any = None
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.positive("scale", self.scale)
        _v.positive("sensitivity", self.sensitivity)
        _v.integer("dim", self.dim, minimum=1)
        if self.granularity is not None:
            check_granularity("granularity", self.granularity)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, sensitivity: Any = 1, dim: int = 1, granularity: Any = None) -> "Laplace":
        """scale = effective_sensitivity / ε, rounded up; claims ε-DP."""
        claim = PureDP(epsilon)
        _v.positive("sensitivity", sensitivity)
        _v.integer("dim", dim, minimum=1)
        if granularity is not None:
            check_granularity("granularity", granularity)
        scale_at = lambda g: ratio_up(grid_distance(sensitivity, g, dim), claim.epsilon)
        g = fit_granularity(granularity, lambda g: [scale_at(g)])
        return cls(scale=scale_at(g), sensitivity=sensitivity, dim=dim, granularity=granularity, claim=claim)

    @property
    def grid(self) -> float:
        """The granularity used (``granularity``, or the automatic choice when it is None)."""
        return fit_granularity(self.granularity, lambda g: [self.scale])

    @property
    def effective_sensitivity(self) -> Fraction:
        """Bound on the L1 distance of the rounded centres of two neighbouring inputs (exact)."""
        return grid_distance(self.sensitivity, self.grid, self.dim)

    def structure(self) -> PartsMechanism:
        return dp.mechanism(
            name=self.name,
            records=RealInterval(),
            relation=BoundedChange(self.sensitivity, "l1"),
            input="vector",
            dim=self.dim,
            steps=dp.laplace(self.scale, granularity=self.grid),
            claim=self.claim,
        )


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
