"""Private helpers of the literature mechanisms (report noisy max, sparse vector, ...): Laplace and
exponential distribution functions in log space (numpy) and as sympy expressions, 1-D quadrature
over the real line split at the kinks of the integrand, exact parameter arithmetic, and the
StatDP input patterns (Ding, Wang, Wang, Zhang & Kifer, CCS 2018, §5) the audits start from.

Shared noise samplers and grid helpers live in :mod:`dpharness.mechanisms._noise`."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable, Iterable

import numpy as np
import sympy as sp

__all__ = [
    "exact_ratio",
    "laplace_logpdf",
    "laplace_logpdf_scalar",
    "laplace_logcdf",
    "laplace_logcdf_scalar",
    "laplace_logsf",
    "expon_logpdf",
    "expon_logcdf",
    "log_laplace_interval",
    "sym_laplace_pdf",
    "sym_laplace_cdf",
    "integrate_line",
    "integrate_line_vec",
    "gauss_legendre_line",
    "statdp_patterns",
]

_EXACT = (int, Fraction, np.integer)


def exact_ratio(num: Any, den: Any) -> Any:
    """``num / den`` as an exact Fraction (an int when integral) when both are ints/Fractions;
    otherwise a float rounded UP (``math.nextafter`` toward +inf), the safe direction for a noise scale."""
    if isinstance(num, _EXACT) and isinstance(den, _EXACT) and not isinstance(num, bool) and not isinstance(den, bool):
        value = Fraction(int(num) if isinstance(num, np.integer) else num) / Fraction(
            int(den) if isinstance(den, np.integer) else den
        )
        return int(value) if value.denominator == 1 else value
    approx = float(num) / float(den)
    if Fraction(approx) * Fraction(float(den)) == Fraction(float(num)):
        return approx  # the float quotient is exact
    return math.nextafter(approx, math.inf)


# --------------------------------------------------------------------------- numeric, log space


def laplace_logpdf(z: np.ndarray, b: float) -> np.ndarray:
    """log density of Lap(0, b) at z."""
    return -np.abs(np.asarray(z, dtype=float)) / b - math.log(2 * b)


def laplace_logpdf_scalar(z: float, b: float) -> float:
    """:func:`laplace_logpdf` of one float, in ``math`` arithmetic (see :func:`laplace_logcdf_scalar`)."""
    return -abs(z) / b - math.log(2 * b)


def laplace_logcdf(z: np.ndarray, b: float) -> np.ndarray:
    """log P(L <= z) for L ~ Lap(0, b), accurate in both tails."""
    z = np.asarray(z, dtype=float)
    neg = np.minimum(z, 0.0)
    pos = np.maximum(z, 0.0)
    return np.where(z < 0, neg / b - math.log(2.0), np.log1p(-0.5 * np.exp(-pos / b)))


def laplace_logcdf_scalar(z: float, b: float) -> float:
    """:func:`laplace_logcdf` of one float, in ``math`` arithmetic: for an integrand that quadrature
    calls one point at a time, where numpy's per-call overhead would be most of the cost."""
    return z / b - math.log(2.0) if z < 0 else math.log1p(-0.5 * math.exp(-z / b))


def laplace_logsf(z: np.ndarray, b: float) -> np.ndarray:
    """log P(L >= z) for L ~ Lap(0, b) (symmetry: logcdf(-z))."""
    return laplace_logcdf(-np.asarray(z, dtype=float), b)


def expon_logpdf(z: np.ndarray, b: float) -> np.ndarray:
    """log density of the one-sided exponential with mean b at z (-inf for z < 0)."""
    z = np.asarray(z, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(z >= 0, -np.maximum(z, 0.0) / b - math.log(b), -np.inf)


def expon_logcdf(z: np.ndarray, b: float) -> np.ndarray:
    """log P(E <= z) for E ~ Exp(mean b) (-inf for z <= 0)."""
    z = np.asarray(z, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(z > 0, np.log(-np.expm1(-np.maximum(z, 0.0) / b)), -np.inf)


def log_laplace_interval(a: np.ndarray, b: np.ndarray, lam: float) -> np.ndarray:
    """log P(a <= L < b) for L ~ Lap(0, λ), a < b (either may be infinite), stable in the tails."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        width = b - a
        right = math.log(0.5) - a / lam + np.log1p(-np.exp(-width / lam))  # 0 <= a < b
        left = math.log(0.5) + b / lam + np.log1p(-np.exp(-width / lam))  # a < b <= 0
        mid = np.log1p(-0.5 * np.exp(np.minimum(a, 0) / lam) - 0.5 * np.exp(-np.maximum(b, 0) / lam))
    out = np.where(a >= 0, right, np.where(b <= 0, left, mid))
    return np.where(b > a, out, -np.inf)


# --------------------------------------------------------------------------- sympy


def sym_laplace_pdf(z: sp.Expr, b: sp.Expr) -> sp.Expr:
    """exp(-|z|/b) / (2b)."""
    return sp.exp(-sp.Abs(z) / b) / (2 * b)


def sym_laplace_cdf(z: sp.Expr, b: sp.Expr) -> sp.Expr:
    """P(Lap(0, b) <= z) = (1 + sign(z)(1 - exp(-|z|/b)))/2 (no Piecewise: products of many
    Piecewise factors make sympy's printing and Integral construction exponentially slow)."""
    return (1 + sp.sign(z) * (1 - sp.exp(-sp.Abs(z) / b))) / 2


# --------------------------------------------------------------------------- quadrature


def integrate_line(
    fn: Callable[[float], float], kinks: Iterable[float], lo: float = -math.inf, hi: float = math.inf
) -> float:
    """``∫_lo^hi fn`` by adaptive quadrature (scipy.integrate.quad), split at the ``kinks`` of the
    integrand (where it is not smooth) so each piece is smooth; infinite ends are integrated as
    tails from the outermost kink. Tolerance: relative 1e-11, absolute 1e-15 per piece."""
    from scipy import integrate  # imported when used: building a mechanism needs none of scipy

    pts = sorted({float(k) for k in kinks if lo < k < hi})
    edges = [lo] + pts + [hi]
    total = 0.0
    for a, b in zip(edges[:-1], edges[1:]):
        if b <= a:
            continue
        val, _ = integrate.quad(fn, a, b, epsabs=1e-15, epsrel=1e-11, limit=400)
        total += val
    return total


def integrate_line_vec(
    fn: Callable[[float], np.ndarray], kinks: Iterable[float], lo: float = -math.inf, hi: float = math.inf
) -> np.ndarray | None:
    """Vector-valued :func:`integrate_line`: ``fn(r)`` returns an array (e.g. one entry per output
    pattern) and every entry is integrated at once (scipy.integrate.quad_vec, relative 1e-11,
    absolute 1e-15 per piece, split at the kinks). None when ``hi <= lo`` (no piece to integrate)."""
    from scipy import integrate

    pts = sorted({float(k) for k in kinks if lo < k < hi})
    edges = [lo] + pts + [hi]
    total: np.ndarray | None = None
    for a, b in zip(edges[:-1], edges[1:]):
        if b <= a:
            continue
        val, _ = integrate.quad_vec(fn, a, b, epsabs=1e-15, epsrel=1e-11, limit=2000)
        total = val if total is None else total + val
    return total


def gauss_legendre_line(
    log_fn: Callable[[np.ndarray], np.ndarray],
    kinks: Iterable[float],
    *,
    step: float,
    tail: float,
    lo: float = -math.inf,
    hi: float = math.inf,
    nodes: int = 24,
) -> np.ndarray:
    """``∫_lo^hi exp(log_fn(r)) dr`` for a vectorised ``log_fn`` (``r`` of shape (R,) -> logs of
    shape (..., R), e.g. one row per output pattern), all rows at once.

    The line is cut at the ``kinks`` (where the integrand is not smooth) and every smooth piece is
    cut again into pieces of length <= ``step``, each integrated by ``nodes``-point Gauss-Legendre.
    ``step`` must be at most the smallest length scale of the integrand (the noise scales): on such
    a piece an exponential ``e^{r/b}`` is integrated to ~1e-40 relative error. Infinite ends are
    truncated ``tail`` beyond the outermost kink; ``tail = 45 b`` for an integrand bounded by a
    Laplace(b) density leaves out at most ``e^{-45}`` of mass."""
    pts = sorted({float(k) for k in kinks if lo < k < hi})
    if not pts:
        pts = [0.0] if lo < 0.0 < hi else [lo if math.isfinite(lo) else hi]
    a = lo if math.isfinite(lo) else pts[0] - tail
    b = hi if math.isfinite(hi) else pts[-1] + tail
    edges = sorted({a, b, *[p for p in pts if a < p < b]})
    x_ref, w_ref = np.polynomial.legendre.leggauss(nodes)
    xs, ws = [], []
    for left, right in zip(edges[:-1], edges[1:]):
        pieces = max(1, math.ceil((right - left) / step))
        cuts = np.linspace(left, right, pieces + 1)
        half = (cuts[1:] - cuts[:-1]) / 2
        mid = (cuts[1:] + cuts[:-1]) / 2
        xs.append((mid[:, None] + half[:, None] * x_ref[None, :]).ravel())
        ws.append((half[:, None] * w_ref[None, :]).ravel())
    if not xs:
        return np.asarray(0.0)
    x = np.concatenate(xs)
    w = np.concatenate(ws)
    return np.exp(log_fn(x)) @ w


# --------------------------------------------------------------------------- StatDP input patterns


def statdp_patterns(dim: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The neighbouring query-answer vectors StatDP searches first (Ding et al. 2018, §5.1;
    also DP-Sniper's pattern generator), all at linf distance 1 from each other:
    one above, one below, one above rest below, one below rest above, half-half, all above,
    all below, and the X shape. Each pair is (a, b) with float entries."""
    h = dim // 2
    ones = [1.0] * dim
    pairs = [
        (ones, [0.0] + [1.0] * (dim - 1)),
        (ones, [2.0] + [1.0] * (dim - 1)),
        (ones, [2.0] + [0.0] * (dim - 1)),
        (ones, [0.0] + [2.0] * (dim - 1)),
        (ones, [2.0] * h + [0.0] * (dim - h)),
        (ones, [2.0] * dim),
        (ones, [0.0] * dim),
        ([1.0] * h + [0.0] * (dim - h), [0.0] * h + [1.0] * (dim - h)),
    ]
    return [(np.array(a), np.array(b)) for a, b in pairs]


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
