"""The pytest plugin (``--dp-seed``, ``--dp-samples``, the header, the ``statistical`` marker) and
``assert_private``, exercised through pytester (in subprocesses: numpy cannot be re-imported in-process). The auditor is the ``dp_fakes`` stand-in inside the
inner test files (deterministic); ``test_assert_private_real_auditor`` uses the real one."""

from __future__ import annotations

import numpy as np
import pytest

import dp_fakes  # imported before any pytester run: pytester drops modules first imported during its lifetime
import dpharness.auditors

pytest_plugins = ["pytester"]

_INNER = """
import pytest
import dpharness, dpharness.auditors
import dp_fakes
from dpharness.testing import assert_private, PrivacyViolation

@pytest.fixture(autouse=True)
def _fake_auditor(monkeypatch):
    monkeypatch.setattr(dpharness.auditors, "audit", dp_fakes.fake_audit, raising=False)
    dp_fakes.CALLS.clear()

def test_private():
    r = assert_private(dp_fakes.Coin(), 0, 1, epsilon=1.0)
    assert r.passed

def test_leaky():
    assert_private(dp_fakes.Coin(log_odds=2), 0, 1, epsilon=1.0)

def test_seed_and_samples_flow(dp_seed, dp_samples):
    assert_private(dp_fakes.Coin(), 0, 1, epsilon=1.0)
    call = dp_fakes.CALLS[-1]
    assert (call["seed"], call["samples"]) == (dp_seed, dp_samples)
    print("SEEN", call["seed"], call["samples"])

def test_explicit_seed_wins():
    assert_private(dp_fakes.Coin(), 0, 1, epsilon=1.0, seed=5, samples=123)
    assert (dp_fakes.CALLS[-1]["seed"], dp_fakes.CALLS[-1]["samples"]) == (5, 123)

@pytest.mark.statistical
def test_marked():
    pass
"""


def test_violation_carries_the_result(monkeypatch):
    from dpharness.testing import PrivacyViolation, assert_private

    monkeypatch.setattr(dpharness.auditors, "audit", dp_fakes.fake_audit, raising=False)
    with pytest.raises(AssertionError) as exc:
        assert_private(dp_fakes.Coin(log_odds=3), 0, 1, epsilon=1.0, seed=1, samples=900)
    assert isinstance(exc.value, PrivacyViolation)
    assert exc.value.result.epsilon_lower_bound == pytest.approx(2.9)


@pytest.mark.statistical
def test_assert_private_real_auditor():
    """Real auditor: a callable adding Laplace(0, 0.25) noise to a count claims ε = 1 but has ε = 4;
    the audit must certify the violation. False-failure rate: the certified bound exceeds the true
    ε with probability <= 5% (confidence 0.95); the test can fail only if the auditor misses a 4x
    violation at 200 000 samples, which for a sound and tight auditor does not happen at this seed."""
    from dpharness.testing import PrivacyViolation, assert_private

    if not hasattr(dpharness.auditors, "audit"):
        pytest.fail("dpharness.auditors.audit is not implemented yet")

    def leaky_count(data, size, rng):
        return np.round((len(data) + rng.laplace(0, 0.25, size)) * 2**20) / 2**20

    with pytest.raises(PrivacyViolation) as exc:
        assert_private(leaky_count, [1, 2, 3], [1, 2], epsilon=1.0, samples=200_000, seed=11)
    message = str(exc.value)
    assert "witness:" in message and "seed=11" in message
    assert exc.value.result.epsilon_lower_bound > 1.0


@pytest.fixture
def inner(pytester):
    pytester.makepyfile(test_inner=_INNER, dp_fakes=open(dp_fakes.__file__, encoding="utf-8").read())
    return pytester


def test_header_shows_seed_and_failure_reproduces(inner):
    result = inner.runpytest_subprocess(
        "--dp-seed=77", "--dp-samples=5000", "-s", "--strict-markers", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["dpharness: --dp-seed=77 --dp-samples=5000*"])
    result.stdout.fnmatch_lines(["*SEEN 77 5000*"])
    text = result.stdout.str()
    # the failure names the certified bound, the witness event and how to reproduce
    assert "privacy violation certified for fake_coin: ε ≥ 1.958" in text
    assert "> claimed ε = 1" in text
    assert "witness: D=0, D'=1, event output = 0" in text
    assert "reproduce with seed=77, samples=5000 (pytest --dp-seed=77 --dp-samples=5000)" in text


def test_default_seed_and_env(inner, monkeypatch):
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", "-k", "seed_and_samples", "-s")
    result.stdout.fnmatch_lines(["dpharness: --dp-seed=20261122 --dp-samples=200000*", "*SEEN 20261122 200000*"])
    monkeypatch.setenv("DP_SEED", "9")
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", "-k", "seed_and_samples", "-s")
    result.stdout.fnmatch_lines(["dpharness: --dp-seed=9 *", "*SEEN 9 200000*"])


def test_bad_options_are_usage_errors(inner):
    result = inner.runpytest_subprocess("--dp-seed=-3", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dp-seed=-3 must be >= 0*"])
    result = inner.runpytest_subprocess("--dp-samples=0", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result = inner.runpytest_subprocess("--dp-samples=5", "-p", "no:cacheprovider")  # below an audit's 20
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dp-samples=5 must lie in [[]20, 2**50]*"])


def test_statistical_marker_is_registered(inner):
    result = inner.runpytest_subprocess("--markers", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["@pytest.mark.statistical:*false-failure rate*"])
    result = inner.runpytest_subprocess("-m", "statistical", "--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=4)


def test_statistical_hypothesis_tests_have_no_deadline(pytester):
    """assert_private inside @given: the plugin lifts Hypothesis' 200 ms deadline for statistical tests."""
    pytester.makepyfile("""
        import time
        import pytest
        from hypothesis import given, settings, strategies as st

        # Hypothesis drops the deadline on CI machines (its "ci" profile); pin the default one here.
        settings.register_profile("deadline_200ms", deadline=200)
        settings.load_profile("deadline_200ms")

        @pytest.mark.statistical
        @settings(max_examples=2)
        @given(st.integers(0, 3))
        def test_slow_example(x):
            time.sleep(0.3)

        @settings(max_examples=2)
        @given(st.integers(0, 3))
        def test_not_statistical_keeps_its_deadline(x):
            time.sleep(0.3)
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1, failed=1)
