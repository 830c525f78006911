"""Power of the auditor on rare leaks and rounding biases, and its false alarms (issue 9).

Leaks of known probability p that are *impossible on one side* (infinite privacy loss) on top of a
correct mechanism, and a *ratio-only* rounding bias; for each, the power is the fraction of R seeded
audits that certify ε_lb > claim at 10^6 samples a side with the auditor's DEFAULT settings. The
same audits of the correct mechanisms (no leak) count false alarms.

Mechanisms (d ∈ {0, 1}; the leak is on the data side d = 0 only):

* ``even geometric``: 2·(d + G − G') with two-sided geometric noise of ε = 1 (outputs on the even
  integers); the leak outputs the odd integer one above w.p. p. Claim ε = 1.
* ``grid Laplace``: Laplace(d, 1) rounded to the grid 2^-20 (1-DP); the leak adds 2^-21 (an odd last
  bit on the grid) w.p. p. Claim ε = 1.
* ``rounding bias``: Laplace(d, 2) correctly rounded to doubles (computed in extended precision, so
  both inputs' outputs fill the mantissa alike; 0.5-DP); on the data side an output in
  [0.5, 0.5625) has its last mantissa bit cleared w.p. 2/3, so the event "output in [0.5, 0.5625)
  with last mantissa bit 1" has likelihood ratio 3 (possible on both sides). Claim ε = 0.5.

Run: ``python benchmarks/bench_rare_events.py [--reps R] [--samples N] [--write]`` (``--write`` writes
``benchmarks/results/rare_events.md``)."""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np

from dpharness.auditors import audit

PS = (1e-3, 1e-4, 1e-5, 1e-6)
_GEO_P = 1 - math.exp(-1.0)


def even_geometric(p: float):
    def mech(d, size, rng):
        out = 2 * (d + rng.geometric(_GEO_P, size) - rng.geometric(_GEO_P, size))
        if d == 0 and p > 0:
            out = out + (rng.random(size) < p)
        return out.astype(np.int64)

    mech.__name__ = f"even_geometric(p={p:g})"
    return mech


def grid_laplace(p: float):
    def mech(d, size, rng):
        out = np.round((d + rng.laplace(0.0, 1.0, size)) * 2**20) / 2**20
        if d == 0 and p > 0:
            out = out + np.where(rng.random(size) < p, 2.0**-21, 0.0)
        return out

    mech.__name__ = f"grid_laplace(p={p:g})"
    return mech


def _fine_laplace(d: float, scale: float, size: int, rng) -> np.ndarray:
    """Laplace(d, scale) computed in extended precision and rounded once to doubles."""
    u = (rng.integers(1, 2**62, size).astype(np.longdouble) + np.longdouble(0.5)) / np.longdouble(2.0**62)
    sign = np.where(rng.random(size) < 0.5, -1.0, 1.0).astype(np.longdouble)
    y = -np.longdouble(scale) * np.log(u) * sign
    x = (np.longdouble(d) + y).astype(np.float64)
    # near 0, d + y keeps only the absolute precision of the long double (2^-63 · d): there the output is
    # drawn uniformly with a full mantissa instead (the density is flat within e^(1/64 / scale) there,
    # and each side keeps its own mass, so the mechanism stays 1/scale-DP)
    small = np.abs(x) < 2.0**-6
    x[small] = rng.integers(-(2**58), 2**58, int(small.sum())).astype(np.float64) / 2.0**64
    return x


def rounding_bias(biased: bool):
    lo, hi = 0.5, 0.5625

    def mech(d, size, rng):
        out = _fine_laplace(d, 2.0, size, rng)
        if biased and d == 0:
            inside = (out >= lo) & (out < hi) & (rng.random(size) < 2 / 3)
            bits = out.view(np.uint64).copy()
            bits[inside] &= ~np.uint64(1)
            out = bits.view(np.float64)
        return out

    mech.__name__ = f"rounding_bias(biased={biased})"
    return mech


def power(mech, epsilon: float, samples: int, reps: int, seed0: int) -> tuple[float, list, list, float]:
    hits, bounds, fams = 0, [], []
    t0 = time.perf_counter()
    for r in range(reps):
        res = audit(mech, 0, 1, epsilon=epsilon, samples=samples, seed=seed0 + r)
        hits += not res.passed
        bounds.append(res.epsilon_lower_bound)
        fams.append(res.extra.get("family") if not res.passed else None)
    return hits / reps, bounds, fams, (time.perf_counter() - t0) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    rows = []
    cases = [(f"even geometric, p = {p:g}", even_geometric(p), 1.0, True) for p in PS]
    cases += [(f"grid Laplace, p = {p:g}", grid_laplace(p), 1.0, True) for p in PS]
    cases += [("rounding bias (ratio 3, both sides possible)", rounding_bias(True), 0.5, True)]
    cases += [
        ("correct: even geometric", even_geometric(0.0), 1.0, False),
        ("correct: grid Laplace", grid_laplace(0.0), 1.0, False),
        ("correct: rounding-bias base (no bias)", rounding_bias(False), 0.5, False),
    ]
    for label, mech, eps, leaky in cases:
        pw, bounds, fams, sec = power(mech, eps, args.samples, args.reps, args.seed)
        fam = sorted({f for f in fams if f})
        rows.append((label, eps, leaky, pw, float(np.median(bounds)), ", ".join(fam) or "-", sec))
        print(
            f"{label:48s} claim {eps:g}  {'power' if leaky else 'false alarms'} {pw:.2f}  "
            f"median ε_lb {np.median(bounds):.3f}  families {', '.join(fam) or '-'}  {sec:.1f} s/audit",
            flush=True,
        )
    if args.write:
        load = os.getloadavg()[0]
        lines = [
            "# Rare one-sided leaks and rounding biases (issue 9)",
            "",
            f"`python benchmarks/bench_rare_events.py --reps {args.reps} --samples {args.samples} --write` — "
            f"{args.samples:,} samples a side, DEFAULT audit settings (train_fraction 0.1, max_events 20, confidence 0.95), "
            f"{args.reps} seeded repetitions each (seeds {args.seed}..{args.seed + args.reps - 1}); "
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average {load:.1f} at the end.",
            "",
            "Power = fraction of repetitions certifying ε_lb > claim; for correct mechanisms the same fraction is the "
            "false-alarm rate (bounded by 1 − confidence = 0.05 by soundness).",
            "",
            "| mechanism | claim ε | leak? | power / false alarms | median ε_lb | certifying families | s / audit |",
            "|---|---|---|---|---|---|---|",
        ]
        for label, eps, leaky, pw, med, fam, sec in rows:
            lines.append(
                f"| {label} | {eps:g} | {'yes' if leaky else 'no'} | {pw:.2f} | {med:.3f} | {fam} | {sec:.1f} |"
            )
        at = {label: pw for label, _, leaky, pw, _, _, _ in rows if leaky and "p = 0.0001" in label}
        done = all(pw >= 0.9 for pw in at.values())
        lines += [
            "",
            f"Done-when of issue 9 (the p = 1e-4 one-sided leak caught at <= 10^6 samples a side with default "
            f"settings): {'met' if done else 'NOT met'} — power "
            + ", ".join(f"{pw:.2f} ({label.split(',')[0]})" for label, pw in at.items())
            + ".",
            "",
            _NOTES,
        ]
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "rare_events.md")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
        print(f"wrote {path}")


_NOTES = """What limits power at small p. With 10^6 samples a side the default split trains on 10^5 (5·10^4
propose, 5·10^4 rank) and certifies on 9·10^5. A one-sided leak must show in the ranking half (and,
unless an event beyond the other side's range catches it, in the proposing half too: probability
(1 − e^{−5·10^4 p})², 0.99 at p = 1e-4, 0.15 at p = 1e-5), and
certification must then find enough hits: with none on the other side, ε_lb = ln(p1_lo / p0_hi) where
p0_hi ≈ 6.7 / 9·10^5 (Clopper-Pearson, Bonferroni over 20 candidates), so ε_lb > 1 needs about 34 hits,
i.e. p ≳ 4·10^-5. At p = 1e-5 (≈ 9 expected hits) and p = 1e-6 no audit at 10^6 samples can certify
ε > 1 whatever events it chooses; more samples (p·n ≳ 40) are the only remedy."""


if __name__ == "__main__":
    main()
