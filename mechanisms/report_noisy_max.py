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

Floating point: the output is an index, so the low-order bits of the float noise are never
released; only the comparison order is, and float rounding perturbs it with probability ~2^-52.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import (
    BoundedChange, DiscreteLaw, FunctionLaw, InputSpec, Mechanism, PureDP, RealInterval, exact,
)
from dpharness.registry import register

from ._literature import (
    exact_ratio, expon_logcdf, expon_logpdf, integrate_line, laplace_logcdf, laplace_logpdf,
    sym_laplace_cdf, sym_laplace_pdf,
)

__all__ = [
    "ReportNoisyMax", "ReportNoisyMaxExponential",
    "ReportNoisyMaxValueLaplace", "ReportNoisyMaxValueExponential",
    "rnm_laplace_probs", "rnm_exponential_probs",
]


# --------------------------------------------------------------------------- exact laws

def rnm_laplace_probs(q: np.ndarray, b: float) -> np.ndarray:
    """``P(argmax_i (q_i + L_i) = i) = ∫ f(x - q_i) Π_{j≠i} F(x - q_j) dx`` with L_i ~ Lap(0, b) i.i.d.
    (f, F the Laplace density and cdf), by quadrature split at the kinks x = q_j."""
    q = np.asarray(q, dtype=float)
    k = len(q)
    out = np.empty(k)
    for i in range(k):
        others = np.delete(q, i)

        def integrand(x: float, i: int = i, others: np.ndarray = others) -> float:
            return math.exp(float(laplace_logpdf(x - q[i], b)) + float(np.sum(laplace_logcdf(x - others, b))))

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


def _others_sum(logs: np.ndarray) -> np.ndarray:
    """``out[:, i] = Σ_{j≠i} logs[:, j]`` without ``-inf - -inf``."""
    k = logs.shape[1]
    return np.sum(np.where(np.eye(k, dtype=bool)[None, :, :], 0.0, logs[:, None, :]), axis=2)


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
        return cls(n_candidates=n_candidates, scale=exact_ratio(2 * sensitivity, epsilon),
                   sensitivity=sensitivity, claim=PureDP(epsilon))

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(RealInterval(), BoundedChange(self.sensitivity, "linf"), "vector", dim=self.n_candidates)

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
    def _sample(self, data, size, rng):
        return np.argmax(self._noisy(data, size, rng), axis=1).astype(np.int64)

    def _index_law(self, data: np.ndarray, probs: np.ndarray, expr: sp.Expr, i: sp.Symbol) -> DiscreteLaw:
        return DiscreteLaw(outcomes=tuple(range(self.n_candidates)), probs=tuple(float(p) for p in probs),
                           symbols=(i,), expr=expr)


@register
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
        qs = _sym_q(data)
        pieces = []
        for idx in range(self.n_candidates):
            integrand = sym_laplace_pdf(x - qs[idx], bs) * sp.Mul(*[sym_laplace_cdf(x - qs[j], bs)
                                                                      for j in range(self.n_candidates) if j != idx])
            pieces.append((sp.Integral(integrand, (x, -sp.oo, sp.oo)), sp.Eq(i, idx)))
        return self._index_law(data, rnm_laplace_probs(data, b), sp.Piecewise(*pieces), i)


@register
@dataclass(frozen=True, kw_only=True)
class ReportNoisyMaxExponential(_IndexOutput, _NoisyMaxBase):
    """Report noisy max with one-sided exponential noise ``η_i ~ Exp(mean scale)`` (= permute-and-flip).

    pmf (closed form, see :func:`rnm_exponential_probs`): with ``p_j = exp((q_j - max q)/scale)``,
    ``P(i) = ∫_0^1 p_i Π_{j≠i} (1 - u p_j) du = p_i Σ_{S ⊆ [k]∖{i}} (-1)^{|S|} Π_{j∈S} p_j/(|S|+1)``.
    Neighbours: ``|q - q'|_inf <= sensitivity``. Claim: PureDP(ε) with ``scale = 2Δ/ε``
    (default ε = 1, Δ = 1, scale = 2, k = 5)."""

    name: ClassVar[str] = "report_noisy_max_exponential"
    source: ClassVar[str] = ("Dwork & Roth 2014, §3.3 with exponential noise; = permute-and-flip "
                             "(McKenna & Sheldon 2020; Ding et al. 2021)")
    noise: ClassVar[str] = "exponential"

    def _law(self, data):
        b = float(self.scale)
        u, i = sp.Symbol("u", positive=True), sp.Symbol("i", integer=True, nonnegative=True)
        bs = exact(self.scale)
        qs = _sym_q(data)
        qmax = max(qs)
        p = [sp.exp((qj - qmax) / bs) for qj in qs]
        pieces = []
        for idx in range(self.n_candidates):
            integrand = p[idx] * sp.Mul(*[(1 - u * p[j]) for j in range(self.n_candidates) if j != idx])
            pieces.append((sp.Integral(integrand, (u, 0, 1)), sp.Eq(i, idx)))
        return self._index_law(data, rnm_exponential_probs(data, b), sp.Piecewise(*pieces), i)


# --------------------------------------------------------------------------- gallery: the value

@register
@dataclass(frozen=True, kw_only=True)
class ReportNoisyMaxValueLaplace(_NoisyMaxBase):
    """GALLERY. Report noisy max that returns the noisy maximum VALUE ``V = max_i (q_i + η_i)``,
    ``η_i ~ Lap(0, scale)``, calibrated as for the index (``scale = 2Δ/ε``).

    Density: ``g(v) = d/dv Π_i F(v - q_i) = Σ_i f(v - q_i) Π_{j≠i} F(v - q_j)``.
    Neighbours: ``|q - q'|_inf <= Δ``. Claim: PureDP(ε) (wrongly).

    True ε = kΔ/scale = kε/2 for k candidates (2.5 at the defaults k = 5, ε = 1). Derivation:
    upper bound -- V is a post-processing of the vector (q_i + η_i)_i, which is the Laplace
    mechanism on a vector of L1 sensitivity kΔ, hence kΔ/scale-DP. Lower bound (attained) --
    take q = (0, ..., 0) and q' = (Δ, ..., Δ), so V' = V + Δ. For v <= 0 every factor is in the left
    tail: f(v) = e^{v/b}/(2b), F(v) = e^{v/b}/2, so g(v) = k e^{kv/b} / (2^k b) and
    g(v)/g(v - Δ) = e^{kΔ/b} exactly for all v <= 0, an event of positive probability."""

    name: ClassVar[str] = "report_noisy_max_value_laplace"
    source: ClassVar[str] = "StatDP (Ding et al. CCS 2018) ReportNoisyMax3; Dwork & Roth 2014 §3.3 misread"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "returns the noisy maximum value instead of its index; the value leaks all k scores"
    true_epsilon: ClassVar[float] = 2.5
    noise: ClassVar[str] = "laplace"

    def _sample(self, data, size, rng):
        return np.max(self._noisy(data, size, rng), axis=1)

    def example_pair(self) -> tuple[Any, Any]:
        """StatDP's "all above": [1, ..., 1] vs [2, ..., 2] -- the pair attaining kΔ/scale."""
        k = self.n_candidates
        return np.ones(k), np.full(k, 2.0)

    def _law(self, data):
        q = np.asarray(data, dtype=float)
        b = float(self.scale)
        v = sp.Symbol("v", real=True)
        bs = exact(self.scale)
        qs = _sym_q(q)
        k = len(qs)
        expr = sp.Add(*[sym_laplace_pdf(v - qs[i], bs) * sp.Mul(*[sym_laplace_cdf(v - qs[j], bs) for j in range(k) if j != i])
                        for i in range(k)])

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            y = np.asarray(outputs, dtype=float).reshape(-1, 1)
            terms = laplace_logpdf(y - q[None, :], b) + _others_sum(laplace_logcdf(y - q[None, :], b))
            return np.logaddexp.reduce(terms, axis=1)

        return FunctionLaw("continuous", log_prob, (v,), expr)


@register
@dataclass(frozen=True, kw_only=True)
class ReportNoisyMaxValueExponential(_NoisyMaxBase):
    """GALLERY. Returns the noisy maximum VALUE ``V = max_i (q_i + η_i)`` with one-sided exponential
    noise ``η_i ~ Exp(mean scale)``, ``scale = 2Δ/ε``.

    Density: ``g(v) = Σ_i f(v - q_i) Π_{j≠i} F(v - q_j)`` for ``v >= max q`` (0 below), with
    ``f(z) = e^{-z/b}/b``, ``F(z) = 1 - e^{-z/b}`` on z >= 0. Neighbours: ``|q - q'|_inf <= Δ``.
    Claim: PureDP(ε) (wrongly).

    True ε = ∞: the support ``[max q, ∞)`` moves with the data. For q' = q + Δ·1 the event
    ``V < max q + Δ`` has probability ``Π_i (1 - e^{-(max q + Δ - q_i)/b}) > 0`` under q and 0 under q'."""

    name: ClassVar[str] = "report_noisy_max_value_exponential"
    source: ClassVar[str] = "StatDP (Ding et al. CCS 2018) ReportNoisyMax4"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "returns the noisy maximum value; with one-sided noise its support reveals max q"
    true_epsilon: ClassVar[float] = math.inf
    noise: ClassVar[str] = "exponential"

    def _sample(self, data, size, rng):
        return np.max(self._noisy(data, size, rng), axis=1)

    def example_pair(self) -> tuple[Any, Any]:
        """StatDP's "all above": [1, ..., 1] vs [2, ..., 2]."""
        k = self.n_candidates
        return np.ones(k), np.full(k, 2.0)

    def _law(self, data):
        q = np.asarray(data, dtype=float)
        b = float(self.scale)
        v = sp.Symbol("v", real=True)
        bs = exact(self.scale)
        qs = _sym_q(q)
        k = len(qs)
        f = [sp.exp(-(v - qj) / bs) / bs for qj in qs]
        F = [1 - sp.exp(-(v - qj) / bs) for qj in qs]
        body = sp.Add(*[f[i] * sp.Mul(*[F[j] for j in range(k) if j != i]) for i in range(k)])
        expr = sp.Piecewise((body, v >= max(qs)), (0, True))

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            y = np.asarray(outputs, dtype=float).reshape(-1, 1)
            terms = expon_logpdf(y - q[None, :], b) + _others_sum(expon_logcdf(y - q[None, :], b))
            out = np.logaddexp.reduce(terms, axis=1)
            return np.where(y[:, 0] >= q.max(), out, -np.inf)

        return FunctionLaw("continuous", log_prob, (v,), expr)
