"""A gate of one check lets its audit start a worker pool of its own inside the gate's worker
process; that pool ends with the check (issue 20): no process the gate started outlives it. Before,
the audit's idle workers and their fork server outlived the gate for the pool's idle time, holding
the gate's stdout open (a CI step piping it waited about a minute after the last line).

Deterministic: the mechanism is a two-sided geometric count audited at 10^7 samples a side, enough
for the audit to start its pool; every process the gate starts inherits a marker in its environment,
and the test looks for it in /proc once the gate has exited."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from _procs import marked

PACKAGE = '''
import dataclasses

import numpy as np

from dpharness import AddRemove, InputSpec, IntegerRange, Mechanism, PureDP, register


@dataclasses.dataclass(frozen=True, kw_only=True)
class PooledCount(Mechanism):
    """Two-sided geometric count, ratio exp(-1), add/remove one record in 0..9; claims ε = 1."""
    name = "pooled_count"
    claim: PureDP = PureDP(1)

    @property
    def input_spec(self):
        return InputSpec(IntegerRange(0, 9), AddRemove(), "dataset")

    def _sample(self, data, size, rng):
        p = 1 - np.exp(-1.0)
        return len(data) + rng.geometric(p, size) - rng.geometric(p, size)

    def _law(self, data):
        raise NotImplementedError("opaque")

    def example_pair(self):
        return np.array([1]), np.array([1, 2])


register(PooledCount, proof="audit-only")
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the processes")
def test_a_one_check_gate_leaves_no_process_behind(tmp_path):
    (tmp_path / "pooled_pkg.py").write_text(textwrap.dedent(PACKAGE))
    marker = f"DPHARNESS_TEST_MARKER={uuid.uuid4().hex}"
    key, value = marker.split("=")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), key: value}
    argv = [sys.executable, "-m", "dpharness.cli", "gate", "--module", "pooled_pkg", "--own", "--no-cache"]
    argv += ["--samples", "10000000", "--jobs", "2", "--cache-dir", str(tmp_path / "cache")]
    log = tmp_path / "gate.log"
    with open(log, "w") as fh:  # a file, not a pipe: the run returns when the gate exits, not at EOF
        code = subprocess.run(argv, env=env, cwd=tmp_path, stdout=fh, stderr=subprocess.STDOUT, timeout=600).returncode
    text = log.read_text()
    assert code == 0, text[-2000:]
    assert "1/1 mechanisms passed (0 proved and audited, 1 audited only" in text, text[-2000:]
    deadline = time.monotonic() + 10  # exiting processes may take a moment to be reaped
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marked(marker) == [], "processes started by the gate outlived it"
