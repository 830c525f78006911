"""Randomness alignment: proved for EVERY number of queries by a lemma over one generic query, and
checked with z3 for a FIXED number of queries (a cross-check for small n).

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

For EVERY n (:func:`report_noisy_max_all_n`, :func:`sparse_vector_all_n`; Lyu, Su & Li 2017, proof of
Thm. 2 for SVT Alg. 1; the pairwise argument of Dwork & Roth 2014 Claim 3.9 / Ding et al. 2019 for
report noisy max): the obligations are about ONE generic query i (and, for report noisy max, one
generic other candidate j), with symbolic parameters, so their number does not depend on n. The
output of report noisy max is the conjunction over j ≠ i of pairwise comparisons, each preserved;
the output of SVT is preserved by induction over the queries, whose step z3 checks over all reals
and a symbolic integer count κ of earlier ⊤ answers (and a symbolic cutoff c). The cost is a sum of
per-query terms, each at most the per-⊤ bound on a ⊤ answer and 0 otherwise, with at most
m = min(c, n) ⊤ answers (n without cutoff): Δ/b_ρ + m·P. Each inequality is discharged by sympy on a
slack form (sympy + z3) and again by z3 on the raw form over all reals; the steps argued in words
(the shape of argmax, the induction principle, finite sums of term-wise bounds) are recorded with
checker ``"structural"``.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import sympy as sp
import z3

from ._model import Obligation

__all__ = [
    "AlignmentCheck",
    "AlignmentLemma",
    "report_noisy_max",
    "sparse_vector",
    "triangle_lemma",
    "report_noisy_max_all_n",
    "sparse_vector_all_n",
]

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


def _valid(
    statement: str, pre: Any, goal: Any, justification: str, variables: dict[str, Any], formula_text: str
) -> tuple[Obligation, dict | None]:
    """Discharge ``pre -> goal`` for all values of the variables: z3 must find ``pre ∧ ¬goal`` unsat."""
    s = z3.Solver()
    s.set("timeout", _TIMEOUT_MS)
    s.add(pre, z3.Not(goal))
    res = s.check()
    if res == z3.unsat:
        return Obligation(
            statement,
            formula_text,
            justification,
            "z3",
            True,
            "z3: negation unsat (linear real arithmetic, decision procedure)",
        ), None
    if res == z3.unknown:
        return Obligation(
            statement, formula_text, justification, "z3", False, f"NOT DISCHARGED: z3 unknown ({s.reason_unknown()})"
        ), None
    cex = _model_dict(s.model(), variables)
    return Obligation(
        statement, formula_text, justification, "z3", False, f"NOT DISCHARGED: z3 counter-model {cex}"
    ), cex


def _attained(pre: Any, target: Any) -> bool:
    s = z3.Solver()
    s.set("timeout", _TIMEOUT_MS)
    s.add(pre, target)
    return s.check() == z3.sat


def triangle_lemma() -> Obligation:
    """Laplace density ratio under a shift: ``|η + s| - |η| <= |s|`` for all reals (z3)."""
    eta, s = z3.Reals("eta s")
    ob, _ = _valid(
        "Laplace shift lemma: |η + s| - |η| <= |s| for all real η, s",
        z3.BoolVal(True),
        _abs(eta + s) - _abs(eta) <= _abs(s),
        "triangle inequality (so p(η)/p(η+s) <= exp(|s|/b) for Laplace(b))",
        {"eta": eta, "s": s},
        "|eta + s| - |eta| <= |s|",
    )
    return ob


def _neighbours(q: list, qp: list, sens: Any) -> Any:
    return z3.And([z3.And(q[i] - qp[i] <= sens, qp[i] - q[i] <= sens) for i in range(len(q))])


# --------------------------------------------------------------------------- report noisy max


def report_noisy_max(
    n: int, scale: Any, sensitivity: Any, epsilon: Any, *, noise: str = "laplace", ties: str = "first"
) -> AlignmentCheck:
    """Report noisy max over ``n`` candidates: output ``argmax_i q_i + η_i`` (ties to the first index
    when ``ties == "first"``), ``η_i`` i.i.d. Laplace(scale) or one-sided Exponential(scale).

    Alignment for output ``i`` (Ding et al. 2017/2021; LightDP's RNM proof without the monotonicity
    assumption): ``s_i = q_i - q'_i + Δ``, ``s_j = 0`` for ``j != i``. Then
    ``q'_i + η_i + s_i = q_i + η_i + Δ`` beats ``q'_j + η_j <= q_j + η_j + Δ``; ``s_i >= 0`` keeps
    exponential noise in its support; cost ``|s_i|/b <= 2Δ/b``."""
    t0 = time.perf_counter()
    b, d, eps = sp.sympify(scale), sp.sympify(sensitivity), sp.sympify(epsilon)
    bz, dz = _rv(b), _rv(d)
    _rv(eps)  # refuses an irrational ε
    cost_bound = 2 * d / b
    obligations: list[Obligation] = [triangle_lemma()] if noise == "laplace" else []
    holds = True
    cex_all = None
    q = [z3.Real(f"q{i}") for i in range(n)]
    qp = [z3.Real(f"qp{i}") for i in range(n)]
    eta = [z3.Real(f"eta{i}") for i in range(n)]
    variables = {
        **{f"q{i}": q[i] for i in range(n)},
        **{f"q'{i}": qp[i] for i in range(n)},
        **{f"eta{i}": eta[i] for i in range(n)},
    }

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
        ob, cex = _valid(
            f"[n={n}] output {i} preserved: argmax(q' + η + s) = {i} whenever argmax(q + η) = {i}",
            pre,
            keep,
            "alignment s_i = q_i - q'_i + Δ, s_j = 0 (j != i); z3 over all real q, q', η",
            variables,
            f"RNM alignment keeps output {i} (n={n})",
        )
        obligations.append(ob)
        holds &= ob.discharged
        cex_all = cex_all or cex
        ob, cex = _valid(
            f"[n={n}] output {i}: alignment cost Σ|s_k|/b <= {cost_bound}",
            _neighbours(q, qp, dz),
            cost <= _rv(cost_bound),
            "|q_i - q'_i + Δ| <= 2Δ under linf sensitivity Δ (z3)",
            variables,
            f"RNM alignment cost <= {cost_bound} (n={n})",
        )
        obligations.append(ob)
        holds &= ob.discharged
        cex_all = cex_all or cex
    # the cost bound is attained by the alignment (so it is this alignment's exact worst case)
    shift0 = q[0] - qp[0] + dz
    tight = _attained(_neighbours(q, qp, dz), _abs(shift0) / bz == _rv(cost_bound))
    obligations.append(
        Obligation(
            f"[n={n}] claimed ε covers the alignment cost: {cost_bound} <= {eps}",
            sp.Le(cost_bound, eps),
            "exact rational comparison (z3)",
            "z3",
            bool(_is_le(cost_bound, eps)),
            "" if _is_le(cost_bound, eps) else f"NOT DISCHARGED: alignment cost {cost_bound} exceeds ε = {eps}",
        )
    )
    holds &= obligations[-1].discharged
    return AlignmentCheck(
        tuple(obligations),
        holds,
        cost_bound,
        n,
        cex_all,
        time.perf_counter() - t0,
        f"report noisy max ({noise} noise), n = {n} candidates",
        {"cost_attained": tight},
    )


def _is_le(a: sp.Expr, b: sp.Expr) -> bool:
    s = z3.Solver()
    s.add(_rv(a) > _rv(b))
    return s.check() == z3.unsat


# --------------------------------------------------------------------------- sparse vector


def sparse_vector(
    n: int,
    c: int,
    rho_scale: Any,
    nu_scale: Any,
    sensitivity: Any,
    epsilon: Any,
    *,
    value_scale: Any = None,
    strict: bool = False,
    value_from_nu: bool = False,
    nu_zero: bool = False,
    cutoff: bool = True,
    value_sensitivity: Any = None,
) -> AlignmentCheck:
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
    dz = _rv(d)
    _rv(eps)  # refuses an irrational ε
    brho = sp.sympify(rho_scale)
    answers = c if cutoff else n
    per_top = 0 if nu_zero else 2 * d / sp.sympify(nu_scale)
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
    variables = {
        "T": T,
        "rho": rho,
        **{f"q{i}": q[i] for i in range(n)},
        **{f"q'{i}": qp[i] for i in range(n)},
        **{f"nu{i}": nu[i] for i in range(n)},
    }

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
    ans2, tops2, vals2 = run(
        qp, rvp, rho + s_rho, [nu[i] + s_nu[i] for i in range(n)], [xi[i] + s_xi[i] for i in range(n)]
    )
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
    ob1, cex1 = _valid(
        f"[n={n}] every output preserved by the alignment",
        pre,
        z3.And(same),
        "s_ρ = Δ; s_ν_i = Δ + q_i - q'_i on ⊤, 0 on ⊥"
        + ("; s_ξ_i = r_i - r'_i on ⊤" if value_scale is not None else "")
        + "; z3 over all real T, ρ, ν, q, q'",
        variables,
        f"SVT alignment keeps the output (n={n}, c={c})",
    )
    ob2, cex2 = _valid(
        f"[n={n}] alignment cost <= {cost_bound}",
        pre,
        cost <= _rv(cost_bound),
        f"at most {answers} ⊤ answers, each |Δ + q_i - q'_i| <= 2Δ (z3)",
        variables,
        f"SVT alignment cost <= {cost_bound} (n={n}, c={c})",
    )
    le = _is_le(cost_bound, eps)
    ob3 = Obligation(
        f"[n={n}] claimed ε covers the alignment cost: {cost_bound} <= {eps}",
        sp.Le(cost_bound, eps),
        "exact rational comparison (z3)",
        "z3",
        le,
        "" if le else f"NOT DISCHARGED: alignment cost {cost_bound} exceeds ε = {eps}",
    )
    obligations += [ob1, ob2, ob3]
    holds = all(o.discharged for o in obligations)
    return AlignmentCheck(
        tuple(obligations),
        holds,
        cost_bound,
        n,
        cex1 or cex2,
        time.perf_counter() - t0,
        f"sparse vector, n = {n} queries, cutoff c = {c}",
    )


def check_range(fn, ns: Sequence[int], **kwargs: Any) -> list[AlignmentCheck]:
    """Run an alignment check for each number of queries in ``ns``."""
    return [fn(n, **kwargs) for n in ns]


# --------------------------------------------------------------------------- lemmas for EVERY number of queries


@dataclass(frozen=True)
class AlignmentLemma:
    """The alignment argument proved once for every number ``n`` of queries/candidates: obligations
    about ONE generic query (or one generic pair of candidates) with symbolic parameters and a
    symbolic count of ⊤ answers, so that the proof's size does not depend on n.

    ``obligations``: side conditions (sympy + z3 on the slack form; z3 on the raw form over all reals
    and integer counts) then the conclusion (checker ``"lemma"``, discharged iff every side condition
    is). ``symbolic_bound``: the cost bound in the symbols; ``cost_bound``: instantiated with the
    mechanism's parameters (and with its n where the bound depends on n: SVT without cutoff)."""

    obligations: tuple[Obligation, ...]
    holds: bool
    symbolic_bound: sp.Expr
    cost_bound: sp.Expr
    seconds: float = 0.0
    description: str = ""


def _structural(statement: str, justification: str) -> Obligation:
    """A step argued in words (a definition, an induction principle, the shape of argmax); nothing
    symbolic to decide (checker ``"structural"``)."""
    return Obligation(statement, sp.true, justification, "structural", True, "argued in the justification")


def _raw_z3(statement: str, pre: Any, goal: Any, justification: str, variables: dict[str, Any]) -> Obligation:
    ob, _ = _valid(statement, pre, goal, justification, variables, statement)
    return ob


def _shift_cost(d: sp.Symbol) -> tuple[list[Obligation], sp.Expr]:
    """``|Δ + q_i − q'_i| <= 2Δ`` for ``|q_i − q'_i| <= Δ``: the triangle inequality (library lemma,
    instantiated at y = q_i + Δ, x = q_i, x' = q'_i) and the slack step ``|q_i − q'_i| = Δ − s``."""
    from ._kernel import discharge, slack, sym
    from ._lemmas import triangle_inequality

    qi, qpi = sym("q_i"), sym("q'_i")
    tri = triangle_inequality()
    y, x, x2 = sym("y"), sym("x"), sym("x'")
    inst = tri[-1].formula.xreplace({y: qi + d, x: qi, x2: qpi})
    obs = list(tri)
    obs.append(
        Obligation(
            "instantiate the triangle inequality at y = q_i + Δ, x = q_i, x' = q'_i: "
            "|Δ + q_i − q'_i| − Δ <= |q_i − q'_i|",
            inst,
            "the lemma holds for all reals y, x, x' (|y − x| = Δ since Δ > 0)",
            "lemma",
            tri[-1].discharged,
            "" if tri[-1].discharged else "triangle lemma not discharged",
        )
    )
    s = slack("s_d")
    obs.append(
        discharge(
            "|Δ + q_i − q'_i| <= Δ + |q_i − q'_i| <= 2Δ where |q_i − q'_i| = Δ − s_d, s_d >= 0",
            sp.Le(d + (d - s), 2 * d),
            "linf neighbours (slack); the triangle step above",
        )
    )
    q, qp = z3.Reals("q_i qp_i")
    dz = z3.Real("Delta")
    obs.append(
        _raw_z3(
            "[all reals] |q_i − q'_i| <= Δ implies |Δ + q_i − q'_i| <= 2Δ",
            z3.And(dz > 0, _abs(q - qp) <= dz),
            _abs(dz + q - qp) <= 2 * dz,
            "z3 over all real q_i, q'_i, Δ > 0",
            {"q_i": q, "q'_i": qp, "Delta": dz},
        )
    )
    return obs, 2 * d


def _lemma_conclusion(
    statement: str, formula: sp.Basic, side: list[Obligation], justification: str
) -> list[Obligation]:
    ok = all(o.discharged for o in side)
    return side + [
        Obligation(statement, formula, justification, "lemma", ok, "" if ok else "a side condition is not discharged")
    ]


@functools.lru_cache(maxsize=None)
def _rnm_lemma(noise: str, ties: str) -> tuple[tuple[Obligation, ...], sp.Expr, tuple]:
    from ._kernel import discharge, slack, sym

    b, d = sym("b", positive=True), sym("Delta", positive=True)
    qi, qpi, qj, qpj = sym("q_i"), sym("q'_i"), sym("q_j"), sym("q'_j")
    nonneg = noise == "exponential"
    ei = sym("eta_i", nonnegative=True) if nonneg else sym("eta_i")
    ej = sym("eta_j", nonnegative=True) if nonneg else sym("eta_j")
    si = qi - qpi + d
    obs: list[Obligation] = []
    obs.append(
        _structural(
            "alignment for output i (generic i, any number n of candidates): η_i -> η_i + s_i with "
            "s_i = q_i − q'_i + Δ, η_j -> η_j for every j ≠ i; s depends on (q, q', i) only, so η -> η + s is a "
            "translation (injective, Jacobian 1)",
            "definition of the alignment (Ding et al. 2019 'free gap' / Dwork & Roth 2014 Claim 3.9 argument)",
        )
    )
    obs.append(
        _structural(
            "argmax with ties to the first index: output i  <=>  for every j < i: q_j + η_j < q_i + η_i, and for every "
            "j > i: q_j + η_j <= q_i + η_i -- a conjunction of one condition per other candidate j, for every n",
            "numpy.argmax returns the first maximal index (the sampler: np.argmax(q + η, axis=1))",
        )
    )
    obs.append(
        discharge(
            "the aligned noisy score of candidate i on q' is q_i + η_i + Δ",
            sp.Eq(qpi + ei + si, qi + ei + d),
            "algebra",
        )
    )
    a, e = slack("a"), slack("e_j")
    # q'_j <= q_j + Δ (linf), written q'_j = q_j + Δ − e_j
    sub = {qpj: qj + d - e}
    obs.append(
        discharge(
            "[generic j > i] q_j + η_j <= q_i + η_i implies q'_j + η_j <= q'_i + η_i + s_i "
            "(slack form: η_j = q_i + η_i − q_j − a, q'_j = q_j + Δ − e_j, a, e_j >= 0)",
            sp.Le((qpj + ej).xreplace(sub).xreplace({ej: qi + ei - qj - a}), qpi + ei + si),
            "linf neighbours; the aligned score of i gains exactly Δ + (q_i − q'_i) - see above",
        )
    )
    ap = sym("a_strict", positive=True)
    if ties == "first":
        obs.append(
            discharge(
                "[generic j < i] q_j + η_j < q_i + η_i implies q'_j + η_j < q'_i + η_i + s_i "
                "(slack form: η_j = q_i + η_i − q_j − a, a > 0; q'_j = q_j + Δ − e_j, e_j >= 0)",
                sp.Lt((qpj + ej).xreplace(sub).xreplace({ej: qi + ei - qj - ap}), qpi + ei + si),
                "linf neighbours; strict comparison kept",
            )
        )
    # raw form, z3 over all reals
    Q = {nm: z3.Real(nm) for nm in ("q_i", "qp_i", "q_j", "qp_j", "eta_i", "eta_j", "Delta")}
    nb = z3.And(Q["Delta"] > 0, _abs(Q["q_i"] - Q["qp_i"]) <= Q["Delta"], _abs(Q["q_j"] - Q["qp_j"]) <= Q["Delta"])
    if nonneg:
        nb = z3.And(nb, Q["eta_i"] >= 0, Q["eta_j"] >= 0)
    vi, vj = Q["q_i"] + Q["eta_i"], Q["q_j"] + Q["eta_j"]
    vi2 = Q["qp_i"] + Q["eta_i"] + (Q["q_i"] - Q["qp_i"] + Q["Delta"])
    vj2 = Q["qp_j"] + Q["eta_j"]
    obs.append(
        _raw_z3(
            "[all reals, generic j > i] q_j + η_j <= q_i + η_i implies q'_j + η_j <= q'_i + η_i + s_i",
            z3.And(nb, vj <= vi),
            vj2 <= vi2,
            "z3 over all real q, q', η (linear real arithmetic)",
            Q,
        )
    )
    if ties == "first":
        obs.append(
            _raw_z3(
                "[all reals, generic j < i] q_j + η_j < q_i + η_i implies q'_j + η_j < q'_i + η_i + s_i",
                z3.And(nb, vj < vi),
                vj2 < vi2,
                "z3 over all real q, q', η (linear real arithmetic)",
                Q,
            )
        )
    obs.append(
        _structural(
            "output preserved for every n: if argmax(q + η) = i then argmax(q' + η + s) = i",
            "the output is the conjunction over j ≠ i of the pairwise conditions (above), each preserved for a generic "
            "j; a conjunction of preserved conditions is preserved, whatever the number of candidates",
        )
    )
    if nonneg:
        obs.append(
            discharge(
                "one-sided noise stays in its support: η_i + s_i >= 0 (s_i = e_i >= 0 where q'_i = q_i + Δ − e_i)",
                sp.Ge(ei + slack("e_i"), 0),
                "η_i >= 0 and q'_i <= q_i + Δ",
            )
        )
    cost_obs, per = _shift_cost(d)
    obs += cost_obs
    obs.append(_structural("alignment cost Σ_k |s_k|/b = |s_i|/b (s_j = 0 for every j ≠ i, any n)", "definition of s"))
    if nonneg:
        obs.append(
            discharge(
                "exponential density ratio on the support: ln p(η_i) − ln p(η_i + s_i) = s_i/b "
                "(p(x) = e^{−x/b}/b, x >= 0)",
                sp.Eq(
                    sp.expand_log(sp.log(sp.exp(-ei / b) / b) - sp.log(sp.exp(-(ei + si) / b) / b), force=False), si / b
                ),
                "expand_log; b > 0",
            )
        )
    else:
        obs.append(triangle_lemma())
        obs.append(
            _structural(
                "Laplace density ratio: p(η)/p(η + s) = Π_k e^{(|η_k + s_k| − |η_k|)/b} <= e^{Σ_k |s_k|/b}",
                "the triangle lemma above, for each coordinate k, multiplied over coordinates",
            )
        )
    bound = per / b
    obs = _lemma_conclusion(
        "for EVERY number of candidates n and every output i: ln P_q[M = i] − ln P_q'[M = i] <= 2Δ/b",
        sp.Le(sym("L_i"), bound),
        obs,
        "P_q[i] = ∫_{E_i(q)} p(η) dη <= ∫ e^{cost} p(η + s) dη <= e^{2Δ/b} P_q'[i] (translation, preserved output)",
    )
    return tuple(obs), bound, (b, d)


def report_noisy_max_all_n(
    scale: Any, sensitivity: Any, *, noise: str = "laplace", ties: str = "first"
) -> AlignmentLemma:
    """Report noisy max for EVERY number of candidates: the alignment of :func:`report_noisy_max`
    argued on one generic pair (output i, other candidate j) with symbolic b, Δ, then instantiated.

    Obligations (each discharged by sympy on the slack form and by z3 on the raw form): the aligned
    winner's score gains Δ + q_i − q'_i; for a generic j > i (resp. j < i) ``v_j <= v_i`` (``<``)
    is preserved; one-sided noise stays in its support; ``|s_i| <= 2Δ``; the density ratio is at most
    ``e^{|s_i|/b}``. The argmax being the conjunction of the per-j conditions, the argument does not
    depend on n. Cost bound 2Δ/b."""
    t0 = time.perf_counter()
    obs, bound, (b, d) = _rnm_lemma(noise, ties)
    inst = bound.subs({b: sp.sympify(scale), d: sp.sympify(sensitivity)})
    return AlignmentLemma(
        obs,
        all(o.discharged for o in obs),
        bound,
        inst,
        time.perf_counter() - t0,
        f"report noisy max ({noise} noise), every number of candidates",
    )


def _svt_step_z3(cutoff: bool, strict: bool, nu_zero: bool, value: str | None) -> Obligation:
    """The induction step of the SVT alignment for ONE generic query i, by z3 over all reals and a
    symbolic integer count κ of ⊤ answers before i (equal in both runs: the induction hypothesis) and a
    symbolic cutoff c: liveness, the answer and the released value agree, and the count stays <= c."""
    R = {nm: z3.Real(nm) for nm in ("T", "rho", "q_i", "qp_i", "nu_i", "r_i", "rp_i", "xi_i", "Delta", "Delta_g")}
    kappa, c = z3.Int("kappa"), z3.Int("c")
    d = R["Delta"]
    nu = z3.RealVal(0) if nu_zero else R["nu_i"]
    live = (kappa < c) if cutoff else z3.BoolVal(True)

    def above(x: Any, thr: Any) -> Any:
        return x > thr if strict else x >= thr

    top = z3.And(live, above(R["q_i"] + nu, R["T"] + R["rho"]))
    s_nu = z3.RealVal(0) if nu_zero else z3.If(top, d + R["q_i"] - R["qp_i"], z3.RealVal(0))
    nu2 = nu + s_nu
    top2 = z3.And(live, above(R["qp_i"] + nu2, R["T"] + R["rho"] + d))
    goal = [top == top2]
    if cutoff:
        goal.append(kappa + z3.If(top, 1, 0) <= c)
    pre = [d > 0, _abs(R["q_i"] - R["qp_i"]) <= d, kappa >= 0, c >= 1]
    if cutoff:
        pre.append(kappa <= c)
    if value == "fresh":
        s_xi = z3.If(top, R["r_i"] - R["rp_i"], z3.RealVal(0))
        goal.append(z3.Implies(top, R["r_i"] + R["xi_i"] == R["rp_i"] + R["xi_i"] + s_xi))
        pre += [R["Delta_g"] > 0, _abs(R["r_i"] - R["rp_i"]) <= R["Delta_g"]]
    elif value == "nu":
        goal.append(z3.Implies(top, R["q_i"] + nu == R["qp_i"] + nu2))
    return _raw_z3(
        "[all reals, integer count κ] induction step for a generic query i: with the same count κ of ⊤ "
        "answers before i in both runs, query i is answered in both or neither, with the same answer"
        + (" and released value" if value else "")
        + (", and the count stays <= c" if cutoff else ""),
        z3.And(pre),
        z3.And(goal),
        "z3 over all real T, ρ, q_i, q'_i, ν_i and integers κ, c (linear arithmetic with If)",
        {**R, "kappa": kappa, "c": c},
    )


@functools.lru_cache(maxsize=None)
def _svt_lemma(
    cutoff: bool, strict: bool, nu_zero: bool, value: str | None
) -> tuple[tuple[Obligation, ...], sp.Expr, tuple]:
    from ._kernel import discharge, slack, sym

    d, br, bn = sym("Delta", positive=True), sym("b_rho", positive=True), sym("b_nu", positive=True)
    bv, dg = sym("b_value", positive=True), sym("Delta_g", positive=True)
    T, rho, qi, qpi, nui = sym("T"), sym("rho"), sym("q_i"), sym("q'_i"), sym("nu_i")
    ri, rpi, xii = sym("r_i"), sym("r'_i"), sym("xi_i")
    m = sym("m", integer=True, positive=True)  # the maximal number of ⊤ answers: min(c, n), or n without cutoff
    t = sym("t", integer=True, nonnegative=True)  # the number of ⊤ answers in the output
    nu = sp.Integer(0) if nu_zero else nui
    s_top = sp.Integer(0) if nu_zero else d + qi - qpi
    obs: list[Obligation] = []
    obs.append(
        _structural(
            "alignment for an output ω (any number n of queries): ρ -> ρ + Δ; for each query i answered ⊤ in ω: "
            + ("(no query noise to shift)" if nu_zero else "ν_i -> ν_i + Δ + q_i − q'_i")
            + ("; ξ_i -> ξ_i + r_i − r'_i" if value == "fresh" else "")
            + "; every other noise unchanged. s depends on "
            "(q, q', ω) only: a translation (injective, Jacobian 1)",
            "Lyu, Su & Li 2017, proof of Thm. 2 (Alg. 1); ShadowDP's SVT alignment",
        )
    )
    a, ap, e = slack("a"), sym("a_strict", positive=True), slack("e_i")
    # q'_i <= q_i + Δ written q'_i = q_i + Δ − e_i; q'_i >= q_i − Δ written q'_i = q_i − Δ + e_i
    ge = sp.Gt if strict else sp.Ge
    lt = sp.Le if strict else sp.Lt
    above_slack = ap if strict else a  # q_i + ν_i − T − ρ on a ⊤ answer
    below_slack = a if strict else ap  # T + ρ − q_i − ν_i on a ⊥ answer
    if nu_zero:
        top_f = ge(qpi.xreplace({qpi: qi - d + e}).xreplace({qi: T + rho + above_slack}), T + rho + d)
        top_words = "q_i = T + ρ + a, q'_i = q_i − Δ + e_i"
        bot_f = lt((qi + d - e).xreplace({qi: T + rho - below_slack}), T + rho + d)
    else:
        top_f = ge((qpi + nui + s_top).xreplace({nui: T + rho + above_slack - qi}), T + rho + d)
        top_words = "ν_i = T + ρ + a − q_i"
        bot_f = lt((qi + d - e + nui).xreplace({nui: T + rho - below_slack - qi}), T + rho + d)
    obs.append(
        discharge(
            f"[generic query i, answered ⊤ on q] the aligned run on q' answers ⊤: "
            f"q'_i + ν'_i {'>' if strict else '>='} T + ρ + Δ (slack form: {top_words})",
            top_f,
            "the shift Δ + q_i − q'_i moves q'_i + ν_i to q_i + ν_i + Δ; ρ moved by Δ",
        )
    )
    obs.append(
        discharge(
            f"[generic query i, answered ⊥ on q] the aligned run on q' answers ⊥: "
            f"q'_i + ν_i {'<=' if strict else '<'} T + ρ + Δ (slack form: ν_i = T + ρ − a − q_i, "
            "q'_i = q_i + Δ − e_i)",
            bot_f,
            "linf neighbours; ρ moved by Δ, ν_i unchanged",
        )
    )
    if value == "fresh":
        obs.append(
            discharge(
                "[generic query i, answered ⊤] the released value is kept: r'_i + ξ_i + (r_i − r'_i) = r_i + ξ_i",
                sp.Eq(rpi + xii + (ri - rpi), ri + xii),
                "algebra",
            )
        )
    elif value == "nu":
        obs.append(
            discharge(
                "[generic query i, answered ⊤] the released value q_i + ν_i is kept: "
                "q'_i + ν_i + (Δ + q_i − q'_i) = q_i + ν_i",
                sp.Eq(qpi + nu + s_top, qi + nu),
                "algebra",
            )
        )
    obs.append(_svt_step_z3(cutoff, strict, nu_zero, value))
    obs.append(
        _structural(
            "output preserved for every n: by induction on i = 1..n, both runs have the same count of ⊤ answers before "
            "query i, hence the same liveness"
            + (" (count < c)" if cutoff else "")
            + ", the same answer at i (step above) "
            "and the same count after i; base: both counts are 0 before query 1",
            "induction on the query index; conditional on the noise the algorithm is a deterministic loop over the queries",
        )
    )
    # cost
    obs.append(discharge("threshold noise: |s_ρ|/b_ρ = Δ/b_ρ", sp.Eq(sp.Abs(d) / br, d / br), "Δ > 0"))
    per = sp.Integer(0)
    if not nu_zero:
        cost_obs, shift = _shift_cost(d)
        obs += cost_obs
        per += shift / bn
    if value == "fresh":
        sv = slack("s_g")
        obs.append(
            discharge(
                "[generic ⊤] value noise: |r_i − r'_i|/b_value <= Δ_g/b_value where |r_i − r'_i| = Δ_g − s_g",
                sp.Le((dg - sv) / bv, dg / bv),
                "grid sensitivity Δ_g of the rounded answers (slack)",
            )
        )
        per += dg / bv
    obs.append(
        _structural(
            "a query answered ⊥ or not answered has zero shift: its cost term is 0", "definition of the alignment"
        )
    )
    obs.append(
        _structural(
            "Σ over the n queries of the per-query cost <= t·(per-⊤ bound), t = the number of ⊤ answers in ω",
            "finite sums of term-wise inequalities add (each ⊤ term bounded above, every other term 0), any n",
        )
    )
    obs.append(
        _structural(
            "t <= m" + (" = min(c, n): the count never exceeds c (induction step above) nor n" if cutoff else " = n"),
            "the cutoff invariant of the induction step; at most one ⊤ per query",
        )
    )
    s_t = slack("s_t")
    total = d / br + t * per
    obs.append(
        discharge(
            "total cost Δ/b_ρ + t·P <= Δ/b_ρ + m·P for t = m − s_t <= m (P >= 0 the per-⊤ bound)",
            sp.Le(total.xreplace({t: m - s_t}), d / br + m * per),
            "P >= 0; slack s_t >= 0",
        )
    )
    obs.append(triangle_lemma())
    obs.append(
        _structural(
            "density ratio: p(η)/p(η + s) <= e^{Σ_k |s_k|/b_k} for the Laplace draws ρ, ν"
            + (
                " and the grid-Laplace ξ (pmf ∝ e^{−|k|/t} in grid units; the shift r_i − r'_i is a grid multiple)"
                if value == "fresh"
                else ""
            ),
            "the triangle lemma above, per coordinate, multiplied over coordinates",
        )
    )
    bound = d / br + m * per
    obs = _lemma_conclusion(
        "for EVERY number of queries n and every output ω: ln P_q[ω] − ln P_q'[ω] <= Δ/b_ρ + m·P",
        sp.Le(sym("L_omega"), bound),
        obs,
        "P_q[ω] = ∫_{E_ω(q)} p <= e^{cost} ∫_{E_ω(q')} p (translation preserving the output)",
    )
    return tuple(obs), bound, (d, br, bn, bv, dg, m)


def sparse_vector_all_n(
    n: int,
    c: int,
    rho_scale: Any,
    nu_scale: Any,
    sensitivity: Any,
    *,
    value_scale: Any = None,
    value_sensitivity: Any = None,
    strict: bool = False,
    value_from_nu: bool = False,
    nu_zero: bool = False,
    cutoff: bool = True,
) -> AlignmentLemma:
    """Sparse vector for EVERY number of queries: the alignment of :func:`sparse_vector` argued on one
    generic query i (⊤ and ⊥ cases, released value) with symbolic parameters, an induction over the
    queries whose step z3 checks with a symbolic count κ of earlier ⊤ answers, and the cost as a sum of
    per-query terms bounded by (number of ⊤ answers t <= m) × (per-⊤ bound). ``n`` and ``c`` only
    instantiate the bound's m (= min(c, n) with cutoff, n without)."""
    t0 = time.perf_counter()
    value = "fresh" if value_scale is not None else ("nu" if value_from_nu else None)
    obs, bound, (d, br, bn, bv, dg, m) = _svt_lemma(bool(cutoff), bool(strict), bool(nu_zero), value)
    subs = {d: sp.sympify(sensitivity), br: sp.sympify(rho_scale), m: sp.Integer(min(c, n) if cutoff else n)}
    if not nu_zero:
        subs[bn] = sp.sympify(nu_scale)
    if value == "fresh":
        subs[bv] = sp.sympify(value_scale)
        subs[dg] = sp.sympify(sensitivity if value_sensitivity is None else value_sensitivity)
    return AlignmentLemma(
        obs,
        all(o.discharged for o in obs),
        bound,
        bound.subs(subs),
        time.perf_counter() - t0,
        f"sparse vector, every number of queries (instantiated at n = {n}, cutoff {c if cutoff else 'none'})",
    )
