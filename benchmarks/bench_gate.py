"""Cold and warm `dpharness gate` on the built-ins: wall time and the CPU of the whole process tree.

The gate's workers are forked by a fork server, which is not a child the gate waits for; this script
makes itself the child subreaper (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``), so every process the gate
starts is reaped here and ``getrusage(RUSAGE_CHILDREN)`` counts them all. Each round: an empty cache
directory (cold), then the same command again (warm, every check from the cache). Writes
``benchmarks/results/gate.md`` with the machine, the load before each run, the commit and versions.

    python benchmarks/bench_gate.py --rounds 2 --jobs 2 [--samples N]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "gate.md"


def _subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed (Linux only)")


def _run(argv: list[str], keep: Path | None = None) -> tuple[float, float, str, float]:
    """(wall seconds of the gate process, CPU seconds of its process tree, its summary line, load);
    ``keep``: a file to write the gate's output to (its per-check lines, to compare runs)."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - t0
    while True:  # the fork server and anything else the gate left to be reaped
        try:
            os.wait()
        except ChildProcessError:
            break
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"the gate exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    summary = proc.stdout.strip().splitlines()[-1]
    if keep is not None:
        keep.write_text(proc.stdout, encoding="utf-8")
    return wall, cpu, summary, load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--samples", type=int, default=None, help="the gate's --samples (default: the gate's own, 10^6 a side)"
    )
    ap.add_argument("--lines", type=Path, default=None, help="write the first cold gate's output to this file")
    ap.add_argument(
        "--no-write", action="store_true", help=f"print the table only (do not append it to {RESULTS.name})"
    )
    args = ap.parse_args()
    _subreaper()
    exe = str(Path(sys.executable).with_name("dpharness"))
    rows = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory() as cache:
            argv = [exe, "gate", "--jobs", str(args.jobs), "--cache-dir", cache]
            if args.samples is not None:
                argv += ["--samples", str(args.samples)]
            rows.append(("cold", *_run(argv, args.lines if i == 0 else None)))
            rows.append(("warm", *_run(argv)))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    import numpy
    import pebble
    import scipy
    import sympy
    import z3

    budget = "defaults (10^6 samples a side" if args.samples is None else f"--samples {args.samples} (a side"
    flag = "" if args.samples is None else f" --samples {args.samples}"
    lines = [
        f"Measured by `python benchmarks/bench_gate.py --rounds {args.rounds} --jobs {args.jobs}{flag}` at commit {commit} "
        f"on {os.cpu_count()} cores ({platform.processor() or platform.machine()}), Python {platform.python_version()}, "
        f"numpy {numpy.__version__}, scipy {scipy.__version__}, sympy {sympy.__version__}, z3 {z3.get_version_string()}, "
        f"pebble {pebble.__version__}; {budget}, seed 0). CPU: the gate's whole process tree.",
        "",
        "| run | load (1 min) | wall (s) | CPU (s) | gate's own line |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {kind} | {load:.2f} | {wall:.1f} | {cpu:.1f} | {summary} |" for kind, wall, cpu, summary, load in rows
    ]
    print("\n".join(lines))
    if args.no_write:
        return
    with open(RESULTS, "a", encoding="utf-8") as fh:
        fh.write("\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
