"""Noisy standard deviation from three noisy sums (count, sum, sum of squares), each released
with grid-Laplace noise at ε/3 (Dwork, McSherry, Nissim & Smith 2006 — Laplace mechanism on
bounded queries; sequential composition, Dwork & Roth 2014 Thm. 3.16; the seed's "std from 3 sums"),
declared from parts (:mod:`dpharness.mechanisms.parts`).

Records lie in ``[lo, hi]`` (the declared domain); the three statistics are computed exactly, each
rounded once to the grid ``g*Z`` and released with discrete Laplace noise on the grid.
:meth:`NoisyStd.finalize` turns the three noisy sums into a standard deviation (post-processing,
kept outside the declaration so the released sums have an exact law)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness import _validate as _v
from dpharness.core import AddRemove, Claim, PureDP, RealInterval
from dpharness.registry import register

from . import parts as dp
from ._noise import check_granularity, ratio_up
from .parts import Composite, PartsMechanism
from .parts.noise import PerStatisticScales

__all__ = ["NoisyStd", "sum_stabilities"]


def sum_stabilities(lo: Any, hi: Any) -> tuple[Fraction, Fraction, Fraction]:
    """Add/remove stabilities (exact) of (count, sum, sum of squares) of records in ``[lo, hi]``:
    1, B and B² with B = max(|lo|, |hi|)."""
    b = max(abs(Fraction(lo)), abs(Fraction(hi)))
    return Fraction(1), b, b * b


@register
@dataclass(frozen=True, kw_only=True)
class NoisyStd(PerStatisticScales, Composite):
    """Three noisy sums (n, Σx, Σx²) of records in ``[lo, hi]``; :meth:`finalize` gives the std::

        dp.compose(dp.count() >> dp.laplace(b_1), dp.sum() >> dp.laplace(b_2), dp.sum_squares() >> dp.laplace(b_3))

    ``scale`` is the noise scale per unit of (grid-rounded) stability: statistic ``i`` (exact value
    ``v_i``, stability Δ_i = 1, B, B² with B = max(|lo|, |hi|)) gets grid-Laplace noise of scale
    ``b_i = scale·ceil(Δ_i/g)·g`` (:attr:`noise_scales`), so each spends 1/scale = ε/3.
    Output ``y`` in ``(g*Z)^3``, with ``c_i = floor(v_i/g + 1/2)``::

        P(y | x) = prod_{i=1..3} tanh(g/(2 b_i)) exp(-|y_i - g*c_i| / b_i)

    Neighbours: add/remove one record (``AddRemove()``); records are reals in ``[lo, hi]``.
    Claim: ε-DP with ε = 3/scale (defaults lo = 0, hi = 1, scale = 3: ε = 1)."""

    name = "noisy_std"
    source = (
        "seed: standard deviation from 3 noisy sums at ε/3 each (Laplace mechanism + composition), declared from parts"
    )

    lo: Any = 0
    hi: Any = 1
    scale: Any = 3
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
    def calibrated(cls, epsilon: Any = 1, *, lo: Any = 0, hi: Any = 1, granularity: Any = None) -> "NoisyStd":
        """scale = 3/ε (rounded up): ε/3 per sum; claims ε-DP."""
        claim = PureDP(epsilon)
        return cls(lo=lo, hi=hi, scale=ratio_up(3, claim.epsilon), granularity=granularity, claim=claim)

    @property
    def sensitivities(self) -> tuple[Fraction, Fraction, Fraction]:
        """Stabilities of (count, sum, sum of squares) under add/remove (exact)."""
        return sum_stabilities(self.lo, self.hi)

    def statistics(self) -> tuple:
        """(stability, quantum) of (count, sum, sum of squares): the count is an integer."""
        return tuple(zip(self.sensitivities, (1, None, None)))

    def structure(self) -> PartsMechanism:
        g = self.grid
        b = self.noise_scales
        steps = dp.compose(
            dp.count() >> dp.laplace(b[0], granularity=g),
            dp.sum() >> dp.laplace(b[1], granularity=g),
            dp.sum_squares() >> dp.laplace(b[2], granularity=g),
        )
        return dp.mechanism(
            name=self.name, records=RealInterval(self.lo, self.hi), relation=AddRemove(), steps=steps, claim=self.claim
        )

    @staticmethod
    def finalize(outputs: np.ndarray) -> np.ndarray:
        """Post-processing: sqrt(max(Σx²/n - (Σx/n)², 0)) with n = max(noisy count, 1), per row."""
        out = np.asarray(outputs, dtype=float).reshape(-1, 3)
        n = np.maximum(out[:, 0], 1.0)
        mean = out[:, 1] / n
        return np.sqrt(np.maximum(out[:, 2] / n - mean * mean, 0.0))


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
