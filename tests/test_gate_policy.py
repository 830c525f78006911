"""The gate's pass rule on a project's own mechanisms (``gate --module PKG --own``):

* declared from parts and PROVED, audit passed: PASS; the same with one branch's noise cut 10%: FAIL;
* PROVED but the audit certifies a violation (a wrong registered proof): FAIL;
* no proof, opted in with ``register(m, proof="audit-only")``: PASS on a passing audit, FAIL on a
  certified violation; not opted in: FAIL, and the line says which case applies.

Statistical: each audit runs 2·10^5 samples a side at seed 0 and confidence 0.95; a correct
mechanism fails its audit with probability at most 0.05 (the seed is fixed, so the outcome is too).
"""

from __future__ import annotations

import sys
import textwrap

import pytest

from dpharness import cli, registry

PACKAGE = '''
import dataclasses
import numpy as np
from dpharness import parts as dp, register, proves, Mechanism, InputSpec, IntegerRange, AddRemove, PureDP, RealInterval
from dpharness.mechanisms.laplace import Laplace

def mean(name, sum_scale):
    return dp.mechanism(
        name=name, records=RealInterval(0, 100), relation=AddRemove(),
        steps=dp.clamp(0, 100) >> dp.compose(dp.sum() >> dp.laplace(scale=sum_scale), dp.count() >> dp.laplace(scale=2))
              >> dp.post(lambda s, c: s / max(c, 1)),
        claim=PureDP(1))

register(mean("gp_mean", 200))
register(mean("gp_mean_cut", 180))

@dataclasses.dataclass(frozen=True, kw_only=True)
class Count(Mechanism):
    """Two-sided geometric count with ratio exp(-1/scale); claims ε = 1."""
    name = "gp_count"
    scale: float = 1.0
    claim: PureDP = PureDP(1)

    @property
    def input_spec(self):
        return InputSpec(IntegerRange(0, 9), AddRemove(), "dataset")

    def _sample(self, data, size, rng):
        p = 1 - np.exp(-1 / self.scale)
        return len(data) + rng.geometric(p, size) - rng.geometric(p, size)

    def _law(self, data):
        raise NotImplementedError("opaque")

    def example_pair(self):
        return np.array([1]), np.array([1, 2])

@dataclasses.dataclass(frozen=True, kw_only=True)
class CountOptedIn(Count):
    name = "gp_count_opted_in"

@dataclasses.dataclass(frozen=True, kw_only=True)
class CountBroken(Count):
    name = "gp_count_broken"
    scale: float = 0.5

register(Count)
register(CountOptedIn, proof="audit-only")
register(CountBroken, proof="audit-only")

@dataclasses.dataclass(frozen=True, kw_only=True)
class LessNoise(Laplace):
    """A Laplace whose sampler adds half the noise, with a (wrong) proof registered for it."""
    name = "gp_wrongly_proved"

    def _sample(self, data, size, rng):
        return Laplace._sample(self.replace(scale=self.scale / 2), data, size, rng)

@proves(LessNoise)
def _wrong(m):
    import dpharness
    return dpharness.prove(Laplace(scale=m.scale, sensitivity=m.sensitivity, claim=m.claim))

register(LessNoise)
'''

EXPECTED = {
    "gp_mean": True,
    "gp_mean_cut": False,
    "gp_count": False,
    "gp_count_opted_in": True,
    "gp_count_broken": False,
    "gp_wrongly_proved": False,
}


@pytest.fixture
def package(tmp_path, monkeypatch):
    (tmp_path / "gate_policy_pkg.py").write_text(textwrap.dedent(PACKAGE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield "gate_policy_pkg"
    sys.modules.pop("gate_policy_pkg", None)
    for name in EXPECTED:
        registry._REGISTRY.pop(name, None)
        registry._AUDIT_ONLY.discard(name)
    registry._BY_MODULE.pop("gate_policy_pkg", None)


@pytest.mark.statistical
def test_gate_pass_rule_on_a_projects_own_mechanisms(package, capsys):
    code = cli.main(["gate", "--module", package, "--own", "--jobs", "1", "--samples", "200000"])
    out = capsys.readouterr().out
    lines = {line.split()[1].rstrip(":"): line for line in out.splitlines() if line.startswith(("PASS", "FAIL"))}
    assert set(lines) == set(EXPECTED), out
    for name, ok in EXPECTED.items():
        assert lines[name].startswith("PASS" if ok else "FAIL"), lines[name]
    assert code == 1
    assert "no proof: audited only (opted in" in lines["gp_count_opted_in"]
    assert "not opted in" in lines["gp_count"]
    assert "proof PROVED" in lines["gp_wrongly_proved"] and "VIOLATION" in lines["gp_wrongly_proved"]
    assert "proof UNPROVEN" in lines["gp_mean_cut"]


def test_gate_only_named_mechanisms_pass(package, capsys):
    code = cli.main(["gate", "--module", package, "--jobs", "1", "--samples", "200000", "gp_mean", "gp_count_opted_in"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2/2 mechanisms passed (1 proved and audited, 1 audited only: no proof" in out, out


@pytest.mark.parametrize(
    "argv, match",
    [
        (["gate", "--module", "os"], "registered no mechanism"),
        (["gate", "randomized-response"], "did you mean 'randomized_response'"),
        (["gate", "--own"], "--own"),
    ],
)
def test_gate_usage_errors(argv, match, capsys):
    assert cli.main(argv) == 2
    assert match in capsys.readouterr().err


def test_unchanged_mechanisms_come_from_the_cache_and_any_change_reruns(package, tmp_path, capsys):
    """A second gate with nothing changed reuses the stored result; editing the project's module, or
    --no-cache, runs it again."""
    import os

    argv = ["gate", "--module", package, "--jobs", "1", "--samples", "200000", "gp_mean"]
    assert cli.main(argv) == 0
    assert "cached" not in capsys.readouterr().out
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "[cached:" in out and "1 unchanged, from the cache" in out
    assert cli.main(argv + ["--no-cache"]) == 0
    assert "cached" not in capsys.readouterr().out
    module = tmp_path / "gate_policy_pkg.py"
    os.utime(module, ns=(module.stat().st_atime_ns, module.stat().st_mtime_ns + 10**9))
    assert cli.main(argv) == 0
    assert "cached" not in capsys.readouterr().out


def test_an_audit_only_builtin_with_a_derivation_says_its_proof_is_unproven():
    """A built-in registered audit-only because its derivation is of continuous noise while its code draws
    numpy's float noise (report noisy max): its gate line says the proof is UNPROVEN, with the derived bound,
    and that it is audited only; it does not say "no proof"."""
    import dpharness

    c = dpharness.check("report_noisy_max_laplace", samples=20_000)
    line = str(c)
    assert c.passed and line.startswith("PASS  report_noisy_max_laplace: proof UNPROVEN (derived ε ≤ 1)"), line
    assert "audited only (opted in with proof='audit-only')" in line and "no proof" not in line


def test_a_renyi_claims_gate_line_gives_its_bound_in_the_audits_units():
    """The audit holds a Rényi claim to its (ε, δ) conversion at δ = 1e-6; the proven Rényi bound is said
    in those units too, so the certified lower bound is not read against the Rényi ε."""
    import dpharness

    c = dpharness.check(dpharness.get("gaussian_rdp")(), samples=20_000, seed=0)
    assert "proof PROVED (Rényi ε ≤ 1; ε ≤ 14.82 at δ = 1e-06)" in c.line(), c.line()
    assert c.sandwich.lower <= c.sandwich.proven <= c.sandwich.claimed
