"""dpharness: check differential-privacy mechanisms two ways at once.

* :func:`prove` derives the worst-case privacy loss symbolically and returns a verdict
  (PROVED / REFUTED / UNPROVEN) with the obligations that justify it.
* :func:`audit` runs a mechanism (a catalog entry or any Python callable) on neighbouring inputs
  and returns a certified empirical lower bound on ε.
* :func:`timing_audit` does the same for a per-call ``fn(data)`` whose release is (value, duration):
  timing as an output channel.
* :func:`epsilon` and :func:`delta` answer the accountant's questions: the smallest ε PROVED at a
  given δ (the smallest δ at a given ε), with its certified bracket and the route that proved it.

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
    from .proofs._answers import Answer

__version__ = "0.1.0"

__all__ = [
    "audit",
    "release",
    "one_run_audit",
    "timing_audit",
    "prove",
    "epsilon",
    "delta",
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


def _answer_mechanism(mechanism: Any) -> Mechanism:
    if not isinstance(mechanism, Mechanism):
        raise ParameterError(
            f"mechanism={mechanism!r:.80} is not a dpharness Mechanism; the smallest proven ε or δ is asked of a "
            "mechanism built from dpharness.parts or a registered one (dpharness.get(name)())."
        )
    return mechanism


def _answer_precision(precision: Any) -> float:
    from ._validate import real

    value = float(real("precision", precision))
    if not 1e-12 <= value <= 0.1:
        raise ParameterError(
            f"precision={precision!r} must lie in [1e-12, 0.1] (relative); pass e.g. precision=1e-4 (0.01%)."
        )
    return value


def epsilon(mechanism: Mechanism, *, delta: Any = None, precision: Any = 1e-4) -> Answer:
    """The smallest ε that :func:`prove` PROVES for ``mechanism`` at ``delta`` (δ = 0: pure ε-DP; None:
    the claim's own δ), with the certified bracket of the mechanism's true ε(δ) (a lower end only where
    the proof certifies one) and the route that proved it (pure ε, zCDP conversion, PLD, ...).

    ``precision`` (relative): the smallest PROVED claim lies within [value·(1 − precision), value];
    the returned ``Answer.value`` is itself PROVED (``Answer.proof``). About the time of one proof for
    a mechanism declared from parts; a catalog class with a hand-written proof is answered by proving
    it at other claims (UnsupportedError when its class does not accept a replaced claim)."""
    from ._validate import probability

    m = _answer_mechanism(mechanism)
    if delta is None:
        if isinstance(m.claim, RenyiDP):
            raise ParameterError(
                f"delta=None: {m.name} claims {m.claim.describe()}, which has no δ; pass delta= (e.g. delta=1e-5)."
            )
        delta = m.claim.delta if isinstance(m.claim, ApproxDP) else 0
    value = float(probability("delta", delta, open_right=True))
    from .proofs._answers import smallest_epsilon  # deferred: the prover (sympy, z3) is slow to import

    return smallest_epsilon(m, value, _answer_precision(precision), prove)


def delta(mechanism: Mechanism, *, epsilon: Any = None, precision: Any = 1e-4) -> Answer:
    """The smallest δ that :func:`prove` PROVES for ``mechanism`` at ``epsilon`` (None: the claim's own
    ε), with the certified bracket of the mechanism's true δ(ε) and the route that proved it (pure ε
    gives δ = 0; partition selection its exact δ; zCDP conversion, the exact discrete Gaussian profile,
    PLD). ``precision`` as for :func:`epsilon`; the returned value is itself PROVED."""
    from ._validate import nonnegative

    m = _answer_mechanism(mechanism)
    if epsilon is None:
        if isinstance(m.claim, RenyiDP):
            raise ParameterError(
                f"epsilon=None: {m.name} claims {m.claim.describe()}; pass the (ε, δ)-DP ε, e.g. epsilon=1."
            )
        epsilon = m.claim.epsilon
    value = float(nonnegative("epsilon", epsilon))
    from .proofs._answers import smallest_delta  # deferred: the prover (sympy, z3) is slow to import

    return smallest_delta(m, value, _answer_precision(precision), prove)


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
        witness = None if proof is None else proof.witness
        if witness is not None:
            witnesses.append(witness)
    return _audit(mechanism, data, neighbor, candidate_witnesses=witnesses, **options)


def release(
    mechanism: Mechanism, data: Any, *, seed: int | None = None, columns: Any = None, quiet: bool = False
) -> Any:
    """One release of a declared mechanism on a numpy array, a pandas DataFrame or a Dask DataFrame
    (streamed partition by partition, merged exactly). See the module :mod:`dpharness._release` for
    what is streamed. A release running over a few seconds shows its progress unless ``quiet``."""
    from ._release import release as _release  # deferred: keeps `import dpharness` cheap

    return _release(mechanism, data, seed=seed, columns=columns, quiet=quiet)


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
