"""The discrete Gaussian mechanism with an exact sampler: C. Canonne, G. Kamath, T. Steinke,
"The Discrete Gaussian for Differential Privacy", NeurIPS 2020 -- Algorithm 1 (Bernoulli(exp(-γ))
for rational γ), Algorithm 2 (discrete Laplace with rational scale t/s) and Algorithm 3 (discrete
Gaussian by rejection from a discrete Laplace), and Theorem 7 (its exact (ε, δ) profile).

Everything is exact: parameters are Fractions and the output law is exactly N_Z(0, σ²). Two
implementations of the same algorithms: the mechanism samples with the vectorised one,
:func:`dpharness.mechanisms._exact.discrete_gaussian` (Algorithm 3 over an exact vectorised discrete
Laplace, every coin a comparison of a lazily refined uniform with the exact boundary: a float pass
certified by rigorous error bounds, an mpmath interval resolver for the undecided; about 10^7
samples/s on one core at σ² = 14, for every σ² in [2**-32, 2**200]); the per-sample functions
below (:func:`bernoulli_exp`, :func:`sample_discrete_laplace`, :func:`sample_discrete_gaussian`)
are the paper's Algorithms 1-3 on Python big integers, with every coin ``Bernoulli(n/d)`` decided
by a uniform integer below d (no float at all; about 2.5·10^4 samples/s), kept as a reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import mpmath
import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import ApproxDP, BoundedChange, Claim, FunctionLaw, InputSpec, IntegerRange, Mechanism, exact
from dpharness.errors import ParameterError
from dpharness.registry import register

__all__ = [
    "DiscreteGaussian",
    "bernoulli_exp",
    "sample_discrete_laplace",
    "sample_discrete_gaussian",
    "discrete_gaussian_delta",
]

_BOUND = 2**52


# --------------------------------------------------------------------------- exact samplers


def _uniform_below(d: int, rng: np.random.Generator) -> int:
    """A uniform integer in {0..d-1}, exactly (rejection on random bytes for large d)."""
    if d <= 2**62:
        return int(rng.integers(0, d))
    nbytes = (d.bit_length() + 7) // 8
    mask = (1 << d.bit_length()) - 1
    while True:
        u = int.from_bytes(rng.bytes(nbytes), "little") & mask
        if u < d:
            return u


def _bernoulli(p: Fraction, rng: np.random.Generator) -> bool:
    """Bernoulli(p) for rational p in [0, 1]."""
    return _uniform_below(p.denominator, rng) < p.numerator


def bernoulli_exp(gamma: Fraction, rng: np.random.Generator) -> bool:
    """Bernoulli(exp(-γ)) for rational γ >= 0 (CKS 2020, Algorithm 1).

    γ <= 1: draw A_k ~ Bernoulli(γ/k) for k = 1, 2, ... until the first A_k = 0; return 1 iff that
    k is odd (P = Σ_k (-γ)^{k-1}... = e^{-γ}). γ > 1: the product of ⌊γ⌋ Bernoulli(e^{-1}) and one
    Bernoulli(e^{-(γ - ⌊γ⌋)})."""
    gamma = Fraction(gamma)
    if gamma <= 1:
        k = 1
        while _bernoulli(gamma / k, rng):
            k += 1
        return k % 2 == 1
    for _ in range(math.floor(gamma)):
        if not bernoulli_exp(Fraction(1), rng):
            return False
    return bernoulli_exp(gamma - math.floor(gamma), rng)


def sample_discrete_laplace(s: int, t: int, rng: np.random.Generator) -> int:
    """One draw of the discrete Laplace with scale t/s, ``P(y) ∝ exp(-|y| s/t)`` (CKS 2020, Algorithm 2)."""
    while True:
        u = _uniform_below(t, rng)
        if not bernoulli_exp(Fraction(u, t), rng):
            continue
        v = 0
        while bernoulli_exp(Fraction(1), rng):
            v += 1
        x = u + t * v
        y = x // s
        negative = _uniform_below(2, rng) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def sample_discrete_gaussian(sigma2: Fraction, rng: np.random.Generator) -> int:
    """One draw of N_Z(0, σ²), ``P(y) ∝ exp(-y²/(2σ²))`` (CKS 2020, Algorithm 3): propose
    Y ~ DiscreteLaplace(t), t = ⌊σ⌋ + 1, accept with probability exp(-(|Y| - σ²/t)²/(2σ²))."""
    sigma2 = Fraction(sigma2)
    t = math.isqrt(math.floor(sigma2)) + 1
    while True:
        y = sample_discrete_laplace(1, t, rng)
        gamma = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)
        if bernoulli_exp(gamma, rng):
            return y


# --------------------------------------------------------------------------- the same, vectorised


def _sample_discrete_gaussian_vec(sigma2: Fraction, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact draws of N_Z(0, σ²) (Algorithm 3, vectorised): delegates to
    :func:`dpharness.mechanisms._exact.discrete_gaussian` (float filter certified by error bounds,
    exact mpmath resolver for the rest). Kept under this name for existing callers; never raises
    OverflowError. (The former int64 implementation fell back to the big-integer path when an
    intermediate overflowed, which conditioned the batch on not overflowing: not exact.)"""
    from ._exact import discrete_gaussian

    return discrete_gaussian(Fraction(sigma2), size, rng)


# --------------------------------------------------------------------------- privacy profile


def discrete_gaussian_delta(epsilon: Any, sigma2: Any, sensitivity: int = 1, dps: int = 40) -> float:
    """δ(ε) of the 1-D discrete Gaussian mechanism for integer sensitivity Δ (CKS 2020, Theorem 7):
    ``δ = P[Y > εσ²/Δ - Δ/2] - e^ε P[Y > εσ²/Δ + Δ/2]``, Y ~ N_Z(0, σ²), summed with mpmath at
    ``dps`` digits over |y| <= N with the rest bounded by a geometric tail (< 10^-dps)."""
    with mpmath.workdps(dps):
        s2 = mpmath.mpf(Fraction(sigma2).numerator) / Fraction(sigma2).denominator
        eps = mpmath.mpf(Fraction(epsilon).numerator) / Fraction(epsilon).denominator
        d = int(sensitivity)
        N = int(math.ceil(math.sqrt(2 * float(s2) * (dps * math.log(10) + 10)))) + d + 2
        w = {y: mpmath.exp(-mpmath.mpf(y * y) / (2 * s2)) for y in range(-N, N + 1)}
        Z = mpmath.fsum(w.values())
        a = eps * s2 / d - mpmath.mpf(d) / 2
        b = eps * s2 / d + mpmath.mpf(d) / 2
        tail_a = mpmath.fsum(w[y] for y in range(-N, N + 1) if y > a)
        tail_b = mpmath.fsum(w[y] for y in range(-N, N + 1) if y > b)
        return float((tail_a - mpmath.exp(eps) * tail_b) / Z)


def _calibrate_sigma2(epsilon: Any, delta: Any, sensitivity: int, denominator: int = 64) -> Fraction:
    """The smallest σ² on the grid (1/denominator)·Z with δ(ε) <= δ (bisection; δ(ε) decreases in σ)."""
    target = float(delta) * (1 - 1e-9)  # margin for the float conversion of the profile
    lo, hi = 1, denominator
    while discrete_gaussian_delta(epsilon, Fraction(hi, denominator), sensitivity) > target:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if discrete_gaussian_delta(epsilon, Fraction(mid, denominator), sensitivity) > target:
            lo = mid
        else:
            hi = mid
    return Fraction(hi, denominator)


# --------------------------------------------------------------------------- the mechanism


@register
@dataclass(frozen=True, kw_only=True)
class DiscreteGaussian(Mechanism):
    """Discrete Gaussian mechanism on an integer answer x: ``y = x + Y``, ``Y ~ N_Z(0, sigma2)``.

    pmf: ``P(y) = exp(-(y - x)²/(2σ²)) / Σ_{z∈Z} exp(-z²/(2σ²))`` (the normaliser has no closed
    form; the sympy expression keeps it as an unevaluated Sum). Neighbours: integer answers with
    ``|x - x'| <= sensitivity``. Claim: ApproxDP(ε, δ) with σ² the smallest multiple of 1/64 whose
    exact δ(ε) (CKS Theorem 7) is at most δ; default ApproxDP(1, 1e-5), σ² = 14 (δ(1) = 9.956e-6 at 14, 1.0034e-5 at 14 - 1/64).
    (It is also (α, αΔ²/(2σ²))-Rényi DP for every α > 1, CKS Theorem 4.)
    Output: int64 ``(size,)`` (object, exact Python ints, in the astronomically unlikely case that
    ``x + Y`` leaves [-2**62, 2**62)). Exact vectorised sampler (CKS Alg. 3, see the module
    docstring): ~10^7 samples/s on one core. ``sigma2`` must lie in [2**-32, 2**200]."""

    name: ClassVar[str] = "discrete_gaussian"
    source: ClassVar[str] = "Canonne, Kamath & Steinke 2020, Algorithms 1-3 and Theorem 7"

    sigma2: Any = 14
    sensitivity: int = 1
    claim: Claim = ApproxDP(1, 1e-5)

    def _check(self) -> None:
        if isinstance(self.sigma2, float):
            _v.positive("sigma2", self.sigma2)
            raise ParameterError(
                f"sigma2={self.sigma2!r} is a float; pass an exact Fraction or int "
                f"(e.g. Fraction({self.sigma2!r}) or a rational approximation)."
            )
        _v.positive("sigma2", self.sigma2)
        if not Fraction(1, 2**32) <= Fraction(self.sigma2) <= 2**200:
            raise ParameterError(
                f"sigma2={self.sigma2!r} is outside [2**-32, 2**200], the variances the exact "
                "sampler accepts; pass a variance in that range."
            )
        _v.integer("sensitivity", self.sensitivity, minimum=1)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, delta: Any = 1e-5, *, sensitivity: int = 1):
        """σ² = the smallest multiple of 1/64 with δ(ε) <= δ (exact profile), claim ApproxDP(ε, δ)."""
        claim = ApproxDP(epsilon, delta)
        if not claim.delta > 0:
            raise ParameterError(f"delta={delta!r} must be > 0 for the discrete Gaussian; pass e.g. 1e-5.")
        sensitivity = _v.integer("sensitivity", sensitivity, minimum=1)
        return cls(
            sigma2=_calibrate_sigma2(claim.epsilon, claim.delta, sensitivity), sensitivity=sensitivity, claim=claim
        )

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(IntegerRange(-_BOUND, _BOUND), BoundedChange(self.sensitivity, "l2"), "vector", dim=1)

    def example_pair(self) -> tuple[Any, Any]:
        """0 vs sensitivity."""
        return np.array([0]), np.array([self.sensitivity])

    def _sample(self, data, size, rng):
        x = int(np.asarray(data).reshape(-1)[0])
        y = _sample_discrete_gaussian_vec(Fraction(self.sigma2), size, rng)
        if y.dtype == object or (len(y) and max(int(y.max()), -int(y.min())) + abs(x) >= 2**62):
            return np.array([x + int(v) for v in y], dtype=object)  # exact Python ints, never a wrapped int64
        return x + y

    def _law(self, data):
        x = int(np.asarray(data).reshape(-1)[0])
        s2 = float(Fraction(self.sigma2))
        N = int(math.ceil(math.sqrt(2 * s2 * 760))) + 1
        z = np.arange(-N, N + 1, dtype=float)
        log_norm = float(np.logaddexp.reduce(-z * z / (2 * s2)))
        y, k = sp.Symbol("y", integer=True), sp.Symbol("k", integer=True)
        s2s = exact(Fraction(self.sigma2))
        expr = sp.exp(-((y - x) ** 2) / (2 * s2s)) / sp.Sum(sp.exp(-(k**2) / (2 * s2s)), (k, -sp.oo, sp.oo))

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            out = np.asarray(outputs, dtype=float).reshape(-1)
            lp = -((out - x) ** 2) / (2 * s2) - log_norm
            return np.where(np.equal(np.mod(out, 1), 0), lp, -np.inf)

        return FunctionLaw("discrete", log_prob, (y,), expr)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
