"""Fast deterministic tests of the ``dpharness`` command line: exit codes, ``--set`` semantics
(overrides keep the claim), ``--json`` output, usage errors and the gate (JUnit, gallery mode).

The prover and auditor are replaced by the faithful stand-ins of ``dp_fakes`` so these tests pin
the interface, not the engines; ``test_cli_real_*`` run the real engines on built-ins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from fractions import Fraction

import numpy as np
import pytest

import dpharness
import dpharness.auditors
from dpharness import registry
from dpharness.cli import main

import dp_fakes


@pytest.fixture
def fakes(monkeypatch):
    """A private registry copy holding the fake coin (correct) and its buggy twin, with the
    prover and auditor replaced by the stand-ins."""
    return dp_fakes.install(monkeypatch, {"fake_coin": dp_fakes.Coin, "fake_coin_bug": dp_fakes.BuggyCoin})


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_name_claim_relation_and_buggy(fakes, capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 2
    coin, bug = lines
    assert coin.startswith("fake_coin ") and "ε = 1 (pure DP)" in coin and "substitute one record" in coin
    assert "buggy" not in coin
    assert bug.startswith("fake_coin_bug") and bug.rstrip().endswith("buggy")


@pytest.mark.parametrize("position", ["before", "after"])
def test_list_json(fakes, capsys, position):
    argv = ["--json", "list"] if position == "before" else ["list", "--json"]
    code, out, _ = run(capsys, *argv)
    rows = json.loads(out)
    assert code == 0
    assert [r["name"] for r in rows] == ["fake_coin", "fake_coin_bug"]
    assert rows[1]["buggy"] is True and rows[1]["true_epsilon"] == 2.0
    assert rows[0]["parameters"] == {"log_odds": 1, "label": "coin"}


def test_prove_holds_exit_0(fakes, capsys):
    code, out, _ = run(capsys, "prove", "fake_coin")
    assert code == 0
    assert "verdict: PROVED" in out and "ε ≤ 1" in out


def test_set_keeps_the_claim(fakes, capsys):
    # more privacy loss than claimed: the claim ε = 1 stays, so the proof must fail
    code, out, _ = run(capsys, "--json", "prove", "fake_coin", "--set", "log_odds=1.1")
    proof = json.loads(out)
    assert code == 1
    assert proof["verdict"] == "REFUTED"
    assert proof["claim"] == "ε = 1 (pure DP)"
    assert proof["parameters"]["log_odds"] == 1.1


def test_set_parses_int_fraction_float_and_strings(fakes, capsys):
    from dpharness._run import build_mechanism

    assert build_mechanism("fake_coin", ["log_odds=1/2"]).log_odds == Fraction(1, 2)
    assert build_mechanism("fake_coin", ["log_odds=3"]).log_odds == 3
    assert isinstance(build_mechanism("fake_coin", ["log_odds=3"]).log_odds, int)
    assert build_mechanism("fake_coin", ["log_odds=0.25"]).log_odds == 0.25
    assert build_mechanism("fake_coin", ["label=heads"]).label == "heads"
    m = build_mechanism("fake_coin", ["log_odds=1/2", "label=x"])
    assert m.claim == dpharness.PureDP(1)


@pytest.mark.parametrize(
    "text, match",
    [("1e-400", "below the smallest double and would read as 0.0"), ("1e400", "beyond the largest double")],
)
def test_set_refuses_a_decimal_the_doubles_cannot_hold(fakes, capsys, text, match):
    """``--set log_odds=1e-400`` read as 0.0 and ``1e400`` as inf, silently (a p_truth of 1e-400 was proved
    as p_truth = 0): refused, exit 2, naming the key; 1/10**k written as a fraction stays exact."""
    code, _, err = run(capsys, "prove", "fake_coin", "--set", f"log_odds={text}")
    assert code == 2 and f"log_odds='{text}'" in err and match in err
    from dpharness._run import build_mechanism

    assert build_mechanism("fake_coin", ["log_odds=1/" + "1" + "0" * 400]).log_odds == Fraction(1, 10**400)


def test_claim_overrides(fakes, capsys):
    code, out, _ = run(capsys, "--json", "prove", "fake_coin", "--set", "log_odds=2", "--claim-epsilon", "2")
    assert code == 0 and json.loads(out)["claim"] == "ε = 2 (pure DP)"
    code, out, _ = run(capsys, "--json", "prove", "fake_coin", "--claim-epsilon", "1/2")
    assert code == 1 and json.loads(out)["claim"] == "ε = 1/2 (pure DP)"
    code, out, _ = run(capsys, "--json", "prove", "fake_coin", "--claim-delta", "1e-5")
    assert code == 0 and json.loads(out)["claim"] == "(ε, δ) = (1, 1e-05)"


def test_unknown_key_exit_2_names_key_and_valid_ones(fakes, capsys):
    code, out, err = run(capsys, "prove", "fake_coin", "--set", "scael=0.9")
    assert code == 2 and out == ""
    assert "scael" in err and "label" in err and "log_odds" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["prove", "fake_coin", "--set", "log_odds=abc"], "log_odds='abc' is not a number"),
        (["prove", "fake_coin", "--set", "log_odds"], "KEY=VALUE"),
        (["prove", "fake_coin", "--set", "log_odds=-1"], "log_odds=-1"),  # the mechanism's own validation
        (["prove", "fake_coin", "--set", "claim=2"], "--claim-epsilon"),
        (["prove", "no_such_mechanism"], "dpharness list"),
        (["audit", "fake_coin", "--claim-delta", "2"], "delta=2"),
    ],
)
def test_input_errors_exit_2_with_a_fix(fakes, capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["audit", "fake_coin", "--samples", "0"],
        # fewer than an audit certifies on: a usage error, not a gate (or report) of errored checks
        ["gate", "fake_coin", "--samples", "5"],
        ["audit", "fake_coin", "--samples", "19"],
        ["report", "fake_coin", "--samples", "5"],
        ["audit", "fake_coin", "--seed", "x"],
        ["prove"],
        ["prove", "fake_coin", "--claim-epsilon", "big"],
    ],
)
def test_usage_errors_exit_2(fakes, capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_audit_exit_codes_and_options(fakes, capsys):
    code, out, _ = run(capsys, "audit", "fake_coin", "--samples", "4000", "--seed", "7", "--ideal-numerics")
    assert code == 0
    call = fakes.CALLS[-1]
    assert (call["samples"], call["seed"], call["epsilon"], call["delta"]) == (4000, 7, 1.0, 0.0)
    assert call["options"]["ideal_numerics"] is True
    assert "passed" in out and "--seed 7" in out
    code, out, _ = run(capsys, "audit", "fake_coin", "--set", "log_odds=2")
    assert code == 1 and "VIOLATION" in out


def test_audit_json(fakes, capsys):
    code, out, _ = run(capsys, "audit", "fake_coin", "--json", "--set", "log_odds=2", "--samples", "10000")
    payload = json.loads(out)
    assert code == 1
    assert payload["passed"] is False and payload["samples"] == 10000
    assert payload["epsilon_lower_bound"] == pytest.approx(2 - 0.03)
    assert payload["mechanism"] == "fake_coin" and payload["claim"] == "ε = 1 (pure DP)"


def test_gate_passes_and_writes_junit(fakes, capsys, tmp_path, monkeypatch):
    registry._REGISTRY.pop("fake_coin_bug")
    junit = tmp_path / "out" / "gate.xml"
    code, out, _ = run(capsys, "gate", "--jobs", "1", "--samples", "1000", "--junit", str(junit))
    assert code == 0
    assert "PASS  fake_coin" in out and "1/1" in out
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "1" and suite.get("failures") == "0"
    (case,) = suite.findall("testcase")
    assert case.get("name") == "fake_coin"
    assert case.find("failure") is None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["proof.verdict"] == "PROVED" and props["audit.samples"] == "1000"
    assert "proof: PROVED" in case.find("system-out").text
    # the proof's witness was offered to the audit
    assert fakes.CALLS[-1]["witnesses"] and fakes.CALLS[-1]["witnesses"][0].output == 0


def test_gate_fails_on_unproven_or_violation(fakes, capsys, tmp_path, monkeypatch):
    @registry.register
    @dp_fakes.dataclass(frozen=True, kw_only=True)
    class Loose(dp_fakes.Coin):
        name = "fake_coin_loose"
        log_odds: object = 2  # correct-catalog entry that is not private

    registry._REGISTRY.pop("fake_coin_bug")
    junit = tmp_path / "gate.xml"
    code, out, _ = run(capsys, "--json", "gate", "--jobs", "1", "--samples", "1000", "--junit", str(junit))
    payload = json.loads(out)
    assert code == 1 and payload["passed"] is False
    by_name = {m["name"]: m for m in payload["mechanisms"]}
    assert by_name["fake_coin"]["passed"] and not by_name["fake_coin_loose"]["passed"]
    failure = [c for c in ET.parse(junit).getroot().findall("testcase") if c.get("name") == "fake_coin_loose"][0]
    assert "proof REFUTED" in failure.find("failure").get("message")


def test_gate_gallery_expects_every_bug_caught(fakes, capsys, tmp_path):
    code, out, _ = run(capsys, "gate", "--gallery", "--jobs", "1", "--samples", "1000")
    assert code == 0 and "bug caught" in out and "fake_coin_bug" in out
    assert "fake_coin:" not in out  # the correct entry is not part of the gallery gate

    @registry.register
    @dp_fakes.dataclass(frozen=True, kw_only=True)
    class Sneaky(dp_fakes.Coin):  # "buggy" but private: both checks pass, so it slips through
        name = "fake_coin_sneaky_bug"
        buggy = True
        bug = "none visible"

    junit = tmp_path / "gallery.xml"
    code, out, _ = run(capsys, "gate", "--gallery", "--jobs", "1", "--samples", "1000", "--junit", str(junit))
    assert code == 1 and "BUG SLIPPED THROUGH" in out and "fake_coin_sneaky_bug" in out.splitlines()[-1]
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().findall("testcase")}
    assert cases["fake_coin_bug"].find("failure") is None
    assert "slipped through" in cases["fake_coin_sneaky_bug"].find("failure").get("message")


def test_gate_module_registers_project_mechanisms(fakes, capsys, tmp_path, monkeypatch):
    (tmp_path / "my_dp_project.py").write_text(
        textwrap.dedent("""
        from dataclasses import dataclass
        from dpharness import register
        import dp_fakes

        @register
        @dataclass(frozen=True, kw_only=True)
        class ProjectCoin(dp_fakes.Coin):
            name = "project_coin"
            log_odds: object = 0.5
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_dp_project", raising=False)
    code, out, _ = run(capsys, "gate", "--module", "my_dp_project", "--jobs", "1", "--samples", "1000")
    assert code == 0 and "PASS  project_coin" in out
    code, _, err = run(capsys, "gate", "--module", "no_such_module_xyz")
    assert code == 2 and "module='no_such_module_xyz'" in err


def test_gate_reports_crashes_as_failures(fakes, capsys, monkeypatch):
    def boom(m):
        raise RuntimeError("prover crashed")

    monkeypatch.setattr(dpharness, "prove", boom)
    registry._REGISTRY.pop("fake_coin_bug")
    code, out, _ = run(capsys, "gate", "--jobs", "1", "--samples", "1000")
    assert code == 1 and "prover crashed" in out


def test_import_is_cheap():
    code = (
        "import sys, dpharness.cli; heavy = [m for m in ('matplotlib', 'scipy', 'z3', 'hypothesis', "
        "'dpharness.report', 'dpharness.proofs', 'dpharness.auditors') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_console_script_usage_error():
    proc = subprocess.run(
        [sys.executable, "-m", "dpharness.cli", "prove", "laplace", "--set", "nokey=1"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "nokey" in proc.stderr and "Traceback" not in proc.stderr


def test_gate_timeout_per_phase(fakes, capsys, monkeypatch):
    import time

    def slow_audit(*args, **kwargs):
        time.sleep(30)
        raise AssertionError("the deadline should have interrupted the audit")

    monkeypatch.setattr(dpharness.auditors, "audit", slow_audit, raising=False)
    start = time.perf_counter()
    code, out, _ = run(capsys, "gate", "--jobs", "1", "--timeout", "0.3")
    # interrupted long before the 30 s sleep ends (a wide margin: the machine may be loaded)
    assert time.perf_counter() - start < 15
    # a time limit is not a finding: TIMEOUT (not decided), with the limit in force; the gate still fails
    assert (
        code == 1
        and "TIMEOUT  fake_coin" in out
        and "the audit of fake_coin did not finish within its time limit of 0.3 s" in out
    )
    # a gallery bug refuted by its proof is caught even when the audit runs out of time
    code, out, _ = run(capsys, "gate", "--gallery", "--jobs", "1", "--timeout", "0.3")
    assert code == 0 and "PASS  fake_coin_bug" in out and "bug caught" in out


def test_gate_falls_back_to_the_witness_pair_when_the_search_runs_out(fakes, capsys, monkeypatch):
    import time

    def search_is_slow(mechanism, data=None, neighbor=None, **kwargs):
        if data is None:
            time.sleep(5)
        return dp_fakes.fake_audit(mechanism, data, neighbor, **kwargs)

    monkeypatch.setattr(dpharness.auditors, "audit", search_is_slow, raising=False)
    registry._REGISTRY.pop("fake_coin_bug")
    code, out, _ = run(capsys, "--json", "gate", "--jobs", "1", "--timeout", "0.4")
    (res,) = json.loads(out)["mechanisms"]
    assert code == 0 and res["passed"]
    assert "neighbour search" in res["audit_note"] and "audited the pair 0 / 1 instead" in res["audit_note"]
    assert res["audit"]["passed"] and dp_fakes.CALLS[-1]["data"] == 0
    # what reproduces it: the pair audited, which `dpharness audit --pair` takes (no search to run out)
    assert res["audit"]["extra"]["reproduce"] == {"pair": ["0", "1"]}


def test_audit_takes_the_pair_to_audit_and_states_it_in_its_reproduce_line(capsys):
    code, out, _ = run(capsys, "audit", "laplace", "--samples", "20000", "--pair", "[0.5]", "[1.5]")
    assert code == 0 and "pairs: given pair" in out
    assert "(reproduce: dpharness audit laplace --pair '[0.5]' '[1.5]' --samples 20000 --seed 0)" in out
    for pair, says in (
        (("[0.5", "[1.5]"), "--pair DATA='[0.5' is not JSON"),
        (("[0.5]", "[7.5]"), "--pair: data and neighbor are not neighbours"),
        (("[0.5]", "[0.5]"), "--pair: data and neighbor are identical"),
    ):
        code, _, err = run(capsys, "audit", "laplace", "--pair", *pair)
        assert code == 2 and says in err and "Traceback" not in err


def test_a_pair_reads_back_from_its_text_exactly_or_is_not_offered():
    """The fallback's pair goes on the reproduce line only when --pair reads it back as the same values of
    the same dtype and shape (an empty data set of box records included); else the note names it."""
    import numpy as np

    from dpharness import AddRemove, RealBox
    from dpharness import parts as dp
    from dpharness._run import pair_as_text, pair_from_text

    m = dp.mechanism(
        name="box_count",
        records=RealBox(0, 1, 2),
        relation=AddRemove(),
        steps=dp.count() >> dp.laplace(1),
        claim=dpharness.PureDP(1),
    )
    empty, one = np.zeros((0, 2)), np.array([[0.25, 1.0]])
    texts = pair_as_text(m, empty, one)
    assert texts == ("[]", "[[0.25, 1.0]]")
    a, b = pair_from_text(m, texts)
    assert a.shape == (0, 2) and a.dtype == b.dtype == np.float64 and np.array_equal(b, one)
    ints = dp.mechanism(
        name="int_count",
        records=dpharness.IntegerRange(0, 2**53),
        relation=AddRemove(),
        steps=dp.count() >> dp.laplace(1),
        claim=dpharness.PureDP(1),
    )
    big = np.array([2**53 - 1], dtype=np.int64)  # integer records stay int64 (JSON keeps the integer)
    a, b = pair_from_text(ints, pair_as_text(ints, big[:0], big))
    assert b.dtype == np.int64 and int(b[0]) == 2**53 - 1
    assert pair_as_text(m, np.array([[np.nan, 0.0]]), empty) is None  # not JSON: the note names it


def test_nested_deadlines_keep_the_outer_one():
    import time

    from dpharness.pipeline import PhaseTimeout, deadline

    start = time.perf_counter()
    with pytest.raises(PhaseTimeout, match="outer"):
        with deadline(0.4, "outer"):
            with deadline(5, "inner"):
                time.sleep(0.1)
            time.sleep(5)
    assert time.perf_counter() - start < 2
    with pytest.raises(PhaseTimeout, match="inner"):
        with deadline(5, "outer"):
            with deadline(0.1, "inner"):
                time.sleep(5)


def test_cli_real_prover_keeps_the_claim(capsys):
    """The real prover on the built-in Laplace mechanism: the calibrated scale proves ε = 1; scale 0.9
    under the same claim must not (it is 10/9-DP); claiming 10/9 explicitly proves again."""
    assert main(["prove", "laplace"]) == 0
    capsys.readouterr()
    assert main(["--json", "prove", "laplace", "--set", "scale=0.9"]) == 1
    proof = json.loads(capsys.readouterr().out)
    assert proof["verdict"] != "PROVED" and proof["claim"] == "ε = 1 (pure DP)"
    assert proof["parameters"]["scale"] == 0.9
    assert main(["prove", "laplace", "--set", "scale=9/10", "--claim-epsilon", "10/9"]) == 0


@pytest.mark.statistical
def test_cli_real_auditor_exit_codes(capsys):
    """Real auditor on randomized response. False-failure rate: the passing audit fails with
    probability <= 5% over seeds (confidence 0.95; fixed seed 0 here); the violating one (log_odds 2
    against ε = 1, true ε = 2) is certified at 50 000 samples for any reasonable seed."""
    assert main(["audit", "randomized_response", "--samples", "50000", "--seed", "0"]) == 0
    assert main(["audit", "randomized_response", "--set", "log_odds=2", "--samples", "50000", "--seed", "0"]) == 1
    assert "VIOLATION certified" in capsys.readouterr().out


def test_gate_report_and_report_command(fakes, capsys, tmp_path, monkeypatch):
    from dpharness import report

    monkeypatch.setattr(report, "CURVE_SIZES", (500,))
    monkeypatch.setattr(report, "PLOT_SAMPLES", 500)
    out_dir = tmp_path / "gate-reports"
    code, _, _ = run(capsys, "gate", "--gallery", "--jobs", "1", "--samples", "1000", "--report", str(out_dir))
    assert code == 0
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "README.md",
        "fake_coin_bug.html",
        "fake_coin_bug.md",
        "fake_coin_bug.png",
        "index.html",
    ]
    code, out, _ = run(
        capsys, "--json", "report", "--out", str(tmp_path / "r"), "--jobs", "1", "--samples", "1000", "fake_coin"
    )
    payload = json.loads(out)
    assert code == 0 and [r["name"] for r in payload["reports"]] == ["fake_coin"]
    assert report.read_metadata(str(tmp_path / "r" / "fake_coin.md"))["samples"] == 1000
    code, _, err = run(capsys, "report", "--out", str(tmp_path / "r"), "nope")
    assert code == 2 and "name='nope'" in err


def test_worker_pool_runs_in_parallel_and_survives_a_dead_worker(capsys):
    from dpharness import _pool

    def lost(name, message, seconds):
        return {"name": name, "ok": False, "error": message}

    names = ["a", "b", "c", "d"]
    run = dict(jobs=2, limit=None, lost=lost, label=lambda r: "ok" if r["ok"] else "lost")
    results = _pool.run(dp_fakes.pool_task, names, **run)
    assert [r["name"] for r in results] == names and all(r["ok"] for r in results)
    assert os.getpid() not in {r["pid"] for r in results}  # ran in worker processes
    results = _pool.run(dp_fakes.pool_task, names, kwargs={"crash": "c"}, **run)
    by_name = {r["name"]: r for r in results}
    assert not by_name["c"]["ok"] and "worker process died" in by_name["c"]["error"]
    assert all(by_name[n]["ok"] for n in "abd")  # a dead worker takes only its own task with it
    err = capsys.readouterr().err
    assert "c: lost" in err and "a: ok" in err  # one progress line per task


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["gate"], ["gate", "--gallery"]], ids=["catalog", "gallery"])
def test_builtin_gate_passes_within_two_minutes(argv, tmp_path):
    """The real gate on the built-ins: every mechanism proved and audited (every gallery bug caught),
    within the 2-minute budget on 2 cores. Statistical: fixed seed 0; a correct mechanism's audit
    fails with probability <= 5% per mechanism over seeds, and this seed is known to pass."""
    import time

    junit = tmp_path / "gate.xml"
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "dpharness.cli", *argv, "--junit", str(junit)], capture_output=True, text=True
    )
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert elapsed < 120, f"gate took {elapsed:.0f} s"
    suite = ET.parse(junit).getroot()
    assert int(suite.get("tests")) >= 10 and suite.get("failures") == "0" and suite.get("errors") == "0"


def test_list_real_catalog(capsys):
    assert main(["--json", "list"]) == 0
    rows = json.loads(capsys.readouterr().out)
    classes = registry.catalog(gallery=None)
    assert [r["name"] for r in rows] == list(classes)
    for r in rows:
        assert "error" not in r, r
        assert r["buggy"] == classes[r["name"]].buggy
        assert r["claim"] == classes[r["name"]]().claim.describe()
    assert any(r["buggy"] for r in rows) and any(not r["buggy"] for r in rows)


def test_unwritable_report_directory_fails_before_any_work(capsys):
    """`report --out` / `gate --report` to a directory that cannot be written: one line, exit 2, no audit run."""
    assert main(["report", "--out", "/proc/dpharness-cannot-write", "laplace"]) == 2
    assert "--out /proc/dpharness-cannot-write: cannot write there" in capsys.readouterr().err
    assert main(["gate", "--report", "/proc/dpharness-cannot-write", "laplace"]) == 2
    assert "--report" in capsys.readouterr().err
    assert main(["gate", "--junit", "/proc/dpharness-cannot-write/gate.xml", "laplace"]) == 2
    err = capsys.readouterr().err
    assert "--junit" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["gate", "laplace", "--no-cache"], ["report", "--out", "OUT", "laplace"]])
def test_big_gate_and_report_print_an_estimate_first(command, monkeypatch, capsys, tmp_path):
    """`gate`/`report --samples` above 2·10^7 print a time estimate on stderr before any check runs (the
    runs are replaced by a stub here)."""
    from dpharness import _pool, cli

    class Stop(Exception):
        pass

    def stub(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(_pool, "run", stub)
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in command]
    with pytest.raises(Stop):
        cli.main(argv + ["--samples", "30000000"])
    assert "rough estimate for 30,000,000 samples a side" in capsys.readouterr().err


def test_an_unwritable_cache_dir_is_said_and_the_gate_still_runs(fakes, capsys):
    code, out, err = run(
        capsys, "gate", "--jobs", "1", "--samples", "1000", "--cache-dir", "/proc/dpharness-no", "fake_coin"
    )
    assert (
        code == 0 and "--cache-dir /proc/dpharness-no: cannot write there" in err and "Running without the cache" in err
    )


def test_prove_output_never_says_a_bound_it_does_not_have(capsys):
    code, out, _ = run(capsys, "prove", "textbook_laplace")
    assert code == 1 and "ε ≤ ∞" not in out and "(oo)" not in out
    assert "no bound: the claim is refuted" in out


def test_a_float_leak_prints_the_hint_and_a_reproduce_line(capsys):
    code, out, _ = run(capsys, "audit", "textbook_laplace", "--samples", "100000")
    assert code == 1
    assert "hint: the certifying event reads the floating-point structure" in out
    assert "(reproduce: dpharness audit textbook_laplace --samples 100000 --seed 0)" in out


def test_big_audit_prints_an_estimate_first(monkeypatch, capsys):
    """`audit --samples` above 2·10^7 prints a time estimate on stderr before running (the run itself is
    replaced by a stub here)."""
    import dpharness
    from dpharness import cli

    class Stop(Exception):
        pass

    def stub(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(dpharness.auditors, "audit", stub, raising=False)
    with pytest.raises(Stop):
        cli.main(["audit", "laplace", "--samples", "30000000"])
    assert "rough estimate for 30,000,000 samples a side" in capsys.readouterr().err


def test_report_module_in_worker_processes(capsys, tmp_path, monkeypatch):
    """`report --module PKG NAME` with worker processes (--jobs 2): each worker imports PKG again, so
    the project's mechanism is known there (it used to be "not a registered mechanism")."""
    (tmp_path / "my_report_project.py").write_text(
        textwrap.dedent("""
        from dpharness import parts as dp, register, PureDP, AddRemove, RealInterval

        register(dp.mechanism(name="project_count", records=RealInterval(0, 1), relation=AddRemove(),
                              steps=dp.count() >> dp.laplace(scale=1), claim=PureDP(1)))
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "my_report_project", raising=False)
    registry._load_builtins()  # the project's mechanism is registered in a copy, dropped after the test
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_BY_MODULE", dict(registry._BY_MODULE))
    out_dir = tmp_path / "out"
    code, out, err = run(
        capsys,
        "report",
        "--module",
        "my_report_project",
        "--jobs",
        "2",
        "--samples",
        "2000",
        "--out",
        str(out_dir),
        "project_count",
    )
    assert code == 0, out + err
    assert (out_dir / "project_count.md").exists() and (out_dir / "project_count.html").exists()
    assert "PROVED" in (out_dir / "project_count.md").read_text()


def test_report_own_reports_only_the_module_mechanisms(fakes, capsys, tmp_path, monkeypatch):
    """`report --own --module PKG`: the mechanisms PKG registers, not the built-ins (as `gate --own`);
    `--own` without `--module` is a usage error."""
    from dpharness import report

    monkeypatch.setattr(report, "CURVE_SIZES", (500,))
    monkeypatch.setattr(report, "PLOT_SAMPLES", 500)
    src = tmp_path / "src"
    src.mkdir()
    (src / "own_report_pkg.py").write_text(
        textwrap.dedent('''
        from dataclasses import dataclass
        from typing import ClassVar

        import dp_fakes
        from dpharness import register


        @register
        @dataclass(frozen=True, kw_only=True)
        class OwnCoin(dp_fakes.Coin):
            """The fake coin under the project's own name."""

            name: ClassVar[str] = "own_coin"
    ''')
    )
    monkeypatch.syspath_prepend(str(src))
    code, out, err = run(
        capsys,
        "--json",
        "report",
        "--own",
        "--module",
        "own_report_pkg",
        "--out",
        str(tmp_path / "r"),
        "--jobs",
        "1",
        "--samples",
        "1000",
    )
    assert code == 0, err
    assert [r["name"] for r in json.loads(out)["reports"]] == ["own_coin"]
    code, _, err = run(capsys, "report", "--own", "--out", str(tmp_path / "r2"))
    assert code == 2 and "--module" in err


@pytest.mark.parametrize(
    "argv, names",
    [
        (["gate", "--target", "diffprivlib:laplaec"], ["--target diffprivlib:laplaec", "did you mean"]),
        (["gate", "--target", "fake_coin"], ["--target fake_coin", "not a library target", "dpharness targets"]),
        (["report", "nolib:laplace", "--out", "OUT"], ["name='nolib:laplace'", "not a library target"]),
    ],
)
def test_bad_library_target_is_exit_2_naming_the_argument(fakes, capsys, tmp_path, argv, names):
    """An unknown library target (or a mechanism's name given to --target) is a usage error before any
    work: exit 2, one line naming the argument and what to do, no traceback. No library is imported."""
    argv = [str(tmp_path) if a == "OUT" else a for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    assert err.startswith("dpharness: error: ") and "Traceback" not in err
    for text in names:
        assert text in err, err


def test_gate_target_of_a_library_not_installed_says_the_extra(fakes, capsys):
    """A target whose library is not installed: exit 2 with the pip extra to install."""
    import importlib.util

    from dpharness.auditors.libraries import list_targets
    from dpharness.auditors.libraries._registry import _SPECS

    missing = [t.name for t in list_targets() if importlib.util.find_spec(_SPECS[t.name].module.split(".")[0]) is None]
    if not missing:
        pytest.skip("every library with targets is installed here")
    code, out, err = run(capsys, "gate", "--target", missing[0])
    assert (
        code == 2 and "pip install -e '.[" in err and "in the dpharness checkout" in err and "Traceback" not in err
    ), err


def _grid_laplace(data, size, rng):
    """x + Lap(1) on a grid of 2^-10 (outputs exact, so no floating-point event): true ε = 1 at |x - x'| <= 1."""
    return np.round((float(data) + rng.laplace(0.0, 1.0, size)) * 1024) / 1024


@pytest.fixture
def numpy_targets(monkeypatch):
    """Two library targets whose 'library' is numpy (so the default stage runs the CLI's target paths):
    ``numpyfake:laplace_claims_2`` (true ε 1, claim 2) and ``numpyfake:laplace_claims_half`` (claim 0.5)."""
    from dpharness.auditors.libraries import _registry
    from dpharness.core import BoundedChange

    registry._load_builtins()  # a private registry: the targets registered here do not outlive the test
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_AUDIT_ONLY", set(registry._AUDIT_ONLY))
    monkeypatch.setattr(registry, "_SETTINGS", dict(registry._SETTINGS))
    for suffix, eps in (("2", 2.0), ("half", 0.5)):

        def build(v, eps=eps):
            return dict(
                fn=_grid_laplace,
                vectorized=True,
                data=0.0,
                neighbor=1.0,
                epsilon=eps,
                delta=0.0,
                relation="scalars at absolute difference <= 1",
                claim_source="the test's claim",
                neighbor_relation=BoundedChange(1.0, "l1"),
            )

        name = f"numpyfake:laplace_claims_{suffix}"
        spec = _registry._Spec(name, "numpy", "numpy", "test", "a grid Laplace", (), build)
        monkeypatch.setitem(_registry._SPECS, name, spec)


@pytest.mark.parametrize("suffix, expected", [("2", 0), ("half", 1)])
def test_gate_target_exit_code_and_bound_are_audits(numpy_targets, capsys, suffix, expected):
    """`gate --target T` exits as `audit T` does and certifies `audit T`'s bound (same samples and seed:
    an audit with no proof beside it is certified in one look, whatever the command). Deterministic
    (fixed seed, the target draws from the audit's rng); the expected verdicts: a claim of 2 on a true
    ε of 1 fails with probability at most 5% (confidence 0.95) over seeds, a claim of 0.5 is far below
    the true ε of 1 (20 000 samples a side)."""
    name = f"numpyfake:laplace_claims_{suffix}"
    args = ["--samples", "20000", "--seed", "4"]
    code, out, _ = run(capsys, "gate", "--target", name, *args, "--jobs", "1", "--no-cache", "--json")
    gated = json.loads(out)["mechanisms"][0]
    audit_code, audited, _ = run(capsys, "audit", name, *args, "--json")
    assert code == audit_code == expected, (code, audit_code)
    assert gated["audit"]["epsilon_lower_bound"] == json.loads(audited)["epsilon_lower_bound"]
    assert "sequential" not in gated["audit"]["extra"], gated["audit"]["extra"]
    assert gated["policy"] == "audit-only", gated["policy"]


def test_report_target_is_audit_of_target(numpy_targets, capsys, tmp_path):
    """`report T` certifies `audit T`'s bound for the same samples and seed (deterministic)."""
    from dpharness import report

    name = "numpyfake:laplace_claims_2"
    code, out, err = run(
        capsys, "report", name, "--samples", "20000", "--seed", "4", "--out", str(tmp_path), "--jobs", "1"
    )
    assert code == 0, (out, err)
    meta = report.read_metadata(str(tmp_path / "numpyfake--laplace_claims_2.md"))
    _, audited, _ = run(capsys, "audit", name, "--samples", "20000", "--seed", "4", "--json")
    assert meta["epsilon_lower_bound"] == json.loads(audited)["epsilon_lower_bound"] and meta["kind"] == "library"


def test_audit_report_and_gate_print_one_bound_for_a_target(numpy_targets, capsys, tmp_path):
    """One audit procedure whatever the command: for one target, the same samples and seed,
    `dpharness audit`, `dpharness report` (its page) and `dpharness gate --target` (its line, its JSON
    and its JUnit property, and the page its --report writes) print the same certified bound, rounded
    down alike (deterministic: fixed seed, the target draws from the audit's rng)."""
    import xml.etree.ElementTree as ET

    from dpharness._display import fmt_lower

    name, args = "numpyfake:laplace_claims_2", ["--samples", "20000", "--seed", "4"]
    _, audited, _ = run(capsys, "audit", name, *args, "--json")
    bound = json.loads(audited)["epsilon_lower_bound"]
    shown = fmt_lower(bound)
    _, printed, _ = run(capsys, "audit", name, *args)
    assert shown in printed, (shown, printed)

    code, out, err = run(capsys, "report", name, *args, "--out", str(tmp_path / "r"), "--jobs", "1")
    assert code == 0, (out, err)
    page = (tmp_path / "r" / "numpyfake--laplace_claims_2.md").read_text()
    assert shown in page and "--sequential" not in page, shown

    junit, gated_pages = tmp_path / "gate.xml", tmp_path / "g"
    gate = ["gate", "--target", name, *args, "--jobs", "1", "--no-cache"]
    code, out, _ = run(capsys, *gate, "--junit", str(junit), "--report", str(gated_pages))
    assert code == 0 and f"audit ε_lb={shown} " in out, (shown, out)
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).iter("property")}
    assert float(props["audit.epsilon_lower_bound"]) == bound, (props, bound)
    assert shown in (gated_pages / "numpyfake--laplace_claims_2.md").read_text()
    _, out, _ = run(capsys, *gate, "--json")
    assert json.loads(out)["mechanisms"][0]["audit"]["epsilon_lower_bound"] == bound


def test_gate_timeout_of_a_target_says_what_to_change(numpy_targets, monkeypatch, capsys):
    """A library target whose audit runs out of the gate's time limit is TIMEOUT (not decided), and its
    note names the options: --samples, --timeout, or a budget of its own with register(get_target(...))
    (registered with one: change it there). Deterministic: the stand-in sleeps 1.5 s per call of its sampler, so
    its first call is beyond the 1 s limit (at 0.2 s a call, the few calls of 10^6 samples fitted in 1 s)."""
    import time

    from dpharness.auditors.libraries import _registry, get_target

    def slow(data, size, rng):
        time.sleep(1.5)  # each call beyond the 1 s limit, on any machine
        return _grid_laplace(data, size, rng)

    def build(v):
        return dict(
            fn=slow,
            vectorized=True,
            data=0.0,
            neighbor=1.0,
            epsilon=2.0,
            delta=0.0,
            relation="scalars at absolute difference <= 1",
            claim_source="the test's claim",
        )

    spec = _registry._Spec("numpyfake:slow", "numpy", "numpy", "test", "a slow grid Laplace", (), build)
    monkeypatch.setitem(_registry._SPECS, "numpyfake:slow", spec)
    code, out, _ = run(capsys, "gate", "--target", "numpyfake:slow", "--timeout", "1", "--jobs", "1", "--no-cache")
    assert code == 1 and out.startswith("TIMEOUT  numpyfake:slow"), out
    assert "lower --samples, raise --timeout" in out and "register(get_target('numpyfake:slow'), samples=N" in out, out
    registry.register(get_target("numpyfake:slow"), name="team_slow", samples=1_000_000, timeout=1)
    code, out, _ = run(capsys, "gate", "team_slow", "--jobs", "1", "--no-cache")
    assert code == 1 and "its registered budget): lower samples= or raise timeout= where it is registered" in out, out


def test_register_a_target_with_its_own_name_and_budget(numpy_targets):
    """`register(get_target(T), name=..., samples=...)` registers the target audit-only under that name,
    as a library target, audited with its own budget and its own audit (deterministic)."""
    from dpharness.auditors.libraries import get_target
    from dpharness.pipeline import check

    target = get_target("numpyfake:laplace_claims_2")
    assert registry.register(target, name="team_np_laplace", samples=3_000) is target
    assert registry.audit_only("team_np_laplace") and registry.kind("team_np_laplace") == "library"
    c = check("team_np_laplace", samples=1_000_000, seed=0, workers=1)
    assert c.audit.samples == 3_000 and c.policy.value == "audit-only" and c.passed
    direct = target.audit(samples=3_000, seed=0, workers=1, progress=False)  # one look, as `audit` does
    assert c.audit.epsilon_lower_bound == direct.epsilon_lower_bound
    with pytest.raises(dpharness.ParameterError, match="fixed by a library target"):
        registry.register(target, name="other", claim=dpharness.PureDP(1))


def test_a_witness_of_many_equal_records_is_written_exactly_in_one_short_line():
    """A proof's witness data set writes each run of equal consecutive records once with its count
    (nothing left out: a group-by's witness of 200 records was 200 records long on one line)."""
    import numpy as np

    from dpharness._run import records_text
    from dpharness.core import Witness
    from dpharness.pipeline import describe_witness

    big = np.array([[0.0, 1000.0]] + [[1000.0, 1000.0]] * 199)
    assert records_text(big) == "[[0.0, 1000.0], [1000.0, 1000.0] ×199]"
    assert records_text(np.array([5.0, 5.0, 5.0, 1.0, 5.0, 5.0])) == "[5.0 ×3, 1.0, 5.0, 5.0]"
    assert records_text([0.0, 1.0]) == "[0.0, 1.0]" and records_text(2.5) == "2.5"
    text = describe_witness(Witness(data=big[1:], neighbor=big, loss=1.0, description="extreme pair"))
    assert text == "D=[[1000.0, 1000.0] ×199] D'=[[0.0, 1000.0], [1000.0, 1000.0] ×199] loss=1 — extreme pair"
