"""The audit's overhead as a user pays it: the CPU of the whole process tree of one
``dpharness audit NAME --samples N --workers 2`` command (cold: interpreter start, imports, the worker
pool, training, certification, statistics) over the CPU of drawing the same outputs with the
mechanism alone (``m.sample`` on the audit's pair, N a side, in chunks of 10^6, in one warm process:
after the sampler's first calls, whose cost of loading its code is shown apart as its start-up), and
over the CPU of that drawing as a user pays it too: the whole process that draws them, cold (the
interpreter, the imports, the start-up and the draws). Each figure is the least of ``--repeats`` runs.

Targets (issue 36): laplace at 10^7 a side at most 1.5× its sampling and the marginal cost from 10^7 to
5·10^7 (the difference of the audit's CPU over the difference of the sampling's) at most 1.3×; rappor
at 10^7 at most 3×.

Run: ``python benchmarks/bench_audit_overhead.py [--samples 1e7 5e7] [--names laplace] [--repeats 3]
[--out benchmarks/results/audit_overhead.md]``. Measure on an idle machine: nothing else running.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time

_SAMPLING = """
import sys, time
import numpy as np
from dpharness import registry
m = registry.get(sys.argv[1])
m = m() if isinstance(m, type) else m
a, b = m.example_pair()
n = int(float(sys.argv[2]))
rng = np.random.default_rng(0)
start = time.process_time()
for data in (a, b):  # warm-up: a sampler's first call loads its code (numba's cached loops: about 0.6 s)
    m.sample(data, 16, rng)
warm = time.process_time() - start
start = time.process_time()
for data in (a, b):
    left = n
    while left:
        k = min(left, 1_000_000)
        m.sample(data, k, rng)
        left -= k
print(warm, time.process_time() - start)
"""


def _session_cpu(sid: int, seen: dict) -> None:
    """Record the CPU (user + system, seconds) of every process in session ``sid`` (``/proc/PID/stat``)."""
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6 of stat: the session id
            seen[pid] = max(seen.get(pid, 0.0), (int(fields[11]) + int(fields[12])) / tick)


# the commands run with their bytecode cached, as an installed package has it (pip compiles it on install; a
# checkout writes it on its first import): PYTHONDONTWRITEBYTECODE, where the shell sets it, is dropped, and each
# command runs once unmeasured first
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _tree_cpu(cmd: list[str]) -> tuple[float, float, int, str]:
    """(CPU seconds of every process of the command's session: the command, its workers and their helpers,
    read from /proc every 50 ms until the command ends; wall seconds; exit code; last line)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env=_ENV
    )
    seen: dict = {}
    while proc.poll() is None:
        _session_cpu(proc.pid, seen)
        time.sleep(0.05)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    lines = [line for line in out.splitlines() if line.strip()]
    return sum(seen.values()), wall, proc.returncode, lines[-1] if lines else err.strip()[-200:]


def _sampling_cpu(name: str, n: float) -> tuple[float, float, float]:
    """(CPU of the sampler's first calls, 16 samples a side: loading its code; CPU of drawing N a side after
    them; CPU of the whole process that does both, cold)."""
    cpu, _wall, code, last = _tree_cpu([sys.executable, "-c", _SAMPLING, name, str(n)])
    if code:
        raise SystemExit(f"the sampling process of {name} failed: {last}")
    warm, draw = last.split()
    return float(warm), float(draw), cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=float, nargs="+", default=[1e7, 5e7])
    ap.add_argument("--names", nargs="+", default=["laplace"])
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each command; the least CPU of each is kept")
    args = ap.parse_args(argv)
    load = os.getloadavg()
    rows, measured = [], {}
    for name in args.names:
        for n in args.samples:
            cmd = [sys.executable, "-m", "dpharness.cli", "audit", name, "--samples", str(int(n)), "--workers", "2"]
            _tree_cpu(cmd), _sampling_cpu(name, n)  # unmeasured: the bytecode written
            runs = [_tree_cpu(cmd) for _ in range(args.repeats)]
            cpu, wall, code, last = min(runs)
            drawn = [_sampling_cpu(name, n) for _ in range(args.repeats)]
            warm, draw, cold = min(d[0] for d in drawn), min(d[1] for d in drawn), min(d[2] for d in drawn)
            measured[(name, n)] = (cpu, draw)
            rows.append(
                f"| {name} | {int(n):,} | {cpu:.2f} | {wall:.2f} | {draw:.2f} | {warm:.2f} | {cold:.2f} | "
                f"{cpu / draw:.2f}× | {cpu / (draw + warm):.2f}× | {cpu / cold:.2f}× | {max(r[2] for r in runs)} | "
                f"{last[:90]} |"
            )
            print(rows[-1], flush=True)
    marginal = []
    for name in args.names:
        ns = sorted(n for (k, n) in measured if k == name)
        for lo, hi in zip(ns, ns[1:]):
            (c0, d0), (c1, d1) = measured[(name, lo)], measured[(name, hi)]
            marginal.append(f"| {name} | {int(lo):,} → {int(hi):,} | {(c1 - c0) / (d1 - d0):.2f}× |")
    text = "\n".join(
        [
            "# The audit's CPU as a user pays it, against its sampling",
            "",
            f"Command: `python benchmarks/bench_audit_overhead.py --samples {' '.join(f'{n:g}' for n in args.samples)} "
            f"--names {' '.join(args.names)} --repeats {args.repeats}`; {datetime.date.today()}; {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start; "
            f"each figure the least of {args.repeats} run(s), after one unmeasured run of each command (its bytecode "
            "cached, as an installed package has it).",
            "Audit CPU: user + system time of every process of the session of `dpharness audit NAME --samples N "
            "--workers 2` (cold: the command, its worker processes and their helpers), read from /proc every "
            "50 ms (the last 50 ms of each process may be missed). Sampling CPU: `m.sample` on the audit's example pair, N a side in chunks of "
            "10^6, in one warm process (imports not counted, nor the sampler's first calls of 16 samples a side, which load its "
            "code — numba's cached loops for the exact samplers —, shown apart as its start-up). Sampling process CPU: "
            "the whole process that draws them, cold (interpreter, imports, start-up, draws), measured as the audit is.",
            "",
            "| mechanism | samples a side | audit CPU s | audit wall s | sampling CPU s | sampler start-up CPU s | "
            "sampling process CPU s | audit / sampling | audit / (sampling + start-up) | audit / sampling process | "
            "exit | last line |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            "Marginal cost (difference of audit CPU over difference of sampling CPU):",
            "",
            "| mechanism | samples a side | marginal |",
            "|---|---|---|",
            *marginal,
            "",
        ]
    )
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
