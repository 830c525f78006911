"""A compiled per-record function (dp.map_records(fn, compiled=True)) is PROVED with the precondition
"row k's value depends on row k alone, bit for bit", but numba lets compiled code call back into Python
(numba.objmode) or into foreign code (a ctypes callback), which can keep state across rows: here each
record maps to the largest record seen so far, so one added record moves every later mapped value.

Also: a function numba cannot compile was compiled only when some row reached it, so the empty data set
released while its neighbour with one record raised.

Run: python redteam/r1_compiled_fn_escapes_row.py
"""

import numba
import numpy as np

import dpharness
from dpharness import AddRemove, PureDP, RealInterval
from dpharness import parts as dp

seen = [0.0]


def running_max(r):  # the largest record seen so far (state kept in Python, reached from compiled code)
    with numba.objmode(y="float64"):
        seen[0] = max(seen[0], r)
        y = seen[0]
    return y


m = dp.mechanism(
    name="objmode_running_max",
    records=RealInterval(0, 1),
    relation=AddRemove(),
    steps=dp.map_records(running_max, compiled=True) >> dp.clamp(0, 1) >> dp.sum() >> dp.laplace(scale=1),
    claim=PureDP(1),
)
try:
    proof = dpharness.prove(m)
    print("prove:", proof.verdict.value, proof.headline)
    print("assumption:", [a for a in proof.assumptions if "user functions" in a])
except Exception as exc:  # noqa: BLE001
    print("prove refused:", type(exc).__name__, exc)
rng = np.random.default_rng(0)
d = np.zeros(100)
d2 = np.concatenate([[1.0], np.zeros(100)])  # d plus one record, placed first
for name, data in (("D", d), ("D'", d2)):
    seen[0] = 0.0
    try:
        out = m.sample(data, 2000, rng)
        print(name, "mean release", out.mean(), "(a 1-stable map moves it by at most 1)")
    except Exception as exc:  # noqa: BLE001
        print(name, "refused:", type(exc).__name__, str(exc)[:160])

G = np.zeros(1)


def not_compilable(r):  # numba refuses to write a global array
    G[0] += r
    return G[0]


m2 = dp.mechanism(
    name="uncompilable",
    records=RealInterval(0, 1),
    relation=AddRemove(),
    steps=dp.map_records(not_compilable, compiled=True) >> dp.clamp(0, 1) >> dp.sum() >> dp.laplace(scale=1),
    claim=PureDP(1),
)
for data in ([], [0.5]):
    try:
        print("release on", data, "->", dpharness.release(m2, np.asarray(data, dtype=float), seed=0, quiet=True))
    except Exception as exc:  # noqa: BLE001
        print("release on", data, "raised", type(exc).__name__, str(exc)[:100])
