"""assert_private passed an audit that could not have certified a violation (the gate calls it PARTIAL)."""

from dpharness.testing import assert_private


def leaks_everything(data, size, rng):
    return [len(data)] * size  # ε = ∞


r = assert_private(leaks_everything, [1, 2, 3], [1, 2], epsilon=8, samples=200, seed=0, workers=1)
print("assert_private returned (a pass):", r.passed, r.epsilon_lower_bound, r.extra.get("certifiable"))
