"""Neighbour search: which pair (D, D') to audit a catalog mechanism on when the user gives none.

Candidates, in this order of precedence:

(a) the witnesses a proof offers (``candidate_witnesses``: :class:`dpharness.core.Witness` values);
(b) the mechanism's own ``example_pair()``;
(c) StatDP's input patterns (Ding, Wang, Wang, Zhang and Kifer, "Detecting Violations of
    Differential Privacy", CCS 2018, Table 1: One Above, One Below, One Above Rest Below, One Below
    Rest Above, Half Half, All Above & All Below, X Shape), read as difference directions for
    vector inputs (scaled to the relation's norm and sensitivity) and as record patterns for data
    sets (records at the domain's extremes added, removed or substituted);
(d) random pairs over the declared record domain and relation from seeded numpy generators: six with
    uniform records, and six more from a stream of their own, whose records for vector and single-record
    inputs sit at one of the domain's representative values (its ends, a middle value, 0 and ±1 on an
    unbounded line) with probability 1/2, where loss usually peaks, and for data sets are uniform (many
    distinct values, so a record substituted or added lands between them). Hypothesis's strategies
    were used here before; their draws mix in constants hypothesis collects from whatever local
    modules the process has loaded (the same seed gave another pair after ``import dpharness.report``),
    they cannot run inside a ``@given`` test, and they wrote a ``.hypothesis/`` folder into the working
    directory; the numpy draws certify as much (12 seeds: median_substitute_bug 1.16 against 1.10 on
    average, svt3 0.76 against 0.78) and cost no import.

Every candidate is checked with ``input_spec.validate_pair``; invalid ones are dropped. Each survivor
is screened cheaply: with the exact law (``mechanism.law``) when there is one (the whole pmf when the
support is finite and small, else the privacy loss ln p_D(y) − ln p_D'(y) evaluated on a few
thousand samples), else on samples alone; the screen is the bound a threshold event on that
evidence would be expected to certify at 10^6 samples a side. Pairs are returned best first.

Deterministic for a seed. The screen only ranks pairs: nothing here is certified, and the driver
counts every returned pair in its union bound.

Callables carry no input spec; :mod:`.pairsearch` searches their declared input space
(``Scalars``, ``Vectors``, ``Datasets``) and shares this module's candidate builders
(:func:`statdp_patterns`, ``_draw_records``, ``_random_pairs``) and threshold screen (``_best``).
"""

from __future__ import annotations

import math
import time
from typing import Any, Iterable

import numpy as np

from dpharness.core import (
    BoundedChange,
    Finite,
    IntegerRange,
    Mechanism,
    RealBox,
    RealInterval,
    Substitute,
    Witness,
)
from dpharness.errors import DPHarnessError, ParameterError

from .vector import _choose_thresholds, _projected

__all__ = ["search_pairs", "statdp_patterns"]

_REF_SAMPLES = 1_000_000  # screens rank pairs by the bound expected at this many samples a side
_Z = 3.0  # normal quantile standing in for the driver's union-bounded level
_MAX_EXACT_SUPPORT = 100_000
# A law slower than this per output (best of three timings on 64 outputs) is too slow for a cheap
# screen (e.g. quadrature per output: ~2 ms); the catalog's vectorised laws take <= ~30 µs. The wide
# margin on both sides keeps the choice, hence the ranking, the same under any machine load.
_SLOW_LAW_SECONDS = 3e-4
_LAW_OUTPUTS = 4_000  # outputs a side on which the screen evaluates a law, at most

# StatDP's patterns as difference directions on a vector of length d (Ding et al. 2018, Table 1)
_PATTERNS = (
    "one above",
    "one below",
    "one above rest below",
    "one below rest above",
    "half half",
    "all above",
    "all below",
    "x shape",
)


def search_pairs(
    mechanism: Mechanism,
    *,
    seed: int,
    budget: int = 40_000,
    candidate_witnesses: Iterable[Any] = (),
    max_pairs: int = 5,
) -> list[tuple[Any, Any]]:
    """A handful of neighbouring pairs ``(data, neighbor)`` of ``mechanism``, most promising first.

    ``seed``: makes the random candidates and the screening samples reproducible. ``budget``: the
    number of mechanism samples the screen may draw in all (both sides, every candidate).
    ``candidate_witnesses``: proof witnesses (``Witness`` or ``(data, neighbor)`` tuples), tried
    first. Every returned pair satisfies ``mechanism.input_spec.validate_pair``."""
    if not isinstance(mechanism, Mechanism):
        raise ParameterError(
            f"mechanism={mechanism!r:.80} is not a catalog Mechanism; pass data and "
            "neighbor explicitly to audit a plain callable."
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ParameterError(f"seed={seed!r} is not an int; pass an integer seed.")
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 100:
        raise ParameterError(f"budget={budget!r} must be an int >= 100; pass e.g. budget=40_000.")
    if isinstance(max_pairs, bool) or not isinstance(max_pairs, (int, np.integer)) or max_pairs < 1:
        raise ParameterError(f"max_pairs={max_pairs!r} must be a positive int; pass e.g. max_pairs=5.")
    rng = np.random.default_rng(int(seed))
    spec = mechanism.input_spec
    candidates = _valid_unique(spec, _candidates(mechanism, rng, candidate_witnesses))
    if not candidates:
        raise ParameterError(
            f"no valid neighbouring pair found for {mechanism.name}; pass data and neighbor explicitly."
        )
    per = max(50, int(budget) // (2 * len(candidates)))
    state = {"law": True}  # turned off when the exact law is too slow to evaluate for a cheap screen
    scores = []
    for i, (a, b, origin) in enumerate(candidates):
        try:
            s = _screen(mechanism, a, b, per, np.random.default_rng([int(seed), i]), state)
        except (DPHarnessError, ArithmeticError, ValueError, TypeError, MemoryError):
            s = -math.inf  # a pair the screen cannot judge goes last; the audit itself reports real errors
        # a proof witness or the example pair keeps a small head start on ties
        bonus = {"witness": 2e-3, "example": 1e-3}.get(origin, 0.0)
        scores.append(s + bonus if math.isfinite(s) else s)
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
    return [(candidates[i][0], candidates[i][1]) for i in order[:max_pairs]]


# --------------------------------------------------------------------------- candidates


def _candidates(mech: Mechanism, rng: np.random.Generator, witnesses) -> list[tuple[Any, Any, str]]:
    out: list[tuple[Any, Any, str]] = []
    for w in witnesses:
        if isinstance(w, Witness):
            out.append((w.data, w.neighbor, "witness"))
        elif isinstance(w, tuple) and len(w) == 2:
            out.append((w[0], w[1], "witness"))
    try:
        a, b = mech.example_pair()
        out.append((a, b, "example"))
        example = a
    except (DPHarnessError, NotImplementedError):
        example = None
    spec = mech.input_spec
    out += [(a, b, "pattern") for a, b in statdp_patterns(spec, example=example)]
    own = np.random.default_rng(int(rng.integers(2**31)))  # the second six: a stream of their own
    draw = None if spec.shape == "dataset" else _boundary_records
    out += [(a, b, "boundary-weighted") for a, b in _random_pairs(spec, own, 6, example, draw=draw)]
    out += [(a, b, "random") for a, b in _random_pairs(spec, rng, 6, example)]
    return out


def _valid_unique(spec, cands) -> list[tuple[Any, Any, str]]:
    seen, out = set(), []
    for a, b, origin in cands:
        try:
            a, b = spec.validate_pair(a, b)
        except (DPHarnessError, ValueError, TypeError):
            continue
        key = (_key(a), _key(b))
        if key in seen or key[::-1] in seen:
            continue
        seen.add(key)
        out.append((a, b, origin))
    return out


def _key(x) -> tuple:
    arr = np.asarray(x)
    return (arr.shape, tuple(arr.ravel().tolist()))


def _levels(domain) -> list:
    """A few representative record values of a domain: its extremes and a middle value."""
    if isinstance(domain, Finite):
        return list(domain.values)
    if isinstance(domain, IntegerRange):
        ilo, ihi = int(domain.lo), int(domain.hi)
        vals = [ilo, ihi, (ilo + ihi) // 2, min(ilo + 1, ihi), max(ihi - 1, ilo)]
        return list(dict.fromkeys(vals))
    if isinstance(domain, RealBox):
        lo, hi, d = float(domain.lo), float(domain.hi), domain.dim
        return [
            np.full(d, lo),
            np.full(d, hi),
            np.full(d, (lo + hi) / 2),
            np.array([hi if i % 2 == 0 else lo for i in range(d)]),
            np.array([lo if i % 2 == 0 else hi for i in range(d)]),
        ]
    if isinstance(domain, RealInterval):
        lo, hi = float(domain.lo), float(domain.hi)
        if math.isfinite(lo) and math.isfinite(hi):
            return [lo, hi, (lo + hi) / 2]
        if math.isfinite(lo):
            return [lo, lo + 1.0, lo + 10.0]
        if math.isfinite(hi):
            return [hi, hi - 1.0, hi - 10.0]
        return [0.0, 1.0, -1.0, 10.0]
    return list(domain.extremes())


def statdp_patterns(spec, *, example=None) -> list[tuple[Any, Any]]:
    """StatDP's patterns adapted to an input spec (unvalidated: callers filter with ``validate_pair``)."""
    if spec.shape == "record":
        vals = _levels(spec.domain)
        if isinstance(spec.domain, Finite) and len(vals) > 8:
            vals = vals[:2] + vals[-2:]
        return [(x, y) for i, x in enumerate(vals) for y in vals[i + 1 :]]
    if spec.shape == "vector":
        return _vector_patterns(spec, example)
    return _dataset_patterns(spec, example)


def _direction(name: str, d: int) -> tuple[np.ndarray, np.ndarray]:
    """(base offset pattern, difference direction) with entries in {-1, 0, 1}."""
    h = max(1, d // 2)
    zero = np.zeros(d)
    if name == "one above":
        v = zero.copy()
        v[0] = 1
        return zero, v
    if name == "one below":
        v = zero.copy()
        v[0] = -1
        return zero, v
    if name == "one above rest below":
        v = -np.ones(d)
        v[0] = 1
        return zero, v
    if name == "one below rest above":
        v = np.ones(d)
        v[0] = -1
        return zero, v
    if name == "half half":
        v = -np.ones(d)
        v[:h] = 1
        return zero, v
    if name == "all above":
        return zero, np.ones(d)
    if name == "all below":
        return zero, -np.ones(d)
    # x shape: D = [1..1, 0..0], D' = [0..0, 1..1]
    base = zero.copy()
    base[:h] = 1
    other = zero.copy()
    other[h:] = 1
    return base, other - base


def _vector_patterns(spec, example) -> list[tuple[Any, Any]]:
    rel: BoundedChange = spec.relation
    sens = float(rel.sensitivity)
    d = spec.dim or (len(np.asarray(example)) if example is not None and np.ndim(example) == 1 else 5)
    integral = isinstance(spec.domain, (IntegerRange, Finite))
    out = []
    bases = [sens, 0.0]
    if isinstance(spec.domain, (IntegerRange, RealInterval)):
        lo, hi = float(spec.domain.lo), float(spec.domain.hi)
        bases = [
            min(max(c, lo + (sens if math.isfinite(lo) else 0)), hi - (sens if math.isfinite(hi) else 0)) for c in bases
        ]
    for c in dict.fromkeys(bases):
        for name in _PATTERNS:
            base, diff = _direction(name, d)
            norm = {"l1": np.abs(diff).sum(), "l2": math.sqrt(float((diff * diff).sum())), "linf": np.abs(diff).max()}[
                rel.norm
            ]
            step = diff * sens / norm
            if integral:
                step = np.trunc(step)
                if not np.any(step):
                    continue
            a = c + base * sens
            b = a + step
            if integral:
                a, b = a.astype(np.int64), b.astype(np.int64)
            out.append((a, b))
    return out


def _dataset_patterns(spec, example) -> list[tuple[Any, Any]]:
    levels = _levels(spec.domain)
    lo, hi = levels[0], levels[1]
    mid = levels[2] if len(levels) > 2 else levels[0]
    n = spec.size or (len(example) if example is not None and np.ndim(example) >= 1 and len(example) > 0 else 4)
    h = max(1, n // 2)

    def ds(rows):
        return np.array(rows, dtype=np.asarray(lo).dtype) if len(rows) else np.empty((0,) + np.shape(lo))

    bases = {
        "all low": [lo] * n,
        "all high": [hi] * n,
        "all middle": [mid] * n,
        "half half": [lo] * h + [hi] * (n - h),
    }
    out = []
    if isinstance(spec.relation, Substitute):
        for rows in bases.values():
            for new in (lo, hi, mid):
                for i in (0, n - 1):
                    if not np.array_equal(np.asarray(rows[i]), np.asarray(new)):
                        changed = list(rows)
                        changed[i] = new
                        out.append((ds(rows), ds(changed)))
        return out
    out += [(ds([]), ds([r])) for r in (lo, hi, mid)]
    for rows in bases.values():
        for new in (lo, hi, mid):
            out.append((ds(rows), ds(rows + [new])))
    return out


def _draw_records(domain, rng: np.random.Generator, n: int):
    if isinstance(domain, Finite):
        vals = np.asarray(domain.values)
        return vals[rng.integers(0, len(vals), size=n)]
    if isinstance(domain, IntegerRange):
        return rng.integers(int(domain.lo), int(domain.hi), size=n, endpoint=True)
    if isinstance(domain, RealBox):
        return rng.uniform(float(domain.lo), float(domain.hi), size=(n, domain.dim))
    if isinstance(domain, RealInterval):
        lo, hi = float(domain.lo), float(domain.hi)
        if math.isfinite(lo) and math.isfinite(hi):
            return rng.uniform(lo, hi, size=n)
        return np.clip(np.round(rng.normal(0.0, 5.0, size=n), 3), lo, hi)
    return np.asarray(domain.extremes())[rng.integers(0, len(domain.extremes()), size=n)]


def _boundary_records(domain, rng: np.random.Generator, n: int):
    """``n`` records as :func:`_draw_records` draws them, each replaced with probability 1/2 by one of
    the domain's representative values (:func:`_levels`: its ends and a middle value)."""
    draws = np.array(_draw_records(domain, rng, n), copy=True)
    levels = _levels(domain)
    at = np.flatnonzero(rng.random(n) < 0.5)
    for i, j in zip(at.tolist(), rng.integers(0, len(levels), size=len(at)).tolist()):
        draws[i] = levels[j]
    return draws


def _random_pairs(spec, rng: np.random.Generator, count: int, example, draw=None) -> list[tuple[Any, Any]]:
    """``count`` random neighbouring pairs of ``spec``'s shape; records from ``draw`` (default
    :func:`_draw_records`)."""
    draw = _draw_records if draw is None else draw
    out = []
    for _ in range(count):
        if spec.shape == "record":
            x, y = draw(spec.domain, rng, 2)
            out.append((x.item() if np.ndim(x) == 0 else x, y.item() if np.ndim(y) == 0 else y))
        elif spec.shape == "vector":
            rel: BoundedChange = spec.relation
            d = spec.dim or (len(np.asarray(example)) if example is not None and np.ndim(example) == 1 else 5)
            a = draw(spec.domain, rng, d)
            if isinstance(spec.domain, (IntegerRange, Finite)):
                step = np.zeros(d, np.int64)
                step[rng.integers(0, d)] = rng.choice([-1, 1]) * max(1, int(float(rel.sensitivity)))
            else:
                step = rng.normal(size=d)
                norm = {"l1": np.abs(step).sum(), "l2": np.linalg.norm(step), "linf": np.abs(step).max()}[rel.norm]
                step = step * float(rel.sensitivity) / norm
            out.append((a, a + step))
        else:
            n = spec.size or int(rng.integers(1, 9))
            a = draw(spec.domain, rng, n)
            new = draw(spec.domain, rng, 1)
            if isinstance(spec.relation, Substitute):
                b = a.copy()
                b[int(rng.integers(0, n))] = new[0]
                out.append((a, b))
            else:
                out.append((a, np.concatenate([a, new])))
    return out


# --------------------------------------------------------------------------- screening


def _screen(mech: Mechanism, a, b, n: int, rng: np.random.Generator, state: dict | None = None) -> float:
    """Bound a likelihood-ratio threshold event on (a, b) is expected to certify at 10^6 samples a side."""
    state = {"law": True} if state is None else state
    law_a = law_b = None
    if state["law"]:
        try:
            law_a, law_b = _law_of(mech, a, state), _law_of(mech, b, state)
        except (DPHarnessError, NotImplementedError, ArithmeticError, ValueError, TypeError):
            law_a = law_b = None  # no usable exact law: screen on samples
    if law_a is not None and law_b is not None:  # set together
        sup_a, sup_b = law_a.support(), law_b.support()
        if sup_a is not None and sup_b is not None and len(sup_a) + len(sup_b) <= _MAX_EXACT_SUPPORT:
            return _screen_exact(law_a, law_b, sup_a, sup_b)
    xa = np.asarray(mech.sample(a, n, rng))
    xb = np.asarray(mech.sample(b, n, rng))
    if law_a is not None:
        # probe the law's speed: a law evaluated by quadrature per output would make a cheap screen
        # slow, and the samples alone rank pairs well enough
        try:
            per_output = _law_seconds_per_output(law_a, xa)
        except (DPHarnessError, NotImplementedError, ArithmeticError, ValueError, TypeError):
            law_a = None
        else:
            if per_output > _SLOW_LAW_SECONDS:
                state["law"] = False
                law_a = None
    if law_a is not None and law_b is not None:  # law_b is set whenever law_a is
        try:
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                xa_l, xb_l = xa[:_LAW_OUTPUTS], xb[:_LAW_OUTPUTS]
                la = law_a.log_prob(xa_l) - law_b.log_prob(xa_l)
                lb = law_a.log_prob(xb_l) - law_b.log_prob(xb_l)
        except (DPHarnessError, NotImplementedError, ArithmeticError, ValueError, TypeError):
            la = lb = None  # the law cannot be evaluated here: fall back to the samples alone
        if la is not None:
            la = np.nan_to_num(la, nan=0.0, posinf=1e6, neginf=-1e6)
            lb = np.nan_to_num(lb, nan=0.0, posinf=1e6, neginf=-1e6)
            return _best(la, lb)
    if xa.ndim == 1 and np.issubdtype(xa.dtype, np.number):
        return _best(xa.astype(float), xb.astype(float))
    if xa.ndim == 2 and np.issubdtype(xa.dtype, np.number):
        # cheap: each coordinate alone, and the projection on the difference of the means
        fa, fb = xa.astype(float), xb.astype(float)
        sd = np.sqrt((fa.var(axis=0) + fb.var(axis=0)) / 2)
        sd[sd == 0] = 1.0
        direction = (fa.mean(axis=0) - fb.mean(axis=0)) / sd**2
        best = _best(fa @ direction, fb @ direction)
        for j in range(min(fa.shape[1], 32)):
            best = max(best, _best(fa[:, j], fb[:, j]))
        return best
    # hashable non-numeric outputs: exact histogram on the samples
    keys: dict[str, list[int]] = {}
    for side, xs in ((0, xa), (1, xb)):
        for x in xs:
            k = repr(x)
            keys.setdefault(k, [0, 0])[side] += 1
    ca = np.array([v[0] for v in keys.values()], float)
    cb = np.array([v[1] for v in keys.values()], float)
    return _best_cumulative(ca / n, cb / n, n)


def _law_of(mech: Mechanism, data, state: dict):
    """``mech.law(data)``, computed once per distinct input of a search (candidates share inputs, and
    some laws take a quadrature per call)."""
    cache = state.setdefault("laws", {})
    key = _key(data)
    if key not in cache:
        cache[key] = mech.law(data)
    return cache[key]


def _law_seconds_per_output(law, outputs: np.ndarray) -> float:
    """Best of up to three timings of ``law.log_prob`` on up to 64 outputs, per output (a busy machine
    only makes a timing slower, so the first one under the limit settles it)."""
    probe = outputs[:64]
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        law.log_prob(probe)
        best = min(best, (time.perf_counter() - t0) / max(1, len(probe)))
        if best <= _SLOW_LAW_SECONDS:
            break
    return best


def _bound(pa: float, pb: float, n_screen: int) -> float:
    n_eff = 1.0 / (1.0 / _REF_SAMPLES + 1.0 / n_screen)
    vals = [
        _projected(np.array([pa]), np.array([pb]), n_eff, _Z)[0],
        _projected(np.array([pb]), np.array([pa]), n_eff, _Z)[0],
    ]
    return max(0.0, max(vals))


def _best(sa: np.ndarray, sb: np.ndarray) -> float:
    choices = _choose_thresholds(sa, sb, _REF_SAMPLES, _Z)
    return max([c.value for c in choices], default=0.0)


def _screen_exact(law_a, law_b, sup_a, sup_b) -> float:
    outcomes = list({_row(o): o for o in list(sup_a) + list(sup_b)}.values())
    arr = np.asarray(outcomes)
    pa = np.exp(law_a.log_prob(arr))
    pb = np.exp(law_b.log_prob(arr))
    return _best_cumulative(pa, pb, None)


def _row(o) -> tuple:
    return tuple(np.atleast_1d(np.asarray(o)).ravel().tolist())


def _best_cumulative(pa: np.ndarray, pb: np.ndarray, n_screen: int | None) -> float:
    """Best projected bound over the sets of outcomes of highest likelihood ratio (either direction)."""
    n_eff = _REF_SAMPLES if n_screen is None else 1.0 / (1.0 / _REF_SAMPLES + 1.0 / n_screen)
    best = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        lr = np.log(pa) - np.log(pb)
    lr = np.nan_to_num(lr, nan=0.0)
    for num, den, key in ((pa, pb, -lr), (pb, pa, lr)):
        order = np.argsort(key, kind="stable")
        cn, cd = np.cumsum(num[order]), np.cumsum(den[order])
        cn, cd = np.clip(cn, 0, 1), np.clip(cd, 0, 1)
        vals = _projected(cn, cd, n_eff, _Z)
        vals[(cn >= 1 - 1e-12) & (cd >= 1 - 1e-12)] = -np.inf
        if len(vals):
            best = max(best, float(np.max(vals)))
    return best
