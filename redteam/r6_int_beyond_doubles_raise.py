"""A record the domain holds made the release raise while its neighbour released: with records declared
in [0, 1e20] (or any domain beyond 2**53, or RealInterval() unbounded), an int64 (uint64, object) column was
refused only when it held an integer a double cannot hold exactly, so D = [1, 2] released and
D' = D + [2**53 + 1] raised ParameterError (a raise as one neighbour's output, the other's a release); on
m.sample too. Such columns are now refused by dtype whenever the column's domain reaches beyond 2**53
(a 64-bit integer or object column could hold such an integer), on every input, whatever the values.

Run: python redteam/r6_int_beyond_doubles_raise.py
"""

import numpy as np
import pandas as pd

import dpharness
from dpharness import AddRemove, PureDP, RealInterval
from dpharness import parts as dp

m = dp.mechanism(
    name="clamped_sum",
    records=RealInterval(0, 1e20),
    relation=AddRemove(),
    steps=dp.clamp(0, 10) >> dp.sum() >> dp.laplace(scale=10),
    claim=PureDP(1),
)
print("prove:", dpharness.prove(m).headline)
for name, data in (("D", [1, 2]), ("D'", [1, 2, 2**53 + 1])):
    for kind, value in (("numpy int64", np.array(data, dtype=np.int64)), ("pandas", pd.DataFrame({"v": data}))):
        try:
            print(name, kind, "release ->", dpharness.release(m, value, seed=0, quiet=True))
        except Exception as exc:  # noqa: BLE001
            print(name, kind, "release raised", type(exc).__name__, str(exc)[:110])
