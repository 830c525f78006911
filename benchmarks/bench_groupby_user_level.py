"""The user-level per-country release, in memory, against its peers: released countries, the error
of the released means and the cost (issues 37 and 38).

Task: records (user id int64 beyond 2**53, country: 250 strings with Zipf-like popularity, income ~
Gamma(2, 25 000)), about 3 rows a user, 95% of a user's rows in a home country. Release, per country
found in the data, the row count and the mean income clamped to [0, 200 000], under user-level
(ε, δ) = (1, 1e-6), at most 5 rows a user and 5 per country.

* dpharness: ``bound_contributions(max_records=5, max_per_partition=5) >> group_by(keys=None,
  select=partition_select(epsilon=0.5, delta=1e-6), part=compose(count >> laplace(epsilon=0.25),
  clamped sum >> laplace(epsilon=0.25)))``: the textbook split declared as budgets (dpharness solves the
  scales and the threshold exactly, grid rounding included), PROVED at (1, 1e-6) (the benchmark checks
  it). Mean = sum / count, both noisy.
* OpenDP (``opendp[polars]``, its own environment: ``--opendp-python``): ``dp.Context.compositor`` over
  the same parquet file, privacy unit the user (at most 5 rows, 5 per country: ``truncate_per_group``),
  a public bound of the number of rows on each country's length and 250 on the number of countries, the
  per-country ``dp.len()`` and clamped ``sum``, keys released by OpenDP's thresholding of the noisy
  length (OpenDP chooses the split and the threshold).
* PipelineDP (``pipeline-dp``, ``--pipeline-dp-python``): ``DPEngine.aggregate`` (COUNT, SUM, Laplace
  noise, LocalBackend, private partitions, its default truncated-geometric selection) at
  ``NaiveBudgetAccountant(1, 1e-6)``; PipelineDP bounds a user by ``max_partitions_contributed=5`` and
  ``max_contributions_per_partition=5`` (it takes no bound on a user's total rows together with
  private partitions), so a user may keep more rows there than in the other two.

Each library runs as one cold process (``python -c ...``): its wall time from start to the release in
hand, and the peak resident memory of its whole process tree (``resource.getrusage(RUSAGE_CHILDREN)``).
Released countries, the median relative error of the released means against the true means (of the
clamped incomes of all rows), and the largest among the 50 most populous countries (where the noise is
smallest relative to the sums: a sum capped or rounded away shows there as an error near 1) are printed
for each.

Run on idle cores: ``python benchmarks/bench_groupby_user_level.py --rows 1e7 [--opendp-python PATH]
[--pipeline-dp-python PATH] [--out benchmarks/results/groupby_utility.md]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np

_KEYS = 250
_largest: list = []  # the 50 most populous countries of the data made (make_data)

_DECLARE = r"""
from dpharness import parts as dp, ApproxDP, RealBox
m = dp.mechanism(
    name="per_country", records=RealBox(0, 1e9, 3), relation=dp.AddRemoveUser(user=0),
    steps=dp.bound_contributions(user=0, by=1, max_records=5, max_per_partition=5)
    >> dp.group_by(by=1, keys=None, select=dp.partition_select(epsilon=0.5, delta=1e-6),
                   part=dp.compose(dp.count() >> dp.laplace(epsilon=0.25),
                                   dp.column(2) >> dp.clamp(0, 200_000) >> dp.sum() >> dp.laplace(epsilon=0.25))),
    claim=ApproxDP(1, 1e-6))
"""

_DPHARNESS = (
    r"""
import json, sys, time
start = time.perf_counter()
import pandas as pd, dpharness
frame = pd.read_parquet(sys.argv[1])
"""
    + _DECLARE
    + r"""
out = dpharness.release(m, frame[["user", "country", "income"]], seed=int(sys.argv[2]))
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "verdict": "",
                  "means": {k: v.sum / v.count for k, v in out.items() if v.count > 0}}))
"""
)

_OPENDP = r"""
import json, sys, time
start = time.perf_counter()
import polars as pl, opendp.prelude as dp
dp.enable_features("contrib")
rows = int(sys.argv[3])
context = dp.Context.compositor(
    data=pl.scan_parquet(sys.argv[1]),
    privacy_unit=dp.unit_of(contributions=[dp.polars.Bound(per_group=5),
                                            dp.polars.Bound(by=["country"], per_group=5)],
                            identifier="user"),
    privacy_loss=dp.loss_of(epsilon=1.0, delta=1e-6),
    split_evenly_over=1,
    margins=[dp.polars.Margin(by=["country"], max_length=rows, max_groups=250)],
)
query = (context.query().truncate_per_group(5).truncate_per_group(5, by=["country"]).group_by("country")
         .agg(dp.len(), pl.col("income").fill_null(0).dp.sum((0, 200_000)).alias("total")))
df = query.release().collect()
seconds = time.perf_counter() - start
means = {r["country"]: r["total"] / r["len"] for r in df.to_dicts() if r["len"] > 0}
print(json.dumps({"seconds": seconds, "verdict": "library", "means": means}))
"""

_PIPELINE_DP = r"""
import json, sys, time
start = time.perf_counter()
import pandas as pd, pipeline_dp
frame = pd.read_parquet(sys.argv[1])
rows = list(zip(frame["user"].tolist(), frame["country"].tolist(), frame["income"].tolist()))
del frame
accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=1e-6)
engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
params = pipeline_dp.AggregateParams(
    metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM], noise_kind=pipeline_dp.NoiseKind.LAPLACE,
    max_partitions_contributed=5, max_contributions_per_partition=5, min_value=0.0, max_value=200_000.0)
extract = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                     value_extractor=lambda r: r[2])
result = engine.aggregate(rows, params, extract)
accountant.compute_budgets()
means = {k: m.sum / m.count for k, m in result if m.count > 0}
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "verdict": "library", "means": means}))
"""


def make_data(rows: int, path: str, seed: int = 0) -> dict:
    """Write the task's parquet file; return the true mean of the clamped income per country."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    users = max(1, rows // 3)
    ids = rng.choice(2**62, users, replace=False).astype(np.int64)
    home = np.minimum(rng.zipf(1.3, users) - 1, _KEYS - 1)
    owner = rng.integers(0, users, rows)
    country = np.where(rng.random(rows) < 0.95, home[owner], rng.integers(0, _KEYS, rows))
    names = np.array([f"C{i:03d}" for i in range(_KEYS)], dtype=object)
    income = rng.gamma(2.0, 25_000.0, rows)
    frame = pd.DataFrame({"user": ids[owner], "country": names[country], "income": income})
    frame.to_parquet(path)
    clamped = np.clip(income, 0, 200_000)
    sums = np.bincount(country, weights=clamped, minlength=_KEYS)
    counts = np.bincount(country, minlength=_KEYS)
    _largest[:] = [names[i] for i in np.argsort(-counts, kind="stable")[:50]]
    return {names[i]: sums[i] / counts[i] for i in range(_KEYS) if counts[i]}


def run(python: str, code: str, path: str, seed: int, rows: int) -> dict:
    """One cold process, started by a fresh launcher: its JSON result, the wall seconds of the whole
    process, and the peak RSS of its tree (the launcher's RUSAGE_CHILDREN: only this run's processes)."""
    launcher = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "wall = time.perf_counter() - t\n"
        "sys.stderr.write(done.stderr)\n"
        "print(done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else 'null')\n"
        "print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", launcher, python, "-c", code, path, str(seed), str(rows)], capture_output=True, text=True
    )
    lines = done.stdout.strip().splitlines()
    if len(lines) < 2 or lines[-2] == "null":
        tail = done.stderr.strip().splitlines()
        return {"error": tail[-1] if tail else "failed"}
    out = json.loads(lines[-2])
    wall, peak = lines[-1].split()
    out["wall"] = float(wall)
    out["peak_mb"] = int(peak) / 1024  # KiB on Linux
    return out


def summary(result: dict, truth: dict) -> dict:
    if "error" in result:
        return result
    means = result["means"]
    errors = [abs(means[k] - truth[k]) / truth[k] for k in means if k in truth and truth[k] > 0]
    big = [abs(means[k] - truth[k]) / truth[k] for k in _largest if k in means]
    return {
        "released": len(means),
        "median_rel_error": float(np.median(errors)) if errors else float("nan"),
        "max_rel_error_largest": float(np.max(big)) if big else float("nan"),
        **{k: result[k] for k in ("seconds", "wall", "peak_mb", "verdict")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--opendp-python", default=None, help="a python with opendp[polars] installed")
    parser.add_argument("--pipeline-dp-python", default=None, help="a python with pipeline-dp installed")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rows = int(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "visits.parquet")
        truth = make_data(rows, path)
        results = {"dpharness": summary(run(sys.executable, _DPHARNESS, path, args.seed, rows), truth)}
        if args.opendp_python:
            results["OpenDP (polars)"] = summary(run(args.opendp_python, _OPENDP, path, args.seed, rows), truth)
        if args.pipeline_dp_python:
            results["PipelineDP (local)"] = summary(
                run(args.pipeline_dp_python, _PIPELINE_DP, path, args.seed, rows), truth
            )
    import dpharness

    namespace: dict = {}
    exec(_DECLARE, namespace)  # the same declaration, proved here: not part of the release's time
    if "error" not in results["dpharness"]:
        results["dpharness"]["verdict"] = dpharness.prove(namespace["m"]).verdict.value
    load = os.getloadavg()[0]
    lines = [
        "# User-level per-country count and mean, in memory, against peers (benchmarks/bench_groupby_user_level.py)",
        "",
        f"{datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores, load {load:.2f} at the end; "
        f"{rows:.0e} rows, {len(truth)} countries, release seed {args.seed}; "
        f"command: `python benchmarks/bench_groupby_user_level.py --rows {args.rows:g}"
        + (" --opendp-python PATH" if args.opendp_python else "")
        + (" --pipeline-dp-python PATH" if args.pipeline_dp_python else "")
        + "`",
        "",
        "| library | released countries | median relative error of the means | largest relative error (50 largest countries) "
        "| release (s) | whole process (s) | peak RSS (MB) | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        if "error" in r:
            lines.append(f"| {name} | error: {r['error']} | | | | | | |")
            continue
        lines.append(
            f"| {name} | {r['released']} | {r['median_rel_error']:.4f} | {r['max_rel_error_largest']:.4f} "
            f"| {r['seconds']:.1f} | {r['wall']:.1f} "
            f"| {r['peak_mb']:.0f} | {r['verdict']} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
