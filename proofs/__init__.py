"""Symbolic proofs of the worst-case privacy loss, one module per mechanism module stem.

``prove(mechanism)`` dispatches to ``dpharness.proofs.<stem>.prove`` where ``<stem>`` is the name
of the module that defines the mechanism's class."""

from __future__ import annotations

import importlib
import time

from dpharness.core import Mechanism
from dpharness.errors import ParameterError

from ._model import Obligation, Proof, Verdict

__all__ = ["prove", "Proof", "Obligation", "Verdict"]


def prove(mechanism: Mechanism) -> Proof:
    """Derive the worst-case privacy loss of ``mechanism`` and judge its claim."""
    if not isinstance(mechanism, Mechanism):
        raise ParameterError(
            f"mechanism={mechanism!r} is not a dpharness Mechanism; proofs exist for catalog mechanisms "
            "(use dpharness.audit for arbitrary callables)."
        )
    stem = type(mechanism).__module__.rsplit(".", 1)[-1]
    try:
        module = importlib.import_module(f"{__name__}.{stem}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{stem}":
            raise
        return Proof(
            mechanism=mechanism, claim=mechanism.claim, verdict=Verdict.UNPROVEN, bound_expr=None,
            bound=float("nan"), assumptions=(), steps=(), witness=None,
            notes=(f"no proof module dpharness.proofs.{stem} for {type(mechanism).__name__}",),
        )
    start = time.perf_counter()
    proof = module.prove(mechanism)
    proof.timings.setdefault("total", time.perf_counter() - start)
    return proof
