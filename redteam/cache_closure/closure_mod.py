"""A function whose noise scale is a closure variable read from the environment (a config value)."""

import os

from dpharness import AddRemove, PureDP, register


def make(scale):
    def noisy_count(data, size, rng):
        return len(data) + rng.laplace(0.0, scale, size).round()

    return noisy_count


register(
    make(float(os.environ.get("RT_SCALE", "1.0"))),
    name="closure_count",
    data=[1, 2, 3],
    neighbor=[1, 2],
    relation=AddRemove(),
    claim=PureDP(1.0),
)
