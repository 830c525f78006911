"""Shared steps of the simple mechanisms' proofs: judging a derived pure-DP bound against the claim
(with an exactly confirmed counterexample when it fails and the bound is attained), and checking
that the mechanism's own ``law`` agrees with the model pmf the derivation is about."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable, Iterable

import numpy as np
import sympy as sp

from dpharness.core import ApproxDP, Event, PureDP, RenyiDP, Witness, exact

from ._kernel import ProofBuilder, confirm_violation, exact_sign, exceeds

__all__ = ["judge_pure", "check_law", "check_law_ratio", "fmt"]


def fmt(value: Any) -> str:
    """A short rendering of an exact value for statements."""
    return str(sp.nsimplify(value)) if not isinstance(value, sp.Basic) else str(value)


def judge_pure(pb: ProofBuilder, bound: sp.Expr, *, p: sp.Expr, q: sp.Expr, data: Any, neighbor: Any,
               output: Any = None, event: Event | None = None, description: str = "") -> Witness:
    """Compare the derived worst-case pointwise loss ``bound`` (attained at ``output``/``event`` with
    exact probabilities ``p`` = P_D(S), ``q`` = P_D'(S)) with the mechanism's claim.

    PureDP(ε): obligation bound <= ε; when the bound exceeds ε and the attaining event violates
    P_D(S) <= e^ε P_D'(S) by exact evaluation, the proof is REFUTED with that witness.
    ApproxDP(ε, δ): pure ε'-DP with ε' <= ε implies it; otherwise the event is tested against δ.
    RenyiDP(α, ε): D_α <= D_∞ = bound (Rényi divergences increase in α), so bound <= ε proves it;
    otherwise UNPROVEN (no exact D_α computed here)."""
    bound = sp.sympify(bound)
    p, q = sp.sympify(p), sp.sympify(q)
    loss = sp.oo if exact_sign(q) == 0 else sp.log(p) - sp.log(q)
    if isinstance(output, np.generic):
        output = output.item()
    if event is None and output is not None:
        event = Event.point(tuple(output.tolist()) if isinstance(output, np.ndarray) else output)
    witness = Witness(data=data, neighbor=neighbor, event=event, output=output,
                      loss=float(sp.N(loss, 20)), description=description or "attains the derived bound")
    # tightness (a note, not an obligation: soundness of PROVED does not depend on it; a refutation
    # below rests on the witness's own exact probabilities, never on the bound)
    if loss is sp.oo or bound is sp.oo:
        attained = loss is sp.oo and bound is sp.oo
    else:
        attained = exact_sign(loss - bound) == 0
    pb.note(f"witness: ln P_D(S) - ln P_D'(S) = {float(sp.N(loss, 15)) if loss is not sp.oo else 'inf'} "
            + ("attains the derived bound exactly (the bound is tight)" if attained else
               f"(the derived bound is {float(sp.N(bound, 15)) if bound is not sp.oo else 'inf'})"))
    claim = pb.claim
    if isinstance(claim, PureDP):
        eps = exact(claim.epsilon)
        pb.claim_bound(bound)
        if exceeds(bound, eps) and confirm_violation(p, q, eps):
            pb.refute(witness, f"P_D(S) = {fmt(p)} > e^{fmt(eps)} · {fmt(q)} = e^ε P_D'(S) for S = {event.description}")
    elif isinstance(claim, ApproxDP):
        eps, delta = exact(claim.epsilon), exact(claim.delta)
        pb.note("pure DP with the derived ε implies (ε, δ)-DP for every δ >= 0")
        pb.claim_bound(bound)
        if exceeds(bound, eps) and confirm_violation(p, q, eps, delta):
            pb.refute(witness, f"P_D(S) = {fmt(p)} > e^ε P_D'(S) + δ for S = {event.description}")
    elif isinstance(claim, RenyiDP):
        pb.note("D_α <= D_∞ (Rényi divergence is nondecreasing in α), so the pure bound bounds the RDP ε")
        pb.claim_bound(bound, exact(claim.epsilon))
    else:  # pragma: no cover - Claim has three kinds
        pb.note(f"claim type {type(claim).__name__} not handled")
    return witness


def check_law(pb: ProofBuilder, mechanism: Any, inputs: Iterable[Any], outputs_of: Callable[[Any], list],
              model: Callable[[Any, Any], sp.Expr], *, rel_tol: float = 1e-9) -> bool:
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
        pb.evaluate(f"mechanism.law agrees with the model pmf (fails at (input, output) = {mismatch[0]!r})", sp.false,
                    "the implementation's law differs from the model the derivation is about")
        return False
    if all_exact:
        pb.evaluate(f"mechanism.law agrees exactly with the model pmf at {n} (input, output) pairs", sp.true,
                    "exact comparison of the law's probabilities")
    else:
        pb.note(f"checked numerically: mechanism.law matches the model pmf at {n} (input, output) pairs "
                f"(rel. tol {rel_tol:g}; the law's probabilities are floats)")
    return True


def _is_exact(v: Any) -> bool:
    return isinstance(v, (int, np.integer, Fraction)) and not isinstance(v, bool) or (isinstance(v, sp.Basic) and not v.has(sp.Float))


def check_law_ratio(pb: ProofBuilder, mechanism: Any, data: Any, neighbor: Any, output: Any, expected: sp.Expr,
                    *, tol: float = 1e-9) -> bool:
    """The mechanism's own law gives the model's log-ratio at the witness output (float check, a note;
    a mismatch is an undischarged obligation: the proof is about the model, and the model is not the code)."""
    out = np.asarray(output, dtype=float)
    rows = out.reshape(1, -1) if out.ndim else out.reshape(1)
    got = float(mechanism.law(data).log_prob(rows)[0] - mechanism.law(neighbor).log_prob(rows)[0])
    want = float(sp.N(expected, 30))
    if abs(got - want) <= tol * max(1.0, abs(want)):
        pb.note(f"checked numerically: mechanism.law gives ln P_D(y) - ln P_D'(y) = {got:.12g} at the witness, "
                f"as the model does ({want:.12g})")
        return True
    pb.evaluate(f"mechanism.law agrees with the model at the witness (law {got!r}, model {want!r})", sp.false,
                "the implementation's law differs from the model the derivation is about")
    return False
