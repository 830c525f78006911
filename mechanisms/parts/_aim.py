"""Pairs aimed at the terms of the bound: for a mechanism declared from parts, the neighbouring pairs
where each term of its privacy account is attained or nearly so, read off the same structure the
sampler executes and the prover walks (STYLE 21: an audit is aimed by the structure).

* a group-by's partition selection: a key held by T − 1 records against T, and T against T + 1
  (:func:`.grouping.selection_pairs`; user-level: :func:`.grouping.user_level_pairs`), and one user at the
  full contribution bounding keeps, its values at the domain's end, against none and against T − 1 other
  users per key (:func:`.grouping.user_level_full_pairs`: the selection's and the parts' terms together);
* a record-wise map followed by clipping (DP-SGD): the *canary*, the record of the declared domain whose
  mapped value (at the iteration's first state) is longest, so that it sits at the clipping norm, added
  to the empty data set (add/remove) or substituted for the record whose mapped value points most the
  other way (substitution);
* an above-threshold (sparse vector): n copies of a domain extreme against n + 1, where n + 1 copies are
  the fewest that carry the first query's answer across the threshold (a multiplicity scan on the exact
  answers), so the threshold's and the queries' terms move the first ⊤ at its most likely;
* a quantile: records on both sides of the quantile's candidates in the proportion α : 1 − α, so every
  candidate between them scores about the best, and one record added between two of them: the
  candidates below it and above it move by Δ in opposite directions, the bound's 2Δ/scale;
* every noise leaf: its extreme pair (:func:`._law.extreme_pairs`, the domain's extremes).

Nothing here is certified and nothing needs to be right for soundness: the auditor validates every pair
with ``input_spec.validate_pair`` (a neighbour pair of the declared relation, inside the declared
records domain) and counts every pair it runs in its union bound. The pairs depend on the structure
only, not on a proof, so an UNPROVEN mechanism is aimed at as well."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpharness.core import AddRemove, IntegerRange, RealBox, Substitute, Witness
from dpharness.errors import DPHarnessError

from ._base import walk_nodes
from ._law import _record_extremes, extreme_pairs, leaves
from .combinators import Iterate
from .grouping import AddRemoveUser, GroupBy, selection_pairs, user_level_full_pairs, user_level_pairs
from .selection import QuantileScore
from .threshold import AboveThreshold, ThresholdLeaf, answer_patterns
from .transformations import ClipNorm, MapRecords

__all__ = ["aimed_pairs"]

_MAX_CANARY_CANDIDATES = 64  # records whose mapped value is computed when looking for the canary
_EXTREME_PAIRS = 2  # extreme pairs of the noise leaves kept
_SCAN_MAX = 1 << 16  # copies of a record at most in the above-threshold's multiplicity scan
_SCAN_RECORDS = 4  # domain extremes scanned
_SCAN_INTERIOR = 9  # points between the ends of a one-column domain scanned as well
_RANK_SAMPLES = 100_000  # samples a side an above-threshold's pairs are ranked for (as the audit's training)
_RANK_Z = 2.0  # standard errors taken off each side's probability when ranking
_THRESHOLD_PAIRS = 2  # above-threshold pairs kept
_RANK_WORK = 1 << 24  # terms of one exact law of an above-threshold's answers that ranks pairs, at most
_QUANTILE_SIDE = 10  # records above the candidates in the quantile's pair (below: in proportion α : 1 − α)


def aimed_pairs(m: Any) -> tuple[Witness, ...]:
    """The aimed pairs of a :class:`~._mechanism.PartsMechanism`, most specific term first, each a
    :class:`~dpharness.core.Witness` (``event`` None) whose ``description`` names the term; only pairs
    the mechanism's ``input_spec.validate_pair`` accepts, without duplicates."""
    found: list[tuple[Any, Any, str]] = []
    extremes = _safe(lambda: _record_extremes(m), [])
    if any(type(n) is GroupBy for n in walk_nodes(m.steps)):
        found += _safe(lambda: selection_pairs(m, extremes), [])
        if isinstance(m.relation, AddRemoveUser):
            found += [
                (a, b, f"every term of the user-level bound: {text}")
                for a, b, text in _safe(lambda: user_level_full_pairs(m), [])
            ]
            found += [
                (a, b, "partition selection under add/remove of one user: the keys of one user")
                for a, b in _safe(lambda: user_level_pairs(m), [])
            ]
    found += _safe(lambda: _canary_pairs(m, extremes), [])
    found += _safe(lambda: _threshold_pairs(m, extremes), [])
    found += _safe(lambda: _quantile_pairs(m), [])
    found += [
        (a, b, "the extreme pair of the noise leaves (the records domain's extremes)")
        for a, b in _safe(lambda: extreme_pairs(m), [])[:_EXTREME_PAIRS]
    ]
    out: list[Witness] = []
    for a, b, text in found:
        try:
            pa, pb = m.input_spec.validate_pair(a, b)
        except (DPHarnessError, ValueError, TypeError):
            continue
        if any(_same(pa, w.data) and _same(pb, w.neighbor) for w in out):
            continue
        out.append(Witness(data=pa, neighbor=pb, description=f"aimed at {text}"))
    return tuple(out)


def _safe(build: Any, default: Any) -> Any:
    """What ``build()`` returns, or ``default`` when the structure offers no such pair (aiming is a
    help to the audit: a structure it cannot read is audited on the searched pairs alone)."""
    try:
        return build()
    except (DPHarnessError, ArithmeticError, ValueError, TypeError, IndexError):
        return default


def _same(a: Any, b: Any) -> bool:
    aa, bb = np.asarray(a), np.asarray(b)
    return aa.shape == bb.shape and bool(np.array_equal(aa, bb))


def _canary_pairs(m: Any, extremes: list) -> list[tuple[Any, Any, str]]:
    """For each record-wise map followed by a norm clip: the canary (the domain record whose mapped
    value is longest at the first state of its iteration, so at or beyond the clipping norm when any
    record is) against the empty data set (add/remove), or substituted for the record whose mapped
    value points most the other way (substitution, a data set of one record)."""
    if m.shape != "dataset" or not isinstance(m.relation, (AddRemove, Substitute)):
        return []
    nodes = walk_nodes(m.steps)
    clips = [n for n in nodes if type(n) is ClipNorm]
    maps = [n for n in nodes if type(n) is MapRecords]
    if not clips or not maps or not extremes:
        return []
    cands = np.array([np.asarray(e, dtype=float).reshape(-1) for e in extremes[:_MAX_CANARY_CANDIDATES]])
    if m.space.dim == 1:
        cands = cands.reshape(-1, 1)
    out: list[tuple[Any, Any, str]] = []
    for mr in maps:
        loop = next((it for it in nodes if type(it) is Iterate and any(n is mr for n in walk_nodes(it.part))), None)
        states = None if loop is None else np.tile(loop.init, (len(cands), 1))
        rows = cands if m.space.dim > 1 else cands[:, 0]
        values = np.asarray(mr.apply_rows(rows, states), dtype=float).reshape(len(cands), -1)
        norms = np.linalg.norm(values, axis=1)
        best = int(np.argmax(norms))
        bound = float(clips[0].bound)
        where = "at or beyond" if norms[best] >= bound else "nearest"
        text = (
            f"the clipping norm: the canary {cands[best].tolist()} (its {mr.describe()} value has norm "
            f"{norms[best]:.3g}, {where} clip {bound:g}{' at the first state' if loop is not None else ''})"
        )
        canary = cands[best : best + 1]
        if isinstance(m.relation, AddRemove):
            empty = np.zeros((0, cands.shape[1]))
            a, b = empty, canary
        else:
            other = int(np.argmin(values @ values[best]))
            a, b = cands[other : other + 1], canary
        if m.space.dim == 1:
            a, b = a[:, 0], b[:, 0]
        out.append((a, b, text))
    return out


def _records_of(m: Any, row: np.ndarray, n: int) -> np.ndarray:
    """``n`` copies of the record ``row`` as the mechanism's input (a column for one-column records)."""
    return np.tile(row, (n, 1)) if m.space.dim > 1 else np.full(n, float(row[0]))


def _threshold_pairs(m: Any, extremes: list) -> list[tuple[Any, Any, str]]:
    """For an above-threshold under add/remove or substitution: for each candidate record y (the domain's
    extremes, then points between them) whose copies move a query's answer, the fewest copies n + 1 whose
    answer to that query (the first one they move) reaches the threshold (found on the exact answers by
    doubling, then bisection; the answer is taken to move one way in the number of copies, and y is
    dropped when the scan finds otherwise); then n and n + 1 copies of y, each against itself with one
    candidate record x added, ranked by the exact law of the threshold's output (:class:`ThresholdLeaf`):
    the ε an answer pattern would certify on ``_RANK_SAMPLES`` samples a side (:func:`_projected`).
    Adding y itself moves every query y moves (the threshold's term); adding a record that moves the
    earlier queries and not the last attains the queries' term as well. Under substitution the data sets
    are filled with a record z that moves no answer, else one other than y that leaves y's query as it is
    (to the mechanism's fixed size, else one copy), and x replaces one z. The best ``_THRESHOLD_PAIRS`` are kept."""
    if m.shape != "dataset" or isinstance(m.relation, AddRemoveUser):
        return []
    if not isinstance(m.relation, (AddRemove, Substitute)):
        return []
    if not any(type(n) is AboveThreshold for n in walk_nodes(m.steps)):
        return []

    def leaf(data: np.ndarray) -> ThresholdLeaf:
        found = [lf for lf in leaves(m, data) if isinstance(lf, ThresholdLeaf)]
        if not found:
            raise ValueError("the above-threshold is not reached on this input")
        return found[0]

    records = _scan_records(m, extremes)
    empty = leaf(_records_of(m, records[0], 0))
    single = [leaf(_records_of(m, r, 1)).centres for r in records]  # each record's answers alone
    size = getattr(m, "size", None)
    substitute = isinstance(m.relation, Substitute)
    neutral = None  # substitution: a record that moves no answer, the filler of every data set
    if substitute:
        neutral = next((r for r, c in zip(records, single) if c == empty.centres), None)
    limit = _SCAN_MAX if size is None else int(size) - 1  # copies of y at most (one filler left)

    def held(row: np.ndarray, n: int, z: np.ndarray | None) -> np.ndarray:
        """n copies of ``row``, filled with ``z`` (substitution: to the fixed size, else one copy)."""
        if z is None:
            return _records_of(m, row, n)
        rest = 1 if size is None else int(size) - n
        return np.concatenate([_records_of(m, row, n), _records_of(m, z, rest)])

    def plus(row: np.ndarray, n: int, x: np.ndarray, z: np.ndarray | None) -> np.ndarray:
        """:func:`held` (row, n, z) with ``x`` added (substitution: in place of one filler)."""
        if z is None:
            return np.concatenate([held(row, n, z), _records_of(m, x, 1)])
        rest = 1 if size is None else int(size) - n
        return np.concatenate([_records_of(m, row, n), _records_of(m, x, 1), _records_of(m, z, rest - 1)])

    bases: list[tuple[np.ndarray, int, int, np.ndarray | None]] = []  # (y, copies at the crossing − 1, query, z)
    for row, one in zip(records, single):
        if limit < 1:
            break
        moved = [i for i, (a, b) in enumerate(zip(empty.centres, one)) if a != b]
        if not moved:
            continue
        i, threshold = moved[0], empty.measurement.threshold_units
        up = one[i] > empty.centres[i]
        z = neutral
        if substitute and z is None:  # a record other than y that leaves query i's answer as it is, moving
            # the latest query it can (a filler that moves an earlier query stops the threshold before query i)
            late = [
                (next((j for j, (a, b) in enumerate(zip(empty.centres, c)) if a != b), len(c)), k)
                for k, (r, c) in enumerate(zip(records, single))
                if not np.array_equal(r, row) and c[i] == empty.centres[i]
            ]
            if not late:
                continue
            z = records[max(late, key=lambda t: (t[0], -t[1]))[1]]

        def over(
            n: int, row: np.ndarray = row, i: int = i, up: bool = up, threshold: int = threshold, z: Any = z
        ) -> bool:
            c = leaf(held(row, n, z)).centres[i]
            return c >= threshold if up else c < threshold

        if over(0):
            continue  # no copy already answers above it: the extreme pair is the crossing
        hi = 1
        while not over(hi) and hi < limit:
            hi = min(2 * hi, limit)
        if not over(hi):
            continue
        lo = hi // 2  # over(lo) is False (lo = 0, or an earlier step of the doubling)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if over(mid) else (mid, hi)
        if over(hi - 1) or not over(hi):
            continue
        bases.append((row, hi - 1, i, z))
    scored: list[tuple[float, int, Any, Any, str]] = []
    for row, n0, i, z in bases:
        for n in (n0, n0 + 1):
            if n + 1 > limit:
                continue
            data = held(row, n, z)
            before = leaf(data)
            codes = answer_patterns(before.width, before.measurement.c)
            what = f"{n} copies of {row.tolist()}" + ("" if z is None else f" (filled with {z.tolist()})")
            if not _small_law(before, len(codes)):  # too large to rank: the record itself added, unranked
                text = f"{what} against one more (the above-threshold's threshold, reached at {n0 + 1})"
                scored.append((0.0, len(scored), data, plus(row, n, row, z), text))
                continue
            lp = before.pattern_log_probs(codes)
            for x in records:
                added = plus(row, n, x, z)
                after = leaf(added)
                if after.centres == before.centres:
                    continue
                score = _projected(np.exp(lp), np.exp(after.pattern_log_probs(codes)))
                text = (
                    f"the above-threshold's threshold: {what} (query {i + 1}'s answer crosses the threshold at "
                    f"{n0 + 1}) against them with {x.tolist()} {'added' if z is None else 'in place of one filler'}"
                )
                scored.append((score, len(scored), data, added, text))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [(a, b, text) for _, _, a, b, text in scored[:_THRESHOLD_PAIRS]]


def _projected(p: np.ndarray, q: np.ndarray) -> float:
    """The ε one output pattern would certify between laws ``p`` and ``q`` (either direction) on
    ``_RANK_SAMPLES`` samples a side: ln of (the likelier side's probability less ``_RANK_Z`` standard
    errors) over (the other's plus as many), at best; 0 when none is positive. It ranks pairs as an audit
    can see them: a large ratio on a pattern too rare to be counted ranks low."""
    n = _RANK_SAMPLES

    def low(x: np.ndarray) -> np.ndarray:
        return np.maximum(x - _RANK_Z * np.sqrt(x * (1 - x) / n), 0.0)

    def high(x: np.ndarray) -> np.ndarray:
        return np.minimum(x + _RANK_Z * np.sqrt(x * (1 - x) / n) + 1.0 / n, 1.0)

    with np.errstate(divide="ignore"):
        ratios = np.concatenate([np.log(low(p)) - np.log(high(q)), np.log(low(q)) - np.log(high(p))])
    best = float(np.max(ratios)) if len(ratios) else 0.0
    return max(best, 0.0)


def _small_law(leaf: ThresholdLeaf, patterns: int) -> bool:
    """Whether the exact law of ``leaf``'s ``patterns`` answer patterns is cheap enough to rank pairs by
    (at most ``_RANK_WORK`` terms: patterns x queries x the threshold values it sums over)."""
    t = leaf.measurement
    gaps = [c - t.threshold_units for c in leaf.centres]
    width = max(0, max(gaps)) - min(0, min(gaps)) + 2 * (math.ceil(60 * (float(t.t_rho) + float(t.t_nu))) + 2) + 1
    return patterns * leaf.width * width <= _RANK_WORK


def _scan_records(m: Any, extremes: list) -> list[np.ndarray]:
    """Candidate records for a multiplicity scan: the domain's extremes (at most ``_SCAN_RECORDS``),
    then, for one-column records, ``_SCAN_INTERIOR`` points evenly between its ends (integers on an
    integer domain), each once."""
    rows = [np.asarray(x, dtype=float).reshape(-1) for x in extremes[:_SCAN_RECORDS]]
    if m.space.dim == 1:
        try:
            ends: tuple[float, float] | None = _domain_ends(m)
        except ValueError:
            ends = None
        if ends is not None:
            for v in np.linspace(ends[0], ends[1], _SCAN_INTERIOR + 2)[1:-1]:
                v = float(np.round(v)) if isinstance(m.records, IntegerRange) else float(v)
                rows.append(np.array([v]))
    out: list[np.ndarray] = []
    for r in rows:
        if not any(np.array_equal(r, o) for o in out):
            out.append(r)
    return out


def _quantile_pairs(m: Any) -> list[tuple[Any, Any, str]]:
    """For a quantile score under add/remove: b = ``_QUANTILE_SIDE`` records at the domain's top and the
    fewest a at its bottom with (1 − α)a − αb >= α, so every candidate strictly between them scores about
    the best (−α); against the same with one record added strictly between the first two (and, a second
    pair, the last two) of those candidates: the scores of the candidates below it move by +α and of those
    above it by −(1 − α), the bound's 2Δ/scale between two sets of candidates of which one holds almost
    all the probability (so one event's ratio nears the whole of it). Each record has every column at the value (a
    column step picks it whichever column it reads)."""
    from fractions import Fraction

    if m.shape != "dataset" or not isinstance(m.relation, AddRemove) or isinstance(m.relation, AddRemoveUser):
        return []
    out: list[tuple[Any, Any, str]] = []
    lo, hi = _domain_ends(m)
    for q in (n for n in walk_nodes(m.steps) if type(n) is QuantileScore):
        alpha = q.alpha_exact
        if not 0 < alpha < 1:
            continue
        inside = [float(c) for c in q.candidates if lo < float(c) < hi]
        if len(inside) < 2:
            continue
        spots = []  # (j, x): one record between candidates j and j + 1, at the plateau's two ends
        for j in dict.fromkeys((0, len(inside) - 2)):
            if isinstance(m.records, IntegerRange):
                ints = range(int(np.floor(inside[j])) + 1, int(np.ceil(inside[j + 1])))
                if len(ints):
                    spots.append((j, float(ints[0])))
            else:
                spots.append((j, inside[j] + (inside[j + 1] - inside[j]) / 2))
        b = _QUANTILE_SIDE
        a = math.ceil(alpha * (b + 1) / (1 - alpha))  # exact: alpha is a Fraction
        while (1 - alpha) * a - alpha * b < alpha:
            a += 1
        for j, x in spots:
            if not lo < x < hi:
                continue
            base = [lo] * a + [hi] * b
            rows = np.array(base, dtype=float)
            added = np.append(rows, x)
            if m.space.dim > 1:
                rows, added = np.repeat(rows[:, None], m.space.dim, 1), np.repeat(added[:, None], m.space.dim, 1)
            out.append(
                (
                    rows,
                    added,
                    f"the quantile's candidates: {a} records at {lo:g} and {b} at {hi:g} (every candidate between "
                    f"them scores about the best), one added at {x:g} between candidates {inside[j]:g} and "
                    f"{inside[j + 1]:g} (alpha {Fraction(alpha)})",
                )
            )
    return out


def _domain_ends(m: Any) -> tuple[float, float]:
    """The lowest and highest value of a record's columns: the domain's ends, or where an end is
    unbounded the lowest and highest finite extreme record (a clamp's bounds inside the domain); a
    ValueError when there is none."""
    from ._structure import _domain_bounds

    if isinstance(m.records, RealBox):
        lo, hi = float(m.records.lo), float(m.records.hi)
    else:
        a, b = _domain_bounds(m.records)
        lo, hi = float(a), float(b)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        finite = [float(v) for x in _record_extremes(m) for v in np.asarray(x, dtype=float).reshape(-1)]
        finite = [v for v in finite if np.isfinite(v)]
        lo = lo if np.isfinite(lo) else min(finite, default=math.inf)
        hi = hi if np.isfinite(hi) else max(finite, default=-math.inf)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError("an unbounded records domain with no clamp: no ends to place records at")
    return lo, hi
