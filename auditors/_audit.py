"""``audit``: a certified empirical lower bound on ε for a catalog mechanism or any callable.

A fixed sequence of stages (the standard train/certify split of DP auditing, as in DP-Sniper,
Bichsel et al. 2021, and Lu et al. 2022):

1. *choose pairs* — the given pair; for a catalog mechanism the pairs its structure aims at the terms
   of its bound (:meth:`~dpharness.core.Mechanism.aimed_pairs`: a key at its selection threshold, a
   record at the clipping norm, each validated here as a neighbour pair inside the declared domain), the
   neighbour search's and the proof's witness; or a callable's search over an input space
   (:mod:`dpharness.auditors.pairsearch`);
2. *train* — draw training outputs for each pair (kept in memory, capped);
3. *propose events* — every event family that applies (:mod:`dpharness.auditors.families`)
   suggests events from the first half of the training outputs;
4. *rank* — each (event, direction) is judged on the second half by the bound it would certify on
   the certification samples; the best ``max_events`` over all pairs and families are kept, a few
   of the slots reserved for events seen on one side only (outputs one input never produces);
5. *certify* — on the pair whose training draws rank best (and the proof's witness pair when it
   projects clearly less; every pair when training has fewer than 20 000 samples a side), the kept
   events are counted on fresh samples and turned into a bound with exact Clopper-Pearson intervals and
   a Bonferroni union bound over the ``max_events`` candidates (see :mod:`dpharness.auditors.stats`).
   An audit with more than 10^5 training samples a side ranks the pairs on 10^5 each and draws the rest
   only for the pairs it certifies, so its cost is about that of sampling one pair, however many pairs
   were searched.

Stages 1-4 see training samples only, so whatever they choose, with probability >= ``confidence``
over the audit's randomness the returned bound does not exceed the true ε of the pair(s) audited.

A mechanism that raises: whether a call raises is an output the adversary sees, so a call that
raises is recorded (:mod:`._runner`: the exception's type, never its message), not an abort. On a
pair whose two sides raised at different rates on their training calls, the event "one release
raises" (numerator: the side that raised more) takes one of the ``max_events`` slots ahead of the
output events, hence its share of α, and competes with them for the reported bound: each fresh
call is one observation of the Bernoulli "the call raised", and r_a raised calls of n_a against r_b
of n_b certify ε >= ln(p_a_lo / p_b_hi) with the same Clopper-Pearson bounds. Its observations are
``min(cert_n, 10^4)`` fresh size-1 calls a side for a vectorised sampler (one release each) and the
certification calls themselves for a per-call sampler. Output events keep certifying on a per-call
sampler's pairs (a raised call is a release outside every output event: counted as a miss), but not
on a vectorised sampler's pair where a call raised (see :func:`_output_events_sound`). Every call
on both inputs of every pair raising is still a :class:`MechanismError`: nothing was ever output.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from dpharness import _validate as _v
from dpharness._load import core_share, run_queue_wait
from dpharness._run import short_repr
from dpharness.core import Event, Mechanism, RenyiDP, Witness
from dpharness.errors import AuditBudgetTooSmall, MechanismError, ParameterError, UnsupportedError

from . import _runner
from . import events as _ev
from . import families as _families
from . import floats as _fl
from . import neighbours as _neighbours
from . import stats as _stats
from ._model import AuditResult

__all__ = ["audit", "DEFAULT_MAX_EVENTS"]

DEFAULT_MAX_EVENTS = 20
_RENYI_DELTA = 1e-6
_MAX_PAIRS = 4  # searched pairs audited (the proof's witness among them)
_MAX_AIMED = 6  # pairs aimed by the structure at the terms of the bound (Mechanism.aimed_pairs), on top
_PER_CALL_SEARCH_BUDGET = 20_000  # calls to a per-call fn(data) the pair search may make
_SEARCH_MIN = 100  # the pair search's samples in all, at least (its training samples when more, ...
_SEARCH_MAX = 100_000  # ... up to this)
_CHUNK = 1_000_000  # samples per chunk for vectorised mechanisms (scaled down for wide outputs)
_LOOP_CHUNK = 10_000  # samples per chunk at most for fn(data) called in a loop
_LOOP_CHUNKS = 64  # chunks a side at least (of one call or more) for fn(data) called in a loop
_POOL_MIN_SECONDS = 3.0  # an audit's draws expected to take this long in one process start a worker pool,
_POOL_MIN_DRAWS = 200_000_000  # as do this many draws (the draws the audit makes, both sides: see _draws)
_RANK_Z = 1.0  # standard errors by which training estimates are shaded when ranking events
_TRAIN_MAX = 4_000_000  # training samples a side at most (large audits choose events on more data)
_TRAIN_FULL = 1_000_000  # training samples a side taken at the full train_fraction; past them, a pure-DP
_TRAIN_SLOPE = 0.01  # audit's training grows by this share of the further samples: a training sample costs
# about ten certification samples (every family's features, proposals and ranking), and its events (half-lines,
# intervals, cells near the centre) are pinned by 10^6 samples, so its extra samples go to certification (5·10^7
# a side trains on 1.4·10^6, 3.1·10^8 on 4·10^6). An (ε, δ) audit keeps the full share: its tail events are
# extrapolated from the training's tail (gaussian_rdp at 3.3·10^7 a side: 3.27 on 1.2·10^6, 4.00 on 3.3·10^6)
_TRAIN_CHUNK = 1 << 17  # training samples per call (training outputs are held in memory)
_TRAIN_ELEMENTS = 20_000_000  # cap on training output entries a side (wide vectors get fewer rows)
_ONE_SIDED_SHARE = 2  # up to max_events // this slots go to events seen on one side only
_PACE_STREAM = 0x9ACE  # the pace probe's own seed stream (never an audit phase's)
_SCREEN_TRAIN = 100_000  # training samples a side on which pairs are ranked when an audit trains on more
_EVERY_PAIR_BELOW = 20_000  # training samples a side below which every pair is certified (a noisy ranking)
_TIE_SLACK = 0.02  # a witness pair projected within this much (absolute) of the best is certified alone,
_TIE_SHARE = 0.05  # or within this share of the best projected bound
_ROBUST_SHARE = 4  # max_events // this slots go to the best events under the multiplicity-aware shading
# families whose events are counted through bit features of every output (float cells, round trips,
# sub-binade ranges: 3-7 ns an output each, against a threshold's 0.2-0.4 ns, and a fast sampler's
# 15-20 ns): certified only where training says they see more than the values (_trim_costly), and on
# at most _COSTLY_CERT samples a side
_COSTLY_FAMILIES = frozenset({"float structure", "rounding"})
_COSTLY_CERT = 10_000_000  # certification samples a side their events are counted on, at most


@dataclass(frozen=True)
class _Settings:
    """The validated options of one audit."""

    name: str
    catalog: bool
    epsilon: float
    delta: float
    samples: int
    seed: int
    confidence: float
    vectorized: bool
    ideal_numerics: bool
    workers: int
    max_events: int
    train_n: int
    cert_n: int
    show: bool
    cluster: Any
    sequential: bool = False
    train_fraction: float = 0.1
    time_budget: float | None = None
    cut_by_time_limit: bool = False  # sized by a time budget, and fewer samples than it fits: the clock's limit
    search_samples: int | None = None  # the pair search's samples in all, as given (None: sized by the audit)


def _split(samples: int, train_fraction: float, delta: float = 0.0) -> tuple[int, int]:
    """(training, certification) samples a side of an audit of ``samples`` a side (``delta``: the claim's)."""
    train_n = max(round(samples * train_fraction), min(samples // 2, 2_000))
    if train_n > _TRAIN_FULL and delta == 0:
        full = _TRAIN_FULL / train_fraction  # the samples whose share is _TRAIN_FULL
        train_n = max(_TRAIN_FULL, round(_TRAIN_FULL + _TRAIN_SLOPE * (samples - full)))
    train_n = int(min(train_n, _TRAIN_MAX))
    return train_n, samples - train_n


@dataclass(frozen=True)
class _Training:
    """One pair's training outputs: the half that proposes events and the half that ranks them;
    the training calls that raised on each side. ``usable``: output events may be chosen on this
    pair (both sides returned outputs, and no training call of a vectorised sampler raised: see
    :func:`_output_events_sound`)."""

    kind: str | None
    propose_a: np.ndarray
    propose_b: np.ndarray
    rank_a: np.ndarray
    rank_b: np.ndarray
    raises_a: _runner.Raises = _runner.Raises()
    raises_b: _runner.Raises = _runner.Raises()
    usable: bool = True


@dataclass(frozen=True)
class _RaiseCandidate:
    """The event "one release raises" on one pair, in one direction, chosen on training calls:
    ``forward`` when the data side raised at the higher rate (numerator = data side)."""

    pair: int
    forward: bool


@dataclass(frozen=True)
class _Candidate:
    pair: int
    event: Event
    forward: bool  # True: the event is likelier on the data (numerator = data side)
    score: float  # projected bound on training data (ranking only)
    source: str  # the event family
    signature: int = 0  # hash of the event's membership on the training samples (deduplication)
    one_sided_score: float = -math.inf  # projected bound with no hits on the other side (one-sided events)
    robust_score: float = -math.inf  # projected bound shaded by sqrt(2 ln m) standard errors (m candidates)


# --------------------------------------------------------------------------- validation


def _check_epsilon(epsilon) -> float:
    if isinstance(epsilon, float) and math.isinf(epsilon) and epsilon > 0:
        return math.inf
    return float(_v.nonnegative("epsilon", epsilon))


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        aa, bb = np.asarray(a), np.asarray(b)
        if aa.dtype != object and bb.dtype != object:
            return aa.shape == bb.shape and bool(np.array_equal(aa, bb))
    except Exception:  # noqa: BLE001
        pass
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001
        return False


def _mechanism_name(mechanism: Any) -> str:
    if isinstance(mechanism, Mechanism):
        return mechanism.name or type(mechanism).__name__
    return getattr(mechanism, "__qualname__", None) or getattr(mechanism, "__name__", None) or repr(mechanism)[:60]


def _settings(
    mechanism,
    *,
    epsilon,
    delta,
    samples,
    seed,
    confidence,
    vectorized,
    ideal_numerics,
    progress,
    workers,
    max_events,
    train_fraction,
    cluster,
    sequential=False,
    time_budget=None,
    search_samples=None,
) -> _Settings:
    """Validate every option once, at the boundary, and read the claim."""
    if not callable(mechanism):
        raise ParameterError(
            f"mechanism={mechanism!r:.60} is not callable; pass a catalog Mechanism or fn(data, size, rng)."
        )
    samples = _v.integer("samples", samples, minimum=_v.MIN_SAMPLES, maximum=_v.MAX_SAMPLES)
    seed = _v.integer("seed", seed, minimum=0)
    confidence = float(_v.probability("confidence", confidence, open_left=True, open_right=True))
    max_events = _v.integer("max_events", max_events, minimum=1, maximum=10_000)
    train_fraction = float(_v.probability("train_fraction", train_fraction, open_left=True, open_right=True))
    if not isinstance(vectorized, bool):
        raise ParameterError(
            f"vectorized={vectorized!r} is not a bool; pass True (fn(data, size, rng)) or False (fn(data))."
        )
    if not isinstance(ideal_numerics, bool):
        raise ParameterError(f"ideal_numerics={ideal_numerics!r} is not a bool; pass True or False.")
    if not isinstance(sequential, bool):
        raise ParameterError(
            f"sequential={sequential!r} is not a bool; pass True (stop once the verdict is "
            "certain) or False (certify on every sample)."
        )
    if progress is not None and not isinstance(progress, bool):
        raise ParameterError(f"progress={progress!r} is not a bool; pass True, False or None (auto).")
    workers = (
        _runner.default_workers()
        if workers is None
        else _v.integer("workers", workers, minimum=1, maximum=_runner.max_workers())
    )
    catalog = isinstance(mechanism, Mechanism)
    if catalog:
        claim = mechanism.claim
        if epsilon is None:
            if isinstance(claim, RenyiDP):
                approx = claim.to_approx(_RENYI_DELTA if delta is None else delta)
                epsilon, delta = float(approx.epsilon), float(approx.delta)
            else:
                epsilon = float(claim.epsilon)
        if delta is None:
            delta = float(claim.delta) if not isinstance(claim, RenyiDP) else _RENYI_DELTA
        if not vectorized:
            raise ParameterError(
                "vectorized=False is for callables fn(data); catalog mechanisms sample vectorised — drop the argument."
            )
    else:
        if epsilon is None:
            raise ParameterError(
                "epsilon=None: a callable carries no claim; pass the ε to test, e.g. "
                "audit(fn, data, neighbor, epsilon=1.0)."
            )
        delta = 0.0 if delta is None else delta
    epsilon = _check_epsilon(epsilon)
    delta = float(_v.probability("delta", delta, open_right=True))
    if time_budget is not None:
        time_budget = float(_v.positive("time_budget", time_budget))
    if search_samples is not None:
        search_samples = _v.integer("search_samples", search_samples, minimum=_SEARCH_MIN)
    train_n, cert_n = _split(samples, train_fraction, delta)
    if cert_n < 1 or train_n < 1:
        raise ParameterError(f"samples={samples} leaves no certification samples; pass samples >= 20.")
    return _Settings(
        _mechanism_name(mechanism),
        catalog,
        epsilon,
        delta,
        samples,
        seed,
        confidence,
        vectorized,
        ideal_numerics,
        workers,
        max_events,
        train_n,
        cert_n,
        _runner.progress_enabled(progress),
        cluster,
        sequential,
        train_fraction,
        time_budget,
        search_samples=search_samples,
    )


# --------------------------------------------------------------------------- stage 1: pairs


def _pairs_for_catalog(
    mechanism: Mechanism,
    data,
    neighbor,
    *,
    seed: int,
    budget: int,
    candidate_witnesses: Sequence[Witness],
    notes: list[str],
) -> tuple[list[tuple], str]:
    spec = mechanism.input_spec
    if data is not None or neighbor is not None:
        if data is None or neighbor is None:
            missing = "data" if data is None else "neighbor"
            raise ParameterError(
                f"{missing}=None while the other input is given; pass both data and neighbor, or neither to search pairs."
            )
        return [spec.validate_pair(data, neighbor)], "given pair"
    aimed = _aimed_pairs(mechanism, spec, notes)
    proposed: list[tuple] = []
    how = "candidate witnesses and the example pair"
    try:
        proposed.extend(
            _neighbours.search_pairs(
                mechanism, seed=seed, budget=budget, candidate_witnesses=tuple(candidate_witnesses)
            )
        )
        how = "neighbour search"
    except (MemoryError, ArithmeticError, UnsupportedError) as exc:
        # the search failed on this mechanism: audit the witnesses and the example pair instead
        notes.append(f"neighbour search failed ({type(exc).__name__}: {str(exc)[:120]}); used the example pair")
        warnings.warn(
            f"neighbour search failed for {mechanism.name!r} ({exc!r:.120}); auditing the example pair.",
            RuntimeWarning,
            stacklevel=4,
        )
    for w in candidate_witnesses:
        if getattr(w, "data", None) is not None and getattr(w, "neighbor", None) is not None:
            proposed.append((w.data, w.neighbor))
    proposed.append(tuple(mechanism.example_pair()))
    pairs: list[tuple] = []
    for a, b in proposed:
        try:
            pa, pb = spec.validate_pair(a, b)
        except ParameterError:
            continue
        if not any(_same(pa, qa) and _same(pb, qb) for qa, qb in pairs):
            pairs.append((pa, pb))
        if len(pairs) >= _MAX_PAIRS:
            break
    # the proof's witness pair is always one of the pairs audited (when it is a valid pair), so the
    # report can say how the audit fared on it; it takes the last slot if the search filled them all
    witness = _first_valid_witness(spec, candidate_witnesses)
    if witness is not None and not any(_same(witness[0], qa) and _same(witness[1], qb) for qa, qb in pairs):
        if len(pairs) >= _MAX_PAIRS:
            pairs[-1] = witness
        else:
            pairs.append(witness)
    if witness is not None:
        how += " (the proof's witness pair included)"
    fresh = [(a, b) for a, b in aimed if not any(_same(a, qa) and _same(b, qb) for qa, qb in pairs)]
    if fresh:
        how = f"{len(fresh)} pair(s) aimed by the structure at the terms of its bound, and the " + how
    pairs = fresh + pairs
    if not pairs:
        raise ParameterError(
            f"mechanism={mechanism.name!r} yielded no valid neighbouring pair; pass data and neighbor explicitly."
        )
    return pairs, how


def _aimed_pairs(mechanism: Mechanism, spec, notes: list[str]) -> list[tuple]:
    """The pairs the mechanism's structure names where the terms of its bound are attained
    (:meth:`~dpharness.core.Mechanism.aimed_pairs`), each validated here as a neighbour pair of the
    declared relation inside the declared records domain (the audit's soundness never rests on the
    structure's choice), at most ``_MAX_AIMED``, without duplicates."""
    try:
        offered = tuple(mechanism.aimed_pairs())
    except Exception as exc:  # noqa: BLE001 - a subclass may redefine aimed_pairs: aiming only helps the audit
        notes.append(f"the structure named no aimed pairs ({type(exc).__name__}: {str(exc)[:120]})")
        return []
    out: list[tuple] = []
    for w in offered:
        a, b = (w.data, w.neighbor) if isinstance(w, Witness) else (tuple(w) + (None, None))[:2]
        if a is None or b is None:
            continue
        try:
            pa, pb = spec.validate_pair(a, b)
        except ParameterError:
            continue
        if not any(_same(pa, qa) and _same(pb, qb) for qa, qb in out):
            out.append((pa, pb))
        if len(out) >= _MAX_AIMED:
            break
    return out


def _first_valid_witness(spec, candidate_witnesses: Sequence[Witness]) -> tuple | None:
    for w in candidate_witnesses:
        if getattr(w, "data", None) is not None and getattr(w, "neighbor", None) is not None:
            try:
                return tuple(spec.validate_pair(w.data, w.neighbor))
            except ParameterError:
                continue
    return None


def _pairs_for_callable(
    sampler: _runner.Sampler, data, neighbor, inputs, *, seed: int, budget: int
) -> tuple[list[tuple], str]:
    if inputs is not None:
        if data is not None or neighbor is not None:
            raise ParameterError(
                "inputs= was given together with data/neighbor; pass either the pair (data, neighbor) "
                "or an input space inputs= to search pairs in, not both."
            )
        from . import pairsearch  # deferred: only callables audited over an input space need it

        found, how = pairsearch.callable_pairs(
            sampler, inputs, seed=seed, budget=max(budget, pairsearch.MIN_BUDGET), max_pairs=_MAX_PAIRS
        )
        pairs = [(a, b) for a, b in found if not _same(a, b)][:_MAX_PAIRS]
        if not pairs:
            raise ParameterError(
                f"inputs={inputs!r:.60} yielded no pair of different inputs; pass a larger input "
                "space, or data and neighbor explicitly."
            )
        return pairs, how
    if data is None or neighbor is None:
        raise ParameterError(
            f"data={data!r:.40} / neighbor={neighbor!r:.40}: a callable needs both inputs; pass data and neighbor, "
            "or an input space inputs= to search pairs in (see dpharness.auditors.pairsearch)."
        )
    if _same(data, neighbor):
        raise ParameterError(
            f"data={data!r:.60} and neighbor are identical; pass two inputs that differ (a neighbouring pair)."
        )
    return [(data, neighbor)], "given pair"


def _default_search(s: _Settings, over_inputs: bool) -> int:
    """The pair search's samples in all (both sides, every candidate) at ``s.samples`` when
    ``search_samples`` is not given and no time budget cuts it: the training samples a side, between
    ``_SEARCH_MIN`` and ``_SEARCH_MAX``; a per-call callable's screen over an input space at most
    ``_PER_CALL_SEARCH_BUDGET`` calls, and any screen over an input space at least its minimum."""
    budget = max(_SEARCH_MIN, min(s.train_n, _SEARCH_MAX))
    if over_inputs:
        from .pairsearch import MIN_BUDGET  # deferred: only callables audited over an input space need it

        if not s.vectorized:  # the screen's budget is calls to fn(data): keep it small
            budget = min(budget, _PER_CALL_SEARCH_BUDGET)
        budget = max(budget, MIN_BUDGET)
    return budget


def _choose_pairs(
    mechanism, data, neighbor, inputs, candidate_witnesses, s: _Settings, notes: list[str]
) -> tuple[list[tuple], str, _runner.Sampler, int | None]:
    """The pairs to audit, how they were found, the sampler, and the pair search's samples in all (None:
    the pair was given, nothing searched)."""
    searched = inputs is not None if not s.catalog else data is None and neighbor is None
    if s.search_samples is not None and not searched:
        raise ParameterError(
            f"search_samples={s.search_samples}: the pair is given (data and neighbor), so no pairs are searched; "
            "drop search_samples=, or drop the pair to search one."
        )
    if s.search_samples is not None and inputs is not None:
        from .pairsearch import MIN_BUDGET  # deferred: only callables audited over an input space need it

        if s.search_samples < MIN_BUDGET:
            raise ParameterError(
                f"search_samples={s.search_samples} is below the input-space search's minimum; pass "
                f"search_samples >= {MIN_BUDGET}."
            )
    budget = _default_search(s, inputs is not None) if s.search_samples is None else s.search_samples
    probe = None  # the pair on which the search's size is fitted to the budget
    # the search's size fitted to a time budget (not when given; a callable with both a pair and inputs= is refused
    # below, before any call)
    fit = s.time_budget is not None and s.search_samples is None and searched and data is None and neighbor is None
    if s.catalog:
        if inputs is not None:
            raise ParameterError(
                f"inputs={inputs!r:.60} is for plain callables; a catalog mechanism's pairs come from "
                "its input_spec — drop inputs=, or pass data and neighbor."
            )
        # the public sample (what users call: it validates the input and calls _sample), so a subclass
        # that overrides sample is audited as it runs; the wrapper keeps the Sampler hashable
        public = mechanism.sample
        sampler = _runner.Sampler(lambda d, n, rng, _f=public: _f(d, n, rng), s.name, True)
        if fit:
            try:
                probe = mechanism.example_pair()
            except Exception:  # noqa: BLE001 - the search reports what fails; the budget is then the usual one
                probe = None
    else:
        sampler = _runner.Sampler(mechanism, s.name, s.vectorized)
        if fit:
            from . import pairsearch  # deferred: only callables audited over an input space need it

            probe = pairsearch.first_candidate(inputs, s.seed)
    cut: list[str] = []  # the pair search's size under a time budget, when it was cut
    if probe is not None:
        budget = _search_budget(sampler, probe, budget, s, cut)
    if s.catalog:
        pairs, how = _pairs_for_catalog(
            mechanism, data, neighbor, seed=s.seed, budget=budget, candidate_witnesses=candidate_witnesses, notes=notes
        )
    else:
        pairs, how = _pairs_for_callable(sampler, data, neighbor, inputs, seed=s.seed, budget=budget)
    notes.extend(cut)
    return pairs, how + "".join(f"; {n}" for n in cut), sampler, budget if searched else None


def _encoded(mechanism: Mechanism, sampler: _runner.Sampler, pairs: list[tuple]) -> tuple[_runner.Sampler, str]:
    """The sampler whose outputs the audit counts: the mechanism's own, or, where the mechanism lays its
    structured outputs out as numbers for the inputs audited (:meth:`~dpharness.core.Mechanism.audit_encoding`:
    one fixed post-processing for every pair, chosen from the inputs alone, before any draw, so every bound
    stays a bound on the mechanism), the same outputs encoded; and a note saying so ('' when unchanged)."""
    try:
        encode = mechanism.audit_encoding([x for pair in pairs for x in pair])
    except Exception:  # noqa: BLE001 - a subclass may redefine it: the outputs are then audited as they are
        encode = None
    if encode is None or not sampler.vectorized:
        return sampler, ""
    inner = sampler.fn
    fn = lambda d, n, rng, _f=inner, _e=encode: _e(_f(d, n, rng))  # noqa: E731 - picklable by cloudpickle
    keys = getattr(encode, "keys", None)
    what = f"the {len(keys)} keys the audited inputs hold" if keys is not None else "a fixed layout"
    return (
        _runner.Sampler(fn, sampler.name, sampler.vectorized),
        f"outputs laid out as numbers over {what} (post-processing, the same for every pair)",
    )


_SEARCH_SHARE = 0.25  # of a time budget, the pair search's draws take at most about this (as on an idle machine)
_SEARCH_PILOT = 256  # samples a side of the first timed call that bounds the search's cost


def _search_budget(sampler: _runner.Sampler, pair: tuple, budget: int, s: _Settings, notes: list[str]) -> int:
    """The pair search's samples (both sides, every candidate) under a time budget: ``budget`` (the
    search's usual size) when its draws are expected to take at most ``_SEARCH_SHARE`` of the budget as
    on an idle machine, else the samples that fit that share (at least the search's minimum,
    :data:`~dpharness.auditors.pairsearch.MIN_BUDGET`), said in ``notes``. The pace is first bounded by one
    small timed call a side of ``pair`` (its fixed cost makes a sample look dearer, never cheaper: a fast
    sampler is not probed further), then measured as :func:`_sized` measures it. A slow callable (a model
    fit of milliseconds) otherwise spent most of its budget choosing pairs, and was left no time to
    certify. Every draw here is on the pace probe's own seed stream: the pairs and the result depend on the
    pace only through the search's size, which the note states."""
    assert s.time_budget is not None
    allowed = _SEARCH_SHARE * s.time_budget
    rng = np.random.default_rng([s.seed, _PACE_STREAM, 2])
    n = _SEARCH_PILOT if s.vectorized else 1
    worst = 0.0
    try:
        for side in pair:
            sampler(side, _PROBE_FIRST if s.vectorized else 1, rng, where="the pace probe")  # warms up
        for side in pair:
            _clock, idle = _timed(sampler, side, n, rng)
            worst = max(worst, idle / n)
    except (MechanismError, UnsupportedError, ParameterError):
        return budget  # the search meets the same error and reports it
    if budget * worst <= allowed:
        return budget
    paces = _measured_pace(sampler, [pair], s)
    if paces is None:
        return budget
    pace = max(paces[1], 1e-12)
    if budget * pace <= allowed:
        return budget
    from .pairsearch import MIN_BUDGET

    fitted = max(MIN_BUDGET, int(allowed / pace))
    if fitted >= budget:
        return budget
    notes.append(
        f"time budget {s.time_budget:g} s: the pair search was given {fitted:,} samples in all rather than {budget:,} "
        f"(at {pace * 1e3:.3g} ms a sample measured in one process, {_SEARCH_SHARE:.0%} of the budget)"
    )
    return fitted


# --------------------------------------------------------------------------- a budget in time

_BUDGET_DRAW_SHARE = 0.5  # share of the time left that the draws may take (proposing, counting: the rest)
_MINIMUM_DRAW_SHARE = 0.85  # ... and that the minimum certification's draws may take, rather than nothing certified
_PROBE_CALLS = 4  # calls timed to measure a per-call sampler's pace
_PROBE_SECONDS = 0.2  # a vectorised sampler's pace is timed on a call at least this long (or of _PROBE_MAX samples)
_PROBE_LONGEST = 5.0  # seconds: a timed call this long ends the probe whatever the call before it took
_PROBE_MAX = 1 << 18  # samples of the largest call that times a vectorised sampler's pace
_PROBE_FIRST = 16  # samples of the first call (warm-up) and of the first timed one


def _measured_pace(sampler: _runner.Sampler, pairs: list[tuple], s: _Settings) -> tuple[float, float] | None:
    """Seconds a sample costs in one process (the larger of the two sides of the first pair), by the clock
    and as on an idle core (the clock less the time this process waited on a run queue: :func:`_timed`): a
    side's first call (``_PROBE_FIRST`` samples, or one call of a per-call sampler) warms up; then calls
    eight times larger are timed until one takes ``_PROBE_SECONDS`` and at least twice the call before it
    (timed twice, the faster kept; a call's fixed cost then no longer dominates the per-sample cost the
    audit's large chunks pay) or reaches ``_PROBE_MAX`` samples (``_PROBE_CALLS`` calls of a per-call
    sampler, timed once), on a seed stream of their own (their outputs are discarded); a per-call sampler's
    recorded pace when it has one (by the clock, scaled by :func:`dpharness._load.core_share`; a vectorised sampler's
    recorded pace is the worst of every call so far, small ones included, whose fixed cost, or a pause of
    a loaded machine, can make it many times what a large chunk pays: it is measured afresh). A sampler
    that waits (sleeps, reads) waits as long on a loaded machine: only the run-queue wait is taken off.
    None when a call raised."""
    known = None if s.vectorized else _runner.expected_seconds(sampler, 1)
    if known is not None:
        return known, known * core_share()
    worst = worst_idle = 0.0
    for side, data in enumerate(pairs[0]):
        rng = np.random.default_rng([s.seed, _PACE_STREAM, side])
        n = _PROBE_FIRST if s.vectorized else 1
        try:
            sampler(data, n, rng, where="the pace probe")  # warms up (imports, caches, compilation)
            before = math.inf  # the previous (8 times smaller) call's seconds
            while True:
                n = _PROBE_CALLS if not s.vectorized else n
                seconds, idle = _timed(sampler, data, n, rng)
                # long enough, and at least twice the call 8 times smaller: the samples, not the call's fixed
                # cost (an exact sampler's tables: 0.2 s a call), make most of it, as in the audit's chunks
                grown = seconds >= _PROBE_SECONDS and seconds >= 2 * before if math.isfinite(before) else False
                grown = grown or seconds >= _PROBE_LONGEST  # the probe's time stays bounded
                before = seconds
                if not s.vectorized or grown or n >= _PROBE_MAX:
                    # the call that sizes the audit is timed twice and the faster kept: a pause of the
                    # machine (another process, a collection) only ever makes a call slower
                    again, idle_again = _timed(sampler, data, n, rng)
                    seconds, idle = min(seconds, again), min(idle, idle_again)
                    break
                n *= 8
        except (MechanismError, UnsupportedError, ParameterError):
            return None
        worst, worst_idle = max(worst, seconds / n), max(worst_idle, idle / n)
    _runner.note_pace(sampler, worst, 1)
    return worst, min(worst_idle, worst)


def _timed(sampler: _runner.Sampler, data: Any, n: int, rng: np.random.Generator) -> tuple[float, float]:
    """Seconds of one call of ``n`` samples by the clock, and as on an idle core: the clock less the time
    this process's main thread waited on a run queue meanwhile (the clock's where that cannot be read)."""
    w0 = run_queue_wait()
    t0 = time.perf_counter()
    sampler(data, n, rng, where="the pace probe")
    seconds = time.perf_counter() - t0
    w1 = run_queue_wait()
    waited = 0.0 if w0 is None or w1 is None else min(max(w1 - w0, 0.0), 0.95 * seconds)
    return seconds, seconds - waited


_WALL_MARGIN = 5.0  # seconds of an enclosing time limit left unplanned (counting, the result, the exit)
# the draws' shares of an enclosing time limit are these times their shares of the budget: the rest of an
# audit (proposing, counting, a DP-SGD's looks) costs about as much as its draws, and a time limit that
# fires decides nothing (TIMEOUT), where a budget overrun only takes longer. At 0.6 a gate at load 6 (its
# two jobs' workers beside six busy processes: a fifth of a core each) cut a DP-SGD's audit whose budget
# fitted in the 900 s limit with room to spare (PARTIAL): draws planned to 3/8 of the time left, and as
# much again for the rest, still end before the limit
_CLOCK_LIMIT_SHARE = 0.75


def _clock_left() -> float:
    """Seconds by the clock before the enclosing time limit fires (the gate's ``--timeout``: an alarm set
    on this process's main thread, :func:`dpharness.pipeline.deadline`), less ``_WALL_MARGIN``; infinite
    when no alarm is set (``audit`` called directly)."""
    import signal
    import threading

    if not hasattr(signal, "getitimer") or threading.current_thread() is not threading.main_thread():
        return math.inf
    left, _interval = signal.getitimer(signal.ITIMER_REAL)
    return max(left - _WALL_MARGIN, 0.0) if left > 0 else math.inf


def _draws(samples: int, pairs: int, s: _Settings) -> int:
    """Draws (both sides) an audit of ``samples`` a side over ``pairs`` pairs makes: every pair's
    training (its first ``_SCREEN_TRAIN`` a side when it ranks pairs), the certified pairs' (two at
    most, or every pair below ``_EVERY_PAIR_BELOW`` training samples) rest of training and certification."""
    train_n, cert_n = _split(samples, s.train_fraction, s.delta)
    certified = pairs if train_n < _EVERY_PAIR_BELOW else min(pairs, 2)
    screened = train_n if pairs == 1 or train_n < _EVERY_PAIR_BELOW else min(train_n, _SCREEN_TRAIN)
    return 2 * (pairs * screened + certified * (train_n - screened + cert_n))


def _certifying_level(s: _Settings) -> float:
    """Tail mass of each one-sided bound at the audit's last look (:func:`_level` of its settings)."""
    return _level(s.confidence, s.max_events, s.sequential)


def _level(confidence: float, max_events: int, sequential: bool) -> float:
    """Tail mass of each one-sided bound at an audit's last look with ``max_events`` candidates (the
    Bonferroni share; a sequential audit's last look spends α/2): the level its reach is stated at."""
    return _stats.bonferroni_level(confidence, max_events) / (2 if sequential else 1)


def _minimum_samples(s: _Settings) -> int:
    """The minimum certification of an audit within a time budget, in samples a side: at least
    ``_MIN_BUDGET_SAMPLES``, and enough that the certifier's ceiling (:func:`~dpharness.auditors.stats.
    certifiable_range`: the bound of maximally separated counts) exceeds the claimed ε, so a violation of
    the claim can be certified at all (:func:`samples_to_reach`); at most ``samples`` (the cap)."""
    reach = samples_to_reach(
        s.epsilon,
        s.delta,
        confidence=s.confidence,
        max_events=s.max_events,
        train_fraction=s.train_fraction,
        sequential=s.sequential,
    )
    return min(reach, s.samples)


def samples_to_reach(
    epsilon: float,
    delta: float,
    *,
    confidence: float = 0.95,
    max_events: int = DEFAULT_MAX_EVENTS,
    train_fraction: float = 0.1,
    sequential: bool = False,
) -> int:
    """The fewest samples a side (doubling from ``_MIN_BUDGET_SAMPLES``) at which an audit of these settings
    could certify a violation of ε = ``epsilon`` at all: its ceiling (the bound of maximally separated counts
    on its certification samples, :func:`~dpharness.auditors.stats.certifiable_range`) exceeds ``epsilon``.
    The gate raises its default cap of samples to this, so that a claim too large for 10^6 samples a side
    (a Rényi claim's ε, say) is still audited where the time budget fits it."""
    level = _level(confidence, max_events, sequential)
    n = _MIN_BUDGET_SAMPLES
    while math.isfinite(epsilon) and n < 2**40:
        _train_n, cert_n = _split(n, train_fraction, delta)
        if _stats.certifiable_range(cert_n, level, delta).ceiling > epsilon:
            break
        n *= 2
    return n


_DELTA_FACTOR = 10  # a δ this many times the claim's: what the gate's samples should be able to certify
_DELTA_SAMPLES_MAX = 1 << 22  # the gate's cap is raised for the claimed δ up to this many samples a side


def samples_to_resolve_delta(
    epsilon: float,
    delta: float,
    *,
    confidence: float = 0.95,
    max_events: int = DEFAULT_MAX_EVENTS,
    train_fraction: float = 0.1,
    sequential: bool = False,
) -> int:
    """The fewest samples a side (doubling from ``_MIN_BUDGET_SAMPLES``, at most ``_DELTA_SAMPLES_MAX``) at
    which an event of probability ``_DELTA_FACTOR``·δ on one side and never seen on the other would be
    expected to certify ε > ``epsilon`` at δ = ``delta`` (:func:`~dpharness.auditors.stats.
    projected_epsilon_expected`): a δ failure, such as a key released at a partition threshold set a few
    units too low, shows only on about 1/δ samples. 0 for a pure claim. The gate raises its default cap to
    this (its time budget still sizes the samples)."""
    if not delta > 0 or not math.isfinite(epsilon):
        return 0
    level = _level(confidence, max_events, sequential)
    n = _MIN_BUDGET_SAMPLES
    while n < _DELTA_SAMPLES_MAX:
        _train_n, cert_n = _split(n, train_fraction, delta)
        if _stats.projected_epsilon_expected(min(_DELTA_FACTOR * delta, 1.0), 0.0, cert_n, level, delta) > epsilon:
            break
        n *= 2
    return min(n, _DELTA_SAMPLES_MAX)


def _sized(sampler: _runner.Sampler, pairs: list[tuple], s: _Settings, started: float) -> tuple[_Settings, str]:
    """The settings of an audit with a ``time_budget``: the most samples a side, up to ``samples`` (a
    cap), whose draws are expected to take at most ``_BUDGET_DRAW_SHARE`` of the time left, from the
    sampler's measured pace spread over the workers; the minimum certification alone may take up to
    ``_MINIMUM_DRAW_SHARE`` of it (rather than nothing certified).

    The budget is spent in seconds as on an idle machine: the pace is the clock's less the time the probe
    waited for a core (:func:`_measured_pace`), and the pair search's time is scaled by the same share, so
    a machine loaded by other processes (or by the gate's other jobs) runs the same audit, with the same
    samples and verdict, only longer by the clock. An enclosing time limit (the gate's ``--timeout``,
    :func:`_clock_left`) is a hang guard by the clock: the draws also fit those shares of what is left of
    it at the pace measured here. The words say what was measured and chosen. The samples, hence the
    result, depend on the machine's speed: the result states them, and ``samples=`` that number reproduces
    the audit. Raises :class:`AuditBudgetTooSmall` (nothing certified) when even the minimum certification
    (:func:`_minimum_samples`) is not expected to fit, naming the budget (or time limit) that would."""
    assert s.time_budget is not None  # called only with a budget
    spent_clock = time.perf_counter() - started
    paces = _measured_pace(sampler, pairs, s)
    if paces is None:
        return (
            s,
            f"time budget {s.time_budget:g} s: the pace could not be measured (a call raised); samples={s.samples}",
        )
    pace_clock, pace = max(paces[0], 1e-12), max(paces[1], 1e-12)  # pace as on an idle core: see _measured_pace
    share = pace / pace_clock  # of a core, while sampling here (1: idle, or a sampler that waits)
    spent = spent_clock * share  # the pair search's seconds as on an idle machine
    left = max(s.time_budget - spent, 0.0)
    clock_left = _clock_left()
    spread = max(1, s.workers)

    def fits(draws: int, fraction: float) -> bool:
        clock = _CLOCK_LIMIT_SHARE * fraction * clock_left * spread  # a hard limit: a wider margin
        return draws * pace <= fraction * left * spread and draws * pace_clock <= clock

    minimum = _minimum_samples(s)
    minimum_draws = _draws(minimum, len(pairs), s)
    loaded = (
        f"; this process had {share:.2g} of a core (a loaded machine): the same audit, about {1 / share:.2g} "
        "times longer by the clock"
        if share < 0.9
        else ""
    )
    if not fits(minimum_draws, _MINIMUM_DRAW_SHARE):
        needed = math.ceil(spent + minimum_draws * pace / (_MINIMUM_DRAW_SHARE * spread))
        over_limit = minimum_draws * pace <= _MINIMUM_DRAW_SHARE * left * spread
        advice = (
            f"the enclosing time limit (the gate's --timeout) leaves {clock_left + _WALL_MARGIN:.0f} s by the "
            "clock: raise --timeout, or audit on a less loaded machine"
            if over_limit
            else f"Pass time_budget={needed:g} or more (the CLI's --time-budget {needed:g}), or audit without "
            "a budget at samples=N"
        )
        raise AuditBudgetTooSmall(
            f"time_budget={s.time_budget:g}: the minimum certification of {s.name} ({minimum} samples a side on "
            f"{len(pairs)} pair(s)) is expected to take about {needed:g} s as on an idle machine "
            f"({pace * 1e6:.3g} µs a sample measured in one process, {spread} worker(s), {spent:.1f} s spent "
            f"choosing pairs{loaded}); nothing was certified. {advice}.",
            needed=float(needed),
            samples=minimum,
            clock_limited=over_limit,
        )
    lo, hi = minimum, s.samples
    if not fits(minimum_draws, _BUDGET_DRAW_SHARE):
        n = minimum
    elif fits(_draws(hi, len(pairs), s), _BUDGET_DRAW_SHARE):
        n = hi
    else:
        while hi - lo > max(1, lo // 100):
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(_draws(mid, len(pairs), s), _BUDGET_DRAW_SHARE) else (lo, mid)
        n = lo
    train_n, cert_n = _split(n, s.train_fraction, s.delta)
    cut = (
        math.isfinite(clock_left)
        and n < s.samples
        and _draws(n + max(1, n // 100), len(pairs), s) * pace <= _BUDGET_DRAW_SHARE * left * spread
    )
    limited = (
        f"; the enclosing time limit ({clock_left + _WALL_MARGIN:.0f} s left by the clock) caps them" if cut else ""
    )
    words = (
        f"time budget {s.time_budget:g} s: {n} samples a side (measured {pace * 1e6:.3g} µs a sample in one "
        f"process as on an idle core, {spread} worker(s), {left:.1f} s left after the pair search{loaded}"
        f"{limited}; samples= caps it at {s.samples})"
    )
    return dataclasses.replace(s, samples=n, train_n=train_n, cert_n=cert_n, cut_by_time_limit=cut), words


_MIN_BUDGET_SAMPLES = 2_000  # an audit within a time budget draws at least this many samples a side


# --------------------------------------------------------------------------- stage 2: training


def _output_events_sound(vectorized: bool, raised: bool) -> bool:
    """Whether output events certify on a pair whose calls raised (``raised``) or not.

    A per-call sampler's call is one release: a call that raised is a release outside every output
    event, so the hits among all calls count the event exactly (raised calls are misses). A
    vectorised call that raises loses its whole chunk; the outputs of the chunks that returned are
    then the law of outputs *given* that a call returned, whose ratio between the inputs can exceed
    the mechanism's by the ratio of the return rates (and, when one release in a chunk suffices to
    raise, the chunks that raised are not a binomial count of releases). On such a pair only the
    event "one release raises" certifies (size-1 probes)."""
    return not vectorized or not raised


@dataclass(frozen=True)
class _PairOutcome:
    """What stages 2-4 of one pair leave behind, all the parent needs (no outputs): the ranked
    candidates (both directions of every proposal kept, :func:`_rank`), how many events were proposed,
    the training calls that raised on each side, whether output events may be chosen on the pair
    (see :class:`_Training`), the output kind and signature, the training samples a side asked for,
    and the seconds spent drawing ``drawn`` training samples (the sampler's pace)."""

    candidates: tuple
    proposed: int
    raises_a: _runner.Raises
    raises_b: _runner.Raises
    usable: bool
    kind: str | None
    ref: tuple | None
    requested: int
    seconds: float
    drawn: int


def _train_chunk(s: _Settings) -> int:
    """Samples per training call (vectorised) or per training chunk of calls (per-call)."""
    return _TRAIN_CHUNK if s.vectorized else _loop_chunk(s.train_n)


def _loop_chunk(total: int) -> int:
    """Calls per chunk of a per-call sampler ``fn(data)`` drawing ``total`` samples a side: at least
    ``_LOOP_CHUNKS`` chunks (at most ``_LOOP_CHUNK`` calls each), so a slow call's chunks stay short and
    spread over the workers, and the hang detector (:mod:`._runner`), which scales with the measured cost
    of a call, sees chunks finish. A function of the count alone: a chunk is the unit a worker reseeds
    for (module docstring of :mod:`._runner`), so the outputs do not depend on the machine's speed."""
    return max(1, min(_LOOP_CHUNK, math.ceil(total / _LOOP_CHUNKS)))


def _training_outputs(
    sampler: _runner.Sampler,
    p: int,
    a: Any,
    b: Any,
    s: _Settings,
    *,
    ref: tuple | None,
    bar: _runner.Progress | None,
    workers: int,
    cluster: Any,
) -> tuple[_Training, tuple | None, int, float, int]:
    """One pair's training outputs split in halves; the output signature; training samples a side
    asked for; seconds spent drawing and samples drawn."""
    chunk = _train_chunk(s)
    t0 = time.perf_counter()
    common = dict(
        seed=s.seed, phase=_runner.TRAINING, pair=p, chunk=chunk, progress=bar, cluster=cluster, workers=workers
    )
    da = _runner.draw(
        sampler,
        a,
        s.train_n,
        side=0,
        ref=ref,
        label=f"training (data side of pair {p})",
        max_elements=_TRAIN_ELEMENTS,
        outcomes=True,
        **common,
    )
    assert isinstance(da, _runner.Drawn)  # outcomes=True returns a Drawn
    if da.outputs is not None:
        ref = _runner.signature(da.outputs)
    db = _runner.draw(
        sampler,
        b,
        da.requested,
        side=1,
        ref=ref,
        label=f"training (neighbor side of pair {p})",
        outcomes=True,
        **common,
    )
    assert isinstance(db, _runner.Drawn)  # outcomes=True returns a Drawn
    seconds = time.perf_counter() - t0
    if ref is None and db.outputs is not None:
        ref = _runner.signature(db.outputs)
    ta, tb = da.outputs, db.outputs
    raised = bool(da.raises.raised or db.raises.raised)
    if ta is None or tb is None or not _output_events_sound(s.vectorized, raised):
        empty = np.empty(0)
        t = _Training(None, empty, empty, empty, empty, da.raises, db.raises, usable=False)
    else:
        # propose on the first half, rank on the second: ranking on the samples that suggested an
        # event would favour events fitted to noise (e.g. atoms seen once)
        ha, hb = len(ta) // 2, len(tb) // 2
        t = _Training(_ev.output_kind(ta), ta[:ha], tb[:hb], ta[ha:], tb[hb:], da.raises, db.raises)
    drawn = sum(len(x) for x in (ta, tb) if x is not None)
    return t, ref, da.requested, seconds, drawn


def _pair_stage(
    sampler: _runner.Sampler,
    p: int,
    a: Any,
    b: Any,
    s: _Settings,
    level: float,
    *,
    ref: tuple | None = None,
    bar: _runner.Progress | None = None,
    workers: int = 1,
    cluster: Any = None,
) -> _PairOutcome:
    """Stages 2-4 of pair ``p``: draw its training outputs, propose events on one half, rank them on
    the other. Runs in a worker (one task per pair, :class:`_PairJob`) or in this process; either way
    the same outputs (chunk seeds) hence the same candidates."""
    t, ref, requested, seconds, drawn = _training_outputs(
        sampler, p, a, b, s, ref=ref, bar=bar, workers=workers, cluster=cluster
    )
    candidates: list[_Candidate] = []
    proposed = 0
    if t.usable:
        proposals = _propose_pair(t, a, b, s)
        proposed = len(proposals)
        candidates = _rank(p, proposals, t.rank_a, t.rank_b, cert_n=s.cert_n, level=level, delta=s.delta)
        _ev.clear_cache()
    return _PairOutcome(
        tuple(candidates), proposed, t.raises_a, t.raises_b, t.usable, t.kind, ref, requested, seconds, drawn
    )


@dataclass(frozen=True)
class _PairJob:
    """Stages 2-4 of every pair as worker tasks ``(pair,)`` (see :mod:`._runner`'s jobs): only the
    candidates and tallies (:class:`_PairOutcome`) come back, never the training outputs."""

    sampler: _runner.Sampler
    inputs: tuple  # per pair: (data, neighbor)
    settings: _Settings  # cluster None: a task draws its chunks in its own process
    level: float
    seed: int
    chunks: _runner.ChunkPlan  # one "chunk" per task, both sides' training (the hang detector's pace scale)
    min_timeout: float = 600.0  # proposing and ranking come on top of the drawing: the hang limit starts here

    def run(self, task: tuple) -> _PairOutcome:
        (p,) = task
        a, b = self.inputs[p]
        return _pair_stage(self.sampler, p, a, b, self.settings, self.level)

    def key(self, task: tuple) -> tuple:
        return _runner.TRAINING, task[0], 2  # side 2: the pair's task (its chunks draw from their own seeds)

    def samples(self, task: tuple) -> None:
        return None  # the task's seconds include proposing and ranking: its pace is reported in the outcome

    def describe(self, task: tuple) -> str:
        return f"training, event proposal and ranking of pair {task[0]}"


def _pooled(sampler: _runner.Sampler, s: _Settings, draws: int) -> bool:
    """Whether this audit's chunks go to the worker pool (a cluster: always): a pool pays about a
    second of CPU to start (the fork server's imports), and each worker loads the sampler's own code
    again (numba's compiled loops of the exact samplers: 0.6 s a process), so only when ``draws`` (a
    phase's own draws, or the whole audit's for a training with pairs to spread: see :func:`_train`)
    take long here, by this sampler's measured pace on its largest calls (:func:`~._runner.note_pace`),
    or are very many. Which it is changes no output and no count of a vectorised sampler (a chunk's
    seed is fixed by its place in the plan)."""
    if s.cluster is not None:
        return True
    if s.workers <= 1:
        return False
    # a vectorised sampler's pace in CPU seconds where it was measured here: a pause of this process
    # (another process on its core) would inflate the clock's pace and start a pool for a small audit;
    # a per-call sampler's by the clock (its calls may wait rather than compute, and the pool overlaps waits)
    expected = _runner.expected_cpu_seconds(sampler, draws) if s.vectorized else None
    if expected is None:
        expected = _runner.expected_seconds(sampler, draws)
    return (expected is not None and expected >= _POOL_MIN_SECONDS) or draws >= _POOL_MIN_DRAWS


_PACE_PROBE = 256  # samples of the first timed call that measures a vectorised sampler's pace before training
_PACE_PROBE_SECONDS = 0.02  # calls eight times larger are timed until one takes this long (CPU),
_PACE_PROBE_WAIT = 0.2  # or this long by the clock,


def _cert_chunk(row_elems: int) -> int:
    """Samples per certification chunk of a vectorised sampler whose outputs have ``row_elems`` entries
    each (fewer rows for wide outputs: a chunk holds about 4·10^6 entries at most)."""
    return max(1_000, min(_CHUNK, (4 * _CHUNK) // max(1, row_elems)))


def _row_elements(out: Any) -> int:
    """Entries in one output of a chunk ``out`` (1 for scalars and objects)."""
    try:
        arr = np.asarray(out)
    except Exception:  # noqa: BLE001 - ragged or exotic outputs: counted as one entry each
        return 1
    return max(1, arr.size // max(1, len(arr))) if arr.ndim > 1 and arr.dtype != object else 1


def _probe_pace(sampler: _runner.Sampler, pairs: list[tuple], s: _Settings) -> None:
    """Measure a vectorised sampler's pace on the first pair's data (one whose pace is not yet known,
    with workers to spread training over): one call of one sample warms up (imports, caches, compiled
    code), then calls of ``_PACE_PROBE`` samples, eight times larger each, are timed until one takes
    ``_PACE_PROBE_SECONDS`` of CPU (``_PACE_PROBE_WAIT`` by the clock) or reaches the largest call the
    audit makes (a training call's ``_TRAIN_CHUNK`` or a certification chunk, :func:`_cert_chunk`; at most
    the training samples a side), whose cost a sample is what the pool's start is weighed against
    (:func:`~._runner.note_pace` keeps the pace of the largest calls; timed on 256 samples, a sampler of
    20 ns a sample looked 15 times slower and started the pool for an audit of one second; on training's
    calls of 2^17 the catalog Laplace costs 30 ns a sample, on certification's of 10^6 20 ns, and the
    pool started for an audit of 5·10^7 a side whose draws take 1.7 s). A slow sampler's
    training (DP-SGD's thousand rounds a release) then runs on the pool from its start, a fast one's
    small audit in this process. Its outputs are discarded and drawn from a stream of their own, so no
    output, event or count of the audit depends on it (only where the chunks run); a call that raises
    measures nothing (training reports it)."""
    if not s.vectorized or s.cluster is not None or s.workers <= 1 or not pairs:
        return
    if _runner.expected_seconds(sampler, 1) is not None:
        return
    data = pairs[0][0]
    rng = np.random.default_rng([s.seed, _PACE_STREAM])
    n = max(1, min(_PACE_PROBE, s.train_n))
    try:
        first = sampler(data, 1, rng, where="the pace probe")  # warms up
        top = max(n, min(max(_TRAIN_CHUNK, _cert_chunk(_row_elements(first))), s.train_n))
        while True:
            t0, c0 = time.perf_counter(), time.process_time()
            sampler(data, n, rng, where="the pace probe")
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
            # grown by its CPU time: a call preempted on a loaded machine stops no growth (a call of 256
            # samples is its fixed cost), one that waits rather than computes by the clock
            if cpu >= _PACE_PROBE_SECONDS or seconds >= _PACE_PROBE_WAIT or n >= top:
                break
            n = min(8 * n, top)
    except (MechanismError, UnsupportedError, ParameterError):
        return
    _runner.note_pace(sampler, seconds, n, cpu=cpu)


def _train(
    sampler: _runner.Sampler,
    pairs: list[tuple],
    s: _Settings,
    notes: list[str],
    level: float,
    given: Sequence[_PairOutcome] | None = None,
    only: frozenset | None = None,
    screening: bool = False,
) -> tuple[list[_PairOutcome], tuple | None, int, bool]:
    """Stages 2-4 of every pair (:func:`_pair_stage`); the output signature; training samples a side;
    whether the pairs ran as tasks on the workers. With ``only`` (and ``given``, an outcome for every
    pair): stages 2-4 of the pairs in ``only`` alone, the others keeping their ``given`` outcome.

    A vectorised sampler's pairs are tasks on the worker pool when the audit is pooled (each draws
    its training chunks, proposes and ranks where it runs: no outputs travel); a per-call sampler's
    training chunks are spread over the pool and its events proposed here (its calls cost far more
    than proposing). Pooled when its own draws take long here (:func:`_pooled`), or, when the whole
    audit's do, for a per-call sampler (its chunks run reseeded in the workers, the audit's way of making
    them reproducible by seed) and for two pairs or more trained on all their training samples. Not for
    ``screening`` (the pairs' first ``_SCREEN_TRAIN`` samples each) nor for one pair of a vectorised
    sampler on the strength of the whole audit alone: one task, or tasks of a fixed small size, have
    nothing to spread, and the pool would cost its start (the fork server's imports, a second of CPU)
    while this process waits; certification decides for itself (:func:`_certify`). A call that raises
    is an outcome (recorded in the pair's tallies), not an error, unless every training call on both
    sides of every pair raised: the mechanism never produced an output."""
    todo = [p for p in range(len(pairs)) if only is None or p in only]
    _probe_pace(sampler, pairs, s)
    audit_wide = not s.vectorized or (len(todo) > 1 and not screening)
    pooled = _pooled(sampler, s, 2 * s.train_n * len(todo)) or (
        audit_wide and _pooled(sampler, s, _draws(s.samples, len(pairs), s))
    )
    out: list[_PairOutcome | None] = [None] * len(pairs)
    if given is not None and only is not None:
        out = [None if p in only else given[p] for p in range(len(pairs))]
    ref = None
    on_workers = False
    if pooled and s.vectorized:
        job = _PairJob(
            sampler,
            tuple(tuple(x) for x in pairs),
            dataclasses.replace(s, cluster=None, workers=1, show=False),
            level,
            s.seed,
            _runner.chunk_plan(2 * s.train_n, 2 * s.train_n),
        )
        with _runner.run_tasks(job, workers=s.workers, cluster=s.cluster, what="training and ranking") as running:
            if running is not None:
                for (p,), res in running.run([(p,) for p in todo]):
                    out[p] = res
                on_workers = True
    if any(o is None for o in out):
        chunk = _train_chunk(s)
        bar = _runner.Progress(
            2 * len(todo) * math.ceil(s.train_n / chunk), s.show and not s.vectorized, f"training {s.name}"
        )
        spread = pooled and not s.vectorized
        for p, (a, b) in enumerate(pairs):
            if out[p] is not None:
                continue
            stage = _pair_stage(
                sampler,
                p,
                a,
                b,
                s,
                level,
                ref=ref,
                bar=bar,
                workers=s.workers if spread else 1,
                cluster=s.cluster if spread else None,
            )
            out[p] = stage
            ref = ref or stage.ref
        bar.close()
    outcomes = [o for o in out if o is not None]
    for p, o in enumerate(outcomes):  # every pair's outputs have the first pair's shape and type
        if o.ref is not None:
            if ref is None:
                ref = o.ref
            elif o.ref != ref:
                _runner.check_signature_of(o.ref, ref, s.name, f"training of pair {p}")
        if on_workers:  # drawn here, the runner noted the pace itself
            _runner.note_pace(sampler, o.seconds, o.drawn)
    used = max((o.requested for o in outcomes), default=0)
    silent = [o for o in outcomes if o.raises_a.always and o.raises_b.always]
    if len(silent) == len(outcomes):
        chunk = _train_chunk(s)
        first = outcomes[0].raises_a
        types = sorted({name for o in outcomes for name in (*o.raises_a.types, *o.raises_b.types)})
        calls = (
            f"{first.calls} training call(s) a side of up to {chunk} samples each"
            if s.vectorized
            else f"{first.calls} training calls a side"
        )
        raise MechanismError(
            f"mechanism {s.name!r} raised {' / '.join(types)} on every call on both inputs of every pair audited "
            f"({calls}; first: {first.first}); it never produced an output, so there is nothing to audit (the "
            "exception's message is not repeated here: it may contain the data; call the mechanism on these inputs "
            f"to see it). {sampler.hint(types)}"
        )
    if silent:
        notes.append(
            f"{len(silent)} of {len(outcomes)} pairs left out: the mechanism raised on every training call on "
            "both of their inputs"
        )
    return outcomes, ref, used, on_workers


# --------------------------------------------------------------------------- stage 3: proposals


def _propose_pair(t: _Training, a: Any, b: Any, s: _Settings) -> list[_families.Proposal]:
    """Every applicable family's proposals on one pair's proposing half."""
    assert t.kind is not None  # a usable training (the caller's check) has outputs of a kind
    ctx = _families.ProposalContext(
        kind=t.kind,
        max_events=2 * s.max_events,
        candidates=s.max_events,
        certification_samples=s.cert_n,
        confidence=s.confidence,
        epsilon=s.epsilon,
        delta=s.delta,
        ideal_numerics=s.ideal_numerics,
        shifts=_fl.shifts_from_pair(a, b),
        data=a,
        neighbor=b,
    )
    return _families.propose(t.propose_a, t.propose_b, ctx)


# --------------------------------------------------------------------------- stage 4: ranking


def _rank(
    pair: int, proposals: list[_families.Proposal], train_a, train_b, *, cert_n: int, level: float, delta: float
) -> list[_Candidate]:
    """Both directions of every proposal, scored on the ranking half of the training outputs.

    ``score``: the bound the event is projected to certify, from training frequencies shaded by
    ``_RANK_Z`` standard errors towards "no effect" (among many candidates a rare event's estimated
    ratio is the most inflated by chance), the denominator by at least ``_RANK_Z² / n``. ``one_sided_score`` (one-sided proposals with hits on the
    numerator side only): the bound projected with no denominator hits, unshaded — shading would
    drop them, yet an event impossible on one side certifies a large ε from a handful of hits.
    ``robust_score``: the bound projected from estimates shaded by ``sqrt(2 ln m)`` standard errors
    (``m`` the candidates of the pair, both directions), about how far the largest of ``m`` unbiased
    noisy estimates lies above its truth: the best of hundreds of rare events' training ratios is
    inflated by chance, and when certification has far more samples than training (10^8 against
    4·10^6) ``score`` prefers them to the common events that certify near ε."""
    na, nb = len(train_a), len(train_b)
    # few distinct outputs: each event is evaluated once per distinct output, hits weighted by their
    # rows; its membership on the distinct outputs tells the same duplicates as on the rows
    rows_a, w_a = _ev.distinct_outputs(train_a) or (train_a, None)
    rows_b, w_b = _ev.distinct_outputs(train_b) or (train_b, None)
    # otherwise the events that are sets of keys are counted on one histogram of the keys per key function
    events = [prop.event for prop in proposals]
    known_a = _ev.histogram_counts(events, train_a) if w_a is None else {}
    known_b = _ev.histogram_counts(events, train_b) if w_b is None else {}
    # half-lines and intervals of float outputs are counted on the sorted outputs by binary search;
    # the sorted positions they hit on both sides tell their memberships apart as exactly as masks do
    # (among themselves: one with the same membership as an event of another kind is not noticed)
    ranges_a = _ev.range_counts(events, train_a) if w_a is None and w_b is None else {}
    ranges_b = _ev.range_counts(events, train_b) if ranges_a else {}

    def masks(event: Event) -> tuple[np.ndarray, np.ndarray]:
        return (np.asarray(event.contains(rows_a), dtype=bool), np.asarray(event.contains(rows_b), dtype=bool))

    def signature(ma: np.ndarray, mb: np.ndarray) -> int:
        return hash((np.packbits(ma).tobytes(), np.packbits(mb).tobytes()))

    kept, ha, hb, sigs = [], [], [], []
    for i, prop in enumerate(proposals):
        if i in known_a and i in known_b:
            ka, kb, sig = known_a[i], known_b[i], None
        elif i in ranges_a and i in ranges_b:
            (ka, first_a, end_a), (kb, first_b, end_b) = ranges_a[i], ranges_b[i]
            sig = hash(("sorted positions", first_a, end_a, first_b, end_b))
        else:
            ma, mb = masks(prop.event)
            ka = int(np.count_nonzero(ma)) if w_a is None else int(w_a[ma].sum())
            kb = int(np.count_nonzero(mb)) if w_b is None else int(w_b[mb].sum())
            sig = signature(ma, mb)
        if (ka == 0 and kb == 0) or (ka == na and kb == nb):
            continue  # empty or full on both sides: carries no information
        kept.append(prop)
        ha.append(ka)
        hb.append(kb)
        sigs.append(sig)
    if not kept:
        return []
    # the signature tells events of the same membership on the training outputs apart (deduplication);
    # events whose hit counts no other kept event shares cannot share a membership, so only the others'
    # memberships are evaluated
    shared = collections.Counter(zip(ha, hb))
    signatures: list[int] = []
    for j, prop in enumerate(kept):
        sig_j = sigs[j]
        if sig_j is None:
            sig_j = signature(*masks(prop.event)) if shared[ha[j], hb[j]] > 1 else hash(("hits", ha[j], hb[j]))
        signatures.append(sig_j)
    hits_a, hits_b = np.array(ha), np.array(hb)
    pa, pb = hits_a / na, hits_b / nb
    # each projected on the certification samples it will be counted on (a costly family's: fewer)
    on = np.array([min(cert_n, _COSTLY_CERT) if p.family in _COSTLY_FAMILIES else cert_n for p in kept])
    sa, sb = np.sqrt(pa * (1 - pa) / na), np.sqrt(pb * (1 - pb) / nb)

    def shaded(z: float) -> tuple[np.ndarray, np.ndarray]:
        # the denominator's shading includes z² / n (Wilson): an event with no hits on one side is not
        # projected as if that side's probability were known to be 0 (many narrow cells have a few hits
        # on one side and none on the other by chance alone)
        fwd = _stats.projected_epsilon(
            np.maximum(pa - z * sa, 0), np.minimum(pb + z * sb + z * z / nb, 1), on, level, delta
        )
        bwd = _stats.projected_epsilon(
            np.maximum(pb - z * sb, 0), np.minimum(pa + z * sa + z * z / na, 1), on, level, delta
        )
        return fwd, bwd

    fwd, bwd = shaded(_RANK_Z)
    fwd_r, bwd_r = shaded(max(_RANK_Z, math.sqrt(2.0 * math.log(max(2, 2 * len(kept))))))
    hint = np.array([p.one_sided for p in kept])
    zero = np.zeros(len(kept))
    fwd1 = np.where(hint & (hits_b == 0) & (hits_a > 0), _stats.projected_epsilon(pa, zero, on, level, delta), -np.inf)
    bwd1 = np.where(hint & (hits_a == 0) & (hits_b > 0), _stats.projected_epsilon(pb, zero, on, level, delta), -np.inf)
    out: list[_Candidate] = []
    for i, prop in enumerate(kept):
        out.append(
            _Candidate(
                pair, prop.event, True, float(fwd[i]), prop.family, signatures[i], float(fwd1[i]), float(fwd_r[i])
            )
        )
        out.append(
            _Candidate(
                pair, prop.event, False, float(bwd[i]), prop.family, signatures[i], float(bwd1[i]), float(bwd_r[i])
            )
        )
    return out


def _one_sided_slots(max_events: int) -> int:
    return 0 if max_events < 2 else max(1, max_events // _ONE_SIDED_SHARE)


def _select(cands: list[_Candidate], max_events: int) -> list[_Candidate]:
    """The ``max_events`` candidates to certify: the best by ``score``, except that
    - the ``max_events // _ROBUST_SHARE`` best by ``robust_score`` are always among them (where the
      ``score`` ranking agrees, as it mostly does, nothing changes);
    - up to ``_one_sided_slots(max_events)`` slots go to the best one-sided candidates (positive
      ``one_sided_score``) not already among them.
    Duplicates (same membership, same direction) count once."""
    finite = [c for c in cands if math.isfinite(c.score) or c.score == math.inf]
    pool = finite if finite else cands
    ordinary = sorted(pool, key=lambda c: -c.score if not math.isnan(c.score) else math.inf)
    robust = sorted((c for c in pool if c.robust_score > 0), key=lambda c: -c.robust_score)
    rare = sorted((c for c in cands if c.one_sided_score > 0), key=lambda c: -c.one_sided_score)
    chosen: list[_Candidate] = []
    seen: set = set()

    def key(c: _Candidate) -> tuple:  # one membership in one direction
        return (c.pair, c.signature, c.forward)

    def take(candidates: list[_Candidate], limit: int) -> None:
        for c in candidates:
            if len(chosen) >= limit:
                return
            if key(c) not in seen:
                seen.add(key(c))
                chosen.append(c)

    slots = min(_one_sided_slots(max_events), len(rare))
    take(ordinary, max_events - slots)
    # the robust slots: the best by robust_score the ordinary picks miss replace their last picks
    must: dict = {}
    for c in robust:
        if len(must) >= min(max_events - slots, max_events // _ROBUST_SHARE):
            break
        must.setdefault(key(c), c)
    missing = [c for k, c in must.items() if k not in seen]
    if missing:
        drop = len(chosen) + len(missing) - (max_events - slots)
        for i in range(len(chosen) - 1, -1, -1):
            if drop <= 0:
                break
            if key(chosen[i]) not in must:
                seen.discard(key(chosen.pop(i)))
                drop -= 1
        chosen += missing
        seen.update(key(c) for c in missing)
    take(rare, min(max_events, len(chosen) + slots))
    take(ordinary, max_events)
    return chosen


def _trim_costly(chosen: list[_Candidate], ranked: Sequence[_Candidate], limit: int) -> list[_Candidate]:
    """``chosen`` without the events of the :data:`_COSTLY_FAMILIES` that training gives no reason to
    count: with ``B`` the best ``score`` of the other families' candidates (on the pairs certified),
    such an event is kept when its ``robust_score`` (shaded for multiplicity) exceeds ``B`` — the
    float structure says more than the values — or when it holds a one-sided slot (outputs one input
    may never produce: a handful of hits certify a large ε). The others only widen the Bonferroni
    share: where the float structure carries nothing but the values' ratio, their projections tie with
    the value events'. Without a candidate of another family nothing is dropped; the best one is
    certified even when ``_select`` left it out (in place of the weakest costly one when ``limit``
    candidates are kept). The choice reads training draws only, so the certification samples stay fresh."""
    others = [c for c in ranked if c.source not in _COSTLY_FAMILIES and not math.isnan(c.score)]
    if not others:
        return chosen
    best_other = max(others, key=lambda c: c.score)

    def worth(c: _Candidate) -> bool:
        return c.source not in _COSTLY_FAMILIES or c.robust_score > best_other.score or c.one_sided_score > 0

    kept = [c for c in chosen if worth(c)]
    if not any(c.source not in _COSTLY_FAMILIES for c in kept):
        if len(kept) >= limit:
            kept.remove(min(kept, key=lambda c: max(c.score, c.robust_score, c.one_sided_score)))
        kept.append(best_other)
    return kept


_PAIR_SCORES = ("robust_score", "score", "one_sided_score")  # how pairs are ranked, in order of trust


def _pair_score(c: _Candidate, tier: str = "robust_score") -> float:
    """How well a candidate projects on its pair's training draws, by one of :data:`_PAIR_SCORES` (the
    NaN of a degenerate estimate as -inf)."""
    value = getattr(c, tier)
    return -math.inf if math.isnan(value) else value


def _pair_tier(ranked: Sequence[_Candidate]) -> str:
    """The first of :data:`_PAIR_SCORES` that projects a positive bound for some candidate (else the
    first). The multiplicity-aware ``robust_score`` first: the best of hundreds of events' training
    ratios is inflated by chance (a rare float cell seen on one side of a Laplace pair projects 1.22
    where every pair's ε is 1), so the plain ``score`` would choose the pair with the luckiest event
    rather than the best pair; the unshaded one-sided projection of a handful of hits last."""
    for tier in _PAIR_SCORES:
        if any(_pair_score(c, tier) > 0 for c in ranked):
            return tier
    return _PAIR_SCORES[0]


def _certified_pairs(
    ranked: Sequence[_Candidate], raising: Sequence[_RaiseCandidate], witness: int | None, every: bool = False
) -> frozenset:
    """The pairs whose events are certified: the one whose best candidate projects the largest bound on
    the training draws (:func:`_pair_tier`; ties: the earlier pair, aimed pairs first), and the proof's
    witness pair when it differs (so the report can say how the audit fared on it), or the witness pair
    alone when its best candidate projects within ``_TIE_SLACK`` (absolute) or ``_TIE_SHARE`` (relative)
    of the best. With ``every`` (few training draws: below ``_EVERY_PAIR_BELOW`` a side, where the
    ranking of pairs is too noisy to pick one and certifying them all costs little), every pair.
    Certifying these alone costs the certification samples of one or two pairs whatever the number
    searched; the choice reads training draws only, so the certification samples stay fresh and the
    bound keeps its confidence. With no output candidate, the pair of the first raise candidate; with
    neither, every pair (nothing is certified)."""
    if every:
        return frozenset(c.pair for c in ranked) | frozenset(rc.pair for rc in raising)
    best: int | None = None
    tier = _pair_tier(ranked)
    if ranked:
        top = max(range(len(ranked)), key=lambda i: (_pair_score(ranked[i], tier), -ranked[i].pair))
        best = ranked[top].pair
        if witness is not None and witness != best:
            # the witness pair projects (nearly) as well: certify it alone (pairs that are equivalent up to
            # the training noise, as every pair of a Laplace count is, cost one pair's certification)
            top_score = _pair_score(ranked[top], tier)
            on_witness = max((_pair_score(c, tier) for c in ranked if c.pair == witness), default=-math.inf)
            if math.isfinite(top_score) and on_witness >= top_score - max(_TIE_SLACK, _TIE_SHARE * abs(top_score)):
                best = witness
    elif raising:
        best = raising[0].pair
    if best is None:
        return frozenset(c.pair for c in ranked) | frozenset(rc.pair for rc in raising)
    return frozenset({best} | ({witness} if witness is not None else set()))


def _witness_index(
    mechanism: Any, pairs: list[tuple], candidate_witnesses: Sequence[Witness], s: _Settings
) -> int | None:
    """The index in ``pairs`` of the proof's witness pair (a catalog mechanism's first valid candidate
    witness), or None."""
    if not s.catalog or not candidate_witnesses:
        return None
    witness = _first_valid_witness(mechanism.input_spec, candidate_witnesses)
    if witness is None:
        return None
    return next((i for i, (a, b) in enumerate(pairs) if _same(a, witness[0]) and _same(b, witness[1])), None)


def _raise_candidates(training: Sequence[_PairOutcome], s: _Settings) -> list[_RaiseCandidate]:
    """The event "one release raises" on every pair whose two sides raised at different rates on
    their training calls, the side that raised more as numerator; the largest differences first, at
    most ``max_events`` of them. The event is fixed in advance and only its direction is read from
    training, so certifying it on fresh calls (size-1 probes, or a per-call sampler's certification
    calls) is sound; each one takes a slot of ``max_events``, hence a share of α."""
    found = []
    for p, t in enumerate(training):
        ra, rb = t.raises_a, t.raises_b
        rate_a = ra.raised / ra.calls if ra.calls else 0.0
        rate_b = rb.raised / rb.calls if rb.calls else 0.0
        if rate_a != rate_b:
            found.append((-abs(rate_a - rate_b), p, _RaiseCandidate(p, rate_a > rate_b)))
    return [c for _gap, _p, c in sorted(found, key=lambda x: x[:2])][: s.max_events]


# --------------------------------------------------------------------------- stage 5: certification


@dataclass(frozen=True)
class _Certified:
    counts: list  # [pair][side][event] hits on the certification samples
    slot: list  # (pair, index in that pair's event list) of each chosen candidate
    eps: Any  # EpsilonBound or None (candidates: the chosen output events, then the raise events)
    delta: Any  # DeltaBound or None
    workers: int
    n: int  # certification samples a side counted (fewer than cert_n: a sequential audit stopped early)
    looks: tuple = ()  # sequential audits: (samples a side, confidence) of each look taken
    stop: str = ""  # sequential audits: why it stopped
    raising: tuple = ()  # the raise events certified (_RaiseCandidate), after the output events
    observed: list | None = None  # [pair][side] Raises: observations of "one release raises" (probes or calls)
    raised: list | None = None  # [pair][side] Raises: certification calls that raised
    excluded: frozenset = frozenset()  # pairs whose output events certified nothing (vectorised calls raised)
    counted: tuple = ()  # samples a side each chosen candidate was counted on (fewer than n: a costly family's)


# a sequential audit looks after these fractions of its certification chunks; the last look spends half
# of α and the earlier ones share the other half (union bound over every look)
_LOOK_FRACTIONS = (1 / 8, 1 / 4, 1 / 2, 1)
_RAISE_PROBES = 10_000  # size-1 calls a side observing "one release raises" (vectorised samplers), at most


def _look_plan(n_chunks: int, alpha: float) -> list[tuple[int, float]]:
    """(chunks counted, α spent) at each look of a sequential audit; the α's sum to ``alpha``."""
    ends = sorted({max(1, math.ceil(f * n_chunks)) for f in _LOOK_FRACTIONS})
    if len(ends) == 1:
        return [(ends[0], alpha)]
    early = alpha / 2 / (len(ends) - 1)
    return [(e, early) for e in ends[:-1]] + [(ends[-1], alpha / 2)]


def _hits(counts: list, chosen: list[_Candidate], slot: list) -> tuple[np.ndarray, np.ndarray]:
    """Hits of each chosen (event, direction) on its numerator side and on its denominator side."""
    h1 = np.array([counts[p][0 if c.forward else 1][i] for c, (p, i) in zip(chosen, slot)], dtype=np.int64)
    h0 = np.array([counts[p][1 if c.forward else 0][i] for c, (p, i) in zip(chosen, slot)], dtype=np.int64)
    return h1, h0


def _observations(
    counts: list,
    chosen: list[_Candidate],
    slot: list,
    n: int | Sequence[int],
    raising: Sequence[_RaiseCandidate],
    observed: list | None,
    excluded: frozenset,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(hits, calls) on the numerator side and on the denominator side of every candidate: the
    output events on ``n`` samples a side (one for all, or per chosen candidate), then the raise
    events on their observations.

    An output event of an ``excluded`` pair gets 0 numerator hits, i.e. the trivial bound
    Pr[M(numerator) ∈ S] >= 0: it certifies nothing, yet keeps its share of α (it was chosen before
    the certification samples were drawn). A raise event not yet observed on a side (an early look of
    a sequential audit before its first probe) gets the trivial bounds 0 and 1."""
    h1, h0 = _hits(counts, chosen, slot)
    if excluded:
        h1 = np.where([p in excluded for p, _i in slot], 0, h1).astype(np.int64)
    n1 = np.broadcast_to(np.asarray(n, dtype=np.int64), (len(chosen),)).copy()
    n0 = n1.copy()
    rows = []  # (numerator raised, calls, denominator raised, calls) of each raise event
    for rc in raising:
        assert observed is not None  # set whenever raise events were certified
        num, den = observed[rc.pair][0 if rc.forward else 1], observed[rc.pair][1 if rc.forward else 0]
        rows.append((num.raised, num.calls, den.raised, den.calls) if num.calls and den.calls else (0, 1, 1, 1))
    extra = np.array(rows, dtype=np.int64).reshape(len(rows), 4)
    return (
        np.concatenate([h1, extra[:, 0]]),
        np.concatenate([n1, extra[:, 1]]),
        np.concatenate([h0, extra[:, 2]]),
        np.concatenate([n0, extra[:, 3]]),
    )


def _bounds(h1: np.ndarray, h0: np.ndarray, n1, confidence: float, s: _Settings, *, n0=None) -> tuple[Any, Any]:
    """ε and δ bounds of every candidate at ``confidence``: ``n1``/``n0`` the numerator's and the
    denominator's sample (or call) sizes, per candidate or one for all (``n0`` defaults to ``n1``)."""
    n0 = n1 if n0 is None else n0
    m = len(h1)
    eb = _stats.epsilon_lower_bound(h1, n1, h0, n0, confidence=confidence, delta=s.delta, candidates=m)
    db = (
        _stats.delta_lower_bound(h1, n1, h0, n0, epsilon=s.epsilon, confidence=confidence, candidates=m)
        if math.isfinite(s.epsilon)
        else None
    )
    return eb, db


def _all_within_claim(h1: np.ndarray, h0: np.ndarray, n1, alpha: float, s: _Settings, *, n0=None) -> bool:
    """Whether every chosen (event, direction) is certified not to violate the claim: with the opposite
    one-sided bounds at α/(2m) each, Pr[numerator side ∈ S] − δ <= e^ε Pr[denominator side ∈ S]. A
    sequential audit that sees this stops with a pass: more samples of these events cannot certify a
    violation (except with probability α over all looks)."""
    if not math.isfinite(s.epsilon):
        return True
    n0 = n1 if n0 is None else n0
    level = alpha / (2 * len(h1))
    p1_high = np.asarray(_stats.clopper_pearson_upper(h1, n1, level), dtype=float)
    p0_low = np.asarray(_stats.clopper_pearson_lower(h0, n0, level), dtype=float)
    return bool(np.all(p1_high - s.delta <= math.exp(s.epsilon) * p0_low))


def _certify(
    sampler: _runner.Sampler,
    pairs: list[tuple],
    chosen: list[_Candidate],
    ref: tuple | None,
    s: _Settings,
    raising: Sequence[_RaiseCandidate] = (),
) -> _Certified:
    events_per_pair: list[list[Event]] = [[] for _ in pairs]
    slot: list[tuple[int, int]] = []
    for c in chosen:
        lst = events_per_pair[c.pair]
        ids = [i for i, e in enumerate(lst) if e is c.event]
        if ids:
            slot.append((c.pair, ids[0]))
        else:
            lst.append(c.event)
            slot.append((c.pair, len(lst) - 1))
    row_elems = int(np.prod(ref[0])) if ref is not None and len(ref[0]) else 1
    chunk = _cert_chunk(row_elems) if s.vectorized else _loop_chunk(s.cert_n)
    if s.sequential:  # at least 8 chunks, so that there are looks to take
        chunk = max(1, min(chunk, math.ceil(s.cert_n / 8)))
    plan = _runner.chunk_plan(s.cert_n, chunk)
    # the events of the costly families are counted on their first _COSTLY_CERT samples a side only (an
    # event a candidate of another family shares, on every chunk)
    everywhere = {(p, i) for c, (p, i) in zip(chosen, slot) if c.source not in _COSTLY_FAMILIES}
    costly_chunks = -(-min(s.cert_n, _COSTLY_CERT) // chunk)
    limits = [
        [len(plan) if (p, i) in everywhere else costly_chunks for i in range(len(lst))]
        for p, lst in enumerate(events_per_pair)
    ]
    # the raise events are observed on size-1 probes (vectorised samplers) or on the certification
    # calls themselves (a per-call sampler: those pairs are drawn even when they have no output event)
    probes = [0] * len(pairs)
    for rc in raising:
        probes[rc.pair] = min(s.cert_n, _RAISE_PROBES) if s.vectorized else 1
    drawn = [bool(lst) or (probes[p] > 0 and not s.vectorized) for p, lst in enumerate(events_per_pair)]
    n_probe_tasks = sum(2 * math.ceil(k / _runner.PROBE_CHUNK) for k in probes) if s.vectorized else 0
    spans = [
        len(plan) if not events_per_pair[p] or (probes[p] > 0 and not s.vectorized) else max(limits[p])
        for p in range(len(pairs))
    ]
    n_tasks = sum(2 * spans[p] for p in range(len(pairs)) if drawn[p]) + n_probe_tasks
    bar = _runner.Progress(n_tasks, s.show, f"audit {s.name}")
    # the pool runs certification when the audit's draws take long here (by the training pace) or are
    # many (:func:`_pooled`, the rule training followed); the counts are the same either way
    workers = s.workers if _pooled(sampler, s, 2 * s.cert_n * sum(drawn)) else 1
    if not chosen and not raising:
        bar.close()
        return _Certified([[np.zeros(0, np.int64)] * 2 for _ in pairs], slot, None, None, workers, s.cert_n)
    alpha = 1.0 - s.confidence
    looks = _look_plan(len(plan), alpha) if s.sequential else [(len(plan), alpha)]
    counts = [[np.zeros(len(events_per_pair[p]), np.int64) for _ in (0, 1)] for p in range(len(pairs))]
    raised = [[_runner.Raises(), _runner.Raises()] for _ in pairs]
    observed = [[_runner.Raises(), _runner.Raises()] for _ in pairs]
    done, taken, stop = 0, [], ""
    for end, a in looks:
        more = _runner.count_events(
            sampler,
            pairs,
            events_per_pair,
            seed=s.seed,
            total=s.cert_n,
            chunk=chunk,
            ref=ref,
            workers=workers,
            progress=bar,
            cluster=s.cluster,
            chunk_range=(done, end),
            outcomes=True,
            probes=probes,
            limits=limits,
        )
        assert isinstance(more, _runner.Counted)  # outcomes=True returns a Counted
        for p in range(len(pairs)):
            for side in (0, 1):
                counts[p][side] = counts[p][side] + more.hits[p][side]
                raised[p][side] = raised[p][side] + more.raises[p][side]
                observed[p][side] = observed[p][side] + more.probes[p][side]
        done = end
        n = plan.samples(end)
        excluded = frozenset(
            p
            for p in range(len(pairs))
            if not _output_events_sound(s.vectorized, bool(raised[p][0].raised or raised[p][1].raised))
        )
        counted = [plan.samples(min(end, limits[p][i])) for p, i in slot]
        h1, n1, h0, n0 = _observations(counts, chosen, slot, counted, raising, observed, excluded)
        eb, db = _bounds(h1, h0, n1, 1.0 - a, s, n0=n0)
        taken.append((n, 1.0 - a))
        if not s.sequential:
            break
        if eb.epsilon > s.epsilon:
            stop = "a violation was certified"
            break
        if end < len(plan) and _all_within_claim(h1, h0, n1, a, s, n0=n0):
            stop = "every chosen event was certified within the claim"
            break
    else:
        stop = "all certification samples were used"
    bar.close()
    return _Certified(
        counts,
        slot,
        eb,
        db,
        workers,
        n,
        tuple(taken) if s.sequential else (),
        stop,
        tuple(raising),
        observed,
        raised,
        excluded,
        tuple(counted),
    )


# --------------------------------------------------------------------------- the result

_RAISES = "raises"  # the family name of the event "one release raises"


def _best_source(chosen: list[_Candidate], best: int) -> str:
    return chosen[best].source if best < len(chosen) else _RAISES


def _best_pair(chosen: list[_Candidate], cert: _Certified, best: int) -> int:
    return cert.slot[best][0] if best < len(chosen) else cert.raising[best - len(chosen)].pair


def _best_forward(chosen: list[_Candidate], cert: _Certified, best: int) -> bool:
    return chosen[best].forward if best < len(chosen) else cert.raising[best - len(chosen)].forward


def _calls_word(vectorized: bool) -> str:
    return "size-1 calls" if vectorized else "calls"


def _certified_on(s: _Settings, chosen: list[_Candidate], cert: _Certified) -> str:
    """What the candidates were certified on, in words."""
    fewer = sorted({(n, c.source) for c, n in zip(chosen, cert.counted) if n < cert.n})
    if fewer:
        families = " and ".join(sorted({f for _n, f in fewer}))
        on = f"certified on {cert.n} fresh samples a side (the {families} events on the first {fewer[0][0]} of them)"
    else:
        on = f"certified on {cert.n} fresh samples a side"
    if not cert.raising:
        return on
    if not s.vectorized:
        return f"{on} (the event 'one release raises' on the same calls)"
    observed = cert.observed
    assert observed is not None  # set whenever raise events were certified
    calls = max(observed[rc.pair][side].calls for rc in cert.raising for side in (0, 1))
    probes = f"the event 'one release raises' on up to {calls} fresh size-1 calls a side"
    return f"{on} and {probes}" if chosen else f"certified {probes}"


def _raise_witness(
    s: _Settings, pairs: list[tuple], cert: _Certified, best: int, eps_lb: float
) -> tuple[Witness, str, dict]:
    """Witness, words and counts when the event "one release raises" certified the bound."""
    eb = cert.eps
    rc = cert.raising[best - len(cert.slot)]  # the raise events follow the output events
    a, b = pairs[rc.pair]
    num, den = ("data", "neighbor") if rc.forward else ("neighbor", "data")
    observed = cert.observed
    assert observed is not None  # set whenever raise events were certified
    on_num, on_den = observed[rc.pair][0 if rc.forward else 1], observed[rc.pair][1 if rc.forward else 0]
    so = (
        f"so ε >= ln({eb.p1_low[best]:.4g} / {eb.p0_high[best]:.4g}) = {eps_lb:.4f}"
        if not s.delta
        else f"so at δ = {s.delta:g}, ε >= ln(({eb.p1_low[best]:.4g} - δ) / {eb.p0_high[best]:.4g}) = {eps_lb:.4f}"
    )
    where = "" if len(pairs) == 1 else f" on pair {rc.pair} (data={short_repr(a)}, neighbor={short_repr(b)})"
    types = sorted({*on_num.types, *on_den.types})
    word = _calls_word(s.vectorized)
    words = (
        f"S = {{the call raises ({' / '.join(types)})}}{where}: {on_num.raised} of {on_num.calls} {word} on the "
        f"{num} raised and {on_den.raised} of {on_den.calls} on the {den}, so Pr[M({num}) raises] >= "
        f"{eb.p1_low[best]:.4g} and Pr[M({den}) raises] <= {eb.p0_high[best]:.4g} (confidence {s.confidence:g}), "
        f"{so} (event from {_RAISES}: whether the mechanism raises is an output)"
    )
    witness = Witness(data=a, neighbor=b, event=None, loss=eps_lb, description=words)
    on_a, on_b = observed[rc.pair]
    cnt = {"hits_data": on_a.raised, "hits_neighbor": on_b.raised, "n_data": on_a.calls, "n_neighbor": on_b.calls}
    return witness, words, cnt


def _raise_notes(pairs: list[tuple], train_raises: list, cert: _Certified, vectorized: bool) -> list[str]:
    """One sentence per pair on which the mechanism raised: the exception types and the counts per
    side (never the messages), and what the audit made of it."""
    out = []
    raising = {rc.pair for rc in cert.raising}
    for p in range(len(pairs)):
        kinds = [("training calls", train_raises[p])]
        if cert.raised is not None:
            kinds.append(("certification calls", cert.raised[p]))
        if vectorized and cert.observed is not None:
            kinds.append(("size-1 calls", cert.observed[p]))
        sides = [
            [(label, pair_tally[side]) for label, pair_tally in kinds if pair_tally[side].calls] for side in (0, 1)
        ]
        raised = [sum(t.raised for _label, t in sides[side]) for side in (0, 1)]
        if not any(raised):
            continue
        types = sorted({name for side in (0, 1) for _label, t in sides[side] for name in t.types})
        which = "one input" if 0 in raised else "both inputs"
        counts = "; ".join(
            f"{name} side: " + (", ".join(f"{t.raised} of {t.calls} {label}" for label, t in sides[side]) or "no calls")
            for side, name in ((0, "data"), (1, "neighbor"))
        )
        what = (
            " — the event 'one release raises' was certified with the other events"
            if p in raising
            else " — the event 'one release raises' was not certified on this pair (on its training calls neither "
            "side raised more often than the other, so no direction was chosen in advance)"
        )
        if p in cert.excluded:
            what += (
                "; its output events certified nothing (a vectorised call that raised loses its chunk: the outputs "
                "of the calls that returned are not a count of the mechanism's releases)"
            )
        out.append(f"the mechanism raised ({' / '.join(types)}) on {which} of pair {p}: {counts}{what}")
    return out


def _certification_record(chosen: list[_Candidate], cert: _Certified, eb: Any) -> dict:
    """Every certified candidate's counts, for :mod:`.tradeoff` (JSON-able): ``events`` rows
    ``[pair, numerator is data, numerator hits, numerator n, denominator hits, denominator n, family]``
    (output events, then raise events); ``confidence``/``candidates``: what the bounds were computed
    at (a sequential audit: the last look's share of α), so each one-sided bound is at eb.level."""
    n = cert.counted or cert.n
    h1, n1, h0, n0 = _observations(cert.counts, chosen, cert.slot, n, cert.raising, cert.observed, cert.excluded)
    who = [(p, c.forward, c.source) for c, (p, _i) in zip(chosen, cert.slot)]
    who += [(rc.pair, rc.forward, _RAISES) for rc in cert.raising]
    rows = [
        [int(p), bool(f), int(a), int(b), int(c), int(d), src] for (p, f, src), a, b, c, d in zip(who, h1, n1, h0, n0)
    ]
    return {"confidence": float(eb.confidence), "candidates": int(eb.candidates), "events": rows}


def _result(
    s: _Settings,
    pairs: list[tuple],
    pair_how: str,
    chosen: list[_Candidate],
    cert: _Certified,
    training_kind: str | None,
    train_used: int,
    proposed: int,
    notes: list[str],
    t0: float,
    train_raises: list | None = None,
) -> AuditResult:
    train_raises = train_raises or [(_runner.Raises(), _runner.Raises()) for _ in pairs]
    eb = cert.eps
    if eb is not None:
        eps_lb, best, stat_method = eb.epsilon, eb.index, eb.method
    else:
        eps_lb, best, stat_method = 0.0, -1, "no candidate events (the outputs did not vary)"
    witness: Witness | None = None
    words = "no event certified a positive lower bound"
    cnt: dict[str, int] = {}
    if best >= len(chosen):
        witness, words, cnt = _raise_witness(s, pairs, cert, best, eps_lb)
    elif best >= 0:
        c = chosen[best]
        p, i = cert.slot[best]
        a, b = pairs[p]
        num, den = ("data", "neighbor") if c.forward else ("neighbor", "data")
        so = (
            f"so ε >= ln({eb.p1_low[best]:.4g} / {eb.p0_high[best]:.4g}) = {eps_lb:.4f}"
            if not s.delta
            else f"so at δ = {s.delta:g}, ε >= ln(({eb.p1_low[best]:.4g} - δ) / {eb.p0_high[best]:.4g}) = {eps_lb:.4f}"
        )
        where = "" if len(pairs) == 1 else f" on pair {p} (data={short_repr(a)}, neighbor={short_repr(b)})"
        words = (
            f"S = {{{c.event.description}}}{where}: Pr[M({num}) ∈ S] >= {eb.p1_low[best]:.4g} and "
            f"Pr[M({den}) ∈ S] <= {eb.p0_high[best]:.4g} (confidence {s.confidence:g}), {so} (event from {c.source})"
        )
        witness = Witness(data=a, neighbor=b, event=c.event, loss=eps_lb, description=words)
        cnt = {
            "hits_data": int(cert.counts[p][0][i]),
            "hits_neighbor": int(cert.counts[p][1][i]),
            "n_data": cert.counted[best] if cert.counted else cert.n,
            "n_neighbor": cert.counted[best] if cert.counted else cert.n,
        }
    sources = sorted({c.source for c in chosen} | ({_RAISES} if cert.raising else set()))
    method = (
        f"events chosen on {train_used} training samples a side ({', '.join(sources) or 'none'}; pairs: {pair_how}); "
        f"{_certified_on(s, chosen, cert)}: {stat_method}"
    )
    certified = sorted({p for p, _i in cert.slot} | {rc.pair for rc in cert.raising})
    if len(pairs) > 1 and certified:
        method += (
            f"; certified on pair(s) {', '.join(map(str, certified))} of the {len(pairs)} trained (the one its "
            "training draws rank best, and the proof's witness pair when it differs)"
        )
    raise_notes = _raise_notes(pairs, train_raises, cert, s.vectorized)
    if raise_notes:
        method += "; " + "; ".join(raise_notes)
        notes = [*notes, *raise_notes]
    if cert.looks:
        method += (
            f"; sequential: {len(cert.looks)} look(s) of up to {len(_LOOK_FRACTIONS)} at "
            f"{', '.join(f'{n} a side (confidence {c:.4g})' for n, c in cert.looks)}, stopped because {cert.stop} "
            f"(union bound over the looks: confidence {s.confidence:g} in all)"
        )
    extra = {
        "output_kind": training_kind,
        "train_samples": train_used,
        "certification_samples": cert.n if chosen or not s.vectorized else 0,
        "workers": cert.workers,
        "ideal_numerics": s.ideal_numerics,
        "proposed_events": proposed,
        "family": None if best < 0 else _best_source(chosen, best),
        "best_pair": None if best < 0 else _best_pair(chosen, cert, best),
        "one_sided_events": sum(1 for c in chosen if c.one_sided_score > 0),
        "direction": None
        if best < 0
        else ("data over neighbor" if _best_forward(chosen, cert, best) else "neighbor over data"),
        "p1_low": None if best < 0 else float(eb.p1_low[best]),
        "p0_high": None if best < 0 else float(eb.p0_high[best]),
        "per_event_level": None if eb is None else eb.level,
    }
    if eb is not None:
        extra["certification"] = _certification_record(chosen, cert, eb)
    # what this audit could have certified at its size (stats.CertifiableRange): its detection floor and
    # ceiling on all its certification samples, at the last look's share of α over max_events candidates
    reach = _stats.certifiable_range(max(1, s.cert_n), _certifying_level(s), s.delta)
    extra["certifiable"] = {"samples": s.cert_n, "floor": reach.floor, "ceiling": reach.ceiling}
    if cert.looks:
        extra["sequential"] = {
            "looks": [{"samples": n, "confidence": c} for n, c in cert.looks],
            "stopped": cert.stop,
            "planned_samples": s.cert_n,
        }
    if notes:
        extra["notes"] = notes
    if len(pairs) > 1 or pair_how != "given pair":
        extra["pairs"] = [(a, b) for a, b in pairs]
        extra["certified_pairs"] = certified
    return AuditResult(
        epsilon_lower_bound=eps_lb,
        passed=not (eps_lb > s.epsilon),
        epsilon=s.epsilon,
        delta=s.delta,
        confidence=s.confidence,
        samples=s.samples,
        seed=s.seed,
        method=method,
        witness=witness,
        witness_description=words,
        counts=cnt,
        delta_lower_bound=None if cert.delta is None else cert.delta.delta,
        events_tested=len(chosen) + len(cert.raising),
        pairs_tested=len(pairs),
        elapsed=time.perf_counter() - t0,
        extra=extra,
    )


# --------------------------------------------------------------------------- the audit


def audit(
    mechanism: Any,
    data: Any = None,
    neighbor: Any = None,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    samples: int = 1_000_000,
    seed: int = 0,
    confidence: float = 0.95,
    vectorized: bool = True,
    ideal_numerics: bool = False,
    candidate_witnesses: Sequence[Witness] = (),
    progress: bool | None = None,
    workers: int | None = None,
    max_events: int = DEFAULT_MAX_EVENTS,
    train_fraction: float = 0.1,
    cluster: Any = None,
    inputs: Any = None,
    sequential: bool = False,
    time_budget: float | None = None,
    search_samples: int | None = None,
) -> AuditResult:
    """Certified empirical lower bound on the ε of ``mechanism`` on neighbouring inputs.

    ``mechanism``: a catalog :class:`~dpharness.core.Mechanism` or a callable ``fn(data, size, rng)``
    returning ``size`` outputs (first axis = samples; floats, ints, bools, vectors or hashable
    objects); with ``vectorized=False`` a callable ``fn(data)`` returning one output and drawing its
    own randomness (with ``workers`` > 1 its chunks run in worker processes, each reseeding the global
    ``random``/numpy/torch states and the generators ``fn`` reaches from its chunk's seed; with one
    worker it runs in this process on the caller's own random state).

    ``data``/``neighbor``: the pair, passed unchanged to the mechanism. For a catalog mechanism
    both may be omitted: pairs then come from :mod:`dpharness.auditors.neighbours`,
    ``candidate_witnesses`` and ``mechanism.example_pair()``. For a callable, ``inputs`` (an input
    space of :mod:`dpharness.auditors.pairsearch`) may replace them: pairs are then searched there.
    The union bound covers every pair audited.

    ``epsilon``/``delta``: the claim to test (a Mechanism: its own claim by default, a Rényi claim
    converted to (ε, 1e-6)-DP unless ``delta`` is given; a callable: ``epsilon`` is required, δ = 0
    by default).
    ``samples``: outputs per side per pair, of which ``train_fraction`` (at most 4·10^6; for a pure-DP
    claim up to 10^6, then 1% of the further samples) choose events and the rest certify. ``max_events``: (event, direction) candidates certified in all,
    the Bonferroni count (fewer: a smaller penalty, but less chance to keep the best event);
    up to half of them go to events seen on one side only. ``ideal_numerics=True`` skips
    floating-point events (float structure, rounding: audit the mathematical mechanism, not its
    float implementation). ``workers``: processes for certification (default: all cores);
    ``cluster``: where the runner draws and counts (``"local"``, an address or a
    ``dask.distributed.Client``, see :func:`dpharness.auditors._runner.count_events`; opened once for
    the audit); the result depends on neither. ``progress``: progress bar on stderr (default: when stderr
    is a terminal).

    Returns an :class:`AuditResult`; ``passed`` is False iff a violation of the claim is certified
    (``epsilon_lower_bound > epsilon``, equivalently ``delta_lower_bound > delta``);
    ``extra["family"]`` names the event family of the certifying event, ``extra["best_pair"]`` the index
    in ``extra["pairs"]`` of the pair it was certified on.

    ``time_budget``: seconds the audit may take on an idle machine (None: no budget); on a loaded one
    the same audit runs, longer by the clock (the time a process waits for a core is not counted, where
    Linux reports it). The samples a side are then sized
    from the sampler's measured pace (one timed call a side) so that the draws take about half of the
    time left after the pair search, with ``samples`` as a cap; ``method``, ``samples`` and
    ``extra["time_budget"]`` state the samples used (pass them as ``samples=``, with the keywords of
    ``extra["reproduce"]``, to reproduce the audit: the size depends on the machine's speed, the rest on
    the seed). When even the minimum certification
    (2 000 samples a side, or more where the claimed ε is too large for the certifier to refute at that
    size) is not expected to fit, nothing is certified: :class:`~dpharness.errors.AuditBudgetTooSmall`
    names the budget that would fit it.

    ``extra["certifiable"]``: what the audit could certify on all its certification samples
    (:func:`~dpharness.auditors.stats.certifiable_range`): ``floor`` (its detection floor: the smallest ε
    an event of probability 1/2 vs e^-ε/2 certifies above 0 at its expected counts) and ``ceiling`` (the
    bound of maximally separated counts: the most it could certify).

    ``search_samples``: the pair search's samples in all (both sides, every candidate; at least 100, and
    2 000 over an input space), when the pairs are searched (no pair given). By default its training
    samples a side, at most 10^5 (a per-call callable over an input space: 2·10^4 calls), and under a time
    budget at most what a quarter of the budget fits. ``extra["search_samples"]`` states the size used;
    when it differs from the default at ``samples`` (a time budget cut it, or it was given),
    ``extra["reproduce"]`` holds it as ``search_samples``, the keyword that reproduces the audit.

    ``sequential=True`` certifies in looks, after 1/8, 1/4, 1/2 and all of the certification samples,
    and stops at the first look where the verdict is certain: a violation is certified, or every
    chosen event is certified within the claim (its upper confidence bound). The last look spends α/2
    and the earlier ones share α/2 (α = 1 − confidence), so the union bound covers every look and the
    bound stays valid at ``confidence`` wherever it stops; the price is a slightly lower bound at the
    last look than a single look at α. ``extra["sequential"]`` lists the looks taken and why it stopped.
    The gate audits a mechanism with a proof beside its audit sequentially; an audit that stands alone
    (a library target, a mechanism audited only) in one look, as ``dpharness audit`` does.

    A mechanism that raises on some calls is audited, not aborted: raising is an output. The event
    "one release raises" is certified with the others (module docstring; ``extra["family"]`` is then
    ``"raises"`` and ``counts`` are raised calls among calls), and ``method`` and ``extra["notes"]`` say
    on which inputs it raised, the exception types and the counts per side (never the messages).
    Raises :class:`MechanismError` when every call on both inputs of every pair raised."""
    t0 = time.perf_counter()
    s = _settings(
        mechanism,
        epsilon=epsilon,
        delta=delta,
        samples=samples,
        seed=seed,
        confidence=confidence,
        vectorized=vectorized,
        ideal_numerics=ideal_numerics,
        progress=progress,
        workers=workers,
        max_events=max_events,
        train_fraction=train_fraction,
        cluster=cluster,
        sequential=sequential,
        time_budget=time_budget,
        search_samples=search_samples,
    )
    notes: list[str] = []
    pairs, pair_how, sampler, searched = _choose_pairs(mechanism, data, neighbor, inputs, candidate_witnesses, s, notes)
    if s.catalog:
        sampler, encoded = _encoded(mechanism, sampler, pairs)
        if encoded:
            notes.append(encoded)
            pair_how += f"; {encoded}"
    sized = ""
    if s.time_budget is not None:
        s, sized = _sized(sampler, pairs, s, t0)
        notes.append(sized)
    fresh = [] if s.catalog else _runner.fresh_generators(mechanism)
    if fresh:  # e.g. a function holding a Tumult Core measurement: sound on the workers, not reproducible
        notes.append(
            f"not reproducible by seed: the mechanism draws from {', '.join(fresh)}, which takes no seed (fresh "
            "randomness in every copy and worker); the seed fixes the events and pairs tested, not the outputs"
        )
    from threadpoolctl import threadpool_limits

    # a cluster given by address or "local" is opened once for the whole audit (a Client is used as is);
    # one BLAS thread here as in the workers (the fits then give the same events on any machine, and the
    # parent does not take the workers' cores)
    with threadpool_limits(limits=1), _runner.cluster_session(cluster, s.workers) as open_cluster:
        s = dataclasses.replace(s, cluster=open_cluster)
        level = _stats.bonferroni_level(s.confidence, s.max_events)
        t1 = time.perf_counter()
        witness = _witness_index(mechanism, pairs, candidate_witnesses, s)
        every = s.train_n < _EVERY_PAIR_BELOW
        if len(pairs) > 1 and not every and s.train_n > _SCREEN_TRAIN:
            # the pairs are ranked on _SCREEN_TRAIN training samples a side each; only the pairs to
            # certify draw the rest of their training samples, on which their events are chosen
            screen = dataclasses.replace(s, train_n=_SCREEN_TRAIN)
            screened, ref, _used, on_workers = _train(sampler, pairs, screen, notes, level, screening=True)
            kept = _certified_pairs(
                [c for o in screened for c in o.candidates], _raise_candidates(screened, s), witness
            )
            outcomes, ref, train_used, again = _train(sampler, pairs, s, notes, level, given=screened, only=kept)
            on_workers = on_workers or again
            pair_how += f"; pairs ranked on {_SCREEN_TRAIN} training samples a side"
        else:
            outcomes, ref, train_used, on_workers = _train(sampler, pairs, s, notes, level)
            kept = None
        t2 = time.perf_counter()
        ranked = [c for o in outcomes for c in o.candidates]
        raising = _raise_candidates(outcomes, s)
        if kept is None:
            kept = _certified_pairs(ranked, raising, witness, every=every)
        ranked = [c for c in ranked if c.pair in kept]
        raising = [rc for rc in raising if rc.pair in kept]
        chosen = _trim_costly(_select(ranked, s.max_events - len(raising)), ranked, s.max_events - len(raising))
        kind = next((o.kind for o in reversed(outcomes) if o.usable), None)
        train_raises = [(o.raises_a, o.raises_b) for o in outcomes]
        proposed = sum(o.proposed for o in outcomes)
        cert = _certify(sampler, pairs, chosen, ref, s, raising)
        phases = {
            "pairs": {"seconds": t2 - t1, "on_workers": on_workers},
            "certification": {
                "seconds": time.perf_counter() - t2,
                "on_workers": cert.workers > 1 or s.cluster is not None,
            },
        }
    result = _result(s, pairs, pair_how, chosen, cert, kind, train_used, proposed, notes, t0, train_raises)
    result.extra["phases"] = phases
    if sized:
        result.extra["time_budget"] = {
            "seconds": s.time_budget,
            "samples": s.samples,
            "cut_by_time_limit": s.cut_by_time_limit,
        }
        result = dataclasses.replace(result, method=f"{result.method}; {sized}")
    if searched is not None:
        result.extra["search_samples"] = searched
        if searched != _default_search(s, inputs is not None):  # s: the samples used
            result.extra["reproduce"] = {"search_samples": searched}
    return result
