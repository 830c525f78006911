"""Test-suite wide settings."""

import pytest


@pytest.fixture(autouse=True)
def _fresh_gate_cache(tmp_path, monkeypatch):
    """Each test gets its own gate cache directory: a result cached by one test is never reused by another."""
    monkeypatch.setenv("DPHARNESS_CACHE_DIR", str(tmp_path / "dpharness-cache"))
