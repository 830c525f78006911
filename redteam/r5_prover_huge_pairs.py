"""Large but valid user-level parameters made prove() build enormous aimed pairs: threshold=10**7 (the pair
with T other users a key: MemoryError, caught as UNPROVEN after about 33 s under a 4 GB limit),
max_records=10**4 (15 s; 10**5 did not finish: a property reading every key, evaluated once per key) and
max_records=2**70 (the process was killed for memory). Not a soundness failure (nothing false was PROVED),
but a valid declaration should get a verdict.

Run (each under a 4 GB limit, 60 s each at most): python redteam/r5_prover_huge_pairs.py
"""

import resource
import subprocess
import sys

CODE = """
import time
import dpharness
from dpharness import ApproxDP, RealBox
from dpharness import parts as dp
k, T = {k}, {T}
m = dp.mechanism(name="u", records=RealBox(0, 100, 2), relation=dp.AddRemoveUser(user=0),
    steps=dp.bound_contributions(user=0, by=1, max_records=k, max_per_partition=1)
    >> dp.group_by(by=1, keys=None, select=dp.partition_select(threshold=T, scale=1)),
    claim=ApproxDP(10**30, 1e-5))
t = time.time()
p = dpharness.prove(m)
print(p.verdict.value, round(time.time() - t, 1), "s", p.notes[0][:90] if p.verdict.value != "PROVED" else "")
"""


def limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))


for k, T in ((3, 10**7), (10**4, 40), (10**5, 40), (2**70, 40)):
    try:
        r = subprocess.run(
            [sys.executable, "-c", CODE.format(k=k, T=T)], capture_output=True, text=True, timeout=60, preexec_fn=limit
        )
        print(f"max_records={k} threshold={T}:", (r.stdout.strip() or r.stderr.strip().splitlines()[-1])[:160])
    except subprocess.TimeoutExpired:
        print(f"max_records={k} threshold={T}: no verdict within 60 s")
