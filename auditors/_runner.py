"""Drawing outputs: checked calls to the mechanism, chunked streaming counts, worker processes and
the progress bar. Counts only ever leave a chunk, so memory stays bounded by one chunk per worker.

Determinism: chunk ``c`` of side ``s`` of pair ``p`` in phase ``ph`` (0 = training, 1 = certification)
draws from ``SeedSequence(seed, spawn_key=(ph, p, s, c))``; chunk sizes depend only on the sample
count and the output shape, and counts are integer sums, so for a vectorised sampler
``fn(data, size, rng)`` the same seed gives the same result in this process, in the local worker
pool and on a dask cluster, for any number of workers.

Where chunks run:

* ``workers=1`` and no cluster: in this process, one chunk after another.
* ``workers > 1``: a local pool of fresh worker processes (loky's reusable executor: workers are
  started with fork+exec, so a parent whose thread pools are running — torch, BLAS, OpenMP — cannot
  deadlock them, as a bare ``fork`` can). The job (sampler and events, closures included) is
  shipped with cloudpickle. If no chunk finishes within ``max(60 s, 20 x the slowest chunk so
  far, 20 x a chunk at the slowest time per sample measured on this sampler on any input)`` (300 s
  while nothing was measured) the pool is killed and an :class:`AuditTimeLimit` (a time limit, not a
  finding) names the chunk. The limit follows the measured cost of a call, so a working callable
  that is slow on some inputs (a fit that diverges) is not cut off by the fast chunks that finished
  first; an overall limit is the caller's (the gate's ``--timeout``).
* ``cluster=``: tasks on a ``dask.distributed`` cluster (:mod:`._cluster`), with the same timeout.

Per-call samplers (``vectorized=False``, ``fn(data)`` drawing its own randomness): in this process
(``workers=1``, no cluster) they use whatever random state they hold, as reproducible as that
state. In a worker process (pool or cluster), before each chunk, the global states of
:mod:`random`, ``numpy.random`` and (when imported) torch, and every ``random.Random``,
``numpy.random.Generator``, ``numpy.random.RandomState`` and ``torch.Generator`` reachable from the
function (closure cells, defaults, the globals it names, bound objects' attributes, and the attributes
it names of the modules and classes it names, or of an object's classes: ``helpers.RNG``, ``self.rng``
read from a class attribute) are reseeded
from ``SeedSequence(seed, spawn_key=(ph, p, s, c, k))``. Every chunk therefore draws a fresh,
independent stream (copies of one state in several workers would repeat samples and make the
certified bound unsound), and a function whose randomness comes only from those sources gives the
same outputs for the same seed whatever the number of workers or machines (but not the outputs of
a ``workers=1`` run, which uses the caller's states). One exception: on a dask cluster the global
state of :mod:`random` is shared with the worker's own event loop (tornado's jittered timers draw
from it), so a function drawing from ``random.random()`` & co. gets independent but not
reproducible chunks there; numpy's global state and held generators are not touched by dask.
Randomness these cannot reach (a C library's own generator, ``os.urandom``, ``secrets``) stays
independent between workers but is not reproducible; so does a reachable generator that takes no seed
but draws fresh randomness in every copy (randomgen's hardware ``RDRAND``, Tumult Core's process
generator: :func:`_fresh_in_every_copy`), which is left as it is; any other generator that cannot be
given its own stream is refused with the fix (copies of it would repeat draws); a generator the walk cannot reach *and* that
is created with a fixed seed at import time would repeat across workers: run such a mechanism with
``workers=1``. (Vectorised samplers are reseeded the same way in workers; they should draw only
from their ``rng`` argument.)

A mechanism that raises: whether a call raises is an output the adversary sees. With
``outcomes=True`` (:func:`draw`, :func:`count_events`; the audit's way) a call that raises an
``Exception`` is recorded as that call's outcome "raised" — a :class:`Raises` tally of calls, raised
calls and the exception types' names, never their messages (a message may contain the data) — and
the other calls' outputs are kept. A vectorised call is one chunk (it raised or returned ``size``
outputs); a per-call sampler's call is one output. Not outcomes of the mechanism, and raised as
before: ``MemoryError`` (the machine's limit, not the mechanism's behaviour), the harness's own
:class:`MechanismError` (output checks, hangs, dead workers) and what is not an ``Exception``
(``KeyboardInterrupt``, ``SystemExit``). Size-1 *probes* (``probes=`` of
:func:`count_events`) observe the event "one release raises" of a vectorised sampler: chunk ``c``
of probes of side ``s`` of pair ``p`` calls ``fn(data, 1, rng)`` in turn with one generator from
``SeedSequence(seed, spawn_key=(2, p, s, c))``, so they are reproducible like every other chunk.
Without ``outcomes`` (the default) any exception is a :class:`MechanismError`, as it always was.
"""

from __future__ import annotations

import functools
import itertools
import math
import multiprocessing as _mp
import os
import random as _random
import sys
import threading
import time
import types
import uuid
import warnings
import weakref
from collections import abc as _abc
from concurrent.futures import FIRST_COMPLETED
from concurrent.futures import wait as _wait_futures
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from dpharness.core import Event
from dpharness.errors import AuditTimeLimit, MechanismError, ParameterError

from . import _cluster
from . import events as _events

__all__ = [
    "Sampler",
    "Raises",
    "Drawn",
    "Counted",
    "Progress",
    "ChunkPlan",
    "chunk_plan",
    "draw",
    "count_events",
    "cluster_session",
]

TRAINING, CERTIFICATION, PROBE = 0, 1, 2  # the phases of the seed tree (PROBE: size-1 calls observing raises)
PROBE_CHUNK = 1_000  # size-1 probe calls per task

_MIN_TIMEOUT = 60.0  # seconds: no chunk finishing within this (or the scaled limit) is a hang
_TIMEOUT_FACTOR = 20.0  # x the slowest chunk seen (or the measured pace) before giving up
_UNKNOWN_TIMEOUT = 300.0  # seconds before the first chunk finishes when this sampler's pace is unknown
_IDLE_SECONDS = 30  # the local pool's idle workers exit after this
_WINDOW_PER_WORKER = 4  # tasks submitted at a time per worker (the rest wait in a generator, not in memory)


def _takes_one_argument(fn: Callable) -> bool:
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 1 and not any(p.kind is p.VAR_POSITIONAL for p in params)


# exceptions that are not an outcome of the mechanism: raised through, never recorded as "raised"
_NOT_OUTCOMES = (MemoryError, MechanismError)


@dataclass(frozen=True)
class Raises:
    """Calls to a mechanism on one input and how many of them raised: ``calls`` observations of the
    Bernoulli "the call raises". ``types``: the names of the exception types raised (sorted; never
    their messages, which may contain the data); ``first``: where the first raise happened (chunk
    and sample range), "" when none did. Tallies add up (``a + b`` keeps ``a``'s ``first``: add them
    in chunk order)."""

    calls: int = 0
    raised: int = 0
    types: tuple[str, ...] = ()
    first: str = ""

    def __add__(self, other: "Raises") -> "Raises":
        return Raises(
            self.calls + other.calls,
            self.raised + other.raised,
            tuple(sorted(set(self.types) | set(other.types))),
            self.first or other.first,
        )

    @property
    def always(self) -> bool:
        """Every call raised (and there was at least one)."""
        return self.calls > 0 and self.raised == self.calls


@dataclass(frozen=True)
class Drawn:
    """What :func:`draw` with ``outcomes=True`` got on one input: the outputs of the calls that
    returned, in chunk order (None when every call raised), the samples asked for in the chunks drawn
    (returned or raised) and the tally of calls that raised."""

    outputs: np.ndarray | None
    requested: int
    raises: Raises


@dataclass(frozen=True)
class Counted:
    """What :func:`count_events` with ``outcomes=True`` counted: ``hits[pair][side]`` (an array of
    hits per event, over the outputs of the certification calls that returned); ``raises[pair][side]``:
    the certification calls that raised; ``probes[pair][side]``: the observations of "one release
    raises" (a vectorised sampler's size-1 probes; a per-call sampler's certification calls, the same
    tally as ``raises``; an empty tally where the pair was not probed)."""

    hits: list
    raises: list
    probes: list


def _raised(exc: BaseException, where: str) -> Raises:
    return Raises(1, 1, (type(exc).__name__,), where)


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
                    hint = (
                        "it takes one argument: a per-call function fn(data) returning one output is audited "
                        "with vectorized=False (dpharness audit calls fn(data, size, rng) by default)."
                    )
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

    def outcome(
        self, data: Any, size: int, rng: np.random.Generator, *, where: str, start: int = 0
    ) -> tuple[np.ndarray | None, Raises]:
        """Like calling the sampler, but a call that raises is recorded, not an error (module
        docstring): the outputs of the calls that returned (None when none did) and the tally."""
        if self.vectorized:
            try:
                out = self.fn(data, size, rng)
            except _NOT_OUTCOMES:
                raise
            except Exception as exc:  # noqa: BLE001 - raising is an outcome of the mechanism under audit
                return None, _raised(exc, f"{where} (samples {start}..{start + size - 1})")
            return _as_outputs(out, size, self.name, where), Raises(1, 0)
        outs = []
        types: set[str] = set()
        first = ""
        for i in range(size):
            try:
                outs.append(self.fn(data))
            except _NOT_OUTCOMES:
                raise
            except Exception as exc:  # noqa: BLE001
                types.add(type(exc).__name__)
                first = first or f"sample index {start + i} of {where}"
        tally = Raises(size, size - len(outs), tuple(sorted(types)), first)
        if not outs:
            return None, tally
        return _as_outputs(_stack(outs, self.name, where), len(outs), self.name, where), tally

    def probe(self, data: Any, calls: int, rng: np.random.Generator, *, where: str) -> Raises:
        """``calls`` size-1 calls ``fn(data, 1, rng)`` (vectorised samplers): which of them raised.
        Their outputs are not kept (only whether a release raises is observed)."""
        raised = 0
        types: set[str] = set()
        first = ""
        for i in range(calls):
            try:
                self.fn(data, 1, rng)
            except _NOT_OUTCOMES:
                raise
            except Exception as exc:  # noqa: BLE001
                raised += 1
                types.add(type(exc).__name__)
                first = first or f"size-1 call {i} of {where}"
        return Raises(calls, raised, tuple(sorted(types)), first)

    def hint(self, types: Sequence[str]) -> str:
        """What to do about a mechanism that raised ``types`` on every call."""
        if self.vectorized and "TypeError" in types and _takes_one_argument(self.fn):
            return (
                "it takes one argument: a per-call function fn(data) returning one output is audited "
                "with vectorized=False (dpharness audit calls fn(data, size, rng) by default)."
            )
        return "fix the mechanism or the inputs."


def _stack(outs: list, name: str, where: str) -> np.ndarray:
    first = outs[0]
    if isinstance(first, (bool, int, float, np.number, np.bool_)) and all(
        isinstance(o, (bool, int, float, np.number, np.bool_)) for o in outs
    ):
        return np.asarray(outs)
    if isinstance(first, np.ndarray) or (
        isinstance(first, (list, tuple)) and all(isinstance(x, (int, float, bool, np.number)) for x in first)
    ):
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
            raise MechanismError(
                f"mechanism {name!r} returned {type(out).__name__}, not an array; return `size` outputs."
            ) from exc
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


def check_signature(arr: np.ndarray, ref: tuple | None, name: str, where: str) -> None:
    check_signature_of(signature(arr), ref, name, where)


def check_signature_of(sig: tuple, ref: tuple | None, name: str, where: str) -> None:
    """:class:`MechanismError` unless the output signature ``sig`` (of :func:`signature`) is ``ref``."""
    if sig != ref:
        assert ref is not None  # a mechanism that drew no training output but outputs here would stop here
        raise MechanismError(
            f"mechanism {name!r} changed its output between chunks: {where} gave rows of shape {sig[0]} ({sig[1]}), "
            f"earlier chunks {ref[0]} ({ref[1]}); return outputs of one fixed shape and type."
        )


def rng_for(seed: int, phase: int, pair: int, side: int, chunk: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(phase, pair, side, chunk)))


@dataclass(frozen=True)
class ChunkPlan(_abc.Sequence):
    """(start, size) of consecutive chunks of ``chunk`` samples covering ``total`` samples (the last one
    shorter), computed on demand: the plan of 10^13 samples is two integers, not a list of 10^7 tuples
    (memory does not depend on the sample count). Indexing and iterating give the same (start, size)
    tuples as a list would; ``samples(stop)`` is the number of samples in chunks ``0..stop-1``."""

    total: int
    chunk: int

    def __post_init__(self) -> None:
        if self.total < 0 or self.chunk < 1:
            raise ParameterError(
                f"a chunk plan needs total >= 0 and chunk >= 1, got total={self.total}, chunk={self.chunk}."
            )

    def __len__(self) -> int:
        return -(-self.total // self.chunk)

    def __getitem__(self, c):
        if isinstance(c, slice):
            return [self[i] for i in range(*c.indices(len(self)))]
        n = len(self)
        if c < 0:
            c += n
        if not 0 <= c < n:
            raise IndexError(f"chunk {c} of a plan of {n} chunks")
        start = c * self.chunk
        return start, min(self.chunk, self.total - start)

    def samples(self, stop: int) -> int:
        """Samples in the first ``stop`` chunks."""
        return min(max(stop, 0) * self.chunk, self.total)


def chunk_plan(total: int, chunk: int) -> ChunkPlan:
    """(start, size) of consecutive chunks covering ``total`` samples, as a lazy :class:`ChunkPlan`."""
    return ChunkPlan(int(total), int(chunk))


# pace of each sampler (seconds per sample), measured while drawing: the hang detector's first limit
_PACE: "weakref.WeakKeyDictionary[Sampler, float]" = weakref.WeakKeyDictionary()
# the same in CPU seconds of this process (all its threads), for draws made in this process, with the
# samples per call it was measured on: (samples per call, CPU seconds per sample)
_CPU_PACE: "weakref.WeakKeyDictionary[Sampler, tuple[int, float]]" = weakref.WeakKeyDictionary()


def note_pace(
    sampler: Sampler, seconds: float, samples: int, cpu: float | None = None, per_call: int | None = None
) -> None:
    """Record that ``samples`` draws of ``sampler`` took ``seconds`` (the pace :func:`expected_seconds`
    reads) and, when they ran in this process, ``cpu`` seconds of its CPU in calls of ``per_call``
    samples (default: one call of ``samples``; :func:`expected_cpu_seconds`). The clock's pace keeps the
    slowest noted (a sampler may be slower on some inputs); the CPU pace keeps the slowest noted on the
    largest calls: a sampler's cost a sample depends on its calls' size (the catalog Laplace: 15 ns a
    sample in calls of 2^14, 30 ns in training's calls of 2^17, 20 ns in certification's of 2^20, whose
    arrays no longer stay in the CPU's caches at 2^17 and whose fixed costs weigh on small calls), and
    the draws it predicts, certification's, are made in the largest calls."""
    if samples > 0:
        try:
            _PACE[sampler] = max(_PACE.get(sampler, 0.0), seconds / samples)
            if cpu is not None:
                size = samples if per_call is None else min(per_call, samples)
                known = _CPU_PACE.get(sampler)
                if known is None or size > known[0]:
                    _CPU_PACE[sampler] = (size, cpu / samples)
                elif size == known[0]:
                    _CPU_PACE[sampler] = (size, max(known[1], cpu / samples))
        except TypeError:  # an unhashable fn: no pace, the generous default applies
            pass


def expected_seconds(sampler: Sampler, samples: int) -> float | None:
    """Seconds ``samples`` more draws of ``sampler`` are expected to take in this process, from the
    pace measured while drawing its training samples (None: not measured, e.g. drawn in workers)."""
    try:
        pace = _PACE.get(sampler)
    except TypeError:
        return None
    return None if pace is None else pace * samples


def expected_cpu_seconds(sampler: Sampler, samples: int) -> float | None:
    """CPU seconds ``samples`` more draws of ``sampler`` are expected to take in this process, from the
    CPU time of its largest calls here (None: none measured; see :func:`note_pace`). Unlike the wall-clock pace, a pause of this process
    (another process on its core) does not inflate it: a call of 3 ms preempted for 10 ms read 4 times
    slower on the clock."""
    try:
        known = _CPU_PACE.get(sampler)
    except TypeError:
        return None
    return None if known is None else known[1] * samples


def draw(
    sampler: Sampler,
    data: Any,
    total: int,
    *,
    seed: int,
    phase: int,
    pair: int,
    side: int,
    chunk: int,
    ref: tuple | None = None,
    label: str = "",
    progress: "Progress | None" = None,
    max_elements: int | None = None,
    workers: int = 1,
    cluster: Any = None,
    outcomes: bool = False,
) -> np.ndarray | Drawn:
    """All ``total`` outputs of one side (training: kept in memory), drawn chunk by chunk; stops
    early once ``max_elements`` output entries are held (wide vector outputs).

    ``workers > 1`` draws a per-call sampler's chunks in the local worker pool; ``cluster`` (see
    :func:`count_events`) draws a per-call sampler's chunks on a dask cluster, and a vectorised
    sampler's too when ``cluster`` is an open ``Client``; the outputs are gathered here in chunk
    order. Vectorised samplers otherwise draw in this process (cheap; no outputs to ship); their
    outputs are the same in every case. Per-call samplers in workers are reseeded per chunk (module
    docstring). A ``"local"`` or address ``cluster`` is opened and closed on every call: open it
    once for a whole audit with :func:`cluster_session`.

    ``outcomes=True``: a call that raises is recorded, not an error (module docstring), and a
    :class:`Drawn` is returned; the chunks drawn are then those the samples *asked for* allow (a
    chunk is drawn while fewer than ``max_elements`` entries were asked for before it, counted at the
    row width of the first chunk that returned; chunks before it are always drawn), the same in this
    process and in workers."""
    _cluster.check_cluster(cluster)
    plan = chunk_plan(total, chunk)
    pool = workers > 1 and not _mp.current_process().daemon
    spread = (not sampler.vectorized and (pool or cluster is not None)) or _cluster.is_client(cluster)
    if spread and plan:
        return _draw_spread(
            sampler,
            data,
            plan,
            seed=seed,
            phase=phase,
            pair=pair,
            side=side,
            ref=ref,
            label=label,
            progress=progress,
            max_elements=max_elements,
            workers=workers,
            cluster=cluster,
            outcomes=outcomes,
        )
    parts: list[np.ndarray] = []
    held = 0
    tally, requested, width = Raises(), 0, None
    t0, c0 = time.perf_counter(), time.process_time()
    for c, (start, size) in enumerate(plan):
        if max_elements is not None and c and width is not None and requested * width >= max_elements:
            break
        where = f"{label} chunk {c}"
        rng = rng_for(seed, phase, pair, side, c)
        if outcomes:
            arr, raised = sampler.outcome(data, size, rng, where=where, start=start)
            tally, requested = tally + raised, requested + size
            if progress:
                progress.update()
            if arr is None:
                continue
            width = width or max(1, arr.size // max(1, len(arr)))
        else:
            if max_elements is not None and parts and held >= max_elements:
                break
            arr = sampler(data, size, rng, where=where, start=start)
        if ref is None:
            ref = signature(arr)
        check_signature(arr, ref, sampler.name, where)
        parts.append(arr)
        held += arr.size
        if progress and not outcomes:
            progress.update()
    note_pace(
        sampler,
        time.perf_counter() - t0,
        requested if outcomes else sum(len(p) for p in parts),
        cpu=time.process_time() - c0,
        per_call=chunk,
    )
    if outcomes:
        return Drawn(_join(parts) if parts else None, requested, tally)
    return _join(parts)


def _join(parts: list[np.ndarray]) -> np.ndarray:
    if len(parts) == 1:
        return parts[0]
    if parts[0].dtype == object:
        out = np.empty(sum(len(p) for p in parts), dtype=object)
        i = 0
        for p in parts:
            out[i : i + len(p)] = p
            i += len(p)
        return out
    return np.concatenate(parts)


def _chunks_kept(plan: ChunkPlan, row_elements: int, max_elements: int | None) -> int:
    """How many chunks the serial loop keeps: chunk c is drawn iff fewer than max_elements are held before it."""
    if max_elements is None:
        return len(plan)
    held = 0
    for c, (_start, size) in enumerate(plan):
        if c and held >= max_elements:
            return c
        held += size * row_elements
    return len(plan)


def _draw_spread(
    sampler: Sampler,
    data: Any,
    plan: ChunkPlan,
    *,
    seed: int,
    phase: int,
    pair: int,
    side: int,
    ref: tuple | None,
    label: str,
    progress: "Progress | None",
    max_elements: int | None,
    workers: int,
    cluster: Any,
    outcomes: bool = False,
) -> np.ndarray | Drawn:
    job = _DrawJob(sampler, data, seed, phase, pair, side, plan, label, outcomes)
    with _Tasks.open(job, workers=max(1, min(workers, len(plan))), cluster=cluster, what=f"drawing {label}") as tasks:
        if tasks is None:  # the job cannot be shipped: draw here (same outputs)
            return draw(
                sampler,
                data,
                plan.total,
                seed=seed,
                phase=phase,
                pair=pair,
                side=side,
                chunk=plan[0][1],
                ref=ref,
                label=label,
                progress=progress,
                max_elements=max_elements,
                outcomes=outcomes,
            )
        results: dict[int, Any] = {}
        first = None
        if max_elements is not None:  # the first chunk that returns tells the row width, hence how many chunks to keep
            for c0 in range(len(plan)):
                for (c,), res in tasks.run([(c0,)]):
                    results[c] = res
                    if progress:
                        progress.update()
                first = results[c0][0] if outcomes else results[c0]
                if first is not None:
                    break
        width = 1 if first is None else max(1, first.size // max(1, len(first)))
        keep = max(_chunks_kept(plan, width, max_elements), len(results))
        for (c,), res in tasks.run([(c,) for c in range(keep) if c not in results]):
            results[c] = res
            if progress:
                progress.update()
    ordered = [results[c] for c in range(keep)]
    tally = Raises()
    if outcomes:
        for _arr, raised in ordered:
            tally = tally + raised
        ordered = [arr for arr, _raised in ordered]
    for c, arr in enumerate(ordered):
        if arr is None:
            continue
        if ref is None:
            ref = signature(arr)
        check_signature(arr, ref, sampler.name, f"{label} chunk {c}")
    if outcomes:
        kept = [arr for arr in ordered if arr is not None]
        return Drawn(_join(kept) if kept else None, plan.samples(keep), tally)
    return _join(ordered)


# --------------------------------------------------------------------------- jobs shipped to workers


@dataclass(frozen=True)
class _DrawJob:
    sampler: Sampler
    data: Any
    seed: int
    phase: int
    pair: int
    side: int
    chunks: ChunkPlan  # (start, size) per chunk
    label: str
    outcomes: bool = False  # a call that raises is recorded: run returns (outputs or None, Raises)

    def run(self, task: tuple) -> np.ndarray | tuple[np.ndarray | None, Raises]:
        (c,) = task
        start, size = self.chunks[c]
        rng = rng_for(self.seed, self.phase, self.pair, self.side, c)
        where = f"{self.label} chunk {c}"
        if self.outcomes:
            out, raised = self.sampler.outcome(self.data, size, rng, where=where, start=start)
            _note_outputs(out)
            return out, raised
        out = self.sampler(self.data, size, rng, where=where, start=start)
        _note_outputs(out)
        return out

    def key(self, task: tuple) -> tuple:
        return self.phase, self.pair, self.side, task[0]

    def samples(self, task: tuple) -> int | None:
        return self.chunks[task[0]][1]

    def describe(self, task: tuple) -> str:
        return f"{self.label} chunk {task[0]}"


@dataclass(frozen=True)
class _CountJob:
    """Certification chunks ``(pair, side, chunk)`` and, with ``outcomes``, size-1 probe chunks
    ``(pair, side, chunk, PROBE)`` (``probe_chunks[pair]``: (start, calls) per probe chunk)."""

    sampler: Sampler
    inputs: tuple  # per pair: (data, neighbor)
    events: tuple  # per pair: tuple of Events
    seed: int
    ref: tuple | None  # output signature from training (None: training drew no output)
    chunks: ChunkPlan  # (start, size) per chunk
    outcomes: bool = False  # a call that raises is recorded: run returns (counts, Raises)
    probe_chunks: tuple = ()  # per pair: a ChunkPlan of its probes (empty tuple: none)
    limits: tuple = ()  # per pair: per event, the chunks it is counted on (the first ones); () every chunk

    def run(self, task: tuple) -> np.ndarray | tuple[np.ndarray, Raises]:
        if len(task) == 4:
            pair, side, c, _probe = task
            _start, calls = self.probe_chunks[pair][c]
            counts = np.zeros(len(self.events[pair]), dtype=np.int64)
            return counts, self.sampler.probe(
                self.inputs[pair][side], calls, rng_for(self.seed, PROBE, pair, side, c), where=self.describe(task)
            )
        pair, side, c = task
        start, size = self.chunks[c]
        where = self.describe(task)
        rng = rng_for(self.seed, CERTIFICATION, pair, side, c)
        if self.outcomes:
            out, raised = self.sampler.outcome(self.inputs[pair][side], size, rng, where=where, start=start)
            if out is None:
                return np.zeros(len(self.events[pair]), dtype=np.int64), raised
            _note_outputs(out)
            return self._count(pair, out, where, c), raised
        out = self.sampler(self.inputs[pair][side], size, rng, where=where, start=start)
        _note_outputs(out)
        return self._count(pair, out, where, c)

    def counted(self, pair: int, c: int) -> list[int]:
        """The events of ``pair`` counted on chunk ``c`` (all but those whose limit it is past)."""
        n = len(self.events[pair])
        return list(range(n)) if not self.limits else [i for i in range(n) if c < self.limits[pair][i]]

    def _count(self, pair: int, out: np.ndarray, where: str, c: int) -> np.ndarray:
        check_signature(out, self.ref, self.sampler.name, where)
        counts = np.zeros(len(self.events[pair]), dtype=np.int64)
        active = self.counted(pair, c)
        events = [self.events[pair][i] for i in active]
        # an event is a set of outputs: on a chunk of few distinct outputs it is evaluated once per distinct
        # output and its hits weighted by their rows; otherwise the events that are sets of keys are read
        # off one histogram of the chunk's keys. Either way, the same counts as row by row.
        distinct = _events.distinct_outputs(out)
        rows, weights = (out, None) if distinct is None else distinct
        known = _events.histogram_counts(events, out) if distinct is None else {}
        for j, ev in enumerate(events):
            i = active[j]
            if j in known:
                counts[i] = known[j]
                continue
            hit = np.asarray(ev.contains(rows), dtype=bool)
            if hit.shape != (len(rows),):
                raise MechanismError(
                    f"event {ev.description!r} returned shape {hit.shape} on {where}; expected ({len(rows)},)."
                )
            counts[i] = int(np.count_nonzero(hit)) if weights is None else int(weights[hit].sum())
        _events.clear_cache()
        return counts

    def key(self, task: tuple) -> tuple:
        if len(task) == 4:
            return (PROBE, *task[:3])
        return (CERTIFICATION, *task)

    def samples(self, task: tuple) -> int | None:
        """Samples a task draws (None for probes: size-1 calls say nothing of the sampler's pace)."""
        return None if len(task) == 4 else self.chunks[task[2]][1]

    def describe(self, task: tuple) -> str:
        side = "data" if task[1] == 0 else "neighbor"
        if len(task) == 4:
            return f"raise probe chunk {task[2]} ({side} side of pair {task[0]})"
        return f"certification chunk {task[2]} ({side} side of pair {task[0]})"


# --------------------------------------------------------------------------- worker side

_RNG_TYPES = (_random.Random, np.random.Generator, np.random.RandomState)
_WALK_LIMIT = 20_000  # objects visited when looking for the random generators a function holds
_WORKER_JOBS: dict[str, tuple[Any, list]] = {}  # token -> (job, generators it holds); a few recent jobs
_WORKER_LOCK = threading.RLock()  # a dask worker may run several tasks in threads of one process


def _global_names(code: types.CodeType) -> list[str]:
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(_global_names(const))
    return names


def _hidden_rngs(root: Any) -> list:
    """The random generators reachable from ``root`` (a sampler's function), in a fixed order: first those
    reached through closures, defaults, the globals its functions name and bound objects' own attributes,
    then those reached only through modules and classes (:func:`_attribute_reach`: ``helpers.RNG``,
    ``Noise.gen``, a class attribute read as ``self.rng``), leaving out the global states :func:`_reseed`
    seeds itself."""
    found: list = []
    seen: set[int] = set()
    visited = 0
    skip = (
        str,
        bytes,
        bytearray,
        int,
        float,
        complex,
        bool,
        type(None),
        np.ndarray,
        np.generic,
        type,
        types.ModuleType,
        types.CodeType,
    )
    stack: list[Any] = [root]
    deferred: list[Any] = []
    for second in (False, True):
        if second:  # appended after the first pass's: their streams keep the indices they had
            seen.update(id(g) for g in _global_states())
            stack = list(reversed(deferred))
        while stack and visited < _WALK_LIMIT:
            obj = stack.pop()
            if id(obj) in seen or isinstance(obj, skip):
                continue
            seen.add(id(obj))
            visited += 1
            if isinstance(obj, _RNG_TYPES) or _is_torch_generator(obj):
                found.append(obj)
                continue
            try:
                stack.extend(reversed(_children(obj)))
                reach = _attribute_reach(obj)
                if second:
                    stack.extend(reversed(reach))
                else:
                    deferred.extend(reach)
            except Exception:  # noqa: BLE001 - an object whose attributes cannot be read holds nothing we can find
                continue
    return found


def _global_states() -> list:
    """The generators :func:`_reseed` seeds as global states (:mod:`random`'s, numpy's legacy, torch's
    default), which the walk through modules and classes must not give a second stream."""
    states: list = [getattr(_random, "_inst", None), getattr(np.random.mtrand, "_rand", None)]
    torch = sys.modules.get("torch")
    if torch is not None:
        states.append(getattr(torch, "default_generator", None))
    return [s for s in states if s is not None]


def _user_classes(cls: type) -> list[type]:
    """``cls`` and its bases, but not the built-in ones (``object``, ``int``, ...)."""
    return [c for c in cls.__mro__ if c.__module__ != "builtins"]


def _attribute_reach(obj: Any, depth: int = 4) -> list:
    """What ``obj`` reaches through modules and classes, which :func:`_children` does not follow: for a
    function, ``name.attr`` for every module or class among the globals it names (or its closure holds) and every attribute
    name its code uses (``helpers.RNG``, ``pkg.sub.draw``, ``Noise.gen``: submodules up to ``depth``
    levels); for an instance of a user class, the attributes of its classes (``self.rng`` read from a
    class attribute). A generator held there, seeded once at import, would otherwise be copied into every
    worker process and repeat its draws there (an unsound bound)."""
    if not isinstance(obj, types.FunctionType):
        if isinstance(obj, (types.MethodType, types.BuiltinMethodType, functools.partial, list, tuple, dict)):
            return []
        return [v for c in _user_classes(type(obj)) for k, v in vars(c).items() if not k.startswith("__")]
    names = dict.fromkeys(_global_names(obj.__code__))
    g = obj.__globals__
    out: list = []
    cells = []
    for cell in obj.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    named = [g[n] for n in names if n in g] + cells
    holders = [(h, 1) for h in named if isinstance(h, (types.ModuleType, type))]
    seen: set[int] = set()
    while holders:
        holder, level = holders.pop(0)
        if id(holder) in seen:
            continue
        seen.add(id(holder))
        spaces = [vars(c) for c in _user_classes(holder)] if isinstance(holder, type) else [vars(holder)]
        for n in names:
            for space in spaces:
                if n not in space:
                    continue
                value = space[n]
                if isinstance(value, (types.ModuleType, type)):
                    if level < depth:
                        holders.append((value, level + 1))
                else:
                    out.append(value)
                break
    return out


def _children(obj: Any) -> list:
    """What ``obj`` refers to, for :func:`_hidden_rngs`."""
    children: list = []
    if isinstance(obj, types.FunctionType):
        for cell in obj.__closure__ or ():
            try:
                children.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        children.extend(obj.__defaults__ or ())
        children.extend((obj.__kwdefaults__ or {}).values())
        g = obj.__globals__
        children.extend(g[n] for n in dict.fromkeys(_global_names(obj.__code__)) if n in g)
    elif isinstance(obj, (types.MethodType, types.BuiltinMethodType)):
        children.extend([getattr(obj, "__self__", None), getattr(obj, "__func__", None)])
    elif isinstance(obj, functools.partial):
        children.extend([obj.func, *obj.args, *obj.keywords.values()])
    elif isinstance(obj, (list, tuple)):
        children.extend(obj[:1000])
    elif isinstance(obj, dict):
        children.extend(list(obj.values())[:1000])
    else:
        attrs = getattr(obj, "__dict__", None)
        if isinstance(attrs, dict):
            children.extend(attrs.values())
        call = getattr(type(obj), "__call__", None)
        if isinstance(call, types.FunctionType):
            children.append(call)
    return children


def _is_torch_generator(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, getattr(torch, "Generator", ()))


def _seed_int(seq: np.random.SeedSequence) -> int:
    return int.from_bytes(seq.generate_state(4, np.uint32).tobytes(), "little")


def _reseed(rngs: list, key: tuple, seed: int) -> None:
    """Give this chunk its own streams: global random states and the sampler's generators (see module doc)."""

    def seq(k: int) -> np.random.SeedSequence:
        return np.random.SeedSequence(seed, spawn_key=(*key, k))

    _random.seed(_seed_int(seq(1)))
    np.random.seed(seq(2).generate_state(8, np.uint32))
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "manual_seed"):
        torch.manual_seed(_seed_int(seq(3)) % (1 << 63))
    for k, g in enumerate(rngs):
        s = seq(16 + k)
        if isinstance(g, _random.Random):
            g.seed(_seed_int(s))
        elif _is_torch_generator(g):
            g.manual_seed(_seed_int(s) % (1 << 63))
        else:
            bg = g.bit_generator if isinstance(g, np.random.Generator) else g._bit_generator
            if _fresh_in_every_copy(g, bg):
                continue  # takes no seed, and no copy of it repeats another's draws: nothing to give it
            try:
                bg.state = type(bg)(s).state
            except Exception as exc:  # noqa: BLE001 - a bit generator that cannot be built from a SeedSequence
                raise MechanismError(
                    f"cannot give the {type(bg).__name__} generator held by the mechanism its own stream in a worker "
                    f"process ({type(exc).__name__}: {exc}): it takes no seed, and copies of one state in several "
                    "workers would repeat draws (an unsound bound). Fix: draw from the rng argument "
                    "(fn(data, size, rng)) or hold a numpy PCG64/MT19937/Philox/SFC64 generator (each worker then "
                    "gets its own stream), or audit with workers=1 and no cluster (this process only)."
                ) from exc


def fresh_generators(fn: Any) -> list[str]:
    """The names of the generators reachable from ``fn`` (as :func:`_reseed` finds them) that take no
    seed but draw fresh randomness in every copy (:func:`_fresh_in_every_copy`): an audit of ``fn`` is
    then not reproducible by seed, though sound."""
    names = []
    for g in _hidden_rngs(fn):
        if isinstance(g, (np.random.Generator, np.random.RandomState)):
            bg = g.bit_generator if isinstance(g, np.random.Generator) else g._bit_generator
            if _fresh_in_every_copy(g, bg) and type(bg).__name__ not in names:
                names.append(type(bg).__name__)
    return names


def _fresh_in_every_copy(g: Any, bg: Any) -> bool:
    """Whether the bit generator ``bg`` (of ``g``) takes no seed yet never repeats another copy's draws, so
    a worker may use its own copy as it is (not reproducible by seed, but independent):

    * randomgen's ``RDRAND``: every word comes from the processor's hardware generator; a copy shipped
      to a worker (pickled) carries no state that determines its draws (its word buffer is not restored,
      and refills from the processor);
    * Tumult Core's process generator (``tmlt.core.random.rng``: RDRAND, or ``os.urandom`` on a
      processor without it), which the library builds afresh in every process.

    A generator built from a fixed seed, or any other that cannot be seeded, is not: copies of it would
    repeat draws, and :func:`_reseed` refuses it with the fix."""
    cls = type(bg)
    if cls.__module__.startswith("randomgen.") and cls.__name__ == "RDRAND":
        return True
    tmlt = sys.modules.get("tmlt.core.random.rng")
    return tmlt is not None and g is getattr(tmlt, "_core_privacy_prng", None)


_REPLAY_BITS = 128  # a chunk's outputs are compared with the others' only when they carry this much variety
_CHUNK_OUTPUTS = threading.local()  # the outputs of the per-call chunk this thread runs in a worker


def _note_outputs(out: Any) -> None:
    """Keep a chunk's outputs for :func:`_run_chunk` to fingerprint, when it asked (a per-call chunk in a
    worker; nothing is kept or computed otherwise)."""
    if getattr(_CHUNK_OUTPUTS, "armed", False):
        _CHUNK_OUTPUTS.out = out


def outputs_fingerprint(out: Any) -> bytes | None:
    """A digest of a chunk's outputs in order, or None when they carry fewer than ``_REPLAY_BITS`` bits of
    variety: ``Σ_v c_v log2(n / c_v)`` over the distinct outputs v (c_v times among n), the information
    in the sequence if its outputs were drawn independently with their observed frequencies. Two chunks
    drawn with different seeds that give the same outputs with that much variety did not draw
    independently (by chance: probability about 2^-128 per pair of chunks)."""
    import hashlib

    arr = np.asarray(out)
    if arr.ndim == 0 or len(arr) < 2:
        return None
    if arr.dtype == object or arr.dtype.hasobject:
        rows = np.array([repr(v) for v in arr.tolist()], dtype=object)
        blob = "\x00".join(rows.tolist()).encode()
    else:
        flat = np.ascontiguousarray(arr).reshape(len(arr), -1)
        rows = flat.view(np.dtype((np.void, flat.dtype.itemsize * flat.shape[1]))).ravel()
        blob = flat.tobytes()
    _, counts = np.unique(rows, return_counts=True)
    n = len(arr)
    if float(np.sum(counts * np.log2(n / counts))) < _REPLAY_BITS:
        return None
    return hashlib.blake2b(blob, digest_size=16).digest()


def _run_chunk(token: str, payload: bytes, task: tuple) -> tuple[tuple, Any, float, bytes | None]:
    """A worker's task: unpickle the job once per process, reseed, run one chunk; (task, result, seconds,
    the fingerprint of a per-call sampler's outputs or None)."""
    import pickle

    with _WORKER_LOCK:
        entry = _WORKER_JOBS.get(token)
        if entry is None:
            job = pickle.loads(payload)
            entry = (job, _hidden_rngs(job.sampler.fn))
            while len(_WORKER_JOBS) >= 4:
                _WORKER_JOBS.pop(next(iter(_WORKER_JOBS)))
            _WORKER_JOBS[token] = entry
    job, rngs = entry
    t0 = time.perf_counter()
    if job.sampler.vectorized:  # draws from its rng argument: threads of one worker may run chunks side by side
        _reseed(rngs, job.key(task), job.seed)
        out = job.run(task)
        fp = None
    else:  # global and held states are shared by the threads of a worker: one per-call chunk at a time
        with _WORKER_LOCK:
            _CHUNK_OUTPUTS.armed, _CHUNK_OUTPUTS.out = True, None
            try:
                _reseed(rngs, job.key(task), job.seed)
                out = job.run(task)
                drawn = _CHUNK_OUTPUTS.out
            finally:
                _CHUNK_OUTPUTS.armed, _CHUNK_OUTPUTS.out = False, None
            fp = None if drawn is None else outputs_fingerprint(drawn)
    return task, out, time.perf_counter() - t0, fp


# --------------------------------------------------------------------------- running tasks


def _pickle_job(job: Any) -> bytes:
    import cloudpickle

    return cloudpickle.dumps(job)


class _Tasks:
    """Chunks of one job running on the local pool or a dask cluster, with the hang detector."""

    def __init__(self, job: Any, backend: Any, token: str, payload: Any, workers: int, where: str) -> None:
        self.job, self.backend, self.token, self.payload = job, backend, token, payload
        self.workers, self.where = workers, where
        self.slowest = 0.0
        self.drawn = 0
        self.seen: dict[bytes, tuple] = {}  # fingerprint of a per-call chunk's outputs -> its task

    @classmethod
    def open(cls, job: Any, *, workers: int, cluster: Any, what: str) -> "_TasksContext":
        return _TasksContext(cls, job, workers, cluster, what)

    def _limit(self, size: int) -> float:
        """Seconds without any chunk finishing after which the job is taken for a hang: ``_TIMEOUT_FACTOR``
        times the larger of the slowest chunk seen and a chunk of ``size`` samples at the sampler's
        measured pace (the slowest per-sample cost noted on any of its inputs, :func:`note_pace`: a chunk
        of a slow input is not judged by the fast chunks that finished first), at least ``_MIN_TIMEOUT``
        (or the job's own ``min_timeout``); ``_UNKNOWN_TIMEOUT`` while neither is known."""
        least = max(_MIN_TIMEOUT, getattr(self.job, "min_timeout", 0.0))  # a job may need more than drawing
        pace = _PACE.get(self.job.sampler) if _hashable(self.job.sampler) else None
        if not self.slowest and not pace:
            return max(least, _UNKNOWN_TIMEOUT)
        return max(least, _TIMEOUT_FACTOR * max(self.slowest, (pace or 0.0) * size))

    def run(self, tasks: Iterable[tuple]):
        """Yield (task, result) as chunks finish (any order); raise MechanismError on a hang. ``tasks``
        may be a generator: at most ``_WINDOW_PER_WORKER`` tasks per worker are submitted at a time, so
        memory does not grow with the number of tasks. On Ctrl-C (or any other exception that is not
        an ``Exception``) the workers are killed: a running chunk is not waited for."""
        tasks = iter(tasks)
        window = max(8, _WINDOW_PER_WORKER * self.workers)
        pending: dict = {}  # future -> (submission number, task)
        numbers = itertools.count()
        size = self.job.chunks.chunk

        def fill() -> None:
            for task in itertools.islice(tasks, window - len(pending)):
                pending[self.backend.submit(_run_chunk, self.token, self.payload, task)] = (next(numbers), task)

        try:
            fill()
            while pending:
                limit = self._limit(size)
                done = self.backend.wait_first(list(pending), limit)
                if not done:
                    self._hang(pending, limit)
                for fut in done:
                    _number, task = pending.pop(fut)
                    _task, out, seconds, fp = self.backend.result(fut, self.job.describe(task))
                    if fp is not None:
                        self._check_replay(fp, task)
                    self.slowest = max(self.slowest, seconds)
                    samples = self.job.samples(task)
                    if samples is not None:
                        self.drawn += samples
                        note_pace(self.job.sampler, seconds, samples)
                    yield task, out
                fill()
        except (KeyboardInterrupt, SystemExit):
            self.backend.abort()
            pending.clear()
            raise
        finally:
            if pending:
                self.backend.cancel(list(pending))

    def _check_replay(self, fp: bytes, task: tuple) -> None:
        """Refuse the audit when two chunks drawn with different seeds gave the same outputs (see
        :func:`outputs_fingerprint`): the mechanism draws from a generator the reseeding cannot reach,
        copied into every worker process, so the chunks are not independent samples."""
        first = self.seen.setdefault(fp, task)
        if first == task:
            return
        self.backend.abort()
        raise MechanismError(
            f"the randomness of mechanism {self.job.sampler.name!r} repeats across worker processes: "
            f"{self.job.describe(first)} and {self.job.describe(task)}, drawn with different seeds, gave the same "
            f"outputs (at least {_REPLAY_BITS} bits of variety: not by chance). It draws from a generator this "
            "audit cannot reach and reseed (held in compiled code, say), which every worker copied from one "
            "state, so their samples are not independent and no bound from them would hold. Fix: draw from the "
            "rng argument (fn(data, size, rng)), or audit with workers=1 and no cluster (this process only)."
        )

    def _hang(self, pending: dict, limit: float) -> None:
        _number, oldest = min(pending.values())
        self.backend.abort()
        raise AuditTimeLimit(
            f"TIMEOUT: no chunk finished within {limit:.0f} s while {self.where} with mechanism "
            f"{self.job.sampler.name!r} on {self.backend.describe(self.workers)} ({self.drawn} samples drawn so "
            f"far): {self.job.describe(oldest)} (the oldest of {len(pending)} unfinished chunks submitted) is "
            "still not done. A time limit, not a finding: the mechanism may be far slower on some inputs than "
            "measured, or block in a worker process (a lock, a network or file call, a thread pool that does not "
            "survive in a child process); pass fewer samples, run it in this process with workers=1, or check it "
            "for blocking calls."
        )


def run_tasks(job: Any, *, workers: int, cluster: Any, what: str) -> "_TasksContext":
    """A context manager giving a runner of ``job``'s tasks on the local pool (``workers`` processes)
    or ``cluster`` — ``running.run(tasks)`` yields ``(task, result)`` as they finish, with the hang
    detector — or ``None`` when the job cannot be shipped (then run its tasks here). ``job`` has the
    interface of this module's jobs: ``sampler``, ``seed``, ``chunks``, ``run(task)``, ``key(task)``
    (the seed key of the task's global random states), ``samples(task)``, ``describe(task)``, and
    optionally ``min_timeout``."""
    return _Tasks.open(job, workers=max(1, workers), cluster=cluster, what=what)


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


class _TasksContext:
    """Opens the backend for a job (or None when the job cannot be pickled for the local pool) and closes it."""

    def __init__(self, cls: type, job: Any, workers: int, cluster: Any, what: str) -> None:
        self.cls, self.job, self.workers, self.cluster, self.what = cls, job, workers, cluster, what
        self.backend: _cluster.DaskBackend | _LocalPool | None = None

    def __enter__(self) -> "_Tasks | None":
        if self.cluster is None and not _loky_installed():
            warnings.warn(
                f"workers={self.workers} needs the loky package for its worker processes, which is not "
                "installed; running in this process instead (pip install loky, or pass workers=1 to silence "
                "this).",
                RuntimeWarning,
                stacklevel=4,
            )
            return None
        try:
            payload = _pickle_job(self.job)
        except Exception as exc:  # noqa: BLE001 - cloudpickle raises many types on unpicklable state
            msg = (
                f"mechanism {self.job.sampler.name!r} (or an event) cannot be sent to worker processes: cloudpickle "
                f"raised {type(exc).__name__}: {str(exc)[:200]}"
            )
            if self.cluster is not None:
                raise MechanismError(
                    msg + "; make it picklable (no open files, locks or sockets in its closure) "
                    "or audit without a cluster."
                ) from exc
            warnings.warn(
                msg + "; drawing in this process instead (same outputs for a vectorised sampler; pass "
                "workers=1 to silence this).",
                RuntimeWarning,
                stacklevel=4,
            )
            return None
        token = uuid.uuid4().hex
        if self.cluster is not None:
            self.backend = _cluster.DaskBackend.open(self.cluster, self.workers)
            try:
                payload = self.backend.share(payload)
            except BaseException:
                self.backend.close()
                raise
        else:
            self.backend = _LocalPool(self.workers)
        return self.cls(self.job, self.backend, token, payload, self.workers, self.what)

    def __exit__(self, *exc_info) -> None:
        if self.backend is not None:
            self.backend.close()


def _loky_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("loky") is not None
    except ValueError:  # a test removed it from sys.modules
        return False


def _use_import_path(path: tuple, parent: int | None = None) -> None:
    """Worker initializer: the parent's ``sys.path`` in its order, then the worker's own other entries;
    one BLAS thread per worker (the pool has a worker per core); the worker ends once ``parent`` (the
    process that runs the pool) has (:func:`~dpharness._run.watch_parent`)."""
    from dpharness._run import single_blas_thread, watch_parent

    sys.path[:] = list(path) + [p for p in sys.path if p not in path]
    single_blas_thread()
    if parent is not None:
        watch_parent(parent)


# what every audit worker needs to run a chunk (numpy, the runner, the event families, the catalog, cloudpickle):
# imported once, in the fork server its workers are forked from
_PRELOAD = ("dpharness.auditors", "dpharness.auditors.families", "dpharness.mechanisms", "cloudpickle")
_COMPILED_PRELOAD = ("dpharness.mechanisms._exact_warm",)  # the exact samplers' compiled loops, loaded once


_EXECUTOR: Any = None  # the loky executor this process last used (reused across audits)


def shutdown_pool() -> None:
    """Stop the local worker pool this process started, if any, and wait for its workers to exit.
    For a process that is about to end without running its exit handlers (a gate worker): its idle
    audit workers would otherwise outlive it for the pool's idle time, holding its stdout open."""
    global _EXECUTOR
    if _EXECUTOR is not None:
        _EXECUTOR.shutdown(wait=True, kill_workers=True)
        _EXECUTOR = None


class _LocalPool:
    """loky's reusable executor (cloudpickle, reused across calls, idle workers exit) whose workers
    are forks of a fork server that imported the auditors once (:func:`dpharness._run.forkserver_context`):
    a worker costs a fork, not an interpreter start-up and the imports (about a second of CPU each).
    Never a fork of this process, whose thread pools (torch, BLAS, OpenMP) may hold locks. Where there
    is no fork server, loky's own fork+exec workers."""

    def __init__(self, workers: int) -> None:
        import loky

        from dpharness._run import forkserver_context

        global _EXECUTOR
        self._loky = loky
        # a worker's import path: this process's in its order (a mechanism defined in a module imported from
        # a path added at run time, a project's --module or a test's tmp dir, unpickles there)
        # an exact sampler ran here (numba is loaded): the server loads its compiled loops once for every
        # worker (dpharness.mechanisms._exact_warm); the server started first keeps its own list
        preload = _PRELOAD + (_COMPILED_PRELOAD if "numba" in sys.modules else ())
        self.executor = loky.get_reusable_executor(
            max_workers=workers,
            timeout=_IDLE_SECONDS,
            initializer=_use_import_path,
            initargs=(tuple(sys.path), os.getpid()),
            context=forkserver_context(preload),
        )
        _EXECUTOR = self.executor

    def submit(self, fn: Callable, *args: Any) -> Any:
        return self.executor.submit(fn, *args)

    def wait_first(self, futures: list, timeout: float) -> list:
        done, _ = _wait_futures(futures, timeout=timeout, return_when=FIRST_COMPLETED)
        return list(done)

    def result(self, fut: Any, where: str) -> Any:
        try:
            return fut.result()
        except (
            self._loky.process_executor.TerminatedWorkerError,
            self._loky.process_executor.BrokenProcessPool,
        ) as exc:
            raise MechanismError(
                f"a worker process died while running {where} ({str(exc)[:300]}); the mechanism may "
                "crash the interpreter or exhaust memory: try workers=1 to see its error."
            ) from exc

    def cancel(self, futures: list) -> None:
        for f in futures:
            f.cancel()

    def abort(self) -> None:
        self.executor.shutdown(wait=True, kill_workers=True)  # kills the hung workers; the next call starts afresh

    def describe(self, workers: int) -> str:
        return f"{workers} local worker processes"

    def close(self) -> None:  # the reusable pool stays up for the next call; idle workers exit by themselves
        pass


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


def max_workers() -> int:
    """The most local worker processes an audit starts: four per CPU this process may use, at least 8 (each
    worker holds an interpreter with numpy and the mechanism: a typo such as 2000 would exhaust memory)."""
    return max(8, 4 * default_workers())


def cluster_session(cluster: Any, workers: int):
    """A context manager giving what to pass as ``cluster=`` to :func:`draw` and :func:`count_events`
    for a whole audit: ``None`` stays ``None``; ``"local"`` or an address is opened once (a
    ``LocalCluster`` of ``workers`` processes, or a ``Client``) and closed on exit; a ``Client`` is
    passed through and left open. Validates ``cluster`` (ParameterError / UnsupportedError)."""
    return _cluster.session(cluster, workers)


def count_events(
    sampler: Sampler,
    inputs: Sequence[tuple],
    events: Sequence[Sequence[Event]],
    *,
    seed: int,
    total: int,
    chunk: int,
    ref: tuple | None,
    workers: int,
    progress: Progress | None = None,
    cluster: Any = None,
    chunk_range: tuple[int, int] | None = None,
    outcomes: bool = False,
    probes: Sequence[int] = (),
    limits: Sequence[Sequence[int]] = (),
) -> list[list[np.ndarray]] | Counted:
    """Hits of each pair's events on ``total`` fresh samples a side: array [pair][side][event] (ragged -> list).

    ``workers > 1``: chunks run in the local worker pool (vectorised and per-call samplers alike).
    ``cluster``: ``None`` (this process or the local pool), ``"local"`` (a dask ``LocalCluster`` of
    ``workers`` processes, started and closed here), an address ``"tcp://HOST:PORT"`` (a ``Client``
    connected and closed here) or a ``dask.distributed.Client`` (used as is, left open). Only counts
    leave a chunk. ``chunk_range=(first, stop)``: count only those chunks of the plan of ``total``
    (a sequential audit's looks; each chunk draws the same samples as in a full count). See the module
    docstring for determinism and the hang detector.

    ``outcomes=True``: a call that raises is recorded, not an error, and a :class:`Counted` is
    returned. ``probes[pair]`` (with ``outcomes``; default none): for a vectorised sampler, that many
    size-1 calls a side observe whether one release raises (in chunks of :data:`PROBE_CHUNK`; with
    ``chunk_range`` the probe chunks in the same proportion of theirs); for a per-call sampler, whose
    certification calls are themselves such observations, a positive number only asks for the pair
    to be drawn even when it has no events.

    ``limits[pair][event]`` (default: every chunk): an event is counted on the first that many chunks
    of the plan only (its hits are then of their samples, :meth:`ChunkPlan.samples`); a chunk none of
    whose pair's events is counted on is not drawn, unless the pair's calls are its raise probes."""
    _cluster.check_cluster(cluster)
    if probes and not outcomes:
        raise ParameterError("probes= observes raising calls; pass outcomes=True with it.")
    chunks = chunk_plan(total, chunk)
    first, stop = (0, len(chunks)) if chunk_range is None else chunk_range
    probes = tuple(int(k) for k in probes) + (0,) * (len(inputs) - len(probes))
    probe_chunks = tuple(chunk_plan(k, PROBE_CHUNK) if sampler.vectorized else () for k in probes)
    job = _CountJob(
        sampler,
        tuple(tuple(p) for p in inputs),
        tuple(tuple(e) for e in events),
        seed,
        ref,
        chunks,
        outcomes,
        probe_chunks,
        tuple(tuple(int(k) for k in lim) for lim in limits),
    )
    drawn = [bool(len(events[p])) or (probes[p] > 0 and not sampler.vectorized) for p in range(len(inputs))]
    # the chunks of a pair drawn: all, or those some event is counted on (its calls not its raise probes)
    ends = [
        stop
        if not limits or not len(events[p]) or (probes[p] > 0 and not sampler.vectorized)
        else min(stop, max(first, max(int(k) for k in limits[p])))
        for p in range(len(inputs))
    ]
    # the probe chunks of this look: the same fraction of theirs as the chunks of the plan
    probe_ranges = [
        ((first * len(plan)) // max(1, len(chunks)), (stop * len(plan)) // max(1, len(chunks))) for plan in probe_chunks
    ]
    n_tasks = sum(2 * max(0, ends[p] - first) for p in range(len(inputs)) if drawn[p]) + sum(
        2 * max(0, hi - lo) for lo, hi in probe_ranges
    )

    def all_tasks():  # generated, never held: a plan of 10^7 chunks is not a list of 10^7 tasks
        for p in range(len(inputs)):
            if drawn[p]:
                for s in (0, 1):
                    yield from ((p, s, c) for c in range(first, ends[p]))
        for p, (lo, hi) in enumerate(probe_ranges):
            for s in (0, 1):
                yield from ((p, s, c, PROBE) for c in range(lo, hi))

    result = [[np.zeros(len(events[p]), dtype=np.int64) for _ in (0, 1)] for p in range(len(inputs))]
    # tallies of raising calls, folded as chunks finish, whatever their order: sums, the union of the
    # types, and ``first`` from the lowest chunk that raised (the tally of the chunks added in order)
    tallies = [[Raises(), Raises()] for _ in inputs]
    probed = [[Raises(), Raises()] for _ in inputs]
    earliest: dict[tuple, int] = {}

    def add(task: tuple, out: Any) -> None:
        if outcomes:
            out, got = out
            table = tallies if len(task) == 3 else probed
            p, s, c = task[:3]
            have, key = table[p][s], (len(task), p, s)
            where = have.first
            if got.first and c < earliest.get(key, c + 1):
                earliest[key], where = c, got.first
            table[p][s] = Raises(
                have.calls + got.calls, have.raised + got.raised, tuple(sorted(set(have.types) | set(got.types))), where
            )
        result[task[0]][task[1]] += out
        if progress:
            progress.update()

    use_pool = cluster is not None or (workers > 1 and not _mp.current_process().daemon)
    workers = max(1, min(workers, n_tasks))
    pooled = False
    if use_pool and n_tasks:
        with _Tasks.open(job, workers=workers, cluster=cluster, what="counting certification samples") as running:
            if running is not None:
                for t, out in running.run(all_tasks()):
                    add(t, out)
                pooled = True
    if not pooled:
        seconds, cpu, counted = 0.0, 0.0, 0
        for t in all_tasks():
            t0, c0 = time.perf_counter(), time.process_time()
            out = job.run(t)
            if len(t) == 3:  # probes say nothing of the pace of a sampler's chunks
                seconds, counted = seconds + time.perf_counter() - t0, counted + 1
                cpu += time.process_time() - c0
            add(t, out)
        size = chunks[0][1] if len(chunks) else 0
        note_pace(sampler, seconds, counted * size, cpu=cpu, per_call=size)
    if not outcomes:
        return result
    if not sampler.vectorized:
        probed = [[tallies[p][s] if probes[p] > 0 else Raises() for s in (0, 1)] for p in range(len(inputs))]
    return Counted(result, tallies, probed)
