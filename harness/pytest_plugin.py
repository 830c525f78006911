"""pytest plugin (entry point ``pytest11``): ``--dp-seed``, ``--dp-samples``, the seed in the
report header and the ``statistical`` marker. Thin and cheap to import: nothing heavy at load."""

from __future__ import annotations

import os

import pytest

DEFAULT_SEED = 20261122
DEFAULT_SAMPLES = 200_000


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dpharness", "differential-privacy audits")
    group.addoption("--dp-seed", type=int, default=None,
                    help=f"seed for dpharness audits and statistical tests (default {DEFAULT_SEED}, or $DP_SEED)")
    group.addoption("--dp-samples", type=int, default=None,
                    help=f"samples per side for assert_private (default {DEFAULT_SAMPLES})")


def _seed(config: pytest.Config) -> int:
    value = config.getoption("--dp-seed")
    if value is None:
        value = int(os.environ.get("DP_SEED", DEFAULT_SEED))
    return value


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "statistical: a randomized test with a fixed seed; its false-failure rate is stated in its docstring"
    )
    from . import testing

    testing._configure(seed=_seed(config), samples=config.getoption("--dp-samples") or DEFAULT_SAMPLES)


def pytest_report_header(config: pytest.Config) -> str:
    return f"dpharness: --dp-seed={_seed(config)} (rerun with this seed to reproduce any statistical failure)"


@pytest.fixture
def dp_seed(request: pytest.FixtureRequest) -> int:
    """The session's dpharness seed (``--dp-seed``)."""
    return _seed(request.config)
