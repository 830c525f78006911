"""Exact probabilities of sparse-vector answer patterns, for confirming counterexamples.

Conditional on the threshold noise ρ = r the answers are independent, so

    P(a) = ∫ f_ρ(r) Π_{a_i=⊤} S_ν(T + r − q_i) Π_{a_i=⊥} F_ν(T + r − q_i) dr      (r <= cap)

with f_ρ the Lap(b_ρ) density, F_ν/S_ν the Lap(b_ν) cdf/survival function (indicators when there
is no query noise). On each interval between the breakpoints {0} ∪ {q_i − T} every factor is
``c0 + c1·e^{β + α r}``, so the integrand is a finite sum ``Σ c e^{β + α r}`` and integrates in
closed form: ``c (e^{β + α b} − e^{β + α a})/α`` (``c e^β (b − a)`` for α = 0).

All arithmetic is exact: a number is an "exp-polynomial" ``Σ_k c_k e^{β_k}`` with rational
``c_k, β_k`` (Python Fractions), so the result is a short closed form; :func:`to_sympy` gives the
sympy expression (for the kernel's exact sign decision) and :func:`to_mpf` a high-precision value
(for screening candidates)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Sequence

import mpmath
import sympy as sp

__all__ = ["pattern_probability", "to_sympy", "to_mpf", "log_mpf"]

TOP, BOT, NOT_ANSWERED = 1, 0, -1

ExpPoly = dict  # {β: c} meaning Σ c e^β


def _add(p: ExpPoly, q: ExpPoly, sign: int = 1) -> ExpPoly:
    out = dict(p)
    for b, c in q.items():
        out[b] = out.get(b, 0) + sign * c
    return {b: c for b, c in out.items() if c != 0}


def _mulpoly(p: ExpPoly, q: ExpPoly) -> ExpPoly:
    out: ExpPoly = {}
    for b1, c1 in p.items():
        for b2, c2 in q.items():
            out[b1 + b2] = out.get(b1 + b2, 0) + c1 * c2
    return {b: c for b, c in out.items() if c != 0}


def _mul(p: dict, q: dict) -> dict:
    """Product of integrands {α: ExpPoly}."""
    out: dict = {}
    for a1, c1 in p.items():
        for a2, c2 in q.items():
            out[a1 + a2] = _add(out.get(a1 + a2, {}), _mulpoly(c1, c2))
    return out


def to_sympy(p: ExpPoly) -> sp.Expr:
    return sp.Add(
        *[
            sp.Rational(c.numerator, c.denominator) * sp.exp(sp.Rational(b.numerator, b.denominator))
            for b, c in sorted(p.items())
        ]
    )


def to_mpf(p: ExpPoly, dps: int = 60) -> Any:
    with mpmath.workdps(dps):
        return mpmath.fsum(
            mpmath.mpf(c.numerator) / c.denominator * mpmath.exp(mpmath.mpf(b.numerator) / b.denominator)
            for b, c in p.items()
        )


def log_mpf(p: ExpPoly, dps: int = 60) -> Any:
    """ln P at high precision (-inf for an exact zero)."""
    with mpmath.workdps(dps):
        v = to_mpf(p, dps)
        return mpmath.ninf if v <= 0 else mpmath.log(v)


def pattern_probability(
    q: Sequence, pattern: Sequence[int], T: Any, b_rho: Any, b_nu: Any | None, *, cap: Any = None
) -> ExpPoly:
    """P(pattern) (restricted to ρ <= cap when given) for answers ``q`` as an exact exp-polynomial;
    ``b_nu`` None or 0 means no query noise. Numbers are read exactly (floats as their binary value)."""
    F = Fraction
    qs = [F(x) for x in q]
    T, br = F(T), F(b_rho)
    bn = None if b_nu in (None, 0) else F(b_nu)
    used = [(i, a) for i, a in enumerate(pattern) if a in (TOP, BOT)]
    lo, hi = None, (None if cap is None else F(cap))  # r-range allowed by indicator factors and the cap
    if bn is None:
        for i, a in used:
            cut = qs[i] - T
            if a == TOP:  # q_i >= T + r  <=>  r <= cut
                hi = cut if hi is None else min(hi, cut)
            else:  # q_i < T + r   <=>  r > cut
                lo = cut if lo is None else max(lo, cut)
        if lo is not None and hi is not None and lo >= hi:
            return {}
    cuts = {F(0), *([qs[i] - T for i, _ in used] if bn is not None else [])}
    inner = sorted(x for x in cuts if (lo is None or x > lo) and (hi is None or x < hi))
    edges: list = [lo] + inner + [hi]  # None = -inf / +inf
    total: ExpPoly = {}
    half = F(1, 2)
    for a, b in zip(edges[:-1], edges[1:]):
        if a is not None and b is not None and a >= b:
            continue
        mid = (a + b) / 2 if a is not None and b is not None else (b - 1 if a is None else a + 1)
        sgn = -1 if mid >= 0 else 1  # f_ρ = e^{∓r/b_ρ}/(2b_ρ)
        poly = {sgn / br: {F(0): 1 / (2 * br)}}
        if bn is not None:
            for i, ans in used:
                z0 = T - qs[i]  # z = r + z0
                if mid + z0 <= 0:  # F(z) = e^{z/bn}/2
                    Fz = {1 / bn: {z0 / bn: half}}
                    Sz = {F(0): {F(0): F(1)}, 1 / bn: {z0 / bn: -half}}
                else:  # S(z) = e^{-z/bn}/2
                    Sz = {-1 / bn: {-z0 / bn: half}}
                    Fz = {F(0): {F(0): F(1)}, -1 / bn: {-z0 / bn: -half}}
                poly = _mul(poly, Sz if ans == TOP else Fz)
        for alpha, coef in poly.items():
            if alpha == 0:
                if a is None or b is None:
                    raise ValueError("divergent integral (constant term on an infinite interval)")
                total = _add(total, {be: c * (b - a) for be, c in coef.items()})
                continue
            if (b is None and alpha > 0) or (a is None and alpha < 0):
                raise ValueError("divergent integral")
            if b is not None:
                total = _add(total, {be + alpha * b: c / alpha for be, c in coef.items()})
            if a is not None:
                total = _add(total, {be + alpha * a: c / alpha for be, c in coef.items()}, -1)
    return total
