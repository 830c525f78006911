# ruff: noqa  (a brute-force harness of the red-team round, not project code)
import sys, time

sys.path.insert(0, "redteam")
from bf_pld import *
from dpharness.proofs import _pld, _pld_shift
from fractions import Fraction as F

cases = []
# (name, kind, scale, D, q, T)
for kind, scale in [("laplace", F(1, 2)), ("laplace", 3), ("gaussian", F(1, 4)), ("gaussian", 2)]:
    for D in (1, 2, 3):
        for q in (1, F(1, 2), F(1, 100), F(99, 100), F(999999, 1000000)):
            for T in (1, 2):
                cases.append((kind, scale, D, q, T))
t0 = time.time()
for kind, scale, D, q, T in cases:
    for direc in ("fw", "bw"):
        base = shift_law(kind, scale, D, q, direc, R=40)
        law = base
        for _ in range(T - 1):
            law = compose(law, base)
        pair = _pld_shift.shift_pair(kind, scale, D, q)
        if pair is None:
            print("none", kind, scale, D, q)
            continue
        leaf = pair.forward if direc == "fw" else pair.backward
        up = leaf if T == 1 else _pld.self_compose(leaf, T)
        print(kind, scale, D, q, T, direc, flush=True)
        check(f"{kind} {scale} D={D} q={q} T={T} {direc}", law, up, epsgrid(law))
print("done", time.time() - t0)
