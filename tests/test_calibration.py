"""Noise given a budget instead of a scale (issue 15 §7): dp.mechanism derives each scale from the
stability of what precedes it (dpharness.proofs._calibrate); the proof then checks the claim."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpharness import parts as dp
from dpharness import prove
from dpharness.core import AddRemove, ApproxDP, BoundedChange, IntegerRange, PureDP, RealInterval, RenyiDP
from dpharness.errors import ParameterError
from dpharness.mechanisms import parts as mechanism_parts
from dpharness.mechanisms.parts._structure import measurement_leaves
from dpharness.proofs import Verdict


def _mech(steps, claim, records=RealInterval(0, 100), relation=AddRemove(), **kw):
    return dp.mechanism(name="calibrated", records=records, relation=relation, steps=steps, claim=claim, **kw)


def _leaves(m):
    return measurement_leaves(m.steps)


def test_laplace_from_epsilon_is_exact_and_proved_at_that_epsilon():
    m = _mech(dp.clamp(0, 100) >> dp.sum() >> dp.laplace(epsilon=0.5), PureDP(0.5))
    (leaf,) = _leaves(m)
    assert leaf.scale == 200  # sensitivity 100 / ε 0.5, exactly
    assert "scale from ε = 1/2" in m.steps.describe()
    assert prove(m).verdict is Verdict.PROVED
    below = _mech(dp.clamp(0, 100) >> dp.sum() >> dp.laplace(epsilon=0.5), PureDP(0.4999))
    assert prove(below).verdict is Verdict.REFUTED


def test_laplace_off_the_grid_uses_the_rounding_rule_the_proof_states():
    # records in [0, 0.3]: values are not multiples of the grid, so the centres may move ceil(Δ/g) steps
    m = _mech(
        dp.clamp(0, 0.3) >> dp.sum() >> dp.laplace(epsilon=1, granularity=2**-4),
        PureDP(1),
        records=RealInterval(0, 0.3),
    )
    (leaf,) = _leaves(m)
    assert Fraction(leaf.scale) == Fraction(5, 16)  # ceil(0.3·16) = 5 steps of 1/16, t = 5
    assert prove(m).verdict is Verdict.PROVED


def test_gaussian_from_rho_rounds_sigma_up_to_the_smallest_float():
    m = _mech(dp.clamp(0, 3) >> dp.sum() >> dp.gaussian(rho=0.3), RenyiDP(4, 1.2))
    (leaf,) = _leaves(m)
    need = Fraction(9) / (2 * Fraction(0.3))
    assert Fraction(leaf.sigma) ** 2 >= need
    assert Fraction(np.nextafter(leaf.sigma, 0)) ** 2 < need
    assert prove(m).verdict is Verdict.PROVED  # Rényi ε = αρ = 1.2


def test_gaussian_from_epsilon_delta_matches_an_independent_calibration():
    """σ for (1, 1e-6) on a count agrees with dp_accounting's PLD calibration of a continuous Gaussian
    (the grid 2**-20 makes the discrete Gaussian's profile equal to it within 1e-4)."""
    accounting = pytest.importorskip("dp_accounting")
    from dp_accounting import mechanism_calibration
    from dp_accounting.pld import pld_privacy_accountant

    reference = mechanism_calibration.calibrate_dp_mechanism(
        lambda: pld_privacy_accountant.PLDAccountant(),
        accounting.GaussianDpEvent,
        1.0,
        1e-6,
        bracket_interval=mechanism_calibration.ExplicitBracketInterval(1, 10),
        tol=1e-6,
    )
    m = _mech(dp.count() >> dp.gaussian(epsilon=1, delta=1e-6), ApproxDP(1, 1e-6))
    (leaf,) = _leaves(m)
    assert abs(leaf.sigma / reference - 1) < 1e-3
    assert prove(m).verdict is Verdict.PROVED


def test_discrete_gaussian_from_epsilon_delta_is_proved_and_a_smaller_sigma_is_not():
    m = _mech(dp.count() >> dp.discrete_gaussian(epsilon=1, delta=1e-6), ApproxDP(1, 1e-6), records=IntegerRange(0, 10))
    (leaf,) = _leaves(m)
    assert prove(m).verdict is Verdict.PROVED
    smaller = _mech(
        dp.count() >> dp.discrete_gaussian(sigma=leaf.sigma * 0.999), ApproxDP(1, 1e-6), records=IntegerRange(0, 10)
    )
    assert prove(smaller).verdict is not Verdict.PROVED


def test_vector_gaussian_from_epsilon_delta_goes_through_rho():
    m = _mech(
        dp.gaussian(epsilon=2, delta=1e-5),
        ApproxDP(2, 1e-5),
        records=RealInterval(-10, 10),
        relation=BoundedChange(1, "l2"),
        input="vector",
        dim=3,
    )
    assert "zCDP conversion" in m.steps.describe()
    assert prove(m).verdict is Verdict.PROVED


def test_a_split_composition_gives_exact_shares_and_proves_the_total():
    m = _mech(
        dp.clamp(0, 100)
        >> dp.compose(
            dp.sum() >> dp.laplace(),
            dp.count() >> dp.laplace(),
            dp.count() >> dp.laplace(),
            epsilon=1,
            weights=(2, 1, 1),
        ),
        PureDP(1),
    )
    scales = [leaf.scale for leaf in _leaves(m)]
    assert scales == [200, 4, 4]  # ε shares 1/2, 1/4, 1/4
    proof = prove(m)
    assert proof.verdict is Verdict.PROVED and float(proof.bound) == 1.0


def test_an_epsilon_delta_total_over_gaussians_is_split_in_zcdp_and_proved():
    """Ten Gaussian counts sharing (1, 1e-6): one ρ split ten ways. σ = 14.33 each, whose exact
    ε(1e-6) is 0.927 (dp_accounting); splitting ε and δ by basic composition would give σ = 41.3
    (exact ε 0.298)."""
    steps = dp.compose(*[dp.count() >> dp.gaussian() for _ in range(10)], epsilon=1, delta=1e-6)
    m = _mech(steps, ApproxDP(1, 1e-6), records=IntegerRange(0, 1))
    sigmas = {leaf.sigma for leaf in _leaves(m)}
    assert len(sigmas) == 1 and 14.2 < sigmas.pop() < 14.5
    assert "the zCDP budget of (ε, δ) = (1, 1e-06)" in m.steps.describe()
    assert prove(m).verdict is Verdict.PROVED


def test_a_mixed_split_gives_laplace_its_root_share_and_repetitions_a_third():
    steps = dp.clamp(0, 10) >> dp.compose(
        dp.sum() >> dp.gaussian(),
        dp.count() >> dp.laplace(),
        dp.repeat(3, dp.count() >> dp.gaussian()),
        epsilon=1.5,
        delta=1e-6,
    )
    m = _mech(steps, ApproxDP(1.5, 1e-6), records=RealInterval(0, 10))
    sum_leaf, count_leaf, *rounds = _leaves(m)
    assert len(rounds) == 3
    rho = (Fraction(1, 2) / Fraction(sum_leaf.sigma) ** 2) * 100  # ρ_i = Δ²/(2σ²), sum sensitivity 10
    # the Laplace count spends ε = √(2ρ_i) of the same share ρ_i
    assert abs(float(1 / Fraction(count_leaf.scale)) - (2 * float(rho)) ** 0.5) < 1e-6
    # each of the three repetitions (sensitivity 1) spends a third of the same share ρ_i: σ² = 3/(2ρ_i)
    assert abs(rounds[0].sigma - 3**0.5 * sum_leaf.sigma / 10) < 1e-6 * rounds[0].sigma
    assert prove(m).verdict is Verdict.PROVED


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: dp.laplace(2, epsilon=1), "not both"),
        (lambda: dp.gaussian(epsilon=1), "pass both epsilon= and delta="),
        (lambda: dp.gaussian(rho=1, delta=1e-6), "rho= alone"),
        (lambda: dp.laplace(epsilon=-1), "epsilon=-1 must be > 0"),
        (lambda: dp.gaussian(epsilon=1, delta=1), "delta=1 must be < 1"),
        (lambda: dp.compose(dp.count() >> dp.laplace(), delta=1e-6), "splits no budget"),
        (lambda: dp.compose(dp.count() >> dp.laplace(), epsilon=1, weights=(1, 2)), "one positive weight per part"),
    ],
)
def test_bad_budgets_are_refused_at_construction(make, words):
    with pytest.raises(ParameterError, match=words):
        make()


@pytest.mark.parametrize(
    "steps, words",
    [
        (dp.count() >> dp.laplace(), "neither a scale nor a budget"),
        (dp.compose(dp.count() >> dp.gaussian(), dp.count() >> dp.laplace(), epsilon=1), "delta= with epsilon="),
        (dp.compose(dp.count() >> dp.laplace(epsilon=1), epsilon=1), "its own budget inside a split"),
        (dp.compose(dp.compose(dp.count() >> dp.laplace(), epsilon=1), epsilon=1), "splits its own total"),
        (dp.repeat(10, dp.poisson_sample(0.1) >> dp.count() >> dp.laplace(epsilon=1)), "a budget under poisson_sample"),
        (dp.parallel(dp.count() >> dp.laplace(epsilon=1), by=0, keys=[1, 2]), "a budget under parallel"),
    ],
)
def test_budgets_the_walk_cannot_calibrate_are_refused_naming_the_node(steps, words):
    with pytest.raises(ParameterError, match=words):
        _mech(steps, PureDP(1), records=IntegerRange(0, 5))


def test_an_unresolved_budget_is_refused_by_the_mechanisms_layer():
    with pytest.raises(ParameterError, match="is a budget, not yet a scale"):
        mechanism_parts.mechanism(
            name="raw",
            records=IntegerRange(0, 5),
            relation=AddRemove(),
            steps=dp.count() >> dp.laplace(epsilon=1),
            claim=PureDP(1),
        )


def test_the_derived_scale_is_part_of_the_gate_cache_key():
    a = _mech(dp.count() >> dp.laplace(epsilon=1), PureDP(1))
    b = _mech(dp.count() >> dp.laplace(epsilon=0.5), PureDP(1))
    assert a.source_hash() != b.source_hash()


def test_selections_from_epsilon_follow_their_family_maps_and_are_proved():
    median = _mech(
        dp.clamp(0, 120) >> dp.quantile(0.5, candidates=range(121), epsilon=1), PureDP(1), records=RealInterval(0, 120)
    )
    (leaf,) = _leaves(median)
    assert leaf.scale == 1  # 2·Δ/ε with Δ = max(α, 1 − α) = 1/2
    assert prove(median).verdict is Verdict.PROVED
    hist = dp.histogram(categories=[1, 2, 3, 4, 5])
    for noise, k, scale in (("gumbel", 3, 6), ("exponential", 1, 4), ("laplace", 1, 4)):
        m = _mech(hist >> dp.report_noisy_max(noise=noise, k=k, epsilon=0.5), PureDP(0.5), records=IntegerRange(1, 5))
        (leaf,) = _leaves(m)
        assert leaf.scale == scale, noise  # Gumbel top-3 on monotone counts: kΔ/ε; the others 2Δ/ε
        assert prove(m).verdict is Verdict.PROVED, noise


def test_a_median_and_a_count_split_one_budget():
    steps = dp.compose(
        dp.clamp(0, 120) >> dp.quantile(0.5, candidates=range(121)), dp.count() >> dp.laplace(), epsilon=1
    )
    m = _mech(steps, PureDP(1), records=RealInterval(0, 120))
    assert [leaf.scale for leaf in _leaves(m)] == [2, 2]
    assert prove(m).verdict is Verdict.PROVED
    with pytest.raises(ParameterError, match="not both"):
        dp.quantile(0.5, candidates=range(3), scale=1, epsilon=1)
