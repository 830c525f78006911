"""Proofs are found by what a mechanism is (its registered type), never by a module or class name,
and a proof covers a subclass only when the subclass changes none of the code it is about."""

from __future__ import annotations

import dataclasses
import importlib
import sys
import textwrap

import numpy as np
import pytest

import dpharness
from dpharness import PureDP, proves
from dpharness.mechanisms.clamped import ClampedSum
from dpharness.mechanisms.laplace import Laplace
from dpharness.mechanisms.randomized_response import RandomizedResponse
from dpharness.proofs import prove
from dpharness.proofs._model import Verdict


def _import_source(tmp_path, monkeypatch, module: str, source: str):
    path = tmp_path / f"{module}.py"
    path.write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(module, None)
    return importlib.import_module(module)


def test_lookalike_in_a_module_named_laplace_is_not_proved(tmp_path, monkeypatch):
    mod = _import_source(
        tmp_path,
        monkeypatch,
        "laplace",
        """
        from dataclasses import dataclass
        from typing import Any
        import numpy as np
        from dpharness import Mechanism, PureDP, InputSpec, RealInterval, BoundedChange
        from dpharness.mechanisms.laplace import Laplace as _Builtin

        @dataclass(frozen=True, kw_only=True)
        class Laplace(Mechanism):
            name = "team_laplace"
            scale: Any = 1
            sensitivity: Any = 1
            dim: int = 1
            granularity: float = 2.0 ** -20
            claim: Any = PureDP(1)

            @property
            def input_spec(self):
                return InputSpec(RealInterval(), BoundedChange(self.sensitivity, "l1"), "vector", dim=self.dim)

            def _sample(self, data, size, rng):
                return np.asarray(data)[0] + 0.995 * rng.laplace(0, self.scale, size)

            def _law(self, data):
                return _Builtin(scale=self.scale)._law(data)

            def example_pair(self):
                return np.zeros(1), np.ones(1)
    """,
    )
    proof = prove(mod.Laplace())
    assert proof.verdict is Verdict.UNPROVEN
    assert "no proof" in proof.notes[0] and "audited only" in proof.notes[0]


def test_class_named_clampedsum_that_forgets_to_clamp_is_not_proved(tmp_path, monkeypatch):
    mod = _import_source(
        tmp_path,
        monkeypatch,
        "clamped",
        """
        from dataclasses import dataclass
        from dpharness.mechanisms.clamped import ClampedSum as _Builtin
        from dpharness import Mechanism

        @dataclass(frozen=True, kw_only=True)
        class ClampedSum(Mechanism):
            name = "team_sum"
            lo: float = 0
            hi: float = 1
            scale: float = 1
            input_spec = _Builtin().input_spec
            def _sample(self, data, size, rng):
                import numpy as np
                return np.sum(data) + rng.laplace(0, self.scale, size)
            def _law(self, data):
                return _Builtin()._law(data)
            def example_pair(self):
                return _Builtin().example_pair()
    """,
    )
    proof = prove(mod.ClampedSum())
    assert proof.verdict is Verdict.UNPROVEN


def test_correct_subclass_in_another_module_is_proved():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class TeamLaplace(Laplace):
        name = "team_laplace_subclass"
        source = "a team's subclass that changes nothing but its name"

    assert prove(TeamLaplace()).verdict is Verdict.PROVED


@pytest.mark.parametrize(
    "base, method",
    [
        (Laplace, "_sample"),
        (Laplace, "_law"),
        (ClampedSum, "_sample"),
        (ClampedSum, "_law"),
        (Laplace, "__getattribute__"),
        (RandomizedResponse, "_sample"),
        (RandomizedResponse, "p_truth"),
        (RandomizedResponse, "__getattribute__"),
        (RandomizedResponse, "__post_init__"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_subclass_overriding_code_is_not_covered_and_the_method_is_named(base, method):
    """Catalog classes are declared from parts (``Composite``): the sampler and the law are sealed, so
    a subclass redefining them is not covered, and the reason names the method."""

    def body(self, *args, **kwargs):
        return getattr(super(type(self), self), method)(*args, **kwargs)

    cls = dataclasses.dataclass(frozen=True, kw_only=True)(type("Sub", (base,), {method: body}))
    proof = prove(cls())
    assert proof.verdict is Verdict.UNPROVEN
    assert f"overrides {method}()" in proof.notes[0]


@pytest.mark.parametrize("method", ["_check", "structure"])
def test_subclass_changing_the_declaration_is_proved_by_walking_it(method):
    """``_check`` and ``structure`` only feed the declaration, which the proof walks: a subclass that
    redefines them stays covered, and a weaker declaration is not PROVED."""
    if method == "_check":
        cls = dataclasses.dataclass(frozen=True, kw_only=True)(
            type("Sub", (ClampedSum,), {"_check": lambda self: None})
        )
        assert prove(cls()).verdict is Verdict.PROVED
        return

    def structure(self):  # forgets the clamp's upper half: records up to 2 reach the sum
        from dpharness import parts as dp

        return dp.mechanism(
            name=self.name,
            records=dpharness.RealInterval(),
            relation=self.relation,
            steps=dp.clamp(self.lo, 2 * self.hi) >> dp.sum() >> dp.laplace(self.scale),
            claim=self.claim,
        )

    cls = dataclasses.dataclass(frozen=True, kw_only=True)(type("Sub", (ClampedSum,), {"structure": structure}))
    assert prove(cls()).verdict is Verdict.REFUTED


def test_subclass_changing_a_class_constant_is_not_covered():
    from dpharness.mechanisms.rappor import Rappor

    cls = dataclasses.dataclass(frozen=True, kw_only=True)(type("Flagged", (Rappor,), {"buggy": True}))
    assert prove(cls()).verdict is Verdict.UNPROVEN


def test_patched_instance_is_not_covered():
    m = Laplace()
    object.__setattr__(m, "_sample", lambda data, size, rng: np.zeros(size))
    proof = prove(m)
    assert proof.verdict is Verdict.UNPROVEN and "_sample" in proof.notes[0]


def test_a_project_registers_a_proof_for_its_own_class():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Wrapped(Laplace):
        name = "team_wrapped"

        def _sample(self, data, size, rng):  # the same code, but a proof must say so
            return Laplace._sample(self, data, size, rng)

    assert prove(Wrapped()).verdict is Verdict.UNPROVEN

    @proves(Wrapped)
    def prove_wrapped(m):
        from dpharness.proofs.parts import prove_composite

        return prove_composite(m)

    assert prove(Wrapped()).verdict is Verdict.PROVED
    assert prove(Wrapped(claim=PureDP(0.5))).verdict is Verdict.REFUTED


def test_proves_rejects_non_mechanisms():
    with pytest.raises(dpharness.ParameterError, match="class="):
        proves(int)


def test_a_registered_proof_cannot_be_replaced():
    """A project cannot swap the library's proof of a built-in class for its own (e.g. one that always says PROVED)."""
    with pytest.raises(dpharness.ParameterError, match="dpharness class"):

        @proves(Laplace)
        def always_proved(m):  # pragma: no cover - never registered
            raise AssertionError
