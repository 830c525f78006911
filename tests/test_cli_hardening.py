"""The command line's behaviour on a new user's mistakes and on what it prints: ``--module`` errors are
one-line usage errors (exit 2) on every subcommand, the reproduce line carries every option that changes
the result, messages name options the command has, refused parameters do not print huge numbers, an
UNPROVEN proof says its derived bound, and the gate's cache key ignores unrelated distributions."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from dpharness import registry
from dpharness.cli import main

import dp_fakes


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fakes(monkeypatch):
    return dp_fakes.install(monkeypatch, {"fake_coin": dp_fakes.Coin, "fake_coin_bug": dp_fakes.BuggyCoin})


# --------------------------------------------------------------------------- 1. --module errors


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A working directory with a module that raises on import, one with a syntax error and a package."""
    (tmp_path / "hard_raising_mod.py").write_text("x = 1\nraise RuntimeError('boom at import')\n")
    (tmp_path / "hard_syntax_mod.py").write_text("x = 1\ndef f(:\n    pass\n")
    (tmp_path / "hard_pkg").mkdir()
    (tmp_path / "hard_pkg" / "__init__.py").write_text("")
    (tmp_path / "hard_pkg" / "mod.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("hard_raising_mod", "hard_syntax_mod", "hard_pkg", "hard_pkg.mod"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


COMMANDS = [
    ["list"],
    ["prove", "laplace"],
    ["audit", "laplace", "--samples", "1000"],
    ["report"],
    ["gate", "--jobs", "1"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    "module, expect",
    [
        ("", "module=''"),
        ("./hard_pkg/mod.py", "hard_pkg.mod"),
        ("hard_pkg/", "hard_pkg"),
        ("hard_pkg/mod.py", "hard_pkg.mod"),
        ("hard_raising_mod", "RuntimeError: boom at import"),
        ("hard_syntax_mod", "SyntaxError"),
    ],
)
def test_module_errors_are_one_line_usage_errors(project, capsys, command, module, expect):
    code, _, err = run(capsys, *command, "--module", module)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    assert expect in err


@pytest.mark.parametrize(
    "module, location", [("hard_raising_mod", "hard_raising_mod.py:2"), ("hard_syntax_mod", "hard_syntax_mod.py:2")]
)
def test_a_broken_module_keeps_its_message_and_location(project, capsys, module, location):
    code, _, err = run(capsys, "list", "--module", module)
    assert code == 2
    assert location in err, err


def test_module_error_from_the_console_script_has_no_traceback(project):
    proc = subprocess.run(
        [sys.executable, "-m", "dpharness.cli", "gate", "--module", "hard_raising_mod"],
        capture_output=True,
        text=True,
        cwd=project,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- 2. the reproduce line


def _reproduce(out: str) -> list[str]:
    m = re.search(r"\(reproduce: (dpharness [^)]*)\)", out)
    assert m, out
    return shlex.split(m.group(1))[1:]


def test_reproduce_line_carries_set_and_claim_and_reproduces_the_audit(fakes, capsys):
    code, out, _ = run(
        capsys,
        "audit",
        "fake_coin",
        "--set",
        "log_odds=1/4",
        "--claim-epsilon",
        "1/2",
        "--samples",
        "1000",
        "--seed",
        "3",
    )
    argv = _reproduce(out)
    assert "--set" in argv and "log_odds=1/4" in argv, argv
    assert "--claim-epsilon" in argv, argv
    again, out2, _ = run(capsys, *argv)
    assert again == code
    first = [line for line in out.splitlines() if line.startswith("audit:")]
    assert first and first == [line for line in out2.splitlines() if line.startswith("audit:")]


def test_reproduce_line_carries_ideal_numerics(fakes, capsys):
    _, out, _ = run(capsys, "audit", "fake_coin", "--ideal-numerics", "--samples", "1000")
    assert "--ideal-numerics" in _reproduce(out)


def test_reproduce_line_of_a_real_audit_with_set(capsys):
    code, out, _ = run(capsys, "audit", "laplace", "--set", "scale=2", "--samples", "4000")
    argv = _reproduce(out)
    assert argv[:2] == ["audit", "laplace"] and "scale=2" in argv, argv


# --------------------------------------------------------------------------- 3. out-of-memory message


@pytest.mark.parametrize(
    "argv, names, absent",
    [
        (["prove", "laplace"], [], ["--samples", "--jobs"]),
        (["audit", "laplace", "--samples", "1000"], ["--samples"], ["--jobs"]),
    ],
)
def test_out_of_memory_message_names_options_of_the_command(capsys, monkeypatch, argv, names, absent):
    import dpharness.pipeline

    def oom(*a, **k):
        raise MemoryError

    monkeypatch.setattr(dpharness.pipeline, "run_proof", oom)
    monkeypatch.setattr(dpharness.pipeline, "run_audit", oom)
    code, _, err = run(capsys, *argv)
    assert code == 2 and "out of memory" in err
    for option in names:
        assert option in err, err
    for option in absent:
        assert option not in err, err


# --------------------------------------------------------------------------- 4. refused tiny sigma


@pytest.mark.parametrize(
    "argv",
    [
        ["audit", "gaussian", "--set", "sigma=1e-320", "--samples", "2000"],
        ["audit", "laplace", "--set", "scale=1e-320", "--samples", "2000"],
    ],
)
def test_a_parameter_the_sampler_refuses_is_a_short_usage_error(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert not re.search(r"\d{40}", err), err
    assert len(err) < 600, err
    assert argv[3].split("=")[0] in err


def test_error_messages_shorten_huge_numbers(capsys):
    from dpharness.cli import _err

    _err("sigma2=Fraction(1, " + "7" * 900 + ") is outside the range")
    err = capsys.readouterr().err
    assert len(err) < 200 and "is outside the range" in err and "900 digits" in err


# --------------------------------------------------------------------------- 5. UNPROVEN says its bound


def _unproven_check(bound: float, claimed: float):
    from dpharness.pipeline import Check, Policy, ProofSummary, Sandwich

    proof = ProofSummary(
        verdict="UNPROVEN",
        bound=bound,
        bound_expr="19/18",
        delta_bound=None,
        claim="ε = 1 (pure DP)",
        assumptions=(),
        steps=(),
        witness=None,
        notes=(),
    )
    return Check(
        name="m",
        buggy=False,
        claim="ε = 1 (pure DP)",
        policy=Policy.UNPROVEN,
        proof=proof,
        sandwich=Sandwich(None, bound, claimed),
        audit_error="skipped",
    )


def test_gate_line_of_an_unproven_mechanism_says_the_derived_bound():
    from dpharness.cli import _failure_message, _gate_line

    c = _unproven_check(19 / 18, 1.0)
    assert "proof UNPROVEN (derived ε ≤ 1.056 > claim 1)" in _gate_line(c)
    assert "proof UNPROVEN (derived ε ≤ 1.056 > claim 1)" in _failure_message(c, gallery=False)


def test_gate_line_of_an_unproven_mechanism_without_a_finite_bound():
    from dpharness.cli import _gate_line

    line = _gate_line(_unproven_check(float("inf"), 1.0))
    assert "proof UNPROVEN;" in line


def test_prove_prints_a_readable_not_discharged_obligation(capsys):
    code, out, _ = run(capsys, "prove", "laplace", "--set", "scale=18/19")
    assert code == 1
    assert "sign of -1/18" not in out, out
    assert "derived ε bound exceeds the claim by 1/18" in out, out


# --------------------------------------------------------------------------- 6. the cache key

_DIGEST_SCRIPT = """
import sys
from importlib import metadata
import dpharness.cli
from dpharness import registry, _cache
registry.catalog(gallery=None)
_cache.environment_digest()  # the first call imports all of dpharness
before = _cache.environment_digest()

class Dist:
    def __init__(self, name, version):
        self.metadata = {"Name": name}
        self.version = version
        self.requires = None
        self.files = None

    def read_text(self, filename):
        return "xdist\\n" if filename == "top_level.txt" else None

real_dists, real_version = list(metadata.distributions()), metadata.version
metadata.distributions = lambda **k: iter(real_dists + [Dist("pytest-xdist", "99.0"), Dist("unrelated-thing", "1.0")])
metadata.version = lambda name: "99.0" if name.lower() in ("pytest", "pytest-xdist", "unrelated-thing") else real_version(name)
print(before == _cache.environment_digest())
"""


def test_cache_key_ignores_the_test_extra_and_unrelated_distributions(tmp_path):
    """In the gate's own process (not under pytest), installing or upgrading the test extra (pytest,
    pytest-xdist) or an unrelated distribution leaves the environment digest unchanged."""
    proc = subprocess.run(
        [sys.executable, "-c", _DIGEST_SCRIPT], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert proc.stdout.strip() == "True", proc.stdout + proc.stderr


def test_cache_key_follows_the_numeric_libraries(monkeypatch):
    from importlib import metadata

    from dpharness import _cache

    before = _cache.environment_digest()
    version = metadata.version

    def fake_version(name):
        return "0.0.fake" if name.lower() in ("scipy", "mpmath") else version(name)

    monkeypatch.setattr(metadata, "version", fake_version)
    assert _cache.environment_digest() != before


# --------------------------------------------------------------------------- 7. list and targets


def test_list_marks_audit_only_entries(fakes, capsys, monkeypatch):
    monkeypatch.setattr(registry, "_AUDIT_ONLY", {"fake_coin"})
    _, out, _ = run(capsys, "list")
    line = next(ln for ln in out.splitlines() if ln.startswith("fake_coin "))
    assert "audit-only" in line
    _, out, _ = run(capsys, "--json", "list")
    import json

    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["fake_coin"]["audit_only"] is True and rows["fake_coin_bug"]["audit_only"] is False


def test_targets_marks_installed_libraries(capsys):
    from dpharness.auditors.libraries import list_targets

    _, out, _ = run(capsys, "targets")
    assert "installed" in out
    import json

    _, out, _ = run(capsys, "--json", "targets")
    rows = json.loads(out)
    assert rows and all(isinstance(r["installed"], bool) for r in rows)
    assert len(rows) == len(list_targets())


@pytest.mark.parametrize(
    "argv",
    [
        ["audit", "laplace", "--samples", "1e99"],
        ["gate", "--samples", "1e30"],
        ["report", "laplace", "--samples", "2e15"],
    ],
)
def test_samples_beyond_the_cap_are_a_usage_error(capsys, argv):
    """More samples a side than the audit counts exactly (2**50) is exit 2 with the argument named, before
    any work (10**99 reached scipy's betaincinv as an int it could not take: a traceback, exit 1)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--samples" in err and "2**50" in err and "Traceback" not in err


def test_samples_beyond_the_cap_are_refused_by_the_api():
    from dpharness import audit, registry
    from dpharness.errors import ParameterError

    with pytest.raises(ParameterError, match="samples=.* must be <= 1125899906842624"):
        audit(registry.get("laplace"), samples=2**50 + 1)


@pytest.mark.parametrize(
    "argv", [["audit", "laplace", "--workers", "100000"], ["gate", "--jobs", "1e5"], ["report", "--jobs", "5000"]]
)
def test_worker_processes_beyond_four_per_cpu_are_a_usage_error(capsys, argv):
    """A typo such as --workers 100000 would start that many interpreters: exit 2 naming the option."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "worker processes" in err and "Traceback" not in err


def test_worker_processes_beyond_four_per_cpu_are_refused_by_the_api():
    from dpharness import audit
    from dpharness.errors import ParameterError

    with pytest.raises(ParameterError, match="workers=100000 must be <="):
        audit(registry.get("laplace"), samples=1000, workers=100_000)
