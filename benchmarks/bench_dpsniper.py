"""Reproduce DP-Sniper's comparison at claimed ε = 0.1 and audit the same mechanisms with dpharness.

DP-Sniper (Bichsel, Steffen, Bogunovic and Vechev, IEEE S&P 2021) reports certified lower bounds
(logistic-regression attack, 90% confidence) at ε = 0.1 for mechanisms from StatDP (Ding et al.,
CCS 2018) and Lyu et al. (VLDB 2017). Its budget for one mechanism: per candidate input pair
n_train + n + n_check = 3 × 10.7·10^6 samples a side to build and check the attack, then
n_final = 2·10^8 samples a side to certify the best one (its DDConfig defaults).

Here every mechanism is audited by :func:`dpharness.auditors.audit` on the input pair DP-Sniper's
published run found best (its reference log of the SP 2021 evaluation; SVT1: see below), at DP-Sniper's 90%
confidence with two certified events (``max_events=2``), with ``ideal_numerics=True`` (the textbook float mechanisms are audited as
the mathematical mechanisms, as DP-Sniper's main evaluation does: no floating-point-structure events).
The mechanisms are written here as numpy callables equivalent to DP-Sniper's definitions (the
catalog's grid versions differ in granularity and in their parameters' conventions):

* Laplace: x + Lap(1/ε), pair 1 vs 2.
* NoisyHist1 / NoisyHist2: histogram + Lap(1/ε) (NoisyHist2: Lap(ε), the bug), pair [0,1,1,1,1] vs [1,1,1,1,1].
* ReportNoisyMax1: argmax of q + Lap(2/ε); ReportNoisyMax3: max value of q + Lap(2/ε);
  pairs [1,1,1,1,1] vs [0,2,2,2,2] and [0,0,0,0,0] vs [1,1,1,1,1].
* SVT1 (Lyu et al. Alg. 1, c = 1, T = 0.5, ρ ~ Lap(2/ε), ν ~ Lap(4c/ε)), SVT4 (Alg. 4, c = 1, T = 1,
  ρ ~ Lap(4/ε), ν ~ Lap(4/(3ε))), 10 queries, outputs 1 (⊤), 0 (⊥), -1 (stopped). DP-Sniper's pairs
  ([0]*5+[1]*5 vs [1]*5+[0]*5 and [1]*10 vs [2]*5+[0]*5) have no event above 0.0878 and 0.1725.
  SVT1 is audited on [3]*9+[6] vs [4]*9+[5] (StatDP's "one below rest above"), the best StatDP
  pattern within DP-Sniper's input domain by its exact pattern law (``--screen``); SVT4 on
  DP-Sniper's pair (the screen's best, [3]*10 vs [2]*8+[4]*2, has two patterns of nearly equal
  likelihood ratio that 4·10^6 training samples do not tell apart reliably).
* RAPPOR (Erlingsson et al. 2014, steps 1-3): 20-bit Bloom filter, 4 hashes, f = 0.75, p = 0.45,
  q = 0.55; value 0 sets bits {0, 11, 18} and value 1 bits {3, 10, 13} (DP-Sniper's MurmurHash3
  positions, mmh3.hash(str(v), seed=i) % 20); pair 1 vs 0.
* LaplaceParallel: 20 independent Laplace mechanisms at ε = 0.005 each on the same input, pair 1 vs 0.

Run: ``python benchmarks/bench_dpsniper.py [--only NAME ...] [--scale F]``; writes
``benchmarks/results/dpsniper.md``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from dpharness.auditors import audit

EPS = 0.1
MAX_EVENTS = 2  # events certified per audit: fewer events, a smaller Bonferroni penalty
CONFIDENCE = 0.9  # DP-Sniper's confidence (its DDConfig default), for an equal comparison


# --------------------------------------------------------------------------- DP-Sniper's mechanisms


def laplace(x, size, rng):
    return float(np.asarray(x).item()) + rng.laplace(0.0, 1 / EPS, size)


def noisy_hist1(x, size, rng):
    x = np.asarray(x, float)
    return x + rng.laplace(0.0, 1 / EPS, (size, len(x)))


def noisy_hist2(x, size, rng):
    x = np.asarray(x, float)
    return x + rng.laplace(0.0, EPS, (size, len(x)))


def report_noisy_max1(x, size, rng):
    x = np.asarray(x, float)
    return np.argmax(x + rng.laplace(0.0, 2 / EPS, (size, len(x))), axis=1)


def report_noisy_max3(x, size, rng):
    x = np.asarray(x, float)
    return np.max(x + rng.laplace(0.0, 2 / EPS, (size, len(x))), axis=1)


def _svt(x, size, rng, *, rho_scale, nu_scale, t, c=1):
    x = np.asarray(x, float)
    rho = rng.laplace(0.0, rho_scale, (size, 1))
    above = (x + rng.laplace(0.0, nu_scale, (size, len(x)))) >= rho + t
    out = above.astype(np.int8)
    answered = np.cumsum(above, axis=1)
    stopped = np.zeros_like(above)
    stopped[:, 1:] = answered[:, :-1] >= c  # after the c-th ⊤ every later query is not answered
    out[stopped] = -1
    return out


def svt1(x, size, rng):
    eps1 = EPS / 2
    eps2 = EPS - eps1
    return _svt(x, size, rng, rho_scale=1 / eps1, nu_scale=2 * 1 / eps2, t=0.5)


def svt4(x, size, rng):
    eps1 = EPS / 4
    eps2 = EPS - eps1
    return _svt(x, size, rng, rho_scale=1 / eps1, nu_scale=1 / eps2, t=1.0)


_RAPPOR_BITS = {0: (0, 11, 18), 1: (3, 10, 13)}


def rappor(x, size, rng, *, f=0.75, p=0.45, q=0.55, k=20):
    bloom = np.zeros(k, bool)
    bloom[list(_RAPPOR_BITS[int(np.asarray(x).item())])] = True
    # permanent RR keeps the Bloom bit w.p. 1 - f, else sets it to 1 or 0 w.p. f/2 each; instantaneous RR
    # reports 1 w.p. q if that bit is 1, w.p. p if 0. Bits are independent, so each reported bit is one
    # Bernoulli draw with P(1) = q·P(PRR bit = 1) + p·P(PRR bit = 0) (the same output law, one uniform a bit)
    prr_one = np.where(bloom, 1 - f / 2, f / 2)
    p_one = q * prr_one + p * (1 - prr_one)
    return (rng.random((size, k)) < p_one).astype(np.uint8)


def laplace_parallel(x, size, rng, *, n=20, eps=0.005):
    return float(np.asarray(x).item()) + rng.laplace(0.0, 1 / eps, (size, n))


@dataclass(frozen=True)
class Case:
    name: str
    dpsniper: float  # DP-Sniper's published certified bound (90% confidence)
    true_eps: float | None  # the largest ln P_D(S)/P_D'(S) on this pair where known (None: not computed)
    fn: Callable
    data: Any
    neighbor: Any
    samples: int  # our samples a side (training + certification)


CASES = [
    Case("Laplace", 0.0968, 0.1, laplace, 1.0, 2.0, 4_000_000),
    Case("NoisyHist1", 0.0978, 0.1, noisy_hist1, [0, 1, 1, 1, 1], [1, 1, 1, 1, 1], 20_000_000),
    Case("NoisyHist2", 4.602, 10.0, noisy_hist2, [0, 1, 1, 1, 1], [1, 1, 1, 1, 1], 2_000_000),
    Case("ReportNoisyMax1", 0.0923, 0.0946, report_noisy_max1, [1, 1, 1, 1, 1], [0, 2, 2, 2, 2], 30_000_000),
    Case("ReportNoisyMax3", 0.2478, 0.25, report_noisy_max3, [0, 0, 0, 0, 0], [1, 1, 1, 1, 1], 200_000_000),
    # SVT1: DP-Sniper's best pair ([0]*5+[1]*5 vs [1]*5+[0]*5) reaches only 0.0878 on any event;
    # `--screen` ranks StatDP-pattern pairs within DP-Sniper's input domain [-10, 10]^10 by their
    # exact pattern probabilities, and this is its best. SVT4: DP-Sniper's pair (its best pattern,
    # ratio 0.1725, stands well apart from the next, so training picks it reliably).
    Case("SVT1", 0.0858, 0.0988, svt1, [3] * 9 + [6], [4] * 9 + [5], 50_000_000),
    Case("SVT4", 0.1687, 0.1725, svt4, [1] * 10, [2] * 5 + [0] * 5, 200_000_000),
    Case("RAPPOR", 0.293, 6 * math.log(0.5125 / 0.4875), rappor, 1, 0, 40_000_000),
    Case("LaplaceParallel", 0.0350, 0.1, laplace_parallel, 1.0, 0.0, 30_000_000),
]


# --------------------------------------------------------------------------- exact SVT screen


def _svt_patterns(x, *, rho_scale, nu_scale, t, grid=np.linspace(-500, 500, 20001)):
    """Exact probabilities of the c = 1 SVT output patterns (⊥^i ⊤ then stopped, i = 0..n-1; all ⊥),
    by integrating over the threshold noise ρ on a grid (trapezoid rule)."""
    x = np.asarray(x, float)
    dens = np.exp(-np.abs(grid) / rho_scale) / (2 * rho_scale)
    u = grid[:, None] + t - x[None, :]
    below = np.where(u < 0, 0.5 * np.exp(np.minimum(u, 0) / nu_scale), 1 - 0.5 * np.exp(-np.maximum(u, 0) / nu_scale))
    before = np.cumprod(np.hstack([np.ones((len(grid), 1)), below]), axis=1)
    out = np.empty(len(x) + 1)
    out[:-1] = np.trapezoid(dens[:, None] * before[:, :-1] * (1 - below), grid, axis=0)
    out[-1] = np.trapezoid(dens * before[:, -1], grid)
    return out


def _projected_bound(pa, pb, n, z=1.96):
    best = 0.0
    for num, den in ((pa, pb), (pb, pa)):
        order = np.argsort(-(np.log(num) - np.log(den)))
        cn, cd = np.clip(np.cumsum(num[order]), 0, 1), np.clip(np.cumsum(den[order]), 0, 1)
        lo, hi = cn - z * np.sqrt(cn * (1 - cn) / n), cd + z * np.sqrt(cd * (1 - cd) / n)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.nan_to_num(np.log(np.clip(lo, 1e-300, None) / hi), nan=-np.inf)
        best = max(best, float(v.max()))
    return best


def screen_svt(n=1e8):
    """StatDP patterns (a block of m queries moved one way, the rest the other) with block values on a
    grid of [-10, 10], ranked by the bound an exact pattern event would certify at n samples a side."""
    params = {
        "SVT1": dict(rho_scale=20.0, nu_scale=40.0, t=0.5),
        "SVT4": dict(rho_scale=40.0, nu_scale=1 / 0.075, t=1.0),
    }
    vals = [-10, -6, -3, -1, 0, 1, 3, 6, 10]
    for name, kw in params.items():
        ranked = []
        for m in range(1, 10):
            for u in vals:
                for v in vals:
                    for sgn in (1, -1):
                        a = np.array([u] * m + [v] * (10 - m), float)
                        b = a + np.array([-sgn] * m + [sgn] * (10 - m), float)
                        if b.min() < -10 or b.max() > 10:
                            continue
                        pa, pb = _svt_patterns(a, **kw), _svt_patterns(b, **kw)
                        with np.errstate(divide="ignore"):
                            top = float(np.max(np.abs(np.log(pa) - np.log(pb))))
                        ranked.append((_projected_bound(pa, pb, n), top, a.tolist(), b.tolist()))
        ranked.sort(key=lambda r: -r[0])
        for r in ranked[:3]:
            print(f"{name}: projected {r[0]:.4f} at {n:.0e}, max pattern log ratio {r[1]:.4f}: {r[2]} vs {r[3]}")


def run(case: Case, *, scale: float = 1.0, seed: int = 0, confidence: float = CONFIDENCE):
    samples = max(10_000, int(case.samples * scale))
    t0 = time.perf_counter()
    r = audit(
        case.fn,
        case.data,
        case.neighbor,
        epsilon=EPS,
        samples=samples,
        seed=seed,
        confidence=confidence,
        ideal_numerics=True,
        progress=False,
        max_events=MAX_EVENTS,
    )
    return r, time.perf_counter() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help="case names to run")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every sample budget")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "dpsniper.md"))
    ap.add_argument("--screen", action="store_true", help="rank SVT input pairs by their exact pattern law and exit")
    args = ap.parse_args(argv)
    if args.screen:
        screen_svt()
        return
    rows = []
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        r, secs = run(case, scale=args.scale, seed=args.seed)
        win = "yes" if r.epsilon_lower_bound > case.dpsniper else "no"
        rows.append((case, r, secs, win))
        print(
            f"{case.name:16s} DP-Sniper {case.dpsniper:<7g} ours {r.epsilon_lower_bound:.4f}  "
            f"samples {r.samples:>11,d}  {secs:6.1f} s  higher: {win}\n    {r.witness_description[:220]}",
            flush=True,
        )
    if args.only:
        return
    lines = [
        "# DP-Sniper comparison (claimed ε = 0.1)",
        "",
        "Generated by `python benchmarks/bench_dpsniper.py` "
        f"(seed {args.seed}, {platform.machine()}, {os.cpu_count()} cores). DP-Sniper: its published certified "
        "bounds (logistic regression, 90% confidence, 2·10^8 samples a side to certify plus 3 × 10.7·10^6 a side per "
        "candidate pair to train and check). Ours: `dpharness.auditors.audit` at the same 90% confidence, "
        f"max_events={MAX_EVENTS}, on the pair DP-Sniper found best (SVT1: the best StatDP pattern by the exact "
        "pattern law, `--screen`; see the module docstring); samples = our whole budget a side (events chosen on "
        "min(10%, 4·10^6) of them, the rest certify). True ε: the largest ln P_D(S)/P_D'(S) on that pair (exact where known).",
        "",
        "| mechanism | DP-Sniper bound | ours | true ε | samples a side | seconds | higher |",
        "|---|---|---|---|---|---|---|",
    ]
    for case, r, secs, win in rows:
        true = "—" if case.true_eps is None else f"{case.true_eps:.4g}"
        lines.append(
            f"| {case.name} | {case.dpsniper} | {r.epsilon_lower_bound:.4f} | {true} | {r.samples:,} | "
            f"{secs:.1f} | {win} |"
        )
    lines += [
        "",
        "Notes:",
        "",
        "* Budget: ours at most 2·10^8 samples a side per mechanism, training included; DP-Sniper's is at least "
        "2·10^8 + 3.2·10^7 a side (its final estimate plus one candidate pair's attack; it tries several pairs).",
        "* Events from the learned vector scores (`dpharness.auditors.vector`): NoisyHist2, RAPPOR (sparse logistic "
        "regression: the six Bloom bits that differ), LaplaceParallel (the tied score: one ramp shared by the 20 "
        "coordinates); the others from the auditor's histogram, threshold, coordinate and projection events.",
        "* SVT4 is a narrow win: its best event on this pair has log ratio 0.1725, so 2·10^8 samples certify about 0.170. "
        "At 95% confidence with 4 events and DP-Sniper's pairs (an earlier run) ReportNoisyMax3 (0.2473 at 1.2·10^8), "
        "SVT1 (0.0832 at 1.5·10^8) and SVT4 (0.1663 at 8·10^7) stayed below DP-Sniper's bounds; SVT1's pair is the "
        "difference now (true 0.0878 on DP-Sniper's pair, 0.0988 on ours).",
        "* Seconds: wall time of `audit` on this machine (2 workers), sampling included. DP-Sniper's reference log "
        "records 21 s for Laplace and 62 s for ReportNoisyMax1 (search + final estimate) on its own machine.",
    ]
    lines += ["", "Witness events (first 300 characters):", ""]
    for case, r, _, _ in rows:
        lines.append(f"* {case.name}: {r.witness_description[:300]}")
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
