# ruff: noqa  (a brute-force harness of the red-team round, not project code)
"""T-fold Poisson-subsampled discrete Laplace with shift 1 (two loss atoms per leaf: a binomial law) exactly, in
mpmath, against the certified connect-the-dots composition (both directions), ε from below the bottom of the
support to its top."""

import math
import time
from fractions import Fraction

import mpmath

from dpharness.proofs import _pld, _pld_shift

mpmath.mp.dps = 40


def atoms(t, q, direction):
    tm = mpmath.mpf(t.numerator) / t.denominator
    qm = mpmath.mpf(q.numerator) / q.denominator
    r = mpmath.exp(-1 / tm)
    q0_hi = r / (1 + r)  # Q0(y >= 1) = P(K >= 1)
    pd_hi = 1 / (1 + r)  # PD(y >= 1) = P(K >= 0)
    m_hi = (1 - qm) * q0_hi + qm * pd_hi
    if direction == "fw":  # (M, Q0)
        return [(mpmath.log(m_hi / q0_hi), m_hi), (mpmath.log((1 - m_hi) / (1 - q0_hi)), 1 - m_hi)]
    return [(mpmath.log(q0_hi / m_hi), q0_hi), (mpmath.log((1 - q0_hi) / (1 - m_hi)), 1 - q0_hi)]


def exact_delta(T, at, eps):
    (a, pa), (b, pb) = at
    s = mpmath.mpf(0)
    lpa, lpb = mpmath.log(pa), mpmath.log(pb)
    lg = mpmath.loggamma(T + 1)
    for j in range(T + 1):
        loss = j * a + (T - j) * b
        if loss <= eps:
            continue
        lw = lg - mpmath.loggamma(j + 1) - mpmath.loggamma(T - j + 1) + j * lpa + (T - j) * lpb
        if lw < -120:
            continue
        s += mpmath.exp(lw) * -mpmath.expm1(eps - loss)
    return s


if __name__ == "__main__":
    for t, q, T in [
        (Fraction(1), Fraction(1, 100), 10000),
        (Fraction(1, 2), Fraction(1, 2), 3000),
        (Fraction(3), Fraction(9, 10), 20000),
    ]:
        t0 = time.time()
        pair = _pld_shift.shift_pair("laplace", t, 1, q)
        comp = _pld.self_compose(pair, T)
        for direction, up in (("fw", comp.forward), ("bw", comp.backward)):
            at = atoms(t, q, direction)
            (a, pa), (b, pb) = at
            mean = T * float(a * pa + b * pb)
            sd = math.sqrt(T) * float(abs(a - b)) * math.sqrt(float(pa * pb))
            top = T * float(max(a, b))
            epss = [mean + sd * k for k in range(-3, 13)] + [top - 1e-6, top - float(abs(a - b)) - 1e-6, -0.5, 0.0]
            bad = 0
            for e in epss:
                tr = exact_delta(T, at, mpmath.mpf(e))
                u = up.delta(e)
                if tr > u * (1 + 1e-12):
                    bad += 1
                    print(
                        f"VIOLATION t={t} q={q} T={T} {direction} eps={e!r}: exact {mpmath.nstr(tr, 12)} > upper {u!r}"
                    )
            print(
                f"t={t} q={q} T={T} {direction}: {len(epss)} ε checked, {bad} bad ({time.time() - t0:.0f}s)", flush=True
            )
