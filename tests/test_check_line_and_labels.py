"""Issue 38 item 4's smaller points: ``dpharness.check(m)`` runs at the gate's defaults and prints the gate's
one line; ``dp.parallel`` takes labels as ``dp.group_by`` does; a partial audit's note reads as a sentence."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest

import dpharness
from dpharness import AddRemove, PureDP, RealBox, RealInterval, parts as dp
from dpharness.errors import ParameterError
from dpharness.pipeline import DEFAULT_SEED, GATE_SAMPLES, Check


def _count():
    return dp.mechanism(
        name="team_count",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.count() >> dp.laplace(scale=1),
        claim=PureDP(1),
    )


def test_check_runs_at_the_gate_defaults_and_prints_the_gate_line():
    from dpharness import cli

    params = inspect.signature(dpharness.check).parameters
    assert (params["samples"].default, params["seed"].default) == (GATE_SAMPLES, DEFAULT_SEED)
    assert (cli.GATE_SAMPLES, cli.DEFAULT_SEED) == (GATE_SAMPLES, DEFAULT_SEED)  # one default, read by both
    c = dpharness.check(_count())
    assert c.audit.samples == GATE_SAMPLES
    line = str(c)
    assert line == c.line() == cli._gate_line(c)
    assert "\n" not in line and line.startswith("PASS  team_count: proof PROVED (ε ≤ 1); audit ε_lb=")
    assert len(repr(c)) > len(line)  # the repr stays the full value


def test_str_of_a_failed_check_is_its_gate_line():
    c = Check.failed("broken", "ValueError: boom\ntraceback ...")
    assert str(c) == "FAIL  broken: error: ValueError: boom"


def _by_country(keys):
    return dp.mechanism(
        name="income_by_country",
        records=RealBox(0, 1000, 2),
        relation=AddRemove(),
        steps=dp.parallel(dp.column(0) >> dp.clamp(0, 200) >> dp.sum() >> dp.laplace(200), by=1, keys=keys),
        claim=PureDP(1),
    )


def test_parallel_takes_labels_as_group_by_does():
    labelled, numbered = _by_country(["FR", "DE", "IT"]), _by_country([0, 1, 2])
    assert labelled.steps.labelled and labelled.steps.key_values == (0, 1, 2)
    assert dpharness.prove(labelled).verdict.value == "PROVED"
    data = np.array([[30.0, 0]] * 50 + [[45.0, 1]] * 60)  # numbers carry a label's position
    rng = lambda: np.random.default_rng(3)  # noqa: E731
    assert np.array_equal(labelled.sample(data, 5, rng()), numbered.sample(data, 5, rng()))
    frame = pd.DataFrame({"income": [30.0] * 50 + [45.0] * 60, "country": ["FR"] * 50 + ["DE"] * 60})
    assert np.array_equal(dpharness.release(labelled, frame, seed=1), dpharness.release(numbered, data, seed=1))


@pytest.mark.parametrize(
    "keys, words",
    [
        (["FR", "FR"], "must be distinct"),
        (["FR", ["DE"]], "not hashable"),
        ([1, 1], "must be distinct numbers"),
    ],
)
def test_parallel_labels_are_validated(keys, words):
    with pytest.raises(ParameterError, match=words):
        dp.parallel(dp.count() >> dp.laplace(1), by=1, keys=keys)


def test_parallel_labels_need_their_positions_in_the_key_column():
    with pytest.raises(ParameterError, match="positions 0..2 in column 1"):
        dp.mechanism(
            name="narrow",
            records=RealBox(0, 1, 2),
            relation=AddRemove(),
            steps=dp.parallel(dp.count() >> dp.laplace(1), by=1, keys=["FR", "DE", "IT"]),
            claim=PureDP(1),
        )


def test_the_partial_audit_note_names_what_was_audited():
    from dpharness.pipeline import _AUDIT_ROUNDS, run_audit

    m = dp.mechanism(
        name="many_rounds",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.repeat(_AUDIT_ROUNDS + 5, dp.count() >> dp.laplace(scale=_AUDIT_ROUNDS + 5)),
        claim=PureDP(1),
    )
    _, scope = run_audit(m, dpharness.prove(m), samples=2_000, seed=0, workers=1)
    assert f"audited the first {_AUDIT_ROUNDS} rounds of each repetition longer than {_AUDIT_ROUNDS} rounds" in (
        scope.note
    )
