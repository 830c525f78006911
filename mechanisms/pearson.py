"""Noisy Pearson correlation from six noisy sums (n, Σx, Σy, Σx², Σy², Σxy), each released with
grid-Laplace noise at ε/6 (Dwork, McSherry, Nissim & Smith 2006 — Laplace mechanism on bounded
queries; sequential composition, Dwork & Roth 2014 Thm. 3.16; the seed's "correlation from 6 sums"),
declared from parts (:mod:`dpharness.mechanisms.parts`).

Records are pairs ``(x, y)`` in ``[lo, hi]^2`` (a ``RealBox``); the six statistics are computed
exactly, each rounded once to the grid ``g*Z`` and released with discrete Laplace noise on the grid.
:meth:`NoisyPearson.finalize` turns the six noisy sums into a correlation (post-processing, kept
outside the declaration so the released sums have an exact law)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness import _validate as _v
from dpharness.core import AddRemove, Claim, PureDP, RealBox
from dpharness.registry import register

from . import parts as dp
from ._noise import check_granularity, ratio_up
from .parts import Composite, PartsMechanism
from .parts.noise import PerStatisticScales
from .std import sum_stabilities

__all__ = ["NoisyPearson"]


@register
@dataclass(frozen=True, kw_only=True)
class NoisyPearson(PerStatisticScales, Composite):
    """Six noisy sums (n, Σx, Σy, Σx², Σy², Σxy) of pairs in ``[lo, hi]^2``; :meth:`finalize` gives
    the correlation::

        dp.compose(dp.count() >> dp.laplace(b_1),
                   dp.column(0) >> dp.sum() >> dp.laplace(b_2), dp.column(1) >> dp.sum() >> dp.laplace(b_3),
                   dp.column(0) >> dp.sum_squares() >> dp.laplace(b_4), dp.column(1) >> dp.sum_squares() >> dp.laplace(b_5),
                   dp.sum_products(0, 1) >> dp.laplace(b_6))

    ``scale`` is the noise scale per unit of (grid-rounded) stability: statistic ``i`` (exact value
    ``v_i``, stability Δ_i = 1, B, B, B², B², B² with B = max(|lo|, |hi|)) gets grid-Laplace noise of
    scale ``b_i = scale·ceil(Δ_i/g)·g`` (:attr:`noise_scales`), so each spends 1/scale = ε/6.
    Output ``y`` in ``(g*Z)^6``, with ``c_i = floor(v_i/g + 1/2)``::

        P(y | x) = prod_{i=1..6} tanh(g/(2 b_i)) exp(-|y_i - g*c_i| / b_i)

    Neighbours: add/remove one pair (``AddRemove()``).
    Claim: ε-DP with ε = 6/scale (defaults lo = -1, hi = 1, scale = 6: ε = 1)."""

    name = "noisy_pearson"
    source = (
        "seed: Pearson correlation from 6 noisy sums at ε/6 each (Laplace mechanism + composition), declared from parts"
    )

    lo: Any = -1
    hi: Any = 1
    scale: Any = 6
    granularity: Any = None
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.real("lo", self.lo)
        _v.real("hi", self.hi)
        _v.ordered("lo", self.lo, "hi", self.hi)
        _v.positive("scale", self.scale)
        if self.granularity is not None:
            check_granularity("granularity", self.granularity)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, lo: Any = -1, hi: Any = 1, granularity: Any = None) -> "NoisyPearson":
        """scale = 6/ε (rounded up): ε/6 per sum; claims ε-DP."""
        claim = PureDP(epsilon)
        return cls(lo=lo, hi=hi, scale=ratio_up(6, claim.epsilon), granularity=granularity, claim=claim)

    @property
    def sensitivities(self) -> tuple[Fraction, ...]:
        """Stabilities of the six statistics under add/remove (exact)."""
        one, lin, quad = sum_stabilities(self.lo, self.hi)
        return (one, lin, lin, quad, quad, quad)

    def statistics(self) -> tuple:
        """(stability, quantum) of the six statistics: the count is an integer."""
        return tuple(zip(self.sensitivities, (1,) + (None,) * 5))

    def structure(self) -> PartsMechanism:
        g = self.grid
        b = self.noise_scales
        lap = lambda i: dp.laplace(b[i], granularity=g)
        steps = dp.compose(
            dp.count() >> lap(0),
            dp.column(0) >> dp.sum() >> lap(1),
            dp.column(1) >> dp.sum() >> lap(2),
            dp.column(0) >> dp.sum_squares() >> lap(3),
            dp.column(1) >> dp.sum_squares() >> lap(4),
            dp.sum_products(0, 1) >> lap(5),
        )
        return dp.mechanism(
            name=self.name, records=RealBox(self.lo, self.hi, 2), relation=AddRemove(), steps=steps, claim=self.claim
        )

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


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
