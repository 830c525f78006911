"""Drawing outputs: checked calls to the mechanism, chunked streaming counts, worker processes and
the progress bar. Counts only ever leave a chunk, so memory stays bounded by one chunk per worker.

Determinism: chunk ``c`` of side ``s`` of pair ``p`` in phase ``ph`` (0 = training, 1 = certification)
draws from ``SeedSequence(seed, spawn_key=(ph, p, s, c))``; chunk sizes depend only on the sample
count and the output shape, and counts are integer sums, so the same seed gives the same result
for any number of workers. (Callables with ``vectorized=False`` draw their own randomness and
are run serially in the parent: forking would duplicate a global random state.)
"""

from __future__ import annotations

import math
import multiprocessing as _mp
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from dpharness.core import Event
from dpharness.errors import MechanismError

from . import events as _events

__all__ = ["Sampler", "Progress", "chunk_plan", "draw", "count_events"]

TRAINING, CERTIFICATION = 0, 1


def _takes_one_argument(fn: Callable) -> bool:
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 1 and not any(p.kind is p.VAR_POSITIONAL for p in params)


@dataclass(frozen=True)
class Sampler:
    """How to get ``size`` outputs on one input: ``fn(data, size, rng)`` (vectorised) or ``fn(data)`` in a loop."""

    fn: Callable
    name: str
    vectorized: bool = True

    def __call__(self, data: Any, size: int, rng: np.random.Generator, *, where: str, start: int = 0) -> np.ndarray:
        if self.vectorized:
            try:
                out = self.fn(data, size, rng)
            except MechanismError:
                raise
            except Exception as exc:  # noqa: BLE001 - the mechanism under audit may raise anything
                hint = "fix the mechanism or the inputs."
                if isinstance(exc, TypeError) and _takes_one_argument(self.fn):
                    hint = ("it takes one argument: a per-call function fn(data) returning one output is audited "
                            "with vectorized=False (dpharness audit calls fn(data, size, rng) by default).")
                raise MechanismError(
                    f"mechanism {self.name!r} raised {type(exc).__name__}: {exc} while drawing {where} "
                    f"(samples {start}..{start + size - 1}); {hint}"
                ) from exc
            return _as_outputs(out, size, self.name, where)
        outs = []
        for i in range(size):
            try:
                outs.append(self.fn(data))
            except Exception as exc:  # noqa: BLE001
                raise MechanismError(
                    f"mechanism {self.name!r} raised {type(exc).__name__}: {exc} at sample index {start + i} of {where}; "
                    "fix the mechanism or the inputs."
                ) from exc
        return _as_outputs(_stack(outs, self.name, where), size, self.name, where)


def _stack(outs: list, name: str, where: str) -> np.ndarray:
    first = outs[0]
    if isinstance(first, (bool, int, float, np.number, np.bool_)) and all(
            isinstance(o, (bool, int, float, np.number, np.bool_)) for o in outs):
        return np.asarray(outs)
    if isinstance(first, np.ndarray) or (isinstance(first, (list, tuple)) and all(isinstance(x, (int, float, bool, np.number)) for x in first)):
        try:
            arrs = [np.asarray(o) for o in outs]
            shapes = {a.shape for a in arrs}
            if len(shapes) == 1 and arrs[0].dtype != object:
                return np.stack(arrs)
            if len(shapes) > 1:
                raise MechanismError(
                    f"mechanism {name!r} returned outputs of different shapes {sorted(shapes)[:3]} in {where}; "
                    "return outputs of one fixed shape."
                )
        except (TypeError, ValueError):
            pass
    arr = np.empty(len(outs), dtype=object)
    for i, o in enumerate(outs):
        arr[i] = o
    return arr


def _as_outputs(out: Any, size: int, name: str, where: str) -> np.ndarray:
    if isinstance(out, np.ndarray):
        arr = out
    elif isinstance(out, (list, tuple)):
        try:
            arr = np.asarray(out)
        except ValueError:
            arr = np.empty(len(out), dtype=object)
            for i, o in enumerate(out):
                arr[i] = o
    else:
        try:
            arr = np.asarray(out)
        except Exception as exc:  # noqa: BLE001
            raise MechanismError(f"mechanism {name!r} returned {type(out).__name__}, not an array; return `size` outputs.") from exc
    if arr.ndim == 0 or arr.shape[0] != size:
        got = "a scalar" if arr.ndim == 0 else f"{arr.shape[0]} rows (shape {arr.shape})"
        raise MechanismError(
            f"mechanism {name!r} returned {got} for size={size} in {where}; return exactly `size` outputs "
            "along the first axis (shape (size,) or (size, k))."
        )
    if np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.complexfloating):
        bad = ~np.isfinite(arr)
        if bad.any():
            idx = int(np.argwhere(bad.reshape(len(arr), -1).any(axis=1))[0, 0])
            raise MechanismError(
                f"mechanism {name!r} returned a non-finite output ({arr.reshape(len(arr), -1)[idx].tolist()!r:.60}) "
                f"at row {idx} of {where}; NaN/inf outputs cannot be audited — return finite values "
                "(use a sentinel for 'no answer')."
            )
    elif arr.dtype == object:
        for i, o in enumerate(arr.reshape(-1)[: min(arr.size, 100_000)]):
            if isinstance(o, float) and not math.isfinite(o):
                raise MechanismError(
                    f"mechanism {name!r} returned a non-finite output ({o!r}) at position {i} of {where}; return finite values."
                )
    return arr


def signature(arr: np.ndarray) -> tuple:
    """What must not change between chunks: trailing shape and kind of dtype."""
    kind = "O" if arr.dtype == object else ("f" if np.issubdtype(arr.dtype, np.floating) else "i")
    return arr.shape[1:], kind


def check_signature(arr: np.ndarray, ref: tuple, name: str, where: str) -> None:
    sig = signature(arr)
    if sig != ref:
        raise MechanismError(
            f"mechanism {name!r} changed its output between chunks: {where} gave rows of shape {sig[0]} ({sig[1]}), "
            f"earlier chunks {ref[0]} ({ref[1]}); return outputs of one fixed shape and type."
        )


def rng_for(seed: int, phase: int, pair: int, side: int, chunk: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(phase, pair, side, chunk)))


def chunk_plan(total: int, chunk: int) -> list[tuple[int, int]]:
    """(start, size) of consecutive chunks covering ``total`` samples."""
    return [(s, min(chunk, total - s)) for s in range(0, total, chunk)]


def draw(sampler: Sampler, data: Any, total: int, *, seed: int, phase: int, pair: int, side: int, chunk: int,
         ref: tuple | None = None, label: str = "", progress: "Progress | None" = None,
         max_elements: int | None = None) -> np.ndarray:
    """All ``total`` outputs of one side (training: kept in memory), drawn chunk by chunk; stops
    early once ``max_elements`` output entries are held (wide vector outputs)."""
    parts = []
    held = 0
    for c, (start, size) in enumerate(chunk_plan(total, chunk)):
        if max_elements is not None and parts and held >= max_elements:
            break
        where = f"{label} chunk {c}"
        arr = sampler(data, size, rng_for(seed, phase, pair, side, c), where=where, start=start)
        if ref is None:
            ref = signature(arr)
        check_signature(arr, ref, sampler.name, where)
        parts.append(arr)
        held += arr.size
        if progress:
            progress.update()
    if len(parts) == 1:
        return parts[0]
    if parts[0].dtype == object:
        out = np.empty(sum(len(p) for p in parts), dtype=object)
        i = 0
        for p in parts:
            out[i:i + len(p)] = p
            i += len(p)
        return out
    return np.concatenate(parts)


# --------------------------------------------------------------------------- streaming counts

@dataclass(frozen=True)
class _Job:
    sampler: Sampler
    inputs: tuple          # per pair: (data, neighbor)
    events: tuple          # per pair: tuple of Events
    seed: int
    ref: tuple             # output signature from training
    chunks: tuple          # (start, size) per chunk


_JOB: _Job | None = None  # set in the parent before forking, inherited by the workers


def _count_task(task: tuple[int, int, int]) -> tuple[tuple[int, int, int], np.ndarray]:
    job = _JOB
    pair, side, c = task
    start, size = job.chunks[c]
    where = f"certification chunk {c} ({'data' if side == 0 else 'neighbor'} side of pair {pair})"
    out = job.sampler(job.inputs[pair][side], size, rng_for(job.seed, CERTIFICATION, pair, side, c), where=where, start=start)
    check_signature(out, job.ref, job.sampler.name, where)
    counts = np.empty(len(job.events[pair]), dtype=np.int64)
    for i, ev in enumerate(job.events[pair]):
        hit = np.asarray(ev.contains(out), dtype=bool)
        if hit.shape != (size,):
            raise MechanismError(f"event {ev.description!r} returned shape {hit.shape} on {where}; expected ({size},).")
        counts[i] = int(hit.sum())
    _events.clear_cache()
    return task, counts


class Progress:
    """A one-line progress bar on stderr (only when enabled)."""

    def __init__(self, total: int, enabled: bool, label: str) -> None:
        self.total, self.enabled, self.label = max(1, total), enabled, label
        self.done = 0
        self.t0 = time.perf_counter()
        self._last = 0.0

    def update(self, k: int = 1) -> None:
        self.done += k
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.1 and self.done < self.total:
            return
        self._last = now
        frac = self.done / self.total
        bar = "#" * int(30 * frac)
        rate = self.done / max(now - self.t0, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        sys.stderr.write(f"\r{self.label} [{bar:<30}] {100 * frac:5.1f}% ETA {eta:5.1f}s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def progress_enabled(progress: bool | None) -> bool:
    if progress is None:
        try:
            return sys.stderr.isatty()
        except (AttributeError, ValueError):
            return False
    return bool(progress)


def default_workers() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        n = os.cpu_count() or 1
    return max(1, n)


def count_events(sampler: Sampler, inputs: Sequence[tuple], events: Sequence[Sequence[Event]], *, seed: int,
                 total: int, chunk: int, ref: tuple, workers: int, progress: Progress | None = None) -> np.ndarray:
    """Hits of each pair's events on ``total`` fresh samples a side: array [pair][side][event] (ragged -> list)."""
    global _JOB
    chunks = tuple(chunk_plan(total, chunk))
    job = _Job(sampler, tuple(tuple(p) for p in inputs), tuple(tuple(e) for e in events), seed, ref, chunks)
    tasks = [(p, s, c) for p in range(len(inputs)) if len(events[p]) for s in (0, 1) for c in range(len(chunks))]
    result = [[np.zeros(len(events[p]), dtype=np.int64) for _ in (0, 1)] for p in range(len(inputs))]
    workers = max(1, min(workers, len(tasks)))
    use_pool = workers > 1 and sampler.vectorized and "fork" in _mp.get_all_start_methods() \
        and not _mp.current_process().daemon
    _JOB = job
    try:
        if use_pool:
            ctx = _mp.get_context("fork")
            ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
            try:
                futures = [ex.submit(_count_task, t) for t in tasks]
                for fut in as_completed(futures):
                    (p, s, _c), counts = fut.result()
                    result[p][s] += counts
                    if progress:
                        progress.update()
            finally:
                ex.shutdown(wait=True, cancel_futures=True)
        else:
            for t in tasks:
                (p, s, _c), counts = _count_task(t)
                result[p][s] += counts
                if progress:
                    progress.update()
    finally:
        _JOB = None
    return result
