"""pytest plugin (entry point ``pytest11``): ``--dp-seed``, ``--dp-samples``, the seed in the
report header and the ``statistical`` marker. Thin and cheap to import: nothing heavy at load.

Options are namespaced (``--dp-*``). The seed defaults to ``$DP_SEED`` or 20261122; it is printed
in the header, offered as the ``dp_seed`` fixture, and used by :func:`dpharness.testing.assert_private`
unless a test passes its own."""

from __future__ import annotations

import os

import pytest

DEFAULT_SEED = 20261122
DEFAULT_SAMPLES = 200_000


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dpharness", "differential-privacy audits")
    group.addoption(
        "--dp-seed",
        type=int,
        default=None,
        help=f"seed for dpharness audits and statistical tests (default {DEFAULT_SEED}, or $DP_SEED)",
    )
    group.addoption(
        "--dp-samples", type=int, default=None, help=f"samples per side for assert_private (default {DEFAULT_SAMPLES})"
    )


def _seed(config: pytest.Config) -> int:
    value = config.getoption("--dp-seed", default=None)
    if value is None:
        env = os.environ.get("DP_SEED")
        try:
            value = int(env) if env else DEFAULT_SEED
        except ValueError:
            raise pytest.UsageError(f"DP_SEED={env!r} is not an integer; set DP_SEED to an integer seed.") from None
    if value < 0:
        raise pytest.UsageError(f"--dp-seed={value} must be >= 0; pass a non-negative integer seed.")
    return value


def _samples(config: pytest.Config) -> int:
    value = config.getoption("--dp-samples", default=None)
    if value is None:
        return DEFAULT_SAMPLES
    from ._validate import MAX_SAMPLES, MIN_SAMPLES  # no sympy, z3: cheap to import

    if not MIN_SAMPLES <= value <= MAX_SAMPLES:
        raise pytest.UsageError(
            f"--dp-samples={value} must lie in [{MIN_SAMPLES}, 2**50], the samples per side an audit takes; "
            "pass a number in that range."
        )
    return value


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "statistical: a randomized test with a fixed seed; its false-failure rate is stated in its docstring"
    )
    from . import testing

    testing._configure(seed=_seed(config), samples=_samples(config))


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """A ``statistical`` test that is also a Hypothesis test runs audits (seconds each): lift
    Hypothesis' per-example deadline for it, keeping every other setting of the test."""
    for item in items:
        if item.get_closest_marker("statistical") is None:
            continue
        test = getattr(item, "obj", None)
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if test is None or current is None or current.deadline is None:
            continue
        from hypothesis import settings

        test._hypothesis_internal_use_settings = settings(current, deadline=None)


def pytest_report_header(config: pytest.Config) -> str:
    return (
        f"dpharness: --dp-seed={_seed(config)} --dp-samples={_samples(config)} "
        "(rerun with this seed to reproduce any statistical failure)"
    )


@pytest.fixture
def dp_seed(request: pytest.FixtureRequest) -> int:
    """The session's dpharness seed (``--dp-seed``)."""
    return _seed(request.config)


@pytest.fixture
def dp_samples(request: pytest.FixtureRequest) -> int:
    """The session's sample budget per side (``--dp-samples``)."""
    return _samples(request.config)
