"""The walk: the proof of a parts structure assembled node by node (:mod:`dpharness.mechanisms.parts`).

:class:`_Walk` walks the same structure the sampler executes and returns, for a transformation, the
space and distance after it (its stability map) and, for a randomized step, an account
(:class:`~dpharness.proofs._account.Account`). It knows only chains (``a >> b``: what follows noise is
post-processing); every other node is proved by its family's module in this package, found by the
node's type (never by its name) in the registries the family modules fill at import:

* :func:`stability` — a transformation's stability lemma: ``fn(walk, path, t, space, d) -> Distance``;
* :func:`account` — a measurement's privacy map, instantiated at the node: ``fn(walk, path, m, space, d) -> Account``;
* :func:`node` — a structural step (compose, parallel, repeat, ...): ``fn(walk, path, step, space, d) -> Account``;
* :func:`head` — a step that governs the chain it heads (a subsample, contribution bounding):
  ``fn(walk, path, chain, space, d) -> Account``.

Each node adds named obligations prefixed by its path in the structure (``compose[1] › count ›
laplace``); a family's lemma, proved once, is added the first time one of its nodes appears
(:meth:`_Walk._family`). Shared here: the grid-rounding lemma and the grid Laplace family's lemma
(:meth:`_Walk._rounding`, :meth:`_Walk.laplace_family`), which several families instantiate."""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any, Callable

import sympy as sp

from dpharness.mechanisms.parts._base import Chain, Distance, Measurement, Post, Space, Step, Transformation

from .. import _account as A
from .. import _lemmas as lemmas
from .._kernel import ProofBuilder
from .._model import Obligation

Profile = A.Account

STABILITY: dict[type, Callable] = {}
ACCOUNT: dict[type, Callable] = {}
NODE: dict[type, Callable] = {}
HEAD: dict[type, Callable] = {}


def _registrar(table: dict) -> Callable:
    def register(*types: type) -> Callable:
        def add(fn: Callable) -> Callable:
            for t in types:
                table[t] = fn
            return fn

        return add

    return register


stability = _registrar(STABILITY)
account = _registrar(ACCOUNT)
node = _registrar(NODE)
head = _registrar(HEAD)


def _F(x: Fraction) -> sp.Rational:
    return sp.Rational(x.numerator, x.denominator)


class _Walk:
    """One derivation: the proof builder the obligations go to, and the families whose lemma it already
    holds. ``walk`` is called once on the whole structure and recursively by the family modules."""

    def __init__(self, pb: ProofBuilder) -> None:
        self.pb = pb
        self.families: set[str] = set()

    def _tag(self, path: str, text: str) -> str:
        return f"[{path}] {text}" if path else text

    def check(self, path: str, text: str, formula: Any, why: str, hypotheses=()) -> Obligation:
        return self.pb.check(self._tag(path, text), formula, why, hypotheses=hypotheses)

    def fact(self, path: str, text: str, why: str) -> Obligation:
        return self.pb.fact(self._tag(path, text), why)

    def evaluate(self, path: str, text: str, formula: Any, why: str) -> Obligation:
        return self.pb.evaluate(self._tag(path, text), formula, why)

    @functools.cached_property
    def _rounding_obs(self) -> list:
        return lemmas.grid_rounding()

    def _rounding(self) -> list:
        if "rounding" in self.families:
            return []
        self.families.add("rounding")
        return self._rounding_obs

    def laplace_family(self) -> None:
        if "laplace" in self.families:
            return
        self.families.add("laplace")
        from ..laplace import laplace_l1_steps

        before = len(self.pb.steps)
        laplace_l1_steps(self.pb, 2, grid="discrete Laplace on the grid, in grid steps (b = t = scale/g)")
        for i in range(before, len(self.pb.steps)):
            o = self.pb.steps[i]
            self.pb.steps[i] = Obligation(
                "[family: grid Laplace] " + o.statement, o.formula, o.justification, o.checker, o.discharged, o.detail
            )

    def _family(self, name: str, obligations: tuple) -> None:
        """Add a family's lemma (proved once, symbolically) the first time a node of it appears."""
        if name in self.families:
            return
        self.families.add(name)
        tag = f"[family: {name}] "
        self.pb.add(
            [
                Obligation(tag + o.statement, o.formula, o.justification, o.checker, o.discharged, o.detail)
                for o in obligations
            ]
        )

    # --- dispatch by what a node is ------------------------------------------------------
    def transformation(self, path: str, t: Transformation, space: Space, d: Distance) -> Distance:
        lemma = STABILITY.get(type(t))
        if lemma is None:  # pragma: no cover - every registered transformation has its lemma
            raise AssertionError(f"no stability lemma for {t!r}")
        return lemma(self, path, t, space, d)

    def measurement(self, path: str, m: Any, space: Space, d: Distance) -> Profile:
        privacy_map = ACCOUNT.get(type(m))
        if privacy_map is None:  # pragma: no cover - every registered measurement has its map
            raise AssertionError(f"no privacy map for {m!r}")
        return privacy_map(self, path, m, space, d)

    def walk(self, path: str, step: Step, space: Space, d: Distance) -> Profile | tuple:
        """A Profile for randomized steps; (space, distance) for transformations."""
        if isinstance(step, Transformation):
            return step.out_space(space), self.transformation(path, step, space, d)
        if isinstance(step, Measurement):
            return self.measurement(path, step, space, d)
        if isinstance(step, Chain) and type(step.first) in HEAD:
            return HEAD[type(step.first)](self, path, step, space, d)
        if type(step) in NODE:
            return NODE[type(step)](self, path, step, space, d)
        if isinstance(step, Chain):
            first = self.walk(_join(path, _label(step.first)), step.first, space, d)
            if isinstance(first, Profile):  # what follows is post-processing
                self._post(path, step.second)
                return first
            mid_space, mid_d = first
            return self.walk(path, step.second, mid_space, mid_d)
        raise AssertionError(f"unexpected step {step!r}")  # pragma: no cover

    def _post(self, path: str, step: Step) -> None:
        if isinstance(step, Post):
            for o in lemmas.post_processing(step.describe()):
                self.pb.add(
                    [
                        Obligation(
                            self._tag(path, o.statement), o.formula, o.justification, o.checker, o.discharged, o.detail
                        )
                    ]
                )
        elif isinstance(step, Chain):
            self._post(path, step.first)
            self._post(path, step.second)


def _label(step: Step) -> str:
    if isinstance(step, Chain):
        return _label(step.first)
    text = step.describe()
    return text.split("(")[0]


def _join(path: str, part: str) -> str:
    return f"{path} › {part}" if path else part
