"""The check pipeline: prove and audit one mechanism and judge it by the gate's one pass rule.

:func:`check` returns a :class:`Check`, the one typed value the gate, its JUnit and JSON output, the
result cache, the reports and :func:`dpharness.testing.assert_private` read. It holds

* the proof (:class:`ProofSummary`: verdict, bound, derivation steps, witness; the live
  :class:`~dpharness.proofs._model.Proof` too while in the process that proved it),
* the audit (:class:`~dpharness.auditors.AuditResult` or None),
* the proof policy (:class:`Policy`: how the gate treats the proof),
* the sandwich: certified audit lower bound <= proven bound <= claimed ε (:class:`Sandwich`),
* ``passed``, computed by :func:`pass_rule` and nowhere else,
* messages (a crash, a phase that ran out of time, the audit's fallback note) and timings.

A ``Check`` round-trips through JSON (:meth:`Check.to_json` / :meth:`Check.from_json`; pickling goes
the same way, so a check computed in a worker process reaches the parent as the same value the cache
stores).

Time limits: ``timeout`` limits the proof and the audit separately through :func:`deadline` (SIGALRM
in the thread that runs the check: interrupts Python-level loops and keeps the proof when only the
audit runs out). A proof or audit stuck in a C call ignores signals; the gate therefore runs checks
in worker processes (:mod:`dpharness._pool`) that are killed at a hard limit (:func:`hard_limit`).

A time limit is for hangs, never a verdict: a check that reached one (``Check.time_limit`` says which
limit, with the value in force) is **not decided** (status ``TIMEOUT``) unless what did finish already
decides it: a proof that does not accept the mechanism, or an audit that certified a violation,
fails it (and catches a gallery bug) whatever ran out. A check that is not decided does not pass —
the gate cannot vouch for what it did not check, so it exits 1 — but it is not a finding: it is not
*caught*, its line says TIMEOUT (not FAIL, not VIOLATION), and the gate does not cache it, so the next
run decides it. The default limit (the CLI's ``GATE_TIMEOUT``) is set for a loaded 2-core CI runner.
"""

from __future__ import annotations

import contextlib
import enum
import math
import signal
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from .errors import AuditBudgetTooSmall, AuditTimeLimit, DPHarnessError

__all__ = [
    "GATE_SAMPLES",
    "DEFAULT_SEED",
    "check",
    "Check",
    "ProofSummary",
    "Step",
    "Sandwich",
    "Timings",
    "Policy",
    "Outcome",
    "pass_rule",
    "run_audit",
    "AuditScope",
    "run_proof",
    "deadline",
    "PhaseTimeout",
    "hard_limit",
    "proof_phrase",
    "GATE_TIME_BUDGET",
]

GATE_SAMPLES = 1_000_000  # per side, per mechanism: the built-in gate takes ~25 s on 2 idle cores (budget 2 min)
DEFAULT_SEED = 0


# --------------------------------------------------------------------------- the pass rule


class Policy(str, enum.Enum):
    """How the gate treats a mechanism's proof (see :func:`proof_policy`)."""

    PROVED = "proved"  # the proof establishes the claim
    AUDIT_ONLY = "audit-only"  # no proof covers it; the project opted in with register(..., proof="audit-only")
    NO_PROOF = "no-proof"  # no proof covers it and it is not opted in: fails
    REFUTED = "refuted"  # the proof found a confirmed counterexample
    UNPROVEN = "unproven"  # a proof covers it but could not establish the claim


class Outcome(NamedTuple):
    passed: bool  # the gate's judgement
    caught: bool  # some check flagged the mechanism (the proof did not accept it, or the audit certified a violation)
    decided: bool = True  # False: a time limit stopped a phase before the check could be judged (TIMEOUT)


def pass_rule(
    *, buggy: bool, policy: Policy | None, audit_passed: bool | None, crashed: bool, timed_out: bool = False
) -> Outcome:
    """THE pass rule (the gate, JUnit, reports, the cache and ``assert_private`` all use it).

    A crash fails. A mechanism is *caught* when its proof does not accept it (any policy but
    ``proved``) or its audit certifies a violation. A correct mechanism passes when its policy is
    ``proved`` or ``audit-only`` and its audit passed (an audit that did not finish is not a pass); a
    gallery bug (``buggy``) passes when it is caught. ``policy`` None: the proof did not finish;
    ``audit_passed`` None: the audit did not finish.

    ``timed_out``: a phase reached its time limit. The check is then *not decided* (``decided``
    False) unless what finished decides it (a proof that fails it, a certified violation; for a gallery
    bug, being caught): a check that is not decided does not pass (it is not
    evidence the mechanism is private) and is not caught (it is not evidence of a privacy bug)."""
    if crashed:
        return Outcome(False, False)
    caught = (policy is not None and policy is not Policy.PROVED) or audit_passed is False
    if buggy:
        return Outcome(caught, caught, caught or not timed_out)
    passed = policy in (Policy.PROVED, Policy.AUDIT_ONLY) and audit_passed is True
    fails_anyway = policy in (Policy.REFUTED, Policy.UNPROVEN, Policy.NO_PROOF) or audit_passed is False
    return Outcome(passed, caught, passed or fails_anyway or not timed_out)


def proof_policy(name: str, proof: Any, mechanism: Any = None) -> Policy:
    """The :class:`Policy` of ``proof`` for the mechanism registered as ``name`` (a library target's
    mechanism, registered or not, is audited only: no proof covers a library's code)."""
    from . import registry
    from .auditors.libraries import TargetMechanism

    verdict = proof.verdict.value
    if isinstance(mechanism, TargetMechanism) and verdict not in ("PROVED", "REFUTED"):
        return Policy.AUDIT_ONLY
    if verdict == "PROVED":
        return Policy.PROVED
    if verdict == "REFUTED":
        return Policy.REFUTED
    if registry.audit_only(name):  # registered to pass on its audit where no proof refutes it (UNPROVEN too)
        return Policy.AUDIT_ONLY
    if proof.notes and str(proof.notes[0]).startswith("no proof:"):
        return Policy.NO_PROOF
    return Policy.UNPROVEN


def _audit_stands_alone(mechanism: Any, policy: Policy | None) -> bool:
    """Whether no proof sits beside ``mechanism``'s audit: a library target (no proof covers a library's
    code), or a mechanism whose policy is ``audit-only`` (the gate passes it on its audit alone) or
    ``no-proof``. Such an audit is certified in one look on every sample, as ``dpharness audit`` does,
    whatever the command (:func:`check`): its bound is the whole evidence, and certifying in looks
    (α/2 at the last) would only save time, at the price of a bound below ``dpharness audit``'s.
    ``policy`` None (the proof did not finish): alone only for a library target."""
    from .auditors.libraries import TargetMechanism

    return policy in (Policy.AUDIT_ONLY, Policy.NO_PROOF) or isinstance(mechanism, TargetMechanism)


def _target_budget_note(mechanism: Any, samples: int, registered: bool) -> str | None:
    """What to change when the audit of a library target ran out of its time limit (it runs at the
    library's pace: Tumult Core, PyDP and PipelineDP make one call per release): fewer samples, more
    time, or a budget of its own where it is registered (``registered``: it has one already). None for
    anything else (the time-out's own message names ``--timeout``)."""
    from .auditors.libraries import TargetMechanism, list_targets

    if not isinstance(mechanism, TargetMechanism):
        return None
    t = mechanism.target
    per_side = f"{samples:,}".replace(",", " ")
    if registered:
        return (
            f"{t.name} runs at its library's pace ({per_side} samples a side, its registered budget): "
            "lower samples= or raise timeout= where it is registered"
        )
    defaults = next((dict(i.parameters) for i in list_targets() if i.name == t.name), {})
    changed = {k: v for k, v in t.params.items() if k not in defaults or defaults[k] != v}
    params = f", {changed!r}" if changed else ""
    return (
        f"{t.name} runs at its library's pace ({per_side} samples a side): lower --samples, raise --timeout, "
        "or give it a budget of its own in your module, "
        f"register(get_target({t.name!r}{params}), samples=N, timeout=SECONDS)"
    )


# --------------------------------------------------------------------------- typed parts of a Check


def _num(x: Any) -> float | None:
    """A number read back from JSON (``"inf"``, ``"-inf"`` and ``"nan"`` are how :mod:`._json` writes them)."""
    return None if x is None else float(x)


def _timings(d: dict) -> Timings:
    """:class:`Timings` read back from JSON (the phases' seconds or None, and the total)."""
    return Timings(
        proof=_num(d.get("proof")),
        audit=_num(d.get("audit")),
        report=_num(d.get("report")),
        total=float(d.get("total", 0.0)),
    )


def _real(x: Any) -> float:
    """A number that is never None, read back from JSON (as :func:`_num`; the fields it reads are floats)."""
    return float(x)


def _out(x: float | None) -> Any:
    from ._json import jsonable

    return jsonable(x)


@dataclass(frozen=True)
class Step:
    """One derivation step of a proof, as text."""

    statement: str
    formula: str
    justification: str
    checker: str
    discharged: bool
    detail: str = ""


@dataclass(frozen=True)
class ProofSummary:
    """A proof as plain values: what the gate, JUnit and the cache need of a :class:`Proof`."""

    verdict: str
    bound: float
    bound_expr: str
    delta_bound: float | None
    claim: str
    assumptions: tuple[str, ...]
    steps: tuple[Step, ...]
    witness: str | None
    notes: tuple[str, ...]
    headline: str = ""  # Proof.headline: the bound in words, rounded outward
    derived: str | None = None  # Proof.derived: what a claim not proved was derived at
    bound_lower: float | None = None
    route: str | None = None

    @classmethod
    def of(cls, proof: Any) -> "ProofSummary":
        return cls(
            verdict=proof.verdict.value,
            bound=float(proof.bound),
            bound_expr=str(proof.bound_expr),
            delta_bound=None if proof.delta_bound is None else float(proof.delta_bound),
            claim=proof.claim.describe(),
            assumptions=tuple(str(a) for a in proof.assumptions),
            steps=tuple(
                Step(s.statement, str(s.formula), s.justification, s.checker, bool(s.discharged), s.detail)
                for s in proof.steps
            ),
            witness=None if proof.witness is None else describe_witness(proof.witness),
            notes=tuple(str(n) for n in proof.notes),
            headline=str(getattr(proof, "headline", "")),
            derived=getattr(proof, "derived", None),
            bound_lower=None if getattr(proof, "bound_lower", None) is None else float(proof.bound_lower),
            route=getattr(proof, "route", None),
        )

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "bound": _out(self.bound),
            "bound_expr": self.bound_expr,
            "delta_bound": _out(self.delta_bound),
            "claim": self.claim,
            "assumptions": list(self.assumptions),
            "steps": [vars(s).copy() for s in self.steps],
            "witness": self.witness,
            "notes": list(self.notes),
            "headline": self.headline,
            "derived": self.derived,
            "bound_lower": _out(self.bound_lower),
            "route": self.route,
        }

    @classmethod
    def from_json(cls, d: dict) -> "ProofSummary":
        return cls(
            verdict=d["verdict"],
            bound=_real(d["bound"]),
            bound_expr=d["bound_expr"],
            delta_bound=_num(d["delta_bound"]),
            claim=d["claim"],
            assumptions=tuple(d["assumptions"]),
            steps=tuple(Step(**s) for s in d["steps"]),
            witness=d["witness"],
            notes=tuple(d["notes"]),
            headline=d.get("headline", ""),
            derived=d.get("derived"),
            bound_lower=_num(d.get("bound_lower")),
            route=d.get("route"),
        )


def describe_witness(w: Any) -> str:
    """A proof's witness in one line: ``D=... D'=... output=... event: ... loss=... — description``."""
    from ._json import jsonable
    from ._run import fmt, records_text

    return (
        f"D={records_text(w.data)} D'={records_text(w.neighbor)}"
        + (f" output={jsonable(w.output)}" if w.output is not None else "")
        + (f" event: {w.event.description}" if w.event is not None else "")
        + (f" loss={fmt(w.loss)}" if w.loss is not None else "")
        + (f" — {w.description}" if w.description else "")
    )


def _audit_from_json(d: dict) -> Any:
    """The :class:`AuditResult` written by ``AuditResult.to_dict`` (the witness keeps its pair and
    description; its event object is not stored)."""
    from .auditors import AuditResult
    from .core import Witness

    witness = (
        None
        if d["data"] is None and d["neighbor"] is None
        else Witness(d["data"], d["neighbor"], description=d["witness"] or "")
    )
    return AuditResult(
        epsilon_lower_bound=_real(d["epsilon_lower_bound"]),
        passed=d["passed"],
        epsilon=_real(d["epsilon"]),
        delta=_real(d["delta"]),
        confidence=d["confidence"],
        samples=d["samples"],
        seed=d["seed"],
        method=d["method"],
        witness=witness,
        witness_description=d["witness"],
        counts=dict(d["counts"]),
        delta_lower_bound=_num(d["delta_lower_bound"]),
        events_tested=d["events_tested"],
        pairs_tested=d["pairs_tested"],
        elapsed=d["elapsed"],
        extra=dict(d["extra"]),
    )


@dataclass(frozen=True)
class Sandwich:
    """The three numbers that sandwich the true ε: ``lower`` (certified audit lower bound) <=
    ``proven`` (the proof's bound) <= ``claimed`` (the ε the audit holds the claim to). None: unknown."""

    lower: float | None
    proven: float | None
    claimed: float | None

    @property
    def ordered(self) -> bool:
        """Whether the known numbers are in order."""
        known = [v for v in (self.lower, self.proven, self.claimed) if v is not None]
        return all(a <= b for a, b in zip(known, known[1:]))


@dataclass(frozen=True)
class Timings:
    """Seconds spent: proving, auditing, writing the report (None: the phase did not run) and in all."""

    proof: float | None = None
    audit: float | None = None
    report: float | None = None
    total: float = 0.0


def proven_in_audit_units(claim: Any, bound: float) -> float:
    """The proven bound in the units of the ε the audit holds the claim to: a Rényi bound converted to
    (ε, δ) at the audit's δ as the claim is (:func:`dpharness._run.audit_target`); other bounds as they are."""
    from .core import RenyiDP
    from ._run import audit_target

    if isinstance(claim, RenyiDP) and math.isfinite(bound):
        return float(RenyiDP(claim.alpha, bound).to_approx(audit_target(claim)[1]).epsilon)
    return bound


def proof_phrase(
    verdict: str, proven: float | None, claimed: float | None, claim: str | None = None, derived: str | None = None
) -> str:
    """``proof VERDICT``, with what was derived when a proof is UNPROVEN (the proof's own phrase,
    :attr:`dpharness.proofs.Proof.derived`: ``proof UNPROVEN (derived ε(δ = 1e-05) ≤ 13.39 > claim 6)``),
    or else its finite bound when it exceeds the claim: ``proof UNPROVEN (derived ε ≤ 1.056 > claim 1)``.
    Numbers rounded outward (:mod:`._display`)."""
    from ._display import fmt_upper as fmt

    if verdict == "UNPROVEN" and derived:
        return f"proof UNPROVEN ({derived})"
    if (
        verdict == "UNPROVEN"
        and proven is not None
        and claimed is not None
        and "Rényi" not in (claim or "")
        and math.isfinite(proven)
        and proven > claimed
    ):
        return f"proof UNPROVEN (derived ε ≤ {fmt(proven)} > claim {fmt(claimed)})"
    return f"proof {verdict}"


def _audit_size(name: str, a: Any, samples: int | None) -> str:
    """What a gate line says of the audit's size, when it was sized by a time budget or differs from
    ``samples`` (the gate's --samples): the samples a side, the budget or the registered setting
    (said only where ``register(..., samples=N)`` set it), and what the audit could certify at that size
    (``extra["certifiable"]``, :func:`dpharness.auditors.stats.certifiable_range`: its detection floor
    and its ceiling)."""
    from ._display import fmt_lower, fmt_upper
    from .registry import audit_settings

    extra = a.extra if isinstance(getattr(a, "extra", None), dict) else {}
    budget = extra.get("time_budget")
    if not budget and (samples is None or getattr(a, "samples", samples) == samples):
        return ""
    said = [f"{a.samples:,}".replace(",", " ") + " samples a side"]
    registered = audit_settings(name).samples
    if registered is not None and registered == a.samples:
        said[0] += ", its registered setting"
    if budget:
        cut = ", fewer samples than it fits: cut to end within --timeout" if budget.get("cut_by_time_limit") else ""
        said.append(f"time budget {budget['seconds']:g} s{cut}")
    reach = extra.get("certifiable")
    if reach:
        said.append(f"detection floor ε {fmt_upper(reach['floor'], 2)}, ceiling {fmt_lower(reach['ceiling'], 3)}")
    return f" ({'; '.join(said)})"


def _is_library(name: str) -> bool:
    """Whether ``name`` is registered as a library target (in this process)."""
    from . import registry

    try:
        return registry.kind(name) == "library"
    except Exception:  # noqa: BLE001 - a name this process cannot resolve: not said
        return False


@dataclass(frozen=True)
class Check:
    """The outcome of checking one mechanism (see the module docstring). ``passed`` and ``caught``
    come from :func:`pass_rule`. Messages: ``error`` (a crash, or the worker killed at its hard
    limit: fails), ``proof_error``/``audit_error`` (the phase ran out of time), ``audit_note``
    (the audit fell back to a fixed pair). ``cached``: read from the gate's cache. ``time_limit``: the
    first time limit a phase reached (or the hard limit its worker was killed at), with the value in
    force; the check is then not decided unless what finished decides it (module docstring).
    ``exact_noise``: the mechanism's samplers are exact (:func:`dpharness._run.exact_noise`; None:
    not known, or no violation to explain), which decides the hint of a violation certified on the
    floats' structure. ``user_code``: how each user function the proof treats as per-record ran
    (``map_records(grad): compiled per row (numba)``; empty when the mechanism has none).

    ``mechanism`` and ``proof_object`` are the live values while in the process that ran the check;
    they are not part of the JSON form and are None after a round trip."""

    name: str
    buggy: bool | None = None
    claim: str | None = None
    parameters: dict = field(default_factory=dict)
    source_hash: str | None = None
    policy: Policy | None = None
    proof: ProofSummary | None = None
    audit: Any = None
    sandwich: Sandwich = Sandwich(None, None, None)
    error: str | None = None
    proof_error: str | None = None
    audit_error: str | None = None
    audit_note: str | None = None
    audit_partial: str | None = None
    timings: Timings = Timings()
    cached: bool = False
    time_limit: str | None = None
    exact_noise: bool | None = None
    user_code: tuple[str, ...] = ()
    mechanism: Any = field(default=None, compare=False, repr=False)
    proof_object: Any = field(default=None, compare=False, repr=False)

    def _repr_html_(self) -> str:
        """Jupyter: the gate's judgement and the sandwich (audit lower bound <= proven <= claimed)."""
        from ._html import card

        o = self.outcome
        badge = self.status
        s = self.sandwich

        def num(x: float | None) -> str:
            return "?" if x is None else f"{x:.6g}"

        return card(
            f"check of {self.name}",
            badge,
            "good" if o.passed else "bad",
            [
                ("claim", self.claim),
                ("sandwich", f"audit {num(s.lower)} <= proven {num(s.proven)} <= claimed {num(s.claimed)}"),
                ("proof", None if self.proof is None else self.proof.verdict),
                ("audit", None if self.audit is None else ("passed" if self.audit.passed else "violation certified")),
                ("error", self.error or self.proof_error or self.audit_error),
                ("note", self.audit_note),
                ("cached", self.cached or None),
                ("seconds", f"{self.timings.total:.3g}"),
            ],
        )

    def line(self, samples: int | None = None) -> str:
        """The gate's line for this check (``str(check)``), one per mechanism: status, proof, audit, timing (and the audit's note, and the float hint of
        a failure, on lines of their own). Bounds rounded outward (:mod:`._display`)."""
        from ._display import fmt_lower, fmt_upper
        from ._run import float_hint

        status = self.status
        if self.error:
            return f"{status}  {self.name}: error: {_printable(self.error.splitlines()[0])}"
        if self.proof is None and self.audit is None and self.time_limit:  # its worker was killed at the hard limit
            return f"{status}  {self.name}: not decided: {_printable(self.time_limit)}  [{self.timings.total:.1f}s]"
        p, a = self.proof, self.audit
        caught = ""
        if self.buggy:
            caught = "  bug caught" if self.caught else "  BUG SLIPPED THROUGH"
        if a is None:
            audit = f"audit not finished: {_printable(self.audit_error)}"
        else:
            audit = (
                f"audit ε_lb={fmt_lower(a.epsilon_lower_bound)} vs claim {fmt_upper(a.epsilon)} "
                f"{'passed' if a.passed else 'VIOLATION'}"
            )
            audit += _audit_size(self.name, a, samples)
        note = f"\n      note: {self.audit_note}" if self.audit_note else ""
        if self.user_code:
            note += "\n      user code: " + "; ".join(self.user_code)
        hint = float_hint(a, exact_noise=self.exact_noise, proven=self.sandwich.proven, claimed=self.sandwich.claimed)
        if hint and not self.passed:
            note += f"\n      {hint}"
        if self.policy is Policy.AUDIT_ONLY and _is_library(self.name):
            proof = "no proof: a library's mechanism, audited only"
        elif self.policy is Policy.AUDIT_ONLY and p is not None and p.verdict == "UNPROVEN" and p.derived:
            # a derivation that falls short (a built-in drawing numpy's float noise): said, then audited only
            phrase = proof_phrase(p.verdict, self.sandwich.proven, self.sandwich.claimed, self.claim, p.derived)
            proof = f"{phrase}; audited only (opted in with proof='audit-only')"
        elif self.policy is Policy.AUDIT_ONLY:
            proof = "no proof: audited only (opted in with proof='audit-only')"
        elif self.policy is Policy.NO_PROOF:
            proof = (
                "no proof: audited only, not opted in -- build it from dpharness.parts, register a proof with "
                "@dpharness.proves, or opt in with register(m, proof='audit-only')"
            )
        elif p is None:
            proof = f"proof not finished: {_printable(self.proof_error)}"
        elif p.verdict == "PROVED" and "Rényi" in (self.claim or "") and self.sandwich.proven is not None:
            # the Rényi bound, and in the audit's (ε, δ) units beside the audit's numbers
            at = f" at δ = {fmt_upper(a.delta, 6)}" if a is not None else ""
            proof = f"proof PROVED (Rényi ε ≤ {fmt_upper(p.bound)}; ε ≤ {fmt_upper(self.sandwich.proven)}{at})"
        elif p.verdict == "PROVED":
            proof = f"proof PROVED (ε ≤ {fmt_upper(p.bound)})"
        else:
            proof = proof_phrase(p.verdict, self.sandwich.proven, self.sandwich.claimed, self.claim, p.derived)
        when = "cached: " if self.cached else ""
        if not self.decided and self.audit_partial:
            note += (
                "\n      not decided: the audit saw less than the claimed mechanism "
                f"({self.audit_partial}); not counted as audited"
            )
        elif not self.decided:
            note += "\n      not decided: a time limit stopped it (not evidence of a privacy bug); raise --timeout"
        return f"{status}  {self.name}: {proof}; {audit}{caught}  [{when}{self.timings.total:.1f}s]{note}"

    def __str__(self) -> str:
        return self.line()

    @property
    def outcome(self) -> Outcome:
        passed = None if self.audit is None else bool(self.audit.passed)
        return pass_rule(
            buggy=bool(self.buggy),
            policy=self.policy,
            # a partial audit that found nothing did not audit the claimed mechanism: not counted
            audit_passed=None if passed and self.audit_partial else passed,
            crashed=self.error is not None,
            timed_out=self.time_limit is not None or self.audit_partial is not None,
        )

    @property
    def passed(self) -> bool:
        return self.outcome.passed

    @property
    def caught(self) -> bool:
        return self.outcome.caught

    @property
    def decided(self) -> bool:
        """False when a time limit stopped the check before it could be judged (see :func:`pass_rule`)."""
        return self.outcome.decided

    @property
    def status(self) -> str:
        """``PASS``, ``FAIL``, ``TIMEOUT`` (not decided: a time limit, not a finding) or ``PARTIAL`` (not
        decided: the audit saw fewer rounds or samples than the claimed mechanism has)."""
        if self.passed:
            return "PASS"
        if self.decided:
            return "FAIL"
        return "TIMEOUT" if self.time_limit is not None else "PARTIAL"

    @property
    def messages(self) -> tuple[str, ...]:
        found = (self.error, self.proof_error, self.audit_error, self.audit_note)  # the note holds any partial scope
        return tuple(m for m in (*found, None if self.time_limit in found else self.time_limit) if m)

    @classmethod
    def failed(cls, name: str, error: str, seconds: float = 0.0) -> "Check":
        """A check that could not run (or whose worker died)."""
        return cls(name=name, error=error, timings=Timings(total=seconds))

    @classmethod
    def stopped(cls, name: str, message: str, seconds: float = 0.0) -> "Check":
        """A check whose worker was killed at its hard time limit: not decided (``message`` says the limit)."""
        return cls(name=name, time_limit=message, timings=Timings(total=seconds))

    def to_json(self) -> dict:
        from ._json import jsonable

        return {
            "name": self.name,
            "passed": self.passed,
            "caught": self.caught,
            "buggy": self.buggy,
            "claim": self.claim,
            "parameters": jsonable(self.parameters),
            "source_hash": self.source_hash,
            "policy": None if self.policy is None else self.policy.value,
            "proof": None if self.proof is None else self.proof.to_json(),
            "audit": None if self.audit is None else self.audit.to_dict(),
            "sandwich": {k: _out(v) for k, v in vars(self.sandwich).items()},
            "error": self.error,
            "proof_error": self.proof_error,
            "audit_error": self.audit_error,
            "audit_note": self.audit_note,
            "audit_partial": self.audit_partial,
            "timings": {k: _out(v) for k, v in vars(self.timings).items()},
            "cached": self.cached,
            "time_limit": self.time_limit,
            "decided": self.decided,
            "status": self.status,
            "exact_noise": self.exact_noise,
            "user_code": list(self.user_code),
        }

    @classmethod
    def from_json(cls, d: dict) -> "Check":
        """The Check :meth:`to_json` wrote (``passed``/``caught`` are recomputed by the pass rule)."""
        return cls(
            name=d["name"],
            buggy=d["buggy"],
            claim=d["claim"],
            parameters=dict(d["parameters"]),
            source_hash=d["source_hash"],
            policy=None if d["policy"] is None else Policy(d["policy"]),
            proof=None if d["proof"] is None else ProofSummary.from_json(d["proof"]),
            audit=None if d["audit"] is None else _audit_from_json(d["audit"]),
            sandwich=Sandwich(**{k: _num(v) for k, v in d["sandwich"].items()}),
            error=d["error"],
            proof_error=d["proof_error"],
            audit_error=d["audit_error"],
            audit_note=d["audit_note"],
            audit_partial=d.get("audit_partial"),
            timings=_timings(d["timings"]),
            cached=bool(d["cached"]),
            time_limit=d.get("time_limit"),
            exact_noise=d.get("exact_noise"),
            user_code=tuple(d.get("user_code", ())),
        )

    def __reduce__(self) -> tuple[Any, tuple[dict]]:  # pickled (to and from worker processes) through its JSON form
        return (Check.from_json, (self.to_json(),))


# --------------------------------------------------------------------------- time limits


class PhaseTimeout(BaseException):
    """A prove/audit phase ran past its time limit (``--timeout``). A BaseException, as KeyboardInterrupt
    is: it interrupts whatever code it lands in, and no ``except Exception`` there (the auditor counting
    what a mechanism raises, a library's own handler) may take it for that code's failure."""


_REARM = 1.0  # seconds between repeated alarms (long enough for the cleanup a first PhaseTimeout starts)


@contextlib.contextmanager
def deadline(seconds: float | None, what: str, *, limit: float | None = None) -> Iterator[None]:
    """Raise PhaseTimeout in the main thread after ``seconds`` (SIGALRM; a no-op where unavailable);
    its message names ``what`` and the limit in force, ``limit`` (default ``seconds``: pass the whole
    ``--timeout`` when ``seconds`` is what is left of it).
    Pure-Python work (sympy, the auditor's loops) is interrupted; a long C call ends first (the
    worker pool's hard limit covers that). The alarm repeats every ``_REARM`` seconds until the block
    is left, so an exception swallowed where it landed (a garbage-collector callback, a ``__del__``)
    is raised again. Nested deadlines keep the outer one running."""
    usable = (
        seconds is not None and hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    )
    if seconds is None or not usable:  # (usable implies a number of seconds)
        yield
        return
    active = [True]
    stated = float(seconds if limit is None else limit)

    def _raise(signum: int, frame: Any) -> None:
        if active[0]:
            raise PhaseTimeout(
                f"{what} did not finish within its time limit of {stated:g} s (a limit for hangs, "
                "not a finding: on a slow or loaded machine raise --timeout)"
            )

    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    start = time.monotonic()
    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, min(float(seconds), outer_left) if outer_left > 0 else float(seconds), _REARM)
    try:
        yield
    finally:
        active[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer_left > 0:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - start), 1e-3), _REARM)


HARD_LIMIT_GRACE = 10.0  # seconds a worker gets beyond its phases' deadlines before it is killed


def hard_limit(timeout: float | None, phases: int) -> float | None:
    """Seconds after which a worker running ``phases`` phases of ``timeout`` each is killed: the
    phases' deadlines plus a grace of max(HARD_LIMIT_GRACE, 25%) for the work between them."""
    if timeout is None:
        return None
    budget = phases * timeout
    return budget + max(HARD_LIMIT_GRACE, 0.25 * budget)


# --------------------------------------------------------------------------- the two phases


def run_proof(mechanism: Any) -> Any:
    import dpharness

    return dpharness.prove(mechanism)


def _fallback_pair(mechanism: Any, proof: Any = None) -> tuple[Any, Any]:
    """The proof's witness pair when it is a valid neighbouring pair, else the mechanism's example pair."""
    w = getattr(proof, "witness", None)
    if w is not None and w.data is not None and w.neighbor is not None:
        try:
            return mechanism.input_spec.validate_pair(w.data, w.neighbor)
        except Exception:
            pass
    return mechanism.example_pair()


# an iterated parts mechanism is audited on this many rounds, at most this many samples a side: its
# rounds run one release at a time (each round's maps see that release's state)
_AUDIT_ROUNDS = 3
_AUDIT_ITERATED_SAMPLES = 20_000


def _user_code(mechanism: Any) -> tuple[str, ...]:
    """How the user functions of a parts mechanism run (:func:`dpharness.mechanisms.parts._structure.user_code`)."""
    from .mechanisms import parts as P
    from .mechanisms.parts._structure import user_code

    m = mechanism.parts if isinstance(mechanism, P.Composite) else mechanism
    return user_code(m.steps, short=True) if isinstance(m, P.PartsMechanism) else ()


def _audit_view(mechanism: Any, samples: int) -> tuple[Any, int, str | None]:
    """What the audit runs: the mechanism itself, or for a parts mechanism that repeats or iterates
    more than ``_AUDIT_ROUNDS`` rounds, the same declaration with that many rounds (the same code per
    round; fewer rounds can only lose less privacy, so its claim still bounds it) and at most
    ``_AUDIT_ITERATED_SAMPLES`` samples a side for iterated rounds; the note says so."""
    import dataclasses

    from .mechanisms import parts as P
    from .mechanisms.parts._base import walk_nodes

    if type(mechanism) is not P.PartsMechanism:
        return mechanism, samples, None
    nodes = walk_nodes(mechanism.steps)
    long = [n for n in nodes if isinstance(n, (P.Repeat, P.Iterate)) and n.times > _AUDIT_ROUNDS]
    iterated = any(isinstance(n, P.Iterate) for n in nodes)
    if not long and not iterated:
        return mechanism, samples, None

    def shorter(step: Any) -> Any:
        if not dataclasses.is_dataclass(step) or not isinstance(step, P.Step):
            return step
        changes = {}
        for f in ("first", "second", "part"):
            child = getattr(step, f, None)
            if isinstance(child, P.Step) and shorter(child) is not child:
                changes[f] = shorter(child)
        if type(step) is P.Compose:
            parts = tuple(shorter(c) for c in step.parts)
            if any(a is not b for a, b in zip(parts, step.parts)):
                changes["parts"] = parts
        if isinstance(step, (P.Repeat, P.Iterate)) and step.times > _AUDIT_ROUNDS:
            changes["times"] = _AUDIT_ROUNDS
        return dataclasses.replace(step, **changes) if changes else step

    view = dataclasses.replace(mechanism, steps=shorter(mechanism.steps)) if long else mechanism
    cut = min(samples, _AUDIT_ITERATED_SAMPLES) if iterated else samples
    said = []
    if long:
        said.append(
            f"audited the first {_AUDIT_ROUNDS} rounds of each repetition longer than {_AUDIT_ROUNDS} rounds (the "
            "proof covers all of them; the rounds run the same code)"
        )
    if cut < samples:
        said.append(f"at {cut} samples a side of the {samples} asked")
    if said:
        said.append(f"register(m, samples=N) audits every round at N samples a side ({mechanism.name})")
    return view, cut, "; ".join(said) if said else None


@dataclass(frozen=True)
class AuditScope:
    """What :func:`run_audit` audited, when it is less than was asked: ``partial`` says how (fewer rounds
    of a repeated or iterated mechanism, fewer samples a side), and every output says it; a partial audit
    that finds no violation is not counted as an audit of the claimed mechanism (a certified violation
    still counts: fewer rounds lose less privacy, and a certified bound holds at any sample count).
    ``note``: everything to tell the user (the partial scope and any fallback pair)."""

    note: str | None = None
    partial: str | None = None


# the gate's audit budget per mechanism (seconds), the default of check() and of `dpharness gate
# --time-budget`: a team's three pipelines (a 250-key group-by, a median and a count, a 1 000-round
# DP-SGD) fit `dpharness gate --own` in 10 minutes on 2 cores (benchmarks/bench_team_gate.py)
GATE_TIME_BUDGET = 120.0


def _search_limit(timeout: float | None, time_budget: float | None, share: float = 1.0) -> float | None:
    """Seconds the audit with its neighbour search may take before the fallback pair is audited in the
    rest of ``timeout``: half of it, or with a ``time_budget`` 1.5 times the budget (the audit is sized to
    fit it) as on an idle machine (divided by ``share``, the share of a core this process gets:
    :func:`dpharness._load.core_share`) when that is more, never more than ``timeout``."""
    if timeout is None:
        return None
    if time_budget is None:
        return timeout / 2
    return min(timeout, max(timeout / 2, 1.5 * time_budget / share))


def run_audit(
    mechanism: Any,
    proof: Any = None,
    *,
    samples: int,
    seed: int,
    data: Any = None,
    neighbor: Any = None,
    ideal_numerics: bool = False,
    timeout: float | None = None,
    cluster: Any = None,
    workers: int | None = None,
    sequential: bool = False,
    every_round: bool = False,
    time_budget: float | None = None,
    search_samples: int | None = None,
) -> tuple[Any, AuditScope]:
    """THE audit entry point (gate, reports, ``dpharness audit``): audit ``mechanism`` against its
    claim (a Rényi claim through its (ε, δ) conversion, see ``_run.audit_target``), offering the
    proof's witness to the auditor's pair search. Returns ``(AuditResult, AuditScope)``: the scope's
    ``partial`` says when fewer rounds or samples were audited than asked. ``every_round``: audit an
    iterated or repeated mechanism on all its rounds at ``samples`` (else a shorter version, PARTIAL).

    ``time_budget``: seconds for the audit, its samples sized from the measured pace (``samples`` a cap;
    see :func:`dpharness.auditors.audit`). Every round of an iterated or repeated mechanism is then
    audited whenever the budget fits its minimum certification; when it does not, the shorter version
    (``_AUDIT_ROUNDS`` rounds) is audited in what is left of the budget — PARTIAL: a certified violation
    still counts, a pass does not — and the scope says which budget would have audited every round. A
    mechanism with no shorter version whose minimum certification does not fit raises
    :class:`~dpharness.errors.AuditBudgetTooSmall` (nothing certified; it names the budget that would fit).
    ``result.extra["reproduce"]`` holds the keywords beyond ``samples`` and ``seed`` that reproduce the
    audit: ``search_samples`` (see :func:`dpharness.auditors.audit`) and ``every_round`` (True when every
    round was audited where the default audits fewer).

    With ``timeout`` and no pair given, the neighbour search gets half of it (1.5 times the budget, as on
    an idle machine, when that is more); if it runs out (or out of memory), the proof's witness pair (else the example pair) is
    audited in the rest and ``note`` says so. A pair given explicitly (or the ``fixed_pair`` of a
    function registered with its pair) is audited within the whole ``timeout``. ``cluster``/``workers``:
    where the auditor runs; ``sequential``: stop once the verdict is certain (see
    :func:`dpharness.auditors.audit`). A library target (``TargetMechanism``) is audited by its own
    :meth:`~dpharness.auditors.libraries.LibraryTarget.audit` (its callable, pair or input space and
    claim; ``samples`` its cap and ``time_budget`` its size, as for any mechanism), so ``dpharness audit``,
    the reports and the gate run the same audit of it for the same options."""
    from .errors import AuditBudgetTooSmall

    from ._load import run_queue_wait

    ask = _AuditAsk(
        samples,
        seed,
        data,
        neighbor,
        ideal_numerics,
        timeout,
        cluster,
        workers,
        sequential,
        time_budget,
        search_samples,
    )
    t0, w0 = time.perf_counter(), run_queue_wait()
    try:
        return _audit_once(mechanism, proof, ask, every_round=every_round or time_budget is not None)
    except AuditBudgetTooSmall as exc:
        if time_budget is None or every_round or _audit_view(mechanism, samples)[2] is None:
            raise  # nothing shorter to audit
        would = (
            f"every round did not fit the time budget of {time_budget:g} s ({exc.samples} samples a side, the "
            f"minimum certification, need about {exc.needed:g} s here): --time-budget {exc.needed:g} (or "
            f"time_budget={exc.needed:g}) audits every round"
        )
        # the budget counts time as on an idle machine (as the auditor sizes it): the clock's time spent less
        # the time this process waited for a core
        w1, wall = run_queue_wait(), time.perf_counter() - t0
        left = time_budget - (wall if w0 is None or w1 is None else max(wall - max(w1 - w0, 0.0), 0.0))
        if left <= 1.0:
            raise AuditBudgetTooSmall(
                f"{exc} ({would})", needed=exc.needed, samples=exc.samples, clock_limited=exc.clock_limited
            ) from None
        rest = None if timeout is None else max(timeout - (time.perf_counter() - t0), 1.0)
        result, scope = _audit_once(mechanism, proof, replace(ask, time_budget=left, timeout=rest), every_round=False)
        note = would if scope.note is None else f"{would}; {scope.note}"
        return result, AuditScope(note, would if scope.partial is None else f"{would}; {scope.partial}")


@dataclass(frozen=True)
class _AuditAsk:
    """What :func:`run_audit` was asked (its keyword arguments but ``every_round``), for :func:`_audit_once`."""

    samples: int
    seed: int
    data: Any
    neighbor: Any
    ideal_numerics: bool
    timeout: float | None
    cluster: Any
    workers: int | None
    sequential: bool
    time_budget: float | None
    search_samples: int | None


def _audit_once(mechanism: Any, proof: Any, ask: _AuditAsk, *, every_round: bool) -> tuple[Any, AuditScope]:
    """One audit of ``mechanism`` as :func:`run_audit` describes it (``every_round`` decides the view)."""
    samples, seed, data, neighbor, timeout, time_budget = (
        ask.samples,
        ask.seed,
        ask.data,
        ask.neighbor,
        ask.timeout,
        ask.time_budget,
    )
    ideal_numerics, cluster, workers, sequential = ask.ideal_numerics, ask.cluster, ask.workers, ask.sequential
    from . import auditors
    from ._json import jsonable
    from ._load import core_share
    from ._run import audit_target

    epsilon, delta = audit_target(mechanism.claim)
    witnesses = [proof.witness] if getattr(proof, "witness", None) is not None else []
    view = _audit_view(mechanism, samples)
    whole = every_round and view[2] is not None  # every round, where fewer is the default
    mechanism, samples, view_note = (mechanism, samples, None) if every_round else view
    search = {} if ask.search_samples is None else {"search_samples": ask.search_samples}

    from .auditors.libraries import TargetMechanism

    def audit(data: Any, neighbor: Any, search: dict = search) -> Any:
        if isinstance(mechanism, TargetMechanism):  # a library target: its own audit, on the pair asked
            target = mechanism.target
            if data is not None or neighbor is not None:
                target = target.with_pair(data, neighbor)
            return target.audit(
                samples=samples,
                seed=seed,
                ideal_numerics=ideal_numerics,
                cluster=cluster,
                workers=workers,
                sequential=sequential,
                time_budget=time_budget,
                **search,
            )
        return _reproducible(
            auditors.audit(
                mechanism,
                data,
                neighbor,
                epsilon=epsilon,
                delta=delta,
                samples=samples,
                seed=seed,
                ideal_numerics=ideal_numerics,
                candidate_witnesses=witnesses,
                cluster=cluster,
                workers=workers,
                sequential=sequential,
                time_budget=time_budget,
                **search,
            ),
            whole,
        )

    fixed = getattr(mechanism, "fixed_pair", None)  # a function registered with its pair (registry.register)
    if data is None and neighbor is None and fixed is not None:
        data, neighbor = fixed
    if data is not None or neighbor is not None:
        with deadline(timeout, f"the audit of {mechanism.name}"):
            return audit(data, neighbor), AuditScope(view_note, view_note)
    t0 = time.perf_counter()
    try:
        share = 1.0 if time_budget is None or timeout is None else core_share()  # a loaded machine: longer
        with deadline(_search_limit(timeout, time_budget, share), f"the audit (neighbour search) of {mechanism.name}"):
            return audit(None, None), AuditScope(view_note, view_note)
    except (PhaseTimeout, MemoryError) as exc:
        data, neighbor = _fallback_pair(mechanism, proof)
        why = (
            f"the neighbour search of {mechanism.name} did not finish within its "
            f"{'half' if time_budget is None else 'share (1.5 times its time budget as on an idle machine, at least half)'} of the "
            f"audit's time limit of {timeout:g} s"
            if isinstance(exc, PhaseTimeout)
            else f"the neighbour search of {mechanism.name} ran out of memory"
        )
        note = f"{why}; audited the pair {jsonable(data)} / {jsonable(neighbor)} instead"
        note = note if view_note is None else f"{view_note}; {note}"
    rest = None if timeout is None else max(timeout - (time.perf_counter() - t0), 1.0)
    with deadline(rest, f"the audit of {mechanism.name}", limit=timeout):
        result = audit(data, neighbor, {})  # {}: the pair is given, nothing searched
    return _with_pair(result, mechanism, data, neighbor), AuditScope(note, view_note)


def _with_pair(result: Any, mechanism: Any, data: Any, neighbor: Any) -> Any:
    """``result`` of an audit on the pair given in place of the search that ran out, with that pair in
    ``extra["reproduce"]`` (``dpharness audit --pair``: the same audit without the search) when the
    command line can carry it exactly; else the note's pair says which it was."""
    from ._run import pair_as_text

    texts = pair_as_text(mechanism, data, neighbor)
    if texts is not None and isinstance(getattr(result, "extra", None), dict):
        result.extra["reproduce"] = {**result.extra.get("reproduce", {}), "pair": list(texts)}
    return result


def _reproducible(result: Any, whole: bool) -> Any:
    """``result`` with ``every_round`` in ``extra["reproduce"]`` when every round was audited where the
    default audits fewer (``dpharness audit --every-round``)."""
    if whole:
        result.extra["reproduce"] = {**result.extra.get("reproduce", {}), "every_round": True}
    return result


def _blind(result: Any) -> str | None:
    """Why ``result`` could not have certified a violation of its claim, or None: a passing audit whose
    ceiling (``extra["certifiable"]``, the bound of maximally separated counts on all its certification
    samples) does not exceed the claimed ε checked nothing, whatever the mechanism, so the gate does not
    count it as audited (PARTIAL)."""
    reach = result.extra.get("certifiable") if isinstance(getattr(result, "extra", None), dict) else None
    if not result.passed or not reach or not reach["ceiling"] <= result.epsilon:
        return None
    return (
        f"at {result.samples} samples a side this audit could certify at most ε = {reach['ceiling']:.4g}, not above "
        f"the claimed ε = {result.epsilon:g}: it could not have found a violation; raise the samples (the cap) or "
        "the time budget"
    )


def _cut(result: Any, timeout: float | None) -> str | None:
    """Why ``result`` audited fewer samples than its time budget fits, or None: the clock's limit
    (``--timeout``) would have ended the budget's audit first on a loaded machine (the budget counts time
    as on an idle one), so the audit was cut to end within it. It checked less than asked: PARTIAL."""
    budget = result.extra.get("time_budget") if isinstance(getattr(result, "extra", None), dict) else None
    if not budget or not budget.get("cut_by_time_limit") or not result.passed:
        return None
    return (
        f"{result.samples} samples a side, fewer than the time budget of {budget['seconds']:g} s fits: the machine "
        f"is loaded and the time limit{'' if timeout is None else f' of {timeout:g} s'} (--timeout, by the clock) "
        "would have ended the budget's audit first; raise --timeout"
    )


def _printable(text: Any) -> str:
    """``text`` with its control characters written as escapes (``\\n``, ``\\x1b``): an error message
    raised by user code is one part of one line, so a line break or carriage return in it cannot start a
    forged ``PASS`` line and an ANSI sequence cannot recolour or rewrite the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _crash(exc: BaseException) -> str:
    """A crash message: expected errors in one line, anything else with its traceback."""
    if isinstance(exc, DPHarnessError):
        return f"{type(exc).__name__}: {exc}"
    return f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"


# --------------------------------------------------------------------------- the pipeline


def check(
    mechanism_or_name: Any,
    *,
    samples: int = GATE_SAMPLES,
    seed: int = DEFAULT_SEED,
    modules: tuple[str, ...] = (),
    timeout: float | None = None,
    workers: int | None = None,
    sequential: bool = True,
    time_budget: float | None = GATE_TIME_BUDGET,
) -> Check:
    """Prove and audit one mechanism (a registered name, built at its defaults, or a Mechanism
    value) and judge it by :func:`pass_rule`, at the gate's defaults unless told (``samples`` a side
    :data:`GATE_SAMPLES`, ``seed`` :data:`DEFAULT_SEED`; no time limit). ``str()`` of the result is the
    gate's line (:meth:`Check.line`). ``modules`` are imported first (their ``register``
    calls run; a worker process needs them). ``timeout`` limits the proof and the audit separately
    (:func:`deadline`); a phase that runs out is reported, not raised. Raises ParameterError for bad
    arguments (an unknown name, ``samples`` < 1, ...); never for a failing mechanism: a crash (even
    in building the registered mechanism) is in ``Check.error``. ``workers``: the audit's processes
    (default: all cores; the result does not depend on it).

    The audit of a mechanism with a proof beside it is sequential (the gate's): it stops at the first
    look where its verdict is certain (:func:`dpharness.auditors.audit`); ``sequential=False``
    certifies on every sample, as ``dpharness audit`` does (the reports'). An audit with no proof
    beside it (a library target, a mechanism audited only or with no proof) is the whole evidence, and
    is certified in one look on every sample whatever ``sequential`` says, so the gate, the reports
    and ``dpharness audit`` print the same bound for the same samples and seed.

    ``time_budget``: seconds for each mechanism's audit (default ``GATE_TIME_BUDGET``, the gate's; None:
    no budget, ``samples`` a side; at most ``timeout``, the audit's time limit): the samples are sized from the measured cost of a sample, ``samples``
    (or the registered ``samples=``) a cap, every round of an iterated mechanism audited when its minimum
    certification fits (:func:`run_audit`); when it does not, the check is PARTIAL and says which budget
    would. At the default ``samples`` with a budget, the cap is raised to the samples the claim needs
    before any violation of it could be certified (:func:`dpharness.auditors._audit.samples_to_reach`: a
    Rényi claim's ε of 14.8 needs about 3·10^7 a side), and for an (ε, δ) claim to the samples on which a
    δ ten times the claim's could be certified (:func:`dpharness.auditors._audit.samples_to_resolve_delta`:
    2^22 a side at δ = 1e-6, at most), which the budget then sizes as any other. A library
    target keeps its samples as the cap (not raised), sized by the budget as any other."""
    from . import _validate as v
    from . import registry
    from ._json import jsonable
    from ._run import audit_target, exact_noise, load_modules
    from .core import Mechanism
    from .errors import ParameterError

    v.integer("samples", samples, minimum=v.MIN_SAMPLES, maximum=v.MAX_SAMPLES)
    v.integer("seed", seed, minimum=0)
    if timeout is not None:
        v.positive("timeout", timeout)
    if time_budget is not None:
        time_budget = float(v.positive("time_budget", time_budget))
    if not isinstance(mechanism_or_name, (str, Mechanism)):
        raise ParameterError(
            f"mechanism_or_name={mechanism_or_name!r} is neither a registered name nor a Mechanism; "
            "pass a name from `dpharness list` or a Mechanism value."
        )
    start = time.perf_counter()
    load_modules(modules)
    name = mechanism_or_name if isinstance(mechanism_or_name, str) else mechanism_or_name.name
    cls = registry.get(name) if isinstance(mechanism_or_name, str) else None  # unknown name: ParameterError
    own = registry.audit_settings(name) if cls is not None else registry.AuditSettings()
    samples = own.samples if own.samples is not None else samples
    timeout = own.timeout if own.timeout is not None else timeout
    raise_cap = own.samples is None and samples == GATE_SAMPLES and time_budget is not None
    if time_budget is not None and timeout is not None:  # the audit's time limit bounds its budget
        time_budget = min(time_budget, timeout)
    try:
        mechanism = cls() if cls is not None else mechanism_or_name
        assert not isinstance(mechanism, str)  # cls is the name's class whenever a name was given
        base = Check(
            name=name,
            buggy=bool(mechanism.buggy),
            claim=mechanism.claim.describe(),
            parameters=jsonable(mechanism.noise_parameters()),
            source_hash=mechanism.source_hash(),
            user_code=_user_code(mechanism),
            mechanism=mechanism,
        )
        claimed, claimed_delta = audit_target(mechanism.claim)
    except Exception as exc:
        return Check.failed(name, _crash(exc), time.perf_counter() - start)
    from .auditors.libraries import TargetMechanism

    if raise_cap and not isinstance(mechanism, TargetMechanism):  # a library target's samples stay its cap
        # the default cap, raised to what the claim needs: a claim above what 10^6 samples a side can refute
        # (a Rényi claim's ε of 14.8) is audited with more, sized by the time budget as any other; and for an
        # (ε, δ) claim, the samples on which a δ ten times the claim's could show (up to 2^22 a side)
        from .auditors._audit import samples_to_reach, samples_to_resolve_delta

        samples = max(
            samples,
            samples_to_reach(float(claimed), float(claimed_delta), sequential=sequential),
            samples_to_resolve_delta(float(claimed), float(claimed_delta), sequential=sequential),
        )

    proof = policy = error = proof_error = audit_error = audit_note = audit_partial = result = time_limit = None
    t0 = time.perf_counter()
    try:
        with deadline(timeout, f"the proof of {name}"):
            proof = run_proof(mechanism)
        policy = proof_policy(name, proof, mechanism)
    except PhaseTimeout as exc:
        proof_error = time_limit = str(exc)
    except Exception as exc:  # a crash in the prover fails the check, with its traceback; the audit still runs
        error = _crash(exc)
    proof_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        result, scope = run_audit(
            mechanism,
            proof,
            samples=samples,
            seed=seed,
            timeout=timeout,
            workers=workers,
            sequential=sequential and not _audit_stands_alone(mechanism, policy),
            every_round=own.samples is not None,
            time_budget=time_budget,
        )
        audit_note, audit_partial = scope.note, scope.partial
        blind = _blind(result) or _cut(result, timeout)
        if blind is not None:
            audit_partial = blind if audit_partial is None else f"{audit_partial}; {blind}"
            audit_note = blind if audit_note is None else f"{audit_note}; {blind}"
    except AuditBudgetTooSmall as exc:  # even the minimum certification did not fit: PARTIAL, naming the budget
        audit_error = str(exc)
        audit_partial = (
            f"nothing certified: the minimum certification ({exc.samples} samples a side) fits the time budget "
            f"of {time_budget:g} s as on an idle machine, but not the clock time --timeout leaves on this loaded "
            "machine (raise --timeout, or run on a quieter machine)"
            if exc.clock_limited
            else f"nothing certified: the minimum certification ({exc.samples} samples a side) needs a time budget "
            f"of about {exc.needed:g} s here, above the {time_budget:g} s given (--time-budget {exc.needed:g})"
        )
    except (PhaseTimeout, AuditTimeLimit) as exc:
        audit_error = str(exc)
        time_limit = time_limit or audit_error
        audit_note = _target_budget_note(mechanism, samples, own.samples is not None or own.timeout is not None)
    except Exception as exc:
        audit_error = f"the auditor raised {type(exc).__name__}: {exc}"
        error = error or _crash(exc)
    audit_seconds = time.perf_counter() - t0
    return replace(
        base,
        policy=policy,
        proof=None if proof is None else ProofSummary.of(proof),
        audit=result,
        sandwich=Sandwich(
            lower=None if result is None else float(result.epsilon_lower_bound),
            proven=None if proof is None else proven_in_audit_units(mechanism.claim, float(proof.bound)),
            claimed=claimed,
        ),
        error=error,
        proof_error=proof_error,
        audit_error=audit_error,
        audit_note=audit_note,
        audit_partial=audit_partial,
        time_limit=time_limit,
        exact_noise=None if result is None or result.passed else exact_noise(mechanism),
        timings=Timings(proof=proof_seconds, audit=audit_seconds, total=time.perf_counter() - start),
        proof_object=proof,
    )
