"""A gate that audits less than the claimed mechanism says so everywhere and does not count it: an
iterated mechanism whose audit runs fewer rounds (or samples) than it has is PARTIAL (not decided, not a
pass) in the Check, the gate line, the summary, JSON and JUnit, and ``dpharness audit`` prints the note.

Under the gate's default time budget every round is audited whenever the minimum certification fits
(issue 36 item 3); PARTIAL remains for an audit without a budget (``time_budget=None``: the shorter
version) and for a budget too small for the minimum certification, whose line names the budget that
would fit."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET

import numpy as np

from dpharness import AddRemove, ApproxDP, RealInterval, check, parts as dp
from dpharness.pipeline import Check


def _grad(theta, r):
    return float(r[0]) - theta[0]


def _step(theta, noisy):
    return theta + 0.1 * np.asarray(noisy, dtype=float).reshape(-1)[:1]


def _iterated(times=6):
    return dp.mechanism(
        name="short_sgd",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.iterate(
            times,
            dp.poisson_sample(0.5) >> dp.map_records(_grad) >> dp.clip_norm(1) >> dp.sum() >> dp.gaussian(4),
            init=[0.0],
            update=_step,
        ),
        claim=ApproxDP(3, 1e-5),
    )


def test_a_shorter_audit_is_partial_not_a_pass():
    c = check(_iterated(), samples=300, seed=0, workers=1, time_budget=None)
    assert c.audit_partial is not None and "rounds" in c.audit_partial
    assert c.audit is not None and c.audit.passed  # nothing found on the rounds it ran ...
    assert not c.passed and not c.decided and c.status == "PARTIAL"  # ... which is not an audit of all of them
    again = Check.from_json(json.loads(json.dumps(c.to_json())))
    assert again.audit_partial == c.audit_partial and again.status == "PARTIAL"


TEAM_MODULE = """
import numpy as np
from dpharness import AddRemove, ApproxDP, RealInterval, register, parts as dp


def grad(theta, r):
    return float(r[0]) - theta[0]


def step(theta, noisy):
    return theta + 0.1 * np.asarray(noisy, dtype=float).reshape(-1)[:1]


register(
    dp.mechanism(
        name="short_sgd",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.iterate(
            6,
            dp.poisson_sample(0.5) >> dp.map_records(grad) >> dp.clip_norm(1) >> dp.sum() >> dp.gaussian(4),
            init=[0.0],
            update=step,
        ),
        claim=ApproxDP(3, 1e-5),
    )
)
"""


def test_the_gate_line_summary_and_junit_say_partial(tmp_path):
    import subprocess

    (tmp_path / "partial_team.py").write_text(TEAM_MODULE)
    junit = tmp_path / "j.xml"
    # a budget far too small for the minimum certification of every round: PARTIAL, naming the budget
    argv = ["gate", "--module", "partial_team", "--own", "--samples", "300", "--jobs", "1", "--no-cache"]
    argv += ["--time-budget", "0.01"]
    run = subprocess.run(
        [sys.executable, "-m", "dpharness.cli", *argv, "--junit", str(junit)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)},
        timeout=300,
    )
    out = run.stdout
    assert run.returncode != 0, out + run.stderr
    assert "PARTIAL  short_sgd" in out and "not counted as audited" in out, out + run.stderr
    assert "0/1 mechanisms proved and audited" in out and "not audited in full (PARTIAL): short_sgd" in out
    assert "--time-budget " in out and "minimum certification" in out, out
    case = ET.parse(junit).getroot().find("testcase")
    assert "PARTIAL" in case.find("error").get("message")


TEAM_MODULE_OWN_SAMPLES = TEAM_MODULE.replace(
    "        claim=ApproxDP(3, 1e-5),\n    )\n)",
    "        claim=ApproxDP(3, 1e-5),\n    ),\n    samples=2000,\n    timeout=600,\n)",
)


def test_register_samples_audits_every_round(tmp_path):
    """register(m, samples=N): the gate audits all the rounds at N samples a side: decided, a pass."""
    import subprocess

    assert "samples=2000" in TEAM_MODULE_OWN_SAMPLES
    (tmp_path / "own_team.py").write_text(TEAM_MODULE_OWN_SAMPLES)
    runs = {}
    for fmt in ("--json", "--text"):
        argv = ["gate", "--module", "own_team", "--own", "--samples", "300", "--jobs", "1", "--no-cache"]
        argv += [fmt] if fmt == "--json" else []
        runs[fmt] = subprocess.run(
            [sys.executable, "-m", "dpharness.cli", *argv],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)},
            timeout=600,
        )
    run = runs["--json"]
    got = json.loads(run.stdout)["mechanisms"][0]
    assert got["audit_partial"] is None and got["status"] == "PASS", run.stdout + run.stderr
    assert got["audit"]["samples"] == 2000
    # the line says the audit ran at the registered budget, not at --samples
    assert "(2 000 samples a side, its registered setting; time budget 120 s" in runs["--text"].stdout, runs[
        "--text"
    ].stdout


def test_the_default_budget_audits_every_round_and_states_its_size():
    """At check()'s default time budget the 6-round mechanism is audited on all its rounds (no PARTIAL),
    and the result states the samples it used and what it could certify at that size."""
    from dpharness.pipeline import GATE_TIME_BUDGET

    c = check(_iterated(), samples=20_000, seed=0, workers=1)
    assert c.audit_partial is None and c.status == "PASS", c.messages
    assert c.audit.extra["time_budget"] == {
        "seconds": GATE_TIME_BUDGET,
        "samples": c.audit.samples,
        "cut_by_time_limit": False,
    }
    reach = c.audit.extra["certifiable"]
    assert 0 < reach["floor"] < reach["ceiling"] and reach["ceiling"] > 3  # a violation of ε = 3 is certifiable
    from dpharness.cli import _gate_line

    line = _gate_line(c, 1_000_000)
    assert f"time budget {GATE_TIME_BUDGET:g} s" in line and "detection floor ε" in line, line
    assert "registered" not in line, line  # nothing was registered


def test_an_audit_too_small_to_refute_its_claim_is_not_counted():
    """At 200 samples a side (the cap) the certifier's ceiling (counts 100 vs 0) is below the claimed
    ε = 3: the audit could not have certified a violation whatever the mechanism, so the check is PARTIAL
    and says why."""
    c = check(_iterated(), samples=200, seed=0, workers=1)
    assert c.audit.extra["certifiable"]["ceiling"] <= 3
    assert c.status == "PARTIAL" and "could not have found a violation" in c.audit_partial, c.messages


def test_a_budgeted_audit_of_every_round_is_reproduced_by_its_stated_options():
    """Under a time budget every round is audited, where an audit at ``samples`` alone audits the first
    rounds: the result says so (``extra["reproduce"]``), the reproduce line carries ``--every-round``, and
    ``run_audit`` at the samples used with those keywords gives the same result."""
    from dpharness.cli import _proof_for_witness
    from dpharness.pipeline import run_audit
    from dpharness._run import reproduce_flags

    m = _iterated()
    proof = _proof_for_witness(m)
    budgeted, _ = run_audit(m, proof, samples=20_000, seed=0, workers=1, time_budget=60)
    again = budgeted.extra["reproduce"]
    assert again.get("every_round") is True, budgeted.extra
    assert " --every-round" in reproduce_flags(budgeted)
    assert f" --samples {budgeted.samples} --seed 0" in reproduce_flags(budgeted)
    reproduced, scope = run_audit(m, proof, samples=budgeted.samples, seed=0, workers=1, **again)
    assert scope.partial is None
    assert (reproduced.epsilon_lower_bound, reproduced.counts) == (budgeted.epsilon_lower_bound, budgeted.counts)
    assert reproduced.extra["reproduce"] == again
