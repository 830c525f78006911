# ruff: noqa  (a brute-force harness of the red-team round, not project code)
"""Brute-force exact δ(ε) of small compositions vs the certified upper PLD."""

import itertools, math, sys
from fractions import Fraction
import mpmath
from dpharness.proofs import _pld, _pld_shift

mpmath.mp.dps = 40


def noise_pmf(kind, scale, ymin, ymax):
    s = mpmath.mpf(Fraction(scale).numerator) / Fraction(scale).denominator
    if kind == "laplace":
        f = lambda y: mpmath.exp(-abs(y) / s)
    else:
        f = lambda y: mpmath.exp(-(mpmath.mpf(y) ** 2) / (2 * s))
    R = 4000
    Z = mpmath.fsum(f(y) for y in range(-R, R + 1))
    return {y: f(y) / Z for y in range(ymin, ymax + 1)}


def shift_law(kind, scale, D, q, direction="fw", R=400):
    q = mpmath.mpf(Fraction(q).numerator) / Fraction(q).denominator
    pm = noise_pmf(kind, scale, -R - D, R + D)
    law = {}
    for y in range(-R, R + D + 1):
        q0 = pm.get(y, 0)
        pd = pm.get(y - D, 0)
        M = (1 - q) * q0 + q * pd
        P, Q = (M, q0) if direction == "fw" else (q0, M)
        if P == 0:
            continue
        L = mpmath.inf if Q == 0 else mpmath.log(P / Q)
        law[y] = (L, P)
    return group(law.values())


def group(items):
    d = {}
    for L, p in items:
        k = "inf" if L == mpmath.inf else mpmath.nstr(L, 25)
        if k in d:
            d[k] = (d[k][0], d[k][1] + p)
        else:
            d[k] = (L, p)
    return list(d.values())


def compose(a, b, cut=mpmath.mpf(10) ** -35):
    out = []
    for La, pa in a:
        for Lb, pb in b:
            p = pa * pb
            if p < cut:
                continue
            out.append((La + Lb, p))
    return group(out)


def delta(law, eps):
    eps = mpmath.mpf(eps)
    s = mpmath.mpf(0)
    for L, p in law:
        if L > eps:
            s += p * (1 - mpmath.exp(eps - L)) if L != mpmath.inf else p
    return s


def check(name, law, upper, epss):
    worst = None
    for e in epss:
        t = delta(law, e)
        u = upper.delta(e)
        if t > u * (1 + 1e-9) + 1e-30:
            print(f"  VIOLATION {name} eps={e}: truth {mpmath.nstr(t, 12)} > upper {u!r}")
            worst = e
        r = float(t) / u if u else 1
    return worst


def epsgrid(law):
    fin = [float(L) for L, p in law if L != mpmath.inf]
    lo, hi = min(fin), max(fin)
    g = [lo - 0.5 + (hi - lo + 1) * k / 200 for k in range(201)]
    # also near each atom
    g += [L + d for L in fin[:300] for d in (-1e-9, 0, 1e-9)]
    return g
