"""The gate cache cannot be forged by whoever can write it (issue 20): every entry carries an HMAC under
a key kept outside the cache directory ($DPHARNESS_CACHE_KEY, else a per-user 0600 key file); an entry
that fails it is ignored, said in one warning line and checked again; a missing, changed or refused key
makes the gate cold, never failing; the secret is never printed.

Fast and deterministic: the issue's scenario runs the real prover and a 10^5-sample audit at seed 0 of a
mechanism whose true ε is twice its claim (the audit certifies ε ≥ 1.8, far from the claim's 1); the rest
uses stand-in Checks or the fake coin of ``dp_fakes``."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
import threading

import pytest

from dpharness import _cache, cli, registry
from dpharness.errors import ParameterError
from dpharness.pipeline import Check, Policy, Timings

import dp_fakes

ENV_KEY = "a-ci-secret-of-sufficient-length-0123456789"


@pytest.fixture(autouse=True)
def key_home(tmp_path, monkeypatch):
    """The per-user key file goes under this test's own directory; no key in the environment."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv(_cache.KEY_ENV, raising=False)
    return tmp_path / "config" / "dpharness" / "cache-key"


def _check(**changes) -> Check:
    base = dict(
        name="m",
        buggy=False,
        claim="ε = 1 (pure DP)",
        parameters={"scale": 50},
        policy=Policy.REFUTED,
        timings=Timings(proof=0.25, audit=None, total=0.5),
    )
    return Check(**{**base, **changes})


def _entry(directory, k) -> str:
    return _cache._path(str(directory), k)


def _forge(path: str) -> None:
    """Flip the entry's verdicts to a pass, as in the issue: policy/proof PROVED, audit passed."""
    with open(path, encoding="utf-8") as fh:
        stored = json.load(fh)
    c = stored["check"]
    c["policy"], c["passed"], c["caught"] = "proved", True, False
    if c.get("proof"):
        c["proof"]["verdict"] = "PROVED"
    if c.get("audit"):
        c["audit"]["passed"] = True
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(stored, fh)


# --------------------------------------------------------------------------- the scenario

TEAM = """
from dpharness import parts as dp, register, AddRemove, PureDP, RealInterval

register(dp.mechanism(name="team_sum", records=RealInterval(0, 100), relation=AddRemove(),
                      steps=dp.clamp(0, 100) >> dp.sum() >> dp.laplace(scale=50), claim=PureDP(1)))
"""


@pytest.fixture
def team(tmp_path, monkeypatch):
    (tmp_path / "team_cache_pkg.py").write_text(textwrap.dedent(TEAM))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield "team_cache_pkg"
    sys.modules.pop("team_cache_pkg", None)
    registry._REGISTRY.pop("team_sum", None)
    registry._BY_MODULE.pop("team_cache_pkg", None)


@pytest.mark.parametrize("with_env_key", [False, True], ids=["key-file", "env-key"])
def test_a_hand_edited_entry_turns_no_gate_green(team, tmp_path, monkeypatch, capsys, with_env_key):
    """The issue: clamp >> sum >> laplace(scale=50) claimed at ε = 1 (true ε = 2) fails the gate; its cache
    entry edited to PROVED/passed is rejected (one warning naming it), the mechanism is proved and audited
    again and the gate still fails; the re-run's own entry is then used."""
    if with_env_key:
        monkeypatch.setenv(_cache.KEY_ENV, ENV_KEY)
    cache = tmp_path / "cache"
    argv = ["gate", "--module", team, "--own", "--jobs", "1", "--samples", "100000", "--cache-dir", str(cache)]
    assert cli.main(argv) == 1
    assert "FAIL  team_sum" in capsys.readouterr().out
    (path,) = [os.path.join(d, f) for d, _, fs in os.walk(cache / "gate") for f in fs if f.endswith(".json")]
    _forge(path)

    assert cli.main(argv) == 1
    out, err = capsys.readouterr()
    assert "FAIL  team_sum" in out and "cached" not in out and "proof REFUTED" in out
    (warning,) = [line for line in err.splitlines() if "warning" in line]
    assert "team_sum" in warning and path in warning and "does not match its signature" in warning
    assert ENV_KEY not in out + err

    assert cli.main(argv) == 1  # the re-run stored a valid entry: warm, and still failing
    out, err = capsys.readouterr()
    assert "FAIL  team_sum" in out and "[cached:" in out and "warning" not in err


# --------------------------------------------------------------------------- entries, one failure at a time


def test_a_stored_entry_verifies_and_round_trips(tmp_path):
    signing = _cache.signing_key(str(tmp_path / "c"))
    _cache.store(str(tmp_path / "c"), "ab" * 32, _check(), signing)
    got = _cache.load(str(tmp_path / "c"), "ab" * 32, signing)
    assert got == _check(cached=True)


@pytest.mark.parametrize(
    "damage, problem",
    [
        ("tamper", "does not match its signature"),
        ("forge", "does not match its signature"),
        ("truncate", "not valid JSON"),
        ("unsign", "carries no signature"),
        ("old-format", "carries no signature"),
    ],
)
def test_an_entry_that_fails_is_ignored_with_one_warning_naming_it(tmp_path, damage, problem):
    directory, k = str(tmp_path / "c"), "cd" * 32
    signing = _cache.signing_key(directory)
    _cache.store(directory, k, _check(), signing)
    path = _entry(directory, k)
    raw = open(path, "rb").read()
    if damage == "tamper":  # one byte of the Check changed: the proof's time 0.25 -> 0.75
        assert raw.count(b"0.25") == 1
        raw = raw.replace(b"0.25", b"0.75")
    elif damage == "truncate":
        raw = raw[: len(raw) // 2]
    else:
        stored = json.loads(raw)
        if damage == "forge":
            stored["check"]["policy"] = "proved"
        elif damage == "unsign":
            del stored["mac"]
        else:
            stored = {"format": 2, "check": stored["check"]}
        raw = json.dumps(stored).encode()
    open(path, "wb").write(raw)
    said = []
    assert _cache.load_all(directory, {"team_sum": k}, signing, warn=said.append) == {}
    assert len(said) == 1 and said[0].count("\n") == 1
    assert "team_sum" in said[0] and path in said[0] and problem in said[0] and "checked again" in said[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_planted_as_an_entry_neither_hangs_nor_passes(tmp_path):
    directory, k = str(tmp_path / "c"), "ef" * 32
    signing = _cache.signing_key(directory)
    os.makedirs(os.path.dirname(_entry(directory, k)))
    os.mkfifo(_entry(directory, k))
    said = []
    assert _cache.load_all(directory, {"m": k}, signing, warn=said.append) == {}
    assert len(said) == 1 and "not a regular file" in said[0]


def test_an_entry_moved_to_another_mechanisms_key_fails(tmp_path):
    """The HMAC covers the cache key: a genuine PASS of one mechanism copied over another's entry fails."""
    directory = str(tmp_path / "c")
    signing = _cache.signing_key(directory)
    _cache.store(directory, "11" * 32, _check(policy=Policy.PROVED), signing)
    os.makedirs(os.path.dirname(_entry(directory, "22" * 32)))
    os.replace(_entry(directory, "11" * 32), _entry(directory, "22" * 32))
    said = []
    assert _cache.load_all(directory, {"other": "22" * 32}, signing, warn=said.append) == {}
    assert len(said) == 1 and "other" in said[0] and "does not match its signature" in said[0]


def test_entries_copied_from_another_key_are_ignored_in_one_line(tmp_path, monkeypatch):
    """Entries signed under another key (copied from another cache, or a rotated key) are not used; all of
    them are said in one line (a key change makes the whole cache cold)."""
    directory = str(tmp_path / "c")
    monkeypatch.setenv(_cache.KEY_ENV, "another-teams-key-0123456789abcdef")
    theirs = _cache.signing_key(directory)
    keys = {f"m{i}": f"{i:02d}" * 32 for i in range(7)}
    for name, k in keys.items():
        _cache.store(directory, k, _check(name=name, policy=Policy.PROVED), theirs)
    monkeypatch.setenv(_cache.KEY_ENV, ENV_KEY)
    ours = _cache.signing_key(directory)
    assert ours.id != theirs.id
    said = []
    assert _cache.load_all(directory, keys, ours, warn=said.append) == {}
    assert len(said) == 1 and "7 cache entries" in said[0] and "m0, m1, m2, m3, m4 and 2 more" in said[0]
    assert "another key" in said[0] and ENV_KEY not in said[0]
    assert _cache.load_all(directory, keys, theirs, warn=said.append).keys() == keys.keys()


# --------------------------------------------------------------------------- the key


def test_the_key_file_is_made_once_private_and_outside_the_cache(tmp_path, key_home):
    assert not key_home.exists()
    first = _cache.signing_key(str(tmp_path / "c"))
    assert first.source == str(key_home)
    assert stat.S_IMODE(key_home.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_home.parent.stat().st_mode) == 0o700
    assert _cache.signing_key(str(tmp_path / "c")) == first
    assert first.secret.decode() not in repr(first) and first.id in repr(first)
    assert not any(f.endswith(".tmp") for f in os.listdir(key_home.parent))


def test_concurrent_gates_agree_on_one_key_file(tmp_path):
    ids, errors = [], []

    def make():
        try:
            ids.append(_cache.signing_key(str(tmp_path / "c")).id)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(ids) == 8 and len(set(ids)) == 1


def test_an_empty_env_key_is_never_the_key(tmp_path, monkeypatch, key_home):
    """An unavailable CI secret expands to an empty value (a fork's pull request): the key file is used,
    never the empty key anybody could sign with."""
    monkeypatch.setenv(_cache.KEY_ENV, "")
    assert _cache.signing_key(str(tmp_path / "c")).source == str(key_home)
    monkeypatch.setenv(_cache.KEY_ENV, ENV_KEY)
    assert _cache.signing_key(str(tmp_path / "c")).source == "$DPHARNESS_CACHE_KEY"


@pytest.mark.parametrize(
    "setup, match",
    [
        ("short-env", "shorter than 16 characters"),
        ("group-readable", "other users may read or write it"),
        ("inside-cache", "inside --cache-dir"),
        ("empty-file", "empty or too short"),
        ("unwritable", "cannot read or make it"),
    ],
)
def test_a_key_that_cannot_be_trusted_is_refused_without_showing_it(tmp_path, monkeypatch, key_home, setup, match):
    directory = str(tmp_path / "c")
    if setup == "short-env":
        monkeypatch.setenv(_cache.KEY_ENV, "hunter2")
    elif setup == "group-readable":
        _cache.signing_key(directory)
        key_home.chmod(0o640)
    elif setup == "inside-cache":
        monkeypatch.setenv("XDG_CONFIG_HOME", directory)
    elif setup == "empty-file":
        key_home.parent.mkdir(parents=True)
        key_home.write_text("")
        key_home.chmod(0o600)
    else:  # a file where the key's folder should be (cannot be made, even by root)
        (tmp_path / "not-a-folder").write_text("")
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "not-a-folder"))
    with pytest.raises(ParameterError, match=match) as info:
        _cache.signing_key(directory)
    assert "hunter2" not in str(info.value)
    if setup == "group-readable":
        assert key_home.read_text().strip() not in str(info.value)
        assert stat.S_IMODE(key_home.stat().st_mode) == 0o640  # left as it is: the user decides


# --------------------------------------------------------------------------- the gate with a changed or refused key


@pytest.fixture
def fakes(monkeypatch):
    return dp_fakes.install(monkeypatch, {"fake_coin": dp_fakes.Coin})


def test_a_changed_key_makes_the_gate_cold_not_failing(fakes, tmp_path, monkeypatch, capsys):
    argv = ["gate", "--jobs", "1", "--samples", "10000", "--cache-dir", str(tmp_path / "c"), "fake_coin"]
    monkeypatch.setenv(_cache.KEY_ENV, ENV_KEY)
    assert cli.main(argv) == 0
    assert cli.main(argv) == 0
    assert "[cached:" in capsys.readouterr().out
    monkeypatch.setenv(_cache.KEY_ENV, ENV_KEY[::-1])  # a wrong (rotated) key
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert "PASS  fake_coin" in out and "cached" not in out
    assert "1 cache entry (fake_coin) signed with another key" in err
    assert ENV_KEY not in out + err and ENV_KEY[::-1] not in out + err
    assert cli.main(argv) == 0  # re-signed under the new key
    out, err = capsys.readouterr()
    assert "[cached:" in out and "warning" not in err


def test_a_refused_key_runs_the_gate_without_the_cache(fakes, tmp_path, monkeypatch, capsys):
    argv = ["gate", "--jobs", "1", "--samples", "10000", "--cache-dir", str(tmp_path / "c"), "fake_coin"]
    monkeypatch.setenv(_cache.KEY_ENV, "hunter2")
    for _ in range(2):
        assert cli.main(argv) == 0
        out, err = capsys.readouterr()
        assert "PASS  fake_coin" in out and "cached" not in out
        assert "shorter than 16 characters" in err and "Running without the cache" in err and "hunter2" not in err
    assert not (tmp_path / "c" / "gate").exists()
