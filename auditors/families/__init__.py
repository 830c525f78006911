"""Event families: where the auditor's candidate events come from.

An event family (:class:`EventFamily`) is a name and two methods, ``applies(kind, ctx)`` and
``propose(train_a, train_b, ctx) -> list[Proposal]``. The auditor asks every family in
:data:`FAMILIES` that applies to the output kind for proposals on the first half of each pair's
training outputs; ranking, selection and certification are the same for all of them (see
:func:`dpharness.auditors.audit`). A new family is one module with a class following the protocol
and one line in :data:`FAMILIES`.

Families and what they look for:

==========================  ===============================================================
histogram                   discrete scalars and objects: likelihood-ratio sets of outcomes
pattern histogram           whole rows of integer vectors; repeated rows of float vectors
pattern features            integer vectors: number of nonzero coordinates, coordinate sum
thresholds, intervals,      scalars: half-lines, intervals, repeated values
atoms
coordinates, projections    vectors: per-coordinate events, sums / maxima / mean-difference
float structure             doubles: float cells, lowest set bit, round trips (Mironov 2012)
rounding                    sub-binade range × last mantissa bits; integer residues
learned likelihood ratio    vectors: thresholds of a fitted classifier score (DP-Sniper)
tails                       (ε, δ) claims: far tail half-lines chosen on a fitted tail model
==========================  ===============================================================
"""

from __future__ import annotations

import numpy as np

from . import classic, float_structure, learned, rounding, tails
from ._protocol import EventFamily, Proposal, ProposalContext

__all__ = ["EventFamily", "Proposal", "ProposalContext", "FAMILIES", "propose"]

FAMILIES: list[EventFamily] = [
    classic.HISTOGRAM,
    classic.THRESHOLDS,
    classic.INTERVALS,
    classic.ATOMS,
    classic.PATTERN_HISTOGRAM,
    classic.PATTERN_FEATURES,
    classic.COORDINATES,
    classic.PROJECTIONS,
    float_structure.FloatStructureFamily(),
    rounding.RoundingFamily(),
    learned.LearnedRatioFamily(),
    tails.TailFamily(),
]


def propose(
    train_a: np.ndarray, train_b: np.ndarray, ctx: ProposalContext, families: list[EventFamily] | None = None
) -> list[Proposal]:
    """Proposals of every family (of ``families``, default :data:`FAMILIES` as it is now) that
    applies to ``ctx.kind``, in registry order."""
    out: list[Proposal] = []
    for fam in FAMILIES if families is None else families:
        if fam.applies(ctx.kind, ctx):
            out.extend(fam.propose(train_a, train_b, ctx))
    return out
