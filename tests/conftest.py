"""Test-suite wide settings."""

import os

import pytest


def pytest_configure(config):
    """Under pytest-xdist each worker process gets one BLAS thread: the workers already take a core each,
    and BLAS threads on top oversubscribe the cores (the auditor's fits run about 3x slower)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from dpharness._run import single_blas_thread

        single_blas_thread()


@pytest.fixture(autouse=True)
def _fresh_gate_cache(tmp_path, monkeypatch):
    """Each test gets its own gate cache directory: a result cached by one test is never reused by another."""
    monkeypatch.setenv("DPHARNESS_CACHE_DIR", str(tmp_path / "dpharness-cache"))
    # the cache's signing key file lives under $XDG_CONFIG_HOME: a test never writes the real home
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
