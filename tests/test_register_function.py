"""``register`` takes a plain function for an audit-only entry (issue 17: gating one took about 20
lines of ``Mechanism`` boilerplate): ``register(fn, name=, data=, neighbor=, relation=, claim=)``.
Such an entry is audited only, never PROVED; bad arguments are one ParameterError naming the
argument. The audits are statistical: 2·10^4 samples a side, seed 0, confidence 0.95 (a correct
mechanism fails with probability at most 0.05; the seed is fixed, so the outcome is too)."""

from __future__ import annotations

import math

import pytest

import dpharness
from dpharness import AddRemove, ApproxDP, PureDP, Substitute, registry
from dpharness.errors import ParameterError
from dpharness.pipeline import Policy


def geometric_count(scale):
    """len(data) plus two-sided geometric noise of ratio exp(-1/scale): ε = 1/scale under add/remove."""
    p = 1 - math.exp(-1 / scale)

    def count(data, size, rng):
        return len(data) + rng.geometric(p, size) - rng.geometric(p, size)

    return count


@pytest.fixture
def names():
    made = []
    yield made
    for name in made:
        registry._REGISTRY.pop(name, None)
        registry._AUDIT_ONLY.discard(name)


def test_a_function_is_registered_in_one_call_and_stays_audit_only(names):
    fn = geometric_count(1.0)
    names.append("fn_count")
    got = dpharness.register(
        fn, name="fn_count", data=[1, 2, 3], neighbor=[1, 2], relation=AddRemove(), claim=PureDP(1)
    )
    assert got is fn  # usable as before
    m = dpharness.get("fn_count")()
    assert m.name == "fn_count" and m.claim == PureDP(1) and registry.audit_only("fn_count")
    assert m.example_pair()[1].tolist() == [1, 2]
    assert "fn_count" in registry.catalog()


@pytest.mark.statistical
def test_the_gate_audits_the_given_pair_and_never_proves_it(names):
    names += ["fn_ok", "fn_leaky"]
    pair = dict(data=[1, 2, 3], neighbor=[1, 2], relation=AddRemove(), claim=PureDP(1))
    dpharness.register(geometric_count(1.0), name="fn_ok", **pair)
    dpharness.register(geometric_count(0.5), name="fn_leaky", proof=None, **pair)  # a plain function: audit-only
    ok = dpharness.check("fn_ok", samples=20_000, seed=0)
    assert ok.passed and ok.policy is Policy.AUDIT_ONLY and ok.proof.verdict != "PROVED", ok
    assert ok.audit.witness.data is not None and list(ok.audit.witness.neighbor) == [1, 2]
    leaky = dpharness.check("fn_leaky", samples=20_000, seed=0)
    assert not leaky.passed and leaky.audit is not None and not leaky.audit.passed


def test_the_gate_audits_a_function_as_dpharness_audit_does(names, capsys):
    """An audit-only entry's audit is the whole evidence: the check certifies it in one look, as
    `dpharness audit NAME` does, so the two print the same bound for the same samples and seed
    (deterministic: the function draws from the audit's rng)."""
    import json

    from dpharness.cli import main

    names.append("fn_one_look")
    pair = dict(data=[1, 2, 3], neighbor=[1, 2], relation=AddRemove(), claim=PureDP(1))
    dpharness.register(geometric_count(1.0), name="fn_one_look", **pair)
    gated = dpharness.check("fn_one_look", samples=20_000, seed=5, workers=1)
    assert gated.policy is Policy.AUDIT_ONLY and "sequential" not in gated.audit.extra, gated.audit.extra
    assert main(["audit", "fn_one_look", "--samples", "20000", "--seed", "5", "--json"]) == 0
    audited = json.loads(capsys.readouterr().out)
    assert gated.audit.epsilon_lower_bound == audited["epsilon_lower_bound"]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(data=[1, 2], neighbor=[1], relation=AddRemove(), claim=PureDP(1)), r"^name= is missing"),
        (dict(name="f", neighbor=[1], relation=AddRemove(), claim=PureDP(1)), r"^data= is missing"),
        (dict(name="f", data=[1, 2], neighbor=[1], claim=PureDP(1)), r"^relation= is missing"),
        (dict(name="f", data=[1, 2], neighbor=[1], relation=AddRemove()), r"^claim= is missing"),
        (dict(name="Bad Name", data=[1, 2], neighbor=[1], relation=AddRemove(), claim=PureDP(1)), r"^name='Bad Name'"),
        (dict(name="f", data=[1, 2], neighbor=[1], relation="add_remove", claim=PureDP(1)), r"^relation='add_remove'"),
        (dict(name="f", data=[1, 2], neighbor=[1], relation=AddRemove(), claim=1.0), r"^claim=1.0 is not a Claim"),
        (
            dict(name="f", data=[1, 2], neighbor=[1], relation=AddRemove(), claim=PureDP(1), records=(0, 1)),
            r"^records=",
        ),
        (
            dict(name="f", data=[1, 2], neighbor=[1], relation=AddRemove(), claim=PureDP(1), shape="table"),
            r"shape='table'",
        ),
        (dict(name="f", data=[1, 2, 3], neighbor=[1], relation=AddRemove(), claim=PureDP(1)), r"not neighbours"),
        (  # fewer samples than an audit takes: refused here, not a gate line that errors
            dict(name="f", data=[1, 2], neighbor=[1], relation=AddRemove(), claim=PureDP(1), samples=19),
            r"^samples=19 must be >= 20",
        ),
        (
            dict(
                name="f", data=[1, 2], neighbor=[1, 3], relation=Substitute(), claim=ApproxDP(1, 1e-6), shape="dataset"
            ),
            None,
        ),  # a valid substitution pair: accepted
    ],
)
def test_bad_arguments_name_the_argument(kwargs, match, names):
    names.append("f")
    if match is None:
        dpharness.register(geometric_count(1.0), **kwargs)
        return
    with pytest.raises(ParameterError, match=match):
        dpharness.register(geometric_count(1.0), **kwargs)
    assert "f" not in registry._REGISTRY


def test_a_function_must_take_data_size_and_rng(names):
    with pytest.raises(ParameterError, match=r"takes 1 positional argument.*fn\(data, size, rng\)"):
        dpharness.register(
            lambda data: len(data), name="f", data=[1, 2], neighbor=[1], relation=AddRemove(), claim=PureDP(1)
        )


def test_function_arguments_are_refused_for_a_mechanism():
    from dpharness.mechanisms.laplace import Laplace

    with pytest.raises(ParameterError, match=r"^name= is for registering a plain function"):
        dpharness.register(Laplace, name="other")
