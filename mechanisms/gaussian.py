"""The Gaussian mechanism on a power-of-two grid, with the classic calibration (Dwork & Roth 2014,
"The Algorithmic Foundations of Differential Privacy", Thm. 3.22: σ = Δ sqrt(2 ln(1.25/δ))/ε, valid
for ε <= 1), the analytic calibration (Balle & Wang 2018, "Improving the Gaussian mechanism for
differential privacy: analytical calibration and optimal denoising", ICML, Thm. 8 / Alg. 1), and
the Rényi-DP statement (Mironov 2017, "Rényi differential privacy", CSF, Prop. 7:
D_α = α Δ² / (2σ²)).

Output: ``g * (floor(x/g + 1/2) + Y)`` with ``Y`` the discrete Gaussian ``N_Z(0, (σ/g)²)`` sampled
exactly (Canonne, Kamath & Steinke 2020, "The discrete Gaussian for differential privacy"), declared
from :mod:`dpharness.mechanisms.parts` so that the sampler runs the structure the prover walks. The
calibration formulas above are the continuous mechanism's; the proof is the discrete one's (its
exact profile in one dimension), which the calibrations are checked against."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath

from dpharness import _validate as _v
from dpharness.core import ApproxDP, BoundedChange, Claim, RealInterval, RenyiDP
from dpharness.errors import ParameterError
from dpharness.registry import register

from . import parts as dp
from ._noise import DEFAULT_GRANULARITY, _readings, check_granularity, float_up
from .parts import Composite, PartsMechanism, grid_steps, input_distance, input_space

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
    while any(
        analytic_delta(s, e, d) > target
        for s in _readings(hi)
        for e in _readings(epsilon)
        for d in _readings(sensitivity)
    ):
        hi = math.nextafter(hi, math.inf)
    return hi


def _grid_steps_l2(sensitivity: Any, dim: int, granularity: Any) -> tuple[Fraction, Fraction]:
    """(D1, D2sq) in grid steps for query vectors at L2 distance <= sensitivity (the prover's rule)."""
    space = input_space(RealInterval(), "vector", dim)
    d = input_distance(BoundedChange(sensitivity, "l2"), space)
    d1, d2, _ = grid_steps(space, d, granularity)
    return d1, d2


# The grid costs the analytic calibration a little: the proof bounds the discrete Gaussian's δ by
# sum-integral comparisons (relative slack ~ 1/τ); σ is raised by this factor to cover it.
_GRID_MARGIN = 1 + 2**-12


@register
@dataclass(frozen=True, kw_only=True)
class Gaussian(Composite):
    """The Gaussian mechanism on a vector of query answers, declared from parts: discrete Gaussian noise
    on the grid ``g*Z`` (exact sampler; Canonne, Kamath & Steinke 2020)::

        dp.gaussian(sigma, granularity=g)  on  input="vector", relation=BoundedChange(sensitivity, "l2")

    Output ``g*(c_i + Y_i)`` with ``c_i = floor(x_i/g + 1/2)`` and ``Y_i`` i.i.d. with
    ``P(y) ∝ exp(-y²/(2τ²))``, ``τ = σ/g``: the grid analogue of the density
    ``exp(-|y-x|²/(2σ²))/(2πσ²)^{dim/2}``.
    Neighbours: query vectors at L2 distance <= ``sensitivity`` (``BoundedChange(sensitivity, "l2")``).
    Claim: (ε, δ)-DP for the calibration named by ``calibration`` (defaults: the classic calibration
    at ε = 1, δ = 1e-5). The proof (``dpharness.proofs.parts``): in one dimension the discrete
    Gaussian's exact (ε, δ) profile (CKS 2020 Thm 7), bounded rigorously; in more dimensions
    ρ-zCDP with ρ = D₂²/(2τ²) converted to (ε, δ) (CKS 2020 Prop. 12)."""

    name = "gaussian"
    source = (
        "seed: Gaussian mechanism; classic calibration Dwork & Roth 2014 Thm. 3.22, "
        "analytic calibration Balle & Wang 2018 Alg. 1; exact discrete Gaussian on the grid (CKS 2020)"
    )

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

    def structure(self) -> PartsMechanism:
        return dp.mechanism(
            name=self.name,
            records=RealInterval(),
            relation=BoundedChange(self.sensitivity, "l2"),
            steps=dp.gaussian(self.sigma, granularity=self.granularity),
            claim=self.claim,
            input="vector",
            dim=self.dim,
        )

    @classmethod
    def calibrated_classic(
        cls,
        epsilon: Any = 1,
        delta: Any = 1e-5,
        *,
        sensitivity: Any = 1,
        dim: int = 1,
        granularity: float = DEFAULT_GRANULARITY,
    ) -> "Gaussian":
        """σ = Δ sqrt(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm. 3.22; 0 < ε <= 1), rounded up."""
        sigma = classic_sigma(epsilon, delta, sensitivity)
        return Gaussian(
            sigma=sigma,
            sensitivity=sensitivity,
            dim=dim,
            granularity=granularity,
            calibration="classic",
            claim=ApproxDP(epsilon, delta),
        )

    @classmethod
    def calibrated_analytic(
        cls,
        epsilon: Any = 1,
        delta: Any = 1e-5,
        *,
        sensitivity: Any = 1,
        dim: int = 1,
        granularity: float = DEFAULT_GRANULARITY,
    ) -> "Gaussian":
        """The analytic σ (Balle & Wang 2018, Alg. 1) for one-dimensional queries, raised by 2**-12 to
        cover the grid (the sensitivity in grid steps, ceil(Δ/g)·g, is used)."""
        if dim != 1:
            raise ParameterError(
                f"dim={dim!r}: the analytic calibration is proved here for one dimension; "
                "use Gaussian.calibrated_classic(...) for vectors."
            )
        g = check_granularity("granularity", granularity)
        d1, _ = _grid_steps_l2(sensitivity, 1, g)
        sigma = float_up(Fraction(analytic_sigma(epsilon, delta, d1 * Fraction(g))) * Fraction(_GRID_MARGIN))
        return Gaussian(
            sigma=sigma,
            sensitivity=sensitivity,
            dim=dim,
            granularity=granularity,
            calibration="analytic",
            claim=ApproxDP(epsilon, delta),
        )

    @classmethod
    def calibrated(
        cls,
        epsilon: Any = 1,
        delta: Any = 1e-5,
        *,
        sensitivity: Any = 1,
        dim: int = 1,
        granularity: float = DEFAULT_GRANULARITY,
    ) -> "Gaussian":
        """The analytic calibration (valid for every ε); see :meth:`calibrated_analytic`."""
        return cls.calibrated_analytic(epsilon, delta, sensitivity=sensitivity, dim=dim, granularity=granularity)


@register
@dataclass(frozen=True, kw_only=True)
class GaussianRDP(Gaussian):
    """The grid Gaussian mechanism with a Rényi-DP claim (Mironov 2017, Prop. 7; for the discrete
    Gaussian, CKS 2020): same declaration and neighbour relation as :class:`Gaussian`.
    Claim: (α, ε)-RDP with ε = α D₂² g²/(2σ²), D₂ the sensitivity in grid steps (defaults σ = 1,
    Δ = 1, α = 2: ε = 1)."""

    name = "gaussian_rdp"
    source = (
        "seed: Gaussian mechanism with Rényi DP accounting (Mironov 2017, Prop. 7); exact discrete Gaussian on the grid"
    )

    sigma: Any = 1
    calibration: str = "rdp"
    claim: Claim = RenyiDP(2, 1)

    @classmethod
    def calibrated(
        cls,
        epsilon: Any = 1,
        alpha: Any = 2,
        *,
        sensitivity: Any = 1,
        dim: int = 1,
        granularity: float = DEFAULT_GRANULARITY,
    ) -> "GaussianRDP":
        """σ = g·D₂ sqrt(α/(2ε)) (D₂² the squared sensitivity in grid steps), rounded up so that
        α D₂² g²/(2σ²) <= ε holds exactly; claims (α, ε)-RDP."""
        claim = RenyiDP(alpha, epsilon)
        _v.positive("sensitivity", sensitivity)
        g = check_granularity("granularity", granularity)
        _, d2 = _grid_steps_l2(sensitivity, dim, g)
        q = Fraction(claim.alpha) * d2 * Fraction(g) ** 2 / (2 * Fraction(claim.epsilon))
        sigma = math.sqrt(float(q))
        while Fraction(sigma) ** 2 < q:
            sigma = math.nextafter(sigma, math.inf)
        return cls(
            sigma=sigma, sensitivity=sensitivity, dim=dim, granularity=granularity, calibration="rdp", claim=claim
        )


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
