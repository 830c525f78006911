"""The proof data model: verdicts, obligations and the Proof value every ``prove`` returns.

Rule (OpenDP's proof template, STYLE rule 5): a proof is a list of checkable obligations in log
space, each with its justification and the checker that discharged it. An obligation whose
checker answered ``None`` (sympy could not decide) is NOT discharged; a proof with any
undischarged obligation is at best UNPROVEN."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any


from dpharness._json import jsonable as _jsonable
from dpharness.core import Claim, Mechanism, Witness

__all__ = ["Verdict", "Obligation", "Proof"]


class Verdict(enum.Enum):
    PROVED = "PROVED"  # every obligation discharged by a symbolic/SMT checker; bound <= claim
    REFUTED = "REFUTED"  # a counterexample confirmed by exact evaluation: the claim is false
    UNPROVEN = "UNPROVEN"  # neither (an obligation failed or is out of reach); may carry numeric evidence


@dataclass(frozen=True)
class Obligation:
    """One step of a derivation: ``statement`` (words) and ``formula`` (sympy, the thing checked),
    ``justification`` (algebra / named lemma / case hypothesis), ``checker`` (which engine
    discharged it: ``"sympy"``, ``"z3"``, ``"sympy+z3"``, ``"exact"`` (rational/mpmath evaluation),
    ``"lemma"`` (instantiating a library lemma whose side conditions are separate obligations)),
    and whether it was ``discharged``."""

    statement: str
    formula: Any
    justification: str
    checker: str
    discharged: bool
    detail: str = ""

    def to_dict(self) -> dict:
        return {
            "statement": self.statement,
            "formula": str(self.formula),
            "justification": self.justification,
            "checker": self.checker,
            "discharged": self.discharged,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Proof:
    """The outcome of ``prove(mechanism)``.

    ``bound_expr``/``bound``: the derived worst-case privacy loss (ε; for (ε, δ) claims the ε at
    which the derived δ is reported, with ``delta_bound``); ``assumptions``: neighbour relation,
    sensitivity, parameter ranges, numeric model ("ideal reals" unless stated); ``steps``: the
    obligations in order; ``witness``: inputs and output/event attaining or approaching the bound
    (for REFUTED: the confirmed counterexample); ``notes``: e.g. "checked numerically" evidence or
    "z3 for a fixed number of queries"; ``timings`` in seconds by phase; ``route``: the accounting the
    bound rests on (``"pure ε"``, ``"zCDP conversion"``, ``"PLD"``, ...; None for a proof that does not
    name one); ``bound_lower``: a certified lower end of the mechanism's true ε at ``delta_bound``, only
    where the proof certifies one (never an estimate).

    An (ε, δ) claim that is not PROVED carries what was derived at the claim's own δ: ``bound`` is the
    smallest ε the accounting proves there and ``delta_bound`` that δ (or, where ε is fixed, as for
    partition selection, the δ derived at that ε); never a δ above 1."""

    mechanism: Mechanism
    claim: Claim
    verdict: Verdict
    bound_expr: Any
    bound: float
    assumptions: tuple[str, ...]
    steps: tuple[Obligation, ...]
    witness: Witness | None = None
    delta_bound: float | None = None
    notes: tuple[str, ...] = ()
    timings: dict = field(default_factory=dict)
    route: str | None = None
    bound_lower: float | None = None
    cause: str | None = None  # why the bound exceeds the claim, and the fix, where the structure tells

    @property
    def holds(self) -> bool:
        return self.verdict is Verdict.PROVED

    @property
    def headline(self) -> str:
        """The bound in words, each number rounded so that it stays a bound (up for an upper bound, down
        for a lower end: :mod:`dpharness._display`): ``proven bound: ε ≤ 1.8291, δ ≤ 9.996e-06`` when
        PROVED (or REFUTED with a derived bound); for a claim not proved, what was derived at the claim's
        own δ (:attr:`derived`), and so for an (ε, δ) claim REFUTED below a certified bracket;
        ``no bound proven`` otherwise. Never a δ above 1."""
        from dpharness._display import fmt_upper
        from dpharness.core import ApproxDP

        if self.verdict is Verdict.REFUTED and isinstance(self.claim, ApproxDP) and self.bound_lower is not None:
            return self.derived or "no bound: the claim is refuted (witness below)"  # with its certified bracket
        if self.verdict is Verdict.REFUTED and self.bound is not None and math.isfinite(float(self.bound)):
            excess = self._excess()  # lead with what fails: a bound 2**-54 over the claim prints as the claim
            if excess is not None:
                return f"{excess}: {self._derived() or 'the claim is refuted (witness below)'}"
        if self.verdict is not Verdict.UNPROVEN:
            if self.bound is None or not math.isfinite(float(self.bound)):
                return (
                    "no bound: the claim is refuted (witness below)"
                    if self.verdict is Verdict.REFUTED
                    else "no bound proven"
                )
            delta = self.delta_bound
            extra = f", δ ≤ {fmt_upper(delta)}" if delta is not None and delta <= 1 else ""
            return f"proven bound: ε ≤ {fmt_upper(self.bound)}{extra}"
        return self.derived or "no bound proven"

    @property
    def derived(self) -> str | None:
        """For a claim not PROVED: what the proof derived, at the claim's own δ where it could
        (``derived ε(δ = 1e-05) ≤ 13.39 > claim 6``, with the certified bracket ``∈ [lo, up]`` where
        the proof certifies a lower end), else at its ε (``derived δ(ε = 1) ≤ 0.0123 > claim 1e-05``)
        or, for a pure claim, ``derived ε ≤ 1.056 > claim 1``; for an UNPROVEN claim led by what it
        exceeds and by how much (``ε exceeds the claim by 0.05556: derived ε ≤ 1.056 > claim 1``). None
        when nothing finite was derived (a δ above 1 is nothing: every mechanism has it)."""
        text = self._derived()
        if text is None or self.verdict is Verdict.REFUTED:
            return text
        excess = self._excess()
        if excess is None:
            return text
        return f"{excess}, {self.cause}: {text}" if self.cause else f"{excess}: {text}"

    def _epsilon_excess(self) -> float | None:
        """The derived ε minus the claimed ε, rounded up to a float (exactly when the bound is an exact
        rational: a bound 2**-54 above the claim is a float equal to it, but still above it); None or <= 0
        when ε holds."""
        from fractions import Fraction

        import sympy as sp

        claimed = getattr(self.claim, "epsilon", None)
        if claimed is None:
            return None
        if self.bound_expr is not None:
            try:
                expr = sp.sympify(self.bound_expr)
            except (sp.SympifyError, TypeError):
                expr = None
            if expr is not None and expr.is_Rational:
                gap = Fraction(int(expr.p), int(expr.q)) - Fraction(claimed)
                up = float(gap)
                return math.nextafter(up, math.inf) if Fraction(up) < gap else up
        return float(self.bound) - float(claimed)

    def _epsilon_text(self, fmt: Any) -> str:
        """The derived ε as printed: rounded up, or ``claim + excess`` when the excess is below what the
        rounding shows (``1 + 1.526e-12``, never ``1.001``, which reads as a 0.1% overshoot)."""
        from dpharness._display import fmt_upper

        excess = self._epsilon_excess()
        claimed = float(getattr(self.claim, "epsilon", 0))
        if excess is not None and excess > 0 and claimed > 0 and excess < claimed * 1e-3:
            return f"{fmt_upper(claimed)} + {fmt_upper(excess)}"
        return fmt(self.bound)

    def _excess(self) -> str | None:
        """What the derived bound violates first, with its excess rounded up (``ε exceeds the claim by
        1.526e-12``), so a headline never leads with a quantity that holds."""
        from dpharness.core import ApproxDP, PureDP
        from dpharness._display import fmt_upper

        if self.bound is None or not math.isfinite(float(self.bound)) or not isinstance(self.claim, (PureDP, ApproxDP)):
            return None
        over = []
        eps = self._epsilon_excess() or 0.0
        if eps > 0:
            over.append(f"ε exceeds the claim by {fmt_upper(eps)}")
        if isinstance(self.claim, ApproxDP) and self.delta_bound is not None and float(self.delta_bound) <= 1:
            dlt = float(self.delta_bound) - float(self.claim.delta)
            if dlt > 0 and not (eps > 0 and float(self.delta_bound) == float(self.claim.delta)):
                over.append(f"δ exceeds the claim by {fmt_upper(dlt)}")
        return " and ".join(over) or None

    def _derived(self) -> str | None:
        from dpharness.core import ApproxDP, PureDP
        from dpharness._display import fmt_lower, fmt_upper

        if self.verdict is Verdict.PROVED or self.bound is None or not math.isfinite(float(self.bound)):
            return None
        bound, claim = float(self.bound), self.claim
        above_claim = (self._epsilon_excess() or 0.0) > 0
        if isinstance(claim, PureDP) or (isinstance(claim, ApproxDP) and self.delta_bound is None):
            over = f" > claim {fmt_upper(claim.epsilon)}" if above_claim else ""
            return f"derived ε ≤ {self._epsilon_text(fmt_upper)}{over}"
        if not isinstance(claim, ApproxDP):
            return None
        assert self.delta_bound is not None  # an ApproxDP claim without it returned above
        d = float(self.delta_bound)
        if not d <= 1:
            return None
        claimed_e, claimed_d = float(claim.epsilon), float(claim.delta)
        if d == claimed_d:  # at the claim's own δ: ε(δ), with its bracket
            low = self.bound_lower
            where = (
                f"∈ [{fmt_lower(low)}, {fmt_upper(bound)}]" if low is not None else f"≤ {self._epsilon_text(fmt_upper)}"
            )
            above = low > claimed_e if low is not None else above_claim
            over = f" > claim {fmt_upper(claimed_e)}" if above else f", claim {fmt_upper(claimed_e)}"
            return f"derived ε(δ = {fmt_upper(claimed_d)}) {where}{over}"
        if d > claimed_d and not above_claim:  # at the claim's ε (or below it): δ(ε)
            over = f" > claim {fmt_upper(claimed_d)}"
        else:
            over = f", claim (ε, δ) = ({fmt_upper(claimed_e)}, {fmt_upper(claimed_d)})"
        return f"derived δ(ε = {self._epsilon_text(fmt_upper)}) ≤ {fmt_upper(d)}{over}"

    def _repr_html_(self) -> str:
        """Jupyter: the verdict, the bounds and the derivation (every obligation, how it was checked)."""
        from dpharness._html import card

        tone = {Verdict.PROVED: "good", Verdict.REFUTED: "bad"}.get(self.verdict, "neutral")
        steps = [f"{'✓' if o.discharged else '✗'} {o.statement} — {o.checker}: {o.justification}" for o in self.steps]
        w = self.witness
        return card(
            f"proof of {self.mechanism.name}",
            self.verdict.value,
            tone,
            [
                ("claim", self.claim.describe()),
                ("derived bound", self.headline + ("" if self.bound != self.bound else f" ({self.bound_expr})")),
                ("route", self.route),
                ("witness", None if w is None else w.description),
                ("seconds", None if "total" not in self.timings else f"{self.timings['total']:.3g}"),
            ],
            [("assumptions", self.assumptions), ("derivation", steps), ("notes", self.notes)],
        )

    def to_dict(self) -> dict:
        w = self.witness
        return {
            "mechanism": self.mechanism.name,
            "parameters": {k: _jsonable(v) for k, v in self.mechanism.noise_parameters().items()},
            "claim": self.claim.describe(),
            "verdict": self.verdict.value,
            "bound_expr": str(self.bound_expr),
            "bound": _jsonable(self.bound),
            "delta_bound": self.delta_bound,
            "bound_lower": self.bound_lower,
            "headline": self.headline,  # the words prove, the gate, JUnit and the report print
            "cause": self.cause,
            "route": self.route,
            "assumptions": list(self.assumptions),
            "steps": [s.to_dict() for s in self.steps],
            "witness": None
            if w is None
            else {
                "data": _jsonable(w.data),
                "neighbor": _jsonable(w.neighbor),
                "output": _jsonable(w.output),
                "event": None if w.event is None else w.event.description,
                "loss": w.loss,
                "description": w.description,
            },
            "notes": list(self.notes),
            "timings": dict(self.timings),
        }


def unproven(mechanism: Mechanism, reason: str) -> Proof:
    """An UNPROVEN proof value carrying only ``reason`` (no derivation was attempted)."""
    return Proof(
        mechanism=mechanism,
        claim=mechanism.claim,
        verdict=Verdict.UNPROVEN,
        bound_expr=None,
        bound=float("nan"),
        assumptions=(),
        steps=(),
        witness=None,
        notes=(reason,),
    )
