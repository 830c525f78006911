# ruff: noqa  (a brute-force harness of the red-team round, not project code)
"""End to end: repeat(T, poisson_sample(q) >> count >> discrete_laplace(scale=t)) has two loss atoms per round
(shift 1), so its exact δ(ε) is a binomial sum. Above 1 000 rounds the prover also tries finer grids; its
certified ε(δ) must stay at or above the exact one, and a claim just below the exact ε must not be PROVED."""

import sys
from fractions import Fraction

import mpmath

sys.path.insert(0, "redteam")
from bf_binom_shift import atoms, exact_delta  # noqa: E402

import dpharness
from dpharness import AddRemove, ApproxDP, RealInterval, parts as dp, prove

mpmath.mp.dps = 40


def exact_eps(T, t, q, delta):
    lo, hi = mpmath.mpf(0), mpmath.mpf(1000)
    for _ in range(70):
        mid = (lo + hi) / 2
        d = max(exact_delta(T, atoms(t, q, "fw"), mid), exact_delta(T, atoms(t, q, "bw"), mid))
        lo, hi = (mid, hi) if d > delta else (lo, mid)
    return hi


for T, t, q, delta in [(3000, Fraction(1), Fraction(3, 10), 1e-6), (1500, Fraction(2), Fraction(1, 20), 1e-5)]:
    truth = float(exact_eps(T, t, q, mpmath.mpf(delta)))

    def mech(eps):
        return dp.mechanism(
            name="rounds",
            records=RealInterval(0, 1),
            relation=AddRemove(),
            steps=dp.repeat(T, dp.poisson_sample(q) >> dp.count() >> dp.discrete_laplace(scale=t)),
            claim=ApproxDP(eps, delta),
        )

    ans = dpharness.epsilon(mech(truth * 2), delta=delta)
    below = prove(mech(truth * (1 - 1e-6)))
    print(
        f"T={T} t={t} q={q} δ={delta}: exact ε {truth:.8f}, certified {ans.value:.8f} ({ans.value / truth - 1:+.4%}); "
        f"claim 1e-6 below the exact ε: {below.verdict.value}",
        flush=True,
    )
