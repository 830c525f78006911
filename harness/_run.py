"""Shared plumbing of the CLI, the check pipeline and the reports: building a mechanism from
command-line overrides, the (ε, δ) an audit holds a claim to, the one number formatter, the tool
versions a report records, importing a project's modules and capping a worker's memory. Imports
nothing of the pipeline (:mod:`dpharness.pipeline`) or the reports. Private."""

from __future__ import annotations

import math
import os
import signal
import threading
from fractions import Fraction
from typing import Any, Iterable, Sequence

from .core import AddRemove, ApproxDP, Claim, Mechanism, PureDP, Relation, RenyiDP, Substitute
from .errors import ParameterError

# δ at which a Rényi claim is converted to (ε, δ) for auditing (Mironov 2017, Prop. 3).
RENYI_AUDIT_DELTA = 1e-6
_FORKSERVER_LOCK = threading.Lock()  # one thread at a time sets the preload and starts the server

_RELATIONS = {"add_remove": AddRemove, "addremove": AddRemove, "add-remove": AddRemove, "substitute": Substitute}


def parse_number(name: str, text: str) -> int | Fraction | float:
    """``"3"`` -> 3, ``"1/2"`` -> Fraction(1, 2), ``"0.9"`` -> 0.9 (int, then Fraction, then float)."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    if "/" in text:
        try:
            return Fraction(text)
        except (ValueError, ZeroDivisionError):
            pass
    else:
        try:
            value = float(text)
        except ValueError:
            pass
        else:
            _refuse_out_of_range(name, text, value)
            return value
    raise ParameterError(f"{name}={text!r} is not a number; pass an int (3), a fraction (1/2) or a float (0.9).")


def _refuse_out_of_range(name: str, text: str, value: float) -> None:
    """Refuse a finite decimal that the doubles cannot hold: ``1e-400`` reads as 0.0 and ``1e400`` as inf
    (never silently; ``inf`` and ``nan`` written as such are left to the parameter's own checks)."""
    from decimal import Decimal, InvalidOperation

    try:
        written = Decimal(text)
    except InvalidOperation:
        return
    if not written.is_finite():
        return
    if value == 0 and written != 0:
        raise ParameterError(
            f"{name}={text!r} is below the smallest double and would read as 0.0; pass it as a fraction "
            "a/b (read exactly) or a larger value."
        )
    if math.isinf(value):
        raise ParameterError(
            f"{name}={text!r} is beyond the largest double (about 1.8e308) and would read as inf; pass a smaller value."
        )


def parse_value(key: str, text: str, current: Any) -> Any:
    """Parse ``--set key=text`` guided by the type of the parameter's current value."""
    if isinstance(current, Relation):
        cls = _RELATIONS.get(text.strip().lower())
        if cls is None:
            raise ParameterError(f"{key}={text!r} is not a neighbour relation; pass add_remove or substitute.")
        return cls()
    if isinstance(current, bool):
        low = text.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise ParameterError(f"{key}={text!r} is not a boolean; pass true or false.")
    if isinstance(current, str):
        return text
    return parse_number(key, text)


def parse_sets(items: Iterable[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ParameterError(f"--set {item!r} is not KEY=VALUE; write e.g. --set scale=0.9.")
        pairs.append((key.strip(), value))
    return pairs


def override_claim(claim: Claim, epsilon: Any = None, delta: Any = None) -> Claim:
    """The claim with ``--claim-epsilon``/``--claim-delta`` applied (unchanged when both are None)."""
    if epsilon is None and delta is None:
        return claim
    if isinstance(claim, RenyiDP):
        if delta is None:
            return RenyiDP(claim.alpha, epsilon)
        if epsilon is None:
            return claim.to_approx(float(delta))
        return ApproxDP(epsilon, delta)
    eps = claim.epsilon if epsilon is None else epsilon
    dlt = claim.delta if delta is None else delta
    return PureDP(eps) if dlt == 0 else ApproxDP(eps, dlt)


def build_mechanism(
    name: str, sets: Iterable[str] = (), claim_epsilon: Any = None, claim_delta: Any = None
) -> Mechanism:
    """The registered mechanism ``name`` at its calibrated defaults, with noise parameters overridden
    by ``sets`` (``"KEY=VALUE"``) and the claim KEPT unless ``claim_epsilon``/``claim_delta`` are given:
    overriding ``scale`` never re-calibrates the claim."""
    from .registry import get

    cls = get(name)
    mechanism = cls()
    params = mechanism.noise_parameters()
    changes = {}
    for key, text in parse_sets(sets):
        if key == "claim":
            raise ParameterError("--set claim=... is not allowed; use --claim-epsilon E and --claim-delta D.")
        if key not in params:
            raise ParameterError(
                f"--set {key}={text} names no parameter of {name}; valid keys are {', '.join(sorted(params))}."
            )
        changes[key] = parse_value(key, text, params[key])
    claim = override_claim(mechanism.claim, claim_epsilon, claim_delta)
    if claim is not mechanism.claim:
        changes["claim"] = claim
    return mechanism.replace(**changes) if changes else mechanism


def audit_target(claim: Claim) -> tuple[float, float]:
    """The (ε, δ) an audit holds ``claim`` to: pure and approximate DP as stated; a Rényi claim
    through its (ε + ln(1/δ)/(α−1), δ) conversion at δ = RENYI_AUDIT_DELTA."""
    if isinstance(claim, RenyiDP):
        claim = claim.to_approx(RENYI_AUDIT_DELTA)
    return float(claim.epsilon), float(claim.delta)


def tool_versions() -> dict[str, str]:
    import platform
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for dist, key in (
        ("dpharness", "dpharness"),
        ("numpy", "numpy"),
        ("scipy", "scipy"),
        ("sympy", "sympy"),
        ("z3-solver", "z3"),
        ("matplotlib", "matplotlib"),
    ):
        try:
            versions[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[key] = "not installed"
    return versions


_FLOAT_FAMILIES = ("float structure", "rounding")


def float_hint(
    result: Any, *, exact_noise: bool | None = None, proven: float | None = None, claimed: float | None = None
) -> str | None:
    """One line on the likely cause and fix when a violation was certified by an event of a
    floating-point family (``result.extra["family"]``); None otherwise. Worded as "may": the same
    families also certify plain magnitude differences, e.g. noise too small.

    ``exact_noise`` (see :func:`exact_noise`): the mechanism's noise comes from exact samplers, so the
    float implementation is not the suspect: the hint points to the calibration instead, with the
    proof's derived bound ``proven`` when it exceeds ``claimed`` (a forgotten clamp, a wrong sensitivity)."""
    extra = getattr(result, "extra", None) or {}
    if result is None or getattr(result, "passed", True) or extra.get("family") not in _FLOAT_FAMILIES:
        return None
    if exact_noise:
        derived = ""
        if proven is not None and claimed is not None and math.isfinite(proven) and proven > claimed:
            derived = f"; the proof's derived bound ε ≤ {fmt(proven)} exceeds the claim {fmt(claimed)}"
        return (
            "hint: the noise is exact (integer noise from exact samplers, dpharness.parts), so the leak is not in "
            f"the float implementation{derived}: check the clamp bounds and the sensitivity the noise is "
            "calibrated for (records outside the bounds the scale assumes reach the noise unclamped)."
        )
    return (
        "hint: the certifying event reads the floating-point structure of the outputs (low-order bits, rounding "
        "cells): the leak may be in the float implementation (Mironov 2012). Check with --ideal-numerics "
        "(ideal_numerics=True): if that audit passes, release outputs on a grid from integer noise "
        "(dpharness.parts noise does) or use an exact sampler; if it still fails, the noise itself is too small."
    )


def reproduce_flags(result: Any) -> str:
    """The options of ``dpharness audit`` that reproduce the audit ``result`` (after the mechanism's own
    options): ``--samples`` and ``--seed`` used, and what else fixed the result where it differs from
    their default (``extra["reproduce"]``: the pair search's size, every round; a sequential audit)."""
    extra = getattr(result, "extra", None) or {}
    again = extra.get("reproduce", {})
    flags = f" --samples {result.samples} --seed {result.seed}"
    if "search_samples" in again:
        flags += f" --search-samples {again['search_samples']}"
    if again.get("every_round"):
        flags += " --every-round"
    if "pair" in again:  # the pair audited when the search was not (a search that ran out of time)
        import shlex

        flags += " --pair " + " ".join(shlex.quote(text) for text in again["pair"])
    return flags + (" --sequential" if "sequential" in extra else "")


def pair_as_text(mechanism: Any, data: Any, neighbor: Any) -> tuple[str, str] | None:
    """``(data, neighbor)`` as the JSON texts ``dpharness audit --pair`` reads back to the same pair
    (:func:`pair_from_text`: equal values of the same dtype and shape), or None when JSON cannot carry
    them exactly (objects, NaN or infinite values, a dtype the input spec does not restore)."""
    import json

    import numpy as np

    from ._json import jsonable

    try:
        texts = (json.dumps(jsonable(data)), json.dumps(jsonable(neighbor)))
        again = pair_from_text(mechanism, texts)
    except (ParameterError, ValueError, TypeError):
        return None
    for given, read in zip((data, neighbor), again):
        a, b = np.asarray(given), np.asarray(read)
        if a.dtype != b.dtype or a.shape != b.shape or a.dtype.kind not in "biuf" or not np.array_equal(a, b):
            return None
    return texts


def pair_from_text(mechanism: Any, texts: Sequence[str]) -> tuple[Any, Any]:
    """The pair ``dpharness audit --pair DATA NEIGHBOR`` names (two JSON values: a record, a data set as a
    list of records, or a vector), validated as a neighbouring pair of ``mechanism``'s input spec; an empty
    data set of records of a box is read as having the box's dimension."""
    import json

    import numpy as np

    from .core import RealBox

    spec = mechanism.input_spec
    values = []
    for name, text in zip(("DATA", "NEIGHBOR"), texts):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ParameterError(
                f"--pair {name}={text!r} is not JSON ({exc}); pass e.g. --pair '[0.0]' '[1.0]'."
            ) from None
        arr = np.asarray(value)
        if spec.shape == "dataset" and isinstance(spec.domain, RealBox) and arr.size == 0:
            arr = arr.reshape(0, spec.domain.dim)  # [] is an empty data set of records of the box's dimension
        values.append(arr)
    try:
        return spec.validate_pair(*values)
    except ParameterError as exc:
        raise ParameterError(f"--pair: {exc}") from None


def exact_noise(mechanism: Any) -> bool:
    """Whether ``mechanism``'s samplers are exact, by what it is: the parts prover covers it (a
    declaration from :mod:`dpharness.parts`, or a ``Composite`` that redefines none of its sealed
    methods), whose numeric model is integer noise from exact samplers on exact grids. False for
    anything else, hand-proved exact samplers included (they keep the float hint, worded "may")."""
    from .core import Mechanism

    if not isinstance(mechanism, Mechanism):
        return False
    try:
        from dpharness.mechanisms.parts import Composite, PartsMechanism

        if not isinstance(mechanism, (Composite, PartsMechanism)):
            return False
        import dpharness.proofs  # noqa: F401 - registers the proofs find_proof looks up

        from .proof_registry import find_proof

        coverage = find_proof(mechanism)
    except Exception:  # noqa: BLE001 - no hint is better than a wrong one
        return False
    return coverage.proof is not None and coverage.written_for in (PartsMechanism, Composite)


_RUN = 3  # equal consecutive records written once with their count from this many on


def records_text(x: Any) -> str:
    """A data set (or any value) as its JSON-like list, with every run of at least 3 equal consecutive
    records written once with its count: ``[[0.0, 1000.0], [1000.0, 1000.0] ×199]``. Nothing is left out
    (a proof's witness of 200 records stays exact, in one line a reader can follow)."""
    from ._json import jsonable

    value = jsonable(x)
    if not isinstance(value, list) or len(value) < _RUN:
        return str(value)
    parts: list[str] = []
    start = 0
    for end in range(1, len(value) + 1):
        if end < len(value) and value[end] == value[start]:
            continue
        run = end - start
        parts += [f"{value[start]} ×{run}"] if run >= _RUN else [str(v) for v in value[start:end]]
        start = end
    return "[" + ", ".join(parts) + "]"


def short_repr(x: Any, limit: int = 40) -> str:
    """``repr`` of a value (an array as its list) cut to about ``limit`` characters at an item boundary,
    with the number of items: ``[5.0, 5.0, ... (10 items)]``."""
    import numpy as np

    value = x.tolist() if isinstance(x, np.ndarray) else x
    text = repr(value)
    if len(text) <= limit:
        return text
    if isinstance(value, (list, tuple)):
        shown: list[str] = []
        used = 0
        for item in value:
            r = repr(item)
            if shown and used + len(r) + 2 > limit - 16:
                break
            shown.append(r)
            used += len(r) + 2
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
        return f"{open_}{', '.join(shown)}, ... ({len(value)} items){close}"
    return text[: limit - 3] + "..."


def fmt(x: Any, digits: int = 4) -> str:
    """A number for humans: ``inf``, ``nan``, or ``digits`` significant digits."""
    from ._display import special

    v = special(x)
    return v if isinstance(v, str) else f"{v:.{digits}g}"


def limit_memory(fraction: float) -> None:
    """Worker initializer: cap this process's address space at ``fraction`` of physical memory, so a
    runaway computation raises MemoryError in its own worker instead of waking the OOM killer; one
    BLAS thread (:func:`single_blas_thread`: the pool already has a worker per core); and freed memory
    kept for reuse (:func:`~dpharness._memory.hold_freed_memory`: the process is dpharness's)."""
    import os

    from ._memory import hold_freed_memory

    single_blas_thread()
    hold_freed_memory()

    try:
        import resource

        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        cap = int(total * fraction)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, ValueError, OSError):  # not on this platform: run uncapped
        pass


_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


_WATCH_SECONDS = 1.0  # how often a worker looks whether the process that runs its pool is still there


def watch_parent(parent: int) -> None:
    """A daemon thread that ends this worker once ``parent`` (the process that runs its pool) has ended,
    with its process group when the worker leads one (a gate's worker: the worker and what it started):
    a gate or an audit killed outright (SIGKILL, a CI job cancelled) runs no clean-up, and its workers,
    children of a fork server rather than of it, would otherwise run their tasks to the end. ``parent``
    is known by its pid and its start time (Linux /proc: a pid used again by another process is not
    taken for it); elsewhere by its pid alone."""
    import time

    def started(pid: int) -> str | None:
        """Its start time, "" for a process that has ended and awaits its parent's wait (a zombie)."""
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return "" if fields[0] == "Z" else fields[19]  # fields 3 and 22: the state, the start time

    first = started(parent)

    def alive() -> bool:
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            return False
        except OSError:  # exists, owned by another user: not ours, unless its start time says so
            pass
        return first is None or started(parent) == first != ""

    def watch() -> None:
        while alive():
            time.sleep(_WATCH_SECONDS)
        if hasattr(os, "killpg") and os.getpgid(0) == os.getpid():
            os.killpg(0, signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="dpharness-parent-watch", daemon=True).start()


def single_blas_thread() -> None:
    """Limit the BLAS/OpenMP thread pools of this process (numpy's and scipy's) to one thread. For
    worker processes of a pool sized to the cores: each worker's BLAS would otherwise start a thread
    per core, and two workers on two cores then run the audit's fits about 3x slower.

    The libraries loaded already are limited now (threadpoolctl); for those loaded later (scipy's
    OpenBLAS is loaded with ``scipy.linalg``, which a warm gate never imports) the thread-count
    variables are set to 1, which OpenBLAS and OpenMP read when they load (processes started from
    here inherit them)."""
    import os

    import numpy  # noqa: F401 - load numpy's BLAS, the limit applies to it now
    from threadpoolctl import threadpool_limits

    os.environ.update({k: "1" for k in _BLAS_THREADS})
    threadpool_limits(limits=1)


def load_modules(modules: Iterable[str]) -> list[str]:
    """Import a project's modules (``--module``) so their ``register`` calls run; the working directory
    is importable, as under ``python -m``. Returns the names the modules registered; a module that
    registers nothing is an error (a typo or the wrong package)."""
    import os
    import sys

    from . import registry

    modules = list(modules)
    if modules and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    names: list[str] = []
    for module in modules:
        got = registry.load_module(module)
        if not got:
            raise ParameterError(
                f"--module {module} registered no mechanism; pass the package whose code calls "
                "dpharness.register(...) (or decorates classes with @register)."
            )
        names += [n for n in got if n not in names]
    return names


def forkserver_context(preload: Sequence[str]) -> Any:
    """A multiprocessing context whose workers are forks of a fork server that imported ``preload``
    once (no interpreter start-up and no imports per worker; a worker killed at a limit is replaced at
    the cost of a fork), or ``None`` where the platform has no fork server (Windows). The server forks
    from its single main thread and starts with one BLAS thread, so a worker never inherits a lock
    held by another thread of this process (numpy's, z3's, torch's), as a plain ``fork`` of this
    process could.

    The fork server is one per process and lives as long as this process: the ``preload`` of the
    call that started it is the one imported (the gate's list covers the audits' too); a module a
    later caller needs and the server did not import is imported by each worker on first use."""
    import multiprocessing
    from multiprocessing import forkserver

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    ctx = multiprocessing.get_context("forkserver")
    blas = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    with _FORKSERVER_LOCK:
        # takes effect when the server (re)starts; first, the module that keeps its children from
        # re-running the caller's __main__ and makes them ignore Ctrl-C (dpharness._forkserver_child)
        ctx.set_forkserver_preload(["dpharness._forkserver_child", *preload])
        saved = {k: os.environ.get(k) for k in blas}
        os.environ.update({k: "1" for k in blas})  # the server's numpy starts no BLAS threads
        # the server starts with SIGINT blocked (a mask survives fork and exec), so a Ctrl-C during its
        # start-up and imports never raises there: its first import then ignores SIGINT and unblocks it
        # (the resource tracker of multiprocessing starts the same way). This thread's mask only: a
        # Ctrl-C meanwhile is delivered to this process once the mask is restored, not lost.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # every fork-server platform has it
        try:
            forkserver.ensure_running()  # once per process (again if the server died)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return ctx
