"""How much of a core this process gets: the time a budget or a time limit counts is the time the work
would take on an idle machine (the clock's time less the time spent waiting for a core), so a loaded
machine runs the same audit, only longer by the clock. Linux reports the wait (``/proc/self/schedstat``);
elsewhere the clock's time is counted."""

from __future__ import annotations

import time

import numpy as np

__all__ = ["core_share", "run_queue_wait"]

_SHARE_PROBE_SECONDS = 0.1  # seconds of the clock a busy loop runs to measure the share of a core this process gets


def run_queue_wait() -> float | None:
    """Seconds this process's main thread has waited on a run queue (runnable, no core free) since it
    started: Linux's ``/proc/self/schedstat`` (its second field, in ns); None where it cannot be read."""
    try:
        with open("/proc/self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def core_share() -> float:
    """The share of a core a computing process gets here now, in (0, 1]: over a busy loop of
    ``_SHARE_PROBE_SECONDS`` of the clock, 1 − (time spent waiting on a run queue) / (time by the clock).
    1 on an idle core, about 2/7 for one of 7 busy processes on 2 cores; 1 where the wait cannot be read.
    The gate's time limit of an audit with a time budget is scaled by it (:func:`dpharness.pipeline.run_audit`),
    as the budget is (:func:`dpharness.auditors.audit`)."""
    w0 = run_queue_wait()
    if w0 is None:
        return 1.0
    t0 = time.perf_counter()
    x = np.arange(4096, dtype=np.float64)
    while time.perf_counter() - t0 < _SHARE_PROBE_SECONDS:
        x = np.sqrt(x * x + 1.0)
    clock = time.perf_counter() - t0
    w1 = run_queue_wait()
    waited = 0.0 if w1 is None else max(w1 - w0, 0.0)
    return min(1.0, max(0.05, 1.0 - waited / clock))
