"""The gate's result cache: a mechanism whose inputs have not changed is not proved and audited again.

A result is stored under a SHA-256 key of everything that decides it:

* the mechanism: its name, registry policy (``proof="audit-only"``), parameters, claim,
  for a user's mechanism class what its methods read beyond its module's source (closure cells,
  defaults, module globals: :func:`~dpharness._fingerprint.class_text`) and
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

**Entries are authenticated.** Whoever can write the cache directory (a CI cache restored from storage
other jobs write) must not be able to turn a gate green, so every entry carries an HMAC-SHA256 of its
cache key and its Check under a secret kept *outside* the cache directory (:func:`signing_key`):

* ``$DPHARNESS_CACHE_KEY`` when set and not empty (a CI secret; at least 16 characters), else
* a per-user key file, ``$XDG_CONFIG_HOME/dpharness/cache-key`` (default ``~/.config/...``), made on
  first use with 32 random bytes and mode 0600; refused when other users may read or write it, when it
  is not the user's own, or when it lies inside the cache directory.

An entry is used only when its HMAC verifies (``hmac.compare_digest``) over the key it is stored under,
so an edited, truncated or unsigned entry, or one moved to another mechanism's key, is ignored and
checked again, with one warning line naming it; entries signed under another key (a rotated or a new
key: a CI job without the secret gets a fresh key file) are ignored too, in one warning line. A key that
cannot be had makes the gate run without the cache (cold, not failing). The secret is never printed:
:class:`SigningKey` shows where it came from and a key id (an HMAC of a constant, not the secret).
``durations.json`` beside the entries is not authenticated: a scheduling hint that orders work and
decides no result.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import platform
import stat
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = [
    "DEFAULT_DIR",
    "KEY_ENV",
    "SigningKey",
    "environment_digest",
    "is_empty",
    "key",
    "key_file_path",
    "load",
    "load_all",
    "signing_key",
    "store",
]

DEFAULT_DIR = ".dpharness-cache"
_FORMAT = 3  # 2: a Check's JSON form (dpharness.pipeline); 3: the same, signed (format, key id, HMAC)
KEY_ENV = "DPHARNESS_CACHE_KEY"
_MIN_KEY_CHARS = 16  # a shorter secret could be guessed offline from any entry (HMAC of known content)


def environment_digest() -> str:
    """Loaded module files (path, size, mtime) and installed distributions (name, version)."""
    h = hashlib.sha256()
    h.update(f"format {_FORMAT}; python {platform.python_version()}".encode())
    import importlib.util
    import sysconfig

    installed = tuple(
        {os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    )
    files = set()
    for module in list(sys.modules.values()):  # the project's own modules (installed code: by version below)
        path = getattr(module, "__file__", None)
        if path and not os.path.realpath(path).startswith(installed):
            files.add(path)
    for package in ("dpharness", "dpharness.mechanisms", "dpharness.proofs", "dpharness.auditors"):
        # found, not imported: the proofs and auditors (sympy, z3, scipy.stats) are the workers' imports,
        # and a warm gate never needs them
        spec = importlib.util.find_spec(package)
        for top in (spec.submodule_search_locations or []) if spec is not None else []:
            # all of dpharness, imported yet or not, subpackages too (auditors.families, ...): the same
            # files whatever this process loaded
            for root, dirs, entries in os.walk(top):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
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


def key(
    mechanism: Any,
    *,
    name: str,
    audit_only: bool,
    environment: str,
    samples: int,
    seed: int,
    timeout: float | None,
    time_budget: float | None = None,
) -> str:
    from ._fingerprint import class_text
    from ._json import jsonable

    payload = {
        "name": name,
        "audit_only": audit_only,
        "class": f"{type(mechanism).__module__}.{type(mechanism).__qualname__}",
        "parameters": jsonable(mechanism.noise_parameters()),
        "claim": mechanism.claim.describe(),
        "source": mechanism.source_hash(),
        "reads": hashlib.sha256(class_text(type(mechanism)).encode()).hexdigest(),  # a user class's globals
        "environment": environment,
        "samples": samples,
        "seed": seed,
        "timeout": timeout,
        "time_budget": time_budget,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def is_empty(directory: str) -> bool:
    """No gate entry has been stored under ``directory`` (a cold cache: every check is going to run).
    A hint for starting work early; decides no result."""
    try:
        with os.scandir(os.path.join(directory, "gate")) as entries:
            return not any(e.is_dir() for e in entries)
    except OSError:
        return True


def _path(directory: str, k: str) -> str:
    return os.path.join(directory, "gate", k[:2], k + ".json")


# --------------------------------------------------------------------------- the signing key


@dataclass(frozen=True)
class SigningKey:
    """The secret that signs cache entries. ``source``: ``$DPHARNESS_CACHE_KEY`` or the key file's path;
    ``id``: an HMAC of a constant under the secret (tells keys apart, reveals nothing of it). The secret
    itself is in no repr, message or file beside the key file."""

    source: str
    secret: bytes = field(repr=False)

    def __repr__(self) -> str:
        return f"SigningKey(source={self.source!r}, id={self.id!r})"

    @property
    def id(self) -> str:
        return hmac.new(self.secret, b"dpharness gate cache key id", hashlib.sha256).hexdigest()[:16]

    def mac(self, k: str, check: Any) -> str:
        """HMAC-SHA256 of the entry format, the cache key ``k`` and the Check's JSON form ``check``
        (canonical: sorted keys, no spaces), so an entry verifies only under the key it was stored at."""
        body = json.dumps(check, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        message = f"dpharness gate cache entry\0format {_FORMAT}\0{k}\0".encode() + body.encode()
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()


def key_file_path() -> str:
    """The per-user key file: ``$XDG_CONFIG_HOME/dpharness/cache-key`` (``~/.config`` by default)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "dpharness", "cache-key")


def signing_key(directory: str) -> SigningKey:
    """The key that signs and verifies the entries under the cache ``directory``: ``$DPHARNESS_CACHE_KEY``
    when set and not empty, else the per-user key file (made on first use, mode 0600). Raises
    :class:`~dpharness.errors.ParameterError` (the gate then runs without the cache) for a key shorter than
    16 characters, a key file others may read or write, not the user's own, inside ``directory``, or that
    cannot be made. No message contains the secret."""
    from .errors import ParameterError

    value = os.environ.get(KEY_ENV, "")
    if value.strip():  # empty, as a CI secret is on a fork's pull request: the key file, never the empty key
        if len(value) < _MIN_KEY_CHARS:
            raise ParameterError(
                f"${KEY_ENV} is shorter than {_MIN_KEY_CHARS} characters (its value is not shown): a short key "
                "could be guessed from any cache entry. Set it to a long random secret, e.g. the output of "
                "python -c 'import secrets; print(secrets.token_hex(32))'."
            )
        return SigningKey(f"${KEY_ENV}", value.encode())
    path = key_file_path()
    real, cache = os.path.realpath(path), os.path.realpath(directory)
    if real == cache or real.startswith(cache.rstrip(os.sep) + os.sep):
        raise ParameterError(
            f"cache key file {path}: lies inside --cache-dir {directory}, where whoever writes the "
            f"cache could read or replace it; set ${KEY_ENV} or XDG_CONFIG_HOME elsewhere."
        )
    try:
        try:
            secret = _read_key_file(path)
        except FileNotFoundError:
            _make_key_file(path)
            secret = _read_key_file(path)
    except OSError as exc:
        raise ParameterError(
            f"cache key file {path}: cannot read or make it ({exc.strerror or exc}); set "
            f"${KEY_ENV} or make {os.path.dirname(path)} a writable folder."
        ) from None
    return SigningKey(path, secret)


def _read_key_file(path: str) -> bytes:
    from .errors import ParameterError

    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if os.name == "posix":
            if st.st_uid != os.getuid():
                raise ParameterError(
                    f"cache key file {path}: owned by another user (uid {st.st_uid}); remove it "
                    f"(a new one is made) or set ${KEY_ENV}."
                )
            if st.st_mode & 0o077:
                raise ParameterError(
                    f"cache key file {path}: other users may read or write it (mode "
                    f"{st.st_mode & 0o777:o}); run chmod 600 {path}, or remove it (a new one is "
                    "made and the cache starts cold)."
                )
        secret = os.read(fd, 4096).strip()
    finally:
        os.close(fd)
    if len(secret) < 2 * _MIN_KEY_CHARS:
        raise ParameterError(
            f"cache key file {path}: empty or too short; remove it (a new one is made) or set ${KEY_ENV}."
        )
    return secret


def _make_key_file(path: str) -> None:
    """Write 32 random bytes (hex) to ``path``, mode 0600, without overwriting a key another process made
    meanwhile (written beside it, then hard-linked into place)."""
    import secrets

    folder = os.path.dirname(path)
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, (secrets.token_hex(32) + "\n").encode())
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another gate made it first: use theirs
        except OSError:  # no hard links on this file system: create in place, never over an existing key
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                return
            with open(tmp, "rb") as fh, os.fdopen(fd, "wb") as out:
                out.write(fh.read())
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


# --------------------------------------------------------------------------- entries

_ANOTHER_KEY = "signed with another key"
_MAX_ENTRY_BYTES = 64 << 20  # a stored Check is a few kB to a few MB (an audit's pairs and counts)


def _read(directory: str, k: str, signing: SigningKey) -> tuple[Any, str | None]:
    """(the Check stored under ``k``, None) when its signature verifies; (None, None) when there is no
    entry (or an authentic one that cannot be used); (None, what is wrong) for an entry that fails."""
    from dataclasses import replace

    from .pipeline import Check

    try:  # non-blocking: a FIFO or device planted at the entry's name must not hang the gate
        fd = os.open(_path(directory, k), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_ENTRY_BYTES:
            return None, "is not a regular file of at most 64 MB"
        try:
            raw = fh.read()
        except OSError as exc:
            return None, f"cannot be read ({exc.strerror or exc})"
    try:
        stored = json.loads(raw)
    except ValueError:
        return None, "is not valid JSON (truncated or edited)"
    if not isinstance(stored, dict) or stored.get("format") != _FORMAT or not isinstance(stored.get("mac"), str):
        return None, "carries no signature"
    if stored.get("key_id") != signing.id:
        return None, _ANOTHER_KEY
    if not hmac.compare_digest(stored["mac"].encode(), signing.mac(k, stored.get("check")).encode()):
        return None, "does not match its signature (changed after it was written)"
    try:  # authentic from here on
        result = Check.from_json(stored["check"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, None
    return (None if result.error is not None else replace(result, cached=True)), None


def load(directory: str, k: str, signing: SigningKey) -> Any:
    """The :class:`~dpharness.pipeline.Check` stored under ``k`` (marked ``cached``) when its signature
    verifies under ``signing``, else None (nothing stored, or an entry that fails: see :func:`load_all`)."""
    return _read(directory, k, signing)[0]


def load_all(
    directory: str, keys: dict[str, str], signing: SigningKey, warn: Callable[[str], Any] | None = None
) -> dict[str, Any]:
    """The verified Checks stored under ``keys`` (mechanism name -> cache key), by name. Every entry that
    fails is left out (its mechanism is checked again) and said on ``warn`` (default: stderr): one line
    per edited, truncated or unsigned entry, naming it; one line for all entries signed with another key."""
    warn = warn or sys.stderr.write
    found, other = {}, []
    for name, k in keys.items():
        result, problem = _read(directory, k, signing)
        if result is not None:
            found[name] = result
        elif problem == _ANOTHER_KEY:
            other.append(name)
        elif problem is not None:
            warn(
                f"dpharness: warning: cache entry for {name} ({_path(directory, k)}) {problem}: ignored, "
                f"{name} is checked again.\n"
            )
    if other:
        shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        warn(
            f"dpharness: warning: {len(other)} cache {'entry' if len(other) == 1 else 'entries'} ({shown}) "
            f"signed with another key than {signing.source} (a new or changed key): ignored, checked again.\n"
        )
    return found


def store(directory: str, k: str, result: Any, signing: SigningKey) -> None:
    """Store the Check ``result`` under ``k``, signed with ``signing`` (not when it has an error: a crash is
    re-run). The signature covers the JSON form as :func:`load` reads it back."""
    if result.error is not None:
        return
    check = json.loads(json.dumps(result.to_json()))  # e.g. integer dict keys become strings, as on reading
    _write_json(
        _path(directory, k), {"format": _FORMAT, "key_id": signing.id, "mac": signing.mac(k, check), "check": check}
    )


_WARNED_DIRS: set[str] = set()  # directories already warned about in this process (one line each)


def _warn_unwritable(directory: str, exc: OSError) -> None:
    """One warning line per directory per process: the cache could not be written there, and why."""
    where = os.path.abspath(directory)
    if where in _WARNED_DIRS:
        return
    _WARNED_DIRS.add(where)
    why = exc.strerror or (os.strerror(exc.errno) if exc.errno else "") or str(exc) or type(exc).__name__
    sys.stderr.write(
        f"dpharness: warning: cannot write the cache in {where} ({why}): results are not cached; the gate goes on.\n"
    )


def _write_json(path: str, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (a temporary file, then a rename); a directory that
    cannot be written (read-only, a full disk) is skipped with one warning line: the gate runs without
    the cache. The temporary file never outlives the call, whatever the write raised."""
    import secrets

    tmp = path + f".{os.getpid()}.{secrets.token_hex(4)}.tmp"
    replaced = False
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # a new file, never through a link planted at the temporary name by whoever can write the cache
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "w", encoding="utf-8") as fh:
            json.dump(obj, fh, sort_keys=True)
        os.replace(tmp, path)
        replaced = True
    except OSError as exc:
        _warn_unwritable(os.path.dirname(path) or ".", exc)
    finally:
        if not replaced:
            try:
                os.unlink(tmp)
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


# Seconds of each built-in's check at the gate's defaults (10^6 samples a side, seed 0): CPU seconds of
# each check alone in one process (`check(name, samples=10**6, seed=0, workers=1)`, load 3.5 on 2 cores,
# 2026-11-26, after the sparse vector samplers drew only the noise they use). The starting order of a
# cold gate, before this cache has timed anything: the longest check (numerical_sparse_vector) starts
# first. Only the order matters.
_BUILTIN_SECONDS = {
    "numerical_sparse_vector": 5.75,
    "noisy_pearson": 3.73,
    "noisy_histogram": 2.83,
    "noisy_std": 2.77,
    "report_noisy_max_laplace": 1.80,
    "clamped_mean": 1.76,
    "sparse_vector": 1.62,
    "gaussian": 1.09,
    "snapping": 1.07,
    "rappor": 0.98,
    "gaussian_rdp": 0.92,
    "median": 0.83,
    "clamped_sum": 0.78,
    "clamped_count": 0.76,
    "laplace": 0.73,
    "truncated_geometric": 0.72,
    "exponential": 0.71,
    "report_noisy_max_exponential": 0.64,
    "discrete_gaussian": 0.62,
    "discrete_laplace": 0.44,
    "randomized_response": 0.11,
    "warner_rr": 0.05,
}


def longest_first(names: list[str], known: dict[str, float]) -> list[str]:
    """``names`` in the order to start them on a pool: the longest first (the pool's last finisher is
    then a short one), by ``known`` (durations of earlier runs), else for a built-in by its measured
    ``_BUILTIN_SECONDS``; names never timed before all of those (they may be long), ties in the given
    order."""
    known = {**{n: s for n, s in _BUILTIN_SECONDS.items() if _is_builtin(n)}, **known}
    return sorted(names, key=lambda n: (n in known, -known.get(n, 0.0)))


def _is_builtin(name: str) -> bool:
    """``name`` is registered by dpharness itself (a team's module may register its own mechanism
    under a built-in's name only if the registry allows it; its timing is then learned here)."""
    from . import registry

    try:
        return registry.get(name).__module__.startswith("dpharness.")
    except Exception:  # noqa: BLE001 - not registered: no estimate
        return False


def record_durations(directory: str, seconds: dict[str, float]) -> None:
    """Merge ``seconds`` (name -> seconds of a check that ran) into the hints; a read-only directory
    is skipped."""
    _write_json(_durations_path(directory), {**durations(directory), **{k: float(v) for k, v in seconds.items()}})
