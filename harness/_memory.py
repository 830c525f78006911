"""Freed memory kept for reuse: while a release's task runs in a Dask worker, and for the whole life of a
process dpharness owns (the command line's audit, gate and report, and their pools' workers).

A Dask worker process starts with ``MALLOC_TRIM_THRESHOLD_=65536`` (``distributed.nanny.pre-spawn-environ``),
so that glibc hands freed memory back to the system at once. Setting that variable also turns off glibc's
sliding mmap threshold, which stays at 128 KiB: every numpy temporary above 128 KiB is then a fresh
``mmap``, and each of its pages faults when first written. The release's partition and bucket tasks make
many temporaries of millions of elements, and in a worker they took about twice the CPU they take in a
process with glibc's defaults (three times the page faults on the same four partitions).

:func:`reused_memory` raises the two thresholds while one of these tasks runs and, when the last such task
of the process ends, puts back the values the process was started with and returns the freed memory to
the system (``malloc_trim``), as the worker expects. It acts only where those values are known: glibc,
with ``MALLOC_TRIM_THRESHOLD_`` set in the environment (the sliding threshold already off, so nothing
changes for good). Elsewhere it does nothing. It changes where memory comes from, never a value.

:func:`hold_freed_memory` does the same for good in a process whose whole life dpharness runs: there
glibc's defaults slide, but the sampler's chunks (10^6 samples and their temporaries, each several MB)
were mapped afresh while glibc's sliding threshold was still low and trimmed back to the system, so
each chunk faulted its pages in again: a 10^7-sample Laplace audit took 156 000 page faults and 0.38 s
of system time with the defaults, 55 000 and 0.15 s with the thresholds fixed (its peak memory the same,
350 MB). At most 64 MiB of freed memory stays with the process, as with glibc's own thresholds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_GLIBC_MMAP_DEFAULT = 128 * 1024  # glibc's mmap threshold when it does not slide
_MMAP_HELD = 32 * 1024 * 1024  # the largest mmap threshold glibc accepts on 64-bit systems
_TRIM_HELD = 1 << 30  # freed memory kept at the top of the heap, at most, while a task runs

_lock = threading.Lock()
_running = 0
_libc: Any = None


def _glibc() -> Any:
    """glibc's ``mallopt`` and ``malloc_trim`` (None: another C library, or not Linux)."""
    global _libc
    if _libc is None:
        _libc = False
        name = ctypes.util.find_library("c")
        try:
            lib = ctypes.CDLL(name) if name else None
            if lib is not None and hasattr(lib, "mallopt") and hasattr(lib, "malloc_trim"):
                _libc = lib
        except OSError:
            pass
    return _libc or None


def _started_with() -> tuple[int, int] | None:
    """(mmap threshold, trim threshold) the process was started with, when its environment fixes both."""
    trim = os.environ.get("MALLOC_TRIM_THRESHOLD_")
    if trim is None:
        return None
    try:
        mmap = int(os.environ.get("MALLOC_MMAP_THRESHOLD_", _GLIBC_MMAP_DEFAULT))
        return mmap, int(trim)
    except ValueError:
        return None


@contextmanager
def reused_memory() -> Iterator[None]:
    """Freed memory reused, not handed back, while the body runs (see the module's docstring)."""
    global _running
    started, lib = _started_with(), None
    if started is not None:
        lib = _glibc()
    if lib is None or started is None:
        yield
        return
    with _lock:
        _running += 1
        if _running == 1:
            lib.mallopt(_M_MMAP_THRESHOLD, _MMAP_HELD)
            lib.mallopt(_M_TRIM_THRESHOLD, _TRIM_HELD)
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0:
                mmap, trim = started
                lib.mallopt(_M_MMAP_THRESHOLD, mmap)
                lib.mallopt(_M_TRIM_THRESHOLD, trim)
                lib.malloc_trim(0)


_HOLD_TRIM = 64 * 1024 * 1024  # freed memory kept at the top of the heap by a process dpharness owns: what
# glibc's sliding thresholds keep at most (twice the largest mmap threshold), so the process holds no more


def hold_freed_memory() -> None:
    """For a process whose whole life dpharness runs (see the module's docstring): numpy arrays below
    32 MiB from the heap from the start (glibc's sliding threshold starts at 128 KiB and rises only as
    mmapped chunks are freed), and up to 64 MiB of freed memory at its top kept for reuse, as glibc's
    sliding thresholds keep at most. Not where the environment sets a threshold (the user's or Dask's
    choice), nor off glibc."""
    if any(v in os.environ for v in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")):
        return
    lib = _glibc()
    if lib is not None:
        lib.mallopt(_M_MMAP_THRESHOLD, _MMAP_HELD)
        lib.mallopt(_M_TRIM_THRESHOLD, _HOLD_TRIM)


def with_reused_memory(fn: Callable) -> Callable:
    """``fn`` run under :func:`reused_memory` (a task function of a release)."""

    @functools.wraps(fn)
    def task(*args: Any, **kwargs: Any) -> Any:
        with reused_memory():
            return fn(*args, **kwargs)

    return task
