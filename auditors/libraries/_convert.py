"""Proved conversion of a zero-concentrated-DP claim (ρ-zCDP) into an (ε, δ)-DP claim.

Two bounds, each proved, and the smaller is returned (any valid bound may be taken, so the
minimum of two valid bounds is valid):

* Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020),
  Proposition 12 / Corollary 13: a mechanism that is (α, τ)-Rényi-DP is (ε, δ)-DP for
  δ = exp((α−1)(τ−ε)) / (α−1) · (1 − 1/α)^α. ρ-zCDP is (α, αρ)-RDP for every α > 1, so solving
  for ε,

      ε(α) = αρ + ( ln(1/δ) + (α−1)·ln(1 − 1/α) − ln α ) / (α − 1),   for every α > 1,

  and ε = inf_{α>1} ε(α). Every α gives a valid ε, so an inexact minimisation can only return a
  larger (still valid) ε, never an invalid one.
* Bun & Steinke, "Concentrated Differential Privacy: Simplifications, Extensions, and Lower
  Bounds" (TCC 2016), Proposition 1.3: ε = ρ + 2·sqrt(ρ·ln(1/δ)).
"""

from __future__ import annotations

import math

from dpharness import _validate as _v
from dpharness.errors import ParameterError

__all__ = ["zcdp_to_approx"]


def zcdp_to_approx(rho: float, delta: float) -> float:
    """The ε such that ρ-zCDP implies (ε, δ)-DP (CKS 2020 Cor. 13, or Bun–Steinke 2016 Prop. 1.3 if smaller).

    ``rho`` >= 0 (ρ = 0: ε = 0), ``delta`` in (0, 1). See the module docstring for the formulas."""
    rho = float(_v.nonnegative("rho", rho))
    delta = float(_v.probability("delta", delta, open_left=True, open_right=True))
    return _zcdp_to_approx(rho, delta)


def _cks_epsilon(alpha: float, rho: float, log_inv_delta: float) -> float:
    # ε(α) of CKS 2020 Cor. 13; log1p(-1/α) is ln(1 − 1/α) computed accurately near α = ∞
    return alpha * rho + (log_inv_delta + (alpha - 1.0) * math.log1p(-1.0 / alpha) - math.log(alpha)) / (alpha - 1.0)


def _zcdp_to_approx(rho: float, delta: float) -> float:
    if rho == 0.0:
        return 0.0
    log_inv_delta = math.log(1.0 / delta)
    bun_steinke = rho + 2.0 * math.sqrt(rho * log_inv_delta)
    # ε(α) is convex in α on (1, ∞) here; golden-section search on ln(α − 1), then a safety grid
    from scipy.optimize import minimize_scalar  # deferred: scipy is only needed when converting

    def f(t: float) -> float:
        alpha = 1.0 + math.exp(t)
        try:
            return _cks_epsilon(alpha, rho, log_inv_delta)
        except (OverflowError, ValueError, ZeroDivisionError):
            return math.inf

    res = minimize_scalar(f, bounds=(-30.0, 30.0), method="bounded", options={"xatol": 1e-10})
    grid = min(f(t / 4.0) for t in range(-120, 121))
    cks = min(float(res.fun), grid)
    eps = min(cks, bun_steinke)
    if not math.isfinite(eps) or eps < 0:
        raise ParameterError(f"rho={rho!r}, delta={delta!r} gave no finite ε; pass a finite ρ and δ in (0, 1).")
    return eps
