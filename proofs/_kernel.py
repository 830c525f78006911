"""The proof kernel: build and discharge obligations in log space, double-check them with z3,
falsify claims by exact evaluation, and assemble a :class:`~dpharness.proofs._model.Proof`.

Rules (STYLE rule 5, OpenDP's proof template):

* Only ``is True`` discharges. sympy answering ``None`` (undecided) is a failure, never a pass.
* An obligation is a sympy relational (``Le``, ``Lt``, ``Ge``, ``Gt``, ``Eq``) or a conjunction of
  them. Signs must be decidable from symbol assumptions: introduce slack variables
  (:func:`slack`, :func:`ordering_cases`) instead of hypotheses sympy cannot use.
* Where the obligation is expressible in real arithmetic (polynomials, division, ``Abs``/``Max``/
  ``Min``/``Piecewise``; ``exp``/``log`` abstracted as fresh variables with positivity, monotonicity
  and tangent-line facts) z3 checks it independently. Both agree -> checker ``"sympy+z3"``. They
  disagree (one proves, the other holds an exactly confirmed counterexample) -> :class:`CheckerDisagreement`
  is raised: a kernel bug must never be papered over.
* Falsification evaluates exactly (sympy Rationals; transcendental numbers to guaranteed sign via
  sympy's adaptive evalf, cross-checked with mpmath at 60 digits). A confirmed violation of the claim
  makes the verdict REFUTED with its :class:`~dpharness.core.Witness`. Numeric evidence alone is a
  note ("checked numerically"), never PROVED.
* Parameters enter through :func:`param` (= ``dpharness.core.exact``): floats as their exact binary
  value (the number the code computes with), never sympy Floats.

Usage, reading like OpenDP's proof template::

    pb = ProofBuilder(mechanism)
    pb.precondition("neighbours: |x - x'| <= Δ")          # -> Proof.assumptions
    pb.pseudocode("return x + Laplace(b)")                 # -> Proof.notes
    pb.postcondition("sup_y ln p(y|x)/p(y|x') <= Δ/b")     # -> Proof.notes
    with pb.phase("derive"):
        pb.check("loss bounded", sp.Le(loss, bound), "triangle inequality")
    pb.claim_bound(bound)                                   # obligation: bound <= claimed ε
    return pb.finish(bound, witness=...)
"""

from __future__ import annotations

import contextlib
import itertools
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import mpmath
import sympy as sp
import z3

from dpharness.core import Claim, Mechanism, Witness, exact
from dpharness.errors import DPHarnessError

from ._model import Obligation, Proof, Verdict

__all__ = [
    "CheckerDisagreement",
    "param",
    "sym",
    "slack",
    "bounded_by",
    "sympy_decide",
    "z3_decide",
    "discharge",
    "Case",
    "ordering_cases",
    "abs_sign_cases",
    "check_cases",
    "exact_sign",
    "exceeds",
    "confirm_violation",
    "find_violation",
    "numeric_evidence",
    "ProofBuilder",
]

_Z3_TIMEOUT_MS = 4000
_MP_DPS = 60


class CheckerDisagreement(DPHarnessError, AssertionError):
    """sympy and z3 gave contradicting answers on the same obligation: a kernel bug, reported loudly."""


# --------------------------------------------------------------------------- exact parameters and symbols


def param(value: Any) -> sp.Expr:
    """An exact sympy number for a mechanism parameter (``dpharness.core.exact``)."""
    return exact(value)


def sym(name: str, **assumptions: bool) -> sp.Symbol:
    """A real symbol (``real=True`` unless said otherwise) with sympy assumptions (positive, nonnegative...)."""
    assumptions.setdefault("real", True)
    return sp.Symbol(name, **assumptions)


def slack(name: str) -> sp.Symbol:
    """A nonnegative slack variable: write ``a' = a + d`` (d >= 0) or ``d = Δ - s`` (s >= 0)."""
    return sp.Symbol(name, real=True, nonnegative=True)


def bounded_by(bound: sp.Expr, name: str = "s") -> tuple[sp.Expr, sp.Symbol]:
    """A quantity known to be at most ``bound``, written ``bound - s`` with slack ``s >= 0``
    (e.g. ``d = Δ - s`` for ``d <= Δ``), so that sympy can decide signs. Returns (expression, s)."""
    s = slack(name)
    return sp.sympify(bound) - s, s


# --------------------------------------------------------------------------- sympy

_REL = (sp.Le, sp.Lt, sp.Ge, sp.Gt, sp.Eq, sp.Ne)


def _gap(rel: sp.Basic) -> tuple[sp.Expr, str]:
    """(g, kind) with rel <=> g >= 0 (kind 'nonneg'), g > 0 ('pos'), g == 0 ('zero') or g != 0 ('nonzero')."""
    if isinstance(rel, (sp.Le, sp.Lt)):
        return rel.rhs - rel.lhs, "nonneg" if isinstance(rel, sp.Le) else "pos"
    if isinstance(rel, (sp.Ge, sp.Gt)):
        return rel.lhs - rel.rhs, "nonneg" if isinstance(rel, sp.Ge) else "pos"
    if isinstance(rel, sp.Eq):
        return rel.lhs - rel.rhs, "zero"
    return rel.lhs - rel.rhs, "nonzero"


def _ask(g: sp.Expr, kind: str) -> bool | None:
    if kind == "nonneg":
        return g.is_nonnegative
    if kind == "pos":
        return g.is_positive
    if kind == "zero":
        return g.is_zero
    z = g.is_zero
    return None if z is None else not z


def _simplifications(g: sp.Expr) -> Iterator[sp.Expr]:
    yield g
    yield sp.expand_log(g)  # safe: uses assumptions, never force=True
    yield sp.cancel(sp.together(g))
    yield sp.factor(g)
    yield sp.simplify(g)
    if g.has(sp.erfc, sp.erf):
        yield sp.simplify(g.rewrite(sp.erf))
    if g.has(sp.log):
        yield sp.simplify(sp.logcombine(g))


def sympy_decide(formula: sp.Basic) -> tuple[bool | None, str]:
    """sympy's answer on ``formula`` (True / False / None) and how it was reached.

    Tries the raw gap, then expand_log / cancel / factor / simplify; the first definite answer wins.
    For formulas without free symbols the sign comes from sympy's adaptive-precision evaluation."""
    if formula is sp.true or formula is True:
        return True, "trivially true"
    if formula is sp.false or formula is False:
        return False, "trivially false"
    if isinstance(formula, sp.And):
        details = []
        for part in formula.args:
            ans, det = sympy_decide(part)
            details.append(det)
            if ans is not True:
                return ans, f"conjunct {part}: {det}"
        return True, "; ".join(details)
    if not isinstance(formula, _REL):
        return None, f"not a relational: {type(formula).__name__}"
    g, kind = _gap(formula)
    for i, h in enumerate(_simplifications(g)):
        ans = _ask(h, kind)
        if ans is not None:
            how = ("raw", "expand_log", "cancel", "factor", "simplify", "rewrite/simplify")[min(i, 5)]
            return (
                bool(ans),
                f"sympy ({how}): ({h}) {'>= 0' if kind == 'nonneg' else '> 0' if kind == 'pos' else '== 0' if kind == 'zero' else '!= 0'} is {bool(ans)}",
            )
    return None, f"sympy could not decide the sign of {g} (None is a failure)"


# --------------------------------------------------------------------------- z3


class _Inexpressible(Exception):
    pass


class _Z3:
    """sympy -> z3 over the reals. exp/log become fresh variables with facts (abstraction)."""

    def __init__(self) -> None:
        self.vars: dict[sp.Symbol, Any] = {}
        self.exps: list[tuple[Any, Any, sp.Expr]] = []  # (E, arg_z3, arg_sympy)
        self.logs: list[tuple[Any, Any, sp.Expr]] = []  # (L, arg_z3, arg_sympy)
        self.aux: list[Any] = []
        self.abstracted = False
        self._cache: dict[sp.Basic, Any] = {}

    def var(self, s: sp.Symbol) -> Any:
        if s not in self.vars:
            if s.is_integer:
                v = z3.ToReal(z3.Int(s.name))
            else:
                v = z3.Real(s.name)
            self.vars[s] = v
            if s.is_positive:
                self.aux.append(v > 0)
            elif s.is_nonnegative:
                self.aux.append(v >= 0)
            if s.is_negative:
                self.aux.append(v < 0)
            elif s.is_nonpositive:
                self.aux.append(v <= 0)
        return self.vars[s]

    def tr(self, e: sp.Basic) -> Any:
        if e in self._cache:
            return self._cache[e]
        out = self._tr(e)
        self._cache[e] = out
        return out

    def _tr(self, e: sp.Basic) -> Any:
        if e is sp.true:
            return z3.BoolVal(True)
        if e is sp.false:
            return z3.BoolVal(False)
        if isinstance(e, sp.Symbol):
            return self.var(e)
        if isinstance(e, sp.Integer):
            return z3.RealVal(int(e))
        if isinstance(e, sp.Rational):
            return z3.RealVal(f"{e.p}/{e.q}")
        if e is sp.E:
            return self.tr(sp.exp(1, evaluate=False))
        if isinstance(e, sp.Float):
            raise _Inexpressible("sympy Float (parameters must be exact)")
        if isinstance(e, sp.Add):
            return z3.Sum([self.tr(a) for a in e.args])
        if isinstance(e, sp.Mul):
            return z3.Product([self.tr(a) for a in e.args])
        if isinstance(e, sp.Pow):
            base, ex = e.args
            if ex.is_Integer:
                n = int(ex)
                b = self.tr(base)
                if n == 0:
                    return z3.RealVal(1)
                p = b
                for _ in range(abs(n) - 1):
                    p = p * b
                if n < 0:
                    self.aux.append(b != 0)
                    return 1 / p
                return p
            if ex == sp.Rational(1, 2) or ex == sp.Rational(-1, 2):
                b = self.tr(base)
                r = z3.FreshReal("sqrt")
                self.aux += [r >= 0, r * r == b, b >= 0]
                return r if ex > 0 else 1 / r
            if base is sp.E:
                return self.tr(sp.exp(ex, evaluate=False))
            raise _Inexpressible(f"power {e}")
        if isinstance(e, sp.exp):
            arg = e.args[0]
            a = self.tr(arg)
            for E, a2, arg2 in self.exps:
                if arg2 == arg:
                    return E
            E = z3.FreshReal("exp")
            self.exps.append((E, a, arg))
            self.abstracted = True
            return E
        if isinstance(e, sp.log):
            arg = e.args[0]
            a = self.tr(arg)
            for L, a2, arg2 in self.logs:
                if arg2 == arg:
                    return L
            L = z3.FreshReal("log")
            self.logs.append((L, a, arg))
            self.aux.append(a > 0)
            self.abstracted = True
            return L
        if isinstance(e, sp.Abs):
            a = self.tr(e.args[0])
            return z3.If(a >= 0, a, -a)
        if isinstance(e, (sp.Max, sp.Min)):
            args = [self.tr(a) for a in e.args]
            out = args[0]
            for a in args[1:]:
                out = z3.If(a >= out, a, out) if isinstance(e, sp.Max) else z3.If(a <= out, a, out)
            return out
        if isinstance(e, sp.Piecewise):
            out = None
            for expr, cond in reversed(e.args):
                val = self.tr(expr)
                out = val if (out is None or cond is sp.true) else z3.If(self.tr(cond), val, out)
            return out
        if isinstance(e, sp.Le):
            return self.tr(e.lhs) <= self.tr(e.rhs)
        if isinstance(e, sp.Lt):
            return self.tr(e.lhs) < self.tr(e.rhs)
        if isinstance(e, sp.Ge):
            return self.tr(e.lhs) >= self.tr(e.rhs)
        if isinstance(e, sp.Gt):
            return self.tr(e.lhs) > self.tr(e.rhs)
        if isinstance(e, sp.Eq):
            return self.tr(e.lhs) == self.tr(e.rhs)
        if isinstance(e, sp.Ne):
            return self.tr(e.lhs) != self.tr(e.rhs)
        if isinstance(e, sp.And):
            return z3.And([self.tr(a) for a in e.args])
        if isinstance(e, sp.Or):
            return z3.Or([self.tr(a) for a in e.args])
        if isinstance(e, sp.Not):
            return z3.Not(self.tr(e.args[0]))
        if isinstance(e, sp.Implies):
            return z3.Implies(self.tr(e.args[0]), self.tr(e.args[1]))
        raise _Inexpressible(f"{type(e).__name__} ({e})")

    def facts(self) -> list:
        """Sound facts about the abstracted atoms: exp > 0, exp(a) >= 1 + a, exp(0) = 1, monotonicity
        between every pair, and log(u) <= a <=> u <= exp(a) between every log/exp pair."""
        f = list(self.aux)
        for E, a, _ in self.exps:
            f += [E > 0, E >= 1 + a, z3.Implies(a == 0, E == 1)]
        for (E1, a1, _), (E2, a2, _) in itertools.permutations(self.exps, 2):
            f += [z3.Implies(a1 <= a2, E1 <= E2), z3.Implies(a1 < a2, E1 < E2)]
        for L, u, _ in self.logs:
            f += [L <= u - 1, L * u >= u - 1, z3.Implies(u == 1, L == 0)]
        for (L1, u1, _), (L2, u2, _) in itertools.permutations(self.logs, 2):
            f += [z3.Implies(u1 <= u2, L1 <= L2), z3.Implies(u1 < u2, L1 < L2)]
        for (L, u, _), (E, a, _) in itertools.product(self.logs, self.exps):
            f += [(L <= a) == (u <= E), (L >= a) == (u >= E), (L < a) == (u < E)]
        return f


def _model_value(v: Any) -> sp.Expr | None:
    if z3.is_rational_value(v):
        return sp.Rational(v.numerator_as_long(), v.denominator_as_long())
    if z3.is_int_value(v):
        return sp.Integer(v.as_long())
    if z3.is_algebraic_value(v):
        return sp.Rational(v.approx(40).as_fraction().numerator, v.approx(40).as_fraction().denominator)
    return None


def z3_decide(formula: sp.Basic, hypotheses: Sequence[sp.Basic] = ()) -> tuple[str, str, dict | None]:
    """z3's answer on ``formula`` under ``hypotheses`` and the symbols' assumptions.

    Returns (status, detail, counterexample): status ``"proved"`` (negation unsat), ``"refuted"``
    (a model of the negation; exact, when nothing was abstracted), ``"abstract-sat"`` (a model of the
    negation exists only in the abstraction: no verdict), ``"unknown"`` or ``"inexpressible"``."""
    t = _Z3()
    try:
        goal = t.tr(formula)
        hyps = [t.tr(h) for h in hypotheses]
    except _Inexpressible as exc:
        return "inexpressible", f"z3: not expressible ({exc})", None
    s = z3.Solver()
    s.set("timeout", _Z3_TIMEOUT_MS)
    s.add(*t.facts(), *hyps, z3.Not(goal))
    res = s.check()
    if res == z3.unsat:
        return (
            "proved",
            "z3: negation unsat" + (" (exp/log abstracted, sound facts only)" if t.abstracted else ""),
            None,
        )
    if res == z3.unknown:
        return "unknown", f"z3: unknown ({s.reason_unknown()})", None
    model = s.model()
    cex = {}
    for symb, v in t.vars.items():
        val = model.eval(v, model_completion=True)
        cex[symb] = _model_value(val)
    if t.abstracted:
        return "abstract-sat", "z3: negation satisfiable in the exp/log abstraction (no verdict)", cex
    return "refuted", f"z3: counterexample {cex}", cex


# --------------------------------------------------------------------------- discharge


def _closed_truth(f: sp.Basic) -> bool | None:
    """Truth value of a symbol-free formula by exact evaluation."""
    if f is sp.true or f is True:
        return True
    if f is sp.false or f is False:
        return False
    if isinstance(f, sp.And):
        vals = [_closed_truth(a) for a in f.args]
        return False if False in vals else (None if None in vals else True)
    if isinstance(f, sp.Or):
        vals = [_closed_truth(a) for a in f.args]
        return True if True in vals else (None if None in vals else False)
    if isinstance(f, _REL) and not f.free_symbols:
        g, kind = _gap(f)
        sgn = exact_sign(g)
        if sgn is None:
            return None
        return {"nonneg": sgn >= 0, "pos": sgn > 0, "zero": sgn == 0, "nonzero": sgn != 0}[kind]
    return None


def _confirmed_false(formula: sp.Basic, cex: dict, hypotheses: Sequence[sp.Basic]) -> bool:
    """The model falsifies ``formula`` and satisfies ``hypotheses``, by exact evaluation."""
    subs = {k: v for k, v in cex.items() if v is not None}
    if _closed_truth(formula.subs(subs)) is not False:
        return False
    return all(_closed_truth(h.subs(subs)) is True for h in hypotheses)


def discharge(
    statement: str,
    formula: sp.Basic,
    justification: str,
    *,
    hypotheses: Sequence[sp.Basic] = (),
    use_z3: bool = True,
    use_sympy: bool = True,
) -> Obligation:
    """Check ``formula`` with sympy (only ``is True`` counts) and independently with z3.

    ``hypotheses`` are given to z3 only (sympy cannot use them; encode what sympy needs as symbol
    assumptions / slack variables). Raises :class:`CheckerDisagreement` when one checker proves the
    formula and the other refutes it (for z3: an exact, non-abstracted counterexample that sympy
    confirms by substitution). ``use_sympy=False`` leaves sympy out, for a statement whose proof is
    a rule applied to lemmas already discharged (the caller's justification) that sympy's
    simplifications do not decide: z3 alone then checks it, and the detail says sympy was not tried."""
    formula = sp.sympify(formula)
    if formula.has(sp.Float):
        return Obligation(
            statement,
            formula,
            justification,
            "sympy",
            False,
            "formula holds a sympy Float; parameters must be exact (not discharged)",
        )
    s_ans, s_det = sympy_decide(formula) if use_sympy else (None, "sympy not attempted")
    z_stat, z_det, cex = ("skipped", "z3 not attempted", None)
    if use_z3:
        z_stat, z_det, cex = z3_decide(formula, hypotheses)
    if z_stat == "refuted" and cex is not None:
        # confirm z3's counterexample exactly before calling it one
        if not _confirmed_false(formula, cex, hypotheses):
            z_stat, z_det = "unknown", z_det + " (not confirmed by exact substitution)"
    if s_ans is True and z_stat == "refuted":
        raise CheckerDisagreement(f"{statement}: sympy proves {formula} ({s_det}) but {z_det}")
    if s_ans is False and z_stat == "proved" and not hypotheses:
        # (with hypotheses z3 may prove what is false without them: sympy never sees hypotheses)
        raise CheckerDisagreement(f"{statement}: z3 proves {formula} ({z_det}) but sympy finds it false ({s_det})")
    detail = f"{s_det}; {z_det}"
    if s_ans is True and z_stat == "proved":
        return Obligation(statement, formula, justification, "sympy+z3", True, detail)
    if s_ans is True:
        return Obligation(statement, formula, justification, "sympy", True, detail)
    if z_stat == "proved":
        return Obligation(statement, formula, justification, "z3", True, detail)
    return Obligation(statement, formula, justification, "sympy", False, "NOT DISCHARGED: " + detail)


# --------------------------------------------------------------------------- case splits


@dataclass(frozen=True)
class Case:
    """One case of a split: ``hypothesis`` (words), ``subs`` (symbol -> expression in slack variables),
    ``slacks`` (the new nonnegative symbols)."""

    hypothesis: str
    subs: dict
    slacks: tuple = ()


def ordering_cases(points: Sequence[sp.Symbol], prefix: str = "d") -> list[Case]:
    """Every ordering p_1 <= p_2 <= ... of the breakpoints, as substitutions p_{i+1} = p_i + d_i with
    slack d_i >= 0 (ties are covered since d_i may be 0). The cases exhaust the reals: any real
    assignment sorts into at least one permutation."""
    points = list(points)
    for p in points:
        if not isinstance(p, sp.Symbol):
            raise DPHarnessError(f"points={points!r}: ordering cases need symbols; substitute expressions first.")
    cases = []
    for perm in itertools.permutations(points):
        subs = {perm[0]: perm[0]}
        slacks = []
        prev = perm[0]
        for i, p in enumerate(perm[1:], 1):
            d = slack(f"{prefix}{i}")
            slacks.append(d)
            subs[p] = prev + d
            prev = subs[p]
        hyp = " <= ".join(str(p) for p in perm)
        cases.append(Case(hyp, subs, tuple(slacks)))
    return cases


def abs_sign_cases(expr: sp.Basic) -> list[Case]:
    """Every sign pattern of the Abs(...) arguments in ``expr``: Abs(a) -> a (a >= 0) or -a (a <= 0).
    The hypotheses are recorded as words and returned in ``subs`` under the key ``"_hyps"`` for z3."""
    atoms = sorted(expr.atoms(sp.Abs), key=sp.default_sort_key)
    cases = []
    for signs in itertools.product((1, -1), repeat=len(atoms)):
        subs = {a: s * a.args[0] for a, s in zip(atoms, signs)}
        hyps = [sp.Ge(a.args[0], 0) if s > 0 else sp.Le(a.args[0], 0) for a, s in zip(atoms, signs)]
        words = ", ".join(f"{a.args[0]} {'>=' if s > 0 else '<='} 0" for a, s in zip(atoms, signs))
        cases.append(Case(words, {**subs, "_hyps": tuple(hyps)}))
    return cases


def check_cases(statement: str, formula: sp.Basic, cases: Sequence[Case], justification: str) -> list[Obligation]:
    """Discharge ``formula`` in every case (substituted; sympy + z3) plus one obligation recording that
    the cases are exhaustive. Abs-sign cases pass their hypotheses to z3 and to sympy via ``refine``."""
    out = []
    for c in cases:
        hyps = c.subs.get("_hyps", ())
        subs = {k: v for k, v in c.subs.items() if k != "_hyps"}
        f = formula.xreplace(subs) if hyps else formula.subs(subs)
        if hyps:
            f = sp.simplify(f)
        out.append(discharge(f"{statement} [case {c.hypothesis}]", f, justification, hypotheses=hyps))
    out.append(
        Obligation(
            f"{statement}: the {len(cases)} cases are exhaustive",
            sp.true,
            "every real assignment satisfies at least one case (all orderings / all sign patterns enumerated)",
            "lemma",
            all(o.discharged for o in out),
            "" if all(o.discharged for o in out) else "some case not discharged",
        )
    )
    return out


# --------------------------------------------------------------------------- exact evaluation / falsification


class _Log1p(sp.Function):
    """``ln(1 + x)`` of a number ``x``, evaluated by ``mpmath.log1p`` on ``x`` itself (accurate to the
    working precision relative to the result, whatever the size of x). sympy's ``log(1 + x)`` evaluates
    ``1 + x`` first: for |x| below the working precision (x = 1e-200 at 60 digits) that is exactly 1, and
    ``ln 1 = 0`` exactly, so a sign read from it is wrong (``ln(1 + x) − x/2`` read as −x/2 < 0)."""

    nargs = 1

    def _eval_evalf(self, prec: int) -> sp.Float:
        dps = mpmath.libmp.prec_to_dps(prec) + 10
        x = sp.N(self.args[0], dps)
        with mpmath.workdps(dps):
            return sp.Float(mpmath.log1p(mpmath.mpf(x)), dps)

    def _eval_is_extended_real(self) -> bool | None:
        return (self.args[0] + 1).is_positive

    def _eval_is_finite(self) -> bool | None:
        return (self.args[0] + 1).is_positive

    def _eval_is_extended_positive(self) -> bool | None:
        return self.args[0].is_extended_positive

    def _eval_is_extended_negative(self) -> bool | None:
        return self.args[0].is_extended_negative

    def _eval_is_zero(self) -> bool | None:
        return self.args[0].is_zero


def _near_one(a: sp.Expr) -> bool:
    """Whether the number ``a`` is within 2**-20 of 1 (decided by evaluating ``a − 1``, formed symbolically;
    False when undecided): there ``ln a`` loses digits to the cancellation in ``a`` itself."""
    if not a.is_number:
        return False
    try:
        v = sp.N(_minus_one(a), 15)
        return bool(v.is_Float and v._prec > 1 and abs(v) <= sp.Float(2.0**-20))
    except (TypeError, ValueError):
        return False


def accurate_logs(value: sp.Expr) -> sp.Expr:
    """``value`` with every logarithm of a number ``a`` within 2**-20 of 1 written as ``ln(1 + (a − 1))``,
    evaluated by :class:`_Log1p` (``a − 1`` is formed symbolically, so 1 + q(e^ε − 1) gives q(e^ε − 1)
    exactly): the same number, which sympy's and mpmath's evaluation then read without the cancellation
    inside ln near 1. There log1p is well conditioned (a relative error r in ``a − 1`` moves the result by
    about r of itself); every other logarithm is left as it is (sympy still simplifies it exactly)."""
    value = sp.sympify(value)
    if not value.has(sp.log):
        return value
    return value.replace(
        lambda e: isinstance(e, sp.log) and _near_one(e.args[0]),
        lambda e: _Log1p(_minus_one(e.args[0])),
    )


def _minus_one(a: sp.Expr) -> sp.Expr:
    """``a − 1`` formed symbolically and expanded (1 + q(e^ε − 1) − 1 -> q·e^ε − q; (1 + x)² − 1 -> 2x + x²),
    except powers of a sum with an exponent above 16, which stay as they are: a partition selection's
    δ = 1 − (1 − p)^L expanded multinomially into L + 1 terms, so deciding the sign of ln δ_claim − ln δ
    did not finish for L = 1000 (a group-by whose user may touch 1000 keys never got a verdict)."""
    big = any(p.base.is_Add and p.exp.is_Integer and abs(p.exp) > 16 for p in (a - 1).atoms(sp.Pow))
    return sp.expand(a - 1, multinomial=not big)


_GEOMETRIC_TERMS = 64  # 1 − B^n is written as a sum of n terms up to this n (:func:`_one_minus_powers`)


def _power_term(t: sp.Expr) -> tuple[sp.Expr, int] | None:
    """``(B, n)`` when ``t`` is −B^n with B a sum holding 1 and n an integer in 1.._GEOMETRIC_TERMS."""
    if isinstance(t, sp.Mul) and len(t.args) == 2 and t.args[0] == -1 and isinstance(t.args[1], sp.Pow):
        base, n = t.args[1].args
        if n.is_Integer and 1 <= int(n) <= _GEOMETRIC_TERMS and isinstance(base, sp.Add) and sp.S.One in base.args:
            return base, int(n)
    return None


def _one_minus_powers(value: sp.Expr) -> sp.Expr:
    """``value`` with every 1 − B^n (B = 1 + x a sum, n an integer up to :data:`_GEOMETRIC_TERMS`) written
    as (1 − B)·Σ_{k<n} B^k, with 1 − B = −x formed symbolically: the same number, without B^n's cancellation
    against 1 when B is near 1. A partition selection's δ = 1 − (1 − p)^L at δ = 1e-30 (p about 3e-31) left
    sympy's evaluation unable to place its sign, so the threshold's calibration tried 10 000 thresholds
    (minutes) and returned none."""

    def has(e: sp.Expr) -> bool:
        return isinstance(e, sp.Add) and sp.S.One in e.args and any(_power_term(t) for t in e.args)

    def rewrite(e: sp.Expr) -> sp.Expr:
        args = list(e.args)
        for i, t in enumerate(args):
            found = _power_term(t)
            if found is not None:
                base, n = found
                rest = args[:i] + args[i + 1 :]
                rest.remove(sp.S.One)
                return sp.Add(sp.expand(1 - base) * sp.Add(*[base**k for k in range(n)]), *rest)
        return e

    if not value.has(sp.Pow):
        return value
    return value.replace(has, rewrite)


def exact_sign(value: sp.Expr) -> int | None:
    """The sign (-1, 0, 1) of a closed-form number, decided by sympy's adaptive evaluation and
    confirmed with mpmath at 60 digits; None when undecided or when the two disagree. Logarithms are
    evaluated as ``log1p`` of their argument minus 1 (:func:`accurate_logs`): ``ln(1 + x)`` for x far below
    the working precision is not read as 0."""
    value = accurate_logs(_one_minus_powers(sp.sympify(value)))
    if value.free_symbols:
        return None
    if value in (sp.oo, -sp.oo):
        return 1 if value is sp.oo else -1
    zero = value.is_zero
    if zero is None:
        for h in itertools.islice(_simplifications(value), 1, None):
            zero = h.is_zero
            if zero is not None:
                break
    if zero is True:
        s_sign = 0
    elif value.is_positive is True:
        s_sign = 1
    elif value.is_negative is True:
        s_sign = -1
    else:
        return None
    with mpmath.workdps(_MP_DPS):
        try:
            m = mpmath.mpf(sp.N(value, _MP_DPS))
        except (TypeError, ValueError):
            return None
        tol = mpmath.mpf(10) ** (-_MP_DPS + 10)
        m_sign = 0 if abs(m) <= tol else (1 if m > 0 else -1)
    if s_sign != m_sign and not (s_sign != 0 and m_sign == 0):
        return None
    return s_sign


def exceeds(loss: sp.Expr, epsilon: sp.Expr) -> bool:
    """True iff ``loss > epsilon`` is confirmed by exact evaluation."""
    return exact_sign(sp.sympify(loss) - sp.sympify(epsilon)) == 1


def confirm_violation(p: sp.Expr, q: sp.Expr, epsilon: sp.Expr, delta: sp.Expr = 0) -> bool:
    """True iff P_D(S) = p > e^ε q + δ = e^ε P_D'(S) + δ, confirmed exactly."""
    return exact_sign(sp.sympify(p) - sp.exp(sp.sympify(epsilon)) * sp.sympify(q) - sp.sympify(delta)) == 1


def find_violation(
    candidates: Iterable[tuple[Any, Any, Any]], epsilon: Any, delta: Any = 0
) -> tuple[Any, sp.Expr] | None:
    """Falsification at adversarial points: ``candidates`` yields ``(p, q, witness)`` with exact
    P_D(S) = p and P_D'(S) = q; returns ``(witness, ln p - ln q)`` for the first whose violation of
    p <= e^ε q + δ is confirmed by exact evaluation, else None (no evidence either way)."""
    for p, q, witness in candidates:
        if confirm_violation(p, q, epsilon, delta):
            q = sp.sympify(q)
            loss = sp.oo if exact_sign(q) == 0 else sp.log(sp.sympify(p)) - sp.log(q)
            return witness, loss
    return None


def numeric_evidence(what: str, value: float) -> str:
    """A note for numeric-only evidence (never a discharge)."""
    return f"checked numerically (not a proof): {what} = {value:.6g}"


# --------------------------------------------------------------------------- builder


class ProofBuilder:
    """Assembles a Proof the way OpenDP's proof template reads: preconditions, pseudocode,
    postcondition, then the obligations of the derivation and the comparison with the claim.

    Verdict at :meth:`finish`: REFUTED if :meth:`refute` recorded a confirmed counterexample;
    PROVED if there is at least one obligation and every obligation is discharged; else UNPROVEN."""

    def __init__(self, mechanism: Mechanism | None, claim: Claim | None = None) -> None:
        """``mechanism`` None (with a ``claim``): a builder whose obligations are only read, never finished
        into a Proof (calibration's stability walk)."""
        self.mechanism = mechanism
        if claim is None:
            assert mechanism is not None  # a builder without a mechanism is given its claim
            claim = mechanism.claim
        self.claim = claim
        self.assumptions: list[str] = []
        self.steps: list[Obligation] = []
        self.notes: list[str] = []
        self.timings: dict[str, float] = {}
        self.witness: Witness | None = None
        self.refuted = False
        self.route: str | None = None  # the accounting the bound rests on (set by the proof)
        self.bound_lower: float | None = None  # a certified lower end of the true ε, where one is certified
        # terms of ε the structure can name: (the term, exact; what it comes from; fix(excess) -> str or None)
        self.terms: list[tuple[sp.Expr, str, Any]] = []
        self.cause: str | None = None  # why the bound exceeds the claim and the fix, where the structure tells
        self._t0 = time.perf_counter()

    # --- template ------------------------------------------------------------
    def precondition(self, text: str) -> None:
        self.assumptions.append(text)

    assume = precondition

    def pseudocode(self, text: str) -> None:
        self.notes.append("pseudocode: " + text)

    def postcondition(self, text: str) -> None:
        self.notes.append("postcondition: " + text)

    def note(self, text: str) -> None:
        self.notes.append(text)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t

    # --- obligations --------------------------------------------------------
    def check(
        self,
        statement: str,
        formula: sp.Basic,
        justification: str,
        *,
        hypotheses: Sequence[sp.Basic] = (),
        use_z3: bool = True,
    ) -> Obligation:
        ob = discharge(statement, formula, justification, hypotheses=hypotheses, use_z3=use_z3)
        self.steps.append(ob)
        return ob

    def fact(self, statement: str, justification: str) -> Obligation:
        """A structural step argued in words (independence, exhaustive cases, a definition), recorded
        with checker ``"structural"``: nothing symbolic to decide, and no engine is claimed to check it."""
        ob = Obligation(statement, sp.true, justification, "structural", True, "argued in the justification")
        self.steps.append(ob)
        return ob

    def add(self, obligations: Iterable[Obligation]) -> list[Obligation]:
        obs = list(obligations)
        self.steps.extend(obs)
        return obs

    def cases(self, statement: str, formula: sp.Basic, cases: Sequence[Case], justification: str) -> list[Obligation]:
        return self.add(check_cases(statement, formula, cases, justification))

    def evaluate(self, statement: str, formula: sp.Basic, justification: str) -> Obligation:
        """A closed-form (symbol-free) comparison decided by exact evaluation (checker ``"exact"``)."""
        formula = sp.sympify(formula)
        if formula.free_symbols:
            ob = Obligation(
                statement,
                formula,
                justification,
                "exact",
                False,
                f"NOT DISCHARGED: free symbols {formula.free_symbols}",
            )
        elif isinstance(formula, _REL):
            g, kind = _gap(formula)
            sgn = exact_sign(g)
            ok = {"nonneg": sgn in (0, 1), "pos": sgn == 1, "zero": sgn == 0, "nonzero": sgn in (-1, 1)}[kind]
            ok = ok and sgn is not None
            ob = Obligation(
                statement,
                formula,
                justification,
                "exact",
                bool(ok),
                f"sign of {g} is {sgn}" + ("" if ok else " (NOT DISCHARGED)"),
            )
        else:
            ans = bool(formula) if formula in (sp.true, sp.false) else None
            ob = Obligation(statement, formula, justification, "exact", ans is True, str(ans))
        self.steps.append(ob)
        return ob

    def claim_bound(self, bound: sp.Expr, claimed: sp.Expr | None = None, *, what: str = "ε") -> Obligation:
        """Obligation: derived bound <= claimed value (exact when both are closed forms)."""
        claimed = param(self.claim.epsilon) if claimed is None else sp.sympify(claimed)
        formula = sp.Le(sp.sympify(bound), claimed, evaluate=False)
        if not sp.sympify(bound).free_symbols and not claimed.free_symbols:
            return self.evaluate(f"derived {what} bound <= claimed {what}", formula, "exact evaluation")
        return self.check(f"derived {what} bound <= claimed {what}", formula, "algebra")

    def explain_excess(self, bound: sp.Expr, claimed: sp.Expr) -> None:
        """When ``bound`` exceeds ``claimed`` (exactly), the cause the structure names: the largest recorded
        term (:attr:`terms`) that covers the whole excess, with its fix, as :attr:`cause`; otherwise none (a
        cause is never guessed: only a term at least the excess explains it)."""
        excess = sp.sympify(bound) - sp.sympify(claimed)
        if exact_sign(excess) != 1:
            return
        for term, why, fix in sorted(self.terms, key=lambda x: -float(sp.N(x[0], 30))):
            if exact_sign(term - excess) in (0, 1):
                remedy = fix(excess) if fix is not None else None
                self.cause = why + (f"; {remedy}" if remedy else "")
                return

    def refute(self, witness: Witness, detail: str, *, delta_checked: bool = False) -> None:
        """Record a counterexample that was confirmed by exact evaluation. Under an (ε, δ) claim with
        δ > 0 it refutes only when the caller compared the event's mass with δ (``delta_checked``: P_D(S)
        − e^ε P_D'(S) > δ): a pointwise loss above ε refutes pure ε-DP only, since an output of tiny
        probability may exceed ε within the δ the claim allows. Otherwise it is a note, not a verdict."""
        delta = getattr(self.claim, "delta", None)
        if delta is not None and not delta_checked and exact(delta) > 0:
            self.notes.append(
                "not refuted: " + detail + f" refutes pure ε-DP only; with δ = {delta} > 0 the claim allows a loss "
                "above ε on events of mass up to δ, and this event's mass was not compared with δ"
            )
            return
        self.refuted = True
        self.witness = witness
        self.notes.append("counterexample confirmed by exact evaluation: " + detail)

    # --- result -----------------------------------------------------------------
    def verdict(self) -> Verdict:
        if self.refuted:
            return Verdict.REFUTED
        if self.steps and all(o.discharged for o in self.steps):
            return Verdict.PROVED
        return Verdict.UNPROVEN

    def finish(
        self, bound_expr: sp.Expr | None, *, witness: Witness | None = None, delta_bound: float | None = None
    ) -> Proof:
        if witness is not None and self.witness is None:
            self.witness = witness
        bound = float("nan")
        if bound_expr is not None:
            try:
                bound = float(sp.N(accurate_logs(bound_expr), 30))
            except (TypeError, ValueError):
                bound = float("nan")
        undischarged = [o.statement for o in self.steps if not o.discharged]
        if undischarged and not self.refuted:
            self.notes.append("not discharged: " + "; ".join(undischarged))
        self.timings["total"] = time.perf_counter() - self._t0
        assert self.mechanism is not None  # only a builder of a mechanism's proof is finished
        return Proof(
            mechanism=self.mechanism,
            claim=self.claim,
            verdict=self.verdict(),
            bound_expr=bound_expr,
            bound=bound,
            assumptions=tuple(self.assumptions),
            steps=tuple(self.steps),
            witness=self.witness,
            delta_bound=delta_bound,
            notes=tuple(self.notes),
            timings=dict(self.timings),
            route=self.route,
            bound_lower=self.bound_lower,
            cause=self.cause,
        )
