"""Learned likelihood-ratio family for vector outputs (DP-Sniper-style scores, :mod:`..vector`)."""

from __future__ import annotations

import numpy as np

from dpharness.core import Event

from .. import vector as _vec
from ._protocol import Proposal, ProposalContext

__all__ = ["LearnedRatioFamily", "MAX_ROWS"]

_MIN_ROWS = 20  # propose_vector_events needs this many training rows a side
MAX_ROWS = 200_000  # the score is fitted on at most the first this many training rows a side (said in the event)


class LearnedRatioFamily:
    """Thresholds of a logistic-regression (and vote / tied) score fitted to tell the sides apart."""

    name = "learned likelihood ratio"

    def applies(self, kind: str, ctx: ProposalContext) -> bool:
        return kind in ("discrete-vector", "float-vector")

    def propose(self, train_a, train_b, ctx: ProposalContext) -> list[Proposal]:
        if min(len(train_a), len(train_b)) < _MIN_ROWS or np.asarray(train_a).ndim > 2:
            return []  # too few rows to fit a score (tiny audits), or rows that are not flat vectors
        # a bounded subsample (the first rows: training rows are independent draws), so the fit costs
        # the same at every audit size; the event's words state the subsample's size
        rows = min(len(train_a), len(train_b), MAX_ROWS)
        events = _vec.propose_vector_events(
            train_a[:rows],
            train_b[:rows],
            max_events=ctx.max_events,
            certify_samples=ctx.certification_samples,
            confidence=ctx.confidence,
        )
        if rows == MAX_ROWS:
            events = [
                Event(e.contains, f"{e.description} (score fitted on the first {rows} training outputs a side)")
                for e in events
            ]
        return [Proposal(e, self.name) for e in events]
