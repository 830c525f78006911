"""CPU of each phase of one audit in one process (``workers=1``): training, event proposal, ranking,
certification, against the mechanism's own sampling CPU for the same number of samples.

Issue 20 asks the audit's CPU to be at most 3× the mechanism's sampling CPU at 10^7 samples a side;
this benchmark says which phase the rest goes to. Cases: issue 20's catalog mechanisms, the numpy
callable of :mod:`bench_scaling` (``numpy_laplace``) and a team's own parts mechanism
(``dp.clamp(0, 1) >> dp.sum() >> dp.laplace(scale=1)``), each on one fixed pair (a catalog
mechanism's ``example_pair()``), seed 0, default options, one BLAS thread (as :func:`audit` sets).

How it is measured: in a fresh interpreter, one audit at 10^5 samples a side first (imports and
caches warm), then the audit at ``--samples`` with the driver's four phase functions
(``_training_outputs``, ``_propose_pair``, ``_rank``, ``_certify`` of :mod:`dpharness.auditors._audit`,
reported as train / propose / rank / certify) wrapped by ``time.process_time()``; the total is the whole ``audit()`` call. Sampling: the mechanism drawing
``samples`` outputs on each of the pair's two inputs in chunks of 10^6, one BLAS thread. The two
alternate ``--repeats`` times and the least of each is kept: on shared cores the CPU time of the
same work grows with what runs beside it (by a third and more at a load of 2 on 2 cores), so
figures taken minutes apart are not comparable. Training and certification include drawing their
samples (about 1.0× sampling of the whole audit together), so the ratio cannot be below about 1.

Run: ``python benchmarks/bench_phases.py [--samples 1e7] [--repeats 3] [--cases laplace rappor ...]
[--out benchmarks/results/phases.md]``. Timings depend on the load, printed with each row.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

import bench_scaling  # the cases, the load and the commit, as the scaling benchmark reads them

_CASES = [
    "laplace",
    "discrete_laplace",
    "randomized_response",
    "rappor",
    "noisy_histogram",
    "report_noisy_max_laplace",
    "sparse_vector",
    "clamped_mean",
    "numpy_callable",
    "parts_sum",
]
# the table's column -> the driver's function timed for it (in one process every pair's stage runs here)
_PHASES = {"_train": "_training_outputs", "_propose": "_propose_pair", "_rank_all": "_rank", "_certify": "_certify"}
_CHUNK = 1_000_000


def _case(name: str):
    """(mechanism, data, neighbor, keyword arguments of audit, sampler fn(data, size, rng)): bench_scaling's
    cases, and ``parts_sum``, a team's ``clamp >> sum >> laplace``."""
    if name != "parts_sum":
        return bench_scaling._case(name)
    from dpharness import AddRemove, PureDP, RealInterval
    from dpharness import parts as dp

    m = dp.mechanism(
        name="team_sum",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.clamp(0, 1) >> dp.sum() >> dp.laplace(scale=1),
        claim=PureDP(1),
    )
    a, b = m.example_pair()
    return m, a, b, {}, m.sample


def _one(name: str, samples: int, repeats: int) -> dict:
    from threadpoolctl import threadpool_limits

    from dpharness.auditors import _audit, audit

    mech, a, b, kwargs, fn = _case(name)
    audit(mech, a, b, samples=100_000, workers=1, progress=False, **kwargs)  # warm: imports, caches
    spent = dict.fromkeys(_PHASES, 0.0)

    def timed(phase):
        inner = getattr(_audit, _PHASES[phase])

        def run(*args, **kw):
            t0 = time.process_time()
            try:
                return inner(*args, **kw)
            finally:
                spent[phase] += time.process_time() - t0

        return run

    for phase in _PHASES:
        setattr(_audit, _PHASES[phase], timed(phase))

    def sampling() -> float:
        rng = np.random.default_rng(0)
        t1 = time.process_time()
        for x in (a, b):
            left = samples
            while left > 0:
                fn(x, min(_CHUNK, left), rng)
                left -= _CHUNK
        return time.process_time() - t1

    # audit and sampling alternate, and the least of each is kept: on shared cores a process's CPU time
    # for the same work grows with what runs beside it, and alternating exposes both to the same load
    runs, draws = [], []
    with threadpool_limits(limits=1):
        for _ in range(repeats):
            draws.append(sampling())
            for phase in _PHASES:
                spent[phase] = 0.0
            t0 = time.process_time()
            r = audit(mech, a, b, samples=samples, workers=1, progress=False, seed=0, **kwargs)
            runs.append({**spent, "total": time.process_time() - t0})
    best = min(runs, key=lambda run: run["total"])
    return {
        **best,
        "sampling": min(draws),
        "bound": r.epsilon_lower_bound,
        "family": r.extra.get("family"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=float, default=1e7, help="samples a side (default 1e7)")
    ap.add_argument("--cases", nargs="*", default=_CASES, choices=_CASES)
    ap.add_argument("--repeats", type=int, default=3, help="audits and samplings per case, alternated (least kept)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "phases.md"))
    ap.add_argument("one", nargs="?", help=argparse.SUPPRESS)  # internal: run one case in this process
    args = ap.parse_args()
    samples = int(args.samples)
    if args.one:
        print(json.dumps(_one(args.one, samples, args.repeats)))
        return
    import scipy

    start = bench_scaling._load()
    rows = []
    for name in args.cases:
        load = bench_scaling._load()
        out = subprocess.run(
            [sys.executable, __file__, name, "--samples", str(samples), "--repeats", str(args.repeats)],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode:
            raise RuntimeError(f"{name} failed:\n{out.stderr[-3000:]}")
        res = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((name, res, load))
        print(name, json.dumps(res), flush=True)
    lines = [
        "# CPU of each phase of an audit, in one process",
        "",
        f"Generated by `python benchmarks/bench_phases.py --samples {args.samples:g} --repeats {args.repeats}` at {bench_scaling._git()}.",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs), Python "
        f"{platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}; load average {start} at "
        f"the start, {bench_scaling._load()} at the end (each row gives the load when it started). Seed 0, default options, "
        "`workers=1`, one fixed pair per audit (the catalog's example pair).",
        "CPU seconds (`time.process_time()`): the four phases of the driver and the whole `audit()` call; "
        "sampling = the mechanism drawing the same outputs (samples a side on both inputs) in chunks of 10^6, "
        f"one BLAS thread. Audit and sampling alternate {args.repeats} times in one process and the least of each "
        "is kept (the audit's phases from its least run). Training and certification include drawing their samples.",
        "",
        "| case | samples a side | training | proposal | ranking | certification | audit | sampling | audit / sampling"
        " | bound | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r, load in rows:
        lines.append(
            f"| {name} | {samples:,} | {r['_train']:.2f} | {r['_propose']:.2f} | {r['_rank_all']:.2f} | "
            f"{r['_certify']:.2f} | {r['total']:.2f} | {r['sampling']:.2f} | {r['total'] / r['sampling']:.2f} | "
            f"{r['bound']:.6f} | {load} |"
        )
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
