"""k-ary randomized response (the seed's local-DP algorithm; Warner 1965 for k = 2,
generalised as in Kairouz, Oh & Viswanath 2014 "Extremal mechanisms for local differential privacy").

A user holding one of ``k`` categories reports the truth with probability ``e^L / (e^L + k - 1)``
and otherwise one of the other ``k - 1`` categories uniformly at random. Any two records are
neighbours (local DP), and the privacy loss is exactly ``L`` (the log-odds). The sampler is exact
(:func:`dpharness.mechanisms._exact.randomized_response`): the lie probability is never rounded,
so it is ``(k-1)/(e^L + k - 1) > 0`` even at L = 37 or 1000."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import (
    Claim,
    DiscreteLaw,
    Finite,
    InputSpec,
    Mechanism,
    PureDP,
    Substitute,
    exact,
)
from dpharness.registry import register

from ._exact import exact_rational, randomized_response

__all__ = ["RandomizedResponse"]


@register
@dataclass(frozen=True, kw_only=True)
class RandomizedResponse(Mechanism):
    """k-ary randomized response.

    pmf on input ``x`` in ``{0..k-1}``, output ``y``::

        P(y | x) = e^L / (e^L + k - 1)   if y == x
                   1   / (e^L + k - 1)   otherwise

    Neighbours: any two records (``Substitute`` of a single record, local DP).
    Claim: ε-DP with ε = L = ``log_odds`` (the ratio ``P(x|x)/P(x|x')`` is ``e^L``).
    ``log_odds`` is the exact parameter (ε itself), so the prover reasons without rounding."""

    name = "randomized_response"
    source = "seed: k-ary randomized response (Warner 1965; Kairouz, Oh & Viswanath 2014)"

    k: int = 2
    log_odds: Any = 1
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.integer("k", self.k, minimum=2)
        _v.nonnegative("log_odds", self.log_odds)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, k: int = 2) -> "RandomizedResponse":
        """Randomized response with log-odds ε claiming ε-DP."""
        claim = PureDP(epsilon)
        return cls(k=k, log_odds=claim.epsilon, claim=claim)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(Finite(tuple(range(self.k))), Substitute(), "record")

    def p_truth(self) -> float:
        """P(report the true category) = 1 / (1 + (k-1) e^{-L}) as a float."""
        return 1.0 / (1.0 + (self.k - 1) * math.exp(-float(self.log_odds)))

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        # exact: lies with probability exactly (k-1)/(e^L + k - 1) for the exact L (a float read as its
        # binary value, as `exact` reads it for the law and the prover), however large L is
        L = exact_rational("log_odds", self.log_odds)
        return randomized_response(int(data), self.k, L, size, rng)

    def _law(self, data: Any) -> DiscreteLaw:
        x = int(data)
        e_l = sp.exp(exact(self.log_odds))
        denom = e_l + self.k - 1
        y = sp.Symbol("y", integer=True)
        probs = tuple(e_l / denom if j == x else 1 / denom for j in range(self.k))
        expr = sp.Piecewise((e_l / denom, sp.Eq(y, x)), (1 / denom, True))
        return DiscreteLaw(outcomes=tuple(range(self.k)), probs=probs, symbols=(y,), expr=expr)

    def example_pair(self) -> tuple[Any, Any]:
        return 0, 1


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
