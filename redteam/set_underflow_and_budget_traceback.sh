#!/usr/bin/env bash
# Reproducer, two CLI boundary faults:
# 1. `--set p_truth=1e-400` was read by float() as 0.0, silently: `dpharness prove warner_rr --set
#    p_truth=1e-400` proved warner_rr(p_truth=0.0) (exit 0); `--set scale=1e400` read as inf. Now exit 2
#    naming the key (a fraction a/b is read exactly).
# 2. `dpharness audit warner_rr --time-budget 0.001` ended in a Python traceback (AuditBudgetTooSmall
#    raised through main, exit 1). Now one line naming time_budget, exit 2.
set -u
export PATH=/work/venv-red/bin:$PATH
dpharness prove warner_rr --set p_truth=1e-400 2>&1 | grep -E "parameters|error"; echo "rc=${PIPESTATUS[0]} (want 2)"
dpharness audit warner_rr --time-budget 0.001 2>&1 | tail -1 | cut -c1-160; echo "rc=${PIPESTATUS[0]} (want 2)"
