# ruff: noqa  (a brute-force harness of the red-team round, not project code)
"""The rounding-up leaves of _pld (discrete Laplace/Gaussian/RR), mixtures on different grids, vs brute force."""

import sys, time

sys.path.insert(0, "redteam")
from bf_pld import *
from dpharness.proofs import _pld, _pld_shift
from fractions import Fraction as F


def dl_law(t, D):
    return shift_law("laplace", t, D, 1, "fw", R=80)


def dg_law(tau2, D):
    return shift_law("gaussian", tau2, D, 1, "fw", R=40)


def rr_law(k, L):
    Lm = mpmath.mpf(L.numerator) / L.denominator if isinstance(L, F) else mpmath.mpf(L)
    den = mpmath.exp(Lm) + k - 1
    out = [(Lm, mpmath.exp(Lm) / den), (-Lm, 1 / den)]
    if k > 2:
        out.append((mpmath.mpf(0), (k - 2) / den))
    return group(out)


t0 = time.time()
cases = []
for t in (F(1, 10), F(1, 3), 1, F(7, 3)):
    for D in (1, 2, 5):
        cases.append((f"DL t={t} D={D}", dl_law(t, D), _pld.discrete_laplace(t, D).forward))
for tau2 in (F(1, 16), F(1, 4), F(1, 2), 3):
    for D in (1, 2, 4):
        cases.append((f"DG tau2={tau2} D={D}", dg_law(tau2, D), _pld.discrete_gaussian(tau2, D).forward))
for k, L in ((2, F(1, 3)), (3, F(5, 2)), (10, F(1, 1000)), (2, F(20))):
    cases.append((f"RR k={k} L={L}", rr_law(k, L), _pld.randomized_response(k, L).forward))
for name, law, up in cases:
    check(name, law, up, epsgrid(law))
print("leaves ok", time.time() - t0, flush=True)
# mixtures on different grids: a shift-pair leaf on a finer grid with a DL leaf on the default grid, etc.
mix = [
    (
        "DL(1/3,2) x SP-lap(1,1,q=1/2,w=2^-13)",
        dl_law(F(1, 3), 2),
        _pld.discrete_laplace(F(1, 3), 2).forward,
        shift_law("laplace", 1, 1, F(1, 2), "fw", R=60),
        _pld_shift.shift_pair("laplace", 1, 1, F(1, 2), w=2.0**-13).forward,
    ),
    (
        "DG(1/2,1) x SP-gauss(2,2,q=1/10,w=2^-9) ",
        dg_law(F(1, 2), 1),
        _pld.discrete_gaussian(F(1, 2), 1).forward,
        shift_law("gaussian", 2, 2, F(1, 10), "fw", R=40),
        _pld_shift.shift_pair("gaussian", 2, 2, F(1, 10), w=2.0**-9).forward,
    ),
    (
        "RR(3,5/2) x SP-lap(1/2,3,q=99/100) bw",
        rr_law(3, F(5, 2)),
        _pld.randomized_response(3, F(5, 2)).forward,
        shift_law("laplace", F(1, 2), 3, F(99, 100), "bw", R=60),
        _pld_shift.shift_pair("laplace", F(1, 2), 3, F(99, 100)).backward,
    ),
]
for name, la, ua, lb, ub in mix:
    law = compose(la, lb)
    up = _pld.compose([ua, ub])
    check(name, law, up, epsgrid(law))
    law3 = compose(law, la)
    up3 = _pld.compose([up, ua])
    check(name + " x3", law3, up3, epsgrid(law3))
print("mixtures ok", time.time() - t0, flush=True)
