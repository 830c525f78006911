"""The audit pool's workers never re-run the caller's ``__main__`` (harness/_forkserver_child.py): a
researcher's script that calls ``audit`` at top level, without an ``if __name__ == "__main__":`` guard,
run by path or with ``python -m``, audits once, on the workers, and its top-level code runs once.
Deterministic (fixed seed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from dpharness.auditors import _audit, audit

    _audit._POOL_MIN_DRAWS = 0  # the pool at any size
    print("TOP-LEVEL", flush=True)

    def grid_laplace(d, size, rng):  # defined in __main__: shipped to the workers by value
        return np.round((d + rng.laplace(0.0, 1.0, size)) * 2**16) / 2**16

    r = audit(grid_laplace, 0.0, 1.0, epsilon=1.0, samples=40_000, workers=2, seed=3, progress=False)
    print("PAIRS ON WORKERS", r.extra["phases"]["pairs"]["on_workers"], "PASSED", r.passed, flush=True)
    """
)


@pytest.mark.parametrize("how", ["path", "module"])
def test_a_script_without_a_main_guard_audits_once_on_the_workers(tmp_path, how):
    script = tmp_path / "unguarded_audit.py"
    script.write_text(SCRIPT)
    argv = [sys.executable, str(script)] if how == "path" else [sys.executable, "-m", "unguarded_audit"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("TOP-LEVEL") == 1, out.stdout
    assert "PAIRS ON WORKERS True PASSED True" in out.stdout, out.stdout + out.stderr[-2000:]
