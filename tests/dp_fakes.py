"""Test doubles for the interface tests (CLI, reports, plugin): a tiny randomized-response
mechanism whose exact privacy loss is its ``log_odds``, a faithful mini-prover for it and an
auditor stand-in that computes the bound from the exact law. They let the interface tests pin
exit codes and rendering without depending on the real prover's and auditor's speed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.auditors._model import AuditResult
from dpharness.core import (
    Claim,
    DiscreteLaw,
    Event,
    Finite,
    InputSpec,
    Mechanism,
    PureDP,
    Substitute,
    Witness,
    exact,
)
from dpharness.proofs._model import Obligation, Proof, Verdict


@dataclass(frozen=True, kw_only=True)
class Coin(Mechanism):
    """Binary randomized response: report the bit w.p. e^L/(1+e^L). Privacy loss exactly L = log_odds."""

    name: ClassVar[str] = "fake_coin"
    source: ClassVar[str] = "tests"

    log_odds: Any = 1
    label: str = "coin"
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.positive("log_odds", self.log_odds)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(Finite((0, 1)), Substitute(), "record")

    def _p(self) -> float:
        return 1 / (1 + math.exp(-float(self.log_odds)))

    def _sample(self, data, size, rng):
        keep = rng.random(size) < self._p()
        return np.where(keep, int(data), 1 - int(data))

    def _law(self, data):
        p = self._p()
        probs = (p, 1 - p) if int(data) == 0 else (1 - p, p)
        return DiscreteLaw((0, 1), probs)

    def example_pair(self):
        return 0, 1


@dataclass(frozen=True, kw_only=True)
class BuggyCoin(Coin):
    """Gallery twin: claims ε = 1 while its log_odds is 2."""

    name: ClassVar[str] = "fake_coin_bug"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "log_odds twice the claim."
    true_epsilon: ClassVar[float] = 2.0
    log_odds: Any = 2


def fake_prove(mechanism: Coin) -> Proof:
    L = exact(mechanism.log_odds)
    eps = exact(mechanism.claim.epsilon)
    holds = bool(L <= eps)
    steps = (
        Obligation("privacy loss at output x", sp.Abs(sp.log(sp.exp(L) / 1)), "algebra: ratio of pmfs", "sympy", True),
        Obligation(
            "bound <= claimed ε",
            sp.Le(L, eps),
            "comparison of exact rationals",
            "exact",
            holds,
            detail="" if holds else f"{L} > {eps}",
        ),
    )
    return Proof(
        mechanism=mechanism,
        claim=mechanism.claim,
        verdict=Verdict.PROVED if holds else Verdict.REFUTED,
        bound_expr=L,
        bound=float(L),
        assumptions=("substitute one record", "numeric model: ideal reals"),
        steps=steps,
        witness=Witness(0, 1, output=0, loss=float(L), event=Event.point(0), description="output 0"),
        notes=() if holds else ("counterexample confirmed exactly",),
    )


CALLS: list[dict] = []


def fake_audit(
    mechanism,
    data=None,
    neighbor=None,
    *,
    epsilon=None,
    delta=0.0,
    samples=1_000_000,
    seed=0,
    confidence=0.95,
    candidate_witnesses=(),
    **options,
) -> AuditResult:
    """Bound = the exact loss shrunk by a sample-size dependent slack (deterministic)."""
    CALLS.append(
        dict(
            mechanism=mechanism,
            data=data,
            neighbor=neighbor,
            epsilon=epsilon,
            delta=delta,
            samples=samples,
            seed=seed,
            options=options,
            witnesses=list(candidate_witnesses),
        )
    )
    if epsilon is None:
        epsilon = float(mechanism.claim.epsilon)
    if isinstance(mechanism, Coin):
        true = float(mechanism.log_odds)
    else:  # a callable: estimate crudely from samples of the pair
        rng = np.random.default_rng(seed)
        a = np.mean(np.asarray(mechanism(data, 20_000, rng)) > 0.5)
        b = np.mean(np.asarray(mechanism(neighbor, 20_000, rng)) > 0.5)
        true = abs(math.log(max(a, 1e-9) / max(b, 1e-9)))
    lb = max(0.0, true - 3 / math.sqrt(samples))
    d, n = (0, 1) if data is None else (data, neighbor)
    return AuditResult(
        epsilon_lower_bound=lb,
        passed=not lb > epsilon,
        epsilon=float(epsilon),
        delta=float(delta),
        confidence=confidence,
        samples=samples,
        seed=seed,
        method="fake: exact loss minus 3/sqrt(n)",
        witness=Witness(d, n, event=Event.point(0), description="D=0, D'=1, output = 0"),
        witness_description=f"D={d!r}, D'={n!r}, event output = 0",
        counts={
            "hits_data": int(samples * 0.7),
            "hits_neighbor": int(samples * 0.3),
            "n_data": samples,
            "n_neighbor": samples,
        },
        events_tested=2,
        pairs_tested=1,
    )


def pool_task(name: str, *, crash: str = "") -> dict:
    """A worker-pool task for the CLI's process pool tests: dies abruptly on ``crash``."""
    import os

    if name == crash:
        os._exit(3)
    return {"name": name, "ok": True, "pid": os.getpid(), "error": None}


def install(monkeypatch, entries: dict | None = None):
    """The tests' stand-ins in place: a private registry holding ``entries`` (the built-ins loaded
    first so nothing reloads them), the prover and the auditor replaced, the audit call log cleared.
    ``entries=None`` leaves the registry alone. Returns this module."""
    import sys

    import dpharness
    import dpharness.auditors
    from dpharness import registry

    if entries is not None:
        registry._load_builtins()
        monkeypatch.setattr(registry, "_REGISTRY", dict(entries))
    monkeypatch.setattr(dpharness, "prove", fake_prove)
    monkeypatch.setattr(dpharness.auditors, "audit", fake_audit, raising=False)
    CALLS.clear()
    return sys.modules[__name__]
