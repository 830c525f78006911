"""The numeric model is part of the proof (STYLE rule 3): parameters are read as the exact binary
values the code computes with, neighbour relations are validated exactly as the proofs assume,
witnesses are inputs the mechanism accepts, and accepted parameters never crash the prover.
Fast, deterministic tests."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

import dpharness
from dpharness import ApproxDP, BoundedChange, exact, prove
from dpharness.errors import ParameterError
from dpharness.mechanisms import _noise
from dpharness.mechanisms.clamped import ClampedCount, ClampedSum
from dpharness.mechanisms.discrete_laplace import DiscreteLaplace
from dpharness.mechanisms.gaussian import Gaussian
from dpharness.mechanisms.laplace import Laplace
from dpharness.mechanisms.median import ExponentialMedian
from dpharness.mechanisms.randomized_response import RandomizedResponse
from dpharness.mechanisms.std import NoisyStd
from dpharness.proofs import Verdict
from dpharness.proofs._common import LaplaceProfile

_ALL = dpharness.catalog(gallery=None)


# --------------------------------------------------------------------------- 1. floats read as binary values


def test_exact_reads_a_float_as_its_binary_value():
    assert exact(0.1) == sp.Rational(*Fraction(0.1).as_integer_ratio())
    assert exact(0.1) != sp.Rational(1, 10)
    assert exact(0.5) == sp.Rational(1, 2)
    assert exact(np.float64(0.3)) == sp.Rational(*Fraction(0.3).as_integer_ratio())


@pytest.mark.parametrize("value", [0.1, 0.3, 0.7, 1.3, 1e-9, 123.456])
def test_calibration_helpers_round_the_binary_value_safely(value):
    q = Fraction(value)
    assert Fraction(_noise.ratio_up(1, value)) >= 1 / q
    assert Fraction(_noise.ratio_down(value, 3)) <= q / 3
    assert Fraction(_noise.float_up(Fraction(1, 3) * q)) >= Fraction(1, 3) * q
    assert Fraction(_noise.float_down(Fraction(1, 3) * q)) <= Fraction(1, 3) * q
    up = _noise.log_up(1 + value)
    assert up > math.log(1 + value) or Fraction(up) > Fraction(math.log(1 + value))


@pytest.mark.parametrize(
    "name",
    [
        "laplace",
        "discrete_laplace",
        "randomized_response",
        "gaussian",
        "clamped_sum",
        "noisy_histogram",
        "median",
        "warner_rr",
    ],
)
@pytest.mark.parametrize("eps", [0.1, 0.3, 0.7])
def test_calibrated_float_epsilons_are_proved_on_the_binary_reading(name, eps):
    m = _ALL[name].calibrated(eps)
    assert prove(m).verdict is Verdict.PROVED, m.describe()


# --------------------------------------------------------------------------- 2. exact neighbour validation


def test_bounded_change_has_no_tolerance():
    m = Laplace(scale=1, sensitivity=1, granularity=1.0)
    assert prove(m).verdict is Verdict.PROVED
    with pytest.raises(ParameterError):  # distance 1 + 2e-13 (was accepted with the 1e-12 tolerance)
        m.input_spec.validate_pair(np.array([0.5 - 1e-13]), np.array([1.5 + 1e-13]))
    m.input_spec.validate_pair(np.array([0.5]), np.array([1.5]))


def test_bounded_change_decides_each_norm_exactly():
    assert BoundedChange(1, "l1").is_neighbour([0.0, 0.0], [0.5, 0.5])
    assert not BoundedChange(0.3, "l1").is_neighbour([0.1], [0.4])  # 0.4 - 0.1 > 0.3 in binary
    assert BoundedChange(0.1, "l1").is_neighbour([0.0], [0.1])
    assert BoundedChange(1, "l2").is_neighbour([0.0, 0.0], [1.0, 0.0])
    assert BoundedChange(5, "l2").is_neighbour([0, 0], [3, 4])
    assert not BoundedChange(1, "l2").is_neighbour([0.0, 0.0], [0.6, 0.8])  # 0.6² + 0.8² > 1 in binary
    assert BoundedChange(1, "linf").is_neighbour([0.0, 0.0], [1.0, -1.0])
    assert not BoundedChange(1, "linf").is_neighbour([0.0], [math.nextafter(1.0, 2.0)])


# --------------------------------------------------------------------------- 3. witnesses are valid inputs


def _check_witness(m) -> None:
    m.input_spec.validate_pair(*m.example_pair())
    proof = prove(m)
    w = proof.witness
    if w is None:
        return
    m.input_spec.validate_pair(w.data, w.neighbor)
    if w.output is not None:
        out = np.asarray(w.output, dtype=float)
        rows = out.reshape(1, -1) if out.ndim else out.reshape(1)
        try:
            lp = float(np.asarray(m.law(w.data).log_prob(rows))[0])
        except (NotImplementedError, TypeError, ValueError):
            return  # the law cannot evaluate this output
        assert lp > -math.inf, f"{m.name}: witness output {w.output!r} has probability 0 on the witness data"


@pytest.mark.parametrize("name", sorted(_ALL))
def test_every_catalog_witness_passes_validate_pair(name):
    _check_witness(_ALL[name]())


@pytest.mark.parametrize("relation", [dpharness.Substitute(), dpharness.AddRemove()])
def test_median_witness_is_a_neighbour_under_its_relation(relation):
    _check_witness(ExponentialMedian.calibrated(1, relation=relation))


@pytest.mark.parametrize(
    "m",
    [
        Laplace(dim=1, sensitivity=0.1),
        Laplace(dim=3, sensitivity=0.3),
        Laplace(granularity=1.0, sensitivity=3),
        Gaussian(sensitivity=0.1, dim=3),
    ],
    ids=repr,
)
def test_vector_witnesses_at_decimal_sensitivities(m):
    _check_witness(m)


# --------------------------------------------------------------------------- 4. Gaussian far tails


@pytest.mark.parametrize("sigma", [30.0, 50.0, 1e6])
def test_gaussian_far_tail_is_proved(sigma):
    proof = prove(Gaussian(sigma=sigma, claim=ApproxDP(1, 1e-5)))
    assert proof.verdict is Verdict.PROVED, proof.notes


def test_gaussian_under_calibrated_is_still_refuted():
    assert prove(Gaussian(sigma=3.0, claim=ApproxDP(1, 1e-5))).verdict is Verdict.REFUTED


# --------------------------------------------------------------------------- 5. (ε', δ) from a pure proof


@pytest.mark.parametrize(
    "m, verdict",
    [
        (Laplace(claim=ApproxDP(0.5, 0.25)), Verdict.PROVED),  # δ(1/2) = 1 - e^{-1/4} ≈ 0.2212
        (Laplace(claim=ApproxDP(0.5, 0.2)), Verdict.REFUTED),
        (DiscreteLaplace(claim=ApproxDP(0.5, 0.3)), Verdict.PROVED),  # ≈ 0.2876
        (DiscreteLaplace(claim=ApproxDP(0.5, 0.25)), Verdict.REFUTED),
        (ClampedCount(claim=ApproxDP(0.5, 0.25)), Verdict.PROVED),
        (ClampedSum(claim=ApproxDP(0.5, 0.2)), Verdict.REFUTED),
        (RandomizedResponse(claim=ApproxDP(0.5, 0.3)), Verdict.PROVED),  # (e - e^{1/2})/(e + 1) ≈ 0.2876
        (RandomizedResponse(claim=ApproxDP(0.5, 0.25)), Verdict.REFUTED),
        (RandomizedResponse(k=5, log_odds=2, claim=ApproxDP(1, 0.42)), Verdict.PROVED),
    ],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_pure_proof_answers_approx_claims_through_the_exact_profile(m, verdict):
    proof = prove(m)
    assert proof.verdict is verdict, proof.notes
    if verdict is Verdict.REFUTED:
        m.input_spec.validate_pair(proof.witness.data, proof.witness.neighbor)


def test_without_a_profile_an_approx_claim_below_the_pure_bound_is_unproven_with_a_reason():
    """Two coordinates: no exact profile (one scalar grid Laplace only); the zCDP conversion is the
    fallback and does not reach δ = 0.25, so the claim is UNPROVEN and the note names it."""
    proof = prove(Laplace(dim=2, claim=ApproxDP(0.5, 0.25)))
    assert proof.verdict is Verdict.UNPROVEN
    assert any("not discharged" in n and "zCDP" in n for n in proof.notes)


@pytest.mark.parametrize("K, u, eps", [(1, 1, 0.5), (3, 0.7, 0.2), (5, 2.5, 1.1), (4, 1, 0.0), (7, 3, 2.3)])
def test_laplace_profile_matches_the_brute_force_hockey_stick(K, u, eps):
    d, _, _, _ = LaplaceProfile(steps=K, scale=sp.nsimplify(u), g=sp.Integer(1)).delta(sp.nsimplify(eps))
    ys = np.arange(-2000, 2000)
    p = np.tanh(1 / (2 * u)) * np.exp(-np.abs(ys) / u)
    q = np.tanh(1 / (2 * u)) * np.exp(-np.abs(ys - K) / u)
    assert float(d) == pytest.approx(np.maximum(p - math.exp(eps) * q, 0).sum(), rel=1e-9, abs=1e-15)


# --------------------------------------------------------------------------- 6. accepted parameters never crash


def test_noisy_std_with_wide_bounds_is_proved():
    proof = prove(NoisyStd(lo=0, hi=50000))
    assert proof.verdict is Verdict.PROVED
    _check_witness(NoisyStd(lo=0, hi=50000))


_UNUSUAL = {
    "scale": [1e9, 1e-9],
    "sigma": [1e6, 1e-6],
    "sigma2": [10**12, 1e-6],
    "sensitivity": [1e9, 1e-9, 0.1],
    "lo": [-1e6],
    "hi": [50000, 1e-6],
    "granularity": [1.0, 2.0**-40],
    "dim": [3],
    "bits": [2, 52],
    "log_odds": [1e-9, 30],
    "beta": [1e-9, 30],
    "threshold": [1e6],
    "p_truth": [0.01],
    "p_yes": [0.99],
}


def _unusual_cases():
    for name, cls in _ALL.items():
        base = cls()
        for field, value in base.noise_parameters().items():
            for v in _UNUSUAL.get(field, []):
                yield pytest.param(name, field, v, id=f"{name}-{field}={v!r}")


@pytest.mark.parametrize("name, field, value", list(_unusual_cases()))
def test_unusual_accepted_parameters_never_raise(name, field, value):
    try:
        m = _ALL[name]().replace(**{field: value})
    except ParameterError:
        pytest.skip("parameter refused by the constructor")
    proof = prove(m)
    assert proof.verdict in (Verdict.PROVED, Verdict.UNPROVEN, Verdict.REFUTED)
    if proof.verdict is not Verdict.PROVED:
        assert proof.notes, "a verdict other than PROVED must carry its reason"
    if proof.witness is not None:
        m.input_spec.validate_pair(proof.witness.data, proof.witness.neighbor)


def test_granularity_accepts_every_numpy_float_that_is_a_power_of_two():
    """check_granularity admits numpy floats; float32 and float16 powers of two were a TypeError from Fraction()."""
    for t in (np.float16, np.float32, np.float64, np.longdouble):
        assert _noise.check_granularity("granularity", t(2.0**-10)) == 2.0**-10
    with pytest.raises(ParameterError, match="not a power of two"):
        _noise.check_granularity("granularity", np.float32(0.3))


def _numpy_cases():
    for name, cls in _ALL.items():
        base = cls()
        for field in (f.name for f in dataclasses.fields(base) if f.init):
            value = getattr(base, field)
            if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
                continue
            kinds = (np.int64, np.float32, np.float64) if isinstance(value, int) else (np.float32, np.float64)
            for kind in kinds:
                yield pytest.param(name, field, value, kind, id=f"{name}-{field}-{kind.__name__}")


@pytest.mark.parametrize("name, field, value, kind", list(_numpy_cases()))
def test_numpy_scalar_parameters_read_as_their_plain_value(name, field, value, kind):
    """A catalog parameter given as a numpy scalar is the plain number it holds (np.float32(0.1) is
    0.100000001490116...): the mechanism builds as with that plain number, with the same verdict, or the
    parameter is refused with a ParameterError. ClampedMean(lo=np.float32(0.1)), NoisyStd(scale=np.float32(2.5))
    and others raised TypeError from Fraction() while building their parts."""
    numpy_value = kind(value)
    plain = numpy_value.item()
    try:
        want = prove(_ALL[name]().replace(**{field: plain}))
    except ParameterError:
        with pytest.raises(ParameterError):
            _ALL[name]().replace(**{field: numpy_value})
        return
    got = prove(_ALL[name]().replace(**{field: numpy_value}))
    assert (got.verdict, got.bound) == (want.verdict, want.bound)
