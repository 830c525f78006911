"""A user-level group-by declared on records with narrow bounds is PROVED, yet its release raised once the
data held more distinct users (or keys found in the data) than the bounds hold doubles: the identities'
stand-ins must be distinct doubles in the bounds. RealBox(0, 5e-324, 2) holds two doubles: two users
released, a third made the release raise (one neighbour releases, the other raises). Now refused from the
structure, before any record is read, for every data set (bounds must hold at least 2**48 doubles).
Prints the verdict and the release at 2 and 3 users."""

import pandas as pd

import dpharness
from dpharness import ApproxDP, RealBox, parts as dp

m = dp.mechanism(
    name="users_per_key",
    records=RealBox(0, 5e-324, 2),  # (user id, key): ids and keys are identities, read as stand-ins
    relation=dp.AddRemoveUser(user=0),
    steps=dp.bound_contributions(user=0, by=1, max_records=1, max_per_partition=1)
    >> dp.group_by(by=1, keys=None, select=dp.partition_select(epsilon=1.0, delta=1e-6)),
    claim=ApproxDP(1.0, 1e-6),
)
print("verdict", dpharness.prove(m).verdict.value)
for users in (["a", "b"], ["a", "b", "c"]):
    try:
        got = dpharness.release(m, pd.DataFrame({"u": users, "k": ["x"] * len(users)}), seed=1, quiet=True)
    except Exception as e:  # noqa: BLE001 - the evidence
        got = f"raised {type(e).__name__}: {str(e)[:110]}"
    print(len(users), "users:", got)
