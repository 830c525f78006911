"""The hint of a violation certified on the floats' structure (issue 17: a forgotten clamp with exact
noise was told "the leak may be in the float implementation... use an exact sampler"). When the
mechanism's samplers are exact (the parts prover covers it), the hint points to the calibration, with
the proof's derived bound; otherwise the float hint stays. Fast deterministic tests, and one slow
end-to-end gate run."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

import dpharness
from dpharness import AddRemove, PureDP, RealInterval, cli
from dpharness import parts as dp
from dpharness._run import exact_noise, float_hint
from dpharness.auditors._model import AuditResult
from dpharness.mechanisms.laplace import Laplace
from dpharness.mechanisms.textbook_laplace import TextbookLaplace
from dpharness.pipeline import Check, Policy, Sandwich, Timings


def _forgot_clamp():
    """Records in [0, 1000] summed without a clamp, noise calibrated for sensitivity 120."""
    return dp.mechanism(
        name="forgot_clamp",
        records=RealInterval(0, 1000),
        relation=AddRemove(),
        steps=dp.sum() >> dp.laplace(scale=120),
        claim=PureDP(1),
    )


def _violation(family: str = "float structure") -> AuditResult:
    return AuditResult(
        epsilon_lower_bound=6.9,
        passed=False,
        epsilon=1.0,
        delta=0.0,
        confidence=0.95,
        samples=200_000,
        seed=0,
        method="test",
        witness=None,
        witness_description="S = ...",
        counts={},
        extra={"family": family},
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class _OwnSampler(Laplace):
    """A catalog Laplace whose sampler is redefined: the parts proof (and its exact numerics) no longer covers it."""

    name: ClassVar[str] = "own_sampler_laplace"

    def _sample(self, data, size, rng):
        return Laplace._sample(self, data, size, rng)


def test_exact_noise_is_read_from_what_the_mechanism_is():
    assert exact_noise(_forgot_clamp())  # a parts declaration
    assert exact_noise(Laplace())  # a catalog Composite declared from parts
    assert not exact_noise(TextbookLaplace())  # floats from numpy's Laplace sampler (the gallery's float bug)
    assert not exact_noise(_OwnSampler())  # a redefined sampler is not covered
    assert not exact_noise(lambda data, size, rng: data)


def test_exact_noise_points_to_the_calibration_with_the_derived_bound():
    hint = float_hint(_violation(), exact_noise=True, proven=8.333333, claimed=1.0)
    assert "the noise is exact" in hint and "not in the float implementation" in hint
    assert "derived bound ε ≤ 8.333 exceeds the claim 1" in hint
    assert "clamp bounds" in hint and "sensitivity" in hint
    assert "use an exact sampler" not in hint and "--ideal-numerics" not in hint
    # without a derived bound above the claim it still names the calibration, not the floats
    assert "derived bound" not in float_hint(_violation("rounding"), exact_noise=True, proven=None, claimed=1.0)


def test_float_noise_keeps_the_float_hint():
    for exact in (False, None):
        hint = float_hint(_violation(), exact_noise=exact, proven=8.3, claimed=1.0)
        assert "float implementation" in hint and "--ideal-numerics" in hint
    assert float_hint(_violation("thresholds"), exact_noise=True) is None  # only for the floats' families


def test_the_gate_line_and_junit_message_of_a_forgotten_clamp():
    c = Check(
        name="forgot_clamp",
        buggy=False,
        claim="ε = 1 (pure DP)",
        policy=Policy.REFUTED,
        audit=_violation(),
        sandwich=Sandwich(6.9, 8.333333333333334, 1.0),
        timings=Timings(total=1.0),
        exact_noise=True,
    )
    line = cli._gate_line(c)
    assert "the noise is exact" in line and "exceeds the claim 1" in line and "float implementation (" not in line
    assert "clamp bounds" in cli._failure_message(c, gallery=False)
    back = Check.from_json(c.to_json())
    assert back.exact_noise is True and back == c


@pytest.mark.slow
def test_a_forgotten_clamp_end_to_end():
    """Audited at 2·10^5 samples a side, seed 0 (the violation, ε ≥ 6.9 against 1, is certified by a
    floats'-structure event there; about 10 s)."""
    c = dpharness.check(_forgot_clamp(), samples=200_000, seed=0)
    assert c.exact_noise is True and not c.passed
    line = cli._gate_line(c)
    if c.audit.extra.get("family") in ("float structure", "rounding"):
        assert "the noise is exact" in line and "exceeds the claim 1" in line
    assert "use an exact sampler" not in line
