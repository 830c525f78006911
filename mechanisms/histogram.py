"""The noisy histogram: the Laplace mechanism (Dwork, McSherry, Nissim & Smith 2006) applied to
the vector of bin counts, declared from parts (``dp.histogram(...) >> dp.laplace(scale)``, on the grid
``granularity * Z`` with discrete Laplace noise), and its gallery twin with the scale set to ε instead
of Δ/ε (StatDP's "NoisyHist2", Ding et al. CCS 2018; DP-Sniper's NoisyHist2, Bichsel et al. S&P 2021).

One record changes one count by 1 (add/remove) or two counts by 1 each (substitution), so the
L1 stability of the count vector is Δ = 1 or 2. Counts are integers, hence exactly on the grid when
the granularity is at most 1; a coarser grid rounds them, and the rounded vectors are at most
``(ceil(Δ/g) + bins - 1)·g`` apart (the parts proof's rounding lemma), which
:meth:`NoisyHistogram.calibrated` accounts for.

The gallery twin stays a hand-written mechanism with its own proof (``dpharness.proofs.histogram``):
the bug is in its calibration, which a declaration from parts would not reproduce by itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import (
    AddRemove,
    Claim,
    Finite,
    FunctionLaw,
    InputSpec,
    Mechanism,
    PureDP,
    Relation,
    Substitute,
    exact,
)
from dpharness.errors import ParameterError
from dpharness.registry import register

from . import parts as dp
from ._literature import exact_ratio
from ._noise import (
    DEFAULT_GRANULARITY,
    check_granularity,
    discrete_laplace,
    discrete_laplace_logpmf,
    on_grid_units,
    to_units,
)
from .parts import Composite, PartsMechanism
from .parts.noise import fit_granularity, grid_distance

__all__ = ["NoisyHistogram", "NoisyHistogramScaleBug"]


def _check_fields(bins: Any, scale: Any, relation: Any) -> None:
    _v.integer("bins", bins, minimum=2)
    _v.positive("scale", scale)
    if not isinstance(relation, (AddRemove, Substitute)):
        raise ParameterError(f"relation={relation!r} is not a data-set relation; pass AddRemove() or Substitute().")


@register
@dataclass(frozen=True, kw_only=True)
class NoisyHistogram(Composite):
    """Noisy histogram over ``bins`` categories::

        dp.histogram(categories=range(bins)) >> dp.laplace(scale)

    ``y_j = g·(c_j + K_j)``, ``K_j ~ DiscreteLaplace(scale/g)`` i.i.d., where ``c_j = floor(n_j/g + 1/2)``
    and ``n_j`` is the number of records equal to j.
    Law: ``P(y) = Π_j tanh(g/(2·scale)) · exp(-|y_j - g·c_j|/scale)`` on the grid (0 off it).
    Neighbours: ``relation`` (a field): AddRemove (L1 stability Δ = 1) or Substitute (Δ = 2).
    Claim: PureDP(Δ_g/scale) with Δ_g = Δ when g <= 1 (else (ceil(Δ/g) + bins - 1)·g), tight (outputs
    with y_j <= min(c_j, c'_j) attain it). Defaults: bins = 4, AddRemove, scale = 1, claim PureDP(1),
    g = 2**-20. Input: a data set of records in {0..bins-1}. Output: float64 ``(size, bins)`` on the grid."""

    name: ClassVar[str] = "noisy_histogram"
    source: ClassVar[str] = (
        "Dwork, McSherry, Nissim & Smith 2006 (Laplace mechanism on bin counts), declared from parts"
    )

    bins: int = 4
    scale: Any = 1
    relation: Relation = AddRemove()
    granularity: Any = None
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _check_fields(self.bins, self.scale, self.relation)
        if self.granularity is not None:
            check_granularity("granularity", self.granularity)

    @property
    def grid(self) -> float:
        """The granularity used (``granularity``, or the automatic choice when it is None)."""
        return fit_granularity(self.granularity, lambda g: [self.scale])

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, bins: int = 4, relation: Relation = AddRemove(), granularity: Any = None):
        """``scale = Δ_g/ε`` with Δ_g the grid-rounded L1 stability (1 or 2 when g <= 1), claim PureDP(ε)."""
        epsilon = _v.positive("epsilon", epsilon)
        _check_fields(bins, 1, relation)
        if granularity is not None:
            check_granularity("granularity", granularity)
        delta = 1 if isinstance(relation, AddRemove) else 2

        def scale_at(g: float) -> Any:
            sens = grid_distance(delta, g, dim=bins, quantum=1)
            return exact_ratio(int(sens) if sens.denominator == 1 else sens, epsilon)

        g = fit_granularity(granularity, lambda g: [scale_at(g)])
        return cls(bins=bins, relation=relation, granularity=granularity, scale=scale_at(g), claim=PureDP(epsilon))

    def structure(self) -> PartsMechanism:
        steps = dp.histogram(categories=range(self.bins)) >> dp.laplace(self.scale, granularity=self.grid)
        return dp.mechanism(
            name=self.name,
            records=Finite(tuple(range(self.bins))),
            relation=self.relation,
            steps=steps,
            claim=self.claim,
        )


@register
@dataclass(frozen=True, kw_only=True)
class NoisyHistogramScaleBug(Mechanism):
    """GALLERY. The noisy histogram calibrated with ``scale = ε`` instead of ``Δ/ε``
    (StatDP/DP-Sniper "NoisyHist2").

    ``y_j = c_j + g·K_j``, ``K_j ~ DiscreteLaplace(scale/g)`` i.i.d., c_j the count of records equal
    to j (snapped to the grid g·Z); pmf ``P(y) = Π_j tanh(g/(2·scale)) · exp(-|y_j - c_j|/scale)``.
    Neighbours: ``relation``: AddRemove (L1 sensitivity Δ = 1) or Substitute (Δ = 2).
    Claim: PureDP(ε) (wrongly). True ε = Δ/scale = Δ/ε: 2 at the defaults ε = 1/2, AddRemove
    (Δ = 1), scale = 1/2 (at ε = 1 the bug is invisible, hence the default ε = 1/2)."""

    name: ClassVar[str] = "noisy_histogram_scale_bug"
    source: ClassVar[str] = "StatDP (Ding et al. CCS 2018) NoisyHist2"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "noise scale set to ε instead of Δ/ε"
    true_epsilon: ClassVar[float] = 2.0

    bins: int = 4
    scale: Any = Fraction(1, 2)
    relation: Relation = AddRemove()
    granularity: float = DEFAULT_GRANULARITY
    claim: Any = PureDP(Fraction(1, 2))

    def _check(self) -> None:
        _check_fields(self.bins, self.scale, self.relation)
        check_granularity("granularity", self.granularity)

    @classmethod
    def calibrated(
        cls,
        epsilon: Any = Fraction(1, 2),
        *,
        bins: int = 4,
        relation: Relation = AddRemove(),
        granularity: float = DEFAULT_GRANULARITY,
    ):
        """The buggy calibration: ``scale = ε``."""
        epsilon = _v.positive("epsilon", epsilon)
        check_granularity("granularity", granularity)
        return cls(bins=bins, relation=relation, granularity=granularity, scale=epsilon, claim=PureDP(epsilon))

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
        expr = sp.Mul(
            *[sp.tanh(gs / (2 * bs)) * sp.exp(-sp.Abs(ys[j] - gs * int(centre[j])) / bs) for j in range(self.bins)]
        )

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            out = np.asarray(outputs, dtype=float).reshape(-1, self.bins)
            units, ok = on_grid_units(out, g)
            lp = discrete_laplace_logpmf(units - centre[None, :], t).sum(axis=1)
            return np.where(ok.all(axis=1), lp, -np.inf)

        return FunctionLaw("discrete", log_prob, ys, expr)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
