"""The event-family protocol: what a family of candidate events is and what it is told.

A family *suggests* events from the first half of the training outputs of one neighbouring pair;
the driver (:func:`dpharness.auditors.audit`) ranks every suggestion on the second half, keeps the
best ``max_events`` (event, direction) candidates over all pairs and families, and certifies only
those on fresh samples. Nothing a family does touches the certification samples, so a family can
be any heuristic at all without affecting soundness: the Bonferroni count is ``max_events``
whatever the families propose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dpharness.core import Event

__all__ = ["EventFamily", "Proposal", "ProposalContext"]


@dataclass(frozen=True)
class ProposalContext:
    """What a family is told about the audit of one pair.

    ``kind``: the output kind (``"object"``, ``"discrete"``, ``"discrete-vector"``, ``"float"``,
    ``"float-vector"``, see :func:`dpharness.auditors.events.output_kind`). ``max_events``: the
    most events a family should return (its own cap; the driver's Bonferroni count is separate).
    ``candidates``: the audit's Bonferroni count (its ``max_events``: (event, direction) candidates
    certified in all). ``certification_samples``: fresh samples a side the chosen events will be
    counted on.
    ``confidence``, ``epsilon``, ``delta``: the audit's confidence and the claim under test.
    ``ideal_numerics``: audit the mathematical mechanism (skip floating-point structure).
    ``shifts``: additive constants taken from the pair (for round-trip float events).
    ``data``/``neighbor``: the pair itself, unchanged."""

    kind: str
    max_events: int
    candidates: int
    certification_samples: int
    confidence: float
    epsilon: float
    delta: float
    ideal_numerics: bool = False
    shifts: tuple[float, ...] = (1.0, -1.0)
    data: Any = None
    neighbor: Any = None


@dataclass(frozen=True)
class Proposal:
    """One suggested event and the family that suggested it.

    ``one_sided``: the family expects the event to be (nearly) impossible on one side — it had hits
    on one side of its training outputs and none on the other. The ranking keeps such an event
    even with few training hits when the ranking half confirms it (hits on one side only), and
    judges it by the bound it would certify with no hits on the other side; a handful of
    certification hits then suffice for a large ε (see :mod:`dpharness.auditors.stats`)."""

    event: Event
    family: str
    one_sided: bool = False


@runtime_checkable
class EventFamily(Protocol):
    """A family of candidate events: a name (shown in the audit's words) and two methods."""

    @property
    def name(self) -> str:
        """The family's name, shown in the audit's words (a plain attribute satisfies it)."""
        ...

    def applies(self, kind: str, ctx: ProposalContext) -> bool:
        """Whether the family has anything to say about outputs of this kind under this context."""
        ...

    def propose(self, train_a: np.ndarray, train_b: np.ndarray, ctx: ProposalContext) -> list[Proposal]:
        """Events suggested by the training outputs on the data (``train_a``) and on the neighbour
        (``train_b``), first axis = samples; at most about ``ctx.max_events`` of them."""
        ...
