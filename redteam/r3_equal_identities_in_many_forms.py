"""Identities that are equal values in different forms were not normalised inside containers or for
datetimes (normalise() read 1 and True, 0.0 and -0.0 as one value only at the top level):

1. The key a release names was the form of the first record holding it: adding one user, placed first, with
   key (True, "a") to users with key (1, "a") renamed the released key (1, 'a') to (True, 'a') (likewise
   (0.0,) / (-0.0,), datetime / Timestamp, Timestamps of one instant in two time zones): an output one
   neighbour gives with probability ~1 and the other never.
2. NaN inside a tuple id: the partitions' values are distinct objects, (nan, 1) != (nan, 1), so on Dask one
   user with id (nan, 1) and 60 records (bounded to 1) counted as one user per partition: key "b" released
   with ~40 distinct users on 60 partitions, never on pandas (1 user).
"""

import datetime

import dask
import dask.dataframe as dd
import pandas as pd

import dpharness
from dpharness import ApproxDP, RealBox, parts as dp


def mechanism(max_records: int) -> object:
    return dp.mechanism(
        name="per_key",
        records=RealBox(0, 10_000, 2),  # (user id, key)
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=max_records, max_per_partition=max_records)
        >> dp.group_by(by=1, keys=None, select=dp.partition_select(epsilon=1.0, delta=1e-6)),
        claim=ApproxDP(1.0, 1e-6),
    )


def frame(users: list, keys: list) -> pd.DataFrame:
    return pd.DataFrame({"u": pd.Series(users, dtype=object), "k": pd.Series(keys, dtype=object)})


n = 60
paris = pd.Timestamp("2020-01-01 01:00", tz="Europe/Paris")
for a, b in [
    ((1, "a"), (True, "a")),
    ((0.0,), (-0.0,)),
    (datetime.datetime(2020, 1, 1), pd.Timestamp("2020-01-01")),
    (pd.Timestamp("2020-01-01", tz="UTC"), paris),
]:
    d = dpharness.release(mechanism(2), frame(list(range(n)), [a] * n), seed=1, quiet=True)
    d2 = dpharness.release(mechanism(2), frame(list(range(n + 1)), [b] + [a] * n), seed=1, quiet=True)
    print(f"D: {list(map(repr, d))}   D' (one user more, key {b!r}): {list(map(repr, d2))}")

dask.config.set({"dataframe.convert-string": False})
users = [(i,) for i in range(30)] + [(float("nan"), 1) for _ in range(60)]  # one user (nan, 1), 60 records
data = frame(users, ["a"] * 30 + ["b"] * 60)
print("pandas", dpharness.release(mechanism(1), data, seed=3, quiet=True))
for parts in (1, 30, 60):
    got = dpharness.release(mechanism(1), dd.from_pandas(data, npartitions=parts, sort=False), seed=3, quiet=True)
    print("dask", parts, "partitions", got)
