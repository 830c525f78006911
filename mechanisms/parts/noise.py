"""Noise measurements on numbers: Laplace and Gaussian noise on a power-of-two grid, each sampled exactly
(discrete Laplace, discrete Gaussian; Canonne, Kamath & Steinke 2020), and the calibration helpers the
catalog classes declared from parts use (:func:`grid_distance`, :func:`fit_granularity`,
:class:`PerStatisticScales`). Privacy maps proved in :mod:`dpharness.proofs.parts.noise`."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence, ClassVar

import numpy as np

from dpharness.errors import ParameterError
from dpharness.mechanisms._noise import DEFAULT_GRANULARITY, check_granularity, ratio_up

from ._base import (
    Distance,
    ExactValues,
    Measurement,
    Post,
    Space,
    Step,
    _budget,
    _chain,
    _float_exact,
    _frac,
    _plain,
    register,
)
from ._grid import (
    _int_array,
    _MAX_SCALE_UNITS,
    LAPLACE_MIN_UNITS,
    _centres,
    _centres_units,
    _check_scale_units,
    _release,
    centres_of_sums,
    grid_steps,
)

__all__ = [
    "GridLaplace",
    "GridGaussian",
    "NoiseBudget",
    "laplace",
    "discrete_laplace",
    "geometric",
    "gaussian",
    "discrete_gaussian",
    "truncated_geometric",
    "grid_distance",
    "fit_granularity",
    "PerStatisticScales",
]


class _GridNoise(Measurement):
    """What the grid noise families share: each coordinate ``v_i`` is released as
    ``g * (floor(v_i/g + 1/2) + N_i)`` with ``N_i`` i.i.d. integer noise of the family, drawn by an
    exact sampler. Subclasses name their size parameter (``_amount``, meaning ``_meaning``), say what
    they are (``_word``) and draw the integer noise (``_noise``)."""

    granularity: Any
    derived: str  # a field of each family: how the size was derived from a budget, or ""
    _amount: ClassVar[str]
    _meaning: ClassVar[str]
    _word: ClassVar[str]
    _min_units: ClassVar[Fraction]  # the exact sampler's smallest size, in grid steps
    _min_units_text: ClassVar[str]

    def __post_init__(self) -> None:
        name = self._amount
        object.__setattr__(self, name, _plain(name, getattr(self, name)))
        object.__setattr__(self, "granularity", _plain("granularity", self.granularity))
        if _frac(name, getattr(self, name)) <= 0:
            raise ParameterError(f"{name}={getattr(self, name)!r} must be > 0; pass a positive noise {self._meaning}.")
        check_granularity("granularity", self.granularity)
        _check_scale_units(name, getattr(self, name), self.granularity)
        units = _frac(name, getattr(self, name)) / self.g
        if units < self._min_units:  # the exact sampler's smallest scale: refused here, not at the first draw
            raise ParameterError(
                f"{name}={getattr(self, name)!r} is below {self._min_units_text} grid steps of "
                f"granularity={self.granularity!r}, the smallest {self._meaning} the exact sampler "
                f"draws; pass a larger {name} or a finer granularity."
            )

    def describe(self) -> str:
        g = self.granularity
        return (
            f"{self._word}({self._amount}={getattr(self, self._amount)!r}"
            + ("" if g == DEFAULT_GRANULARITY else f", granularity={g!r}")
            + ")"
            + (f" [{self.derived}]" if self.derived else "")
        )

    def out_width(self, space: Space) -> int:
        if space.kind not in ("scalar", "vector"):
            raise ParameterError(
                f"{self._word} adds noise to numbers, but the previous step gives {space.describe()}; "
                "aggregate first (dp.count(), dp.sum(), dp.histogram(...))."
            )
        return space.dim

    def _noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    @property
    def g(self) -> Fraction:
        """The grid spacing, exact."""
        return Fraction(self.granularity)

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        g = self.g
        c = _centres(value, g, saturate=False)
        return _release(c, self._noise((size, len(c)), rng), g)

    def run_repeated(self, values: list, counts: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        """``counts[i]`` releases on ``values[i]``, rows value after value, all noise in one draw: the rows
        for value i are ``g·(centres(values[i]) + K)`` with ``K`` i.i.d. as in :meth:`run` (the same law per
        row; the centres are computed once per value)."""
        if not len(values):
            return np.zeros((0, 0))
        g = self.g
        exact = [_centres(v, g, saturate=False) for v in values]  # exact integers: no value is capped
        centres = _int_array([c for row in exact for c in row]).reshape(len(exact), -1)
        rows = np.repeat(centres, np.asarray(counts, dtype=np.intp), axis=0)
        noise = self._noise(rows.shape, rng)
        return np.asarray(_release(rows.reshape(-1), noise.reshape(-1), g)).reshape(rows.shape)

    def run_each(self, values: list, space: Space, rng: np.random.Generator) -> np.ndarray:
        """One release per value, all noise in one draw: row i is ``g·(centres(values[i]) + K_i)`` with
        ``K_i`` i.i.d. as in :meth:`run` (the same law per row)."""
        if not isinstance(values, ExactValues):  # values of any kind: their centres one by one
            if not len(values):
                return np.zeros((0, self.out_width(space)))
            return self.run_repeated(values, [1] * len(values), rng)
        g = self.g  # one exact number per value, as integers or exact sums: all centres at once
        sums = values.sums
        flat = centres_of_sums(*sums, len(values), g) if sums else _centres_units(values.units, values.exponent, g)
        noise = self._noise((len(values), 1), rng).reshape(-1)
        return np.asarray(_release(flat, noise, g)).reshape(len(values), 1)


@dataclass(frozen=True)
class GridLaplace(_GridNoise):
    """Laplace noise on the grid ``g*Z``: each coordinate ``v_i`` is released as
    ``g * (floor(v_i/g + 1/2) + K_i)``, ``K_i`` i.i.d. discrete Laplace with ``P(k) ∝ exp(-|k|/t)``,
    ``t = scale/g``. Privacy map (pure DP): inputs at L1 distance ``Δ`` give rounded centres at most
    ``D`` grid steps apart (``D = Δ/g`` when values are multiples of ``g``; else
    ``ceil(Δ/g) + dim − 1``), and ``ε = D/t``."""

    scale: Any
    granularity: Any = DEFAULT_GRANULARITY
    derived: str = ""  # how the scale was derived from a budget (dp.laplace(epsilon=...)); shown, never read
    _min_units: ClassVar[Fraction] = LAPLACE_MIN_UNITS  # t >= 2**-1000 (mechanisms._exact.discrete_laplace)
    _min_units_text: ClassVar[str] = "2**-1000"
    _amount: ClassVar[str] = "scale"
    _meaning: ClassVar[str] = "scale"
    _word: ClassVar[str] = "laplace"
    per_key_role = "noise"

    @property
    def scale_exact(self) -> Fraction:
        return Fraction(self.scale)

    @property
    def t(self) -> Fraction:
        return self.scale_exact / self.g

    def _noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        from dpharness.mechanisms._exact import discrete_laplace

        return discrete_laplace(self.t, shape, rng)


@dataclass(frozen=True)
class GridGaussian(_GridNoise):
    """Discrete Gaussian noise on the grid ``g*Z`` (Canonne, Kamath & Steinke 2020): each coordinate is
    released as ``g * (floor(v_i/g + 1/2) + Y_i)``, ``Y_i`` i.i.d. with ``P(y) ∝ exp(-y²/(2τ²))``,
    ``τ = sigma/g``. Privacy map: ``ρ = D₂²/(2τ²)``-zCDP for rounded centres at squared L2 distance
    at most ``D₂²`` grid steps (Rényi DP ``α ρ`` at every order; (ε, δ) by conversion or, in one
    dimension, by the exact discrete-Gaussian profile)."""

    sigma: Any
    granularity: Any = DEFAULT_GRANULARITY
    derived: str = ""  # how sigma was derived from a budget (dp.gaussian(rho=...)); shown, never read
    _min_units: ClassVar[Fraction] = Fraction(1, 2**16)  # τ² >= 2**-32 (mechanisms._exact.discrete_gaussian)
    _min_units_text: ClassVar[str] = "2**-16"
    _amount: ClassVar[str] = "sigma"
    _meaning: ClassVar[str] = "standard deviation"
    _word: ClassVar[str] = "gaussian"

    @property
    def tau2(self) -> Fraction:
        return (Fraction(self.sigma) / self.g) ** 2

    def _noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        from dpharness.mechanisms._exact import discrete_gaussian

        return discrete_gaussian(self.tau2, shape, rng)


register(GridLaplace, GridGaussian)


# --------------------------------------------------------------------------- public constructors


@dataclass(frozen=True)
class NoiseBudget(Step):
    """Grid noise of ``family`` (``"laplace"`` or ``"gaussian"``) on the grid ``granularity * Z`` that
    may spend ``epsilon`` (Laplace: pure ε), ``rho`` (Gaussian: ρ-zCDP) or ``(epsilon, delta)``
    (Gaussian); all None: its share of the enclosing ``dp.compose(..., epsilon=...)``.

    A placeholder, never a registered step: ``dpharness.parts.mechanism`` replaces it, before anything
    is sampled or proved, with the :class:`GridLaplace` / :class:`GridGaussian` whose scale the budget
    gives from the stability of what precedes it (:mod:`dpharness.proofs._calibrate`, the inverse of
    the proof's own privacy map); the concrete step's ``derived`` says how."""

    family: str
    granularity: Any
    epsilon: Any = None
    delta: Any = None
    rho: Any = None
    is_budget: ClassVar[bool] = True
    per_key_role = "noise"  # a group-by's part may hold it until dp.mechanism calibrates it

    def __post_init__(self) -> None:
        object.__setattr__(self, "granularity", _plain("granularity", self.granularity))
        check_granularity("granularity", self.granularity)
        for name in ("epsilon", "delta", "rho"):
            object.__setattr__(self, name, _budget(name, getattr(self, name)))
        if self.family == "laplace":
            if self.delta is not None or self.rho is not None:
                raise ParameterError(
                    "laplace noise is pure ε-DP; pass epsilon= only (delta= and rho= are for dp.gaussian)."
                )
        elif self.family == "gaussian":
            if self.rho is not None and (self.epsilon is not None or self.delta is not None):
                raise ParameterError(
                    f"gaussian(rho={self.rho!r}, epsilon={self.epsilon!r}, delta={self.delta!r}): pass "
                    "rho= alone or epsilon= with delta=, not both."
                )
            if (self.epsilon is None) != (self.delta is None):
                raise ParameterError(
                    f"gaussian(epsilon={self.epsilon!r}, delta={self.delta!r}): Gaussian noise is not "
                    "pure DP; pass both epsilon= and delta= (or rho=)."
                )
            if self.delta is not None and not Fraction(self.delta) < 1:
                raise ParameterError(f"delta={self.delta!r} must be < 1; pass a small δ such as 1e-6.")
        else:
            raise ParameterError(f"family={self.family!r}; pass 'laplace' or 'gaussian'.")

    @property
    def budgeted(self) -> bool:
        return self.epsilon is not None or self.rho is not None

    def describe(self) -> str:
        what = ", ".join(
            f"{n}={getattr(self, n)!r}" for n in ("epsilon", "delta", "rho") if getattr(self, n) is not None
        )
        return f"{self.family}({what or 'budget from the enclosing compose'})"


def _noise_or_budget(family: str, amount: str, value: Any, granularity: Any, **budget: Any) -> Step:
    given = {k: v for k, v in budget.items() if v is not None}
    if value is not None and given:
        named = ", ".join(f"{k}={v!r}" for k, v in given.items())
        raise ParameterError(
            f"{family}({amount}={value!r}, {named}): pass the noise {amount}= or the budget it should "
            f"spend ({', '.join(k + '=' for k in budget)}), not both."
        )
    if value is not None:
        return (GridLaplace if family == "laplace" else GridGaussian)(value, granularity)
    return NoiseBudget(family, granularity, **budget)


def laplace(scale: Any = None, *, epsilon: Any = None, granularity: Any = DEFAULT_GRANULARITY) -> Step:
    """Laplace noise of ``scale`` on the grid ``granularity * Z`` (exact discrete Laplace). Or give the
    budget instead, ``epsilon=``: ``dp.mechanism`` derives the scale from the stability of what precedes
    it (``scale = D·g/ε`` for centres at most D grid steps apart); with neither, the scale comes from
    the enclosing ``dp.compose(..., epsilon=...)``'s split."""
    return _noise_or_budget("laplace", "scale", scale, granularity, epsilon=epsilon)


def discrete_laplace(scale: Any = None, *, epsilon: Any = None) -> Step:
    """Discrete Laplace (two-sided geometric) noise on the integers: ``laplace(scale, granularity=1)``."""
    return _noise_or_budget("laplace", "scale", scale, 1, epsilon=epsilon)


geometric = discrete_laplace


def gaussian(
    sigma: Any = None,
    *,
    rho: Any = None,
    epsilon: Any = None,
    delta: Any = None,
    granularity: Any = DEFAULT_GRANULARITY,
) -> Step:
    """Gaussian noise of standard deviation ``sigma`` on the grid (exact discrete Gaussian). Or give the
    budget instead: ``rho=`` (zCDP: ``σ = g·D₂/√(2ρ)``, rounded up) or ``epsilon=`` with ``delta=`` (the
    smallest σ whose proven δ(ε) is within ``delta``); ``dp.mechanism`` derives σ from the stability of
    what precedes it. With none, σ comes from the enclosing ``dp.compose(...)``'s split."""
    return _noise_or_budget("gaussian", "sigma", sigma, granularity, rho=rho, epsilon=epsilon, delta=delta)


def discrete_gaussian(sigma: Any = None, *, rho: Any = None, epsilon: Any = None, delta: Any = None) -> Step:
    """The discrete Gaussian on the integers: ``gaussian(sigma, granularity=1)``."""
    return _noise_or_budget("gaussian", "sigma", sigma, 1, rho=rho, epsilon=epsilon, delta=delta)


def truncated_geometric(scale: Any, lo: Any, hi: Any) -> Step:
    """Two-sided geometric noise on the integers, the result clamped to ``[lo, hi]`` (post-processing)."""
    lo_f, hi_f = (
        float(_float_exact("lo", lo, "a truncation bound")),
        float(_float_exact("hi", hi, "a truncation bound")),
    )
    if not lo_f < hi_f:
        raise ParameterError(f"lo={lo!r} must be below hi={hi!r}; pass lo < hi.")

    def clip(y: np.ndarray) -> np.ndarray:
        return np.clip(y, lo_f, hi_f)

    clip._dpharness_rowwise = True  # type: ignore[attr-defined]
    return _chain(discrete_laplace(scale), Post(clip, vectorized=True))


# --------------------------------------------------------------------------- calibration (catalog classes declared from parts)


def grid_distance(delta: Any, granularity: Any, dim: int = 1, quantum: Any = None) -> Fraction:
    """The distance (exact, in value units) of two values at L1 distance ``delta`` after each
    coordinate is rounded to the grid ``granularity * Z``, by the rule the parts prover states
    (:func:`dpharness.mechanisms.parts.grid_steps`): ``delta`` itself when every value is a multiple
    of ``quantum`` and ``quantum`` a multiple of the grid (rounding is exact), else
    ``(ceil(delta/g) + dim - 1) * g``. A catalog class calibrates a noise scale as
    ``grid_distance(...) / epsilon``, so the parts proof proves exactly the claimed ε."""
    d, g = Fraction(delta), Fraction(granularity)
    space = Space("vector" if dim > 1 else "scalar", dim, quantum=None if quantum is None else Fraction(quantum))
    steps, _, _ = grid_steps(space, Distance(None, d, d * d, d), g)
    return steps * g


def fit_granularity(granularity: Any, scales_at: Any) -> float:
    """The grid a catalog class declared from parts uses: ``granularity`` itself when given (a
    power of two, validated), else (``None``) :data:`DEFAULT_GRANULARITY` or the finest coarser
    power of two at which every noise scale ``scales_at(g)`` is at most 2**45 grid steps (the
    limit of :mod:`dpharness.mechanisms.parts`, above which outputs stop being exact grid floats)."""
    if granularity is not None:
        return check_granularity("granularity", granularity)
    g = DEFAULT_GRANULARITY
    while g < 2.0**30 and any(Fraction(s) / Fraction(g) > _MAX_SCALE_UNITS for s in scales_at(g)):
        g *= 2
    return g


class PerStatisticScales:
    """For a catalog class releasing several statistics, each with noise ``scale`` per unit of its
    stability: :meth:`statistics` lists ``(stability, quantum)`` per statistic (``quantum``: every value
    is a multiple of it, or None); the grid and the noise scales follow by the parts prover's rule
    (:func:`grid_distance`, :func:`fit_granularity`). Needs the fields ``scale`` and ``granularity``."""

    scale: Any  # fields of the class this is mixed into
    granularity: Any

    def statistics(self) -> tuple:
        raise NotImplementedError

    def _scales_at(self, g: float) -> tuple:
        return tuple(ratio_up(Fraction(self.scale) * grid_distance(d, g, quantum=q), 1) for d, q in self.statistics())

    @property
    def grid(self) -> float:
        """The granularity used (``granularity``, or the automatic choice when it is None)."""
        return fit_granularity(self.granularity, self._scales_at)

    @property
    def noise_scales(self) -> tuple:
        """Scale of each statistic's noise, ``scale·(its stability after rounding to the grid)`` rounded up."""
        return self._scales_at(self.grid)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
