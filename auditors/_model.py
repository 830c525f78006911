"""The audit result value every ``audit`` returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dpharness._json import jsonable as _jsonable
from dpharness.core import Witness

__all__ = ["AuditResult"]


@dataclass(frozen=True)
class AuditResult:
    """Outcome of an audit.

    ``epsilon_lower_bound``: certified lower bound on the true ε (>= 0, may be ``math.inf``); with
    probability >= ``confidence`` over the audit's randomness it does not exceed the true ε.
    ``passed`` is False iff a violation of the claimed (epsilon, delta) is certified.
    ``witness``: the neighbouring pair and event that certified the bound; ``counts``: the event's
    counts on the certification samples (``{"hits_data", "hits_neighbor", "n_data", "n_neighbor"}``);
    ``method``: how events were chosen and certified (e.g. "histogram LR events; Clopper-Pearson, Bonferroni over 7 events").
    ``delta_lower_bound``: certified lower bound on δ at the claimed ε (None when not computed).
    ``extra``: details — ``family`` (the event family whose event certified the bound, None when none
    did; ``"raises"`` for the event "one release raises", whose ``counts`` are raised calls among
    calls), ``output_kind``, ``train_samples``, ``certification_samples``, ``proposed_events``,
    ``one_sided_events`` (kept candidates ranked as seen on one side only), ``direction``, ``p1_low``,
    ``p0_high``, ``per_event_level``, ``certification`` (every certified candidate's counts, read by
    :meth:`tradeoff`), ``workers``, ``phases`` (``{"pairs": {...}, "certification": {...}}``: the wall
    seconds of training, proposing and ranking every pair, and of certifying, and whether each ran on
    the workers), and ``pairs``/``notes`` when there are any."""

    epsilon_lower_bound: float
    passed: bool
    epsilon: float
    delta: float
    confidence: float
    samples: int
    seed: int
    method: str
    witness: Witness | None
    witness_description: str
    counts: dict = field(default_factory=dict)
    delta_lower_bound: float | None = None
    events_tested: int = 0
    pairs_tested: int = 1
    elapsed: float = 0.0
    extra: dict = field(default_factory=dict)

    def tradeoff(self) -> Any:
        """The certified trade-off points, envelope and μ-GDP lower bound of this audit
        (:class:`dpharness.auditors.tradeoff.TradeoffBound`), from the certification counts in
        ``extra["certification"]``; they hold together with ``epsilon_lower_bound`` at ``confidence``.
        None when no event was certified or the result predates the record (an old cache entry)."""
        from .tradeoff import tradeoff_from_audit

        return tradeoff_from_audit(self)

    def _repr_html_(self) -> str:
        """Jupyter: the certified lower bound against the claim, the witness and the method."""
        from dpharness._html import card

        return card(
            "audit",
            "passed" if self.passed else "VIOLATION",
            "good" if self.passed else "bad",
            [
                ("certified ε lower bound", f"{self.epsilon_lower_bound:.6g} (confidence {self.confidence:g})"),
                ("claim", f"ε = {self.epsilon:g}" + (f", δ = {self.delta:g}" if self.delta else "")),
                ("certified δ lower bound", self.delta_lower_bound),
                ("certified μ-GDP lower bound", _mu_words(self)),
                ("samples a side", self.samples),
                ("seed", self.seed),
                ("witness", self.witness_description or None),
                ("seconds", f"{self.elapsed:.3g}"),
            ],
            [("method", [self.method]), ("notes", [str(n) for n in self.extra.get("notes", ())])],
        )

    def to_dict(self) -> dict:
        def num(x: Any) -> Any:
            return x if x is None or math.isfinite(x) else ("inf" if x > 0 else "-inf")

        w = self.witness
        return {
            "epsilon_lower_bound": num(self.epsilon_lower_bound),
            "passed": self.passed,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "confidence": self.confidence,
            "samples": self.samples,
            "seed": self.seed,
            "method": self.method,
            "witness": self.witness_description,
            "data": None if w is None else _jsonable(w.data),
            "neighbor": None if w is None else _jsonable(w.neighbor),
            "counts": dict(self.counts),
            "delta_lower_bound": num(self.delta_lower_bound),
            "events_tested": self.events_tested,
            "pairs_tested": self.pairs_tested,
            "elapsed": self.elapsed,
            "extra": {k: _jsonable(v) for k, v in self.extra.items()},
        }


def _mu_words(result: AuditResult) -> str | None:
    t = result.tradeoff()
    return None if t is None else f"{t.mu:.4g} (trade-off curve: {len(t.alpha)} certified point(s))"
