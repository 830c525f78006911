"""The gate's result cache: a mechanism whose inputs have not changed is not proved and audited again.

A result is stored under a SHA-256 key of everything that decides it:

* the mechanism: its name, registry policy (``proof="audit-only"``), parameters, claim and
  ``source_hash()`` (its module's source; for a parts declaration, the structure and the source of
  every post-processing function);
* the code it may run: every source file of dpharness and every module loaded in the gate's process
  from outside the Python installation (the project's modules, as ``--module`` imports them), by
  path, size and modification time; every installed distribution by name and version (numpy, scipy,
  a third-party DP library, ...). A project module imported only while a mechanism runs is not seen:
  import it from the registered module, or pass ``--no-cache``;
* the run: samples, seed, per-phase timeout, the Python version.

Any change is a miss (the mechanism is checked again); only results without an error are stored.
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
_FORMAT = 1


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
        for root in importlib.import_module(package).__path__:  # all of dpharness, imported yet or not
            for entry in os.listdir(root):
                if entry.endswith(".py"):
                    files.add(os.path.join(root, entry))
    for path in sorted(files):
        try:
            st = os.stat(path)
        except OSError:
            continue
        h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata["Name"])
    h.update("\n".join(dists).encode())
    return h.hexdigest()


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


def load(directory: str, k: str) -> dict | None:
    try:
        with open(_path(directory, k), encoding="utf-8") as fh:
            result = json.load(fh)
    except (OSError, ValueError):
        return None
    return result if isinstance(result, dict) and result.get("error") is None else None


def store(directory: str, k: str, result: dict) -> None:
    if result.get("error") is not None:
        return
    path = _path(directory, k)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(result, fh, sort_keys=True, default=str)
        os.replace(tmp, path)
    except OSError:  # a read-only checkout: run without the cache
        pass
