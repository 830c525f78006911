"""The noisy histogram: the Laplace mechanism (Dwork, McSherry, Nissim & Smith 2006) applied to
the vector of bin counts, on the grid ``granularity * Z`` with discrete (grid-Laplace) noise, and
its gallery twin with the scale set to ε instead of 1/ε (StatDP's "NoisyHist2", Ding et al.
CCS 2018; DP-Sniper's NoisyHist2, Bichsel et al. S&P 2021).

One record changes one count by 1 (add/remove) or two counts by 1 each (substitution), so the
L1 sensitivity of the count vector is 1 or 2. Counts are integers, hence on the grid when the
granularity is at most 1 (a coarser grid rounds them, and the sensitivity grows to ceil(1/g)·g
per changed count, which :meth:`NoisyHistogram.calibrated` accounts for).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import AddRemove, Finite, FunctionLaw, InputSpec, Mechanism, PureDP, Relation, Substitute, exact
from dpharness.errors import ParameterError
from dpharness.registry import register

from ._literature import exact_ratio
from ._noise import DEFAULT_GRANULARITY, check_granularity, discrete_laplace, discrete_laplace_logpmf, on_grid_units, to_units

__all__ = ["NoisyHistogram", "NoisyHistogramScaleBug", "histogram_sensitivity"]


def histogram_sensitivity(relation: Relation, granularity: float) -> Fraction:
    """L1 sensitivity of the snapped count vector: (1 or 2 changed counts) × ceil(1/g)·g."""
    changed = 1 if isinstance(relation, AddRemove) else 2
    g = Fraction(granularity)
    return changed * math.ceil(1 / g) * g


@register
@dataclass(frozen=True, kw_only=True)
class NoisyHistogram(Mechanism):
    """Noisy histogram over ``bins`` categories: ``y_j = c_j + g·K_j``, ``K_j ~ DiscreteLaplace(scale/g)``
    i.i.d., where c_j is the count of records equal to j (snapped to the grid g·Z).

    pmf: ``P(y) = Π_j tanh(g/(2·scale)) · exp(-|y_j - c_j|/scale)`` on the grid (0 off it).
    Neighbours: ``relation`` (a field): AddRemove (L1 sensitivity Δ = 1) or Substitute (Δ = 2).
    Claim: PureDP(Δ_g/scale), tight (outputs with y_j <= min(c_j, c'_j) attain it).
    Defaults: bins = 4, AddRemove, scale = 1, claim PureDP(1), g = 2**-20.
    Input: a data set of records in {0..bins-1}. Output: float64 ``(size, bins)`` on the grid."""

    name: ClassVar[str] = "noisy_histogram"
    source: ClassVar[str] = "Dwork, McSherry, Nissim & Smith 2006 (Laplace mechanism on bin counts), grid version"

    bins: int = 4
    scale: Any = 1
    relation: Relation = AddRemove()
    granularity: float = DEFAULT_GRANULARITY

    def _check(self) -> None:
        _v.integer("bins", self.bins, minimum=2)
        _v.positive("scale", self.scale)
        if not isinstance(self.relation, (AddRemove, Substitute)):
            raise ParameterError(f"relation={self.relation!r} is not a data-set relation; pass AddRemove() or Substitute().")
        check_granularity("granularity", self.granularity)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, bins: int = 4, relation: Relation = AddRemove(),
                   granularity: float = DEFAULT_GRANULARITY):
        """``scale = Δ_g/ε`` with Δ_g the snapped L1 sensitivity (1 or 2 when g <= 1), claim PureDP(ε)."""
        epsilon = _v.positive("epsilon", epsilon)
        check_granularity("granularity", granularity)
        sens = histogram_sensitivity(relation, granularity)
        sens = int(sens) if sens.denominator == 1 else sens
        return cls(bins=bins, relation=relation, granularity=granularity,
                   scale=exact_ratio(sens, epsilon), claim=PureDP(epsilon))

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(Finite(tuple(range(self.bins))), self.relation, "dataset")

    def example_pair(self) -> tuple[Any, Any]:
        """One record per bin, and the neighbour with one more record in bin 0 (add/remove) or the
        record of bin 1 moved to bin 0 (substitution)."""
        data = np.arange(self.bins)
        if isinstance(self.relation, AddRemove):
            return data, np.append(data, 0)
        other = data.copy()
        other[1] = 0
        return data, other

    def _centre(self, data: np.ndarray) -> np.ndarray:
        counts = np.bincount(np.asarray(data, dtype=np.int64), minlength=self.bins)[: self.bins]
        return to_units("data", counts.astype(float), float(self.granularity))

    def _sample(self, data, size, rng):
        g = float(self.granularity)
        units = self._centre(data)[None, :] + discrete_laplace(float(self.scale) / g, (size, self.bins), rng)
        return units.astype(float) * g

    def _law(self, data):
        g = float(self.granularity)
        centre = self._centre(data)
        t = float(self.scale) / g
        ys = sp.symbols(f"y1:{self.bins + 1}", real=True)
        gs, bs = exact(self.granularity), exact(self.scale)
        expr = sp.Mul(*[sp.tanh(gs / (2 * bs)) * sp.exp(-sp.Abs(ys[j] - gs * int(centre[j])) / bs)
                        for j in range(self.bins)])

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            out = np.asarray(outputs, dtype=float).reshape(-1, self.bins)
            units, ok = on_grid_units(out, g)
            lp = discrete_laplace_logpmf(units - centre[None, :], t).sum(axis=1)
            return np.where(ok.all(axis=1), lp, -np.inf)

        return FunctionLaw("discrete", log_prob, ys, expr)


@register
@dataclass(frozen=True, kw_only=True)
class NoisyHistogramScaleBug(NoisyHistogram):
    """GALLERY. The noisy histogram calibrated with ``scale = ε`` instead of ``Δ/ε``
    (StatDP/DP-Sniper "NoisyHist2").

    pmf, neighbours: as :class:`NoisyHistogram`. Claim: PureDP(ε) (wrongly).
    True ε = Δ/scale = Δ/ε: 2 at the defaults ε = 1/2, AddRemove (Δ = 1), scale = 1/2 (at ε = 1
    the bug is invisible, hence the default ε = 1/2)."""

    name: ClassVar[str] = "noisy_histogram_scale_bug"
    source: ClassVar[str] = "StatDP (Ding et al. CCS 2018) NoisyHist2"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "noise scale set to ε instead of Δ/ε"
    true_epsilon: ClassVar[float] = 2.0

    scale: Any = Fraction(1, 2)
    claim: Any = PureDP(Fraction(1, 2))

    @classmethod
    def calibrated(cls, epsilon: Any = Fraction(1, 2), *, bins: int = 4, relation: Relation = AddRemove(),
                   granularity: float = DEFAULT_GRANULARITY):
        """The buggy calibration: ``scale = ε``."""
        epsilon = _v.positive("epsilon", epsilon)
        check_granularity("granularity", granularity)
        return cls(bins=bins, relation=relation, granularity=granularity, scale=epsilon, claim=PureDP(epsilon))
