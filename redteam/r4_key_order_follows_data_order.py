"""The order of the keys a release names (a dict's order, an output) followed the order of the records for
keys that are frozensets: identities were sorted with the values' own '<', which for frozensets is
inclusion, so sets that include none of the others kept the order the data held them. Adding one record
(placed first) with key {3} to data with keys {1}, {2}, {3} moved {3} to the front of the release.
Prints both releases as (key, count) lists."""

import numpy as np
import pandas as pd

import dpharness
from dpharness import AddRemove, ApproxDP, RealBox, parts as dp

m = dp.mechanism(
    name="per_key",
    records=RealBox(0, 1000, 2),  # (value, key)
    relation=AddRemove(),
    steps=dp.group_by(by=1, keys=None, select=dp.partition_select(threshold=3, scale=1)),
    claim=ApproxDP(2, 1e-3),
)


def release(keys: list) -> list:
    frame = pd.DataFrame({"v": np.zeros(len(keys)), "k": pd.Series(keys, dtype=object)})
    return list(dpharness.release(m, frame, seed=1, quiet=True).items())


a, b, c = frozenset({1}), frozenset({2}), frozenset({3})
print("D :", release([a] * 20 + [b] * 20 + [c] * 20))
print("D':", release([c] + [a] * 20 + [b] * 20 + [c] * 20))
print("D (tuples holding None):", release([(None, 1)] * 20 + [(2, 1)] * 20))
print("D' (one record first):  ", release([(2, 1)] + [(None, 1)] * 20 + [(2, 1)] * 20))

# one record with a key that does not compare with the others (a zoned Timestamp beside a naive one), not
# released itself, reordered the released keys 9.0 and 10.0 (all values were then sorted by repr)
naive, zoned = pd.Timestamp("2020-01-01"), pd.Timestamp("2020-01-01", tz="UTC")
print("D :", [k for k, _ in release([9.0] * 20 + [10.0] * 20 + [naive] * 20)])
print("D':", [k for k, _ in release([9.0] * 20 + [10.0] * 20 + [naive] * 20 + [zoned])])
