"""Tests that kill mutants which survived the whole default suite (issue 17): the gate cache key must
follow every input of a check, and the report-noisy-max proof's claim obligation must itself decide
(not only its witness). Fast and deterministic."""

from __future__ import annotations

import pytest

from dpharness import PureDP, prove
from dpharness.mechanisms.laplace import Laplace
from dpharness.mechanisms.report_noisy_max import ReportNoisyMax, ReportNoisyMaxExponential


def _key(m, **changes):
    from dpharness import _cache

    args = dict(name="laplace", audit_only=False, environment="env", samples=10**6, seed=0, timeout=None)
    args.update(changes)
    return _cache.key(m, **args)


def test_the_cache_key_follows_every_input_of_a_check():
    """A parameter changed through configuration (same class, same source, same claim) is a new key:
    otherwise a gate serves the cached PASS of the old scale."""
    base = _key(Laplace(scale=1))
    assert _key(Laplace(scale=1)) == base
    changed = [
        _key(Laplace(scale=2)),
        _key(Laplace(scale=1, claim=PureDP(2))),
        _key(Laplace(scale=1), name="other"),
        _key(Laplace(scale=1), audit_only=True),
        _key(Laplace(scale=1), environment="env2"),
        _key(Laplace(scale=1), samples=10**5),
        _key(Laplace(scale=1), seed=1),
        _key(Laplace(scale=1), timeout=5.0),
    ]
    assert len(set(changed + [base])) == len(changed) + 1


@pytest.mark.parametrize("cls", [ReportNoisyMax, ReportNoisyMaxExponential])
@pytest.mark.parametrize("factor,discharged", [(1, True), (0.95, False), (0.999, False)])
def test_the_noisy_max_claim_obligation_compares_with_the_whole_bound(cls, factor, discharged):
    """The bound is 2Δ/b = 1 at scale 2: the obligation 'derived ε bound <= claimed ε' holds at the claim 1
    and fails just below it, whatever the witness does."""
    proof = prove(cls(scale=2, sensitivity=1, claim=PureDP(factor)))
    (ob,) = [o for o in proof.steps if o.statement.startswith("derived ε bound <= claimed ε")]
    assert ob.discharged is discharged
    assert proof.bound == pytest.approx(1.0)


def test_integer_records_reach_the_sampler_as_one_dtype():
    """Issue 17: the harness fed a sampler int64 and float64 arrays for an IntegerRange domain, then refused
    a sampler whose output dtype follows its input. Inputs are now int64 whatever they came in as."""
    import dataclasses

    import numpy as np

    import dpharness
    from dpharness import AddRemove, InputSpec, IntegerRange, Mechanism

    spec = InputSpec(IntegerRange(0, 9), AddRemove(), "dataset")
    for data in ([1, 2], [1.0, 2.0], np.array([1, 2], dtype=np.int32), []):
        assert spec.validate("data", data).dtype == np.int64

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class TypedCount(Mechanism):
        name = "typed_count_issue17"
        claim: dpharness.Claim = dpharness.PureDP(1)

        @property
        def input_spec(self):
            return spec

        def _sample(self, data, size, rng):
            n = np.asarray(data).dtype.type(len(data))
            return n + (rng.geometric(0.7, size) - rng.geometric(0.7, size)).astype(np.asarray(data).dtype)

        def _law(self, data):
            raise NotImplementedError

        def example_pair(self):
            return np.array([1, 2]), np.array([1, 2, 3])

    r = dpharness.audit(TypedCount(), samples=50_000, seed=0, epsilon=1)
    assert r.epsilon_lower_bound >= 0
