"""Learned likelihood-ratio family for vector outputs (DP-Sniper-style scores, :mod:`..vector`)."""

from __future__ import annotations

import numpy as np

from .. import vector as _vec
from ._protocol import Proposal, ProposalContext

__all__ = ["LearnedRatioFamily"]

_MIN_ROWS = 20  # propose_vector_events needs this many training rows a side


class LearnedRatioFamily:
    """Thresholds of a logistic-regression (and vote / tied) score fitted to tell the sides apart."""

    name = "learned likelihood ratio"

    def applies(self, kind: str, ctx: ProposalContext) -> bool:
        return kind in ("discrete-vector", "float-vector")

    def propose(self, train_a, train_b, ctx: ProposalContext) -> list[Proposal]:
        if min(len(train_a), len(train_b)) < _MIN_ROWS or np.asarray(train_a).ndim > 2:
            return []  # too few rows to fit a score (tiny audits), or rows that are not flat vectors
        events = _vec.propose_vector_events(train_a, train_b, max_events=ctx.max_events,
                                            certify_samples=ctx.certification_samples, confidence=ctx.confidence)
        return [Proposal(e, self.name) for e in events]
