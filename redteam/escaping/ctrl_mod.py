"""A function whose outputs are strings with control characters and markup (categorical releases)."""

from dpharness import AddRemove, PureDP, register


def ctrl_outputs(data, size, rng):
    # randomized response between two labels: leaks (ε = ln 9 > 1) so the witness names an output
    keep = rng.random(size) < (0.9 if len(data) == 3 else 0.1)
    return ["yes\x00\x1b[32m]]>\n<script>" if k else "no\x0c\x07" for k in keep]


register(ctrl_outputs, name="ctrl_outputs", data=[1, 2, 3], neighbor=[1, 2], relation=AddRemove(), claim=PureDP(1.0))
