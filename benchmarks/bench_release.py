"""Release time of declared pipelines on data in memory, against the numpy code computing the same
statistics without privacy (issue 29: exact aggregates at numpy speed).

Cases (one release, ``m.sample(data, 1, rng)``, the public validated call: domain validation of the
input, the structure executed, the exact aggregates, the noise):

* ``sum``: ``clamp(0, 100) >> sum() >> laplace(scale=100)`` against ``np.clip(x, 0, 100).sum()``;
* ``mean``: ``clamp(0, 100) >> compose(sum() >> laplace(200), count() >> laplace(2))`` against
  ``np.clip(x, 0, 100).sum()`` and ``len(x)``;
* ``histogram``: ``histogram(edges=0, 10, ..., 100) >> laplace(2)`` against ``np.histogram(x, edges)``;
* ``group_by``: 250 keys (column 0, the integers 0..249 as floats), released per key with partition
  selection (its noisy count) and a clamped sum part ``column(1) >> clamp(0, 100) >> sum() >>
  laplace(200)``, against two ``np.bincount`` calls (the count and the clamped sum per key, with the
  ``astype`` of the key column and the ``np.clip`` that numpy code needs);
* ``group_by_count_sum``: the same with the part ``compose(count() >> laplace(2), <clamped sum>)``
  (two noisy numbers per key besides the selection), against the same two ``np.bincount`` calls.

Records: ``x ~ Normal(50, 30)`` (about 5% below 0 and 5% above 100, so the clamp matters), declared as
``RealInterval(-1000, 1000)`` (``RealBox`` for the group-by); data seed 0, release seed 1. Every figure is
the least wall time (``time.perf_counter``) of ``--repeats`` runs, the release and the numpy code
alternating in one process after one warm-up of each (on shared cores the time of the same work grows
with what runs beside it; the load is printed with each row). ``validation`` is the least time of
``m.input_spec.validate`` alone on the same data (part of the release time).

Run: ``python benchmarks/bench_release.py [--sizes 1e6 1e7] [--big] [--cases sum group_by ...]
[--repeats 5] [--out benchmarks/results/release.md]``; ``--big`` adds 10^8 records (about 4 GB of memory
for the group-by). Timings depend on the machine and its load: run it on idle cores.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

import bench_scaling  # the load and the commit, as the other benchmarks read them

_CASES = ["sum", "mean", "histogram", "group_by", "group_by_count_sum"]
_KEYS = 250
_EDGES = list(range(0, 101, 10))


def _mechanism(name: str):
    from dpharness import AddRemove, ApproxDP, PureDP, RealBox, RealInterval
    from dpharness import parts as dp

    if name.startswith("group_by"):
        total = dp.column(1) >> dp.clamp(0, 100) >> dp.sum() >> dp.laplace(200)
        part = total if name == "group_by" else dp.compose(dp.count() >> dp.laplace(2), total)
        return dp.mechanism(
            name=name,
            records=RealBox(-1000, 1000, 2),
            relation=AddRemove(),
            steps=dp.group_by(by=0, keys=range(_KEYS), select=dp.partition_select(threshold=20, scale=2), part=part),
            claim=ApproxDP(2, 1e-3),
        )
    steps = {
        "sum": dp.clamp(0, 100) >> dp.sum() >> dp.laplace(scale=100),
        "mean": dp.clamp(0, 100) >> dp.compose(dp.sum() >> dp.laplace(200), dp.count() >> dp.laplace(2)),
        "histogram": dp.histogram(edges=_EDGES) >> dp.laplace(2),
    }[name]
    return dp.mechanism(
        name=name, records=RealInterval(-1000, 1000), relation=AddRemove(), steps=steps, claim=PureDP(2)
    )


def _data(name: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.normal(50, 30, n)
    if name.startswith("group_by"):
        return np.column_stack([rng.integers(0, _KEYS, n).astype(float), x])
    return x


def _numpy(name: str):
    """The numpy code computing the same statistics without privacy."""
    if name == "sum":
        return lambda x: np.clip(x, 0, 100).sum()
    if name == "mean":
        return lambda x: (np.clip(x, 0, 100).sum(), len(x))
    if name == "histogram":
        edges = np.asarray(_EDGES, dtype=float)
        return lambda x: np.histogram(x, edges)

    def two_bincounts(x):
        keys = x[:, 0].astype(np.int64)
        return np.bincount(keys, minlength=_KEYS), np.bincount(keys, weights=np.clip(x[:, 1], 0, 100), minlength=_KEYS)

    return two_bincounts


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _row(name: str, n: int, repeats: int) -> dict:
    m, x, baseline = _mechanism(name), _data(name, n), _numpy(name)
    m.sample(x[:1000], 1, np.random.default_rng(1))  # warm: imports, caches
    baseline(x)
    release = numpy = float("inf")
    for _ in range(repeats):  # alternating, the least of each
        release = min(release, _seconds(lambda: m.sample(x, 1, np.random.default_rng(1))))
        numpy = min(numpy, _seconds(lambda: baseline(x)))
    validation = min(_seconds(lambda: m.input_spec.validate("data", x)) for _ in range(repeats))
    return {"release": release, "numpy": numpy, "validation": validation}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="*", type=float, default=[1e6, 1e7], help="records per data set")
    ap.add_argument("--big", action="store_true", help="also 10^8 records")
    ap.add_argument("--cases", nargs="*", default=_CASES, choices=_CASES)
    ap.add_argument("--repeats", type=int, default=5, help="runs of each, alternating (least kept)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "release.md"))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes] + ([10**8] if args.big else [])
    start, date = bench_scaling._load(), datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows = []
    for name in args.cases:
        for n in sizes:
            load = bench_scaling._load()
            r = _row(name, n, args.repeats)
            rows.append((name, n, r, load))
            ms = {k: round(v * 1e3, 2) for k, v in r.items()}
            print(name, n, ms, f"{r['release'] / r['numpy']:.1f}x", load, flush=True)
    command = "python benchmarks/bench_release.py " + " ".join(sys.argv[1:])
    lines = [
        "# Release time against numpy",
        "",
        f"Generated by `{command.strip()}` at {bench_scaling._git()} on {date}.",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs), Python "
        f"{platform.python_version()}, numpy {np.__version__}; load average {start} at the start, "
        f"{bench_scaling._load()} at the end (each row gives the load when it started). Data seed 0, release "
        f"seed 1; the least wall time of {args.repeats} runs, the release and the numpy code alternating.",
        "Release: `m.sample(data, 1, rng)` (validation of the input, the structure executed with exact "
        "aggregates, the noise); numpy: the same statistics without privacy (see the benchmark's docstring); "
        "validation: `m.input_spec.validate` alone (part of the release).",
        "",
        "| case | records | release (ms) | numpy (ms) | release / numpy | validation (ms) | load |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, n, r, load in rows:
        lines.append(
            f"| {name} | {n:,} | {r['release'] * 1e3:.2f} | {r['numpy'] * 1e3:.2f} | {r['release'] / r['numpy']:.1f} | "
            f"{r['validation'] * 1e3:.2f} | {load} |"
        )
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
