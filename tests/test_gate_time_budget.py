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


def test_the_gate_sizes_an_approximate_claim_for_its_delta():
    """An (ε, δ) claim raises the gate's default cap to the samples on which a δ ten times the claim's
    would show (never seen on one side, 10δ on the other): 2^22 a side at δ = 1e-6 (at most), none beyond
    the default at δ = 1e-5, nothing for a pure claim."""
    from dpharness.auditors._audit import samples_to_resolve_delta
    from dpharness.pipeline import GATE_SAMPLES

    assert samples_to_resolve_delta(1.0, 0.0) == 0
    assert samples_to_resolve_delta(1.0, 1e-5, sequential=True) <= GATE_SAMPLES
    assert samples_to_resolve_delta(1.0, 1e-6, sequential=True) == 1 << 22
    assert samples_to_resolve_delta(1.0, 1e-12, sequential=True) == 1 << 22  # the raise's ceiling


@pytest.mark.statistical
def test_a_partition_threshold_a_few_units_too_low_is_caught_by_the_gate():
    """One declared key, partition selection at threshold 11 and scale 1: δ = e^-10/(1 + e^-1) ≈ 3.3e-5,
    33 times the claimed 1e-6. At 10^6 samples a side the audit certified 1.018, 0.991, 0.992 at seeds 0,
    1, 2 (a miss at two); at the 2^22 the δ raises the cap to, 1.51, 1.73, 1.43. False-failure rate: the
    expected bound (about 1.5) is well above the claim 1; none of 3 seeds missed. About 2 s."""
    import dpharness
    from dpharness import AddRemove, ApproxDP, RealBox
    from dpharness import parts as dp

    m = dp.mechanism(
        name="one_key_selection",
        records=RealBox(0, 1, 1),
        relation=AddRemove(),
        steps=dp.group_by(by=0, keys=[0], select=dp.partition_select(threshold=11, scale=1)),
        claim=ApproxDP(1, 1e-6),
    )
    c = dpharness.check(m, seed=0)
    assert c.audit.samples == 1 << 22, c.line()
    assert not c.audit.passed and c.audit.epsilon_lower_bound > 1.2, c.line()
