"""The accountant's questions (dpharness.epsilon, dpharness.delta, ``dpharness epsilon|delta NAME``) and
what an UNPROVEN (ε, δ) proof says instead of a vacuous δ.

* the user guide's DP-SGD (docs/guide/parts.rst: q = 0.01, σ = 1, clip 1, 1 000 rounds): ε(1e-5) within
  0.01% of the smallest PROVED claim found by an independent bisection of proofs, the value itself PROVED
  and 0.99 × it not; δ(ε = 2) likewise;
* exact answers: a pure-ε mechanism's ε at δ = 0, partition selection's exact δ; hand-proved catalog
  classes by the same search over claims;
* arguments refused with ParameterError naming the argument; a class that does not take a replaced claim
  is UnsupportedError with the reason; the CLI's output and exit codes;
* a bracket's lower end only where the proof certifies one (tests/test_proof_headline.py: what an
  UNPROVEN (ε, δ) proof says)."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import pytest

import dpharness
from dpharness import AddRemove, ApproxDP, PureDP, RealBox, parts as dp, prove
from dpharness.cli import main
from dpharness.errors import ParameterError, UnsupportedError
from dpharness.proofs import Verdict
from test_proof_headline import (
    _dpsgd,
    _grad,
    _partition,
    _step,
    _ten_laplace,
    _two_laplace_counts,
)  # the same declarations


def _proved(m, claim) -> bool:
    return prove(dataclasses.replace(m, claim=claim)).verdict is Verdict.PROVED


def _bisect(proved, lo, hi, rel=1e-6):
    """The smallest PROVED value by plain bisection: ``lo`` not PROVED, ``hi`` PROVED."""
    assert not proved(lo) and proved(hi)
    while hi - lo > rel * hi:
        mid = math.sqrt(lo * hi)
        if proved(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


@pytest.fixture(scope="module")
def dpsgd():
    return _dpsgd(ApproxDP(1.85, 1e-5))


def test_dpsgd_epsilon_is_the_smallest_proved_claim_within_a_hundredth_of_a_percent(dpsgd):
    answer = dpharness.epsilon(dpsgd, delta=1e-5)
    assert answer.quantity == "epsilon" and answer.at == 1e-5
    assert answer.proof.verdict is Verdict.PROVED and _proved(dpsgd, ApproxDP(answer.value, 1e-5))
    assert not _proved(dpsgd, ApproxDP(0.99 * answer.value, 1e-5))
    lo, hi = _bisect(lambda e: _proved(dpsgd, ApproxDP(e, 1e-5)), 1.7, 1.9)
    assert lo < answer.value and abs(answer.value - hi) <= 1e-4 * hi, (answer, lo, hi)
    assert answer.precision <= 1e-4 and not _proved(dpsgd, ApproxDP(answer.value * (1 - answer.precision), 1e-5))
    assert answer.route.startswith("PLD")
    # Poisson-subsampled leaves: no pair is shown to attain the product of worst pairs, so no lower end
    assert answer.lower is None and answer.bracket == (None, answer.value)
    assert "ε(δ = 1e-05) ≤ 1.828" in repr(answer) and "PLD" in repr(answer)
    assert "PROVED" in answer._repr_html_()


def test_a_long_training_run_is_proved_near_dp_accounting():
    """10^5 rounds at a sampling rate of 0.001 (σ = 1): dp_accounting's connect-the-dots PLD gives
    ε(1e-5) = 1.6372 (tests/test_pld.py). Proved at 1.7, not at 1.63 (below that truth). Before the PLD's
    truncations were bounded by moments, the claim fell back to the zCDP conversion without
    amplification: ε(1e-5) <= 51 514."""
    m = dp.mechanism(
        name="long_dpsgd",
        records=RealBox(-1, 1, 2),
        relation=AddRemove(),
        steps=dp.iterate(
            100_000,
            dp.poisson_sample(0.001) >> dp.map_records(_grad) >> dp.clip_norm(1) >> dp.sum() >> dp.gaussian(sigma=1),
            init=[0.0],
            update=_step,
        ),
        claim=ApproxDP(1.7, 1e-5),
    )
    proof = prove(m)
    assert proof.verdict is Verdict.PROVED and proof.route.startswith("PLD"), proof
    assert not _proved(m, ApproxDP(1.63, 1e-5))


def test_dpsgd_delta_is_the_smallest_proved_claim_within_a_hundredth_of_a_percent(dpsgd):
    answer = dpharness.delta(dpsgd, epsilon=2)
    assert answer.quantity == "delta" and answer.at == 2.0
    assert _proved(dpsgd, ApproxDP(2, answer.value)) and not _proved(dpsgd, ApproxDP(2, 0.99 * answer.value))
    lo, hi = _bisect(lambda d: _proved(dpsgd, ApproxDP(2, d)), 1e-6, 1e-5)
    assert lo < answer.value and abs(answer.value - hi) <= 1e-4 * hi, (answer, lo, hi)
    assert answer.route.startswith("PLD")


def test_the_claims_own_delta_and_epsilon_are_the_defaults(dpsgd):
    assert dpharness.epsilon(dpsgd).at == 1e-5
    assert dpharness.delta(dpsgd).at == 1.85


def test_a_pure_mechanism_returns_its_exact_epsilon():
    answer = dpharness.epsilon(_two_laplace_counts(PureDP(1)), delta=0)
    assert answer.value == 1.0 and answer.route == "pure ε"
    assert answer.precision < 1e-15  # the float below 1 is not proved: exact
    one = dpharness.epsilon(dpharness.get("laplace")(), delta=0)
    assert one.value == 1.0 and one.route == "pure ε"
    assert one.lower is not None and one.lower == math.nextafter(1.0, 0)  # REFUTED just below: certified
    assert dpharness.delta(_two_laplace_counts(PureDP(1)), epsilon=1).value == 0.0  # pure: δ = 0 at its ε


def test_a_hand_proved_catalog_class_is_answered_by_proving_it_at_other_claims():
    answer = dpharness.epsilon(dpharness.get("snapping")(), delta=0)
    assert answer.value == 1.0 and answer.proof.verdict is Verdict.PROVED
    assert "Snapping" in answer.route


def test_partition_selection_returns_its_exact_delta():
    """δ₀ = 1 − (1 − p)^L with p = e^{−(T−1)/t}/(1 + e^{−1/t}), T = 3, t = 1, L = 1 (tests/test_parts_grouping)."""
    q = math.exp(-1)
    exact = q**2 / (1 + q)
    m = _partition(ApproxDP(1, 0.1))
    answer = dpharness.delta(m, epsilon=1)
    assert answer.value == pytest.approx(exact, rel=1e-12) and answer.route.startswith("partition selection")
    assert answer.precision < 1e-15 and _proved(m, ApproxDP(1, answer.value))
    assert answer.lower is not None and answer.lower == pytest.approx(exact, rel=1e-12)  # REFUTED just below
    assert dpharness.epsilon(m, delta=answer.value).value == 1.0
    with pytest.raises(UnsupportedError, match="no ε at δ"):
        dpharness.epsilon(m, delta=answer.value / 2)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"delta": -0.1}, "delta=-0.1"),
        ({"delta": 1}, "delta=1"),
        ({"delta": 1.5}, "delta=1.5"),
        ({"delta": math.nan}, "delta=nan"),
        ({"delta": "1e-5"}, "delta='1e-5'"),
        ({"delta": 1e-5, "precision": 0}, "precision=0"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ParameterError, match=re.escape(name)):
        dpharness.epsilon(_two_laplace_counts(PureDP(1)), **kwargs)


def test_bad_epsilon_and_mechanism_name_the_argument():
    with pytest.raises(ParameterError, match=re.escape("epsilon=-1")):
        dpharness.delta(_two_laplace_counts(PureDP(1)), epsilon=-1)
    with pytest.raises(ParameterError, match="mechanism="):
        dpharness.epsilon(lambda x: x, delta=1e-5)
    with pytest.raises(ParameterError, match="delta=None"):
        dpharness.epsilon(dpharness.get("gaussian_rdp")())


def test_a_class_that_does_not_take_a_replaced_claim_is_unsupported_with_the_reason():
    from dpharness.mechanisms.snapping import Snapping

    @dataclasses.dataclass(frozen=True)
    class FixedClaim(Snapping):
        def __post_init__(self):
            if self.claim != PureDP(1):
                raise ParameterError(f"claim={self.claim!r} is fixed at PureDP(1)")
            super().__post_init__()

    with pytest.raises(UnsupportedError, match="does not accept a replaced claim"):
        dpharness.epsilon(FixedClaim(), delta=0)


def test_nothing_provable_is_unsupported_with_the_prover_s_reason():
    with pytest.raises(UnsupportedError, match="not pure DP"):
        dpharness.epsilon(dpharness.get("gaussian")(), delta=0)


# --------------------------------------------------------------------------- the command line


def test_cli_epsilon_prints_the_value_bracket_route_and_precision(capsys):
    code = main(["epsilon", "laplace", "--delta", "0"])
    out = capsys.readouterr().out
    assert code == 0
    assert "ε(δ = 0) ≤ 1   proven by pure ε" in out and "certified bracket: ε(δ = 0) ∈ [0.9999999999, 1]" in out
    assert "precision:" in out and "exact value: 1.0" in out


def test_cli_delta_json(capsys):
    code = main(["delta", "gaussian", "--epsilon", "0.9", "--json"])
    got = json.loads(capsys.readouterr().out)
    assert code == 0 and got["quantity"] == "delta" and got["verdict"] == "PROVED"
    assert got["route"] == "exact discrete Gaussian profile" and 0 < got["value"] < 1e-6


@pytest.mark.parametrize(
    "argv, said",
    [
        (["epsilon", "laplace", "--delta", "1.5"], "--delta"),
        (["epsilon", "laplace", "--delta", "x"], "--delta"),
        (["delta", "laplace", "--epsilon", "-1"], "--epsilon"),
        (["epsilon", "laplace", "--precision", "0"], "--precision"),
        (["epsilon", "no_such_mechanism"], "name='no_such_mechanism'"),
        (["epsilon", "gaussian", "--delta", "0"], "not pure DP"),
    ],
)
def test_cli_bad_input_exits_2_with_a_message_naming_it(capsys, argv, said):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusal of an option's value
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and said in err and "Traceback" not in err


# --------------------------------------------------------------------------- brackets


def test_a_bracket_is_stated_where_a_pair_attains_it():
    """Ten discrete Laplace counts: one pair moves every count at once, so the PLD's lower end is certified."""
    m = _ten_laplace(ApproxDP(2, 1e-5))
    proof = prove(m)
    answer = dpharness.epsilon(m, delta=1e-5)
    assert answer.lower is not None and proof.bound_lower <= answer.lower <= answer.value <= proof.bound
    assert not _proved(m, ApproxDP(answer.lower, 1e-5))
