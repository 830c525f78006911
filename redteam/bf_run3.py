# ruff: noqa  (a brute-force harness of the red-team round, not project code)
"""Extreme Poisson rates of the connect-the-dots leaves vs brute force."""

import sys, time

sys.path.insert(0, "redteam")
from bf_pld import *
from dpharness.proofs import _pld, _pld_shift
from fractions import Fraction as F

mpmath.mp.dps = 60
t0 = time.time()
for kind, scale, D in (("laplace", F(1, 2), 3), ("laplace", 5, 1), ("gaussian", 2, 1), ("gaussian", F(9, 10), 3)):
    for q in (
        F(1, 10**12),
        F(1, 10**6),
        1 - F(1, 10**6),
        1 - F(1, 10**12),
        1 - F(1, 2**50),
        1 - F(1, 2**60),
        1 - F(1, 10**20),
    ):
        pair = _pld_shift.shift_pair(kind, scale, D, q)
        if pair is None:
            print("none", kind, scale, D, q)
            continue
        for direc in ("fw", "bw"):
            base = shift_law(kind, scale, D, q, direc, R=40)
            leaf = pair.forward if direc == "fw" else pair.backward
            check(f"{kind} {scale} D={D} q={float(q)!r} {direc}", base, leaf, epsgrid(base))
            law2 = compose(base, base)
            check(f"{kind} {scale} D={D} q={float(q)!r} {direc} x2", law2, _pld.self_compose(leaf, 2), epsgrid(law2))
        print(kind, scale, D, float(q), "done", round(time.time() - t0), flush=True)
