"""Floating-point structure family (Mironov 2012; Haney et al. 2022): float cells, the weight of the
lowest set bit, and round trips through shifts from the pair (see :mod:`dpharness.auditors.floats`)."""

from __future__ import annotations

from .. import floats as _fl
from ._protocol import Proposal, ProposalContext

__all__ = ["FloatStructureFamily"]


class FloatStructureFamily:
    """Events on which doubles an output can be; skipped with ``ideal_numerics``. The unions of cells
    seen on one side only are proposed as one-sided events (outputs one input never produces)."""

    name = "float structure"

    def applies(self, kind: str, ctx: ProposalContext) -> bool:
        return kind in ("float", "float-vector") and not ctx.ideal_numerics

    def propose(self, train_a, train_b, ctx: ProposalContext) -> list[Proposal]:
        return [
            Proposal(e, self.name, one_sided)
            for e, one_sided in _fl.float_structure_proposals(
                train_a, train_b, max_events=ctx.max_events, shifts=ctx.shifts
            )
        ]
