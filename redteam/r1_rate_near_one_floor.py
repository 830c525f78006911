"""A Poisson rate q near 1 whose float rounds down (1 − float(q) > 1 − q): _Thresholds.first_y trusted
"x is below every loss" (first y = the segment's start) up to ln(1 − float(q)), above the true ln(1 − q) by
up to 2^-54/(1 − q) (far above its margin for 1 − q < 1e-7), so the backward (add) leaf put its highest
atoms on a lower grid loss: its certified upper δ(ε) fell below the exact δ(ε). A rate whose float is 1.0
raised ValueError (math domain error) in every proof that built its leaf (UNPROVEN: "does not cover").
Run: python redteam/r1_rate_near_one_floor.py  (seconds)."""

import math
import sys
from fractions import Fraction as F

sys.path.insert(0, "redteam")
import mpmath
from bf_pld import delta, shift_law

from dpharness.proofs import _pld_shift

mpmath.mp.dps = 60
w = 2.0**-9
found = 0
for k in range(-10620, -10600):  # grid losses x = k·w near ln(1e-9)
    x = k * w
    ex = mpmath.exp(mpmath.mpf(x))
    # 1 − q just below e^x (ln(1 − q) < x), by less than half an ulp of 1: float(q) = 1 − m·2^-53 with
    # 1 − float(q) above e^x, so ln(1 − float(q)) > x
    one_minus = ex - mpmath.mpf(2) ** -55
    q = 1 - F(mpmath.nstr(one_minus, 50, min_fixed=-100, max_fixed=100))
    if not math.log1p(-float(q)) > x + 2.0**-36 * (8 + abs(x)):
        continue
    pair = _pld_shift.shift_pair("laplace", 1, 44, q, w=w)
    law = shift_law("laplace", 1, 44, q, "bw", R=60)
    e = -x  # the backward loss −x: the atoms with l(y) in [ln(1 − q), x) lie above it
    truth, up = delta(law, e), pair.backward.delta(e)
    if truth > up:
        found += 1
        print(
            f"q = 1 − {float(1 - q)!r} (exact {q}), ε = {e!r}: exact δ_add(ε) = {mpmath.nstr(truth, 12)} > certified {up!r}"
        )
print("violations:", found)
