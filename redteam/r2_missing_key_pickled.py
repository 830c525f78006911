"""On a Dask scheduler with worker processes (scheduler="processes", or a distributed cluster), a key
column holding a missing value (None, NaN, NaT, pd.NA) made the release raise KeyError, while the same
data without it released: the one missing value (dpharness._records.MISSING) came back from each worker
as a new object (no __reduce__), so equal missing keys were distinct values and no longer found.
Prints the pandas release and the Dask releases (synchronous and processes, 1 and 4 partitions)."""

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

import dpharness
from dpharness import AddRemove, ApproxDP, RealBox, parts as dp

m = dp.mechanism(
    name="per_key",
    records=RealBox(0, 10_000, 2),  # (value, key)
    relation=AddRemove(),
    steps=dp.group_by(by=1, keys=None, select=dp.partition_select(epsilon=1.0, delta=1e-6)),
    claim=ApproxDP(1.0, 1e-6),
)

if __name__ == "__main__":
    dask.config.set({"dataframe.convert-string": False})
    frame = pd.DataFrame({"v": np.zeros(80), "k": pd.Series(["a"] * 40 + [None] * 40, dtype=object)})
    print("pandas", dpharness.release(m, frame, seed=3, quiet=True))
    for scheduler in ("synchronous", "processes"):
        for n in (1, 4):
            try:
                with dask.config.set(scheduler=scheduler, num_workers=2):
                    got = dpharness.release(m, dd.from_pandas(frame, npartitions=n), seed=3, quiet=True)
            except Exception as e:  # noqa: BLE001 - the evidence
                got = f"raised {type(e).__name__}: {e}"
            print("dask", scheduler, n, got)
