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
from typing import Any, Callable

from dpharness.core import Mechanism
from dpharness.errors import ParameterError
from dpharness.proof_registry import find_proof, proves

from ._answers import Answer
from ._kernel import ProofBuilder
from ._model import Obligation, Proof, Verdict, unproven

__all__ = ["prove", "proves", "Proof", "Obligation", "Verdict", "ProofBuilder", "unproven", "Answer"]

for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")


def prove(mechanism: Mechanism, *, distance: int = 1) -> Proof:
    """Derive the worst-case privacy loss of ``mechanism`` with the proof registered for its type,
    and judge its claim; UNPROVEN with the reason when no registered proof covers it.

    ``distance=k``: judge the claim for neighbours at distance k (data sets differing by k records,
    the mechanism's relation applied k times: group privacy, and for scalar Laplace / Gaussian leaves
    the privacy-loss distribution of a k-fold shift); answered for mechanisms declared from parts."""
    if not isinstance(mechanism, Mechanism):
        raise ParameterError(
            f"mechanism={mechanism!r} is not a dpharness Mechanism; proofs exist for Mechanism values "
            "(built from dpharness.parts, or with a proof registered by @dpharness.proves); "
            "use dpharness.audit for arbitrary callables."
        )
    if isinstance(distance, bool) or not isinstance(distance, int) or distance < 1:
        raise ParameterError(
            f"distance={distance!r} must be an integer >= 1 (the number of records neighbours differ by)."
        )
    coverage = find_proof(mechanism)
    if coverage.proof is None:
        return unproven(mechanism, f"no proof: {coverage.reason}")
    assert coverage.written_for is not None  # a covering proof names the class it was written for
    proof_of: Callable[[Any], Proof] = coverage.proof
    try:  # the parameters as they are now (a field may have been replaced after construction)
        mechanism.validate()
    except ParameterError as exc:
        return unproven(mechanism, f"no proof: its parameters are refused now ({exc})")
    if distance > 1:
        from . import parts as _parts

        if coverage.proof not in (_parts.prove, _parts.prove_composite):
            return unproven(
                mechanism,
                f"no proof at distance {distance}: the proof of "
                f"{coverage.written_for.__qualname__} is for neighbours at distance 1 (distances are "
                "answered for mechanisms declared from dpharness.parts)",
            )
    start = time.perf_counter()
    try:
        proof = proof_of(mechanism) if distance == 1 else _parts.prove_at_distance(mechanism, distance)
    except (ArithmeticError, ParameterError) as exc:  # a numeric limit of the derivation at these parameters
        return unproven(
            mechanism,
            f"the proof of {coverage.written_for.__qualname__} could not be carried out at these "
            f"parameters ({type(exc).__name__}: {exc})",
        )
    except Exception as exc:  # noqa: BLE001 - every structure the constructors accept gets a verdict
        return unproven(
            mechanism,
            f"the proof of {coverage.written_for.__qualname__} does not cover this structure "
            f"({type(exc).__name__}: {exc}); nothing is claimed about it",
        )
    proof = _checked_witness(mechanism, proof)
    proof.timings.setdefault("total", time.perf_counter() - start)
    return proof


def _checked_witness(mechanism: Mechanism, proof: Proof) -> Proof:
    """A witness must be a pair the mechanism's own relation accepts: a REFUTED verdict resting on an
    invalid pair is no refutation (UNPROVEN), and an invalid witness of a PROVED verdict is dropped."""
    import dataclasses

    w = proof.witness
    if w is None or w.data is None or w.neighbor is None:
        return proof
    try:
        mechanism.input_spec.validate_pair(w.data, w.neighbor)
    except ParameterError as exc:
        why = f"the witness pair is not a neighbouring pair the mechanism accepts ({exc})"
        if proof.verdict is Verdict.REFUTED:
            return dataclasses.replace(
                proof, verdict=Verdict.UNPROVEN, witness=None, notes=proof.notes + (f"refutation withdrawn: {why}",)
            )
        return dataclasses.replace(proof, witness=None, notes=proof.notes + (f"witness dropped: {why}",))
    return proof
