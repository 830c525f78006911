"""Tests that kill the mutants of the proof kernel's verdict logic (``dpharness.proofs.prove``,
``unproven``, the witness check) and of proof dispatch (``dpharness.proof_registry``) which survived
``bash mutation/run.sh proofs`` with the dispatch tests alone (see mutation/SURVIVORS.md).

The verdict logic is driven by *scripted* proofs: this module registers, for its own subclasses of
a catalog class, proof functions that return a chosen verdict and witness (or raise), so every
branch of ``prove`` is reached without sympy. Deterministic."""

from __future__ import annotations

import dataclasses
import math

import pytest

import dpharness
from dpharness.core import PureDP, Witness
from dpharness.mechanisms.randomized_response import RandomizedResponse
from dpharness.proof_registry import Coverage, find_proof, proves
from dpharness.proofs import Proof, Verdict, prove, unproven


def _proof(m, verdict: Verdict, witness: Witness | None, *, notes=("scripted",), timings=None) -> Proof:
    return Proof(
        mechanism=m,
        claim=m.claim,
        verdict=verdict,
        bound_expr=None,
        bound=1.0,
        assumptions=("scripted",),
        steps=(),
        witness=witness,
        notes=notes,
        timings={} if timings is None else timings,
    )


def _scripted(name: str, script):
    """A RandomizedResponse subclass named ``name`` whose registered proof is ``script(m)``."""
    cls = dataclasses.dataclass(frozen=True, kw_only=True)(type(name, (RandomizedResponse,), {"name": f"mk_{name}"}))
    cls.__module__ = __name__
    cls.__qualname__ = name
    script.__qualname__ = f"prove_{name}"
    proves(cls)(script)
    return cls


RefutedOnInvalidPair = _scripted(
    "RefutedOnInvalidPair", lambda m: _proof(m, Verdict.REFUTED, Witness(data=0, neighbor=7))
)
ProvedWithInvalidPair = _scripted(
    "ProvedWithInvalidPair", lambda m: _proof(m, Verdict.PROVED, Witness(data=0, neighbor=0))
)
RefutedOnValidPair = _scripted("RefutedOnValidPair", lambda m: _proof(m, Verdict.REFUTED, Witness(data=0, neighbor=1)))
RefutedWithoutData = _scripted(
    "RefutedWithoutData", lambda m: _proof(m, Verdict.REFUTED, Witness(data=None, neighbor=1))
)
RefutedWithoutNeighbor = _scripted(
    "RefutedWithoutNeighbor", lambda m: _proof(m, Verdict.REFUTED, Witness(data=0, neighbor=None))
)
ProvedWithoutWitness = _scripted("ProvedWithoutWitness", lambda m: _proof(m, Verdict.PROVED, None))
KeepsItsTotal = _scripted("KeepsItsTotal", lambda m: _proof(m, Verdict.PROVED, None, timings={"total": 123.0}))


def _raise(exc):
    def script(m):
        raise exc

    return script


Overflows = _scripted("Overflows", _raise(OverflowError("exp overflow at log_odds=800")))
RefusesParameters = _scripted("RefusesParameters", _raise(dpharness.ParameterError("k=2 is out of reach")))


# --------------------------------------------------------------------------- the witness check


def test_refutation_on_an_invalid_pair_is_withdrawn():
    m = RefutedOnInvalidPair()
    p = prove(m)
    assert p.verdict is Verdict.UNPROVEN and p.witness is None
    assert p.notes[0] == "scripted" and len(p.notes) == 2
    assert p.notes[1].startswith(
        "refutation withdrawn: the witness pair is not a neighbouring pair the mechanism accepts ("
    )
    assert "outside the domain" in p.notes[1]
    assert p.mechanism is m and p.bound == 1.0 and p.assumptions == ("scripted",)


def test_invalid_witness_of_a_proof_is_dropped_and_the_verdict_kept():
    p = prove(ProvedWithInvalidPair())
    assert p.verdict is Verdict.PROVED and p.witness is None
    assert p.notes == ("scripted", p.notes[1]) and p.notes[1].startswith(
        "witness dropped: the witness pair is not a neighbouring pair the mechanism accepts ("
    )
    assert "same record" in p.notes[1]


def test_valid_refutation_is_kept_unchanged():
    p = prove(RefutedOnValidPair())
    assert p.verdict is Verdict.REFUTED and p.witness == Witness(data=0, neighbor=1) and p.notes == ("scripted",)


@pytest.mark.parametrize("cls", [RefutedWithoutData, RefutedWithoutNeighbor], ids=lambda c: c.__name__)
def test_a_witness_without_a_pair_is_not_checked(cls):
    """Only a complete pair can be validated; an output-only witness is passed through as the proof gave it."""
    p = prove(cls())
    assert p.verdict is Verdict.REFUTED and p.witness is not None and p.notes == ("scripted",)


def test_a_proof_without_witness_is_returned_as_is():
    p = prove(ProvedWithoutWitness())
    assert p.verdict is Verdict.PROVED and p.witness is None and p.notes == ("scripted",)


# --------------------------------------------------------------------------- prove(): failures, timings, input


@pytest.mark.parametrize(
    "cls, what",
    [
        (Overflows, "OverflowError: exp overflow at log_odds=800"),
        (RefusesParameters, "ParameterError: k=2 is out of reach"),
    ],
    ids=["arithmetic", "parameter"],
)
def test_a_proof_that_cannot_be_carried_out_is_unproven_with_the_reason(cls, what):
    m = cls()
    p = prove(m)
    assert p.verdict is Verdict.UNPROVEN and p.mechanism is m and p.claim == m.claim
    assert p.notes == (f"the proof of {cls.__qualname__} could not be carried out at these parameters ({what})",)


def test_prove_records_the_total_time_unless_the_proof_did():
    p = prove(ProvedWithoutWitness())
    total = p.timings["total"]
    assert isinstance(total, float) and 0.0 <= total < 60.0
    assert prove(KeepsItsTotal()).timings == {"total": 123.0}


def test_prove_refuses_what_is_not_a_mechanism():
    with pytest.raises(dpharness.ParameterError) as info:
        prove(42)
    assert str(info.value) == (
        "mechanism=42 is not a dpharness Mechanism; proofs exist for Mechanism values (built from dpharness.parts, "
        "or with a proof registered by @dpharness.proves); use dpharness.audit for arbitrary callables."
    )


def test_unproven_carries_only_the_reason():
    m = RandomizedResponse(claim=PureDP(0.5))
    p = unproven(m, "why not")
    assert p.mechanism is m and p.claim == PureDP(0.5) and p.verdict is Verdict.UNPROVEN
    assert p.bound_expr is None and isinstance(p.bound, float) and math.isnan(p.bound)
    assert p.assumptions == () and p.steps == () and p.witness is None and p.notes == ("why not",)
    assert p.delta_bound is None and p.timings == {}


# --------------------------------------------------------------------------- proves(): registration rules


def test_proves_needs_a_class_and_a_callable():
    with pytest.raises(dpharness.ParameterError) as info:
        proves()
    assert str(info.value) == "proves() needs at least one class; write @proves(MyMechanism)."
    decorate = proves(dataclasses.dataclass(frozen=True, kw_only=True)(type("Unused", (RandomizedResponse,), {})))
    with pytest.raises(
        dpharness.ParameterError, match=r"^fn=42 is not callable; decorate a function mechanism -> Proof\.$"
    ):
        decorate(42)


def test_a_project_proof_cannot_be_replaced_but_may_be_registered_again():
    cls = dataclasses.dataclass(frozen=True, kw_only=True)(type("Twice", (RandomizedResponse,), {"name": "mk_twice"}))

    def prove_twice(m):
        return unproven(m, "first")

    proves(cls)(prove_twice)
    proves(cls)(prove_twice)  # the same function again (e.g. its module re-imported): accepted
    assert find_proof(cls()).proof is prove_twice

    def prove_twice_other(m):
        return unproven(m, "second")

    with pytest.raises(dpharness.ParameterError) as info:
        proves(cls)(prove_twice_other)
    assert str(info.value).startswith(
        f"class=Twice already has a proof registered by {__name__}.{prove_twice.__qualname__}; a proof may not be replaced"
    )
    assert find_proof(cls()).proof is prove_twice


def test_the_library_may_register_proofs_for_its_own_classes():
    """A proof living in a dpharness module may cover a dpharness class (that is how the built-in
    proofs register); only proofs from outside the library are refused for library classes."""
    cls = dataclasses.dataclass(frozen=True, kw_only=True)(
        type("LibraryOwned", (RandomizedResponse,), {"name": "mk_lib"})
    )
    cls.__module__ = "dpharness.mechanisms.mutation_kills_fixture"

    def prove_library_owned(m):
        return unproven(m, "library proof")

    prove_library_owned.__module__ = "dpharness.proofs.mutation_kills_fixture"
    proves(cls)(prove_library_owned)
    assert find_proof(cls()).proof is prove_library_owned

    def outsider(m):  # pragma: no cover - never registered
        raise AssertionError

    with pytest.raises(
        dpharness.ParameterError,
        match=r"^class=LibraryOwned2 is a dpharness class, whose proofs are the "
        r"library's; subclass it and register the proof for the subclass\.$",
    ):
        proves(
            dataclasses.dataclass(frozen=True, kw_only=True)(
                type("LibraryOwned2", (RandomizedResponse,), {"__module__": "dpharness.mechanisms.x"})
            )
        )(outsider)


# --------------------------------------------------------------------------- find_proof(): what a subclass may change


@dataclasses.dataclass(frozen=True, kw_only=True)
class Covered(RandomizedResponse):
    """Registered below with an unsealed proof: any redefined method breaks coverage."""

    name = "mk_covered"


@proves(Covered)
def prove_covered(m):
    return unproven(m, "covered")


def _sub(base, attrs, *, dataclass=True, bases=()):
    cls = type("Sub", bases + (base,), dict(attrs))
    return dataclasses.dataclass(frozen=True, kw_only=True)(cls) if dataclass else cls


class _NonDataDescriptor:
    def __get__(self, obj, owner=None):
        return "computed"


class _DataDescriptor:
    def __get__(self, obj, owner=None):
        return "computed"

    def __set__(self, obj, value):
        raise AttributeError


class _CallableObject:
    def __call__(self, *args):
        return "called"


def test_coverage_names_the_class_it_was_written_for():
    cov = find_proof(Covered())
    assert cov == Coverage(prove_covered, Covered, f"proof registered for {__name__}.Covered")
    broken = find_proof(_sub(Covered, {"_sample": lambda self, d, n, rng: None})())
    assert broken.proof is None and broken.written_for is Covered and "overrides _sample()" in broken.reason
    m = Covered()
    object.__setattr__(m, "patched", 1)
    patched = find_proof(m)
    assert patched.proof is None and patched.written_for is Covered and "'patched'" in patched.reason
    none = find_proof(3.5)
    assert none.proof is None and none.written_for is None
    assert none.reason.endswith("(build it from dpharness.parts, or register a proof with @dpharness.proves)")


@pytest.mark.parametrize(
    "attrs",
    [
        {"name": "mk_renamed", "source": "a new source line", "bug": "", "true_epsilon": 1.0},
        {"__annotations__": {"log_odds": float}, "log_odds": 2.0},  # a field's default
        {
            "calibrated": classmethod(lambda cls, eps: cls()),
            "example_pair": lambda self: (1, 0),
            "describe": lambda self: "words",
        },  # harmless redefinitions
    ],
    ids=["words", "field-default", "harmless"],
)
def test_subclass_changing_words_defaults_or_harmless_methods_is_covered(attrs):
    cls = _sub(Covered, attrs)
    assert all(k in vars(cls) for k in attrs)
    assert find_proof(cls()).proof is prove_covered


@dataclasses.dataclass(frozen=True, kw_only=True)
class CoveredWithHint(RandomizedResponse):
    """A class-level constant that is None: deleting it, or adding another None, is a change."""

    name = "mk_covered_hint"
    hint = None


@proves(CoveredWithHint)
def prove_covered_hint(m):
    return unproven(m, "covered")


@pytest.mark.parametrize("change", ["add-shadowing", "add-none", "delete-none", "replace"])
def test_a_class_changed_after_its_statement_is_not_covered(monkeypatch, change):
    """patched_code compares every name of every class in the MRO with what its class statement
    defined: added (even as None, which may shadow a base's attribute), deleted or replaced."""
    assert find_proof(CoveredWithHint()).proof is prove_covered_hint
    if change == "add-shadowing":  # RandomizedResponse inherits sample from Mechanism; now it has its own
        monkeypatch.setattr(RandomizedResponse, "sample", lambda self, d, n, rng: None, raising=False)
        where = "RandomizedResponse.sample"
    elif change == "add-none":
        monkeypatch.setattr(CoveredWithHint, "extra", None, raising=False)
        where = "CoveredWithHint.extra"
    elif change == "delete-none":
        monkeypatch.delattr(CoveredWithHint, "hint")
        where = "CoveredWithHint.hint"
    else:
        monkeypatch.setattr(RandomizedResponse, "_sample", lambda self, d, n, rng: None)
        where = "RandomizedResponse._sample"
    cov = find_proof(CoveredWithHint())
    assert cov.proof is None and cov.written_for is CoveredWithHint
    assert cov.reason.startswith(f"{where} was replaced after it was defined (patched code)")
    monkeypatch.undo()
    assert find_proof(CoveredWithHint()).proof is prove_covered_hint


def test_abc_bookkeeping_is_not_an_override():
    """Mechanism is an ABC: every subclass's body holds ``_abc_impl``, which is not code."""
    cls = _sub(Covered, {})
    assert "_abc_impl" in vars(cls)
    assert find_proof(cls()).proof is prove_covered


def test_a_plain_mixin_is_checked_too():
    class Quiet:
        """No code: changes nothing."""

    class Loud:
        def _law(self, data):
            return None

    assert find_proof(_sub(Covered, {}, bases=(Quiet,))()).proof is prove_covered
    cov = find_proof(_sub(Covered, {}, bases=(Loud,))())
    assert cov.proof is None and "Loud overrides _law()" in cov.reason


@pytest.mark.parametrize(
    "value",
    [property(lambda self: "x"), _NonDataDescriptor(), _DataDescriptor(), _CallableObject(), staticmethod(lambda: "x")],
    ids=["property", "non-data-descriptor", "data-descriptor", "callable", "staticmethod"],
)
@pytest.mark.parametrize("word", ["name", "source", "true_epsilon"])
def test_code_under_a_word_name_is_an_override(word, value):
    """``name``, ``source``, ... may change as *strings*; code computing them is an override."""
    cls = _sub(Covered, {word: value}, dataclass=False)
    cov = find_proof(cls.__new__(cls))
    assert cov.proof is None and f"overrides {word}()" in cov.reason


def test_sealed_proofs_only_watch_their_sealed_names():
    # registered inside the test (not at import), so that the registration runs the code under test
    SealedBase = dataclasses.dataclass(frozen=True, kw_only=True)(
        type("SealedBase", (RandomizedResponse,), {"name": "mk_sealed"})
    )

    def prove_sealed(m):
        return unproven(m, "sealed")

    proves(SealedBase, sealed=["_sample"])(prove_sealed)
    assert find_proof(_sub(SealedBase, {"_helper": lambda self: 1})()).proof is prove_sealed
    cov = find_proof(_sub(SealedBase, {"_sample": lambda self, d, n, rng: None})())
    assert cov.proof is None and "overrides _sample()" in cov.reason
