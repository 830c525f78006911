"""Certification throughput (samples/s, both sides counted) in this process, in the local worker
pool and on a dask ``LocalCluster`` of 1, 2 and 4 worker processes.

Run: ``python benchmarks/bench_cluster.py [--per-call N] [--vectorised N] [--out FILE]`` (needs the
dask extra for the cluster rows: ``pip install -e '.[dask]'`` in the checkout). Two targets:

* per call: ``fn(data)`` — a pure-Python Laplace drawn by inverting its CDF with a bisection
  run for a fixed 360 steps, a stand-in for a library answering a few thousand calls/s; audited
  with ``vectorized=False``;
* vectorised: ``fn(data, size, rng)`` — numpy Laplace noise rounded to a 2^-20 grid.

Each row times :func:`dpharness.auditors._runner.count_events` on one neighbouring pair with the
threshold/interval events proposed from a training sample; the cluster is opened once per worker
count (its start-up is reported apart). The vectorised rows must give identical counts in every
configuration, and the per-call rows in every pool and cluster configuration (checked). Figures
depend on the machine's load, which is printed (``uptime``), and a CPU-time column that does not."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import time

import numpy as np

from dpharness.auditors import _runner
from dpharness.auditors import events as _events

_BISECTIONS = 360  # past float convergence (~60 steps): a call costs ~0.15 ms, like a slow per-call library


def laplace_call(d: float) -> float:
    """One Laplace(0, 1) draw around ``d`` on a 2^-20 grid, by bisection of the CDF (pure Python; the
    uniform comes from numpy's global state, as in libraries that default to ``np.random``)."""
    u = float(np.random.random())
    lo, hi = -60.0, 60.0
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        cdf = 0.5 * math.exp(mid) if mid < 0 else 1.0 - 0.5 * math.exp(-mid)
        if cdf < u:
            lo = mid
        else:
            hi = mid
    return d + round(0.5 * (lo + hi) * 2**20) / 2**20


def laplace_vec(d, size, rng):
    return np.round((d + rng.laplace(0, 1, size)) * 2**20) / 2**20


def _events_for() -> list:
    rng = np.random.default_rng(0)
    a, b = laplace_vec(0.0, 20_000, rng), laplace_vec(1.0, 20_000, rng)
    return [list(_events.propose_thresholds(a, b, max_events=6)) + list(_events.propose_intervals(a, b, max_events=4))]


def _cpu_seconds() -> dict[int, float] | None:
    """CPU seconds used so far by this process and each live process it started (pool and cluster workers)."""
    try:
        import psutil
    except ImportError:
        return None
    me = psutil.Process()
    out = {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        out[proc.pid] = t.user + t.system
    return out


def _time(sampler, n: int, chunk: int, *, workers: int, cluster) -> tuple[float, float | None, list]:
    c0, t0 = _cpu_seconds(), time.perf_counter()
    counts = _runner.count_events(
        sampler, [(0.0, 1.0)], EVENTS, seed=1, total=n, chunk=chunk, ref=((), "f"), workers=workers, cluster=cluster
    )
    wall, c1 = time.perf_counter() - t0, _cpu_seconds()
    # processes alive at the end (an idle pool worker that exited meanwhile did no work here)
    cpu = None if c0 is None or c1 is None else sum(v - c0.get(pid, 0.0) for pid, v in c1.items())
    return wall, cpu, [c.tolist() for c in counts[0]]


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


EVENTS: list = []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-call", type=int, default=24_000, help="per-call samples a side (chunks of 2 000)")
    ap.add_argument("--vectorised", type=int, default=8_000_000, help="vectorised samples a side (chunks of 500 000)")
    ap.add_argument("--out", default=None, help="also write the table (markdown) to this file")
    args = ap.parse_args()
    EVENTS[:] = _events_for()
    per_call = _runner.Sampler(laplace_call, "laplace_call", vectorized=False)
    vec = _runner.Sampler(laplace_vec, "laplace_vec", vectorized=True)
    jobs = [("per call", per_call, args.per_call, 2_000), ("vectorised", vec, args.vectorised, 500_000)]

    load_before = _uptime()
    rows: list[tuple] = []  # (target, where, seconds, samples/s, CPU µs per sample)
    reference: dict[str, list] = {}
    same = True

    def record(target: str, where: str, seconds: float, cpu: float | None, counts: list, n: int) -> None:
        nonlocal same
        per = None if cpu is None else 1e6 * cpu / (2 * n)
        rows.append((target, where, seconds, 2 * n / seconds, per))
        print(
            f"{target:10s}  {where:34s}  {seconds:7.2f} s  {2 * n / seconds:12,.0f} samples/s  "
            f"{'-' if per is None else f'{per:.3f}'} CPU µs/sample",
            flush=True,
        )
        if target == "vectorised" or not where.startswith("this process"):  # per call: pool and cluster rows
            same = same and reference.setdefault(target, counts) == counts

    for target, sampler, n, chunk in jobs:
        record(target, "this process (workers=1)", *_time(sampler, n, chunk, workers=1, cluster=None), n)
        _time(sampler, 2 * chunk, chunk, workers=2, cluster=None)  # start the pool's workers
        record(target, "local pool, 2 workers (loky)", *_time(sampler, n, chunk, workers=2, cluster=None), n)
    startups = []
    try:
        import distributed  # noqa: F401
    except ImportError:
        print("dask is not installed: no cluster rows (pip install -e '.[dask]' in the dpharness checkout)")
    else:
        for k in (1, 2, 4):
            t0 = time.perf_counter()
            with _runner.cluster_session("local", k) as client:
                startups.append((k, time.perf_counter() - t0))
                for target, sampler, n, chunk in jobs:
                    _time(sampler, 2 * chunk, chunk, workers=k, cluster=client)  # ship the code once
                    record(
                        target,
                        f"dask LocalCluster, {k} worker{'s' * (k > 1)}",
                        *_time(sampler, n, chunk, workers=k, cluster=client),
                        n,
                    )
    load_after = _uptime()

    lines = [
        "# Certification throughput: local pool and dask LocalCluster",
        "",
        f"`python benchmarks/bench_cluster.py --per-call {args.per_call} --vectorised {args.vectorised}`: "
        "samples/s counted on both sides of one pair (`_runner.count_events`, "
        f"{len(EVENTS[0])} events). Per-call target: pure-Python Laplace by CDF bisection "
        f"({_BISECTIONS} steps), chunks of 2 000 calls; vectorised target: numpy Laplace on a 2^-20 grid, "
        "chunks of 500 000.",
        "",
        f"Machine: {os.cpu_count()} cores. Wall-clock throughput can grow only up to the free cores: read it "
        "with the load average below (above the core count, other jobs share the cores); the CPU column "
        "does not depend on the load.",
        "",
        f"- load before: `{load_before}`",
        f"- load after: `{load_after}`",
        "",
        "CPU µs/sample: CPU time of this process and all the processes it started (pool and cluster "
        "workers, nanny, scheduler) per sample: what a configuration costs whatever else runs on the "
        "machine; with k free cores the throughput would be about min(k, workers) / (CPU µs/sample) "
        "million samples/s.",
        "",
        "| target | where | wall seconds | samples/s | CPU µs/sample |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    lines += [f"| {t} | {w} | {s:.2f} | {r:,.0f} | {'-' if c is None else f'{c:.3f}'} |" for t, w, s, r, c in rows]
    if startups:
        lines += [
            "",
            "LocalCluster start-up (not in the rows above): "
            + ", ".join(f"{k} worker{'s' * (k > 1)}: {s:.1f} s" for k, s in startups)
            + ".",
        ]
    lines += [
        "",
        "Counts identical in every configuration (vectorised), and in every pool and cluster "
        f"configuration (per call, reseeded per chunk): {'yes' if same else 'NO'}.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    if not same:
        raise SystemExit("counts differ between configurations")


if __name__ == "__main__":
    main()
