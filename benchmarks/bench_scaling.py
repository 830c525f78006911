"""Scaling of a whole audit (training, proposal, ranking, certification) with workers: wall time, the
CPU of the parent and of the workers apart, the parent's share, the audit's CPU over the mechanism's
own sampling CPU, peak memory, and the speedup Amdahl's law allows from the measured parent share.

Cases: the catalog's laplace, rappor and noisy_histogram (and, with ``--all``, the rest of issue 20's
list: discrete_laplace, randomized_response, report_noisy_max_laplace, sparse_vector, clamped_mean),
a team's own mechanism declared from parts (``parts_mechanism``: a clamped sum and a count with
Laplace noise), a numpy callable ``fn(data, size, rng)`` and a per-call function ``fn(data)``
(``vectorized=False``).
Every audit is on one fixed pair (a catalog mechanism's ``example_pair()``; the pair search is not
timed) with seed 0 and the default options, in a fresh interpreter.

How CPU is measured (the parent's ``RUSAGE_CHILDREN`` does not see loky's or dask's workers, which
are still alive when the audit returns): the parent's CPU is ``RUSAGE_SELF``; the workers' CPU is the
user + system time of every live descendant process read with psutil at the end of the audit (a
fresh interpreter has none at the start) plus ``RUSAGE_CHILDREN`` (descendants already reaped).
Peak memory: the parent's ``ru_maxrss`` and the largest ``VmHWM`` of its descendants.

The mechanism's own sampling CPU: drawing the same number of outputs (``samples`` a side on each of
the pair's inputs) in chunks of 10^6 in one process with one BLAS thread, median of three, in a
fresh interpreter. "audit / sampling" is the audit's CPU (parent + workers) over that.

Amdahl: with parent share ``f`` of the CPU (serial) and the rest spread evenly, the speedup on ``k``
workers over one is at most ``1 / (f + (1 - f) / k)``. That is the issue's measure; the second
projection also counts as serial the pairs' stage (each pair's training, proposal and ranking is one
task: with one pair it runs on one worker whatever ``k``), taking its wall time as its CPU:
``f' = min(1, (parent CPU + pairs' wall / pairs) / audit CPU)``.

Run: ``python benchmarks/bench_scaling.py [--sizes 1e6 1e7] [--workers 1 2] [--all] [--dask]
[--dask-workers 2 4] [--per-call-sizes 1e5 1e6] [--out benchmarks/results/scaling.md] [--label TEXT]``. 10^8 a side is
accepted in ``--sizes`` (minutes a row on 2 cores). Results depend on the load, printed with each
row (``/proc/loadavg``); CPU ratios much less than wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

_BASIC = ("laplace", "rappor", "noisy_histogram")
_MORE = ("discrete_laplace", "randomized_response", "report_noisy_max_laplace", "sparse_vector", "clamped_mean")
_SAMPLING_CHUNK = 1_000_000


def numpy_laplace(d, size, rng):
    """A user's vectorised callable: Laplace(1) noise on a float, rounded to a 2^-20 grid."""
    return np.round((float(np.asarray(d).reshape(-1)[0]) + rng.laplace(0.0, 1.0, size)) * 2**20) / 2**20


def per_call_laplace(d):
    """A user's per-call function: one Laplace(1) draw (difference of two exponentials, :mod:`random`)."""
    return float(d) + random.expovariate(1.0) - random.expovariate(1.0)


def _team_mechanism():
    """A team's own mechanism declared from parts: a clamped sum and a count, each with Laplace noise."""
    from dpharness import AddRemove, PureDP, RealInterval
    from dpharness import parts as dp

    return dp.mechanism(
        name="team_sum_and_count",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.clamp(0, 100) >> dp.compose(dp.sum() >> dp.laplace(scale=200), dp.count() >> dp.laplace(scale=2)),
        claim=PureDP(1),
    )


def _case(name: str):
    """(mechanism, data, neighbor, keyword arguments of audit, sampler fn(data, size, rng) for the sampling CPU)."""
    if name == "numpy_callable":
        return numpy_laplace, 0.0, 1.0, {"epsilon": 1.0}, numpy_laplace
    if name == "per_call":

        def per_call_sizes(d, size, rng):
            return np.array([per_call_laplace(d) for _ in range(size)])

        return per_call_laplace, 0.0, 1.0, {"epsilon": 1.0, "vectorized": False}, per_call_sizes
    if name == "parts_mechanism":
        m = _team_mechanism()
        a, b = m.example_pair()
        return m, a, b, {}, m.sample
    from dpharness import registry

    m = registry.catalog()[name]()
    a, b = m.example_pair()
    return m, a, b, {}, m.sample


def _descendants_cpu_and_peak() -> tuple[float, float]:
    import psutil

    cpu, peak = 0.0, 0.0
    for proc in psutil.Process().children(recursive=True):
        try:
            t = proc.cpu_times()
            cpu += t.user + t.system
            with open(f"/proc/{proc.pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) / 1024)
        except (psutil.Error, OSError):
            continue
    return cpu, peak


def _one(spec: dict) -> dict:
    """One audit in this (fresh) process; figures as a dict."""
    from dpharness.auditors import audit

    mech, a, b, kwargs, _fn = _case(spec["case"])
    cluster = "local" if spec.get("dask") else None
    if spec.get("warm"):  # the same audit once before: the pool is up and its workers have imported the modules
        audit(
            mech,
            a,
            b,
            samples=spec["samples"],
            seed=spec.get("seed", 0),
            workers=spec["workers"],
            progress=False,
            cluster=cluster,
            **kwargs,
        )
    base_cpu, _ = _descendants_cpu_and_peak()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = audit(
        mech,
        a,
        b,
        samples=spec["samples"],
        seed=spec.get("seed", 0),
        workers=spec["workers"],
        progress=False,
        cluster=cluster,
        **kwargs,
    )
    wall = time.perf_counter() - t0
    kids_cpu, kids_peak = _descendants_cpu_and_peak()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    parent = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    reaped = (k1.ru_utime - k0.ru_utime) + (k1.ru_stime - k0.ru_stime)
    return {
        "wall": wall,
        "parent_cpu": parent,
        "worker_cpu": kids_cpu - base_cpu + reaped,
        "parent_peak_mb": r1.ru_maxrss / 1024,
        "worker_peak_mb": kids_peak,
        "bound": r.epsilon_lower_bound,
        "counts": r.counts,
        "family": r.extra.get("family"),
        "train": r.extra.get("train_samples"),
        "events": r.events_tested,
        "used_workers": r.extra.get("workers"),
        "method": r.method,
        "witness": r.witness_description,
        "pairs_s": r.extra["phases"]["pairs"]["seconds"],
        "pairs_on_workers": r.extra["phases"]["pairs"]["on_workers"],
        "cert_s": r.extra["phases"]["certification"]["seconds"],
        "n_pairs": len(r.extra.get("pairs") or [None]),
    }


def _sampling(spec: dict) -> dict:
    """CPU seconds the mechanism takes to draw ``samples`` outputs on each input, chunks of 10^6 (median of 3)."""
    from threadpoolctl import threadpool_limits

    _mech, a, b, _kwargs, fn = _case(spec["case"])
    n = spec["samples"]
    times = []
    with threadpool_limits(limits=1):
        for rep in range(spec.get("repeats", 3)):
            rng = np.random.default_rng(rep)
            t0 = time.process_time()
            for x in (a, b):
                left = n
                while left > 0:
                    k = min(_SAMPLING_CHUNK, left)
                    fn(x, k, rng)
                    left -= k
            times.append(time.process_time() - t0)
    return {"sampling_cpu": statistics.median(times)}


def _run(mode: str, spec: dict) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, mode, json.dumps(spec)], capture_output=True, text=True, check=False
    )
    if out.returncode:
        raise RuntimeError(f"{mode} {spec} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def _git() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=os.path.dirname(__file__),
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def _amdahl(f: float, k: int) -> float:
    return 1.0 / (f + (1.0 - f) / k)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", type=float, default=[1e6, 1e7])
    ap.add_argument("--per-call-sizes", nargs="*", type=float, default=[1e5, 1e6])
    ap.add_argument("--workers", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--all", action="store_true", help="also issue 20's other five catalog mechanisms")
    ap.add_argument("--only", nargs="*", default=None, help="only these cases")
    ap.add_argument(
        "--dask", action="store_true", help="also a dask LocalCluster (laplace, numpy callable; see --dask-workers)"
    )
    ap.add_argument(
        "--dask-workers", nargs="*", type=int, default=[2], help="worker counts of the LocalCluster rows (default 2)"
    )
    ap.add_argument(
        "--warm",
        nargs="*",
        type=float,
        default=[],
        help="at these sizes, also a row per worker count > 1 measuring a second identical audit in "
        "the same process (the pool already up, its workers' imports done)",
    )
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "scaling.md"))
    ap.add_argument("--label", default="", help="a line saying which code was measured")
    args = ap.parse_args(argv)
    cases = [*_BASIC, *(_MORE if args.all else ()), "parts_mechanism", "numpy_callable", "per_call"]
    if args.only:
        cases = [c for c in cases if c in args.only]
    rows = []
    load_start = _load()
    for case in cases:
        sizes = args.per_call_sizes if case == "per_call" else args.sizes
        for n in (int(x) for x in sizes):
            samp = _run("--sampling", {"case": case, "samples": n})["sampling_cpu"]
            configs = [(w, False, False) for w in args.workers]
            if n in {int(x) for x in args.warm} and case != "per_call":
                configs += [(w, False, True) for w in args.workers if w > 1]
            if args.dask and case in ("laplace", "numpy_callable"):
                configs += [(w, True, False) for w in args.dask_workers]
            for w, dask, warm in configs:
                load = _load()
                res = _run("--one", {"case": case, "samples": n, "workers": w, "dask": dask, "warm": warm})
                res.update(case=case, samples=n, workers=w, dask=dask, warm=warm, sampling_cpu=samp, load=load)
                rows.append(res)
                cpu = res["parent_cpu"] + res["worker_cpu"]
                print(
                    f"{case:26s} n={n:>11,} w={w}{' dask' if dask else ' warm' if warm else '     '} wall {res['wall']:7.2f} s  "
                    f"parent {res['parent_cpu']:6.2f} s  workers {res['worker_cpu']:6.2f} s  share "
                    f"{res['parent_cpu'] / cpu:.2f}  audit/sampling {cpu / samp:6.1f}  bound {res['bound']:.6f}  "
                    f"load {load}",
                    flush=True,
                )
    _write(args, rows, load_start)


def _write(args, rows: list[dict], load_start: str) -> None:
    import numpy
    import scipy

    same = {}
    for r in rows:
        if r["case"] == "per_call" and r["workers"] == 1 and not r["dask"]:
            continue  # in this process a per-call function draws from the caller's own random state
        same.setdefault((r["case"], r["samples"]), set()).add(
            (r["bound"], json.dumps(r["counts"], sort_keys=True), r["witness"])
        )
    lines = [
        "# Scaling of a whole audit: workers, parent share, cost over sampling",
        "",
        f"Generated by `python benchmarks/bench_scaling.py {' '.join(sys.argv[1:])}` at commit {_git()}"
        + (f" ({args.label})" if args.label else "")
        + ".",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs), Python "
        f"{platform.python_version()}, numpy {numpy.__version__}, scipy {scipy.__version__}; load average "
        f"{load_start} at the start, {_load()} at the end (each row gives the load when it started). Seed 0, "
        "default options, one fixed pair per audit (the catalog's example pair; the pair search is not timed).",
        "CPU: parent = RUSAGE_SELF; workers = user + system time of the live descendants (psutil) at the end plus "
        "RUSAGE_CHILDREN. Sampling = the mechanism drawing the same outputs (samples a side on both inputs) in "
        "chunks of 10^6 in one process, one BLAS thread, median of 3. Amdahl: 1 / (f + (1 - f) / k) with f the "
        "parent share. A row marked (warm) measures the second of two identical audits in one process: the pool is "
        "already up and its workers have imported the modules (the other rows start cold).",
        "",
        "| case | samples a side | workers | wall s | pairs' stage s | certification s | parent CPU s | worker CPU s | "
        "parent share | audit / sampling CPU | Amdahl ×16 | Amdahl ×64 | serial share f' | Amdahl' ×16 | "
        "parent peak MB | worker peak MB | bound | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cpu = r["parent_cpu"] + r["worker_cpu"]
        f = r["parent_cpu"] / cpu if cpu else 1.0
        where = (
            f"{r['workers']} (dask)" if r["dask"] else f"{r['workers']} (warm)" if r.get("warm") else str(r["workers"])
        )
        amd = (f"{_amdahl(f, 16):.1f}", f"{_amdahl(f, 64):.1f}") if r["workers"] > 1 else ("", "")
        serial = min(1.0, (r["parent_cpu"] + r["pairs_s"] / r["n_pairs"]) / cpu) if cpu else 1.0
        amd2 = (f"{serial:.2f}", f"{_amdahl(serial, 16):.1f}") if r["workers"] > 1 else ("", "")
        lines.append(
            f"| {r['case']} | {r['samples']:,} | {where} | {r['wall']:.2f} | {r['pairs_s']:.2f}"
            f"{'' if r['pairs_on_workers'] else ' (here)'} | {r['cert_s']:.2f} | {r['parent_cpu']:.2f} | "
            f"{r['worker_cpu']:.2f} | {f:.2f} | {cpu / r['sampling_cpu']:.1f} | {amd[0]} | {amd[1]} | {amd2[0]} | "
            f"{amd2[1]} | {r['parent_peak_mb']:.0f} | {r['worker_peak_mb']:.0f} | {r['bound']:.6f} | {r['load']} |"
        )
    lines += [
        "",
        "Same result (bound, counts, witness) for every worker count and the cluster, per case and size "
        "(per_call: pool and cluster rows; with one worker it draws from the caller's random state): "
        + ", ".join(f"{c} {n:,}: {'yes' if len(v) == 1 else 'NO'}" for (c, n), v in same.items()),
        "",
    ]
    lines += ["Certifying events and bounds (seed 0):", ""]
    for (c, n), _v in same.items():
        r = next(x for x in rows if x["case"] == c and x["samples"] == n)
        lines.append(
            f"- {c} at {n:,}: ε ≥ {r['bound']:.6f} (family {r['family']}; training {r['train']:,} a side; "
            f"{r['events']} events)"
        )
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] in ("--one", "--sampling"):
        spec = json.loads(sys.argv[2])
        result = _one(spec) if sys.argv[1] == "--one" else _sampling(spec)
        print(json.dumps(result, default=lambda o: o.item() if hasattr(o, "item") else str(o)))
    else:
        main()
