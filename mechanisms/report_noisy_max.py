"""Report noisy max (Dwork & Roth 2014, "The Algorithmic Foundations of Differential Privacy",
§3.3, Claim 3.9) with Laplace noise, and with one-sided exponential noise (which is the
permute-and-flip mechanism of McKenna & Sheldon 2020; Ding, Kifer et al. 2021 "The permute-and-flip
mechanism is identical to report-noisy-max with exponential noise"), plus two gallery variants that
release the noisy maximum VALUE instead of its index (StatDP's "ReportNoisyMax3/4", Ding et al.
CCS 2018).

Input: a vector q of k candidate scores (e.g. counts), neighbours when ``|q - q'|_inf <= Δ``.
Output of the correct mechanisms: ``argmax_i (q_i + η_i)`` (ties, of probability 0, go to the
smallest index), an int index of shape ``(size,)``.

Calibration: with linf sensitivity Δ (scores may move in opposite directions) the index is
``2Δ/b``-DP for both noises (the alignment ``η_i -> η_i + q_i - q'_i + Δ`` costs at most 2Δ/b),
so ``calibrated(epsilon)`` sets ``b = 2Δ/ε``. (Dwork & Roth's Lap(1/ε) is for monotone counting
queries, a narrower neighbour relation than linf-bounded change.)

Floating point: the index outputs release only the comparison order of float noisy scores, never
their low-order bits (float rounding perturbs the order with probability ~2^-52). The gallery's
value outputs are computed on the grid ``granularity * Z`` with discrete noise, so that their
true ε is exactly the one derived below and not ∞ through float artefacts (Mironov 2012).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import (
    BoundedChange,
    Deferred,
    DiscreteLaw,
    FunctionLaw,
    InputSpec,
    Mechanism,
    PureDP,
    RealInterval,
    exact,
)
from dpharness.registry import register

from ._literature import (
    exact_ratio,
    integrate_line,
    laplace_logcdf_scalar,
    laplace_logpdf_scalar,
    sym_laplace_cdf,
    sym_laplace_pdf,
)
from ._noise import DEFAULT_GRANULARITY, check_granularity, discrete_laplace, on_grid_units, to_units

__all__ = [
    "ReportNoisyMax",
    "ReportNoisyMaxExponential",
    "ReportNoisyMaxValueLaplace",
    "ReportNoisyMaxValueExponential",
    "rnm_laplace_probs",
    "rnm_exponential_probs",
    "grid_max_logpmf",
]


# --------------------------------------------------------------------------- exact laws


def rnm_laplace_probs(q: np.ndarray, b: float) -> np.ndarray:
    """``P(argmax_i (q_i + L_i) = i) = ∫ f(x - q_i) Π_{j≠i} F(x - q_j) dx`` with L_i ~ Lap(0, b) i.i.d.
    (f, F the Laplace density and cdf), by quadrature split at the kinks x = q_j."""
    q = np.asarray(q, dtype=float)
    k = len(q)
    out = np.empty(k)
    for i in range(k):
        qi, others = float(q[i]), [float(v) for v in np.delete(q, i)]

        def integrand(x: float, qi: float = qi, others: list = others) -> float:
            total = 0.0
            for o in others:
                total += laplace_logcdf_scalar(x - o, b)
            return math.exp(laplace_logpdf_scalar(x - qi, b) + total)

        out[i] = integrate_line(integrand, q)
    return out


def rnm_exponential_probs(q: np.ndarray, b: float) -> np.ndarray:
    """Closed form for one-sided exponential noise E_i ~ Exp(mean b).

    Derivation: ``P(i) = ∫ f(x - q_i) Π_{j≠i} F(x - q_j) dx`` with ``f(z) = e^{-z/b}/b``,
    ``F(z) = 1 - e^{-z/b}`` for z >= 0 (0 below). The product vanishes below ``q* = max_j q_j``;
    substituting ``u = e^{-(x - q*)/b}`` and ``p_j = e^{(q_j - q*)/b} ∈ (0, 1]`` gives
    ``P(i) = ∫_0^1 p_i Π_{j≠i} (1 - u p_j) du
          = p_i Σ_{S ⊆ [k]∖{i}} (-1)^{|S|} Π_{j∈S} p_j / (|S| + 1)``
    (the permute-and-flip probabilities). The integrand is a polynomial of degree k-1 in u, so
    Gauss-Legendre quadrature with ceil(k/2) nodes is exact (and, unlike the alternating sum,
    free of cancellation)."""
    q = np.asarray(q, dtype=float)
    k = len(q)
    p = np.exp((q - q.max()) / b)
    nodes, weights = np.polynomial.legendre.leggauss(max(1, (k + 1) // 2 + 1))
    u = (nodes + 1) / 2
    w = weights / 2
    out = np.empty(k)
    for i in range(k):
        others = np.delete(p, i)
        out[i] = p[i] * float(np.sum(w * np.prod(1 - np.outer(u, others), axis=1)))
    return out


def _sym_q(q: np.ndarray) -> list:
    return [exact(float(v)) for v in np.asarray(q, dtype=float)]


# --------------------------------------------------------------------------- correct mechanisms


@dataclass(frozen=True, kw_only=True)
class _NoisyMaxBase(Mechanism):
    n_candidates: int = 5
    scale: Any = 2
    sensitivity: Any = 1

    noise: ClassVar[str] = "laplace"

    def _check(self) -> None:
        _v.integer("n_candidates", self.n_candidates, minimum=2)
        _v.positive("scale", self.scale)
        _v.positive("sensitivity", self.sensitivity)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, n_candidates: int = 5, sensitivity: Any = 1):
        """``scale = 2Δ/ε`` (exact when ε and Δ are ints/Fractions, else rounded up), claim PureDP(ε)."""
        epsilon = _v.positive("epsilon", epsilon)
        sensitivity = _v.positive("sensitivity", sensitivity)
        return cls(
            n_candidates=n_candidates,
            scale=exact_ratio(2 * sensitivity, epsilon),
            sensitivity=sensitivity,
            claim=PureDP(epsilon),
        )

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(
            RealInterval(), BoundedChange(self.sensitivity, "linf"), "vector", dim=self.n_candidates, any_data=True
        )

    def _noisy(self, data: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
        b = float(self.scale)
        shape = (size, self.n_candidates)
        eta = rng.laplace(0.0, b, shape) if self.noise == "laplace" else rng.exponential(b, shape)
        return np.asarray(data, dtype=float)[None, :] + eta

    def example_pair(self) -> tuple[Any, Any]:
        """StatDP's "one above, rest below": [1, 1, ..., 1] vs [2, 0, ..., 0]."""
        k = self.n_candidates
        return np.ones(k), np.array([2.0] + [0.0] * (k - 1))


class _IndexOutput:
    n_candidates: int  # a field of the mechanism this is mixed into

    def _sample(self, data, size, rng):
        return np.argmax(self._noisy(data, size, rng), axis=1).astype(np.int64)

    def _index_law(self, data: np.ndarray, probs: np.ndarray, expr: "sp.Expr | Deferred", i: sp.Symbol) -> DiscreteLaw:
        return DiscreteLaw(
            outcomes=tuple(range(self.n_candidates)), probs=tuple(float(p) for p in probs), symbols=(i,), expr=expr
        )


@register(proof="audit-only")  # numpy's float noise: no proof covers the code (see its proof)
@dataclass(frozen=True, kw_only=True)
class ReportNoisyMax(_IndexOutput, _NoisyMaxBase):
    """Report noisy max with Laplace noise: output ``argmax_i (q_i + η_i)``, ``η_i ~ Lap(0, scale)`` i.i.d.

    pmf: ``P(i) = ∫ f(x - q_i) Π_{j≠i} F(x - q_j) dx`` (f, F the Lap(0, scale) density and cdf; no
    closed form in general: the sympy expression is the unevaluated Integral, numbers by quadrature).
    Neighbours: ``|q - q'|_inf <= sensitivity``. Claim: PureDP(ε) with ``scale = 2Δ/ε``
    (default ε = 1, Δ = 1, scale = 2, k = 5 candidates)."""

    name: ClassVar[str] = "report_noisy_max_laplace"
    source: ClassVar[str] = "Dwork & Roth 2014, §3.3 (report noisy max, Laplace noise)"
    noise: ClassVar[str] = "laplace"

    def _law(self, data):
        b = float(self.scale)
        x, i = sp.Symbol("x", real=True), sp.Symbol("i", integer=True, nonnegative=True)
        bs = exact(self.scale)

        def build_expr():
            qs = _sym_q(data)
            pieces = []
            for idx in range(self.n_candidates):
                integrand = sym_laplace_pdf(x - qs[idx], bs) * sp.Mul(
                    *[sym_laplace_cdf(x - qs[j], bs) for j in range(self.n_candidates) if j != idx]
                )
                pieces.append((sp.Integral(integrand, (x, -sp.oo, sp.oo)), sp.Eq(i, idx)))
            return sp.Piecewise(*pieces)

        return self._index_law(data, rnm_laplace_probs(data, b), Deferred(build_expr), i)


@register
@dataclass(frozen=True, kw_only=True)
class ReportNoisyMaxExponential(_IndexOutput, _NoisyMaxBase):
    """Report noisy max with one-sided exponential noise ``η_i ~ Exp(mean scale)`` (= permute-and-flip).

    pmf (closed form, see :func:`rnm_exponential_probs`): with ``p_j = exp((q_j - max q)/scale)``,
    ``P(i) = ∫_0^1 p_i Π_{j≠i} (1 - u p_j) du = p_i Σ_{S ⊆ [k]∖{i}} (-1)^{|S|} Π_{j∈S} p_j/(|S|+1)``.
    Neighbours: ``|q - q'|_inf <= sensitivity``. Claim: PureDP(ε) with ``scale = 2Δ/ε``
    (default ε = 1, Δ = 1, scale = 2, k = 5)."""

    name: ClassVar[str] = "report_noisy_max_exponential"
    source: ClassVar[str] = (
        "Dwork & Roth 2014, §3.3 with exponential noise; = permute-and-flip (McKenna & Sheldon 2020; Ding et al. 2021)"
    )
    noise: ClassVar[str] = "exponential"

    def _sample(self, data, size, rng):
        # exact: permute-and-flip, whose law is argmax(q + Exp(mean scale)) (numpy's float exponential
        # noise has bounded support, so its argmax has probability 0 where this law's is positive)
        from ._exact import permute_and_flip

        return permute_and_flip(np.asarray(data, dtype=float).tolist(), self.scale, size, rng)

    def _law(self, data):
        b = float(self.scale)
        u, i = sp.Symbol("u", positive=True), sp.Symbol("i", integer=True, nonnegative=True)
        bs = exact(self.scale)

        def build_expr():
            qs = _sym_q(data)
            qmax = max(qs)
            p = [sp.exp((qj - qmax) / bs) for qj in qs]
            pieces = []
            for idx in range(self.n_candidates):
                integrand = p[idx] * sp.Mul(*[(1 - u * p[j]) for j in range(self.n_candidates) if j != idx])
                pieces.append((sp.Integral(integrand, (u, 0, 1)), sp.Eq(i, idx)))
            return sp.Piecewise(*pieces)

        return self._index_law(data, rnm_exponential_probs(data, b), Deferred(build_expr), i)


# --------------------------------------------------------------------------- gallery: the value


def grid_noise_logcdf(m: np.ndarray, t: float, noise: str) -> np.ndarray:
    """``log P(N <= m)`` for integer m, N the grid noise in units: discrete Laplace with ratio
    ``a = e^{-1/t}`` (``P(N = k) = (1-a)/(1+a) a^{|k|}``) or one-sided geometric
    (``P(N = k) = (1-a) a^k``, k >= 0)."""
    m = np.asarray(m, dtype=float)
    la = -1.0 / t
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if noise == "laplace":
            l1a = math.log1p(math.exp(la))
            left = -np.abs(m) / t - l1a  # m < 0: a^{|m|}/(1+a)
            right = np.log1p(-np.exp((np.maximum(m, 0) + 1) * la - l1a))  # m >= 0: 1 - a^{m+1}/(1+a)
            return np.where(m < 0, left, right)
        out = np.log(-np.expm1((np.maximum(m, 0) + 1) * la))  # m >= 0: 1 - a^{m+1}
        return np.where(m >= 0, out, -np.inf)


def grid_noise_logpmf(m: np.ndarray, t: float, noise: str) -> np.ndarray:
    """``log P(N = m)`` for the grid noises of :func:`grid_noise_logcdf`."""
    m = np.asarray(m, dtype=float)
    la = -1.0 / t
    if noise == "laplace":
        return math.log(-math.expm1(la)) - math.log1p(math.exp(la)) - np.abs(m) / t
    with np.errstate(invalid="ignore"):
        return np.where(m >= 0, math.log(-math.expm1(la)) + np.maximum(m, 0) * la, -np.inf)


def grid_max_logpmf(v_units: np.ndarray, centre: np.ndarray, t: float, noise: str) -> np.ndarray:
    """``log P(max_i (c_i + N_i) = v)`` in grid units: ``Π_i F_i(v) - Π_i F_i(v - 1)`` computed as
    ``log Π_i F_i(v) + log(1 - Π_i F_i(v-1)/F_i(v))`` with ``F_i(v-1)/F_i(v) = 1 - P(N_i = v - c_i)/F_i(v)``
    (no cancellation even when the grid is fine)."""
    v = np.asarray(v_units, dtype=float).reshape(-1, 1)
    m = v - np.asarray(centre, dtype=float)[None, :]
    lcdf = grid_noise_logcdf(m, t, noise)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.exp(grid_noise_logpmf(m, t, noise) - lcdf)  # P(N = m)/P(N <= m)
        d = np.sum(np.log1p(-np.minimum(ratio, 1.0)), axis=1)  # log Π F(v-1)/F(v)
        out = lcdf.sum(axis=1) + np.log(-np.expm1(d))
    return np.where(np.isnan(out), -np.inf, out)


@dataclass(frozen=True, kw_only=True)
class _ValueBase(_NoisyMaxBase):
    granularity: float = DEFAULT_GRANULARITY

    def _check(self) -> None:
        super()._check()
        check_granularity("granularity", self.granularity)

    @classmethod
    def calibrated(
        cls, epsilon: Any = 1, *, n_candidates: int = 5, sensitivity: Any = 1, granularity: float = DEFAULT_GRANULARITY
    ):
        """The index's calibration ``scale = 2Δ/ε``, claim PureDP(ε) (the bug: the value needs more)."""
        base = super().calibrated(epsilon, n_candidates=n_candidates, sensitivity=sensitivity)  # _NoisyMaxBase's
        return base.replace(granularity=granularity)

    def example_pair(self) -> tuple[Any, Any]:
        """StatDP's "all above": [1, ..., 1] vs [2, ..., 2] (every score moves by Δ = 1)."""
        k = self.n_candidates
        return np.ones(k), np.full(k, 2.0)

    def _sample(self, data, size, rng):
        g = float(self.granularity)
        t = float(self.scale) / g
        centre = to_units("data", data, g)
        shape = (size, self.n_candidates)
        if self.noise == "laplace":
            noise = discrete_laplace(t, shape, rng)
        else:
            noise = np.floor(rng.standard_exponential(shape) * t).astype(np.int64)
        return (centre[None, :] + noise).max(axis=1).astype(float) * g

    def _law(self, data):
        g = float(self.granularity)
        t = float(self.scale) / g
        centre = to_units("data", data, g)
        v = sp.Symbol("v", real=True)
        gs, bs = exact(self.granularity), exact(self.scale)
        a = sp.exp(-gs / bs)
        cs = [gs * int(c) for c in centre]
        if self.noise == "laplace":

            def F(z):  # P(g·N <= z) for z on the grid
                return sp.Piecewise((a ** (-z / gs) / (1 + a), z < 0), (1 - a ** (z / gs + 1) / (1 + a), True))
        else:

            def F(z):
                return sp.Piecewise((0, z < 0), (1 - a ** (z / gs + 1), True))

        expr = sp.Mul(*[F(v - c) for c in cs]) - sp.Mul(*[F(v - gs - c) for c in cs])

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            units, ok = on_grid_units(np.asarray(outputs, dtype=float).reshape(-1), g)
            return np.where(ok, grid_max_logpmf(units, centre, t, self.noise), -np.inf)

        return FunctionLaw("discrete", log_prob, (v,), expr)


@register
@dataclass(frozen=True, kw_only=True)
class ReportNoisyMaxValueLaplace(_ValueBase):
    """GALLERY. Report noisy max that returns the noisy maximum VALUE
    ``V = g · max_i (round_g(q_i) + K_i)``, ``K_i ~ DiscreteLaplace(scale/g)`` i.i.d. (grid-Laplace
    with scale b = ``scale``, so float bits do not leak), calibrated as for the index (b = 2Δ/ε).

    pmf on the grid: ``P(V = v) = Π_i F_i(v) - Π_i F_i(v - g)``, ``F_i(v) = P(c_i + gK_i <= v)``,
    with ``a = e^{-g/b}``: ``P(gK <= -mg) = a^m/(1+a)`` and ``P(gK <= mg) = 1 - a^{m+1}/(1+a)`` (m >= 0).
    Neighbours: ``|q - q'|_inf <= Δ``. Claim: PureDP(ε) (wrongly).

    True ε = kΔ/b = kε/2 for k candidates (2.5 at the defaults k = 5, ε = 1, Δ = 1, b = 2), for Δ a
    multiple of g. Derivation: upper bound -- V is a post-processing of the vector
    (c_i + gK_i)_i, the grid-Laplace mechanism on a vector of L1 sensitivity kΔ, hence kΔ/b-DP.
    Lower bound, attained -- take q = (0, ..., 0) and q' = (Δ, ..., Δ), so V' = V + Δ. At grid
    points v = -mg <= 0 every factor is in the left tail: ``Π_i F_i(v) = a^{mk}/(1+a)^k``, so
    ``P(V = -mg) = (a^{mk} - a^{(m+1)k})/(1+a)^k`` and ``P(V = v)/P(V' = v) = a^{-kΔ/g} = e^{kΔ/b}``
    exactly for every v <= 0 (as for the continuous version, whose density ratio is e^{kΔ/b} on v <= 0)."""

    name: ClassVar[str] = "report_noisy_max_value_laplace"
    source: ClassVar[str] = "StatDP (Ding et al. CCS 2018) ReportNoisyMax3; Dwork & Roth 2014 §3.3 misread"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "returns the noisy maximum value instead of its index; the value leaks all k scores"
    true_epsilon: ClassVar[float] = 2.5
    noise: ClassVar[str] = "laplace"


@register
@dataclass(frozen=True, kw_only=True)
class ReportNoisyMaxValueExponential(_ValueBase):
    """GALLERY. Returns the noisy maximum VALUE ``V = g · max_i (round_g(q_i) + G_i)`` with one-sided
    grid-exponential noise ``G_i = floor(E_i b/g)``, ``E_i ~ Exp(1)`` (geometric: ``P(G = m) = (1-a)a^m``,
    ``a = e^{-g/b}``, m >= 0), b = ``scale`` = 2Δ/ε.

    pmf on the grid: ``P(V = v) = Π_i F_i(v) - Π_i F_i(v - g)`` with ``F_i(v) = 1 - a^{(v - c_i)/g + 1}``
    for v >= c_i (0 below); the support is ``v >= max_i c_i``. Neighbours: ``|q - q'|_inf <= Δ``.
    Claim: PureDP(ε) (wrongly).

    True ε = ∞: the support moves with the data. For q' = q + Δ·1 the outputs
    ``max q <= V < max q + Δ`` have positive probability under q and probability 0 under q'."""

    name: ClassVar[str] = "report_noisy_max_value_exponential"
    source: ClassVar[str] = "StatDP (Ding et al. CCS 2018) ReportNoisyMax4"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "returns the noisy maximum value; with one-sided noise its support reveals max q"
    true_epsilon: ClassVar[float] = math.inf
    noise: ClassVar[str] = "exponential"


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
