"""Ctrl-C stops a pooled ``dpharness audit`` (issue 20): SIGINT to the process group, as a terminal sends
it, while the pairs' training and the certification run on the fork server's workers, ends the audit
with one line and exit code 130, no traceback, and no process it started left behind.

Deterministic: the audit (laplace at 3·10^8 samples a side on 2 workers) takes minutes; the signal is
sent once its worker processes exist (found by a marker in their environment)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from _procs import ctrl_c_not_ignored, marked  # noqa: F401 - the fixture, used by name

pytestmark = pytest.mark.usefixtures("ctrl_c_not_ignored")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the processes")
def test_ctrl_c_stops_a_pooled_audit_and_leaves_no_process(tmp_path):
    key, value = "DPHARNESS_TEST_MARKER", uuid.uuid4().hex
    marker = f"{key}={value}"
    argv = [sys.executable, "-m", "dpharness.cli", "audit", "laplace", "--samples", "300000000", "--workers", "2"]
    log = tmp_path / "audit.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            argv, env={**os.environ, key: value}, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 120
            # the audit, its fork server and at least one worker
            while len(marked(marker)) < 3 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.2)
            assert proc.poll() is None, log.read_text()[-2000:]
            assert len(marked(marker)) >= 3, "the audit's worker pool never started"
            time.sleep(1.0)
            os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert code == 130, text[-2000:]
    assert "interrupted" in text and "Traceback" not in text, text[-2000:]
    deadline = time.monotonic() + 10
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marked(marker) == [], "processes started by the audit outlived it"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the processes")
def test_an_audit_killed_outright_leaves_no_worker(tmp_path):
    """SIGKILL to the audit's process alone runs no clean-up there: its pool's workers (forks of a fork
    server, not its children) see it gone and end within seconds, and the fork server with them,
    instead of counting an audit of 3·10^8 samples a side that nobody will read."""
    key, value = "DPHARNESS_TEST_MARKER", uuid.uuid4().hex
    marker = f"{key}={value}"
    argv = [sys.executable, "-m", "dpharness.cli", "audit", "laplace", "--samples", "300000000", "--workers", "2"]
    proc = subprocess.Popen(
        argv,
        env={**os.environ, key: value},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(marked(marker)) < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)  # the audit, its fork server and two workers (a resource tracker too)
        assert proc.poll() is None and len(marked(marker)) >= 4, "the audit's worker pool never started"
        time.sleep(1.0)
        proc.kill()  # this process only: its group is left to see what ends by itself
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marked(marker) == [], "processes started by the audit outlived it"
    finally:
        for pid in marked(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


_SEMAPHORE_GONE = r"""
import io, sys, multiprocessing, multiprocessing.context, _multiprocessing
import dpharness._forkserver_child
from multiprocessing.synchronize import Lock

lock = multiprocessing.get_context("forkserver").Lock()
multiprocessing.context.set_spawning_popen(object())  # as while a worker's start-up data is pickled
state = lock.__getstate__()
multiprocessing.context.set_spawning_popen(None)
_multiprocessing.sem_unlink(lock._semlock.name)  # the caller tore its pool down meanwhile
try:
    Lock.__new__(Lock).__setstate__(state)
except FileNotFoundError:
    sys.excepthook(*sys.exc_info())
print("---", file=sys.stderr)
try:
    raise FileNotFoundError("some other start-up error")
except FileNotFoundError:
    sys.excepthook(*sys.exc_info())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX named semaphores")
def test_a_worker_whose_pool_was_removed_exits_quietly_other_errors_still_print():
    """The fork server's children: the semaphore-removed error of a worker started as its pool is torn
    down prints nothing; any other exception before the worker's code runs prints its traceback."""
    out = subprocess.run([sys.executable, "-c", _SEMAPHORE_GONE], capture_output=True, text=True, timeout=60)
    quiet, loud = out.stderr.split("---\n")
    assert quiet == "", quiet
    assert "Traceback" in loud and "some other start-up error" in loud, loud


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork server")
def test_fork_server_workers_ignore_ctrl_c():
    """Ctrl-C belongs to the caller: a worker of the fork server ignores SIGINT from its first instruction
    (the server imports with SIGINT blocked, then ignores it), and the caller still gets it."""
    code = (
        "import signal\n"
        "from dpharness._run import forkserver_context\n"
        "ctx = forkserver_context(())\n"
        "with ctx.Pool(1) as pool:\n"
        "    print(pool.apply(signal.getsignal, (signal.SIGINT,)) is signal.SIG_IGN)\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.pthread_sigmask(signal.SIG_BLOCK, []))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split("\n")[:2] == ["True", "True set()"], out.stdout + out.stderr
