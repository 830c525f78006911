# ruff: noqa  (a brute-force harness of the red-team round, not project code)
"""A composition of leaves on different grids (coarsened, with their MGF bounds bumped, then cut by Chernoff):
T1 binary randomized responses on the default grid with T2 Poisson-subsampled shift-1 discrete Laplace leaves
built on a finer grid, against the exact law (two atoms per leaf: a product of two binomials, in float64 log
space, far below the tolerance)."""

import math
from fractions import Fraction

import numpy as np
from scipy.special import gammaln, logsumexp

from dpharness.proofs import _pld, _pld_shift


def binom_logpmf(T, lp, lq):
    j = np.arange(T + 1)
    return gammaln(T + 1) - gammaln(j + 1) - gammaln(T - j + 1) + j * lp + (T - j) * lq


def run(T1, L, T2, t, q, w2):
    # RR: loss +L w.p. e^L/(1+e^L), −L otherwise
    pL = L - math.log1p(math.exp(L))
    pnL = -math.log1p(math.exp(L))
    l1 = (2 * np.arange(T1 + 1) - T1) * L
    w1 = binom_logpmf(T1, pL, pnL)
    # subsampled Laplace shift 1, forward (M, Q0): two atoms
    r = math.exp(-1 / t)
    q0_hi, pd_hi = r / (1 + r), 1 / (1 + r)
    m_hi = (1 - q) * q0_hi + q * pd_hi
    a, b = math.log(m_hi / q0_hi), math.log((1 - m_hi) / (1 - q0_hi))
    j = np.arange(T2 + 1)
    l2 = j * a + (T2 - j) * b
    w2l = binom_logpmf(T2, math.log(m_hi), math.log1p(-m_hi))
    loss = (l1[:, None] + l2[None, :]).ravel()
    lw = (w1[:, None] + w2l[None, :]).ravel()
    up = _pld.compose(
        [
            _pld.self_compose(_pld.randomized_response(2, Fraction(L)), T1),
            _pld.self_compose(_pld_shift.shift_pair("laplace", Fraction(t), 1, Fraction(q), w=w2), T2),
        ]
    ).forward
    lo, hi = loss.min(), loss.max()
    bad = 0
    for e in list(np.linspace(lo - 0.5, hi + 0.1, 60)) + [hi - 1e-7, -1.0, 0.0]:
        m = loss > e
        if not m.any():
            tr = 0.0
        else:
            tr = float(np.sum(np.exp(lw[m]) * -np.expm1(e - loss[m])))
        u = up.delta(float(e))
        if tr > u * (1 + 1e-9) + 1e-300:
            bad += 1
            print(f"VIOLATION eps={e!r}: exact {tr!r} > upper {u!r}")
    print(f"T1={T1} L={L} T2={T2} t={t} q={q} w2={w2}: {bad} bad; eps(1e-6) = {up.epsilon(1e-6)}", flush=True)


run(400, 2.0**-5, 400, 1.0, 0.05, 2.0**-13)
run(1000, 3 * 2.0**-11, 2000, 2.0, 0.5, 2.0**-12)
run(50, 0.5, 3000, 0.5, 0.01, 2.0**-14)
