"""Extended-precision floats (numpy.longdouble / float128) were read as doubles, silently rounded: a user
id column of long doubles one ulp apart became one user, so adding one user (id 1 + 2**-63) merged it into
user 1, whose bounded record then moved between two keys: two keys touched by one neighbour where the
proof counts L = 1.

D: user 1 on key 0, 30 other users on each of keys 0 and 1; D' = D + user 1 + 2**-63 on key 1.
max_records=1, threshold 31, scale 1 (proven ε = 1, δ = e^-30/(1 + e^-1) ≈ 6.9e-14). The event S =
"key 0 not released and key 1 released": exactly P_D(S) = 0.269² = 0.072, P_D'(S) = 0.036 + 0.731²/2 =
0.303, so P_D'(S) − e·P_D(S) = 0.107 >> δ: the release is not (1, 6.9e-14)-DP. The identities' reader
holds every id exactly (users 10**400, Decimal, Fraction), but not a long double. Now refused by dtype
(ParameterError naming the column), as are long-double parameters and records.

Run: python redteam/r4_longdouble_ids_merged.py
"""

import math

import numpy as np
import pandas as pd

import dpharness
from dpharness import ApproxDP, RealBox
from dpharness import parts as dp

m = dp.mechanism(
    name="users_per_key",
    records=RealBox(0, 1000, 2),
    relation=dp.AddRemoveUser(user=0),
    steps=dp.bound_contributions(user=0, by=1, max_records=1, max_per_partition=1)
    >> dp.group_by(by=1, keys=[0, 1], select=dp.partition_select(threshold=31, scale=1)),
    claim=ApproxDP(1, 1e-13),
)
print("prove:", dpharness.prove(m).headline)
one = np.longdouble(1)
others = [np.longdouble(100 + i) for i in range(60)]
others_keys = [0.0] * 30 + [1.0] * 30


def frame(users, keys):
    return pd.DataFrame({"user": np.array(users, dtype=np.longdouble), "key": np.array(keys, dtype=float)})


d = frame([one] + others, [0.0] + others_keys)
d2 = frame([one, one + np.finfo(np.longdouble).eps] + others, [0.0, 1.0] + others_keys)
print("distinct users:", len(set(d2.user.tolist())), "as doubles:", len(set(d2.user.astype(float).tolist())))
n = 2000
try:
    hits = []
    for data in (d, d2):
        s = 0
        for seed in range(n):
            out = dpharness.release(m, data, seed=seed, quiet=True)
            s += (0 not in out) and (1 in out)
        hits.append(s / n)
    print(f"P_D(S) ~ {hits[0]:.3f} (exact 0.072), P_D'(S) ~ {hits[1]:.3f} (exact 0.303 when merged)")
    print(f"P_D'(S) - e P_D(S) ~ {hits[1] - math.e * hits[0]:.3f} vs the proven delta 6.9e-14")
except Exception as exc:  # noqa: BLE001
    print("refused:", type(exc).__name__, exc)
