"""Symbolic proofs of the worst-case privacy loss.

``prove(mechanism)`` finds the proof registered for the mechanism's type (``@dpharness.proves``,
:mod:`dpharness.proof_registry`): the built-in proofs below register themselves for the catalog's
classes when this package is imported; a project registers proofs for its own classes the same
way. A mechanism built from :mod:`dpharness.parts` is proved by walking its structure. Nothing is
ever dispatched by a module or class name; a mechanism no proof covers is UNPROVEN, with the reason.

Public API for writing a hand-built proof: :class:`ProofBuilder` (obligations discharged by sympy and
z3), :class:`Proof`, :class:`Obligation`, :class:`Verdict`."""

from __future__ import annotations

import importlib
import pkgutil
import time

from dpharness.core import Mechanism
from dpharness.errors import ParameterError
from dpharness.proof_registry import find_proof, proves

from ._kernel import ProofBuilder
from ._model import Obligation, Proof, Verdict

__all__ = ["prove", "proves", "Proof", "Obligation", "Verdict", "ProofBuilder", "unproven"]

for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")


def unproven(mechanism: Mechanism, reason: str) -> Proof:
    """An UNPROVEN proof value carrying only ``reason`` (no derivation was attempted)."""
    return Proof(mechanism=mechanism, claim=mechanism.claim, verdict=Verdict.UNPROVEN, bound_expr=None,
                 bound=float("nan"), assumptions=(), steps=(), witness=None, notes=(reason,))


def prove(mechanism: Mechanism) -> Proof:
    """Derive the worst-case privacy loss of ``mechanism`` with the proof registered for its type,
    and judge its claim; UNPROVEN with the reason when no registered proof covers it."""
    if not isinstance(mechanism, Mechanism):
        raise ParameterError(
            f"mechanism={mechanism!r} is not a dpharness Mechanism; proofs exist for Mechanism values "
            "(built from dpharness.parts, or with a proof registered by @dpharness.proves); "
            "use dpharness.audit for arbitrary callables."
        )
    coverage = find_proof(mechanism)
    if coverage.proof is None:
        return unproven(mechanism, f"no proof: {coverage.reason}")
    start = time.perf_counter()
    proof = coverage.proof(mechanism)
    proof.timings.setdefault("total", time.perf_counter() - start)
    return proof
