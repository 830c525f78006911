"""Test-suite wide settings."""

import os
import re

import pytest

# optional modules a CI stage installed on purpose (comma-separated, e.g. "distributed"): a test that
# skips because one of them cannot be imported fails there instead (a skipped test proves nothing)
_REQUIRED = frozenset(m.strip() for m in os.environ.get("DPHARNESS_REQUIRE_MODULES", "").split(",") if m.strip())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under ``DPHARNESS_REQUIRE_MODULES``, a skip for a missing required module is a failure."""
    outcome = yield
    report = outcome.get_result()
    if _REQUIRED and report.skipped and isinstance(report.longrepr, tuple):
        missing = re.search(r"could not import '([\w.]+)'", str(report.longrepr[2]))
        if missing and missing.group(1) in _REQUIRED:
            report.outcome = "failed"
            report.longrepr = (
                f"{missing.group(1)} is required here (DPHARNESS_REQUIRE_MODULES) but {report.longrepr[2]}"
            )


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
