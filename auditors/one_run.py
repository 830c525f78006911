"""One-run auditing: an ε lower bound from ONE run of the mechanism (Steinke, Nasr & Jagielski 2023).

Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023
(arXiv:2305.08846). The game:

1. ``m`` canary records; each is included independently with probability 1/2 (the inclusion vector
   ``S`` is drawn from the audit's ``rng``). The mechanism runs ONCE on the base data plus the
   included canaries.
2. A membership score per canary is computed from the output alone (black-box: the final output;
   white-box: every round's release, when the mechanism exposes them).
3. The auditor guesses "in" on the ``k+`` highest scores, "out" on the ``k−`` lowest and abstains on
   the rest: ``r = k+ + k−`` guesses, ``v`` of them correct.

Their main theorem (Section 3): if the mechanism is ε-DP under adding or removing one record, the
number of correct guesses ``W`` is stochastically dominated by ``Binomial(r, e^ε/(1 + e^ε))``; if it is
(ε, δ)-DP, then for every ``v``

    P[W >= v] <= f(v) + 2mδ · max_{1<=i<=v} (f(v−i) − f(v)) / i,    f(v) = P[Binomial(r, e^ε/(1+e^ε)) >= v]

(``f(v−i) − f(v) = P[v−i <= Binomial < v]``; the p-value their appendix computes). The ε lower bound
is the largest ε at which the observed ``v`` is still improbable: ``sup{ε : p(ε) < 1 − confidence}``.
Computed here with scipy's exact binomial probabilities and two refinements that keep it sound:

* the p-value used is ``p(ε; v) = min_{v' <= v} B(ε; v')`` (``B`` the right side above): every
  ``B(ε; v')`` bounds ``P[W >= v] <= P[W >= v']``, and the minimum is non-increasing in ``v``, which
  makes ``P[p(ε₀; W) <= t] <= t`` at the true ε₀ (a valid p-value) even where ``B`` is not;
* ``B(ε; v')`` is non-decreasing in ε when ``2mδ <= 1`` (its derivative in ``q = e^ε/(1+e^ε)`` is at
  least ``r·P[Bin(r−1, q) = v'−1]·(1 − 2mδ/i*) >= 0``), so the set of rejected ε is an interval
  ``[0, ε*)`` and bisection finds its end from below; ``2mδ > 1`` is refused. The computed p-value
  is inflated by a relative 1e-9 plus 1e-12 (floating-point error, in the bound's favour).

Choosing the guess counts: a grid of ``(k+, k−)`` is fixed before the run (default: ``k+ = k− =
⌈f·m/2⌉`` for f in 0.02, 0.05, 0.1, 0.2, 0.5, 1), each is tested at level ``(1 − confidence)/K`` and
the largest bound is reported (a union bound over the K grid points); one pair fixes it without
the union bound.

The guarantee needs: ``S`` independent of everything else, the score a function of the output and
the canaries only, and the claim's relation add/remove-one-record (the theorem's neighbours)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from dpharness import _validate as _v
from dpharness.core import AddRemove, Mechanism, RenyiDP
from dpharness.errors import MechanismError, ParameterError

if TYPE_CHECKING:
    from dpharness.mechanisms.parts import Chain

__all__ = [
    "OneRunBound",
    "OneRunResult",
    "OneRunTarget",
    "one_run_audit",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
]

_METHOD = "one-run audit (Steinke, Nasr & Jagielski 2023, main theorem): exact binomial tail"
_GRID_FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
_REL_MARGIN, _ABS_MARGIN = 1e-9, 1e-12


# --------------------------------------------------------------------------- the statistic (pure)


@dataclass(frozen=True)
class OneRunBound:
    """The ε lower bound from ``correct`` of ``guesses`` guesses on ``m`` canaries: with probability
    >= ``confidence`` over the canaries' inclusion and the mechanism's randomness, a mechanism that is
    (ε, ``delta``)-DP under add/remove has ε >= ``epsilon``. ``p_value``: the p-value at ``epsilon``
    (below ``1 − confidence``; 1.0 when the bound is 0)."""

    epsilon: float
    confidence: float
    m: int
    guesses: int
    correct: int
    delta: float
    p_value: float
    method: str


def _counts(m: Any, guesses: Any, correct: Any) -> tuple[int, int, int]:
    m = _v.integer("m", m, minimum=1)
    r = _v.integer("guesses", guesses, minimum=0)
    if r > m:
        raise ParameterError(f"guesses={r} exceeds m={m}; at most one guess per canary.")
    v = _v.integer("correct", correct, minimum=0)
    if v > r:
        raise ParameterError(f"correct={v} exceeds guesses={r}; pass the number of correct guesses among them.")
    return m, r, v


def _delta(m: int, delta: Any) -> float:
    delta = float(_v.probability("delta", delta, open_right=True))
    if 2 * m * delta > 1:
        raise ParameterError(
            f"delta={delta!r} with m={m}: 2·m·δ = {2 * m * delta:.3g} > 1, where the one-run bound is "
            f"not monotone in ε (and nearly vacuous); pass fewer canaries (m <= {int(1 / (2 * delta))}) "
            "or a smaller delta."
        )
    return delta


def _p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """min over v' <= v of the theorem's bound B(ε; v'), inflated for floating-point error."""
    if v == 0:
        return 1.0
    q = 1.0 / (1.0 + math.exp(-eps)) if eps < 700 else 1.0
    vs = np.arange(1, v + 1)
    from scipy import stats as _st  # here, not at import: scipy.stats costs every audit worker 0.3 s

    tail = _st.binom.sf(vs - 1, r, q)  # f(v') = P[X >= v'], v' = 1..v
    bound = tail
    if delta > 0:
        pmf = _st.binom.pmf(np.arange(0, v), r, q)  # P[X = k], k = 0..v−1
        cum = np.concatenate(([0.0], np.cumsum(pmf)))  # cum[k] = P[X < k]
        # window(v', i) = P[v'−i <= X < v'] = cum[v'] − cum[v'−i], i = 1..v'
        i = np.arange(1, v + 1)
        lo = vs[:, None] - i[None, :]
        valid = lo >= 0
        win = np.where(valid, cum[vs][:, None] - cum[np.clip(lo, 0, None)], 0.0)
        alpha = np.max(np.where(valid, win / i[None, :], 0.0), axis=1)
        bound = tail + 2 * m * delta * alpha
    p = float(np.min(bound))
    return min(1.0, p * (1 + _REL_MARGIN) + _ABS_MARGIN)


def one_run_p_value(m: int, guesses: int, correct: int, epsilon: float, delta: float = 0.0) -> float:
    """P-value of ``correct`` correct guesses among ``guesses`` on ``m`` canaries if the mechanism is
    (``epsilon``, ``delta``)-DP: ``min_{v' <= correct} [f(v') + 2mδ·max_i (f(v'−i) − f(v'))/i]`` with
    ``f(v) = P[Binomial(guesses, e^ε/(1+e^ε)) >= v]`` (Steinke, Nasr & Jagielski 2023, main theorem;
    δ = 0: the binomial tail alone), inflated by a relative 1e-9 + 1e-12 and capped at 1."""
    m, r, v = _counts(m, guesses, correct)
    eps = float(_v.nonnegative("epsilon", epsilon))
    return _p_value(m, r, v, eps, _delta(m, delta))


def one_run_epsilon_lower_bound(
    m: int, guesses: int, correct: int, *, delta: float = 0.0, confidence: float = 0.95
) -> OneRunBound:
    """The largest ε whose p-value (:func:`one_run_p_value`) is below ``1 − confidence`` (bisection to
    1e-6 from below; 0 when even ε = 0 is not rejected). A pure function of the counts."""
    m, r, v = _counts(m, guesses, correct)
    confidence = float(_v.probability("confidence", confidence, open_left=True, open_right=True))
    delta = _delta(m, delta)
    return _bound(m, r, v, delta, 1 - confidence, confidence)


def _bound(m: int, r: int, v: int, delta: float, level: float, confidence: float) -> OneRunBound:
    def p(eps: float) -> float:
        return _p_value(m, r, v, eps, delta)

    method = f"{_METHOD}, δ = {delta:g}" if delta else f"{_METHOD} (pure ε)"
    if p(0.0) >= level:
        return OneRunBound(0.0, confidence, m, r, v, delta, 1.0, method)
    lo, hi = 0.0, 1.0
    while p(hi) < level:  # p(ε) -> P[Bin(r, 1) >= v] = 1 as ε grows: terminates
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        if p(mid) < level:
            lo = mid
        else:
            hi = mid
    return OneRunBound(lo, confidence, m, r, v, delta, p(lo), method)


# --------------------------------------------------------------------------- targets and the audit


@dataclass(frozen=True)
class OneRunTarget:
    """What a one-run audit needs, for a mechanism that is not a ``dp.iterate`` declaration.

    ``run(records, rng)``: one run of the mechanism on the records (the base ``data`` followed by the
    included canaries, an array with the records on the first axis); ``score(output, canaries)``: one
    membership score per canary (shape ``(m,)``; higher = more likely included), computed from the
    output and the canaries only; ``data``: the base records; ``canaries``: the ``m`` canary records;
    ``epsilon``/``delta``: the claim (``claim_source`` says where it was read); ``white_box``: the
    score reads every round's output, not only the final one."""

    run: Callable
    score: Callable
    data: Any
    canaries: Any
    epsilon: float
    delta: float
    name: str = "target"
    claim_source: str = ""
    white_box: bool = False
    description: str = ""


@dataclass(frozen=True)
class OneRunResult:
    """Outcome of :func:`one_run_audit`.

    ``epsilon_lower_bound``: with probability >= ``confidence`` over the inclusion of the canaries and
    the run, at most the true ε (at δ = ``delta``) under add/remove; ``passed``: the bound does not
    exceed the claimed ``epsilon``. ``m`` canaries, ``included`` of them in the run; the reported
    grid point: ``k_plus``/``k_minus`` guesses in/out, ``guesses = k_plus + k_minus``, ``correct``;
    ``grid``: every (k+, k−) tried (each at level (1 − confidence)/len(grid)); ``white_box``: the
    score read every round's output; ``method``: the statistic and the score; ``claim_source``: where
    the claimed ε was read."""

    epsilon_lower_bound: float
    passed: bool
    epsilon: float
    delta: float
    confidence: float
    m: int
    included: int
    guesses: int
    correct: int
    k_plus: int
    k_minus: int
    grid: tuple
    white_box: bool
    method: str
    claim_source: str
    name: str
    elapsed: float = 0.0
    extra: dict = field(default_factory=dict)


def _grid(m: int, guesses: Any) -> tuple[tuple[int, int], ...]:
    if guesses is None:
        ks = sorted({max(1, math.ceil(f * m / 2)) for f in _GRID_FRACTIONS})
        pts = [(k, min(k, m - k)) for k in ks if k <= m]
        return tuple(dict.fromkeys((a, b) for a, b in pts if a + b >= 1))
    if isinstance(guesses, (int, np.integer)) and not isinstance(guesses, bool):
        guesses = [(guesses, guesses)]
    elif isinstance(guesses, tuple) and len(guesses) == 2 and all(isinstance(g, (int, np.integer)) for g in guesses):
        guesses = [guesses]
    try:
        pts = [tuple(g) for g in guesses]
    except TypeError:
        pts = []
    if not pts or any(len(p) != 2 for p in pts):
        raise ParameterError(
            f"guesses={guesses!r:.80} is not k, (k_plus, k_minus) or a list of such pairs; pass e.g. "
            "guesses=[(50, 50), (100, 100)] or leave it out for the default grid."
        )
    out = []
    for kp, km in pts:
        kp = _v.integer("k_plus", kp, minimum=0)
        km = _v.integer("k_minus", km, minimum=0)
        if kp + km < 1 or kp + km > m:
            raise ParameterError(
                f"guesses=({kp}, {km}) makes {kp + km} guesses on m={m} canaries; pass 1 <= k_plus + k_minus <= {m}."
            )
        out.append((kp, km))
    return tuple(dict.fromkeys(out))


def _scores(score: Callable, output: Any, canaries: np.ndarray) -> np.ndarray:
    try:
        s = score(output, canaries)
    except (ParameterError, MechanismError):
        raise
    except Exception as exc:
        raise MechanismError(f"score raised {type(exc).__name__}: {exc}") from exc
    m = len(canaries)
    try:
        arr = np.asarray(s, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(
            f"score returned {type(s).__name__} that is not an array of numbers; score(output, "
            f"canaries) must return one number per canary, shape ({m},)."
        ) from None
    if arr.shape != (m,):
        raise ParameterError(
            f"score returned shape {getattr(arr, 'shape', None)}; score(output, canaries) must return "
            f"one number per canary, shape ({m},)."
        )
    if not np.all(np.isfinite(arr)):
        raise ParameterError("score returned NaN or infinite scores; return finite numbers, one per canary.")
    return arr


def _guess_counts(
    scores: np.ndarray, included: np.ndarray, grid: Sequence[tuple[int, int]], rng: np.random.Generator
) -> list[tuple[int, int, int]]:
    """For each (k+, k−): (k+, k−, correct). Ties are broken by a random order drawn from ``rng``
    (independent of the inclusion vector)."""
    perm = rng.permutation(len(scores))
    order = perm[np.argsort(-scores[perm], kind="stable")]  # highest first
    inc = included[order]
    out = []
    for kp, km in grid:
        correct = int(np.sum(inc[:kp])) + int(np.sum(~inc[len(inc) - km :])) if km else int(np.sum(inc[:kp]))
        out.append((kp, km, correct))
    return out


def _claim(epsilon: Any, delta: Any) -> tuple[float, float]:
    if epsilon is None:
        raise ParameterError("epsilon= is required for this target; pass the claimed ε (e.g. the accountant's).")
    eps = float(_v.nonnegative("epsilon", epsilon))
    d = float(_v.probability("delta", 0.0 if delta is None else delta, open_right=True))
    return eps, d


def one_run_audit(
    target: Any,
    canaries: Any = None,
    *,
    data: Any = None,
    score: Callable | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    guesses: Any = None,
    rng: np.random.Generator,
) -> OneRunResult:
    """One-run audit (Steinke, Nasr & Jagielski 2023): an ε lower bound from a single run.

    ``target``: a mechanism declared from parts whose steps are ``dp.iterate(...)`` (relation
    ``AddRemove()``; the claim is its ``claim``), a :class:`OneRunTarget` (e.g.
    ``dpharness.auditors.libraries.opacus.one_run_training(...)``), or a callable ``fn(records, rng)``
    returning one output (then ``score`` and ``epsilon`` are required).
    ``canaries``: the ``m`` canary records (records of the mechanism's domain); ``data``: the base
    records (the canaries included are appended to them); ``score(output, canaries)``: one score per
    canary (default for a DP-SGD-shaped iterate, see below); ``confidence`` in (0, 1);
    ``guesses``: ``k`` (k+ = k− = k), ``(k+, k−)`` or a list of pairs fixed in advance (default: the
    module's grid), tested under a union bound; ``rng``: all randomness (the inclusion vector, the
    run, ties).

    Default score of a DP-SGD-shaped iterate (``dp.iterate(T, [dp.poisson_sample(q) >>]
    dp.map_records(grad, columns=d) >> dp.clip_norm(C) >> noisy sum, init=θ₀, update=u)``, the noisy
    sum ``dp.sum() >> noise`` for d = 1 or ``dp.compose(*(dp.column(j) >> dp.sum() >> noise for j in
    range(d)))``): with ``output="releases"`` (white-box), the states θ_t are replayed from θ₀ with
    ``update`` on the releases and canary c scores ``Σ_t ⟨clip(grad(θ_t, c)), release_t⟩`` (its clipped
    gradient against each round's noisy gradient sum); with ``output="state"`` (black-box), it scores
    ``⟨θ_T − θ₀, u(θ₀, g_c) − u(θ₀, 0)⟩``, g_c = clip(grad(θ₀, c)): the final displacement against the
    step the canary alone would cause."""
    t0 = time.perf_counter()
    rng = _v.rng("rng", rng)
    confidence = float(_v.probability("confidence", confidence, open_left=True, open_right=True))
    white_box = False
    claim_source = ""
    name = getattr(target, "name", getattr(target, "__name__", "target"))
    if isinstance(target, OneRunTarget):
        for fixed, value in (
            ("canaries", canaries),
            ("data", data),
            ("score", score),
            ("epsilon", epsilon),
            ("delta", delta),
        ):
            if value is not None:
                raise ParameterError(
                    f"{fixed}= is fixed by the target {target.name!r}; build the target with the "
                    f"value you want instead."
                )
        run, score, white_box = target.run, target.score, target.white_box
        canaries, data = np.asarray(target.canaries), np.asarray(target.data)
        eps, dlt = _claim(target.epsilon, target.delta)
        claim_source = target.claim_source
    elif isinstance(target, Mechanism):
        run, default_score, white_box, canaries, data = _parts_target(target, canaries, data)
        if score is None:
            if default_score is None:
                raise ParameterError(
                    f"target={target.name!r} is not a DP-SGD-shaped iterate (see one_run_audit's "
                    "docstring), so there is no default score; pass score(output, canaries)."
                )
            score = default_score
        else:
            from dpharness.mechanisms.parts import Iterate, PartsMechanism  # loaded by _parts_target

            assert isinstance(target, PartsMechanism) and isinstance(target.steps, Iterate)  # _parts_target checked
            white_box = target.steps.output == "releases"
        claim = target.claim
        if epsilon is None:
            if isinstance(claim, RenyiDP):
                raise ParameterError(
                    f"the claim of {target.name!r} is {claim.describe()}; pass epsilon= and delta= "
                    "(an (ε, δ) claim to hold it to)."
                )
            epsilon = claim.epsilon
            claim_source = f"{target.name}'s claim {claim.describe()}"
        if delta is None and not isinstance(claim, RenyiDP):
            delta = claim.delta
        eps, dlt = _claim(epsilon, delta)
    elif callable(target):
        if canaries is None or data is None or score is None:
            raise ParameterError(
                "a callable target needs canaries=, data= and score=; pass all three (or a OneRunTarget)."
            )
        run = target
        canaries, data = _records("canaries", canaries), _records("data", data, allow_empty=True)
        eps, dlt = _claim(epsilon, delta)
    else:
        raise ParameterError(
            f"target={target!r:.80} is not a dp.iterate mechanism, a OneRunTarget or a callable "
            "fn(records, rng); pass one of them."
        )
    if not callable(score):
        raise ParameterError(
            f"score={score!r:.60} is not callable; pass score(output, canaries) -> one score per canary."
        )
    m = len(canaries)
    if m < 1:
        raise ParameterError(f"m={m}: canaries is empty; pass at least one canary record (one-run audits want many).")
    grid = _grid(m, guesses)
    dlt = _delta(m, dlt)

    included = rng.random(m) < 0.5  # S: each canary in with probability 1/2
    records = _join(data, canaries[included])
    output = run(records, rng)
    scores = _scores(score, output, canaries)
    level = (1 - confidence) / len(grid)
    best = None
    for kp, km, correct in _guess_counts(scores, included, grid, rng):
        b = _bound(m, kp + km, correct, dlt, level, confidence)
        if best is None or b.epsilon > best[0].epsilon:
            best = (b, kp, km)
    assert best is not None
    b, kp, km = best
    method = (
        f"{b.method}; guesses on the k+ highest / k− lowest of {m} canary scores "
        f"({'white-box: every round' if white_box else 'black-box: final output'}); "
        + (f"union bound over {len(grid)} (k+, k−)" if len(grid) > 1 else "(k+, k−) fixed in advance")
    )
    return OneRunResult(
        epsilon_lower_bound=b.epsilon,
        passed=b.epsilon <= eps,
        epsilon=eps,
        delta=dlt,
        confidence=confidence,
        m=m,
        included=int(included.sum()),
        guesses=kp + km,
        correct=b.correct,
        k_plus=kp,
        k_minus=km,
        grid=grid,
        white_box=white_box,
        method=method,
        claim_source=claim_source,
        name=str(name),
        elapsed=time.perf_counter() - t0,
        extra={"p_value": b.p_value, "level_per_grid_point": level},
    )


def _records(name: str, value: Any, *, allow_empty: bool = False) -> np.ndarray:
    arr = np.asarray(value, dtype=float) if not isinstance(value, np.ndarray) else value
    if arr.dtype == object or arr.ndim < 1 or (len(arr) == 0 and not allow_empty):
        raise ParameterError(
            f"{name}={value!r:.60} is not an array of records (first axis: records); pass e.g. a "
            "numpy array of shape (records, columns)."
        )
    return arr


def _join(data: np.ndarray, extra: np.ndarray) -> np.ndarray:
    if len(data) == 0:
        return extra.copy()
    if data.shape[1:] != extra.shape[1:]:
        raise ParameterError(
            f"data records have shape {data.shape[1:]} but canaries {extra.shape[1:]}; pass canaries "
            "that are records of the same domain as the data."
        )
    return np.concatenate([data, extra], axis=0)


# --------------------------------------------------------------------------- dp.iterate declarations


def _links(step: Any, chain_type: type[Chain]) -> list:
    if isinstance(step, chain_type):
        return _links(step.first, chain_type) + _links(step.second, chain_type)
    return [step]


def _parts_target(mech: Mechanism, canaries: Any, data: Any):
    from dpharness import parts as dp  # public parts API only

    if not isinstance(mech, dp.PartsMechanism) or not isinstance(mech.steps, dp.Iterate):
        raise ParameterError(
            f"target={mech.name!r} is not declared as dp.mechanism(steps=dp.iterate(...)); pass a "
            "dp.iterate mechanism, a OneRunTarget or a callable fn(records, rng)."
        )
    if not isinstance(mech.relation, AddRemove):
        raise ParameterError(
            f"relation={mech.relation!r}: the one-run theorem bounds add/remove-one-record privacy; "
            "declare relation=AddRemove()."
        )
    if canaries is None or data is None:
        raise ParameterError(
            "canaries= and data= are required: the canary records and the base records (records of "
            f"{mech.records.describe()})."
        )
    canaries = mech.records.validate("canaries", _records("canaries", canaries))
    data = _records("data", data, allow_empty=True)
    if len(data):
        data = mech.records.validate("data", data)
    else:
        data = np.zeros((0, *canaries.shape[1:]))
    if canaries.ndim != 2 and mech.space.dim > 1:
        raise ParameterError(
            f"canaries has shape {canaries.shape}; pass one record of {mech.space.dim} columns per row."
        )

    def run(records: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(mech.sample(records, 1, rng))[0]

    shape = _dpsgd_shape(mech.steps, dp)
    if shape is None:
        return run, None, False, canaries, data
    it, mapping, clip, width = shape
    if it.output == "releases":
        return run, _white_box_score(it, mapping, clip, width), True, canaries, data
    return run, _black_box_score(it, mapping, clip, width), False, canaries, data


def _dpsgd_shape(it: Any, dp: Any):
    """(iterate, map, clip, width) when the round is [poisson_sample >>] map_records >> clip_norm >> a
    noisy per-column sum in column order; else None."""
    links = _links(it.part, dp.Chain)
    if links and isinstance(links[0], dp.PoissonSample):
        links = links[1:]
    if len(links) < 3 or not isinstance(links[0], dp.MapRecords) or not isinstance(links[1], dp.ClipNorm):
        return None
    mapping, clip, tail = links[0], links[1], links[2:]
    sum_type, col_type = type(dp.sum()), type(dp.column(0))
    noise_types = (dp.GridGaussian, dp.GridLaplace)
    d = mapping.columns
    if d == 1 and len(tail) == 2 and type(tail[0]) is sum_type and isinstance(tail[1], noise_types):
        return it, mapping, clip, 1
    if len(tail) == 1 and isinstance(tail[0], dp.Compose) and len(tail[0].parts) == d:
        for j, part in enumerate(tail[0].parts):
            p = _links(part, dp.Chain)
            if not (
                len(p) == 3
                and type(p[0]) is col_type
                and p[0].j == j
                and type(p[1]) is sum_type
                and isinstance(p[2], noise_types)
            ):
                return None
        return it, mapping, clip, d
    return None


def _clipped_grads(mapping: Any, clip: Any, theta: np.ndarray, canaries: np.ndarray, width: int) -> np.ndarray:
    """Each canary's gradient clipped in floats (the score only has to be a function of the output and
    the canaries: the mechanism's exact rational check of the clipped norm is not needed here)."""
    g = np.asarray([mapping.fn(theta, c) for c in canaries], dtype=float).reshape(len(canaries), width)
    bound = float(clip.bound)
    if width == 1 or clip.norm == "linf":
        return np.clip(g, -bound, bound)
    norms = np.linalg.norm(g, ord=1 if clip.norm == "l1" else 2, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return g * np.where(norms > bound, bound / norms, 1.0)[:, None]


def _release_arg(release: np.ndarray, width: int) -> Any:
    return release[0] if width == 1 else release


def _white_box_score(it: Any, mapping: Any, clip: Any, width: int) -> Callable:
    def score(output: Any, canaries: np.ndarray) -> np.ndarray:
        rel = np.asarray(output, dtype=float).reshape(it.times, width)
        theta = np.array(it.init, dtype=float)
        total = np.zeros(len(canaries))
        for t in range(it.times):
            total += _clipped_grads(mapping, clip, theta, canaries, width) @ rel[t]
            theta = np.asarray(it.update(theta, _release_arg(rel[t], width)), dtype=float).reshape(-1)
        return total

    return score


def _black_box_score(it: Any, mapping: Any, clip: Any, width: int) -> Callable:
    def score(output: Any, canaries: np.ndarray) -> np.ndarray:
        theta0 = np.array(it.init, dtype=float)
        moved = np.asarray(output, dtype=float).reshape(-1) - theta0
        g = _clipped_grads(mapping, clip, theta0, canaries, width)
        base = np.asarray(it.update(theta0, _release_arg(np.zeros(width), width)), dtype=float).reshape(-1)
        steps = np.array(
            [np.asarray(it.update(theta0, _release_arg(gi, width)), dtype=float).reshape(-1) - base for gi in g]
        )
        return steps @ moved

    return score
