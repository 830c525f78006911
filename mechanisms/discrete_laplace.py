"""The discrete Laplace (two-sided geometric) mechanism on integer-valued queries
(Ghosh, Roughgarden & Sundararajan 2009, "Universally utility-maximizing privacy mechanisms",
STOC — the two-sided geometric mechanism), declared from parts (``dp.discrete_laplace(scale)``).

Integer query answers get integer noise with ``P(k) ∝ exp(-|k| / scale)``, sampled exactly at the
exact scale (a float scale is read as its binary value) by
:func:`dpharness.mechanisms._exact.discrete_laplace`; outputs are exact integers (as floats), so
nothing leaks through float arithmetic."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpharness import _validate as _v
from dpharness.core import BoundedChange, Claim, IntegerRange, PureDP
from dpharness.errors import ParameterError
from dpharness.registry import register

from . import parts as dp
from ._noise import ratio_up
from .parts import Composite, PartsMechanism
from .parts._grid import _MAX_SCALE_UNITS

__all__ = ["DiscreteLaplace", "INTEGER_LIMIT"]

# query answers must be integers in [-INTEGER_LIMIT, INTEGER_LIMIT]: exact floats, and exact grid
# values of the parts' release (which refuses statistics of 2**52 grid steps or more)
INTEGER_LIMIT = 2**52 - 1


@register
@dataclass(frozen=True, kw_only=True)
class DiscreteLaplace(Composite):
    """The discrete Laplace mechanism on a vector of integer query answers: ``dp.discrete_laplace(scale)``
    on input ``"vector"`` under ``BoundedChange(sensitivity, "l1")``.

    Law on input ``x`` in ``Z^dim``, output ``y`` in ``Z^dim`` (released as exact float integers),
    ``b = scale``::

        P(y | x) = prod_i tanh(1/(2b)) * exp(-|y_i - x_i| / b)

    (``tanh(1/(2b)) = (1 - e^{-1/b}) / (1 + e^{-1/b})`` normalises the two-sided geometric).
    Neighbours: integer vectors (entries in ``[-(2**52 - 1), 2**52 - 1]``) at L1 distance <=
    ``sensitivity`` (an integer); integers are on the grid, so there is no rounding.
    Claim: ε-DP with ε = sensitivity / scale (defaults: 1/1 = 1). Scales above ``2**45`` are
    refused (the noise would reach the range where floats stop being exact integers)."""

    name = "discrete_laplace"
    source = "seed: two-sided geometric mechanism (Ghosh, Roughgarden & Sundararajan 2009), declared from parts"

    scale: Any = 1
    sensitivity: int = 1
    dim: int = 1
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.positive("scale", self.scale)
        _v.integer("sensitivity", self.sensitivity, minimum=1)
        _v.integer("dim", self.dim, minimum=1)
        if Fraction(self.scale) > _MAX_SCALE_UNITS:
            raise ParameterError(
                f"scale={self.scale!r} is above 2**45, where the integer outputs would reach 2**52 and "
                "stop being exact floats; pass scale <= 2**45 (or use laplace with a coarser granularity)."
            )

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, sensitivity: int = 1, dim: int = 1) -> "DiscreteLaplace":
        """scale = sensitivity / ε (rounded up); claims ε-DP."""
        claim = PureDP(epsilon)
        _v.integer("sensitivity", sensitivity, minimum=1)
        return cls(scale=ratio_up(sensitivity, claim.epsilon), sensitivity=sensitivity, dim=dim, claim=claim)

    def structure(self) -> PartsMechanism:
        return dp.mechanism(
            name=self.name,
            records=IntegerRange(-INTEGER_LIMIT, INTEGER_LIMIT),
            relation=BoundedChange(self.sensitivity, "l1"),
            input="vector",
            dim=self.dim,
            steps=dp.discrete_laplace(self.scale),
            claim=self.claim,
        )


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
