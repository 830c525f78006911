"""Shared steps of the simple mechanisms' proofs: judging a derived pure-DP bound against the claim
(with an exactly confirmed counterexample when it fails and the bound is attained), and checking
that the mechanism's own ``law`` agrees with the model pmf the derivation is about.

(ε', δ) claims below a pure bound: pure ε-DP alone only gives δ(ε') <= 1 − e^{ε'−ε}-type bounds,
which are not tight. Where the privacy-loss distribution of a dominating pair is known in closed
form, :func:`judge_pure` takes a *profile* and judges δ(ε') exactly (hockey-stick divergence of the
dominating pair, with the dominance argument as obligations):

* :class:`LaplaceProfile`: 1-D discrete Laplace on a grid (Ghosh, Roughgarden & Sundararajan 2009;
  the grid Laplace of ``laplace``, ``discrete_laplace``, single-statistic ``clamped_*``). The loss is
  monotone in the output (monotone likelihood ratio), so by Neyman–Pearson the optimal event is a
  half-line, δ(ε') = max_t F(t) − e^{ε'} F(t − k) for centres k grid steps apart, nondecreasing in
  k: the pair at the derived maximal distance K dominates every neighbouring pair.
* :class:`RandomizedResponseProfile`: k-ary randomized response (Kairouz, Oh & Viswanath 2014): every
  pair x ≠ x' has the same law up to relabelling, δ(ε') = (e^L − e^{ε'})/(e^L + k − 1) for ε' < L.
* :class:`FiniteProfile`: a mechanism with finitely many inputs and outputs and exact probabilities:
  δ(ε') is the maximum over every ordered neighbouring pair, enumerated exactly."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import sympy as sp

from dpharness.core import ApproxDP, Event, PureDP, RenyiDP, Witness, exact

from ._kernel import ProofBuilder, confirm_violation, discharge, exact_sign, exceeds, sym
from ._model import Obligation

__all__ = [
    "judge_pure",
    "check_law",
    "check_law_ratio",
    "fmt",
    "LaplaceProfile",
    "RandomizedResponseProfile",
    "FiniteProfile",
]


def fmt(value: Any) -> str:
    """A short rendering of an exact value for statements."""
    return str(sp.nsimplify(value)) if not isinstance(value, sp.Basic) else str(value)


def judge_pure(
    pb: ProofBuilder,
    bound: sp.Expr,
    *,
    p: sp.Expr,
    q: sp.Expr,
    data: Any,
    neighbor: Any,
    output: Any = None,
    event: Event | None = None,
    description: str = "",
    profile: "LaplaceProfile | RandomizedResponseProfile | FiniteProfile | None" = None,
) -> Witness:
    """Compare the derived worst-case pointwise loss ``bound`` (attained at ``output``/``event`` with
    exact probabilities ``p`` = P_D(S), ``q`` = P_D'(S)) with the mechanism's claim.

    PureDP(ε): obligation bound <= ε; when the bound exceeds ε and the attaining event violates
    P_D(S) <= e^ε P_D'(S) by exact evaluation, the proof is REFUTED with that witness.
    ApproxDP(ε, δ): pure ε'-DP with ε' <= ε implies it. Otherwise, with a ``profile`` (the closed-form
    privacy-loss distribution of a dominating pair, see the module docstring; for k-ary randomized
    response it is found by the mechanism's type), δ(ε) is computed exactly and compared with δ
    (REFUTED on the attaining event when it exceeds δ); without one the claim is UNPROVEN with a
    note that only a pure bound is known (and REFUTED if the attaining event violates it).
    RenyiDP(α, ε): D_α <= D_∞ = bound (Rényi divergences increase in α), so bound <= ε proves it;
    otherwise UNPROVEN (no exact D_α computed here)."""
    bound = sp.sympify(bound)
    p, q = sp.sympify(p), sp.sympify(q)
    loss = sp.oo if exact_sign(q) == 0 else sp.log(p) - sp.log(q)
    if isinstance(output, np.generic):
        output = output.item()
    if event is None and output is not None:
        event = Event.point(tuple(output.tolist()) if isinstance(output, np.ndarray) else output)
    witness = Witness(
        data=data,
        neighbor=neighbor,
        event=event,
        output=output,
        loss=float(sp.N(loss, 20)),
        description=description or "attains the derived bound",
    )
    # tightness (a note, not an obligation: soundness of PROVED does not depend on it; a refutation
    # below rests on the witness's own exact probabilities, never on the bound)
    if loss is sp.oo or bound is sp.oo:
        attained = loss is sp.oo and bound is sp.oo
    else:
        attained = exact_sign(loss - bound) == 0
    pb.note(
        f"witness: ln P_D(S) - ln P_D'(S) = {float(sp.N(loss, 15)) if loss is not sp.oo else 'inf'} "
        + (
            "attains the derived bound exactly (the bound is tight)"
            if attained
            else f"(the derived bound is {float(sp.N(bound, 15)) if bound is not sp.oo else 'inf'})"
        )
    )
    claim = pb.claim
    if isinstance(claim, PureDP):
        eps = exact(claim.epsilon)
        pb.claim_bound(bound)
        if exceeds(bound, eps) and confirm_violation(p, q, eps):
            assert event is not None  # a refuting caller gives the event or its output
            pb.refute(witness, f"P_D(S) = {fmt(p)} > e^{fmt(eps)} · {fmt(q)} = e^ε P_D'(S) for S = {event.description}")
    elif isinstance(claim, ApproxDP):
        eps, delta = exact(claim.epsilon), exact(claim.delta)
        if profile is None:
            profile = _profile_by_type(pb.mechanism)
        if profile is not None and exceeds(bound, eps):
            pb.note(
                f"the derived pure bound ε = {fmt(bound)} exceeds the claimed ε = {fmt(eps)}: judging δ(ε) with the "
                "exact privacy profile of a dominating pair"
            )
            refutation = profile.judge(pb, bound, eps, delta, data=data, neighbor=neighbor)
            if refutation is not None:
                pb.refute(*refutation, delta_checked=True)
        else:
            pb.note("pure DP with the derived ε implies (ε, δ)-DP for every δ >= 0")
            pb.claim_bound(bound)
            if exceeds(bound, eps):
                pb.note(
                    "only a pure-DP bound is known for this mechanism (no exact (ε, δ) profile of a dominating "
                    "pair is derived), so an (ε, δ) claim with ε below the pure bound is not proved"
                )
                if confirm_violation(p, q, eps, delta):
                    assert event is not None  # a refuting caller gives the event or its output
                    pb.refute(
                        witness, f"P_D(S) = {fmt(p)} > e^ε P_D'(S) + δ for S = {event.description}", delta_checked=True
                    )
    elif isinstance(claim, RenyiDP):
        pb.note("D_α <= D_∞ (Rényi divergence is nondecreasing in α), so the pure bound bounds the RDP ε")
        pb.claim_bound(bound, exact(claim.epsilon))
    else:  # pragma: no cover - Claim has three kinds
        pb.note(f"claim type {type(claim).__name__} not handled")
    return witness


def check_law(
    pb: ProofBuilder,
    mechanism: Any,
    inputs: Iterable[Any],
    outputs_of: Callable[[Any], list],
    model: Callable[[Any, Any], sp.Expr],
    *,
    rel_tol: float = 1e-9,
) -> bool:
    """The mechanism's own ``law(x)`` agrees with the model pmf at every listed (input, output).

    Exact comparison when the law's probabilities are exact sympy/Fraction values; otherwise the
    float log-probabilities are compared (recorded as a note: "checked numerically"). A mismatch
    adds an undischarged obligation (the proof is about the model, and the model is not the code)."""
    all_exact, mismatch, n = True, [], 0
    for x in inputs:
        law = mechanism.law(x)
        outs = outputs_of(x)
        table = None
        if getattr(law, "probs", None) is not None and getattr(law, "outcomes", None) is not None:
            table = {tuple(np.atleast_1d(np.asarray(o)).tolist()): pr for o, pr in zip(law.outcomes, law.probs)}
        logp = law.log_prob(np.asarray(outs))
        for i, y in enumerate(outs):
            n += 1
            m = sp.sympify(model(x, y))
            pr = None if table is None else table.get(tuple(np.atleast_1d(np.asarray(y)).tolist()), 0)
            if pr is not None and _is_exact(pr):
                if exact_sign(exact(pr) - m) != 0:
                    mismatch.append((x, y))
                continue
            all_exact = False
            mv = float(sp.N(m, 30))
            lv = float(logp[i])
            ok = lv == -math.inf if mv == 0 else abs(lv - math.log(mv)) <= rel_tol * max(1.0, abs(math.log(mv)))
            if not ok:
                mismatch.append((x, y))
    if mismatch:
        pb.evaluate(
            f"mechanism.law agrees with the model pmf (fails at (input, output) = {mismatch[0]!r})",
            sp.false,
            "the implementation's law differs from the model the derivation is about",
        )
        return False
    if all_exact:
        pb.evaluate(
            f"mechanism.law agrees exactly with the model pmf at {n} (input, output) pairs",
            sp.true,
            "exact comparison of the law's probabilities",
        )
    else:
        pb.note(
            f"checked numerically: mechanism.law matches the model pmf at {n} (input, output) pairs "
            f"(rel. tol {rel_tol:g}; the law's probabilities are floats)"
        )
    return True


def _is_exact(v: Any) -> bool:
    return (
        isinstance(v, (int, np.integer, Fraction))
        and not isinstance(v, bool)
        or (isinstance(v, sp.Basic) and not v.has(sp.Float))
    )


def check_law_ratio(
    pb: ProofBuilder, mechanism: Any, data: Any, neighbor: Any, output: Any, expected: sp.Expr, *, tol: float = 1e-9
) -> bool:
    """The mechanism's own law gives the model's log-ratio at the witness output (float check, a note;
    a mismatch is an undischarged obligation: the proof is about the model, and the model is not the code)."""
    out = np.asarray(output, dtype=float)
    rows = out.reshape(1, -1) if out.ndim else out.reshape(1)
    got = float(mechanism.law(data).log_prob(rows)[0] - mechanism.law(neighbor).log_prob(rows)[0])
    want = float(sp.N(expected, 30))
    if abs(got - want) <= tol * max(1.0, abs(want)):
        pb.note(
            f"checked numerically: mechanism.law gives ln P_D(y) - ln P_D'(y) = {got:.12g} at the witness, "
            f"as the model does ({want:.12g})"
        )
        return True
    pb.evaluate(
        f"mechanism.law agrees with the model at the witness (law {got!r}, model {want!r})",
        sp.false,
        "the implementation's law differs from the model the derivation is about",
    )
    return False


# --------------------------------------------------------------------------- (ε', δ) from exact privacy profiles


def _profile_by_type(mechanism: Any) -> "RandomizedResponseProfile | None":
    """The profile of a mechanism whose proof does not pass one, found by the mechanism's type
    (k-ary randomized response: its law is fixed by ``k`` and ``log_odds``)."""
    from dpharness.mechanisms.randomized_response import RandomizedResponse

    if isinstance(mechanism, RandomizedResponse):
        return RandomizedResponseProfile(int(mechanism.k), exact(mechanism.log_odds))
    return None


def _structural(statement: str, justification: str) -> Obligation:
    return Obligation(statement, sp.true, justification, "structural", True, "argued in the justification")


@functools.lru_cache(maxsize=None)
def _laplace_dominance() -> tuple[Obligation, ...]:
    """Obligations: the 1-D discrete Laplace pair at the largest centre distance dominates every pair
    (symbolic in the centres, the distance and the scale; computed once)."""
    y, c = sym("y"), sym("c")
    s, k = sym("s", nonnegative=True), sym("k", nonnegative=True)
    u = sym("u", positive=True)
    j = sp.Symbol("j", integer=True)
    m = sp.Symbol("m", integer=True, nonnegative=True)
    loss = lambda v: (sp.Abs(v - c - k) - sp.Abs(v - c)) / u  # ln P_c(v) - ln P_{c+k}(v), normaliser cancels
    r = sp.exp(-u)
    T = sp.tanh(u / 2)
    G = T * r**m / (1 - r)
    return (
        discharge(
            "monotone likelihood ratio: the loss ln P_c(y) - ln P_{c+k}(y) = (|y - c - k| - |y - c|)/u is "
            "nonincreasing in y (y' = y + s, s >= 0; k >= 0)",
            sp.Le(loss(y + s) - loss(y), 0),
            "piecewise-linear arithmetic over the orderings of y, y + s, c, c + k",
        ),
        _structural(
            "Neyman-Pearson: for every ε', the set {y : P_c(y) > e^{ε'} P_{c+k}(y)} is a down-set {y <= t}, so "
            "δ_{ε'}(P_c || P_{c+k}) = max_t F(t - c) - e^{ε'} F(t - c - k) (F the noise cdf)",
            "the hockey-stick divergence sup_S P(S) - e^{ε'} Q(S) is attained at S = {loss > ε'}, a down-set "
            "by monotonicity",
        ),
        discharge(
            "the noise pmf T e^{-|j|u} is positive, so F is nondecreasing and F(t - k) >= F(t - K) for k <= K: "
            "δ at distance k is at most max_t F(t) - e^{ε'} F(t - K) <= δ at distance K (the farthest pair dominates)",
            sp.Gt(T * sp.exp(-sp.Abs(j) * u), 0),
            "tanh(u/2) > 0 and exp > 0 for u > 0",
        ),
        discharge(
            "symmetry: the pmf is even, T e^{-|j|u} = T e^{-|-j|u}, so a pair with c' < c (and the reversed "
            "divergence) reduces to c' > c by the reflection y -> 2c - y",
            sp.Eq(T * sp.exp(-sp.Abs(j) * u), T * sp.exp(-sp.Abs(-j) * u)),
            "|-j| = |j|",
        ),
        discharge(
            "upper tail: G(m) = T r^m/(1 - r) (r = e^{-u}) satisfies G(m) - G(m+1) = P(K = m) for m >= 0",
            sp.Eq(G - G.subs(m, m + 1), T * sp.exp(-m * u)),
            "algebra",
        ),
        discharge(
            "and G(m) -> 0 as m -> oo, so G is the tail P(K >= m) (the two differ by a constant that tends to 0)",
            sp.Eq(sp.limit(sp.exp(-u * m), m, sp.oo), 0),
            "sympy limit, u > 0",
        ),
        discharge(
            "T/(1 - r) = 1/(1 + r): P(K >= m) = r^m/(1 + r) for m >= 0, by symmetry P(K <= -m) = r^m/(1 + r), "
            "and F(t) = 1 - r^{t+1}/(1 + r) for t >= 0",
            sp.Eq(T.rewrite(sp.exp) / (1 - r), 1 / (1 + r)),
            "tanh in exponentials",
        ),
    )


@dataclass(frozen=True)
class LaplaceProfile:
    """The dominating pair of a 1-D discrete Laplace on the grid g·Z, for (ε', δ) claims.

    ``steps`` K: the derived bound on the distance of neighbours' centres, in grid steps (the pure
    bound is K·g/b); ``scale`` b and ``g`` exact. ``centre``, ``direction`` and ``witness_steps``
    describe the witness pair: data's centre (units) and the neighbour's centre
    ``centre + direction·witness_steps``; the refuting event is a half-line on output coordinate 0.

    δ(ε') = 1 − r^{t+1}/(1 + r) − e^{ε'} r^{K−t}/(1 + r), r = e^{−g/b}, t = ceil((K − ε' b/g)/2) − 1,
    for ε' < K g/b (0 above)."""

    steps: int
    scale: Any
    g: Any
    centre: int = 0
    direction: int = 1
    witness_steps: int | None = None

    def delta(self, eps: sp.Expr) -> tuple[sp.Expr, int, sp.Expr, sp.Expr]:
        """(δ(ε'), t, F(t), F(t − K)) for ε' below the pure bound."""
        K, u = int(self.steps), sp.sympify(self.scale) / sp.sympify(self.g)
        t = int(sp.ceiling((K - u * sp.sympify(eps)) / 2)) - 1
        r = sp.exp(-1 / u)
        p = 1 - r ** (t + 1) / (1 + r)
        q = r ** (K - t) / (1 + r)
        return p - sp.exp(eps) * q, t, p, q

    def judge(self, pb: ProofBuilder, bound: sp.Expr, eps: sp.Expr, delta: sp.Expr, *, data: Any, neighbor: Any):
        K = int(self.steps)
        b, g = sp.sympify(self.scale), sp.sympify(self.g)
        u = b / g
        pb.evaluate(
            f"the pure bound is K·g/b with K = {K} grid steps (the dominating pair's distance)",
            sp.Eq(sp.sympify(bound), K * g / b),
            "exact arithmetic",
        )
        pb.add(_laplace_dominance())
        d_expr, t, p, q = self.delta(eps)
        loss_at = lambda yv: (K - 2 * yv) / u  # loss at integer y in [0, K], centres 0 and K
        pb.evaluate(
            f"threshold: the loss (K - 2y)/u exceeds ε at y = t = {t} (0 <= t < K; every y <= 0 has loss K/u > ε)",
            sp.And(sp.Gt(loss_at(t), eps), sp.Ge(t, 0), sp.Lt(t, K)),
            "exact arithmetic",
        )
        pb.evaluate(
            f"threshold: the loss is <= ε at y = t + 1 = {t + 1}, so {{loss > ε}} = {{y <= t}}",
            sp.Le(loss_at(t + 1), eps),
            "exact arithmetic",
        )
        ob = pb.evaluate(
            f"δ(ε) = F(t) - e^ε F(t - K) = 1 - r^(t+1)/(1+r) - e^ε r^(K-t)/(1+r) <= δ = {fmt(delta)} "
            f"(r = e^(-g/b), ε = {fmt(eps)})",
            sp.Le(d_expr, delta, evaluate=False),
            "exact evaluation of the dominating pair's hockey-stick divergence",
        )
        pb.note(f"exact profile: δ(ε = {float(sp.N(eps, 15)):.6g}) = {_show(d_expr)}")
        if ob.discharged or exact_sign(d_expr - delta) != 1 or self.witness_steps != K:
            return None
        cut = float((self.centre + self.direction * t) * g)
        if self.direction > 0:
            ev = Event(lambda out: _first(out) <= cut, f"output (first coordinate) <= {cut!r}")
        else:
            ev = Event(lambda out: _first(out) >= cut, f"output (first coordinate) >= {cut!r}")
        if not confirm_violation(p, q, eps, delta):
            return None
        w = Witness(
            data=data,
            neighbor=neighbor,
            event=ev,
            loss=float(sp.N(sp.log(p) - sp.log(q), 20)),
            description="the half-line {loss > ε} of the dominating pair",
        )
        return w, f"P_D(S) - e^ε P_D'(S) = {_show(d_expr)} > δ = {fmt(delta)} for S = {ev.description}"


def _first(out: Any) -> np.ndarray:
    arr = np.asarray(out, dtype=float)
    return arr.reshape(len(arr), -1)[:, 0] if arr.ndim else arr.reshape(1)


def _show(value: sp.Expr) -> str:
    try:
        return f"{float(sp.N(value, 20)):.6g}"
    except (TypeError, ValueError):
        return str(value)


@dataclass(frozen=True)
class RandomizedResponseProfile:
    """k-ary randomized response with log-odds L: every pair x ≠ x' has the same hockey-stick
    divergence (relabel the categories), δ(ε') = (e^L − e^{ε'})/(e^L + k − 1) for ε' < L.
    The witness pair is (0, 1) with event {y = 0}."""

    k: int
    log_odds: Any

    def judge(self, pb: ProofBuilder, bound: sp.Expr, eps: sp.Expr, delta: sp.Expr, *, data: Any, neighbor: Any):
        L = sp.sympify(self.log_odds)
        kk = int(self.k)
        Ls, e2 = sym("L", nonnegative=True), sym("epsilon'", nonnegative=True)
        Ks = sym("k", integer=True, positive=True)
        Z = sp.exp(Ls) + Ks - 1
        pb.evaluate("the pure bound is L", sp.Eq(sp.sympify(bound), L), "exact arithmetic")
        pb.fact(
            "every pair x != x' has the same hockey-stick divergence: a permutation of the categories maps "
            "(P_x, P_x') to (P_0, P_1), and sup_S P(S) - e^{ε'} Q(S) = Σ_y (P(y) - e^{ε'} Q(y))_+",
            "the pmf depends on (x, y) only through [y = x]",
        )
        pb.check(
            "[y = x'] P_x(y) - e^{ε'} P_x'(y) = (1 - e^{L + ε'})/Z <= 0",
            sp.Le((1 - sp.exp(Ls + e2)) / Z, 0),
            "L, ε' >= 0",
        )
        pb.check("[y not in {x, x'}] (1 - e^{ε'})/Z <= 0", sp.Le((1 - sp.exp(e2)) / Z, 0), "ε' >= 0")
        d_expr = (sp.exp(L) - sp.exp(eps)) / (sp.exp(L) + kk - 1)
        ob = pb.evaluate(
            f"[y = x] only: δ(ε) = (e^L - e^ε)/(e^L + k - 1) <= δ = {fmt(delta)} (k = {kk}, L = {fmt(L)}, "
            f"ε = {fmt(eps)})",
            sp.Le(d_expr, delta, evaluate=False),
            "exact evaluation",
        )
        pb.note(f"exact profile: δ(ε = {float(sp.N(eps, 15)):.6g}) = {_show(d_expr)}")
        if ob.discharged or exact_sign(d_expr - delta) != 1:
            return None
        p, q = sp.exp(L) / (sp.exp(L) + kk - 1), 1 / (sp.exp(L) + kk - 1)
        if not confirm_violation(p, q, eps, delta):
            return None
        w = Witness(
            data=0,
            neighbor=1,
            event=Event.point(0),
            output=0,
            loss=float(sp.N(L, 20)),
            description="the truthful report y = x",
        )
        return w, f"P(0|0) - e^ε P(0|1) = {_show(d_expr)} > δ = {fmt(delta)}"


@dataclass(frozen=True)
class FiniteProfile:
    """Finitely many neighbouring pairs and outputs with exact probabilities: ``pairs`` lists every
    ordered neighbouring pair as ``(data, neighbor, {output: (P_data(y), P_neighbor(y))})`` (the
    proof states why the list is complete); δ(ε') is the maximum over them of
    Σ_y (P(y) − e^{ε'} Q(y))_+, each sign decided exactly."""

    pairs: Sequence[tuple[Any, Any, dict]]
    completeness: str = "every ordered neighbouring pair is listed"

    def judge(self, pb: ProofBuilder, bound: sp.Expr, eps: sp.Expr, delta: sp.Expr, *, data: Any, neighbor: Any):
        pb.fact(f"the {len(self.pairs)} listed ordered pairs are all the neighbouring pairs", self.completeness)
        worst, worst_pair, undecided = None, None, False
        for x, x2, table in self.pairs:
            total, event_outputs = sp.Integer(0), []
            for yv, (pv, qv) in table.items():
                term = sp.sympify(pv) - sp.exp(eps) * sp.sympify(qv)
                sg = exact_sign(term)
                if sg is None:
                    undecided = True
                elif sg == 1:
                    total += term
                    event_outputs.append(yv)
            if worst is None or exact_sign(total - worst) == 1:
                worst, worst_pair = total, (x, x2, event_outputs, table)
        if undecided:
            pb.evaluate("every term's sign is decided exactly", sp.false, "exact evaluation undecided")
            return None
        ob = pb.evaluate(
            f"δ(ε) = max over pairs of Σ_y (P(y) - e^ε Q(y))_+ <= δ = {fmt(delta)}",
            sp.Le(worst, delta, evaluate=False),
            "exact evaluation of each pair's hockey-stick divergence",
        )
        pb.note(f"exact profile: δ(ε = {float(sp.N(eps, 15)):.6g}) = {_show(worst)}")
        if ob.discharged or exact_sign(worst - delta) != 1:
            return None
        assert worst_pair is not None  # set with worst, which is compared above
        x, x2, outs, table = worst_pair
        p = sp.Add(*[sp.sympify(table[o][0]) for o in outs])
        q = sp.Add(*[sp.sympify(table[o][1]) for o in outs])
        if not confirm_violation(p, q, eps, delta):
            return None
        target = list(outs)
        chosen = tuple(target)
        ev = Event(lambda out: np.isin(np.asarray(out), np.asarray(chosen)), f"output in {target!r}")
        w = Witness(
            data=x,
            neighbor=x2,
            event=ev,
            loss=float(sp.N(sp.log(p) - sp.log(q), 20)) if exact_sign(q) else None,
            description="the outputs where P_D(y) > e^ε P_D'(y)",
        )
        return w, f"P_D(S) - e^ε P_D'(S) = {_show(worst)} > δ = {fmt(delta)} for S = {ev.description}"


def float_noise_gap(noise: str, scale: Any) -> Obligation:
    """An obligation that is not discharged: the proof is of noise with a continuous law, but the code
    draws it in doubles with numpy (``Generator.laplace`` is ``±b·log(2U)``, ``Generator.exponential``
    ``−b·log(1 − U)``, ``U`` a multiple of 2^-53), whose support is bounded: ``|η| <= 52·ln 2·b`` for
    Laplace, ``η <= 53·ln 2·b`` for the exponential. A comparison the continuous noise can win with
    positive probability is then impossible on one input and possible on a neighbour: no finite ε holds
    there (report noisy max at b = 2 on q = (0, 145, 145, 145, 145) never returns index 0, and on the
    neighbour (1, 144, 144, 144, 144) does with probability 2^-265). So the verdict of such a mechanism
    is UNPROVEN, with the derivation of the ideal mechanism kept for the reader; the exact versions
    (``dpharness.parts``: ``report_noisy_max``, ``above_threshold``, grid noise from exact samplers)
    are proved about the code."""
    b = float(scale)
    reach = (52 if noise == "laplace" else 53) * math.log(2) * b
    return Obligation(
        f"the sampler draws the {noise} noise this derivation is about (a continuous law)",
        sp.false,
        "the derivation is of continuous noise; the code draws it in doubles with numpy, whose support is bounded "
        f"(|η| <= {reach:.4g} at b = {b:.6g}), so a comparison only the unbounded noise could win has probability "
        "0 on one input and a positive one on a neighbour: no finite ε holds there",
        "lemma",
        False,
        "not the law of the code: use the exact versions declared from dpharness.parts (report_noisy_max, "
        "above_threshold: grid noise from exact samplers), which are proved",
    )
