"""A team's real pipeline through the gate, cold, at the gate's defaults, as a user pays for it: the whole
process tree of one ``dpharness gate --module teamdp --own --no-cache`` command (its wall time; the CPU of
its worker processes is not measured here).

The package is ``benchmarks/team_pipeline/teamdp``: a 250-key group-by (a count and a clamped sum per
key), a median and a count under one budget, and a 1 000-round DP-SGD, registering nothing but the
mechanisms: the gate's default time budget sizes each audit (every round of the DP-SGD audited). Then, for each
mechanism, the same run with that mechanism's noise halved (``TEAMDP_HALVE=<name>``): the gate must
fail it and name the derived bound. ``--load N`` runs N busy processes beside every gate run (the
verdicts must not change).

Run: ``python benchmarks/bench_team_gate.py [--load 0] [--halved] [--out benchmarks/results/team_gate.md]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import resource
import subprocess
import sys
import time

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "team_pipeline")
NAMES = ("income_by_region", "median_and_count", "dpsgd")


def _busy() -> None:  # pragma: no cover - a load generator
    while True:
        pass


def _gate(halve: str = "") -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "dpharness.cli", "gate", "--module", "teamdp", "--own", "--no-cache"],
        cwd=HERE,
        capture_output=True,
        text=True,
        env={**os.environ, "TEAMDP_HALVE": halve, "PYTHONPATH": HERE},
        timeout=3600,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [
        line for line in run.stdout.splitlines() if line.split(" ", 1)[0] in ("PASS", "FAIL", "TIMEOUT", "PARTIAL")
    ]
    return {"code": run.returncode, "wall": wall, "cpu": cpu, "lines": lines, "tail": run.stdout.splitlines()[-3:]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", type=int, default=0, help="busy processes beside each gate run")
    ap.add_argument("--halved", action="store_true", help="also run each mechanism with its noise halved")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    busy = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for p in busy:
        p.start()
    try:
        time.sleep(2 if busy else 0)
        load = os.getloadavg()[0]
        runs = [("defaults", _gate())]
        if args.halved:
            runs += [(f"{name} noise halved", _gate(name)) for name in NAMES]
    finally:
        for p in busy:
            p.terminate()
    out = [
        f"# The team pipeline through the gate, cold ({datetime.date.today()})",
        "",
        f"Command: `python benchmarks/bench_team_gate.py --load {args.load}{' --halved' if args.halved else ''}`, which runs "
        "`dpharness gate --module teamdp --own --no-cache` in `benchmarks/team_pipeline`. Machine "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; {args.load} busy processes "
        f"beside it; load average {load:.2f} at the start. Wall time of the whole command (the CPU of its worker "
        "processes is not measured here: they are started by a fork server, not waited for by the command).",
        "",
    ]
    for what, r in runs:
        out += [f"## {what}: exit {r['code']}, {r['wall']:.0f} s wall", "", "```text"]
        out += r["lines"] + r["tail"][-1:] + ["```", ""]
    text = "\n".join(out)
    print(text)
    print(json.dumps([(w, r["code"], round(r["wall"], 1), round(r["cpu"], 1)) for w, r in runs]))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
