"""Clamped noisy count, sum and mean (Dwork, McSherry, Nissim & Smith 2006, "Calibrating noise to
sensitivity in private data analysis", TCC: the Laplace mechanism on bounded-contribution
queries; clamping as in Dwork & Roth 2014 §3.3 and the seed), with outputs on a power-of-two grid
(Mironov 2012).

Records are clamped to ``[lo, hi]`` by the mechanism, snapped to the grid ``g*Z`` and summed
exactly in integer grid units; a discrete Laplace on the grid is added. Sensitivities follow from
the snapped bounds ``g*round(lo/g)``, ``g*round(hi/g)``: add/remove ``max(|lo|, |hi|)``,
substitution ``hi - lo`` (for a count: 1 and 0).

The gallery twin :class:`ClampedSumUnclamped` sums the raw records: its sensitivity, and its true
ε, are unbounded."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import (
    AddRemove, Claim, FunctionLaw, InputSpec, Mechanism, PureDP, RealInterval, Relation, Substitute,
)
from dpharness.errors import ParameterError
from dpharness.registry import register

from ._noise import (
    DEFAULT_GRANULARITY, check_granularity, check_units, exact_sum, grid_laplace_law, grid_laplace_sample,
    bound_units, ratio_up, to_units,
)

__all__ = ["ClampedCount", "ClampedSum", "ClampedMean", "ClampedSumUnclamped"]


def _check_relation(relation: Any) -> None:
    if not isinstance(relation, (AddRemove, Substitute)):
        raise ParameterError(f"relation={relation!r} is not supported; pass AddRemove() or Substitute().")


def _bound_sensitivity_units(ulo: int, uhi: int, relation: Relation) -> int:
    """Sensitivity of the sum of snapped records in grid units under the relation."""
    return max(abs(ulo), abs(uhi)) if isinstance(relation, AddRemove) else uhi - ulo


@register
@dataclass(frozen=True, kw_only=True)
class ClampedCount(Mechanism):
    """Noisy count of records with grid-Laplace noise.

    pmf on a data set of n records, output ``y`` in ``g*Z``, ``b = scale``::

        P(y | x) = tanh(g/(2b)) * exp(-|y - n| / b)

    Neighbours: ``relation``: ``AddRemove()`` (sensitivity 1) or ``Substitute()`` (sensitivity 0:
    the count is public).
    Claim: ε-DP with ε = sensitivity / scale (defaults: scale 1, add/remove, ε = 1)."""

    name = "clamped_count"
    source = "seed: noisy count (Dwork, McSherry, Nissim & Smith 2006), grid output"

    scale: Any = 1
    relation: Relation = AddRemove()
    granularity: float = DEFAULT_GRANULARITY
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.positive("scale", self.scale)
        _check_relation(self.relation)
        check_granularity("granularity", self.granularity)

    @property
    def sensitivity(self) -> int:
        return 1 if isinstance(self.relation, AddRemove) else 0

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, relation: Relation = AddRemove(),
                   granularity: float = DEFAULT_GRANULARITY) -> "ClampedCount":
        """scale = 1/ε (rounded up); claims ε-DP."""
        claim = PureDP(epsilon)
        return cls(scale=ratio_up(1, claim.epsilon), relation=relation, granularity=granularity, claim=claim)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(RealInterval(), self.relation, "dataset")

    def _centre(self, data) -> np.ndarray:
        units = to_units("count", np.array([float(len(data))]), self.granularity)
        return units

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        return grid_laplace_sample(self._centre(data), self.scale, self.granularity, size, rng)[:, 0]

    def _law(self, data: Any) -> FunctionLaw:
        return grid_laplace_law(self._centre(data), self.scale, self.granularity, ("y",))

    def example_pair(self) -> tuple[Any, Any]:
        if isinstance(self.relation, AddRemove):
            return np.array([0.0]), np.array([0.0, 0.0])
        return np.array([0.0]), np.array([1.0])


@register
@dataclass(frozen=True, kw_only=True)
class ClampedSum(Mechanism):
    """Noisy sum of records clamped to ``[lo, hi]``, with grid-Laplace noise.

    With ``c = sum_i g*floor(clamp(x_i, lo, hi)/g + 1/2)`` (exact), ``b = scale``, output ``y`` in ``g*Z``::

        P(y | x) = tanh(g/(2b)) * exp(-|y - c| / b)

    Neighbours: ``relation``: ``AddRemove()`` (sensitivity Δ = max(|lo|, |hi|)) or ``Substitute()``
    (Δ = hi - lo), bounds taken after snapping to the grid (:attr:`sensitivity`).
    Claim: ε-DP with ε = Δ / scale (defaults lo = 0, hi = 1, scale = 1, add/remove: ε = 1)."""

    name = "clamped_sum"
    source = "seed: clamped noisy sum (Dwork, McSherry, Nissim & Smith 2006), grid output"

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
    def sensitivity(self) -> Fraction:
        """Sensitivity of the (snapped, clamped) sum under the relation, exact."""
        ulo, uhi = bound_units(self.lo, self.hi, self.granularity)
        return _bound_sensitivity_units(ulo, uhi, self.relation) * Fraction(self.granularity)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, lo: Any = 0, hi: Any = 1, relation: Relation = AddRemove(),
                   granularity: float = DEFAULT_GRANULARITY) -> "ClampedSum":
        """scale = Δ/ε (rounded up); claims ε-DP."""
        claim = PureDP(epsilon)
        probe = cls(lo=lo, hi=hi, relation=relation, granularity=granularity, claim=claim)
        return probe.replace(scale=ratio_up(probe.sensitivity, claim.epsilon))

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(RealInterval(), self.relation, "dataset")

    def _record_units(self, data) -> np.ndarray:
        """Clamp, then snap each record to the grid (the gallery twin skips the clamp)."""
        return to_units("data", np.clip(np.asarray(data, dtype=float), float(self.lo), float(self.hi)), self.granularity)

    def _centre(self, data) -> np.ndarray:
        units = self._record_units(data)
        bound = int(np.abs(units).max(initial=0))
        total = exact_sum(units, bound)
        check_units("the sum", [total])
        return np.array([total], dtype=np.int64)

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        return grid_laplace_sample(self._centre(data), self.scale, self.granularity, size, rng)[:, 0]

    def _law(self, data: Any) -> FunctionLaw:
        return grid_laplace_law(self._centre(data), self.scale, self.granularity, ("y",))

    def example_pair(self) -> tuple[Any, Any]:
        """Add/remove: ``[hi]`` vs ``[hi, e]`` with ``e`` the bound of larger magnitude;
        substitution: ``[lo]`` vs ``[hi]``."""
        lo, hi = float(self.lo), float(self.hi)
        if isinstance(self.relation, AddRemove):
            extreme = hi if abs(hi) >= abs(lo) else lo
            return np.array([hi]), np.array([hi, extreme])
        return np.array([lo]), np.array([hi])


@register
@dataclass(frozen=True, kw_only=True)
class ClampedSumUnclamped(ClampedSum):
    """:class:`ClampedSum` that forgets to clamp: the records are summed as they are.

    pmf as :class:`ClampedSum` with ``c = sum_i g*floor(x_i/g + 1/2)``. The declared bounds no
    longer bound a record's contribution, so the privacy loss ``|c - c'|/scale`` is unbounded
    (one record of value t moves it by t/scale). Defaults as :class:`ClampedSum`: claims ε = 1,
    true ε = inf."""

    name = "clamped_sum_unclamped"
    source = "gallery: clamped noisy sum (Dwork, McSherry, Nissim & Smith 2006) without the clamp"
    buggy = True
    bug = ("records are summed without clamping to [lo, hi], so one record can move the sum, and "
           "the privacy loss, arbitrarily far: the true ε is infinite")
    true_epsilon = float("inf")

    def _record_units(self, data) -> np.ndarray:
        return to_units("data", np.asarray(data, dtype=float), self.granularity)

    def example_pair(self) -> tuple[Any, Any]:
        """A record 1000 times the declared bound: the loss is about 1000·ε on this pair alone."""
        big = 1000.0 * max(abs(float(self.lo)), abs(float(self.hi)))
        if isinstance(self.relation, AddRemove):
            return np.array([float(self.hi)]), np.array([float(self.hi), big])
        return np.array([float(self.lo)]), np.array([big])


@register
@dataclass(frozen=True, kw_only=True)
class ClampedMean(Mechanism):
    """Noisy clamped mean released as the pair (noisy sum, noisy count); :meth:`finalize`
    divides them (post-processing).

    ``scale`` is the noise scale per unit of sensitivity: the clamped, snapped sum ``c_s`` gets
    grid-Laplace noise of scale ``b_s = scale·Δ_s`` and, under add/remove, the count ``n`` gets
    ``b_c = scale·1``, so each spends ε/2 = 1/scale. Output ``(y_s, y_c)`` in ``(g*Z)^2``::

        add/remove:   P(y | x) = tanh(g/(2b_s)) exp(-|y_s - c_s|/b_s) * tanh(g/(2b_c)) exp(-|y_c - n|/b_c)
        substitution: P(y | x) = tanh(g/(2b_s)) exp(-|y_s - c_s|/b_s) * [y_c == n]

    (under substitution the size ``n`` is fixed and public: the data set must have ``n`` records).
    Neighbours: ``relation``; Δ_s = max(|lo|, |hi|) (add/remove) or hi - lo (substitution), on the
    snapped bounds.
    Claim: ε-DP with ε = 2/scale (add/remove) or 1/scale (substitution); defaults scale = 2,
    add/remove, ε = 1."""

    name = "clamped_mean"
    source = "seed: clamped noisy mean as noisy sum / noisy count (Dwork & Roth 2014 §3.3), grid output"

    lo: Any = 0
    hi: Any = 1
    scale: Any = 2
    relation: Relation = AddRemove()
    n: int | None = None
    granularity: float = DEFAULT_GRANULARITY
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        check_granularity("granularity", self.granularity)
        bound_units(self.lo, self.hi, self.granularity)
        _v.positive("scale", self.scale)
        _check_relation(self.relation)
        if isinstance(self.relation, Substitute):
            if self.n is None:
                raise ParameterError("n=None with relation=Substitute(); pass the fixed, public number of records n.")
            _v.integer("n", self.n, minimum=1)
        elif self.n is not None:
            raise ParameterError(f"n={self.n!r} is only used with relation=Substitute(); leave n=None under AddRemove().")

    @property
    def sum_sensitivity(self) -> Fraction:
        ulo, uhi = bound_units(self.lo, self.hi, self.granularity)
        return _bound_sensitivity_units(ulo, uhi, self.relation) * Fraction(self.granularity)

    @property
    def noise_scales(self) -> tuple:
        """(scale of the sum noise, scale of the count noise or None under substitution), rounded up."""
        b_s = ratio_up(Fraction(self.scale) * self.sum_sensitivity, 1)
        return (b_s, self.scale if isinstance(self.relation, AddRemove) else None)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, lo: Any = 0, hi: Any = 1, relation: Relation = AddRemove(),
                   n: int | None = None, granularity: float = DEFAULT_GRANULARITY) -> "ClampedMean":
        """scale = 2/ε (add/remove) or 1/ε (substitution), rounded up; claims ε-DP."""
        claim = PureDP(epsilon)
        parts = 2 if isinstance(relation, AddRemove) else 1
        return cls(lo=lo, hi=hi, scale=ratio_up(parts, claim.epsilon), relation=relation, n=n,
                   granularity=granularity, claim=claim)

    @property
    def input_spec(self) -> InputSpec:
        size = self.n if isinstance(self.relation, Substitute) else None
        return InputSpec(RealInterval(), self.relation, "dataset", size=size)

    def _centres(self, data) -> np.ndarray:
        units = to_units("data", np.clip(np.asarray(data, dtype=float), float(self.lo), float(self.hi)), self.granularity)
        total = exact_sum(units, int(np.abs(units).max(initial=0)))
        count = int(to_units("count", np.array([float(len(units))]), self.granularity)[0])
        check_units("the sum", [total])
        return np.array([total, count], dtype=np.int64)

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        c = self._centres(data)
        b_s, b_c = self.noise_scales
        g = float(self.granularity)
        if b_c is None:
            out = np.empty((size, 2))
            out[:, 0] = grid_laplace_sample(c[:1], b_s, g, size, rng)[:, 0]
            out[:, 1] = c[1] * g
            return out
        return grid_laplace_sample(c, [b_s, b_c], g, size, rng)

    def _law(self, data: Any) -> FunctionLaw:
        c = self._centres(data)
        b_s, b_c = self.noise_scales
        g = float(self.granularity)
        if b_c is not None:
            return grid_laplace_law(c, [b_s, b_c], g, ("y_sum", "y_count"))
        law_s = grid_laplace_law(c[:1], b_s, g, ("y_sum",))
        n_value = float(c[1] * g)
        y_count = sp.Symbol("y_count", real=True)

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            out = np.asarray(outputs, dtype=float).reshape(-1, 2)
            return np.where(out[:, 1] == n_value, law_s.log_prob(out[:, 0]), -np.inf)

        expr = law_s.expr * sp.Piecewise((1, sp.Eq(y_count, int(self.n))), (0, True))
        return FunctionLaw("discrete", log_prob, law_s.symbols + (y_count,), expr)

    @staticmethod
    def finalize(outputs: np.ndarray) -> np.ndarray:
        """Post-processing: noisy sum / max(noisy count, 1), one estimate per output row."""
        out = np.asarray(outputs, dtype=float).reshape(-1, 2)
        return out[:, 0] / np.maximum(out[:, 1], 1.0)

    def example_pair(self) -> tuple[Any, Any]:
        lo, hi = float(self.lo), float(self.hi)
        if isinstance(self.relation, AddRemove):
            extreme = hi if abs(hi) >= abs(lo) else lo
            return np.array([hi]), np.array([hi, extreme])
        base = np.full(self.n, lo)
        other = base.copy()
        other[0] = hi
        return base, other
