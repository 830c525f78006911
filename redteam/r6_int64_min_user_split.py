"""On Dask, the user with id -2**63 was two users when its records lay in partitions that read it two ways
(an int64 column, and an object column of Python ints): identity_hash, which sends each user to its bucket,
hashed -2**63 in an int64 array as an integer (its test |double| < 2**63 excluded it) but as the double it
is in a list of normalised values, so the two halves went to two buckets and each was bounded alone. With
max_records=1 the user added 2 to key "b"'s distinct-user count: 12 on Dask against 11 on pandas (the
same seed, so the same noise). Prints both releases."""

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

import dpharness
from dpharness import ApproxDP, RealBox, parts as dp

m = dp.mechanism(
    name="users_per_key",
    records=RealBox(0, 1000, 2),  # (user id, key)
    relation=dp.AddRemoveUser(user=0),
    steps=dp.bound_contributions(user=0, by=1, max_records=1, max_per_partition=1)
    >> dp.group_by(by=1, keys=None, select=dp.partition_select(threshold=3, scale=0.5)),
    claim=ApproxDP(4, 1e-3),
)
dask.config.set({"dataframe.convert-string": False, "scheduler": "synchronous"})
low = -(2**63)
ints = pd.DataFrame({"u": np.array([low] + [2**60 + i for i in range(5)], dtype=np.int64), "k": ["b"] * 6})
objects = pd.DataFrame({"u": pd.Series([low] + [2**61 + i for i in range(5)], dtype=object), "k": ["b"] * 6})
other = pd.DataFrame({"u": np.array([7, 8], dtype=np.int64), "k": ["c", "c"]})
pieces = [ints, objects, other, other.assign(u=[9, 10])]
print("pandas", dpharness.release(m, pd.concat(pieces, ignore_index=True).astype({"u": np.int64}), seed=2, quiet=True))
frame = dd.from_delayed([dask.delayed(p) for p in pieces], meta=ints.iloc[:0], verify_meta=False)
print("dask  ", dpharness.release(m, frame, seed=2, quiet=True))
