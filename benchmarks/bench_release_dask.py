"""A release from a parquet data set on a Dask LocalCluster (2 worker processes, 1 thread each), against
Dask computing the same statistics without privacy.

Run: ``python benchmarks/bench_release_dask.py [--rows 1e8] [--dir /tmp/dpharness-parquet]
[--out benchmarks/results/release_dask.md]``. The data set (columns ``value ~ Normal(50, 30)`` and
``key``, the integers 0..249, in files of 2·10^6 rows) is written once and reused. Cases:

* ``sum``: ``clamp(0, 100) >> sum() >> laplace(scale=100)`` on ``value``, against
  ``frame.value.clip(0, 100).sum().compute()``;
* ``mean and counts per key``: ``compose(count, clamped sum, group_by(key, 250 keys, partition
  selection))``, against the clipped sum, the length and ``frame.key.value_counts()``.

Each release is ``dpharness.release(m, dd.read_parquet(dir), seed=1)``: every partition's exact partials
on the workers, merged exactly, the noise drawn once. Wall time (least of ``--repeats``) and the largest
resident memory of this process and of the worker processes (``resource.getrusage``, read after the
cluster closes) are reported with the load average.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import sys
import time

import numpy as np

_KEYS = 250
_ROWS_PER_FILE = 2_000_000


def _write(directory: str, rows: int) -> None:
    import pandas as pd

    os.makedirs(directory, exist_ok=True)
    files = max(1, rows // _ROWS_PER_FILE)
    have = sorted(f for f in os.listdir(directory) if f.endswith(".parquet"))
    if len(have) == files:
        return
    for f in have:
        os.remove(os.path.join(directory, f))
    rng = np.random.default_rng(0)
    for i in range(files):
        n = min(_ROWS_PER_FILE, rows - i * _ROWS_PER_FILE)
        frame = pd.DataFrame({"value": rng.normal(50, 30, n), "key": rng.integers(0, _KEYS, n).astype(float)})
        frame.to_parquet(os.path.join(directory, f"part-{i:04d}.parquet"), index=False)


def _mechanisms():
    from dpharness import AddRemove, ApproxDP, PureDP, RealBox
    from dpharness import parts as dp

    box = RealBox(-1e6, 1e6, 2)
    total = dp.column(0) >> dp.clamp(0, 100) >> dp.sum() >> dp.laplace(100)
    return {
        "sum": dp.mechanism(name="sum", records=box, relation=AddRemove(), steps=total, claim=PureDP(1)),
        "mean and counts per key": dp.mechanism(
            name="mean_keys",
            records=box,
            relation=AddRemove(),
            steps=dp.compose(
                dp.count() >> dp.laplace(2),
                dp.column(0) >> dp.clamp(0, 100) >> dp.sum() >> dp.laplace(200),
                dp.group_by(by=1, keys=range(_KEYS), select=dp.partition_select(threshold=40, scale=2)),
            ),
            claim=ApproxDP(2, 1e-6),
        ),
    }


def _baseline(name: str, frame):
    if name == "sum":
        return frame.value.clip(0, 100).sum().compute()
    import dask

    return dask.compute(frame.value.clip(0, 100).sum(), frame.value.count(), frame.key.value_counts())


def _least(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e8)
    ap.add_argument("--dir", default="/tmp/dpharness-parquet")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    rows = int(args.rows)
    directory = os.path.join(args.dir, f"rows-{rows}")

    import dask.dataframe as dd
    from dask.distributed import Client, LocalCluster

    import dpharness

    t = time.perf_counter()
    _write(directory, rows)
    written = time.perf_counter() - t
    load = os.getloadavg()[0]
    lines = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster, Client(cluster):
        frame = dd.read_parquet(directory)
        for name, m in _mechanisms().items():
            out = dpharness.release(m, frame, seed=1)
            again = dpharness.release(m, dd.read_parquet(directory), seed=1)
            assert np.array_equal(np.asarray(out), np.asarray(again))  # the same seed, the same release
            release = _least(lambda: dpharness.release(m, frame, seed=1), args.repeats)
            base = _least(lambda: _baseline(name, frame), args.repeats)
            lines.append((name, release, base))
            print(
                f"{name}: release {release:.2f} s, dask without privacy {base:.2f} s ({release / base:.2f}x)",
                flush=True,
            )
    here = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    table = [
        f"# A release from parquet on a Dask LocalCluster ({datetime.date.today()})",
        "",
        f"Command: `python benchmarks/bench_release_dask.py --rows {args.rows:g} --out benchmarks/results/release_dask.md`. "
        f"{rows:,} rows in {max(1, rows // _ROWS_PER_FILE)} parquet files (written in {written:.0f} s, or reused); "
        f"LocalCluster of 2 worker processes x 1 thread; machine {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load average {load:.2f} at the start. Least wall time of {args.repeats} runs.",
        "",
        "| case | dpharness.release (s) | Dask, no privacy (s) | ratio |",
        "|---|---|---|---|",
    ]
    table += [f"| {n} | {r:.2f} | {b:.2f} | {r / b:.2f} |" for n, r, b in lines]
    table += [
        "",
        f"Largest resident memory: this process {here:,.0f} MB; the largest worker process {workers:,.0f} MB.",
    ]
    print("\n".join(table))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
