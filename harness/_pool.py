"""Running one task per item in isolated worker processes with a hard time limit (pebble), with a
progress bar (tqdm). Used by ``dpharness gate`` and ``dpharness report``. Private.

Each task runs in a worker forked from a fork server that imported the project once (no interpreter
start-up or imports per worker; no fork of this process, whose numpy/z3 threads may hold locks; spawn
where there is no fork server), whose address space is capped
at its share of 80% of the RAM (a runaway audit raises MemoryError in its own worker). A task that
runs past ``limit`` seconds is killed with its worker — whatever it is doing, including a C call
that holds the GIL and ignores signals — and a worker that dies takes only its own task with it;
both come back through ``lost(item, message, seconds)``, and the other tasks carry on. ``jobs == 1`` runs
the tasks one after the other in this process (no isolation, no hard limit: the check's own
per-phase deadlines still apply).

Ctrl-C (SIGINT to this process): the queued tasks are cancelled, the running ones are killed with
their workers and everything those started (each worker leads its own process group and ignores
SIGINT, so the whole group is killed at once and a terminal's Ctrl-C reaches only this process), and
:class:`Interrupted` is raised carrying the results of the tasks that had finished."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

R = TypeVar("R")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped :func:`run`: ``finished`` holds the results of the tasks that had finished (in
    the order of ``items``), ``total`` the number of tasks asked for."""

    def __init__(self, finished: list, total: int) -> None:
        super().__init__(f"interrupted: {len(finished)} of {total} finished")
        self.finished, self.total = finished, total


def run(
    task: Callable[..., R],
    items: Sequence[str],
    *,
    jobs: int | None,
    limit: float | None,
    lost: Callable[[str, str, float], R],
    label: Callable[[R], str],
    kwargs: dict | None = None,
    desc: str = "checks",
    stopped: Callable[[str, str, float], R] | None = None,
) -> list[R]:
    """``[task(item, **kwargs) for item in items]`` in up to ``jobs`` workers (default: CPU count).
    ``limit``: seconds a task may run before its worker is killed (None: no limit). ``lost(item,
    message, seconds)`` stands in for a task killed, died or raising; ``label(result)`` is the progress
    line. ``stopped(item, message, seconds)`` (default ``lost``) stands in for a task killed at ``limit``:
    a time limit, not a failure of the task."""
    from tqdm import tqdm

    kwargs = kwargs or {}
    jobs = jobs or os.cpu_count() or 1
    results: dict[str, R] = {}
    start = time.monotonic()
    # a bar on a terminal; on a CI log (not a TTY) only the one-line result per task
    with tqdm(total=len(items), desc=desc, unit="mechanism", file=sys.stderr, disable=None, leave=False) as bar:

        def done(item: str, result: R) -> None:
            results[item] = result
            tqdm.write(f"[{tqdm.format_interval(time.monotonic() - start)}] {item}: {label(result)}", file=sys.stderr)
            bar.update(1)

        try:
            if jobs == 1:
                for item in items:
                    done(item, task(item, **kwargs))
            else:
                _run_pool(
                    task,
                    items,
                    min(jobs, len(items)),
                    limit,
                    lambda item, message: lost(item, message, time.monotonic() - start),
                    kwargs,
                    done,
                    lambda item, message: (stopped or lost)(item, message, time.monotonic() - start),
                )
        except KeyboardInterrupt:
            raise Interrupted([results[item] for item in items if item in results], len(items)) from None
    return [results[item] for item in items]


def _worker_start(fraction: float, parent: int | None = None) -> None:
    """Worker initializer: lead a process group of its own (the parent kills the group, children the
    worker starts included, on Ctrl-C), ignore SIGINT (inherited by those children: only the parent
    decides what an interrupt stops), cap memory (:func:`dpharness._run.limit_memory`), and end the group
    when the process that runs the pool (``parent``) is gone (:func:`~dpharness._run.watch_parent`)."""
    import signal

    from ._run import limit_memory, watch_parent

    if hasattr(os, "setpgrp"):
        os.setpgrp()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_memory(fraction)
    if parent is not None:
        watch_parent(parent)


# what every gate or report task imports (sympy, z3, scipy, numpy among them): loaded once, in the fork
# server, instead of once per worker; with what the first check of a worker imports on first use
# (sympy's units, which its simplification loads; scipy.optimize for the learned events' fits and
# scipy.integrate for the exact laws, 0.25 s a worker)
_PRELOAD = (
    "dpharness.pipeline",
    "dpharness.proofs",
    "dpharness.auditors",
    "dpharness.mechanisms",
    "dpharness.cli",
    "sympy.physics.units",
    "scipy.optimize",
    "scipy.integrate",
)


def _context():
    """The start method of the workers: forks of a fork server that imported :data:`_PRELOAD`
    (:func:`dpharness._run.forkserver_context`), where the platform has one; else spawn."""
    import multiprocessing

    from ._run import forkserver_context

    return forkserver_context(_PRELOAD) or multiprocessing.get_context("spawn")


def prestart(jobs: int | None) -> None:
    """Start the fork server now, for a run that is going to need the pool: its imports (a few
    seconds) then overlap this process's own work before the pool starts (building the mechanisms,
    the cache keys). Idempotent; nothing where there is no fork server or for ``jobs == 1``."""
    if (jobs or os.cpu_count() or 1) > 1:
        _context()


def _kill_workers() -> None:
    """SIGKILL the process group of each worker process of this process that leads one (see
    :func:`_worker_start`): the worker and every process it started."""
    import multiprocessing
    import signal

    for child in multiprocessing.active_children():
        pid = child.pid
        try:
            if pid is not None and hasattr(os, "killpg") and os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
        except OSError:  # already gone
            pass


def _run_pool(task, items, workers: int, limit, lost, kwargs, done, stopped) -> None:
    from concurrent.futures import Future, as_completed
    from concurrent.futures import TimeoutError as FutureTimeout

    from pebble import ProcessExpired, ProcessPool

    pool = ProcessPool(
        max_workers=workers,
        context=_context(),
        initializer=_worker_start,
        initargs=(0.8 / workers, os.getpid()),
    )
    try:
        futures: dict[Future, Any] = {
            pool.schedule(task, args=(item,), kwargs=kwargs, timeout=limit): item for item in items
        }
        for future in as_completed(futures):
            item = futures[future]
            try:
                result = future.result()
            except FutureTimeout:
                result = stopped(
                    item,
                    f"timeout: did not finish within its hard limit of {limit:g} s and its worker "
                    "process was killed (a proof or audit stuck where the per-phase deadline cannot "
                    "interrupt it, e.g. a long C call; or a very slow or loaded machine: raise "
                    "--timeout to allow more)",
                )
            except ProcessExpired as exc:
                result = lost(item, f"{type(exc).__name__}: {exc} (exit code {exc.exitcode}; the worker process died)")
            except Exception as exc:
                result = lost(item, f"{type(exc).__name__}: {exc} (raised in the worker process)")
            done(item, result)
    except BaseException:  # Ctrl-C (or an error here): cancel the queue, kill the running workers' groups
        pool.stop()
        _kill_workers()
        pool.join()
        raise
    pool.close()
    pool.join()
