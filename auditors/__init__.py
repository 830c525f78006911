"""Statistical auditing: certified empirical lower bounds on ε.

:func:`audit` (``dpharness.audit`` is the same with the proof's witness offered first) runs a
mechanism — a catalog :class:`~dpharness.core.Mechanism` or any callable ``fn(data, size, rng)``
(``fn(data)`` with ``vectorized=False``) — on neighbouring inputs and returns an
:class:`AuditResult` whose ``epsilon_lower_bound`` is, with probability >= ``confidence``, at most
the true ε:

1. *Pairs*: the given pair; for a catalog mechanism without one, a neighbour search
   (:mod:`.neighbours`); for a callable with ``inputs=``, a search of that input space
   (:mod:`.pairsearch`).
2. *Training*: a fraction of the samples (10%, at most 4·10^6 a side; for a pure-DP
   claim 10% up to 10^6, then 1% of the further samples) is drawn; on its first half
   every applicable *event family* (:mod:`.families`: histograms, thresholds / intervals / atoms,
   coordinates and projections, floating-point structure, rounding (sub-binade range × last bits),
   learned likelihood-ratio scores, tails for (ε, δ) claims) proposes candidate events; the second
   half ranks them, and the best ``max_events`` (event, direction) candidates over all pairs are
   kept — up to half of the slots go to events seen on one side only, which certify a large
   ε from a handful of hits when the other input never produces them.
3. *Certification*: fresh samples are streamed in chunks (counts only; local worker processes or a
   dask cluster; per-chunk seeds, so the same seed gives the same result for any number of
   workers) and each kept event's hits are turned into exact Clopper-Pearson bounds with a
   Bonferroni union bound over every kept candidate (:mod:`.stats`).

The statistics are pure functions of counts and are public here too. :func:`one_run_audit`
(:mod:`.one_run`) gives an ε lower bound from ONE run with canaries (Steinke, Nasr & Jagielski 2023)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._model import AuditResult
from ._audit import audit
from .stats import (
    DeltaBound,
    EpsilonBound,
    ProportionBound,
    bonferroni_level,
    clopper_pearson_interval,
    clopper_pearson_lower,
    clopper_pearson_upper,
    delta_lower_bound,
    epsilon_lower_bound,
)

__all__ = [
    "audit",
    "AuditResult",
    "one_run_audit",
    "OneRunResult",
    "OneRunTarget",
    "OneRunBound",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "clopper_pearson_interval",
    "bonferroni_level",
    "epsilon_lower_bound",
    "delta_lower_bound",
    "ProportionBound",
    "EpsilonBound",
    "DeltaBound",
]

# the one-run audit (scipy.stats) is imported when first used: reading a cached AuditResult (a warm gate)
# needs none of it
_ONE_RUN = (
    "OneRunBound",
    "OneRunResult",
    "OneRunTarget",
    "one_run_audit",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
)

if TYPE_CHECKING:
    from .one_run import (
        OneRunBound,
        OneRunResult,
        OneRunTarget,
        one_run_audit,
        one_run_epsilon_lower_bound,
        one_run_p_value,
    )


def __getattr__(name: str) -> Any:
    if name in _ONE_RUN:
        from . import one_run

        return getattr(one_run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
