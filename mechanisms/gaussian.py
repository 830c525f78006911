"""The Gaussian mechanism on a power-of-two grid, with the classic calibration (Dwork & Roth 2014,
"The Algorithmic Foundations of Differential Privacy", Thm. 3.22: σ = Δ sqrt(2 ln(1.25/δ))/ε, valid
for ε <= 1), the analytic calibration (Balle & Wang 2018, "Improving the Gaussian mechanism for
differential privacy: analytical calibration and optimal denoising", ICML, Thm. 8 / Alg. 1), and
the Rényi-DP statement (Mironov 2017, "Rényi differential privacy", CSF, Prop. 7:
D_α = α Δ² / (2σ²)).

Output: ``g * floor((x + σ Z)/g + 1/2)`` with ``Z ~ N(0, I)`` and ``g`` = ``granularity`` (a power of
two). The rounding is a post-processing of the continuous Gaussian mechanism on the raw input, so
every (ε, δ) or Rényi guarantee of the continuous mechanism holds, and the output is a grid point
that carries no data-dependent low-order float bits."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import (
    ApproxDP, BoundedChange, Claim, FunctionLaw, InputSpec, Mechanism, RealInterval, RenyiDP, exact,
)
from dpharness.errors import ParameterError
from dpharness.registry import register

from ._noise import (
    DEFAULT_GRANULARITY, _readings, check_granularity, float_up, grid_gaussian_logpmf, grid_gaussian_units, to_units,
)

__all__ = ["Gaussian", "GaussianRDP", "classic_sigma", "analytic_sigma", "analytic_delta"]

_CALIBRATIONS = ("classic", "analytic", "rdp", "custom")


def _mp(value: Any) -> mpmath.mpf:
    q = Fraction(value)
    return mpmath.mpf(q.numerator) / q.denominator


def classic_sigma(epsilon: Any, delta: Any, sensitivity: Any = 1) -> float:
    """σ = Δ sqrt(2 ln(1.25/δ)) / ε (Dwork & Roth 2014, Thm. 3.22), rounded up; requires 0 < ε <= 1."""
    epsilon = _v.positive("epsilon", epsilon)
    if epsilon > 1:
        raise ParameterError(
            f"epsilon={epsilon!r} exceeds 1, where the classic calibration is not valid; "
            "use Gaussian.calibrated_analytic(epsilon, delta)."
        )
    delta = _v.probability("delta", delta, open_left=True, open_right=True)
    sensitivity = _v.positive("sensitivity", sensitivity)
    # the largest reading of each input (delta: the smallest), so sigma is safe however a float is read
    with mpmath.workdps(50):
        d = min(_mp(r) for r in _readings(delta))
        e = min(_mp(r) for r in _readings(epsilon))
        s = max(_mp(r) for r in _readings(sensitivity))
        return float_up(s * mpmath.sqrt(2 * mpmath.log(mpmath.mpf(5) / 4 / d)) / e)


def analytic_delta(sigma: Any, epsilon: Any, sensitivity: Any = 1) -> float:
    """The exact δ(ε) of the Gaussian mechanism (Balle & Wang 2018, Thm. 8):
    ``Φ(Δ/(2σ) - εσ/Δ) - e^ε Φ(-Δ/(2σ) - εσ/Δ)``, evaluated with 50 significant digits."""
    with mpmath.workdps(50):
        s, e, d = (v if isinstance(v, mpmath.mpf) else _mp(v) for v in (sigma, epsilon, sensitivity))
        a = d / (2 * s)
        b = e * s / d
        return float(mpmath.ncdf(a - b) - mpmath.exp(e) * mpmath.ncdf(-a - b))


def analytic_sigma(epsilon: Any, delta: Any, sensitivity: Any = 1) -> float:
    """The smallest float σ with δ(ε; σ) <= δ (Balle & Wang 2018, Alg. 1), found by bisection on
    the exact profile of Thm. 8 (δ decreases in σ); the result is the upper end of the final
    bracket, so it always satisfies the target (rounding toward more noise)."""
    epsilon = _v.positive("epsilon", epsilon)
    delta = _v.probability("delta", delta, open_left=True, open_right=True)
    sensitivity = _v.positive("sensitivity", sensitivity)
    target = float(delta)
    hi = float(sensitivity)
    while analytic_delta(hi, epsilon, sensitivity) > target:
        hi *= 2
    lo = hi / 2
    while lo > 1e-300 and analytic_delta(lo, epsilon, sensitivity) <= target:
        hi, lo = lo, lo / 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if analytic_delta(mid, epsilon, sensitivity) <= target:
            hi = mid
        else:
            lo = mid
    # safe under every reading of the floats involved (binary value and repr, as the prover reads them)
    while any(analytic_delta(s, e, d) > target
              for s in _readings(hi) for e in _readings(epsilon) for d in _readings(sensitivity)):
        hi = math.nextafter(hi, math.inf)
    return hi


@register
@dataclass(frozen=True, kw_only=True)
class Gaussian(Mechanism):
    """The Gaussian mechanism on a vector of query answers, output rounded to the grid ``g*Z``.

    pmf on input ``x`` in ``R^dim``, output ``y`` in ``(g*Z)^dim`` (Φ the standard normal cdf)::

        P(y | x) = prod_i [ Φ((y_i - x_i + g/2)/σ) - Φ((y_i - x_i - g/2)/σ) ]

    the Gaussian mass of each rounding cell (the density exp(-|y-x|²/(2σ²))/(2πσ²)^{dim/2}
    integrated over the cell).
    Neighbours: query vectors at L2 distance <= ``sensitivity`` (``BoundedChange(sensitivity, "l2")``).
    Claim: (ε, δ)-DP for the calibration named by ``calibration`` (defaults: the classic
    calibration at ε = 1, δ = 1e-5, σ = sqrt(2 ln 125000) rounded up)."""

    name = "gaussian"
    source = ("seed: Gaussian mechanism; classic calibration Dwork & Roth 2014 Thm. 3.22, "
              "analytic calibration Balle & Wang 2018 Alg. 1; grid output")

    sigma: Any = classic_sigma(1, 1e-5)
    sensitivity: Any = 1
    dim: int = 1
    granularity: float = DEFAULT_GRANULARITY
    calibration: str = "classic"
    claim: Claim = ApproxDP(1, 1e-5)

    def _check(self) -> None:
        _v.positive("sigma", self.sigma)
        _v.positive("sensitivity", self.sensitivity)
        _v.integer("dim", self.dim, minimum=1)
        check_granularity("granularity", self.granularity)
        _v.choice("calibration", self.calibration, _CALIBRATIONS)

    @classmethod
    def calibrated_classic(cls, epsilon: Any = 1, delta: Any = 1e-5, *, sensitivity: Any = 1, dim: int = 1,
                           granularity: float = DEFAULT_GRANULARITY) -> "Gaussian":
        """σ = Δ sqrt(2 ln(1.25/δ))/ε (rounded up), claiming (ε, δ)-DP; only 0 < ε <= 1."""
        sigma = classic_sigma(epsilon, delta, sensitivity)
        return Gaussian(sigma=sigma, sensitivity=sensitivity, dim=dim, granularity=granularity,
                        calibration="classic", claim=ApproxDP(epsilon, delta))

    @classmethod
    def calibrated_analytic(cls, epsilon: Any = 1, delta: Any = 1e-5, *, sensitivity: Any = 1, dim: int = 1,
                            granularity: float = DEFAULT_GRANULARITY) -> "Gaussian":
        """The analytic Gaussian mechanism (Balle & Wang 2018, Alg. 1): the smallest σ with exact
        δ(ε) <= δ, rounded up; claims (ε, δ)-DP for any ε > 0."""
        sigma = analytic_sigma(epsilon, delta, sensitivity)
        return Gaussian(sigma=sigma, sensitivity=sensitivity, dim=dim, granularity=granularity,
                        calibration="analytic", claim=ApproxDP(epsilon, delta))

    @classmethod
    def calibrated(cls, epsilon: Any = 1, delta: Any = 1e-5, **kw: Any) -> "Gaussian":
        """The analytic calibration (valid for every ε); see :meth:`calibrated_analytic`."""
        return cls.calibrated_analytic(epsilon, delta, **kw)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(RealInterval(), BoundedChange(self.sensitivity, "l2"), "vector", dim=self.dim)

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        x = np.asarray(data, dtype=float)
        to_units("data", x, self.granularity)  # range check only: the centre stays unrounded
        units = grid_gaussian_units(x, self.sigma, self.granularity, (size, self.dim), rng)
        out = units * float(self.granularity)
        return out[:, 0] if self.dim == 1 else out

    def _law(self, data: Any) -> FunctionLaw:
        x = np.asarray(data, dtype=float)
        dim = self.dim
        sigma, g = float(self.sigma), float(self.granularity)

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            out = np.asarray(outputs, dtype=float).reshape(-1, dim)
            return grid_gaussian_logpmf(out, x, sigma, g).sum(axis=1)

        s, g_exact = exact(self.sigma), exact(Fraction(g))
        symbols = (sp.Symbol("y", real=True),) if dim == 1 else tuple(sp.Symbol(f"y{i}", real=True) for i in range(dim))
        expr = sp.Mul(*[
            (sp.erf((sym - exact(float(c)) + g_exact / 2) / (s * sp.sqrt(2)))
             - sp.erf((sym - exact(float(c)) - g_exact / 2) / (s * sp.sqrt(2)))) / 2
            for sym, c in zip(symbols, x)
        ])
        return FunctionLaw("discrete", log_prob, symbols, expr)

    def example_pair(self) -> tuple[Any, Any]:
        x = np.zeros(self.dim)
        y = np.zeros(self.dim)
        y[0] = float(self.sensitivity)
        return x, y


@register
@dataclass(frozen=True, kw_only=True)
class GaussianRDP(Gaussian):
    """The grid Gaussian mechanism with a Rényi-DP claim (Mironov 2017, Prop. 7).

    Same pmf and neighbour relation as :class:`Gaussian`.
    Claim: (α, ε)-RDP with ε = α Δ² / (2σ²) (defaults σ = 1, Δ = 1, α = 2: ε = 1)."""

    name = "gaussian_rdp"
    source = "seed: Gaussian mechanism with Rényi DP accounting (Mironov 2017, Prop. 7); grid output"

    sigma: Any = 1
    calibration: str = "rdp"
    claim: Claim = RenyiDP(2, 1)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, alpha: Any = 2, *, sensitivity: Any = 1, dim: int = 1,
                   granularity: float = DEFAULT_GRANULARITY) -> "GaussianRDP":
        """σ = Δ sqrt(α/(2ε)), rounded up so that α Δ²/(2σ²) <= ε holds exactly; claims (α, ε)-RDP."""
        claim = RenyiDP(alpha, epsilon)
        _v.positive("sensitivity", sensitivity)
        q = (max(_readings(claim.alpha)) * max(_readings(sensitivity)) ** 2
             / (2 * min(_readings(claim.epsilon))))
        sigma = math.sqrt(float(q))
        while min(_readings(sigma)) ** 2 < q:
            sigma = math.nextafter(sigma, math.inf)
        return cls(sigma=sigma, sensitivity=sensitivity, dim=dim, granularity=granularity,
                   calibration="rdp", claim=claim)
