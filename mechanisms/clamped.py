"""Clamped noisy count, sum and mean (Dwork, McSherry, Nissim & Smith 2006, "Calibrating noise to
sensitivity in private data analysis", TCC: the Laplace mechanism on bounded-contribution
queries; clamping as in Dwork & Roth 2014 §3.3 and the seed), declared from parts
(:mod:`dpharness.mechanisms.parts`) with outputs on a power-of-two grid (Mironov 2012).

Records are clamped to ``[lo, hi]`` exactly, the statistic is computed exactly, rounded once to the
grid ``g*Z`` and released with discrete Laplace noise on the grid (``dp.laplace``). Stabilities
follow from the clamp bounds: a sum moves by ``max(|lo|, |hi|)`` under add/remove and ``hi - lo``
under substitution, a count by 1 and 0. The calibrations divide the rounded distance
(:func:`~dpharness.mechanisms.parts.noise.grid_distance`: the stability itself when it is a multiple of
``g``, else ``ceil(Δ/g)·g``) by ε, so the parts proof proves exactly the claimed ε.

``granularity=None`` (the default) is ``2**-20``, or the finest coarser power of two at which every
noise scale stays within ``2**45`` grid steps (wide bounds, small ε); a given granularity is used as it is.

The gallery twin :class:`ClampedSumUnclamped` sums the raw records: its sensitivity, and its true
ε, are unbounded. Parts cannot express an unbounded sum (``dp.sum()`` refuses unbounded records),
so it stays a hand-written mechanism with its own proof (``dpharness.proofs.clamped``)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness import _validate as _v
from dpharness.core import (
    AddRemove,
    Claim,
    FunctionLaw,
    InputSpec,
    Mechanism,
    PureDP,
    RealInterval,
    Relation,
    Substitute,
)
from dpharness.errors import ParameterError
from dpharness.registry import register

from . import parts as dp
from ._noise import (
    DEFAULT_GRANULARITY,
    bound_units,
    check_granularity,
    check_units,
    exact_sum,
    grid_laplace_law,
    grid_laplace_sample,
    ratio_up,
    to_units,
)
from .parts import Composite, PartsMechanism
from .parts.noise import PerStatisticScales, fit_granularity, grid_distance

__all__ = ["ClampedCount", "ClampedSum", "ClampedMean", "ClampedSumUnclamped"]


def _check_relation(relation: Any) -> None:
    if not isinstance(relation, (AddRemove, Substitute)):
        raise ParameterError(f"relation={relation!r} is not supported; pass AddRemove() or Substitute().")


def _check_bounds(lo: Any, hi: Any) -> None:
    _v.real("lo", lo)
    _v.real("hi", hi)
    _v.ordered("lo", lo, "hi", hi)


def _check_granularity(granularity: Any) -> None:
    if granularity is not None:
        check_granularity("granularity", granularity)


def sum_stability(lo: Any, hi: Any, relation: Relation) -> Fraction:
    """How far a sum of records clamped to ``[lo, hi]`` moves between neighbours (exact):
    ``max(|lo|, |hi|)`` under add/remove, ``hi - lo`` under substitution."""
    a, b = Fraction(lo), Fraction(hi)
    return max(abs(a), abs(b)) if isinstance(relation, AddRemove) else b - a


@register
@dataclass(frozen=True, kw_only=True)
class ClampedCount(Composite):
    """Noisy count of records: ``dp.count() >> dp.laplace(scale)``.

    Law on a data set of ``n`` records (any finite reals), output ``y`` in ``g*Z``, ``b = scale``::

        P(y | x) = tanh(g/(2b)) * exp(-|y - g*floor(n/g + 1/2)| / b)

    Neighbours: ``relation``: ``AddRemove()`` (the count moves by 1) or ``Substitute()`` (by 0: the
    count is public).
    Claim: ε-DP with ε = ceil(Δ/g)·g / scale, Δ the count's stability (= Δ/scale when g <= 1);
    defaults: scale 1, add/remove, ε = 1."""

    name = "clamped_count"
    source = "seed: noisy count (Dwork, McSherry, Nissim & Smith 2006), declared from parts, grid output"

    scale: Any = 1
    relation: Relation = AddRemove()
    granularity: Any = None
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.positive("scale", self.scale)
        _check_relation(self.relation)
        _check_granularity(self.granularity)

    @property
    def sensitivity(self) -> int:
        """How far the count moves between neighbours: 1 (add/remove) or 0 (substitution)."""
        return 1 if isinstance(self.relation, AddRemove) else 0

    @property
    def grid(self) -> float:
        """The granularity used (``granularity``, or the automatic choice when it is None)."""
        return fit_granularity(self.granularity, lambda g: [self.scale])

    @classmethod
    def calibrated(
        cls, epsilon: Any = 1, *, relation: Relation = AddRemove(), granularity: Any = None
    ) -> "ClampedCount":
        """scale = ceil(1/g)·g / ε (= 1/ε when g <= 1), rounded up; claims ε-DP (under substitution
        the count is public and the same scale is used)."""
        claim = PureDP(epsilon)
        _check_granularity(granularity)
        scale_at = lambda g: ratio_up(grid_distance(1, g, quantum=1), claim.epsilon)
        g = fit_granularity(granularity, lambda g: [scale_at(g)])
        return cls(scale=scale_at(g), relation=relation, granularity=granularity, claim=claim)

    def structure(self) -> PartsMechanism:
        return dp.mechanism(
            name=self.name,
            records=RealInterval(),
            relation=self.relation,
            steps=dp.count() >> dp.laplace(self.scale, granularity=self.grid),
            claim=self.claim,
        )


@register
@dataclass(frozen=True, kw_only=True)
class ClampedSum(Composite):
    """Noisy sum of records clamped to ``[lo, hi]``: ``dp.clamp(lo, hi) >> dp.sum() >> dp.laplace(scale)``.

    With ``s = Σ_i clamp(x_i, lo, hi)`` (exact), ``c = floor(s/g + 1/2)``, ``b = scale``, output ``y``
    in ``g*Z``::

        P(y | x) = tanh(g/(2b)) * exp(-|y - g*c| / b)

    Neighbours: ``relation``: ``AddRemove()`` (stability Δ = max(|lo|, |hi|)) or ``Substitute()``
    (Δ = hi - lo) (:attr:`sensitivity`); records are any finite reals.
    Claim: ε-DP with ε = ceil(Δ/g)·g / scale (= Δ/scale when g divides Δ); defaults lo = 0, hi = 1,
    scale = 1, add/remove: ε = 1."""

    name = "clamped_sum"
    source = "seed: clamped noisy sum (Dwork, McSherry, Nissim & Smith 2006), declared from parts, grid output"

    lo: Any = 0
    hi: Any = 1
    scale: Any = 1
    relation: Relation = AddRemove()
    granularity: Any = None
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _check_bounds(self.lo, self.hi)
        _v.positive("scale", self.scale)
        _check_relation(self.relation)
        _check_granularity(self.granularity)

    @property
    def sensitivity(self) -> Fraction:
        """How far the clamped sum moves between neighbours under the relation (exact)."""
        return sum_stability(self.lo, self.hi, self.relation)

    @property
    def grid(self) -> float:
        """The granularity used (``granularity``, or the automatic choice when it is None)."""
        return fit_granularity(self.granularity, lambda g: [self.scale])

    @classmethod
    def calibrated(
        cls, epsilon: Any = 1, *, lo: Any = 0, hi: Any = 1, relation: Relation = AddRemove(), granularity: Any = None
    ) -> "ClampedSum":
        """scale = ceil(Δ/g)·g / ε (rounded up); claims ε-DP."""
        claim = PureDP(epsilon)
        _check_bounds(lo, hi)
        _check_relation(relation)
        _check_granularity(granularity)
        delta = sum_stability(lo, hi, relation)
        scale_at = lambda g: ratio_up(grid_distance(delta, g), claim.epsilon)
        g = fit_granularity(granularity, lambda g: [scale_at(g)])
        return cls(lo=lo, hi=hi, scale=scale_at(g), relation=relation, granularity=granularity, claim=claim)

    def structure(self) -> PartsMechanism:
        return dp.mechanism(
            name=self.name,
            records=RealInterval(),
            relation=self.relation,
            steps=dp.clamp(self.lo, self.hi) >> dp.sum() >> dp.laplace(self.scale, granularity=self.grid),
            claim=self.claim,
        )


@register
@dataclass(frozen=True, kw_only=True)
class ClampedSumUnclamped(Mechanism):
    """GALLERY. :class:`ClampedSum` that forgets to clamp: the records are summed as they are.

    Each record is snapped to the grid, ``c = Σ_i floor(x_i/g + 1/2)`` (exact, integer units), and the
    output is ``y = g*(c + K)``, ``K ~ DiscreteLaplace(scale/g)``::

        P(y | x) = tanh(g/(2b)) * exp(-|y - g*c| / b)

    Neighbours: ``relation`` (add/remove or substitution of one record, any finite real).
    The declared bounds no longer bound a record's contribution, so the privacy loss ``|c - c'|g/b``
    is unbounded (one record of value t moves it by t/scale). Claim: ε = 1 at the defaults (lo = 0,
    hi = 1, scale = 1); true ε = inf."""

    name = "clamped_sum_unclamped"
    source = "gallery: clamped noisy sum (Dwork, McSherry, Nissim & Smith 2006) without the clamp"
    buggy = True
    bug = (
        "records are summed without clamping to [lo, hi], so one record can move the sum, and "
        "the privacy loss, arbitrarily far: the true ε is infinite"
    )
    true_epsilon = float("inf")

    lo: Any = 0
    hi: Any = 1
    scale: Any = 1
    relation: Relation = AddRemove()
    granularity: float = DEFAULT_GRANULARITY
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        check_granularity("granularity", self.granularity)
        bound_units(self.lo, self.hi, self.granularity)
        _v.positive("scale", self.scale)
        _check_relation(self.relation)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(RealInterval(), self.relation, "dataset", any_data=True)

    def _centre(self, data) -> np.ndarray:
        units = to_units("data", np.asarray(data, dtype=float), self.granularity)  # the bug: no clamp
        total = exact_sum(units, int(np.abs(units).max(initial=0)))
        check_units("the sum", [total])
        return np.array([total], dtype=np.int64)

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        return grid_laplace_sample(self._centre(data), self.scale, self.granularity, size, rng)[:, 0]

    def _law(self, data: Any) -> FunctionLaw:
        return grid_laplace_law(self._centre(data), self.scale, self.granularity, ("y",))

    def example_pair(self) -> tuple[Any, Any]:
        """A record 1000 times the declared bound: the loss is about 1000·ε on this pair alone."""
        big = 1000.0 * max(abs(float(self.lo)), abs(float(self.hi)))
        if isinstance(self.relation, AddRemove):
            return np.array([float(self.hi)]), np.array([float(self.hi), big])
        return np.array([float(self.lo)]), np.array([big])


@register
@dataclass(frozen=True, kw_only=True)
class ClampedMean(PerStatisticScales, Composite):
    """Noisy clamped mean released as the pair (noisy sum, noisy count); :meth:`finalize` divides
    them (post-processing, kept outside the declaration so the released pair has an exact law)::

        dp.clamp(lo, hi) >> dp.compose(dp.sum() >> dp.laplace(b_s), dp.count() >> dp.laplace(b_c))

    ``scale`` is the noise scale per unit of (grid-rounded) stability: ``b_s = scale·ceil(Δ_s/g)·g``
    for the clamped sum ``s`` and ``b_c = scale·ceil(1/g)·g`` for the count ``n`` (:attr:`noise_scales`).
    Output ``(y_s, y_c)`` in ``(g*Z)^2``, with ``r(v) = g*floor(v/g + 1/2)``::

        P(y | x) = tanh(g/(2b_s)) exp(-|y_s - r(s)|/b_s) * tanh(g/(2b_c)) exp(-|y_c - r(n)|/b_c)

    Neighbours: ``relation``: ``AddRemove()`` (Δ_s = max(|lo|, |hi|), the count moves by 1) or
    ``Substitute()`` on data sets of exactly ``n`` records (Δ_s = hi - lo; the count is public and
    its noise costs nothing).
    Claim: ε-DP with ε = 2/scale (add/remove) or 1/scale (substitution); defaults scale = 2,
    add/remove, ε = 1."""

    name = "clamped_mean"
    source = "seed: clamped noisy mean as noisy sum / noisy count (Dwork & Roth 2014 §3.3), declared from parts"

    lo: Any = 0
    hi: Any = 1
    scale: Any = 2
    relation: Relation = AddRemove()
    n: int | None = None
    granularity: Any = None
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _check_bounds(self.lo, self.hi)
        _v.positive("scale", self.scale)
        _check_relation(self.relation)
        _check_granularity(self.granularity)
        if isinstance(self.relation, Substitute):
            if self.n is None:
                raise ParameterError("n=None with relation=Substitute(); pass the fixed, public number of records n.")
            _v.integer("n", self.n, minimum=1)
        elif self.n is not None:
            raise ParameterError(
                f"n={self.n!r} is only used with relation=Substitute(); leave n=None under AddRemove()."
            )

    @property
    def sum_sensitivity(self) -> Fraction:
        """How far the clamped sum moves between neighbours under the relation (exact)."""
        return sum_stability(self.lo, self.hi, self.relation)

    def statistics(self) -> tuple:
        """(stability, quantum) of (the clamped sum, the count): the count is an integer."""
        return ((self.sum_sensitivity, None), (1, 1))

    @classmethod
    def calibrated(
        cls,
        epsilon: Any = 1,
        *,
        lo: Any = 0,
        hi: Any = 1,
        relation: Relation = AddRemove(),
        n: int | None = None,
        granularity: Any = None,
    ) -> "ClampedMean":
        """scale = 2/ε (add/remove) or 1/ε (substitution), rounded up; claims ε-DP."""
        claim = PureDP(epsilon)
        parts = 2 if isinstance(relation, AddRemove) else 1
        return cls(
            lo=lo,
            hi=hi,
            scale=ratio_up(parts, claim.epsilon),
            relation=relation,
            n=n,
            granularity=granularity,
            claim=claim,
        )

    def structure(self) -> PartsMechanism:
        b_s, b_c = self.noise_scales
        g = self.grid
        steps = dp.clamp(self.lo, self.hi) >> dp.compose(
            dp.sum() >> dp.laplace(b_s, granularity=g), dp.count() >> dp.laplace(b_c, granularity=g)
        )
        size = self.n if isinstance(self.relation, Substitute) else None
        return dp.mechanism(
            name=self.name, records=RealInterval(), relation=self.relation, steps=steps, size=size, claim=self.claim
        )

    @staticmethod
    def finalize(outputs: np.ndarray) -> np.ndarray:
        """Post-processing: noisy sum / max(noisy count, 1), one estimate per output row."""
        out = np.asarray(outputs, dtype=float).reshape(-1, 2)
        return out[:, 0] / np.maximum(out[:, 1], 1.0)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
