"""dpharness: check differential-privacy mechanisms two ways at once.

* :func:`prove` derives the worst-case privacy loss symbolically and returns a verdict
  (PROVED / REFUTED / UNPROVEN) with the obligations that justify it.
* :func:`audit` runs a mechanism (a catalog entry or any Python callable) on neighbouring inputs
  and returns a certified empirical lower bound on ε.
* :func:`timing_audit` does the same for a per-call ``fn(data)`` whose release is (value, duration):
  timing as an output channel.

Together: empirical lower bound <= true ε <= proven bound <= claimed ε.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core import (
    AddRemove,
    ApproxDP,
    BoundedChange,
    Claim,
    DiscreteLaw,
    Domain,
    Event,
    Finite,
    FunctionLaw,
    InputSpec,
    IntegerRange,
    Mechanism,
    OutputLaw,
    PureDP,
    RealBox,
    RealInterval,
    Relation,
    RenyiDP,
    Substitute,
    Witness,
    exact,
)
from .errors import DPHarnessError, MechanismError, ParameterError, UnsupportedError
from .pipeline import Check, check
from .proof_registry import proves
from .registry import catalog, get, register

if TYPE_CHECKING:  # the result types live in the subpackages, imported only when called
    from .auditors import AuditResult
    from .auditors.one_run import OneRunResult
    from .auditors.timing import TimingAuditResult
    from .proofs import Proof

__version__ = "0.1.0"

__all__ = [
    "audit",
    "release",
    "one_run_audit",
    "timing_audit",
    "prove",
    "check",
    "Check",
    "Mechanism",
    "Claim",
    "PureDP",
    "ApproxDP",
    "RenyiDP",
    "Domain",
    "Finite",
    "IntegerRange",
    "RealInterval",
    "RealBox",
    "Relation",
    "AddRemove",
    "Substitute",
    "BoundedChange",
    "InputSpec",
    "OutputLaw",
    "DiscreteLaw",
    "FunctionLaw",
    "Event",
    "Witness",
    "exact",
    "DPHarnessError",
    "ParameterError",
    "MechanismError",
    "UnsupportedError",
    "register",
    "catalog",
    "get",
    "proves",
]


def prove(mechanism: Mechanism, *, distance: int = 1) -> Proof:
    """Derive the worst-case privacy loss of a catalog mechanism; see :mod:`dpharness.proofs`."""
    from .proofs import prove as _prove  # deferred: sympy/z3 are slow to import

    return _prove(mechanism, distance=distance)


def audit(mechanism: Any, data: Any = None, neighbor: Any = None, **options: Any) -> AuditResult:
    """Certified empirical lower bound on ε; see :func:`dpharness.auditors.audit` for the options.

    For a catalog mechanism audited without a pair, the proof's witness pair (when the prover has
    one) is offered to the auditor's neighbour search first."""
    from .auditors import audit as _audit  # deferred: keeps `import dpharness` cheap

    witnesses: list[Witness] = []
    if data is None and neighbor is None and isinstance(mechanism, Mechanism):
        try:
            proof = prove(mechanism)
        except (UnsupportedError, ImportError):
            proof = None
        if proof is not None and getattr(proof, "witness", None) is not None:
            witnesses.append(proof.witness)
    return _audit(mechanism, data, neighbor, candidate_witnesses=witnesses, **options)


def release(mechanism: Mechanism, data: Any, *, seed: int | None = None, columns: Any = None) -> Any:
    """One release of a declared mechanism on a numpy array, a pandas DataFrame or a Dask DataFrame
    (streamed partition by partition, merged exactly). See the module :mod:`dpharness._release` for
    what is streamed."""
    from ._release import release as _release  # deferred: keeps `import dpharness` cheap

    return _release(mechanism, data, seed=seed, columns=columns)


def one_run_audit(target: Any, canaries: Any = None, **options: Any) -> OneRunResult:
    """ε lower bound from one run with canaries (Steinke, Nasr & Jagielski 2023); see
    :func:`dpharness.auditors.one_run_audit` for the arguments."""
    from .auditors import one_run_audit as _one_run  # deferred: keeps `import dpharness` cheap

    return _one_run(target, canaries, **options)


def timing_audit(fn: Any, data: Any, neighbor: Any, **options: Any) -> TimingAuditResult:
    """Certified empirical lower bound on ε when each call's duration is released with its value;
    see :func:`dpharness.auditors.timing.timing_audit` for the options."""
    from .auditors.timing import timing_audit as _timing_audit  # deferred: keeps `import dpharness` cheap

    return _timing_audit(fn, data, neighbor, **options)
