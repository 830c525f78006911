"""A warm gate imports what building the mechanisms and reading the signed Checks back need, not the
provers (sympy's proofs, z3) nor the auditors' statistics (scipy): issue 20 §3, a warm gate in about
1 s. Run in fresh interpreters (the test process has imported everything already)."""

from __future__ import annotations

import json
import subprocess
import sys

_HEAVY = ("z3", "dpharness.proofs", "scipy.stats", "scipy.linalg", "scipy.integrate", "scipy.optimize")

_GATE = """
import json, sys
from dpharness.cli import main
code = main(["gate", "warner_rr", "--jobs", "1", "--cache-dir", sys.argv[1]])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _gate(cache: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _GATE, cache], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_warm_gate_imports_no_prover_and_no_scipy(tmp_path):
    cache = str(tmp_path / "cache")
    cold = _gate(cache)
    assert cold["code"] == 0 and "dpharness.proofs" in cold["modules"]  # the check ran here (--jobs 1)
    warm = _gate(cache)
    assert warm["code"] == 0
    loaded = [m for m in _HEAVY if m in warm["modules"]]
    assert not loaded, f"a warm gate (every check from the cache) imported {loaded}"
