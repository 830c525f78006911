"""Tail family for (ε, δ) claims: half-lines far in the tails of scalar outputs, thresholds chosen on a
fitted tail model (:mod:`dpharness.auditors.tails`)."""

from __future__ import annotations

import math

from .. import tails as _tails
from ._protocol import Proposal, ProposalContext

__all__ = ["TailFamily"]


class TailFamily:
    """Applies to float and integer scalars when the claim has δ > 0 (with δ = 0 the thresholds
    family already scans the tails by counts)."""

    name = "tails"

    def applies(self, kind: str, ctx: ProposalContext) -> bool:
        return kind in ("float", "discrete") and ctx.delta > 0

    def propose(self, train_a, train_b, ctx: ProposalContext) -> list[Proposal]:
        events = _tails.propose_tail_events(
            train_a,
            train_b,
            max_events=ctx.candidates,
            delta=ctx.delta,
            cert_n=ctx.certification_samples,
            confidence=ctx.confidence,
            epsilon=ctx.epsilon if math.isfinite(ctx.epsilon) else None,
        )
        return [Proposal(e, self.name) for e in events]
