"""``dpharness gate --time-budget`` (issue 36, item 3): the gate audits each mechanism within a time
budget by default, the flag overrides it, a bad value is a usage error naming the flag (exit 2, no
traceback), and each line states the samples used, the budget and what the audit could certify."""

from __future__ import annotations

import pytest

from dpharness.cli import main
from dpharness.pipeline import GATE_TIME_BUDGET


@pytest.mark.parametrize("bad", ["0", "-3", "soon", "nan"])
def test_a_bad_time_budget_is_a_usage_error_naming_it(bad, capsys):
    with pytest.raises(SystemExit) as exc:  # argparse's usage error
        main(["gate", "laplace", "--no-cache", "--time-budget", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--time-budget" in err and "Traceback" not in err


def test_a_budget_above_the_timeout_is_refused_with_the_fix(capsys):
    assert main(["gate", "laplace", "--no-cache", "--time-budget", "400", "--timeout", "300"]) == 2
    err = capsys.readouterr().err
    assert "--time-budget=400 exceeds --timeout=300" in err and "raise --timeout" in err


def test_the_flag_overrides_the_default_and_the_line_states_the_size(capsys):
    code = main(["gate", "laplace", "--no-cache", "--jobs", "1", "--samples", "20000", "--time-budget", "30"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "(20 000 samples a side; time budget 30 s; detection floor ε" in out, out
    assert "registered" not in out  # nothing was registered


def test_the_default_budget_is_stated(capsys):
    code = main(["gate", "laplace", "--no-cache", "--jobs", "1", "--samples", "20000"])
    out = capsys.readouterr().out
    assert code == 0 and f"time budget {GATE_TIME_BUDGET:g} s" in out, out
