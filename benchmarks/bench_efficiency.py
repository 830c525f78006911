"""Sample efficiency against the black-box limit: samples a side to certify 0.95 of the true ε, and
the audit's CPU time as a multiple of the mechanism's own sampling time.

For each DP-Sniper benchmark mechanism (:mod:`bench_dpsniper`'s cases: Laplace, noisy histograms,
report noisy max, SVT, RAPPOR, LaplaceParallel; claimed ε = 0.1, 90% confidence, two certified
events, the mathematical mechanism audited with ``ideal_numerics=True``):

* **samples needed**: the smallest budget on a doubling grid (10^5 · 2^k a side, training included)
  at which the certified bound reaches ``--fraction`` (default 0.95) of the true ε on the pair, for
  each of ``--seeds`` seeds; the table gives the largest over seeds (every seed reached the target
  at that budget) and the ratio to DP-Sniper's 2·10^8 a side;
* **samples to match DP-Sniper's published bound** (its own certified value at 2·10^8 a side),
  on the same grid, for seed 0;
* **CPU multiple**: at the seed-0 budget that reached the target, the audit's CPU time (this
  process and its workers; one worker, so nothing overlaps) divided by the CPU time the mechanism
  itself takes to draw the same number of outputs (both sides, training and certification, in
  chunks of the auditor's size), measured in the same process.

Run: ``python benchmarks/bench_efficiency.py [--only NAME ...] [--seeds 3] [--max 2e8]``; writes
``benchmarks/results/efficiency.md``. The grid stops at ``--max`` samples a side ("> max": not reached).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from bench_dpsniper import CASES, CONFIDENCE, EPS, MAX_EVENTS  # noqa: E402

from dpharness.auditors import audit  # noqa: E402

DPSNIPER_SAMPLES = 200_000_000
_DRAW_CHUNK = 1 << 17


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _audit(case, samples: int, seed: int):
    return audit(
        case.fn,
        case.data,
        case.neighbor,
        epsilon=EPS,
        samples=samples,
        seed=seed,
        confidence=CONFIDENCE,
        ideal_numerics=True,
        progress=False,
        max_events=MAX_EVENTS,
        workers=1,
    )


def _grid(start: int, stop: int):
    n = start
    while n <= stop:
        yield n
        n *= 2


def samples_needed(case, target: float, seed: int, *, start: int, stop: int):
    """(smallest grid budget whose certified bound >= target, that audit) or (None, last audit)."""
    r = None
    for n in _grid(start, stop):
        r = _audit(case, n, seed)
        if r.epsilon_lower_bound >= target:
            return n, r
    return None, r


def draw_cpu(case, samples: int) -> float:
    """CPU seconds the mechanism takes to draw ``samples`` outputs on each side of the pair."""
    rng = np.random.default_rng(12345)
    t0 = _cpu()
    for x in (case.data, case.neighbor):
        left = samples
        while left > 0:
            k = min(_DRAW_CHUNK, left)
            case.fn(x, k, rng)
            left -= k
    return _cpu() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--fraction", type=float, default=0.95)
    ap.add_argument("--start", type=float, default=1e5)
    ap.add_argument("--max", type=float, default=2e8)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "efficiency.md"))
    args = ap.parse_args(argv)
    start, stop = int(args.start), int(args.max)
    rows = []
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        target = args.fraction * case.true_eps
        needed = []
        cpu_ratio = cpu_audit = cpu_draw = None
        for seed in range(args.seeds):
            n, r = samples_needed(case, target, seed, start=start, stop=stop)
            needed.append(n)
            if seed == 0 and n is not None:
                t0 = _cpu()
                _audit(case, n, 0)
                cpu_audit = _cpu() - t0
                cpu_draw = draw_cpu(case, n)
                cpu_ratio = cpu_audit / cpu_draw
        match, _ = samples_needed(case, case.dpsniper, 0, start=start, stop=stop)
        worst = None if any(n is None for n in needed) else max(needed)
        rows.append((case, target, needed, worst, match, cpu_audit, cpu_draw, cpu_ratio))
        print(
            f"{case.name:16s} target {target:.4f}: needed {needed} -> {worst}; DP-Sniper's bound at {match}; "
            f"CPU audit {cpu_audit} s / draw {cpu_draw} s = {cpu_ratio}",
            flush=True,
        )
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]

    def fmt_n(n):
        return f"> {stop:,}" if n is None else f"{n:,}"

    def fewer(n):
        return "—" if n is None else f"{DPSNIPER_SAMPLES / n:.0f}×"

    lines = [
        "# Sample efficiency against the black-box limit (claimed ε = 0.1)",
        "",
        f"Generated by `python benchmarks/bench_efficiency.py` ({platform.machine()}, {os.cpu_count()} cores, "
        f"load average {' '.join(load)} at the end; seeds 0..{args.seeds - 1}; doubling grid from {start:,} to "
        f"{stop:,} samples a side, training included). Certified at {CONFIDENCE:.0%} confidence with "
        f"max_events={MAX_EVENTS}, ideal numerics, on bench_dpsniper's pairs. DP-Sniper certifies with 2·10^8 "
        "samples a side (plus training).",
        "",
        f"| mechanism | true ε | target ({args.fraction:g}·true) | samples needed (per seed) | needed (all seeds) | "
        "fewer than DP-Sniper | samples to match DP-Sniper's bound | audit CPU s | draw CPU s | CPU multiple |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case, target, needed, worst, match, ca, cd, ratio in rows:
        per = ", ".join(fmt_n(n) for n in needed)
        lines.append(
            f"| {case.name} | {case.true_eps:.4g} | {target:.4g} | {per} | {fmt_n(worst)} | {fewer(worst)} | "
            f"{fmt_n(match)} ({case.dpsniper}) | {'—' if ca is None else f'{ca:.2f}'} | "
            f"{'—' if cd is None else f'{cd:.2f}'} | {'—' if ratio is None else f'{ratio:.2f}×'} |"
        )
    lines += [
        "",
        "CPU multiple: the audit's CPU time with one worker (training, event proposal and ranking, certification "
        "counts, statistics) over the CPU time of drawing the same outputs with the mechanism alone. Target: ≤ 1.5×.",
    ]
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
