"""A user id (or key) that no double holds raised OverflowError in the release: 10**400 as an int, a
Decimal or a Fraction in an object identity column. Adding that one user to a data set made the release
raise (a raise is an output); the data set without it released. Prints the release of both neighbours."""

from decimal import Decimal
from fractions import Fraction

import pandas as pd

import dpharness
from dpharness import ApproxDP, RealBox, parts as dp

m = dp.mechanism(
    name="pages",
    records=RealBox(0, 10_000, 2),  # (user id, page id)
    relation=dp.AddRemoveUser(user=0),
    steps=dp.bound_contributions(user=0, by=1, max_records=3, max_per_partition=2)
    >> dp.group_by(by=1, keys=None, select=dp.partition_select(epsilon=1.5, delta=2e-5)),
    claim=ApproxDP(1.5, 2e-5),
)


def release(users: list) -> object:
    frame = pd.DataFrame({"user": pd.Series(users, dtype=object), "page": [5] * len(users)})
    try:
        return dpharness.release(m, frame, seed=1, quiet=True)
    except Exception as e:  # noqa: BLE001 - the evidence
        return f"raised {type(e).__name__}: {e}"


print("D :", release(list(range(40))))
for huge in (10**400, Decimal("1e400"), Fraction(10**400, 3)):
    print(f"D' = D + user {type(huge).__name__} 1e400:", release([*range(40), huge]))
