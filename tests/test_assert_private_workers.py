"""``assert_private`` audits on the worker processes by default, as ``check`` (the gate) and ``dpharness
audit`` do: ``workers`` defaults to every core the process may use (issue 36, item 5)."""

from __future__ import annotations

from dpharness.auditors import _audit, _runner
from dpharness.testing import assert_private


def _laplace(d, size, rng):
    return float(d) + rng.laplace(0.0, 1.0, size)


def test_assert_private_uses_every_core_by_default(monkeypatch):
    monkeypatch.setattr(_audit, "_POOL_MIN_SECONDS", 0.0)  # pool even this small audit, as a slow one is
    r = assert_private(_laplace, 0, 1, epsilon=1.0, samples=20_000, seed=0, ideal_numerics=True)
    assert r.extra["workers"] == _runner.default_workers()
    assert r.extra["phases"]["certification"]["on_workers"] == (_runner.default_workers() > 1)


def test_workers_one_keeps_it_in_this_process(monkeypatch):
    monkeypatch.setattr(_audit, "_POOL_MIN_SECONDS", 0.0)
    r = assert_private(_laplace, 0, 1, epsilon=1.0, samples=20_000, seed=0, ideal_numerics=True, workers=1)
    assert r.extra["workers"] == 1 and not r.extra["phases"]["certification"]["on_workers"]
