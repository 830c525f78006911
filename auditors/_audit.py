"""``audit``: a certified empirical lower bound on ε for a catalog mechanism or any callable.

Two phases (the standard train/certify split of DP auditing, as in DP-Sniper, Bichsel et al. 2021,
and Lu et al. 2022): candidate events are chosen on *training* samples only; the chosen events are
then counted on *fresh* certification samples and turned into a bound with exact Clopper-Pearson
intervals and a Bonferroni union bound over every certified (pair, event, direction) candidate
(see :mod:`dpharness.auditors.stats`). With probability >= ``confidence`` over the audit's
randomness the returned bound does not exceed the true ε of the pair(s) audited.
"""

from __future__ import annotations

import functools
import inspect
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from dpharness import _validate as _v
from dpharness.core import ApproxDP, Event, Mechanism, RenyiDP, Witness
from dpharness.errors import ParameterError, UnsupportedError

from . import _runner
from . import events as _ev
from . import floats as _fl
from . import stats as _stats
from ._model import AuditResult

__all__ = ["audit", "DEFAULT_MAX_EVENTS"]

DEFAULT_MAX_EVENTS = 20
_RENYI_DELTA = 1e-6
_MAX_PAIRS = 4
_CHUNK = 1_000_000      # samples per chunk for vectorised mechanisms (scaled down for wide outputs)
_LOOP_CHUNK = 10_000    # samples per chunk for fn(data) called in a loop
_RANK_Z = 1.0          # standard errors by which training estimates are shaded when ranking events
_TRAIN_MAX = 4_000_000  # training samples a side at most (large audits choose events on more data)
_TRAIN_CHUNK = 1 << 17  # training samples per call (training outputs are held in memory)
_TRAIN_ELEMENTS = 20_000_000  # cap on training output entries a side (wide vectors get fewer rows)


def _optional(module: str):
    """Import the second engineer's modules when present (vector events, neighbour search)."""
    import importlib

    try:
        return importlib.import_module(f"dpharness.auditors.{module}")
    except ImportError:
        return None
    except Exception as exc:  # noqa: BLE001 - a broken optional module must not break audits
        warnings.warn(f"dpharness.auditors.{module} failed to import ({exc!r}); auditing without it.", RuntimeWarning, stacklevel=3)
        return None


@dataclass(frozen=True)
class _Candidate:
    pair: int
    event: Event
    forward: bool   # True: the event is likelier on the data (numerator = data side)
    score: float    # projected bound on training data (ranking only)
    source: str
    signature: int = 0  # hash of the event's membership on the training samples (deduplication)


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


def _short(x: Any) -> str:
    text = repr(x.tolist()) if isinstance(x, np.ndarray) else repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _mechanism_name(mechanism: Any) -> str:
    if isinstance(mechanism, Mechanism):
        return mechanism.name or type(mechanism).__name__
    return getattr(mechanism, "__qualname__", None) or getattr(mechanism, "__name__", None) or repr(mechanism)[:60]


# --------------------------------------------------------------------------- pairs

def _pairs_for_catalog(mechanism: Mechanism, data, neighbor, *, seed: int, budget: int,
                       candidate_witnesses: Sequence[Witness], notes: list[str]) -> tuple[list[tuple], str]:
    spec = mechanism.input_spec
    if data is not None or neighbor is not None:
        if data is None or neighbor is None:
            missing = "data" if data is None else "neighbor"
            raise ParameterError(f"{missing}=None while the other input is given; pass both data and neighbor, or neither to search pairs.")
        return [spec.validate_pair(data, neighbor)], "given pair"
    proposed: list[tuple] = []
    how = "candidate witnesses and the example pair"
    nb = _optional("neighbours")
    if nb is not None and hasattr(nb, "search_pairs"):
        try:
            proposed.extend(nb.search_pairs(mechanism, seed=seed, budget=budget,
                                            candidate_witnesses=tuple(candidate_witnesses)))
            how = "neighbour search"
        except (MemoryError, ArithmeticError, UnsupportedError) as exc:
            # the search failed on this mechanism: audit the witnesses and the example pair instead
            notes.append(f"neighbour search failed ({type(exc).__name__}: {str(exc)[:120]}); used the example pair")
            warnings.warn(f"neighbour search failed for {mechanism.name!r} ({exc!r:.120}); auditing the example pair.",
                          RuntimeWarning, stacklevel=3)
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
    if not pairs:
        raise ParameterError(f"mechanism={mechanism.name!r} yielded no valid neighbouring pair; pass data and neighbor explicitly.")
    return pairs, how


# --------------------------------------------------------------------------- event proposal

def _proposals(kind: str, train_a: np.ndarray, train_b: np.ndarray, *, max_events: int, ideal_numerics: bool,
               shifts: tuple, notes: list[str], cert_n: int, confidence: float) -> list[tuple[str, Event]]:
    """(proposer name, event) pairs for one pair's training outputs."""
    props: list[tuple[str, Callable]] = []
    per = max_events * 2
    if kind == "object":
        props.append(("histogram", _ev.propose_discrete))
    elif kind == "discrete":
        props += [("histogram", _ev.propose_discrete), ("thresholds", _ev.propose_thresholds)]
    elif kind == "discrete-vector":
        props += [("pattern histogram", _ev.propose_discrete), ("pattern features", _ev.propose_pattern_features),
                  ("coordinates", _ev.propose_coordinates), ("projections", _ev.propose_projections)]
    elif kind == "float":
        props += [("thresholds", _ev.propose_thresholds), ("intervals", _ev.propose_intervals), ("atoms", _ev.propose_atoms)]
    elif kind == "float-vector":
        props += [("coordinates", _ev.propose_coordinates), ("projections", _ev.propose_projections),
                  ("pattern histogram", _repeated_rows)]
    if kind in ("float", "float-vector") and not ideal_numerics:
        props.append(("float structure", lambda a, b, *, max_events: _fl.propose_float_structure(a, b, max_events=max_events, shifts=shifts)))
    if kind in ("discrete-vector", "float-vector"):
        vec = _optional("vector")
        if vec is not None and hasattr(vec, "propose_vector_events"):
            fn = vec.propose_vector_events
            params = inspect.signature(fn).parameters
            extra = {k: v for k, v in (("certify_samples", cert_n), ("confidence", confidence)) if k in params}
            props.append(("learned likelihood ratio", functools.partial(fn, **extra) if extra else fn))
    out: list[tuple[str, Event]] = []
    for name, fn in props:
        try:
            evs = fn(train_a, train_b, max_events=per)
        except Exception as exc:  # noqa: BLE001 - one proposer failing leaves the others
            if name != "learned likelihood ratio":
                raise
            notes.append(f"{name} proposer failed: {exc!r}")
            continue
        out.extend((name, e) for e in evs)
    return out


def _repeated_rows(train_a, train_b, *, max_events: int) -> list[Event]:
    """Float vectors with exactly repeated rows (sentinels, grids): histogram of the repeated rows."""
    ka, kb = _ev.row_keys(train_a), _ev.row_keys(train_b)
    vals, counts = np.unique(np.concatenate([ka, kb]), return_counts=True)
    if not np.any(counts >= 2):
        return []
    rep = vals[counts >= 2]
    ia, ib = np.isin(ka, rep), np.isin(kb, rep)
    return _ev._discrete_events(ka[ia], kb[ib], np.asarray(train_a)[ia], np.asarray(train_b)[ib],
                                max_events=max_events, object_kind=False, label="output vector")


def _rank(pair: int, proposals: list[tuple[str, Event]], train_a, train_b, *, cert_n: int, level: float,
          delta: float) -> list[_Candidate]:
    na, nb = len(train_a), len(train_b)
    kept, ha, hb, sigs = [], [], [], []
    for source, ev in proposals:
        ma = np.asarray(ev.contains(train_a), dtype=bool)
        mb = np.asarray(ev.contains(train_b), dtype=bool)
        ka, kb = int(np.count_nonzero(ma)), int(np.count_nonzero(mb))
        if (ka == 0 and kb == 0) or (ka == na and kb == nb):
            continue  # empty or full on both sides: carries no information
        kept.append((source, ev))
        ha.append(ka)
        hb.append(kb)
        sigs.append(hash((np.packbits(ma).tobytes(), np.packbits(mb).tobytes())))
    if not kept:
        return []
    pa, pb = np.array(ha) / na, np.array(hb) / nb
    # shade the training estimates by _RANK_Z standard errors towards "no effect" before projecting:
    # among many candidates, a rare event's estimated ratio is the most inflated by chance (winner's curse)
    sa, sb = np.sqrt(pa * (1 - pa) / na), np.sqrt(pb * (1 - pb) / nb)
    z = _RANK_Z
    fwd = _stats.projected_epsilon(np.maximum(pa - z * sa, 0), np.minimum(pb + z * sb, 1), cert_n, level, delta)
    bwd = _stats.projected_epsilon(np.maximum(pb - z * sb, 0), np.minimum(pa + z * sa, 1), cert_n, level, delta)
    out: list[_Candidate] = []
    for i, (source, ev) in enumerate(kept):
        out.append(_Candidate(pair, ev, True, float(fwd[i]), source, sigs[i]))
        out.append(_Candidate(pair, ev, False, float(bwd[i]), source, sigs[i]))
    return out


def _select(cands: list[_Candidate], max_events: int) -> list[_Candidate]:
    finite = [c for c in cands if math.isfinite(c.score) or c.score == math.inf]
    pool = finite if finite else cands
    pool = sorted(pool, key=lambda c: -c.score if not math.isnan(c.score) else math.inf)
    chosen: list[_Candidate] = []
    seen: set = set()
    for c in pool:
        key = (c.pair, c.signature, c.forward)
        if key in seen:
            continue
        seen.add(key)
        chosen.append(c)
        if len(chosen) >= max_events:
            break
    return chosen


# --------------------------------------------------------------------------- the audit

def audit(mechanism: Any, data: Any = None, neighbor: Any = None, *, epsilon: float | None = None,
          delta: float | None = None, samples: int = 1_000_000, seed: int = 0, confidence: float = 0.95,
          vectorized: bool = True, ideal_numerics: bool = False, candidate_witnesses: Sequence[Witness] = (),
          progress: bool | None = None, workers: int | None = None, max_events: int = DEFAULT_MAX_EVENTS,
          train_fraction: float = 0.1) -> AuditResult:
    """Certified empirical lower bound on the ε of ``mechanism`` on neighbouring inputs.

    ``mechanism``: a catalog :class:`~dpharness.core.Mechanism` or a callable ``fn(data, size, rng)``
    returning ``size`` outputs (first axis = samples; floats, ints, bools, vectors or hashable
    objects); with ``vectorized=False`` a callable ``fn(data)`` returning one output and drawing its
    own randomness (run serially in a loop; results are then only as reproducible as its randomness).

    ``data``/``neighbor``: the pair, passed unchanged to the mechanism. For a catalog mechanism
    both may be omitted: pairs then come from :mod:`dpharness.auditors.neighbours` when installed,
    ``candidate_witnesses`` and ``mechanism.example_pair()``; the union bound covers all of them.

    ``epsilon``/``delta``: the claim to test (a Mechanism: its own claim by default, a Rényi claim
    converted to (ε, 1e-6)-DP unless ``delta`` is given; a callable: ``epsilon`` is required, δ = 0
    by default).
    ``samples``: outputs per side per pair, of which ``train_fraction`` (at most 4·10^6) choose
    events and the rest certify. ``max_events``: (event, direction) candidates certified in all,
    the Bonferroni count (fewer: a smaller penalty, but less chance to keep the best event). ``ideal_numerics=True`` skips floating-point-structure events (audit the mathematical
    mechanism, not its float implementation). ``workers``: processes for certification (default: all
    cores); the result does not depend on it. ``progress``: progress bar on stderr (default: when
    stderr is a terminal).

    Returns an :class:`AuditResult`; ``passed`` is False iff a violation of the claim is certified
    (``epsilon_lower_bound > epsilon``, equivalently ``delta_lower_bound > delta``)."""
    t0 = time.perf_counter()
    # ---- validate once at the boundary
    if not callable(mechanism):
        raise ParameterError(f"mechanism={mechanism!r:.60} is not callable; pass a catalog Mechanism or fn(data, size, rng).")
    samples = _v.integer("samples", samples, minimum=20)
    seed = _v.integer("seed", seed, minimum=0)
    confidence = float(_v.probability("confidence", confidence, open_left=True, open_right=True))
    max_events = _v.integer("max_events", max_events, minimum=1, maximum=10_000)
    train_fraction = float(_v.probability("train_fraction", train_fraction, open_left=True, open_right=True))
    if not isinstance(vectorized, bool):
        raise ParameterError(f"vectorized={vectorized!r} is not a bool; pass True (fn(data, size, rng)) or False (fn(data)).")
    if not isinstance(ideal_numerics, bool):
        raise ParameterError(f"ideal_numerics={ideal_numerics!r} is not a bool; pass True or False.")
    if progress is not None and not isinstance(progress, bool):
        raise ParameterError(f"progress={progress!r} is not a bool; pass True, False or None (auto).")
    workers = _runner.default_workers() if workers is None else _v.integer("workers", workers, minimum=1)
    name = _mechanism_name(mechanism)
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
            raise ParameterError("vectorized=False is for callables fn(data); catalog mechanisms sample vectorised — drop the argument.")
    else:
        if epsilon is None:
            raise ParameterError("epsilon=None: a callable carries no claim; pass the ε to test, e.g. "
                                 "audit(fn, data, neighbor, epsilon=1.0).")
        delta = 0.0 if delta is None else delta
    epsilon = _check_epsilon(epsilon)
    delta = float(_v.probability("delta", delta, open_right=True))

    train_n = int(min(max(round(samples * train_fraction), min(samples // 2, 2_000)), _TRAIN_MAX))
    cert_n = samples - train_n
    if cert_n < 1 or train_n < 1:
        raise ParameterError(f"samples={samples} leaves no certification samples; pass samples >= 20.")

    notes: list[str] = []
    if catalog:
        pairs, pair_how = _pairs_for_catalog(mechanism, data, neighbor, seed=seed, budget=max(100, min(train_n, 100_000)),
                                             candidate_witnesses=candidate_witnesses, notes=notes)
        spec_fn = mechanism._sample
        sampler = _runner.Sampler(lambda d, n, rng, _f=spec_fn: _f(d, n, rng), name, True)
    else:
        if data is None or neighbor is None:
            raise ParameterError(
                f"data={data!r:.40} / neighbor={neighbor!r:.40}: a callable needs both inputs; pass data and neighbor "
                "(only catalog mechanisms can search pairs)."
            )
        if _same(data, neighbor):
            raise ParameterError(f"data={data!r:.60} and neighbor are identical; pass two inputs that differ (a neighbouring pair).")
        pairs, pair_how = [(data, neighbor)], "given pair"
        sampler = _runner.Sampler(mechanism, name, vectorized)

    show = _runner.progress_enabled(progress)

    # ---- phase 1: training samples, propose and rank events
    chunk_train = _TRAIN_CHUNK if vectorized else _LOOP_CHUNK
    train_bar = _runner.Progress(2 * len(pairs) * math.ceil(train_n / chunk_train), show and not vectorized,
                                 f"training {name}")
    ref = None
    per_pair_props: list[list[tuple[str, Event]]] = []
    trains: list[tuple[np.ndarray, np.ndarray]] = []
    kind = None
    train_used = 0
    for p, (a, b) in enumerate(pairs):
        ta = _runner.draw(sampler, a, train_n, seed=seed, phase=_runner.TRAINING, pair=p, side=0, chunk=chunk_train,
                          ref=ref, label=f"training (data side of pair {p})", progress=train_bar,
                          max_elements=_TRAIN_ELEMENTS)
        ref = _runner.signature(ta)
        tb = _runner.draw(sampler, b, len(ta), seed=seed, phase=_runner.TRAINING, pair=p, side=1, chunk=chunk_train,
                          ref=ref, label=f"training (neighbor side of pair {p})", progress=train_bar)
        kind = _ev.output_kind(ta)
        shifts = _fl.shifts_from_pair(a, b)
        # propose on the first half of the training samples, rank on the second half: ranking on the
        # samples that suggested an event would favour events fitted to noise (e.g. atoms seen once)
        half = len(ta) // 2
        props = _proposals(kind, ta[:half], tb[:half], max_events=max_events, ideal_numerics=ideal_numerics,
                           shifts=shifts, notes=notes, cert_n=cert_n, confidence=confidence)
        per_pair_props.append(props)
        trains.append((ta[half:], tb[half:]))
        train_used = max(train_used, len(ta))

    train_bar.close()
    level_guess = _stats.bonferroni_level(confidence, max_events)
    ranked: list[_Candidate] = []
    for p, props in enumerate(per_pair_props):
        ta, tb = trains[p]
        ranked.extend(_rank(p, props, ta, tb, cert_n=cert_n, level=level_guess, delta=delta))
    chosen = _select(ranked, max_events)
    del trains
    _ev.clear_cache()

    # ---- phase 2: certification on fresh samples
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
    chunk = max(1_000, min(_CHUNK, (4 * _CHUNK) // max(1, row_elems))) if vectorized else _LOOP_CHUNK
    n_tasks = sum(2 * math.ceil(cert_n / chunk) for p in range(len(pairs)) if events_per_pair[p])
    bar = _runner.Progress(n_tasks, show, f"audit {name}")
    use_workers = workers if cert_n * len(pairs) >= 200_000 else 1
    counts = _runner.count_events(sampler, pairs, events_per_pair, seed=seed, total=cert_n, chunk=chunk, ref=ref,
                                  workers=use_workers, progress=bar) if chosen else [[np.zeros(0, np.int64)] * 2 for _ in pairs]
    bar.close()

    m = max(1, len(chosen))
    h1 = np.array([counts[p][0 if c.forward else 1][i] for c, (p, i) in zip(chosen, slot)], dtype=np.int64)
    h0 = np.array([counts[p][1 if c.forward else 0][i] for c, (p, i) in zip(chosen, slot)], dtype=np.int64)
    if chosen:
        eb = _stats.epsilon_lower_bound(h1, cert_n, h0, cert_n, confidence=confidence, delta=delta, candidates=m)
        db = _stats.delta_lower_bound(h1, cert_n, h0, cert_n, epsilon=epsilon if math.isfinite(epsilon) else 0.0,
                                      confidence=confidence, candidates=m) if math.isfinite(epsilon) else None
        eps_lb, best = eb.epsilon, eb.index
        stat_method = eb.method
    else:
        eb = db = None
        eps_lb, best = 0.0, -1
        stat_method = "no candidate events (the outputs did not vary)"
    passed = not (eps_lb > epsilon)

    # ---- the witness and the words
    witness, words, cnt = None, "no event certified a positive lower bound", {}
    if best >= 0:
        c = chosen[best]
        p, i = slot[best]
        a, b = pairs[p]
        num, den = ("data", "neighbor") if c.forward else ("neighbor", "data")
        so = (f"so ε >= ln({eb.p1_low[best]:.4g} / {eb.p0_high[best]:.4g}) = {eps_lb:.4f}" if not delta else
              f"so at δ = {delta:g}, ε >= ln(({eb.p1_low[best]:.4g} - δ) / {eb.p0_high[best]:.4g}) = {eps_lb:.4f}")
        where = "" if len(pairs) == 1 else f" on pair {p} (data={_short(a)}, neighbor={_short(b)})"
        words = (f"S = {{{c.event.description}}}{where}: Pr[M({num}) ∈ S] >= {eb.p1_low[best]:.4g} and "
                 f"Pr[M({den}) ∈ S] <= {eb.p0_high[best]:.4g} (confidence {confidence:g}), {so} (event from {c.source})")
        witness = Witness(data=a, neighbor=b, event=c.event, loss=eps_lb, description=words)
        cnt = {"hits_data": int(counts[p][0][i]), "hits_neighbor": int(counts[p][1][i]),
               "n_data": cert_n, "n_neighbor": cert_n}
    sources = sorted({c.source for c in chosen})
    method = (f"events chosen on {train_used} training samples a side ({', '.join(sources) or 'none'}; pairs: {pair_how}); "
              f"certified on {cert_n} fresh samples a side: {stat_method}")
    extra = {
        "output_kind": kind, "train_samples": train_used, "certification_samples": cert_n,
        "workers": use_workers, "ideal_numerics": ideal_numerics, "proposed_events": sum(len(x) for x in per_pair_props),
        "direction": None if best < 0 else ("data over neighbor" if chosen[best].forward else "neighbor over data"),
        "p1_low": None if best < 0 else float(eb.p1_low[best]), "p0_high": None if best < 0 else float(eb.p0_high[best]),
        "per_event_level": None if eb is None else eb.level,
    }
    if notes:
        extra["notes"] = notes
    if len(pairs) > 1 or pair_how != "given pair":
        extra["pairs"] = [(a, b) for a, b in pairs]
    return AuditResult(
        epsilon_lower_bound=eps_lb, passed=passed, epsilon=epsilon, delta=delta, confidence=confidence,
        samples=samples, seed=seed, method=method, witness=witness, witness_description=words, counts=cnt,
        delta_lower_bound=None if db is None else db.delta, events_tested=len(chosen), pairs_tested=len(pairs),
        elapsed=time.perf_counter() - t0, extra=extra,
    )
