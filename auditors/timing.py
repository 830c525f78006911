"""Timing as an output channel: a certified lower bound on the ε of ``(value, duration)`` releases.

Jin, McMurtry, Rubinstein and Ohrimenko, "Are We There Yet? Timing and Floating-Point Attacks on
Differential Privacy Systems", IEEE S&P 2022, §IV: samplers whose loop count depends on the input or
on the sampled value (rejection loops, discrete Laplace / Gaussian by repeated Bernoulli trials) leak
through their running time even when their outputs are exactly ε-DP. Here a per-call mechanism
``fn(data)`` is treated as releasing ``(value, duration)``, where ``duration`` is the call's wall time
in integer nanoseconds read from a monotonic clock tightly around the call (``t0 = clock();
v = fn(x); t1 = clock()``), and that pair is audited like any output.

Procedure (:func:`timing_audit`)
--------------------------------
1. *Schedule.* All calls run in this process, one after another (durations measured in different
   processes are not comparable: another core, another cache, another share of the CPU; so there is
   no ``workers`` > 1). Calls are grouped in batches of ``batch`` calls on the data and ``batch`` on the
   neighbour, in an order drawn uniformly at random within each batch from ``seed``
   (``rng.permutation``), so a slow period of the machine falls on both sides alike; ``warmup``
   interleaved calls a side run first and are discarded (imports, caches, the allocator).
2. *Training.* On the first ``train_fraction`` of the calls each family proposes events over
   (value, duration): duration thresholds ``duration > t`` and ``duration <= t`` on a quantile grid of
   the pooled durations; the existing value families of :mod:`dpharness.auditors.events` (histograms,
   thresholds, atoms, coordinates) for the value alone; joint events ``value in S and duration > t``
   (and ``<= t``) for the best value events S, on a grid of the durations inside S. Each (event,
   direction) is ranked by the bound it would certify at the training frequencies
   (:func:`~dpharness.auditors.stats.projected_epsilon_expected`), and the best ``max_events`` are kept.
3. *Certification.* Fresh calls (the rest) are counted for the kept events only, and
   :func:`~dpharness.auditors.stats.epsilon_lower_bound` turns the counts into exact one-sided
   Clopper-Pearson bounds with one Bonferroni union bound over the kept candidates.

Soundness
---------
When the calls are independent and identically distributed on each side (a machine whose load does
not change), this is the audit of :mod:`dpharness.auditors.stats` verbatim: the events are fixed
before the certification calls run, so with probability >= ``confidence`` the bound is at most the
true ε of the (value, duration) channel.

Machine load changes during an audit. The random order within each batch makes a call's side
independent of *when* it runs, so under the null hypothesis that a call's (value, duration) depends on
when it runs but not on which input it got, the two sides see the same machine: every slot is on
either side with probability 1/2, and the expected hit counts of every event are equal. Conditionally
on the machine's course, each side's count is a sum of independent Bernoulli variables with different
probabilities, whose tails beyond one from the mean are no heavier than the binomial's at the same
mean (Hoeffding 1956, "On the distribution of the number of successes in independent trials",
Theorem 4); and the variance of the difference of the two sides' counts is at most that of two
independent binomials at the pooled frequency (the balanced assignment within a batch only removes
the between-batch part of the variance). The union bound and the Clopper-Pearson levels are those of
the i.i.d. audit. That argument is the reason for the interleaving; the false-alarm rate under this
machine's load is *measured* (``benchmarks/bench_timing.py``, the slow test in
``tests/test_timing.py``), not only argued.

What a duration measures: the wall time of the call in this process, including the interpreter's
call overhead and anything the operating system or the garbage collector does meanwhile (noise on
both sides alike). The clock's stated resolution is reported; differences far below it, or below the
spread of the load's noise, are not detected (the bound is then low, never wrong).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np

from dpharness import _validate as _v
from dpharness.core import Event
from dpharness.errors import MechanismError, ParameterError

from . import events as _events
from . import stats as _stats

__all__ = ["timing_audit", "TimingAuditResult", "TimingEvent"]

_CLOCKS: dict[str, tuple[Callable[[], int], Literal["perf_counter", "monotonic"]]] = {
    "perf_counter": (time.perf_counter_ns, "perf_counter"),
    "monotonic": (time.monotonic_ns, "monotonic"),
}
_DURATION_POINTS = 64  # quantile grid of the pooled training durations
_JOINT_VALUE_EVENTS = 4  # value events combined with duration thresholds
_JOINT_POINTS = 32  # duration grid inside each of them
_MIN_HALF = 20  # calls a side, at least, for training and for certification


# --------------------------------------------------------------------------- events over (value, duration)


@dataclass(frozen=True)
class TimingEvent:
    """A set of (value, duration) releases: ``value in S`` (``value`` an :class:`~dpharness.core.Event`;
    None: any value) and ``duration > threshold_ns`` (``slower=True``) or ``duration <= threshold_ns``
    (``slower=False``; ``threshold_ns`` None: any duration). ``family`` is ``"duration"``, ``"value"``
    or ``"joint"``."""

    value: Event | None
    threshold_ns: int | None
    slower: bool = True

    @property
    def family(self) -> str:
        if self.value is None:
            return "duration"
        return "value" if self.threshold_ns is None else "joint"

    @property
    def description(self) -> str:
        parts = []
        if self.value is not None:
            parts.append(self.value.description)
        if self.threshold_ns is not None:
            parts.append(f"duration {'>' if self.slower else '<='} {self.threshold_ns} ns")
        return " and ".join(parts) if parts else "any release"

    def contains(self, values: np.ndarray, durations: np.ndarray) -> np.ndarray:
        """Boolean membership of each release (first axis of ``values``, ``durations``)."""
        d = np.asarray(durations)
        hit = np.ones(len(d), dtype=bool)
        if self.threshold_ns is not None:
            hit &= (d > self.threshold_ns) if self.slower else (d <= self.threshold_ns)
        if self.value is not None:
            hit &= np.asarray(self.value.contains(values), dtype=bool).reshape(len(d))
        return hit


# --------------------------------------------------------------------------- result


@dataclass(frozen=True)
class TimingAuditResult:
    """Outcome of :func:`timing_audit`.

    ``epsilon_lower_bound``: with probability >= ``confidence`` (module docstring) at most the true ε
    of the (value, duration) channel; ``passed`` is False iff it exceeds the claimed ``epsilon``
    (a certified violation). ``event``/``event_description``: the certifying event (None when no
    candidate was positive), ``data_over_neighbor``: its direction (True: more likely on ``data``);
    ``hits_data``/``hits_neighbor`` its hits among ``certification_samples`` calls a side (0 without one);
    ``family``: ``"duration"``, ``"value"``, ``"joint"`` or None. ``samples`` calls a side in all
    (``train_samples`` + ``certification_samples``, after ``warmup`` discarded calls a side).
    ``timer``: the clock read around each call; ``timer_resolution_ns``: its resolution as the
    operating system states it (None for a user's clock). ``median_ns_data``/``median_ns_neighbor``:
    median certification durations. ``method`` names the statistics and the union bound."""

    epsilon_lower_bound: float
    passed: bool
    epsilon: float
    delta: float
    confidence: float
    samples: int
    train_samples: int
    certification_samples: int
    warmup: int
    batch: int
    seed: int
    method: str
    event: TimingEvent | None
    event_description: str
    data_over_neighbor: bool | None
    hits_data: int
    hits_neighbor: int
    family: str | None
    events_tested: int
    timer: str
    timer_resolution_ns: float | None
    median_ns_data: float
    median_ns_neighbor: float
    elapsed: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def verdict(self) -> str:
        return "passed" if self.passed else "VIOLATION"

    def _repr_html_(self) -> str:
        """Jupyter: the certified bound against the claim, the event and the timer."""
        from dpharness._html import card

        return card(
            "timing audit",
            self.verdict,
            "good" if self.passed else "bad",
            [
                ("certified ε lower bound", f"{self.epsilon_lower_bound:.6g} (confidence {self.confidence:g})"),
                ("claim", f"ε = {self.epsilon:g}" + (f", δ = {self.delta:g}" if self.delta else "")),
                ("event", self.event_description or None),
                (
                    "calls a side",
                    f"{self.samples} ({self.train_samples} training, {self.certification_samples} certification)",
                ),
                ("timer", f"{self.timer} (resolution {self.timer_resolution_ns} ns)"),
                (
                    "median durations",
                    f"{self.median_ns_data:.0f} ns (data), {self.median_ns_neighbor:.0f} ns (neighbor)",
                ),
                ("seconds", f"{self.elapsed:.3g}"),
            ],
            [("method", [self.method]), ("notes", list(self.notes))],
        )

    def to_dict(self) -> dict:
        eps = self.epsilon_lower_bound
        return {
            "epsilon_lower_bound": eps if math.isfinite(eps) else "inf",
            "passed": self.passed,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "confidence": self.confidence,
            "samples": self.samples,
            "train_samples": self.train_samples,
            "certification_samples": self.certification_samples,
            "warmup": self.warmup,
            "batch": self.batch,
            "seed": self.seed,
            "method": self.method,
            "event": self.event_description,
            "data_over_neighbor": self.data_over_neighbor,
            "hits_data": self.hits_data,
            "hits_neighbor": self.hits_neighbor,
            "family": self.family,
            "events_tested": self.events_tested,
            "timer": self.timer,
            "timer_resolution_ns": self.timer_resolution_ns,
            "median_ns_data": self.median_ns_data,
            "median_ns_neighbor": self.median_ns_neighbor,
            "elapsed": self.elapsed,
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------- public entry


def timing_audit(
    fn: Callable[[Any], Any],
    data: Any,
    neighbor: Any,
    *,
    epsilon: float,
    delta: float = 0.0,
    samples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    train_fraction: float = 0.5,
    warmup: int = 100,
    batch: int = 50,
    max_events: int = 16,
    clock: str | Callable[[], int] = "perf_counter",
    workers: int | None = None,
) -> TimingAuditResult:
    """Certified lower bound on the ε of ``fn`` when each call's duration is released with its value.

    ``fn(data)`` returns one output and draws its own randomness; it is called ``warmup + samples``
    times on ``data`` and as often on ``neighbor``, interleaved in a random order within each batch of
    ``batch`` calls a side (module docstring). ``epsilon``/``delta``: the claim to test (δ = 0 by
    default). ``samples``: calls a side after the warm-up, of which ``train_fraction`` choose events
    and the rest certify. ``seed`` draws the call order (``fn``'s own randomness is its own).
    ``max_events``: (event, direction) candidates certified at once (the Bonferroni count).
    ``clock``: ``"perf_counter"`` (:func:`time.perf_counter_ns`, default) or ``"monotonic"``
    (:func:`time.monotonic_ns`), or a callable returning integer nanoseconds (tests inject a fake one).
    ``workers``: None or 1 only: durations from different processes are not comparable.

    A call that raises aborts the audit with :class:`~dpharness.errors.MechanismError` (the output
    audit, :func:`dpharness.audit`, treats raising as an output; the timing audit does not).

    Returns a :class:`TimingAuditResult`; ``passed`` is False iff ``epsilon_lower_bound > epsilon``."""
    t_start = time.perf_counter()
    if not callable(fn):
        raise ParameterError(f"fn={_v._show(fn)} is not callable; pass a function fn(data) returning one output.")
    epsilon = float(_v.nonnegative("epsilon", epsilon))
    delta = float(_v.probability("delta", delta, open_right=True))
    samples = _v.integer("samples", samples, minimum=2 * _MIN_HALF, maximum=_v.MAX_SAMPLES)
    seed = _v.integer("seed", seed, minimum=0)
    confidence = float(_v.probability("confidence", confidence, open_left=True, open_right=True))
    train_fraction = float(_v.probability("train_fraction", train_fraction, open_left=True, open_right=True))
    warmup = _v.integer("warmup", warmup, minimum=0)
    batch = _v.integer("batch", batch, minimum=1)
    max_events = _v.integer("max_events", max_events, minimum=1)
    if workers is not None and _v.integer("workers", workers, minimum=1) != 1:
        raise ParameterError(
            f"workers={workers!r}: durations measured in different processes are not comparable (another "
            "core, cache and share of the CPU), so the timing channel runs in this process only; pass "
            "workers=1 or leave it out."
        )
    n_train = int(round(samples * train_fraction))
    n_cert = samples - n_train
    if n_train < _MIN_HALF or n_cert < _MIN_HALF:
        raise ParameterError(
            f"samples={samples} with train_fraction={train_fraction:g} leaves {n_train} training and {n_cert} "
            f"certification calls a side; each needs >= {_MIN_HALF}: pass more samples or a train_fraction "
            "nearer 0.5."
        )
    read, timer, resolution = _clock(clock)
    if _equal(data, neighbor):
        raise ParameterError("data and neighbor are equal; pass two different neighbouring inputs.")

    rng = np.random.default_rng(seed)
    args = (data, neighbor)
    if warmup:
        _measure(fn, args, _schedule(warmup, batch, rng), read, clock)
    train = _split(*_measure(fn, args, _schedule(n_train, batch, rng), read, clock))
    cert = _split(*_measure(fn, args, _schedule(n_cert, batch, rng), read, clock))

    level = _stats.bonferroni_level(confidence, max_events)
    notes: list[str] = []
    proposals = _propose(train, max_events=max_events, notes=notes)
    chosen = _choose(proposals, train, n_cert=n_cert, level=level, delta=delta, max_events=max_events)
    return _certify(
        chosen,
        cert,
        epsilon=epsilon,
        delta=delta,
        confidence=confidence,
        samples=samples,
        n_train=n_train,
        n_cert=n_cert,
        warmup=warmup,
        batch=batch,
        seed=seed,
        events_tested=len(proposals),
        timer=timer,
        resolution=resolution,
        notes=notes,
        elapsed=time.perf_counter() - t_start,
    )


# --------------------------------------------------------------------------- measurement


def _clock(clock) -> tuple[Callable[[], int], str, float | None]:
    if isinstance(clock, str):
        if clock not in _CLOCKS:
            raise ParameterError(
                f"clock={clock!r} is not one of {tuple(_CLOCKS)}; pass one of them or a callable "
                "returning integer nanoseconds."
            )
        read, name = _CLOCKS[clock]
        info = time.get_clock_info(name)
        if not info.monotonic:  # pragma: no cover - both are monotonic on every supported platform
            raise ParameterError(f"clock={clock!r} is not monotonic on this platform; pass clock='monotonic'.")
        return read, f"time.{name}_ns", float(info.resolution) * 1e9
    if callable(clock):
        return clock, getattr(clock, "__qualname__", repr(clock)), None
    raise ParameterError(
        f"clock={_v._show(clock)} is neither a clock name nor a callable; pass 'perf_counter', "
        "'monotonic' or a callable returning integer nanoseconds."
    )


def _equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        aa, bb = np.asarray(a), np.asarray(b)
        if aa.dtype != object and bb.dtype != object:
            return aa.shape == bb.shape and bool(np.array_equal(aa, bb))
    except Exception:  # noqa: BLE001 - any input the user's fn accepts; equality is only a courtesy check
        pass
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001
        return False


def _schedule(per_side: int, batch: int, rng: np.random.Generator) -> np.ndarray:
    """Sides (0: data, 1: neighbor) of ``2 * per_side`` calls: batches of ``batch`` calls a side (the last
    may be shorter), each in a uniformly random order."""
    blocks = []
    left = per_side
    while left > 0:
        b = min(batch, left)
        blocks.append(rng.permutation(np.repeat(np.array([0, 1], dtype=np.int8), b)))
        left -= b
    return np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int8)


def _measure(fn, args: tuple, order: np.ndarray, read: Callable[[], int], clock) -> tuple[list, np.ndarray, np.ndarray]:
    """Call ``fn(args[side])`` for each side in ``order``; the clock is read right before and after the
    call and nothing else happens in between."""
    n = len(order)
    values: list = [None] * n
    starts: list = [0] * n
    ends: list = [0] * n
    sides = order.tolist()
    i = 0
    try:
        for i, side in enumerate(sides):
            x = args[side]
            t0 = read()
            v = fn(x)
            t1 = read()
            values[i] = v
            starts[i] = t0
            ends[i] = t1
    except Exception as exc:  # noqa: BLE001 - the user's mechanism may raise anything
        which = "data" if sides[i] == 0 else "neighbor"
        raise MechanismError(
            f"fn raised {type(exc).__name__} on {which} (call {i + 1} of a schedule of {n}); the "
            "timing audit needs calls that return (audit raising with dpharness.audit)."
        ) from exc
    if not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in starts + ends):
        bad = next(t for t in starts + ends if not isinstance(t, (int, np.integer)) or isinstance(t, bool))
        raise ParameterError(
            f"clock={_v._show(clock)} returned {bad!r:.40}; pass a clock returning integer nanoseconds."
        )
    t0s = np.array(starts, dtype=np.int64)
    t1s = np.array(ends, dtype=np.int64)
    dur = t1s - t0s
    if n and dur.min() < 0:
        raise ParameterError(
            f"clock={_v._show(clock)} went backwards (a duration of {int(dur.min())} ns); pass a monotonic clock."
        )
    return values, dur, order


@dataclass(frozen=True)
class _Sides:
    values_a: np.ndarray
    values_b: np.ndarray
    dur_a: np.ndarray
    dur_b: np.ndarray


def _stack(values: list) -> np.ndarray:
    """One array of outputs (first axis = calls); ragged or non-numeric outputs become an object array."""
    try:
        arr = np.asarray(values)
        if arr.dtype != object and len(arr) == len(values):
            return arr
    except (ValueError, TypeError):
        pass
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        arr[i] = v
    return arr


def _split(values: list, dur: np.ndarray, order: np.ndarray) -> _Sides:
    a = np.flatnonzero(order == 0)
    b = np.flatnonzero(order == 1)
    return _Sides(
        values_a=_stack([values[i] for i in a]), values_b=_stack([values[i] for i in b]), dur_a=dur[a], dur_b=dur[b]
    )


# --------------------------------------------------------------------------- event families


def _value_events(a: np.ndarray, b: np.ndarray, max_events: int) -> list[Event]:
    """The output families of :mod:`dpharness.auditors.events` that fit the value's kind."""
    kind = _events.output_kind(a)
    if kind != _events.output_kind(b):
        a, b = _stack(list(a) + [None])[:-1], _stack(list(b) + [None])[:-1]  # both as objects
        kind = "object"
    if kind in ("discrete", "discrete-vector", "object"):
        return _events.propose_discrete(a, b, max_events=max_events)
    if kind == "float":
        return _events.propose_thresholds(a, b, max_events=max_events) + _events.propose_atoms(
            a, b, max_events=max_events
        )
    return _events.propose_coordinates(a, b, max_events=max_events)


def _grid(durations: np.ndarray, points: int) -> np.ndarray:
    if len(durations) == 0:
        return np.zeros(0, dtype=np.int64)
    qs = np.quantile(durations, np.linspace(0, 1, points + 1)[1:-1], method="inverted_cdf")
    return np.unique(qs.astype(np.int64))


def _propose(train: _Sides, *, max_events: int, notes: list[str]) -> list[TimingEvent]:
    """Duration thresholds, value events and joint events, without duplicates (same training hits)."""
    pooled = np.concatenate([train.dur_a, train.dur_b])
    cands: list[TimingEvent] = [
        TimingEvent(None, int(t), slower) for t in _grid(pooled, _DURATION_POINTS) for slower in (True, False)
    ]
    try:
        value_events = _value_events(train.values_a, train.values_b, max_events)
    except MechanismError as exc:
        value_events = []
        notes.append(f"value events skipped: {exc}")
    cands.extend(TimingEvent(e, None) for e in value_events)
    # joint events: the value events that best separate the sides, each with thresholds on its durations
    scored: list[tuple[float, int, Any, np.ndarray, np.ndarray]] = []
    for e in value_events:
        ha = np.asarray(e.contains(train.values_a), dtype=bool).reshape(-1)
        hb = np.asarray(e.contains(train.values_b), dtype=bool).reshape(-1)
        if ha.sum() + hb.sum() >= 2:
            scored.append((-abs(ha.mean() - hb.mean()) - 1e-3 * (ha.mean() + hb.mean()), len(scored), e, ha, hb))
    scored.sort(key=lambda s: s[:2])
    for _, _, e, ha, hb in scored[:_JOINT_VALUE_EVENTS]:
        inside = np.concatenate([train.dur_a[ha], train.dur_b[hb]])
        cands.extend(TimingEvent(e, int(t), slower) for t in _grid(inside, _JOINT_POINTS) for slower in (True, False))
    seen: set = set()
    unique = []
    for c in cands:
        ha, hb = c.contains(train.values_a, train.dur_a), c.contains(train.values_b, train.dur_b)
        key = (np.packbits(ha).tobytes(), np.packbits(hb).tobytes())
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def _choose(
    proposals: list[TimingEvent], train: _Sides, *, n_cert: int, level: float, delta: float, max_events: int
) -> list[tuple[TimingEvent, bool]]:
    """The best ``max_events`` (event, data_over_neighbor) candidates by the bound they would certify at
    their training frequencies; those projecting a positive bound, or else the single best."""
    if not proposals:
        return []
    fa = np.array([c.contains(train.values_a, train.dur_a).mean() for c in proposals])
    fb = np.array([c.contains(train.values_b, train.dur_b).mean() for c in proposals])
    fwd = _stats.projected_epsilon_expected(fa, fb, n_cert, level, delta)
    bwd = _stats.projected_epsilon_expected(fb, fa, n_cert, level, delta)
    score = np.concatenate([fwd, bwd])
    order = [i for i in np.argsort(-score, kind="stable") if np.isfinite(score[i])]
    keep = [i for i in order if score[i] > 0][:max_events] or order[:1]
    m = len(proposals)
    return [(proposals[i % m], i < m) for i in keep]


def _certify(
    chosen,
    cert: _Sides,
    *,
    epsilon,
    delta,
    confidence,
    samples,
    n_train,
    n_cert,
    warmup,
    batch,
    seed,
    events_tested,
    timer,
    resolution,
    notes,
    elapsed,
) -> TimingAuditResult:
    common = dict(
        epsilon=epsilon,
        delta=delta,
        confidence=confidence,
        samples=samples,
        train_samples=n_train,
        certification_samples=n_cert,
        warmup=warmup,
        batch=batch,
        seed=seed,
        events_tested=events_tested,
        timer=timer,
        timer_resolution_ns=resolution,
        median_ns_data=float(np.median(cert.dur_a)),
        median_ns_neighbor=float(np.median(cert.dur_b)),
        notes=tuple(notes),
    )
    if not chosen:
        return TimingAuditResult(
            epsilon_lower_bound=0.0,
            passed=True,
            event=None,
            event_description="",
            data_over_neighbor=None,
            hits_data=0,
            hits_neighbor=0,
            family=None,
            elapsed=elapsed,
            method="no candidate event on the training calls; nothing certified",
            **common,
        )
    ha = np.array([int(e.contains(cert.values_a, cert.dur_a).sum()) for e, _ in chosen])
    hb = np.array([int(e.contains(cert.values_b, cert.dur_b).sum()) for e, _ in chosen])
    fwd = np.array([f for _, f in chosen])
    h1, h0 = np.where(fwd, ha, hb), np.where(fwd, hb, ha)
    bound = _stats.epsilon_lower_bound(
        h1, n_cert, h0, n_cert, confidence=confidence, delta=delta, candidates=len(chosen)
    )
    eps = bound.epsilon
    found = bound.index >= 0
    event, forward = chosen[bound.index] if found else (None, None)
    return TimingAuditResult(
        epsilon_lower_bound=eps,
        passed=not eps > epsilon,
        event=event,
        event_description=event.description if event is not None else "",
        data_over_neighbor=bool(forward) if found else None,
        hits_data=int(ha[bound.index]) if found else 0,
        hits_neighbor=int(hb[bound.index]) if found else 0,
        family=event.family if event is not None else None,
        elapsed=elapsed,
        method=(
            f"timing channel (value, duration in ns by {timer}); calls interleaved in random order within "
            f"batches of {batch} a side after {warmup} warm-up calls a side; {len(chosen)} (event, direction) "
            f"candidate(s) chosen on {n_train} training calls a side among {events_tested} events (duration "
            f"thresholds, value, joint); certified on {n_cert} fresh calls a side: {bound.method}"
        ),
        **common,
    )
