"""The truncated (range-restricted) geometric mechanism: Ghosh, Roughgarden & Sundararajan 2009,
"Universally utility-maximizing privacy mechanisms" (STOC 2009), §2.1.

A count x ∈ {0..n} is released as ``clamp(x + Z, 0, n)`` with Z two-sided geometric,
``P(Z = z) = (1-α)/(1+α) α^{|z|}``, ``α = e^{-L}``; the clamping folds each tail onto its end point.
The privacy parameter enters through its exact pre-image ``log_odds`` L (α itself is
transcendental), so the prover can reason about ``α = e^{-L}`` exactly.
"""

from __future__ import annotations

from fractions import Fraction

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import BoundedChange, DiscreteLaw, InputSpec, IntegerRange, Mechanism, PureDP, exact
from dpharness.registry import register

from ._noise import discrete_laplace

__all__ = ["TruncatedGeometric"]


@register
@dataclass(frozen=True, kw_only=True)
class TruncatedGeometric(Mechanism):
    """Truncated geometric mechanism on a count x ∈ {0..n}: ``y = min(max(x + Z, 0), n)``.

    pmf (α = e^{-log_odds}): ``P(y) = (1-α)/(1+α) α^{|y-x|}`` for 0 < y < n,
    ``P(0) = α^x/(1+α)``, ``P(n) = α^{n-x}/(1+α)``.
    Neighbours: counts with ``|x - x'| <= 1`` (input: a length-1 vector ``[x]``; a bare integer is
    accepted too). Claim: PureDP(log_odds) (tight: P(0|0)/P(0|1) = e^{log_odds}).
    Defaults: n = 5, log_odds = 1 (DP-Sniper's/StatDP's "TruncatedGeometricMechanism" shape).
    Output: int64 ``(size,)`` in {0..n}. Discrete throughout: no floating-point leak."""

    name: ClassVar[str] = "truncated_geometric"
    source: ClassVar[str] = "Ghosh, Roughgarden & Sundararajan 2009, §2.1 (range-restricted geometric mechanism)"

    n: int = 5
    log_odds: Any = 1
    claim: Any = PureDP(1)

    def _check(self) -> None:
        _v.integer("n", self.n, minimum=1)
        _v.positive("log_odds", self.log_odds)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, n: int = 5):
        """``log_odds = ε`` (α = e^{-ε}), claim PureDP(ε)."""
        epsilon = _v.positive("epsilon", epsilon)
        return cls(n=n, log_odds=epsilon, claim=PureDP(epsilon))

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(IntegerRange(0, self.n), BoundedChange(1, "l1"), "vector", dim=1)

    def sample(self, data, size, rng):
        return super().sample(np.atleast_1d(data), size, rng)

    def law(self, data):
        return super().law(np.atleast_1d(data))

    def example_pair(self) -> tuple[Any, Any]:
        """x = 0 vs x' = 1: the output 0 has likelihood ratio exactly e^{log_odds}."""
        return np.array([0]), np.array([1])

    def _sample(self, data, size, rng):
        x = int(np.asarray(data).reshape(-1)[0])
        z = discrete_laplace(1 / Fraction(self.log_odds), size, rng)  # exact: P(z) ∝ e^{-L|z|}, L read exactly
        return np.clip(x + z, 0, self.n).astype(np.int64)

    def _law(self, data):
        x = int(np.asarray(data).reshape(-1)[0])
        n = self.n
        a = sp.exp(-exact(self.log_odds))
        y = sp.Symbol("y", integer=True)
        probs = []
        for yv in range(n + 1):
            if yv == 0:
                probs.append(a**x / (1 + a))
            elif yv == n:
                probs.append(a ** (n - x) / (1 + a))
            else:
                probs.append((1 - a) / (1 + a) * a ** abs(yv - x))
        expr = sp.Piecewise(
            (a**x / (1 + a), sp.Eq(y, 0)),
            (a ** (n - x) / (1 + a), sp.Eq(y, n)),
            ((1 - a) / (1 + a) * a ** sp.Abs(y - x), True),
        )
        return DiscreteLaw(outcomes=tuple(range(n + 1)), probs=tuple(probs), symbols=(y,), expr=expr)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
