#!/usr/bin/env bash
# Reproducer: fewer than 20 samples a side (the fewest an audit certifies on) was accepted at every
# boundary but the audit's: `dpharness gate NAME --samples 5` ran the gate and failed every mechanism
# with "error: ParameterError: samples=5 must be >= 20" (exit 1, a gate of errored checks, as if the
# mechanisms had failed) instead of a usage error (exit 2); register(fn, ..., samples=19) was accepted
# and every later gate FAILed it with the same error; dpharness.check(samples=5) and pytest
# --dp-samples=5 likewise. Expected now: exit 2 / ParameterError / pytest usage error naming samples.
set -u
export PATH=/work/venv-red/bin:$PATH
cd "$(mktemp -d)"
dpharness gate warner_rr --samples 5 --no-cache; echo "gate rc=$? (want 2)"
dpharness report warner_rr --samples 5 --out out; echo "report rc=$? (want 2)"
python - <<'PY'
from dpharness import AddRemove, PureDP, register
from dpharness.errors import ParameterError

def count(data, size, rng):
    return len(data) + rng.laplace(0, 1.0, size)

try:
    register(count, name="tiny", data=[0.0], neighbor=[0.0, 1.0], relation=AddRemove(), claim=PureDP(1), samples=19)
    print("register(samples=19): accepted (the gate then FAILs it with an error)")
except ParameterError as e:
    print("register(samples=19): refused:", e)
PY
