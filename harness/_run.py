"""Shared plumbing of the CLI, the gate and the reports: building a mechanism from command-line
overrides, the (ε, δ) an audit holds a claim to, checking one mechanism (prove + audit) and the
tool versions a report records. Private: the public surface is :mod:`dpharness.cli` and
:mod:`dpharness.report`."""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
import traceback
from fractions import Fraction
from typing import Any, Iterable

from .core import AddRemove, ApproxDP, Claim, Mechanism, PureDP, Relation, RenyiDP, Substitute
from .errors import DPHarnessError, ParameterError

# δ at which a Rényi claim is converted to (ε, δ) for auditing (Mironov 2017, Prop. 3).
RENYI_AUDIT_DELTA = 1e-6

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
            return float(text)
        except ValueError:
            pass
    raise ParameterError(f"{name}={text!r} is not a number; pass an int (3), a fraction (1/2) or a float (0.9).")


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


def build_mechanism(name: str, sets: Iterable[str] = (), claim_epsilon: Any = None,
                    claim_delta: Any = None) -> Mechanism:
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
    for dist, key in (("dpharness", "dpharness"), ("numpy", "numpy"), ("scipy", "scipy"), ("sympy", "sympy"),
                      ("z3-solver", "z3"), ("matplotlib", "matplotlib")):
        try:
            versions[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[key] = "not installed"
    return versions


def fmt(x: Any, digits: int = 4) -> str:
    """A number for humans: ``inf``, ``nan``, or ``digits`` significant digits."""
    if x is None:
        return "—"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    return f"{v:.{digits}g}"


def limit_memory(fraction: float) -> None:
    """Cap this process's address space at ``fraction`` of physical memory (worker initializer), so a
    runaway computation raises MemoryError in its own worker instead of waking the OOM killer."""
    import os

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


def run_proof(mechanism: Mechanism):
    import dpharness

    return dpharness.prove(mechanism)


def run_audit(mechanism: Mechanism, proof: Any = None, *, samples: int, seed: int,
              ideal_numerics: bool = False, data: Any = None, neighbor: Any = None):
    """Audit ``mechanism`` against its claim; the proof's witness (if any) is offered to the auditor's
    pair search, so the gate proves once and audits once."""
    from dpharness import auditors

    epsilon, delta = audit_target(mechanism.claim)
    witnesses = [proof.witness] if proof is not None and getattr(proof, "witness", None) is not None else []
    return auditors.audit(mechanism, data, neighbor, epsilon=epsilon, delta=delta, samples=samples, seed=seed,
                          ideal_numerics=ideal_numerics, candidate_witnesses=witnesses)


class PhaseTimeout(Exception):
    """A prove/audit phase ran past the gate's per-phase time limit (``--timeout``)."""


@contextlib.contextmanager
def deadline(seconds: float | None, what: str):
    """Raise PhaseTimeout in the main thread after ``seconds`` (SIGALRM; a no-op where unavailable).
    Pure-Python work (sympy, the auditor's loops) is interrupted; a long C call ends first."""
    usable = (seconds is not None and hasattr(signal, "SIGALRM")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def _raise(signum, frame):
        raise PhaseTimeout(f"{what} gave up after {seconds:g} s (raise --timeout to allow more)")

    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)  # an enclosing deadline keeps running
    start = time.monotonic()
    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, min(float(seconds), outer_left) if outer_left > 0 else float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer_left > 0:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - start), 1e-3))


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
            raise ParameterError(f"--module {module} registered no mechanism; pass the package whose code calls "
                                 "dpharness.register(...) (or decorates classes with @register).")
        names += [n for n in got if n not in names]
    return names


def fallback_pair(mechanism: Mechanism, proof: Any = None) -> tuple[Any, Any]:
    """The proof's witness pair when it is a valid neighbouring pair, else the mechanism's example pair."""
    w = getattr(proof, "witness", None)
    if w is not None and w.data is not None and w.neighbor is not None:
        try:
            return mechanism.input_spec.validate_pair(w.data, w.neighbor)
        except Exception:
            pass
    return mechanism.example_pair()


def audit_with_fallback(mechanism: Mechanism, proof: Any, *, samples: int, seed: int,
                        timeout: float | None) -> tuple[Any, str | None]:
    """Audit with the auditor's own neighbour search in half of ``timeout``; if the search runs out,
    audit the proof's witness pair (else the example pair) in the rest. Returns (result, note)."""
    from ._json import jsonable

    t0 = time.perf_counter()
    search_budget = None if timeout is None else timeout / 2
    try:
        with deadline(search_budget, f"the audit (neighbour search) of {mechanism.name}"):
            return run_audit(mechanism, proof, samples=samples, seed=seed), None
    except (PhaseTimeout, MemoryError) as exc:
        data, neighbor = fallback_pair(mechanism, proof)
        why = str(exc) if isinstance(exc, PhaseTimeout) else f"the neighbour search of {mechanism.name} ran out of memory"
        note = f"{why}; audited the pair {jsonable(data)} / {jsonable(neighbor)} instead"
    rest = None if timeout is None else max(timeout - (time.perf_counter() - t0), 1.0)
    with deadline(rest, f"the audit of {mechanism.name}"):
        return run_audit(mechanism, proof, samples=samples, seed=seed, data=data, neighbor=neighbor), note


def proof_policy(name: str, proof: Any) -> str:
    """How the gate treats a mechanism's proof: ``"proved"``; ``"audit-only"`` (no proof covers it and
    the project opted it in with ``register(..., proof="audit-only")``: the audit decides);
    ``"no-proof"`` (no proof covers it and it is not opted in: fails); ``"refuted"``; ``"unproven"``
    (a proof covers it but could not establish the claim)."""
    from . import registry

    verdict = proof.verdict.value
    if verdict == "PROVED":
        return "proved"
    if verdict == "REFUTED":
        return "refuted"
    no_proof = bool(proof.notes) and str(proof.notes[0]).startswith("no proof:")
    if no_proof:
        return "audit-only" if registry.audit_only(name) else "no-proof"
    return "unproven"


def check(name: str, *, samples: int, seed: int, modules: tuple[str, ...] = (),
          report_dir: str | None = None, timeout: float | None = None) -> dict:
    """Prove and audit one registered mechanism at its defaults; a JSON-safe summary (picklable, so it
    runs in a worker process). ``ok`` is the gate's judgement: for a correct mechanism, PROVED and the
    audit passed; for a gallery mechanism, the bug was caught (not PROVED, or the audit flagged it).
    ``timeout`` limits the proof and the audit separately; a phase that runs out is not a pass
    (a gallery bug already refuted by its proof still counts as caught)."""
    from . import registry
    from ._json import jsonable

    load_modules(modules)
    out: dict[str, Any] = {"name": name, "buggy": None, "ok": False, "caught": False, "error": None, "policy": None,
                           "proof": None, "audit": None, "audit_error": None, "audit_note": None,
                           "seconds": {}}
    try:
        mechanism = registry.get(name)()
        out["buggy"] = bool(mechanism.buggy)
        out["parameters"] = jsonable(mechanism.noise_parameters())
        out["claim"] = mechanism.claim.describe()
        out["source_hash"] = mechanism.source_hash()
        t0 = time.perf_counter()
        with deadline(timeout, f"the proof of {name}"):
            proof = run_proof(mechanism)
        out["seconds"]["prove"] = time.perf_counter() - t0
        out["proof"] = proof.to_dict()
        proved = proof.verdict.value == "PROVED"
        out["policy"] = proof_policy(name, proof)
        accepted = out["policy"] in ("proved", "audit-only")
        t0 = time.perf_counter()
        try:
            result, out["audit_note"] = audit_with_fallback(mechanism, proof, samples=samples, seed=seed,
                                                            timeout=timeout)
        except PhaseTimeout as exc:
            out["seconds"]["audit"] = time.perf_counter() - t0
            out["audit_error"] = str(exc)
            out["caught"] = not proved
            out["ok"] = bool(mechanism.buggy and not proved)
            return out
        out["seconds"]["audit"] = time.perf_counter() - t0
        out["audit"] = result.to_dict()
        out["caught"] = (not proved) or (not result.passed)
        out["ok"] = out["caught"] if mechanism.buggy else (accepted and result.passed)
        if report_dir is not None:
            from . import report

            t0 = time.perf_counter()
            report.write(report.build(mechanism, proof=proof, audit=result, samples=samples, seed=seed), report_dir)
            out["seconds"]["report"] = time.perf_counter() - t0
    except (DPHarnessError, PhaseTimeout) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # a crash in a prover/auditor must fail the gate, with its traceback
        out["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    return out
