"""Statistical auditing: certified empirical lower bounds on ε.

:func:`audit` chooses events on training samples and certifies them on fresh samples with exact
Clopper-Pearson intervals and a Bonferroni union bound (see :mod:`dpharness.auditors.stats`).
The statistics are pure functions of counts and are public here too."""

from __future__ import annotations

from ._model import AuditResult
from ._audit import audit
from .stats import (
    DeltaBound, EpsilonBound, ProportionBound, bonferroni_level, clopper_pearson_interval,
    clopper_pearson_lower, clopper_pearson_upper, delta_lower_bound, epsilon_lower_bound,
)

__all__ = [
    "audit", "AuditResult",
    "clopper_pearson_lower", "clopper_pearson_upper", "clopper_pearson_interval", "bonferroni_level",
    "epsilon_lower_bound", "delta_lower_bound", "ProportionBound", "EpsilonBound", "DeltaBound",
]
