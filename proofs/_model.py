"""The proof data model: verdicts, obligations and the Proof value every ``prove`` returns.

Rule (OpenDP's proof template, STYLE rule 5): a proof is a list of checkable obligations in log
space, each with its justification and the checker that discharged it. An obligation whose
checker answered ``None`` (sympy could not decide) is NOT discharged; a proof with any
undischarged obligation is at best UNPROVEN."""

from __future__ import annotations

import enum
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
    "z3 for a fixed number of queries"; ``timings`` in seconds by phase."""

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

    @property
    def holds(self) -> bool:
        return self.verdict is Verdict.PROVED

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
                ("derived bound", None if self.bound != self.bound else f"{self.bound:.6g} ({self.bound_expr})"),
                ("derived δ", self.delta_bound),
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
