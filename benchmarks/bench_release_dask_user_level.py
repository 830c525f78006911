"""The user-level per-country count and clamped sum released from a parquet data set on a Dask LocalCluster
(2 worker processes, 1 thread each), against Dask computing the same statistics without privacy.

Data (written once to ``--dir`` and reused, files of 2·10^6 rows): ``user`` (int64 ids beyond 2**53, about
3 rows a user), ``country`` (250 strings, Zipf-like popularity, 95% of a user's rows in a home country),
``income`` ~ Gamma(2, 25 000).

* dpharness: ``bound_contributions(user, max_records=5, max_per_partition=5) >> group_by(country, keys
  from the data, partition_select(threshold=370, scale=25), part=compose(count >> laplace(12.5), clamped
  income sum >> laplace(2 500 010)))`` at (1, 1e-6), ``dpharness.release(m, dd.read_parquet(dir), seed=1)``:
  the frame shuffled by user on the cluster, partials per partition, the drawn users gathered.
* Dask: ``frame.assign(income=frame.income.clip(0, 200_000)).groupby("country").income.agg(["count",
  "sum"]).compute()``.

Wall time of each (least of ``--repeats``), the ratio, and the peak resident memory of each worker
process (``resource.getrusage(RUSAGE_SELF)`` run on the workers after the computation; each computation
on a fresh cluster, so the peaks are its own) and of this process.
Run on idle cores: ``python benchmarks/bench_release_dask_user_level.py --rows 1e7 [--out FILE]``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import time

import numpy as np

_KEYS = 250
_ROWS_PER_FILE = 2_000_000


def _write(directory: str, rows: int) -> None:
    import pandas as pd

    os.makedirs(directory, exist_ok=True)
    files = max(1, -(-rows // _ROWS_PER_FILE))
    have = sorted(f for f in os.listdir(directory) if f.endswith(".parquet"))
    if len(have) == files:
        return
    for f in have:
        os.remove(os.path.join(directory, f))
    rng = np.random.default_rng(0)
    users = max(1, rows // 3)
    ids = rng.choice(2**62, users, replace=False).astype(np.int64)
    home = np.minimum(rng.zipf(1.3, users) - 1, _KEYS - 1)
    names = np.array([f"C{i:03d}" for i in range(_KEYS)], dtype=object)
    for i in range(files):
        n = min(_ROWS_PER_FILE, rows - i * _ROWS_PER_FILE)
        owner = rng.integers(0, users, n)
        country = np.where(rng.random(n) < 0.95, home[owner], rng.integers(0, _KEYS, n))
        frame = pd.DataFrame({"user": ids[owner], "country": names[country], "income": rng.gamma(2.0, 25_000.0, n)})
        frame.to_parquet(os.path.join(directory, f"part-{i:04d}.parquet"), index=False)


def _mechanism():
    from dpharness import ApproxDP, RealBox
    from dpharness import parts as dp

    return dp.mechanism(
        name="per_country",
        records=RealBox(0, 1e9, 3),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=5, max_per_partition=5)
        >> dp.group_by(
            by=1,
            keys=None,
            select=dp.partition_select(threshold=370, scale=25),
            part=dp.compose(
                dp.count() >> dp.laplace(12.5),
                dp.column(2) >> dp.clamp(0, 200_000) >> dp.sum() >> dp.laplace(2_500_010),
            ),
        ),
        claim=ApproxDP(1, 1e-6),
    )


def _least(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--per-user",
        action="store_true",
        help="also time Dask's own row count per user (groupby('user').size(), split over half the partitions): "
        "the global per-user count any user-level bound needs, without privacy",
    )
    args = parser.parse_args()
    rows = int(args.rows)
    directory = args.dir or f"/tmp/dpharness-user-level-{rows:.0e}"
    _write(directory, rows)

    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    import dpharness

    m = _mechanism()
    assert dpharness.prove(m).verdict.value == "PROVED"

    def on_cluster(run):  # a fresh cluster for each: each worker's peak is that computation's
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="4GiB") as cluster:
            with Client(cluster) as client:
                seconds, out = _least(run, args.repeats)
                peaks = ", ".join(f"{v:.0f}" for v in sorted(client.run(_peak_mb).values()))
        return seconds, out, peaks

    def baseline():
        frame = dd.read_parquet(directory)
        clipped = frame.assign(income=frame.income.clip(0, 200_000))
        return clipped.groupby("country").income.agg(["count", "sum"]).compute()

    def per_user():  # one output partition per two input partitions: a single one holds every user's count
        frame = dd.read_parquet(directory)
        return frame.groupby("user").size(split_out=max(1, frame.npartitions // 2)).compute()

    base, truth, base_peaks = on_cluster(baseline)
    ours, released, peaks = on_cluster(lambda: dpharness.release(m, dd.read_parquet(directory), seed=1, quiet=True))
    driver_peak = _peak_mb()  # before the per-user count, whose result (every user's count) comes to this process
    # last: a worker forked after this process grew would start from its peak
    users = on_cluster(per_user) if args.per_user else None
    true_means = (truth["sum"] / truth["count"]).to_dict()
    errors = [
        abs(v.sum / v.count - true_means[k]) / true_means[k]
        for k, v in released.items()
        if v.count > 0 and true_means.get(k, 0) > 0
    ]
    lines = [
        "# User-level per-country release from parquet on a Dask LocalCluster "
        "(benchmarks/bench_release_dask_user_level.py)",
        "",
        f"{datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} "
        f"at the end; {rows:.0e} rows in {directory}; 2 workers x 1 thread; release seed 1; least wall time of "
        f"{args.repeats} run(s) each; command: `python benchmarks/bench_release_dask_user_level.py --rows {args.rows:g}"
        f"{f' --repeats {args.repeats}' if args.repeats != 1 else ''}{' --per-user' if args.per_user else ''}`",
        "",
        "| what | seconds | released countries | peak RSS per worker (MB) | driver peak RSS (MB) |",
        "|---|---|---|---|---|",
        f"| Dask groupby count and clipped sum (no privacy) | {base:.1f} | | {base_peaks} | |",
        *(
            [f"| Dask groupby('user').size(), {len(users[1]):,} users (no privacy) | {users[0]:.1f} | | {users[2]} | |"]
            if users
            else []
        ),
        f"| dpharness.release (PROVED at (1, 1e-6)) | {ours:.1f} | {len(released)} | {peaks} | {driver_peak:.0f} |",
        "",
        f"Ratio: {ours / base:.1f}x Dask's own aggregation (each on a fresh cluster: the worker peaks are its own; "
        "the driver's is this process's over both, data generation included when it ran).",
        "",
        f"Released means (noisy sum / noisy count) against the true means of the clipped income (Dask's own "
        f"count and sum): median relative error {np.median(errors):.4f}, largest {max(errors):.4f} over "
        f"{len(errors)} countries (a capped or rounded-away sum would show as an error near 1).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
