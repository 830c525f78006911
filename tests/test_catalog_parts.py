"""The catalog's composites are short declarations built from parts (``Composite``): their sampler,
law and proof come from one structure, calibrations are proved exactly at their defaults, and the
large-scale cases (wide bounds, small ε, huge scales) are either PROVED or refused at construction
with an error naming the parameter.

Fast deterministic tests, plus two statistical audits (marked ``statistical``) whose false-failure
rate is 1 − confidence = 0.05 each."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import dpharness
from dpharness import AddRemove, ApproxDP, ParameterError, PureDP, RealInterval, Substitute
from dpharness import parts as dp
from dpharness.mechanisms.clamped import ClampedCount, ClampedMean, ClampedSum, ClampedSumUnclamped
from dpharness.mechanisms.discrete_laplace import DiscreteLaplace
from dpharness.mechanisms.histogram import NoisyHistogram, NoisyHistogramScaleBug
from dpharness.mechanisms.laplace import Laplace
from dpharness.mechanisms.parts import Composite, PartsMechanism
from dpharness.mechanisms.pearson import NoisyPearson
from dpharness.mechanisms.std import NoisyStd
from dpharness.proofs import prove
from dpharness.proofs._model import Verdict

COMPOSITES = [ClampedCount, ClampedSum, ClampedMean, NoisyStd, NoisyPearson, NoisyHistogram, Laplace, DiscreteLaplace]


# --------------------------------------------------------------------------- one declaration


@pytest.mark.parametrize("cls", COMPOSITES, ids=lambda c: c.name)
def test_composites_are_declarations_proved_by_walking_them(cls):
    m = cls()
    assert isinstance(m, Composite) and isinstance(m.parts, PartsMechanism)
    assert m.parts.name == m.name and m.parts.claim == m.claim
    assert m.input_spec == m.parts.input_spec
    proof = prove(m)
    assert proof.verdict is Verdict.PROVED
    assert any(s.statement.startswith("[family: grid Laplace]") for s in proof.steps)
    assert proof.bound == pytest.approx(float(m.claim.epsilon))


@pytest.mark.parametrize("cls", COMPOSITES, ids=lambda c: c.name)
def test_sampler_and_law_are_the_declaration(cls):
    m = cls()
    d, _ = m.example_pair()
    a = m.sample(d, 50, np.random.default_rng(7))
    b = m.parts.sample(d, 50, np.random.default_rng(7))
    assert np.array_equal(a, b)
    assert np.array_equal(m.law(d).log_prob(a), m.parts.law(d).log_prob(a))


def test_gallery_twins_are_hand_written_and_refuted():
    for cls in (ClampedSumUnclamped, NoisyHistogramScaleBug):
        m = cls()
        assert not isinstance(m, Composite) and m.buggy
        assert prove(m).verdict is Verdict.REFUTED


def test_scalar_statistics_on_the_grid_lose_nothing_to_rounding():
    """A bound that is a multiple of the grid keeps its stability: the calibrated scale is Δ/ε."""
    assert ClampedSum.calibrated(0.5, lo=-3, hi=1).scale == 6
    assert Laplace.calibrated(0.5, sensitivity=2).scale == 4
    assert DiscreteLaplace.calibrated(0.25, sensitivity=2, dim=3).scale == 8  # integers: no rounding at any dim


def test_real_vectors_gain_dim_minus_one_grid_steps():
    g = Fraction(2**-10)
    m = Laplace.calibrated(1, sensitivity=1, dim=3, granularity=float(g))
    assert Fraction(m.scale) == 1 + 2 * g
    assert prove(m).verdict is Verdict.PROVED
    assert prove(m.replace(scale=1)).verdict is Verdict.REFUTED  # the extreme pair attains the rounding bound


@pytest.mark.parametrize(
    "build",
    [
        lambda: ClampedSum.calibrated(0.3, lo=-0.3, hi=0.7),
        lambda: ClampedSum.calibrated(0.7, lo=-2, hi=3, relation=Substitute()),
        lambda: ClampedMean.calibrated(0.3, lo=-1, hi=0.1, relation=Substitute(), n=3),
        lambda: NoisyStd.calibrated(0.3, lo=-0.1, hi=0.7),
        lambda: NoisyPearson.calibrated(0.3, lo=-0.3, hi=0.9),
        lambda: NoisyHistogram.calibrated(0.3, bins=3, relation=Substitute(), granularity=2.0),
        lambda: ClampedCount.calibrated(0.3, granularity=8.0),
    ],
    ids=["sum", "sum_sub", "mean_sub", "std", "pearson", "histogram_coarse", "count_coarse"],
)
def test_calibrations_are_proved_and_tight(build):
    m = build()
    proof = prove(m)
    assert proof.verdict is Verdict.PROVED, proof.notes
    assert proof.bound <= float(m.claim.epsilon) * (1 + 1e-12)
    assert proof.bound >= float(m.claim.epsilon) * (1 - 1e-9)


def test_finalize_stays_a_public_helper_and_the_release_has_a_law():
    m = ClampedMean()
    out = m.sample(np.array([0.2, 0.4]), 10, np.random.default_rng(1))
    assert out.shape == (10, 2) and ClampedMean.finalize(out).shape == (10,)
    assert np.all(np.isfinite(m.law(np.array([0.2, 0.4])).log_prob(out)))


def test_approx_claims_use_the_exact_laplace_profile():
    assert prove(ClampedSum(claim=ApproxDP(0.5, 0.25))).verdict is Verdict.PROVED
    assert prove(Laplace(claim=ApproxDP(0.5, 0.2))).verdict is Verdict.REFUTED


# --------------------------------------------------------------------------- large scales

LARGE = [
    ("clamped_sum eps=0.01 hi=1e8", lambda: ClampedSum.calibrated(0.01, lo=0, hi=1e8)),
    ("clamped_mean eps=0.01 bounds 1e8", lambda: ClampedMean.calibrated(0.01, lo=-1e8, hi=1e8)),
    ("laplace eps=0.01 sensitivity=1e8", lambda: Laplace.calibrated(0.01, sensitivity=1e8)),
    ("noisy_std hi=50000", lambda: NoisyStd(lo=0, hi=50000)),
    ("noisy_std eps=0.1 bounds 1e6", lambda: NoisyStd.calibrated(0.1, lo=-1e6, hi=1e6)),
    ("noisy_pearson bounds 1e6", lambda: NoisyPearson(lo=-1e6, hi=1e6)),
    ("noisy_pearson eps=0.1 bounds 1e9", lambda: NoisyPearson.calibrated(0.1, lo=-1e9, hi=1e9)),
    ("discrete_laplace scale=2**45", lambda: DiscreteLaplace(scale=2**45, claim=PureDP(2**-45))),
]


@pytest.mark.parametrize("build", [b for _, b in LARGE], ids=[n for n, _ in LARGE])
def test_large_scales_are_proved(build):
    m = build()
    proof = prove(m)
    assert proof.verdict is Verdict.PROVED, proof.notes
    assert proof.bound <= float(m.claim.epsilon) * (1 + 1e-12)
    m.input_spec.validate_pair(*m.example_pair())


def test_automatic_granularity_is_coarsened_only_as_needed():
    assert ClampedSum().grid == 2.0**-20
    m = ClampedSum.calibrated(0.01, lo=0, hi=1e8)  # scale 1e10: 2**-20 would be ~1e16 grid steps
    assert m.granularity is None and m.grid == 2.0**-11
    assert Fraction(m.scale) / Fraction(m.grid) <= 2**45 < Fraction(m.scale) / Fraction(m.grid / 2)


@pytest.mark.parametrize(
    "build, name",
    [
        (lambda: ClampedSum(lo=0, hi=1e8, scale=1e10, granularity=2.0**-20), "scale="),
        (lambda: Laplace(scale=1e10, granularity=2.0**-20), "scale="),
        (lambda: NoisyStd(lo=0, hi=50000, granularity=2.0**-20), "scale="),
        (lambda: DiscreteLaplace(scale=2**50), "scale="),
        (lambda: DiscreteLaplace.calibrated(2**-50), "scale="),
        # a scale beyond the doubles (a subnormal budget): the message's coarser grid overflowed float()
        (lambda: dp.laplace(scale=10**400), "scale="),
        (
            lambda: dp.mechanism(
                name="c",
                records=RealInterval(0, 1),
                relation=AddRemove(),
                steps=dp.count() >> dp.laplace(epsilon=5e-324),
                claim=PureDP(1),
            ),
            "scale=",
        ),
        # a budget whose scale is a Fraction beyond the doubles (not a power of two): float() of it raised
        # OverflowError in the calibration, and so did the σ² of a subnormal ρ
        (
            lambda: dp.mechanism(
                name="c",
                records=RealInterval(0, 1),
                relation=AddRemove(),
                steps=dp.count() >> dp.laplace(epsilon=1e-320),
                claim=PureDP(1),
            ),
            "scale=",
        ),
        (
            lambda: dp.mechanism(
                name="c",
                records=RealInterval(0, 1),
                relation=AddRemove(),
                steps=dp.count() >> dp.gaussian(rho=1e-320),
                claim=PureDP(1),
            ),
            "budget ρ = 1e-320 .* pass a larger budget",
        ),
    ],
)
def test_an_explicit_grid_too_fine_for_the_scale_is_refused_naming_the_parameter(build, name):
    with pytest.raises(ParameterError, match=name):
        build()


# --------------------------------------------------------------------------- audits at large scale


@pytest.mark.statistical
def test_clamped_sum_at_large_bounds_audit_stays_below_the_proof():
    """ClampedSum.calibrated(0.01, lo=0, hi=1e8): the certified lower bound (200 000 samples a side,
    seed 3) is at most the proven ε. False-failure rate 1 − confidence = 0.05."""
    m = ClampedSum.calibrated(0.01, lo=0, hi=1e8)
    proof = prove(m)
    r = dpharness.audit(m, epsilon=0.01, samples=200_000, seed=3)
    assert r.epsilon_lower_bound <= proof.bound, (
        f"certified {r.epsilon_lower_bound} > proven {proof.bound} (false-failure rate 0.05)"
    )


@pytest.mark.statistical
def test_laplace_at_large_sensitivity_audit_stays_below_the_proof():
    """Laplace.calibrated(0.01, sensitivity=1e8): the certified lower bound (200 000 samples a side,
    seed 4) is at most the proven ε. False-failure rate 1 − confidence = 0.05."""
    m = Laplace.calibrated(0.01, sensitivity=1e8)
    proof = prove(m)
    r = dpharness.audit(m, epsilon=0.01, samples=200_000, seed=4)
    assert r.epsilon_lower_bound <= proof.bound, (
        f"certified {r.epsilon_lower_bound} > proven {proof.bound} (false-failure rate 0.05)"
    )
