"""The auditor's settings (``dpharness.auditors._audit._settings``) of a small one-worker audit, for tests
of the auditor's private rules: vectorised, δ = 0, seed 0, 95% confidence, 20 events, 1 000 samples a
side, 10% training, no cluster; ``given`` overrides any of them (epsilon is required)."""

from __future__ import annotations

from typing import Any

from dpharness.auditors import _audit

DEFAULTS: dict[str, Any] = dict(
    delta=0.0,
    samples=1_000,
    seed=0,
    confidence=0.95,
    vectorized=True,
    ideal_numerics=False,
    progress=False,
    workers=1,
    max_events=20,
    train_fraction=0.1,
    cluster=None,
)


def audit_settings(fn: Any, **given: Any) -> Any:
    return _audit._settings(fn, **{**DEFAULTS, **given})
