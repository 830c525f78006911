"""The gate's result cache: a mechanism whose inputs have not changed is not proved and audited again.

A result is stored under a SHA-256 key of everything that decides it:

* the mechanism: its name, registry policy (``proof="audit-only"``), parameters, claim and
  ``source_hash()`` (its module's source; for a parts declaration, the structure and the source of
  every post-processing function);
* the code it may run: every source file of dpharness and every module loaded in the gate's process
  from outside the Python installation (the project's modules, as ``--module`` imports them), by
  path, size and modification time; by name and version, dpharness's run-time requirements
  (transitively: numpy, scipy, sympy, mpmath, z3-solver, ...) and the distributions of the packages
  loaded in the gate's process (a third-party DP library the project imports), not optional extras
  such as pytest. A project module or library imported only while a mechanism runs is not seen:
  import it from the registered module, or pass ``--no-cache``;
* the run: samples, seed, per-phase timeout, the Python version.

Any change is a miss (the mechanism is checked again); only results without an error are stored,
as the :class:`~dpharness.pipeline.Check`'s JSON form (``Check.to_json``/``Check.from_json``).
``dpharness gate --no-cache`` ignores the cache; ``--report`` always runs (pages are written by runs).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from typing import Any

__all__ = ["DEFAULT_DIR", "environment_digest", "key", "load", "store"]

DEFAULT_DIR = ".dpharness-cache"
_FORMAT = 2  # 2: a Check's JSON form (dpharness.pipeline)


def environment_digest() -> str:
    """Loaded module files (path, size, mtime) and installed distributions (name, version)."""
    from importlib import metadata

    h = hashlib.sha256()
    h.update(f"format {_FORMAT}; python {platform.python_version()}".encode())
    import importlib
    import sysconfig

    installed = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep
                       for k in ("stdlib", "platstdlib", "purelib", "platlib")})
    files = set()
    for module in list(sys.modules.values()):  # the project's own modules (installed code: by version below)
        path = getattr(module, "__file__", None)
        if path and not os.path.realpath(path).startswith(installed):
            files.add(path)
    for package in ("dpharness", "dpharness.mechanisms", "dpharness.proofs", "dpharness.auditors"):
        for top in importlib.import_module(package).__path__:  # all of dpharness, imported yet or not,
            for root, dirs, entries in os.walk(top):            # subpackages too (auditors.families, ...): the
                dirs[:] = [d for d in dirs if d != "__pycache__"]  # same files whatever this process loaded
                files.update(os.path.join(root, e) for e in entries if e.endswith(".py"))
    for path in sorted(files):
        try:
            st = os.stat(path)
        except OSError:
            continue
        h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    h.update("\n".join(f"{name}=={version}" for name, version in _result_distributions()).encode())
    return h.hexdigest()


def _requirement_names(dist: str) -> list[str]:
    """The distributions ``dist`` requires to run (its requirements outside any extra)."""
    import re
    from importlib import metadata

    try:
        requires = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return []
    names = []
    for req in requires:
        if "extra" in req.partition(";")[2]:
            continue  # an optional extra (dpharness's test extra: pytest, pytest-xdist): decides no result
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        if m:
            names.append(m.group(1))
    return names


def _normal(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


_LOADED_TOPS: dict[str, None] = {}
_FIRST_TOPS: list[str] = []


def _result_distributions() -> list[tuple[str, str]]:
    """(name, version) of the distributions that can change a gate result: dpharness, what it requires
    to run, transitively (numpy, scipy, sympy and its mpmath, z3-solver, hypothesis, ...), and the
    distributions of the packages loaded in this process from outside the standard library (a project's
    own imports, e.g. a third-party DP library, and their requirements). Not: optional extras (pytest,
    pytest-xdist) and other installed distributions the computation never imports, so installing the test
    extra leaves the key unchanged."""
    from importlib import metadata

    try:
        by_package = metadata.packages_distributions()
    except Exception:  # noqa: BLE001 - a broken metadata entry: key on dpharness's own requirements only
        by_package = {}
    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    wanted = ["dpharness"]
    for top in {name.partition(".")[0] for name in list(sys.modules)}:
        if top not in stdlib and not top.startswith("_"):
            _LOADED_TOPS.setdefault(top, None)
    # the packages seen loaded so far in this process, by the first time they were seen: a package a
    # computation imports opportunistically later (typing_extensions) does not change the next key
    # computed in the same process; a package loaded by a project's module is seen when it is imported
    # before the key is computed (the gate imports --module packages first)
    for top in _FIRST_TOPS or _LOADED_TOPS:
        wanted += by_package.get(top, [])
    if not _FIRST_TOPS:
        _FIRST_TOPS.extend(_LOADED_TOPS)
    seen: dict[str, tuple[str, str]] = {}
    while wanted:
        name = wanted.pop()
        key = _normal(name)
        if key in seen:
            continue
        try:
            seen[key] = (key, metadata.version(name))
        except metadata.PackageNotFoundError:
            seen[key] = (key, "not installed")
            continue
        wanted += _requirement_names(name)
    return sorted(seen.values())


def key(mechanism: Any, *, name: str, audit_only: bool, environment: str, samples: int, seed: int,
        timeout: float | None) -> str:
    from ._json import jsonable

    payload = {
        "name": name, "audit_only": audit_only, "class": f"{type(mechanism).__module__}.{type(mechanism).__qualname__}",
        "parameters": jsonable(mechanism.noise_parameters()), "claim": mechanism.claim.describe(),
        "source": mechanism.source_hash(), "environment": environment,
        "samples": samples, "seed": seed, "timeout": timeout,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _path(directory: str, k: str) -> str:
    return os.path.join(directory, "gate", k[:2], k + ".json")


def load(directory: str, k: str) -> Any:
    """The :class:`~dpharness.pipeline.Check` stored under ``k`` (marked ``cached``), or None: nothing
    stored, unreadable, of another format, or a check with an error."""
    from dataclasses import replace

    from .pipeline import Check

    try:
        with open(_path(directory, k), encoding="utf-8") as fh:
            stored = json.load(fh)
        result = Check.from_json(stored["check"]) if stored.get("format") == _FORMAT else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return None if result is None or result.error is not None else replace(result, cached=True)


def store(directory: str, k: str, result: Any) -> None:
    """Store the Check ``result`` under ``k`` (not when it has an error: a crash is re-run)."""
    if result.error is not None:
        return
    _write_json(_path(directory, k), {"format": _FORMAT, "check": result.to_json()})


def _write_json(path: str, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (a temporary file, then a rename); a directory that
    cannot be written (a read-only checkout) is skipped: the gate runs without the cache."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass


# --------------------------------------------------------------------------- scheduling hints

def _durations_path(directory: str) -> str:
    return os.path.join(directory, "durations.json")


def durations(directory: str) -> dict[str, float]:
    """Seconds each mechanism's check took when it last ran (by name; empty when none is known).
    A scheduling hint only: it orders the work, never decides a result."""
    try:
        with open(_durations_path(directory), encoding="utf-8") as fh:
            got = json.load(fh)
        return {str(k): float(v) for k, v in got.items()} if isinstance(got, dict) else {}
    except (OSError, ValueError, TypeError):
        return {}


def longest_first(names: list[str], known: dict[str, float]) -> list[str]:
    """``names`` in the order to start them on a pool: the longest known first (the pool's last
    finisher is then a short one), names never timed before all of those (they may be long), ties in
    the given order."""
    return sorted(names, key=lambda n: (n in known, -known.get(n, 0.0)))


def record_durations(directory: str, seconds: dict[str, float]) -> None:
    """Merge ``seconds`` (name -> seconds of a check that ran) into the hints; a read-only directory
    is skipped."""
    _write_json(_durations_path(directory), {**durations(directory), **{k: float(v) for k, v in seconds.items()}})
