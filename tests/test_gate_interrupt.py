"""Ctrl-C stops ``dpharness gate`` promptly (issue 17): on SIGINT the queued checks are cancelled, the
running ones are stopped with their worker processes (and the workers' own children: none is left
behind), the checks that had finished are stored in the cache, one line says so, and the exit code
is 130 without a traceback.

Deterministic: the slow mechanism sleeps in its sampler (it never finishes by itself), the quick one
is audited on 20 000 samples a side; the test waits for the quick one's progress line before it
sends the signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _procs import ctrl_c_not_ignored  # noqa: F401 - the fixture, used by name

pytestmark = pytest.mark.usefixtures("ctrl_c_not_ignored")

PACKAGE = '''
import dataclasses
import os
import time

import numpy as np

from dpharness import AddRemove, InputSpec, IntegerRange, Mechanism, PureDP, register


@dataclasses.dataclass(frozen=True, kw_only=True)
class QuickCount(Mechanism):
    """Two-sided geometric count, ratio exp(-1/scale), add/remove one record in 0..9; claims ε = 1."""
    name = "interrupt_quick"
    scale: float = 1.0
    claim: PureDP = PureDP(1)

    @property
    def input_spec(self):
        return InputSpec(IntegerRange(0, 9), AddRemove(), "dataset")

    def _sample(self, data, size, rng):
        p = 1 - np.exp(-1 / self.scale)
        return len(data) + rng.geometric(p, size) - rng.geometric(p, size)

    def _law(self, data):
        raise NotImplementedError("opaque")

    def example_pair(self):
        return np.array([1]), np.array([1, 2])


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlowCount(QuickCount):
    """The same count, whose sampler sleeps (it stands for a long audit): writes its pid first."""
    name = "interrupt_slow"

    def _sample(self, data, size, rng):
        with open(os.environ["INTERRUPT_PIDS"], "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        time.sleep(600)
        return QuickCount._sample(self, data, size, rng)


register(QuickCount, proof="audit-only")
register(SlowCount, proof="audit-only")
'''


def _children() -> dict[int, int]:
    """pid -> parent pid of every process (Linux /proc)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            out[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def _descendants(root: int) -> set[int]:
    parents = _children()
    found, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the worker processes")
@pytest.mark.parametrize("jobs", ["2", "1"])
def test_ctrl_c_stops_the_gate_keeps_finished_checks_and_leaves_no_worker(tmp_path, jobs):
    (tmp_path / "interrupt_pkg.py").write_text(textwrap.dedent(PACKAGE))
    pids = tmp_path / "pids.txt"
    cache = tmp_path / "cache"
    env = {**os.environ, "INTERRUPT_PIDS": str(pids), "PYTHONPATH": str(tmp_path)}
    # with --jobs 1 the checks run one after the other in the gate's process: the quick one first
    argv = [
        sys.executable,
        "-m",
        "dpharness.cli",
        "gate",
        "--module",
        "interrupt_pkg",
        "--own",
        "--jobs",
        jobs,
        "--samples",
        "20000",
        "--cache-dir",
        str(cache),
        "interrupt_quick",
        "interrupt_slow",
    ]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = ""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            # the quick check has finished (its result is written) and the slow one is sleeping in its sampler
            seen += _read_available(proc)
            if pids.exists() and "interrupt_quick: ok" in seen:
                break
            time.sleep(0.2)
        assert proc.poll() is None, (seen, proc.communicate())
        workers = _descendants(proc.pid)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:  # the workers too: a worker left alive holds the pipes, and communicate would wait
            for pid in _descendants(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    # the slow check never finishes by itself (it sleeps 600 s), so any prompt exit shows the signal stopped it;
    # the bound is wide for loaded machines (the issue asks for 5 s, which an idle machine meets)
    assert elapsed < 20, f"the gate took {elapsed:.1f} s to stop after SIGINT"
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and "1 of 2 checks finished" in lines[0], err
    assert len(list(cache.glob("gate/*/*.json"))) == 1, "the finished check was not stored in the cache"
    time.sleep(0.5)
    left = sorted(p for p in workers | {int(x) for x in pids.read_text().split()} if _alive(p))
    assert not left, f"processes left running after the gate exited: {left}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the worker processes")
def test_a_gate_killed_outright_leaves_no_worker(tmp_path):
    """SIGKILL runs no clean-up in the gate: its workers (children of the fork server, not of the gate)
    notice that the gate is gone and end, with what they started, within seconds, instead of running
    their checks (here a sampler asleep for 600 s) to the end of their time limits."""
    (tmp_path / "interrupt_pkg.py").write_text(textwrap.dedent(PACKAGE))
    pids = tmp_path / "pids.txt"
    env = {**os.environ, "INTERRUPT_PIDS": str(pids), "PYTHONPATH": str(tmp_path)}
    argv = [sys.executable, "-m", "dpharness.cli", "gate", "--module", "interrupt_pkg", "--own", "--jobs", "2"]
    argv += ["--samples", "20000", "--no-cache", "interrupt_slow"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not pids.exists():
            time.sleep(0.2)
        assert proc.poll() is None and pids.exists(), "the slow check never started"
        workers = _descendants(proc.pid) | {int(x) for x in pids.read_text().split()}
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(p) for p in workers):
            time.sleep(0.2)
        left = sorted(p for p in workers if _alive(p))
        assert not left, f"processes left running after the gate was killed: {left}"
    finally:
        for pid in _descendants(proc.pid) | ({int(x) for x in pids.read_text().split()} if pids.exists() else set()):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def _read_available(proc: subprocess.Popen) -> str:
    """What the gate has written to stderr so far (its progress lines), without blocking."""
    import fcntl

    fd = proc.stderr.fileno()
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    try:
        return os.read(fd, 65536).decode(errors="replace")
    except BlockingIOError:
        return ""
    finally:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)
