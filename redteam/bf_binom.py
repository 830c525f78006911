# ruff: noqa  (a brute-force harness of the red-team round, not project code)
"""Exact δ(ε) of T-fold binary randomized response (loss ±L, binomial) vs the certified upper PLD."""

import math, sys, time
from fractions import Fraction
import mpmath
from dpharness.proofs import _pld

mpmath.mp.dps = 30


def exact_delta(T, L, eps, jrange):
    Lm = mpmath.mpf(L.numerator) / L.denominator
    p = mpmath.exp(Lm) / (1 + mpmath.exp(Lm))
    lp, lq = mpmath.log(p), mpmath.log(1 - p)
    s = mpmath.mpf(0)
    for j in range(*jrange):
        loss = (2 * j - T) * Lm
        if loss <= eps:
            continue
        lw = mpmath.loggamma(T + 1) - mpmath.loggamma(j + 1) - mpmath.loggamma(T - j + 1) + j * lp + (T - j) * lq
        s += mpmath.exp(lw) * -mpmath.expm1(eps - loss)
    return s


def run(T, m, neps=25):
    L = Fraction(m, 2**11)
    up = _pld.self_compose(_pld.randomized_response(2, L), T) if T > 1 else _pld.randomized_response(2, L)
    pf = math.exp(float(L)) / (1 + math.exp(float(L)))
    mu, sd = T * pf, math.sqrt(T * pf * (1 - pf)) + 1
    jr = (max(0, int(mu - 45 * sd)), min(T, int(mu + 45 * sd)) + 1)
    top = float((2 * jr[1] - 2 - T) * L)
    bot = float((2 * jr[0] - T) * L)
    epss = [bot - 0.1 + (top - bot + 0.2) * k / neps for k in range(neps + 1)]
    epss += [top - 1e-9, top - float(L) * 2 - 1e-9, -1.0, 0.0]
    bad = 0
    for e in epss:
        t = exact_delta(T, L, mpmath.mpf(e), jr)
        u = up.fw.delta(e) if hasattr(up, "fw") else up.forward.delta(e)
        if t > u * (1 + 1e-12) + 1e-300:
            bad += 1
            print(f"VIOLATION T={T} L={L} eps={e!r}: exact {mpmath.nstr(t, 15)} > upper {u!r}", flush=True)
    print(f"T={T} L={L} checked {len(epss)} eps, {bad} bad; eps(1e-5)={up.epsilon(1e-5)}", flush=True)


if __name__ == "__main__":
    for T, m in [(1, 1), (3, 7), (10, 2048), (1000, 64), (10000, 8), (10000, 1), (100000, 4), (100000, 1)]:
        t0 = time.time()
        run(T, m)
        print("  ", round(time.time() - t0, 1), "s", flush=True)
