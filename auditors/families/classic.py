"""The generic families: histograms of discrete outputs and row patterns, thresholds / intervals /
atoms of scalars, coordinates and projections of vectors (proposers in :mod:`..events`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from dpharness.core import Event

from .. import events as _ev
from ._protocol import Proposal, ProposalContext

__all__ = [
    "FunctionFamily",
    "HistogramFamily",
    "PatternHistogramFamily",
    "HISTOGRAM",
    "PATTERN_HISTOGRAM",
    "PATTERN_FEATURES",
    "THRESHOLDS",
    "INTERVALS",
    "ATOMS",
    "COORDINATES",
    "PROJECTIONS",
]


@dataclass(frozen=True)
class FunctionFamily:
    """A family made of one proposer ``fn(train_a, train_b, *, max_events) -> list[Event]`` applied
    to the output kinds in ``kinds``."""

    name: str
    kinds: frozenset
    fn: Callable[..., list[Event]]

    def applies(self, kind: str, ctx: ProposalContext) -> bool:
        return kind in self.kinds

    def propose(self, train_a, train_b, ctx: ProposalContext) -> list[Proposal]:
        return [Proposal(e, self.name) for e in self.fn(train_a, train_b, max_events=ctx.max_events)]


def _one_sided(keys_a, keys_b, *, object_kind: bool, label: str, name: str, describe=None) -> list[Proposal]:
    return [
        Proposal(e, name, True)
        for e, _ in _ev.one_sided_events(keys_a, keys_b, object_kind=object_kind, label=label, describe=describe)
    ]


class HistogramFamily:
    """Exact histogram of discrete scalar or object outputs: likelihood-ratio sets of outcomes, single
    outcomes, and the outcomes seen on one side only (an output one input never produces)."""

    name = "histogram"

    def applies(self, kind: str, ctx: ProposalContext) -> bool:
        return kind in ("object", "discrete")

    def propose(self, train_a, train_b, ctx: ProposalContext) -> list[Proposal]:
        out = [Proposal(e, self.name) for e in _ev.propose_discrete(train_a, train_b, max_events=ctx.max_events)]
        if ctx.kind == "object":
            ka, kb = _ev._ObjectKeys.keys(train_a), _ev._ObjectKeys.keys(train_b)
            return out + _one_sided(ka, kb, object_kind=True, label="output", name=self.name)
        return out + _one_sided(
            _ev.row_keys(train_a), _ev.row_keys(train_b), object_kind=False, label="output", name=self.name
        )


def repeated_rows(train_a, train_b, *, max_events: int) -> list[Event]:
    """Float vectors with exactly repeated rows (sentinels, grids): histogram of the repeated rows."""
    ka, kb = _ev.row_keys(train_a), _ev.row_keys(train_b)
    vals, counts = np.unique(np.concatenate([ka, kb]), return_counts=True)
    if not np.any(counts >= 2):
        return []
    rep = vals[counts >= 2]
    ia, ib = np.isin(ka, rep), np.isin(kb, rep)
    return _ev._discrete_events(
        ka[ia],
        kb[ib],
        np.asarray(train_a)[ia],
        np.asarray(train_b)[ib],
        max_events=max_events,
        object_kind=False,
        label="output vector",
    )


class PatternHistogramFamily:
    """Exact histogram of whole output rows: integer vectors (answer patterns, bit vectors) and the
    exactly repeated rows of float vectors; also the patterns seen on one side only."""

    name = "pattern histogram"

    def applies(self, kind: str, ctx: ProposalContext) -> bool:
        return kind in ("discrete-vector", "float-vector")

    def propose(self, train_a, train_b, ctx: ProposalContext) -> list[Proposal]:
        if ctx.kind == "float-vector":
            return [Proposal(e, self.name) for e in repeated_rows(train_a, train_b, max_events=ctx.max_events)]
        out = [Proposal(e, self.name) for e in _ev.propose_discrete(train_a, train_b, max_events=ctx.max_events)]
        return out + _one_sided(
            _ev.row_keys(train_a), _ev.row_keys(train_b), object_kind=False, label="output pattern", name=self.name
        )


HISTOGRAM = HistogramFamily()
PATTERN_HISTOGRAM = PatternHistogramFamily()
PATTERN_FEATURES = FunctionFamily("pattern features", frozenset({"discrete-vector"}), _ev.propose_pattern_features)
THRESHOLDS = FunctionFamily("thresholds", frozenset({"discrete", "float"}), _ev.propose_thresholds)
INTERVALS = FunctionFamily("intervals", frozenset({"float"}), _ev.propose_intervals)
ATOMS = FunctionFamily("atoms", frozenset({"float"}), _ev.propose_atoms)
COORDINATES = FunctionFamily("coordinates", frozenset({"discrete-vector", "float-vector"}), _ev.propose_coordinates)
PROJECTIONS = FunctionFamily("projections", frozenset({"discrete-vector", "float-vector"}), _ev.propose_projections)
