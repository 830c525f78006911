"""Randomness alignment checked with z3, for a FIXED number of queries.

The method of LightDP (Zhang & Kifer, POPL 2017), ShadowDP (Wang, Ding, Wang, Kifer, Zhang, PLDI
2019) and CheckDP (Wang, Ding, Kifer, Zhang, CCS 2020): for neighbouring query vectors ``q, q'``
and an output ``ω``, give each noise variable ``η_k`` a shift ``s_k`` (a function of ``q, q'`` and
``ω`` only) such that

1. *output preservation*: every noise vector ``η`` producing ``ω`` on ``q`` is mapped to
   ``η + s`` producing the same ``ω`` on ``q'`` (and stays in the noise support);
2. *cost*: ``Σ_k |s_k| / scale_k <= ε``.

Since ``s`` does not depend on ``η``, ``η -> η + s`` is a translation: injective with Jacobian 1.
For Laplace noise ``p(η)/p(η + s) = exp((|η + s| - |η|)/b) <= exp(|s|/b)`` (triangle inequality),
for one-sided exponential noise ``p(η)/p(η + s) = exp(s/b)`` on the support. Hence
``P[M(q) = ω] <= e^{cost} P[M(q') = ω]`` for every ``ω`` and, summing/integrating over ω, ε-DP.

What z3 checks here is obligation 1 and 2 *for all real* ``q, q', η`` with
``|q_i - q'_i| <= Δ`` (linf), for one fixed number ``n`` of queries/candidates: z3 decides the
negation unsatisfiable (linear real arithmetic with ``If``; a decision procedure, no abstraction).
The result is therefore a proof for that ``n`` only, never for all ``n`` -- every obligation says
so and the proofs' notes repeat it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import sympy as sp
import z3

from ._model import Obligation

__all__ = ["AlignmentCheck", "report_noisy_max", "sparse_vector", "triangle_lemma"]

_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class AlignmentCheck:
    """The outcome of one alignment check: the obligations (checker ``"z3"``), whether all hold,
    the derived cost bound (exact sympy), the number of queries ``n`` it covers, a z3 counter-model
    (as exact numbers) when an obligation failed, and the solver time."""

    obligations: tuple[Obligation, ...]
    holds: bool
    cost_bound: sp.Expr
    n: int
    counterexample: dict | None = None
    seconds: float = 0.0
    description: str = ""
    extra: dict = field(default_factory=dict)


def _rv(x: Any) -> Any:
    """An exact z3 real for an exact (rational) sympy/python number."""
    x = sp.nsimplify(x) if not isinstance(x, sp.Basic) else x
    if not x.is_Rational:
        raise ValueError(f"value={x} is not rational; alignment checks take exact rational parameters")
    return z3.RealVal(f"{x.p}/{x.q}")


def _abs(e: Any) -> Any:
    return z3.If(e >= 0, e, -e)


def _model_dict(model: Any, variables: dict[str, Any]) -> dict:
    out = {}
    for name, v in variables.items():
        val = model.eval(v, model_completion=True)
        if z3.is_rational_value(val):
            out[name] = sp.Rational(val.numerator_as_long(), val.denominator_as_long())
        elif z3.is_int_value(val):
            out[name] = sp.Integer(val.as_long())
        elif z3.is_true(val) or z3.is_false(val):
            out[name] = z3.is_true(val)
        else:
            out[name] = str(val)
    return out


def _valid(statement: str, pre: Any, goal: Any, justification: str, variables: dict[str, Any],
           formula_text: str) -> tuple[Obligation, dict | None]:
    """Discharge ``pre -> goal`` for all values of the variables: z3 must find ``pre ∧ ¬goal`` unsat."""
    s = z3.Solver()
    s.set("timeout", _TIMEOUT_MS)
    s.add(pre, z3.Not(goal))
    res = s.check()
    if res == z3.unsat:
        return Obligation(statement, formula_text, justification, "z3", True,
                          "z3: negation unsat (linear real arithmetic, decision procedure)"), None
    if res == z3.unknown:
        return Obligation(statement, formula_text, justification, "z3", False,
                          f"NOT DISCHARGED: z3 unknown ({s.reason_unknown()})"), None
    cex = _model_dict(s.model(), variables)
    return Obligation(statement, formula_text, justification, "z3", False,
                      f"NOT DISCHARGED: z3 counter-model {cex}"), cex


def _attained(pre: Any, target: Any) -> bool:
    s = z3.Solver()
    s.set("timeout", _TIMEOUT_MS)
    s.add(pre, target)
    return s.check() == z3.sat


def triangle_lemma() -> Obligation:
    """Laplace density ratio under a shift: ``|η + s| - |η| <= |s|`` for all reals (z3)."""
    eta, s = z3.Reals("eta s")
    ob, _ = _valid("Laplace shift lemma: |η + s| - |η| <= |s| for all real η, s",
                   z3.BoolVal(True), _abs(eta + s) - _abs(eta) <= _abs(s),
                   "triangle inequality (so p(η)/p(η+s) <= exp(|s|/b) for Laplace(b))",
                   {"eta": eta, "s": s}, "|eta + s| - |eta| <= |s|")
    return ob


def _neighbours(q: list, qp: list, sens: Any) -> Any:
    return z3.And([z3.And(q[i] - qp[i] <= sens, qp[i] - q[i] <= sens) for i in range(len(q))])


# --------------------------------------------------------------------------- report noisy max

def report_noisy_max(n: int, scale: Any, sensitivity: Any, epsilon: Any, *, noise: str = "laplace",
                     ties: str = "first") -> AlignmentCheck:
    """Report noisy max over ``n`` candidates: output ``argmax_i q_i + η_i`` (ties to the first index
    when ``ties == "first"``), ``η_i`` i.i.d. Laplace(scale) or one-sided Exponential(scale).

    Alignment for output ``i`` (Ding et al. 2017/2021; LightDP's RNM proof without the monotonicity
    assumption): ``s_i = q_i - q'_i + Δ``, ``s_j = 0`` for ``j != i``. Then
    ``q'_i + η_i + s_i = q_i + η_i + Δ`` beats ``q'_j + η_j <= q_j + η_j + Δ``; ``s_i >= 0`` keeps
    exponential noise in its support; cost ``|s_i|/b <= 2Δ/b``."""
    t0 = time.perf_counter()
    b, d, eps = sp.sympify(scale), sp.sympify(sensitivity), sp.sympify(epsilon)
    bz, dz, ez = _rv(b), _rv(d), _rv(eps)
    cost_bound = 2 * d / b
    obligations: list[Obligation] = [triangle_lemma()] if noise == "laplace" else []
    holds = True
    cex_all = None
    q = [z3.Real(f"q{i}") for i in range(n)]
    qp = [z3.Real(f"qp{i}") for i in range(n)]
    eta = [z3.Real(f"eta{i}") for i in range(n)]
    variables = {**{f"q{i}": q[i] for i in range(n)}, **{f"q'{i}": qp[i] for i in range(n)},
                 **{f"eta{i}": eta[i] for i in range(n)}}

    def wins(vals: list, i: int) -> Any:
        conds = []
        for j in range(n):
            if j == i:
                continue
            if ties == "first" and j < i:
                conds.append(vals[j] < vals[i])
            else:
                conds.append(vals[j] <= vals[i])
        return z3.And(conds) if conds else z3.BoolVal(True)

    support = z3.And([e >= 0 for e in eta]) if noise == "exponential" else z3.BoolVal(True)
    for i in range(n):
        shift = [(q[i] - qp[i] + dz) if j == i else z3.RealVal(0) for j in range(n)]
        aligned = [eta[j] + shift[j] for j in range(n)]
        pre = z3.And(_neighbours(q, qp, dz), support, wins([q[j] + eta[j] for j in range(n)], i))
        keep = wins([qp[j] + aligned[j] for j in range(n)], i)
        if noise == "exponential":
            keep = z3.And(keep, z3.And([a >= 0 for a in aligned]))
        cost = z3.Sum([_abs(s) / bz for s in shift])
        ob, cex = _valid(f"[n={n}] output {i} preserved: argmax(q' + η + s) = {i} whenever argmax(q + η) = {i}",
                         pre, keep, "alignment s_i = q_i - q'_i + Δ, s_j = 0 (j != i); z3 over all real q, q', η",
                         variables, f"RNM alignment keeps output {i} (n={n})")
        obligations.append(ob)
        holds &= ob.discharged
        cex_all = cex_all or cex
        ob, cex = _valid(f"[n={n}] output {i}: alignment cost Σ|s_k|/b <= {cost_bound}",
                         _neighbours(q, qp, dz), cost <= _rv(cost_bound),
                         "|q_i - q'_i + Δ| <= 2Δ under linf sensitivity Δ (z3)", variables,
                         f"RNM alignment cost <= {cost_bound} (n={n})")
        obligations.append(ob)
        holds &= ob.discharged
        cex_all = cex_all or cex
    # the cost bound is attained by the alignment (so it is this alignment's exact worst case)
    shift0 = q[0] - qp[0] + dz
    tight = _attained(_neighbours(q, qp, dz), _abs(shift0) / bz == _rv(cost_bound))
    obligations.append(Obligation(
        f"[n={n}] claimed ε covers the alignment cost: {cost_bound} <= {eps}", sp.Le(cost_bound, eps),
        "exact rational comparison (z3)", "z3", bool(_is_le(cost_bound, eps)),
        "" if _is_le(cost_bound, eps) else f"NOT DISCHARGED: alignment cost {cost_bound} exceeds ε = {eps}"))
    holds &= obligations[-1].discharged
    return AlignmentCheck(tuple(obligations), holds, cost_bound, n, cex_all, time.perf_counter() - t0,
                          f"report noisy max ({noise} noise), n = {n} candidates",
                          {"cost_attained": tight})


def _is_le(a: sp.Expr, b: sp.Expr) -> bool:
    s = z3.Solver()
    s.add(_rv(a) > _rv(b))
    return s.check() == z3.unsat


# --------------------------------------------------------------------------- sparse vector

def sparse_vector(n: int, c: int, rho_scale: Any, nu_scale: Any, sensitivity: Any, epsilon: Any, *,
                  value_scale: Any = None, strict: bool = False, value_from_nu: bool = False,
                  nu_zero: bool = False, cutoff: bool = True, value_sensitivity: Any = None) -> AlignmentCheck:
    """Sparse vector over ``n`` queries: ``ρ ~ Lap(rho_scale)``, ``ν_i ~ Lap(nu_scale)``; answer ⊤
    when ``q_i + ν_i >= T + ρ`` (``>`` if ``strict``), ⊥ otherwise; stop after ``c`` ⊤ (``cutoff``).
    With ``value_scale``, each ⊤ also releases ``q_i + ξ_i``, ``ξ_i ~ Lap(value_scale)`` (numerical
    SVT); the released value is computed from answers ``r_i`` with ``|r_i − r'_i| <= value_sensitivity``
    (default Δ; e.g. answers rounded to a grid, whose sensitivity is ``ceil(Δ/g)·g``) and the value
    alignment shifts by ``r_i − r'_i`` (a grid multiple, so also valid for grid-discrete noise).
    ``value_from_nu`` releases ``q_i + ν_i`` instead (Lyu et al. Alg. 3); ``nu_zero`` drops
    the query noise (Alg. 5). The threshold T is a free real.

    Alignment (Lyu, Su & Li 2017 Thm. 2 proof; ShadowDP's SVT): ``s_ρ = Δ``; for a ⊤ answer
    ``s_ν_i = Δ + q_i - q'_i`` (and ``s_ξ_i = q_i - q'_i`` for the released value), 0 for ⊥.
    Cost ``Δ/rho_scale + Σ_⊤ |Δ + q_i - q'_i|/nu_scale (+ |q_i - q'_i|/value_scale)
    <= Δ/rho_scale + c(2Δ/nu_scale + Δ/value_scale)``."""
    t0 = time.perf_counter()
    d, eps = sp.sympify(sensitivity), sp.sympify(epsilon)
    dz, ez = _rv(d), _rv(eps)
    brho = sp.sympify(rho_scale)
    answers = c if cutoff else n
    per_top = (0 if nu_zero else 2 * d / sp.sympify(nu_scale))
    dv = d if value_sensitivity is None else sp.sympify(value_sensitivity)
    if value_scale is not None:
        per_top += dv / sp.sympify(value_scale)
    cost_bound = d / brho + min(answers, n) * per_top
    q = [z3.Real(f"q{i}") for i in range(n)]
    qp = [z3.Real(f"qp{i}") for i in range(n)]
    nu = [z3.Real(f"nu{i}") for i in range(n)]
    xi = [z3.Real(f"xi{i}") for i in range(n)]
    rv = [z3.Real(f"r{i}") for i in range(n)]
    rvp = [z3.Real(f"rp{i}") for i in range(n)]
    rho, T = z3.Real("rho"), z3.Real("T")
    variables = {"T": T, "rho": rho, **{f"q{i}": q[i] for i in range(n)}, **{f"q'{i}": qp[i] for i in range(n)},
                 **{f"nu{i}": nu[i] for i in range(n)}}

    def run(qs: list, rs: list, rho_v: Any, nus: list, xis: list) -> tuple[list, list, list]:
        """(answered_i, top_i, value_i) as z3 terms, following the algorithm."""
        answered, tops, values = [], [], []
        count = z3.IntVal(0)
        for i in range(n):
            live = (count < c) if cutoff else z3.BoolVal(True)
            noisy = qs[i] + (z3.RealVal(0) if nu_zero else nus[i])
            above = noisy > T + rho_v if strict else noisy >= T + rho_v
            top = z3.And(live, above)
            answered.append(live)
            tops.append(top)
            values.append(noisy if value_from_nu else rs[i] + xis[i])
            count = count + z3.If(top, 1, 0)
        return answered, tops, values

    ans, tops, vals = run(q, rv, rho, nu, xi)
    s_rho = dz
    s_nu = [z3.If(tops[i], dz + q[i] - qp[i], z3.RealVal(0)) for i in range(n)]
    s_xi = [z3.If(tops[i], rv[i] - rvp[i], z3.RealVal(0)) for i in range(n)]
    ans2, tops2, vals2 = run(qp, rvp, rho + s_rho, [nu[i] + s_nu[i] for i in range(n)],
                             [xi[i] + s_xi[i] for i in range(n)])
    same = [z3.And(ans[i] == ans2[i], tops[i] == tops2[i]) for i in range(n)]
    if value_scale is not None or value_from_nu:
        same += [z3.Implies(tops[i], vals[i] == vals2[i]) for i in range(n)]
    cost = s_rho / _rv(brho)
    if not nu_zero:
        cost = cost + z3.Sum([_abs(s) for s in s_nu]) / _rv(sp.sympify(nu_scale))
    if value_scale is not None:
        cost = cost + z3.Sum([_abs(s) for s in s_xi]) / _rv(sp.sympify(value_scale))
    pre = _neighbours(q, qp, dz)
    if value_scale is not None:
        pre = z3.And(pre, _neighbours(rv, rvp, _rv(dv)))
    obligations = [triangle_lemma()]
    ob1, cex1 = _valid(f"[n={n}] every output preserved by the alignment",
                       pre, z3.And(same),
                       "s_ρ = Δ; s_ν_i = Δ + q_i - q'_i on ⊤, 0 on ⊥" + ("; s_ξ_i = r_i - r'_i on ⊤" if value_scale is not None else "")
                       + "; z3 over all real T, ρ, ν, q, q'", variables, f"SVT alignment keeps the output (n={n}, c={c})")
    ob2, cex2 = _valid(f"[n={n}] alignment cost <= {cost_bound}", pre, cost <= _rv(cost_bound),
                       f"at most {answers} ⊤ answers, each |Δ + q_i - q'_i| <= 2Δ (z3)", variables,
                       f"SVT alignment cost <= {cost_bound} (n={n}, c={c})")
    le = _is_le(cost_bound, eps)
    ob3 = Obligation(f"[n={n}] claimed ε covers the alignment cost: {cost_bound} <= {eps}", sp.Le(cost_bound, eps),
                     "exact rational comparison (z3)", "z3", le,
                     "" if le else f"NOT DISCHARGED: alignment cost {cost_bound} exceeds ε = {eps}")
    obligations += [ob1, ob2, ob3]
    holds = all(o.discharged for o in obligations)
    return AlignmentCheck(tuple(obligations), holds, cost_bound, n, cex1 or cex2, time.perf_counter() - t0,
                          f"sparse vector, n = {n} queries, cutoff c = {c}")


def check_range(fn, ns: Sequence[int], **kwargs: Any) -> list[AlignmentCheck]:
    """Run an alignment check for each number of queries in ``ns``."""
    return [fn(n, **kwargs) for n in ns]
