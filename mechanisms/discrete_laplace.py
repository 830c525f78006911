"""The discrete Laplace (two-sided geometric) mechanism on integer-valued queries
(Ghosh, Roughgarden & Sundararajan 2009, "Universally utility-maximizing privacy mechanisms",
STOC — the two-sided geometric mechanism).

Integer query answers get integer noise with ``P(k) ∝ exp(-|k| / scale)``; no floats touch the
output, so nothing leaks through float arithmetic. The noise is sampled exactly at the exact scale
(a float scale is read as its binary value) by :func:`dpharness.mechanisms._exact.discrete_laplace`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import (
    BoundedChange, Claim, FunctionLaw, InputSpec, IntegerRange, Mechanism, PureDP, exact,
)
from dpharness.registry import register

from ._noise import discrete_laplace, discrete_laplace_logpmf, ratio_up

__all__ = ["DiscreteLaplace", "INTEGER_LIMIT"]

INTEGER_LIMIT = 2 ** 53  # query answers must be integers in [-2**53, 2**53] (exact in float64 too)


@register
@dataclass(frozen=True, kw_only=True)
class DiscreteLaplace(Mechanism):
    """The discrete Laplace mechanism on a vector of integer query answers.

    pmf on input ``x`` in ``Z^dim``, output ``y`` in ``Z^dim``, ``b = scale``::

        P(y | x) = prod_i tanh(1/(2b)) * exp(-|y_i - x_i| / b)

    (``tanh(1/(2b)) = (1 - e^{-1/b}) / (1 + e^{-1/b})`` normalises the two-sided geometric).
    Neighbours: integer vectors at L1 distance <= ``sensitivity`` (an integer).
    Claim: ε-DP with ε = sensitivity / scale (defaults: 1/1 = 1)."""

    name = "discrete_laplace"
    source = "seed: two-sided geometric mechanism (Ghosh, Roughgarden & Sundararajan 2009)"

    scale: Any = 1
    sensitivity: int = 1
    dim: int = 1
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.positive("scale", self.scale)
        _v.integer("sensitivity", self.sensitivity, minimum=1)
        _v.integer("dim", self.dim, minimum=1)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, sensitivity: int = 1, dim: int = 1) -> "DiscreteLaplace":
        """scale = sensitivity / ε (rounded up); claims ε-DP."""
        claim = PureDP(epsilon)
        _v.integer("sensitivity", sensitivity, minimum=1)
        return cls(scale=ratio_up(sensitivity, claim.epsilon), sensitivity=sensitivity, dim=dim, claim=claim)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(IntegerRange(-INTEGER_LIMIT, INTEGER_LIMIT), BoundedChange(self.sensitivity, "l1"),
                         "vector", dim=self.dim)

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        x = np.asarray(data).astype(np.int64)
        noise = discrete_laplace(self.scale, (size, self.dim), rng)  # exact, at the exact scale
        out = x + noise
        return out[:, 0] if self.dim == 1 else out

    def _law(self, data: Any) -> FunctionLaw:
        x = np.asarray(data).astype(np.int64)
        dim = self.dim
        b = float(self.scale)

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            out = np.asarray(outputs, dtype=float).reshape(-1, dim)
            return discrete_laplace_logpmf(out - x, b).sum(axis=1)

        b_exact = exact(self.scale)
        symbols = (sp.Symbol("y", integer=True),) if dim == 1 else tuple(sp.Symbol(f"y{i}", integer=True) for i in range(dim))
        expr = sp.Mul(*[sp.tanh(1 / (2 * b_exact)) * sp.exp(-sp.Abs(s - int(c)) / b_exact) for s, c in zip(symbols, x)])
        return FunctionLaw("discrete", log_prob, symbols, expr)

    def example_pair(self) -> tuple[Any, Any]:
        x = np.zeros(self.dim, dtype=np.int64)
        y = x.copy()
        y[0] = self.sensitivity
        return x, y
