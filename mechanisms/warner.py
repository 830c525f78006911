"""Warner's two-coin randomized response (S. L. Warner, "Randomized response: a survey technique
for eliminating evasive answer bias", JASA 60(309), 1965).

A respondent with a private bit flips a first coin: with probability ``p_truth`` they answer
truthfully; otherwise they flip a second coin and answer "yes" (1) with probability ``p_yes``.
The answer is sampled exactly: one Bernoulli with the exact rational probability
``P(y = 1 | x) = t x + (1 - t) q`` (:func:`dpharness.mechanisms._exact.bernoulli`)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
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

from ._exact import bernoulli, exact_rational
from ._noise import _readings, float_down, log_up

__all__ = ["WarnerRR"]


@register
@dataclass(frozen=True, kw_only=True)
class WarnerRR(Mechanism):
    """Warner's two-coin randomized response on one private bit.

    pmf on input ``x`` in ``{0, 1}`` (t = ``p_truth``, q = ``p_yes``)::

        P(y = 1 | x) = t*x + (1 - t)*q,     P(y = 0 | x) = 1 - P(y = 1 | x)

    Neighbours: the two records 0 and 1 (local DP).
    Claim: ε-DP with ε = max(log(P(1|1)/P(1|0)), log(P(0|0)/P(0|1))); the defaults t = q = 1/2
    give P(1|1) = 3/4, P(1|0) = 1/4, so ε = log 3 (claimed as log 3 rounded up)."""

    name = "warner_rr"
    source = "seed: Warner 1965, two-coin randomized response"

    p_truth: Any = Fraction(1, 2)
    p_yes: Any = Fraction(1, 2)
    claim: Claim = PureDP(log_up(3))

    def _check(self) -> None:
        _v.probability("p_truth", self.p_truth)
        _v.probability("p_yes", self.p_yes)

    @classmethod
    def calibrated(cls, epsilon: Any = log_up(3), *, p_yes: Any = Fraction(1, 2)) -> "WarnerRR":
        """The largest ``p_truth`` (rounded down) giving ε-DP with the given ``p_yes``.

        With P(1|1) = t + (1-t)q and P(1|0) = (1-t)q the binding ratio is
        max((t + (1-t)q)/((1-t)q), (1 - (1-t)q)/(1 - t - (1-t)q)); solving for t with q = 1/2 gives
        t = tanh(ε/2). For general q, t solves (t + (1-t)m)/((1-t)m) = e^ε with m = min(q, 1-q)."""
        claim = PureDP(epsilon)
        _v.probability("p_yes", p_yes, open_left=True, open_right=True)
        m = min(min(r, 1 - r) for r in _readings(p_yes))  # exact; the smallest reading of a float
        # t + (1-t) m = e (1-t) m  ->  t (1 - m + e m) = e m - m  ->  t = m (e - 1) / (1 + m (e - 1));
        # t increases with e, so take the smallest reading of epsilon and round t down
        with mpmath.workdps(50):
            eps = min(mpmath.mpf(float(claim.epsilon)), mpmath.mpf(repr(float(claim.epsilon))))
            m_mp = mpmath.mpf(Fraction(m).numerator) / Fraction(m).denominator
            t = m_mp * (mpmath.exp(eps) - 1) / (1 + m_mp * (mpmath.exp(eps) - 1))
            return cls(p_truth=float_down(t), p_yes=p_yes, claim=claim)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(Finite((0, 1)), Substitute(), "record")

    def _prob_one(self, x: int):
        t, q = exact(self.p_truth), exact(self.p_yes)
        return t * x + (1 - t) * q

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        # exact: Bernoulli(t x + (1 - t) q) with t, q read exactly (floats as their binary value)
        t, q = exact_rational("p_truth", self.p_truth), exact_rational("p_yes", self.p_yes)
        return bernoulli(t * int(data) + (1 - t) * q, size, rng).astype(np.int64)

    def _law(self, data: Any) -> DiscreteLaw:
        x = int(data)
        p1 = self._prob_one(x)
        y = sp.Symbol("y", integer=True)
        expr = sp.Piecewise((p1, sp.Eq(y, 1)), (1 - p1, True))
        return DiscreteLaw(outcomes=(0, 1), probs=(1 - p1, p1), symbols=(y,), expr=expr)

    def example_pair(self) -> tuple[Any, Any]:
        return 1, 0


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
