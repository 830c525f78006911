"""A per-record user function on the Python path (dp.map_records(fn), the default) that keeps state
between calls is PROVED, and the proof's assumptions never say the function must be pure: they say only
that it runs on one record at a time (map_records' docstring says "fn must be a pure function of its
arguments ...; the proof states it", and for dp.post the proof does state it). Python cannot make a
function stateless by construction, so the proof must state the assumption it rests on.

Run: python redteam/r2_python_fn_state_unstated.py
"""

import numpy as np

import dpharness
from dpharness import AddRemove, PureDP, RealInterval
from dpharness import parts as dp

seen = [0.0]


def running_max(r):  # the largest record seen so far: row k's value depends on the rows before it
    seen[0] = max(seen[0], float(r))
    return seen[0]


m = dp.mechanism(
    name="python_running_max",
    records=RealInterval(0, 1),
    relation=AddRemove(),
    steps=dp.map_records(running_max) >> dp.clamp(0, 1) >> dp.sum() >> dp.laplace(scale=1),
    claim=PureDP(1),
)
proof = dpharness.prove(m)
print("prove:", proof.verdict.value, proof.headline)
print("assumptions on user code:", [a for a in proof.assumptions if "user function" in a or "pure" in a])
rng = np.random.default_rng(0)
for name, data in (("D", np.zeros(100)), ("D'", np.concatenate([[1.0], np.zeros(100)]))):
    seen[0] = 0.0
    print(name, "mean release", m.sample(data, 200, rng).mean(), "(a 1-stable map moves it by at most 1)")
