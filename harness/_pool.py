"""Running one task per item in isolated worker processes with a hard time limit (pebble), with a
progress bar (tqdm). Used by ``dpharness gate`` and ``dpharness report``. Private.

Each task runs in a spawned worker (no fork after numpy/z3 threads) whose address space is capped
at its share of 80% of the RAM (a runaway audit raises MemoryError in its own worker). A task that
runs past ``limit`` seconds is killed with its worker — whatever it is doing, including a C call
that holds the GIL and ignores signals — and a worker that dies takes only its own task with it;
both come back through ``lost(item, message, seconds)``, and the other tasks carry on. ``jobs == 1`` runs
the tasks one after the other in this process (no isolation, no hard limit: the check's own
per-phase deadlines still apply)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

R = TypeVar("R")


def run(task: Callable[..., R], items: Sequence[str], *, jobs: int | None, limit: float | None,
        lost: Callable[[str, str, float], R], label: Callable[[R], str], kwargs: dict | None = None,
        desc: str = "checks") -> list[R]:
    """``[task(item, **kwargs) for item in items]`` in up to ``jobs`` workers (default: CPU count).
    ``limit``: seconds a task may run before its worker is killed (None: no limit). ``lost(item,
    message, seconds)`` stands in for a task killed, died or raising; ``label(result)`` is the progress
    line."""
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

        if jobs == 1:
            for item in items:
                done(item, task(item, **kwargs))
        else:
            _run_pool(task, items, min(jobs, len(items)), limit, lambda item, message: lost(
                item, message, time.monotonic() - start), kwargs, done)
    return [results[item] for item in items]


def _run_pool(task, items, workers: int, limit, lost, kwargs, done) -> None:
    import multiprocessing
    from concurrent.futures import TimeoutError as FutureTimeout
    from concurrent.futures import as_completed

    from pebble import ProcessExpired, ProcessPool

    from ._run import limit_memory

    with ProcessPool(max_workers=workers, context=multiprocessing.get_context("spawn"),
                     initializer=limit_memory, initargs=(0.8 / workers,)) as pool:
        futures = {pool.schedule(task, args=(item,), kwargs=kwargs, timeout=limit): item for item in items}
        for future in as_completed(futures):
            item = futures[future]
            try:
                result = future.result()
            except FutureTimeout:
                result = lost(item, f"timeout: did not finish within its hard limit of {limit:g} s and its worker "
                                    "process was killed (a proof or audit stuck where the per-phase deadline cannot "
                                    "interrupt it, e.g. a long C call); raise --timeout to allow more")
            except ProcessExpired as exc:
                result = lost(item, f"{type(exc).__name__}: {exc} (exit code {exc.exitcode}; the worker process died)")
            except Exception as exc:
                result = lost(item, f"{type(exc).__name__}: {exc} (raised in the worker process)")
            done(item, result)
