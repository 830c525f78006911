"""Basic one-time RAPPOR (Erlingsson, Pihur & Korolova 2014, "RAPPOR: Randomized Aggregatable
Privacy-Preserving Ordinal Response", CCS: the permanent randomized response step, with a
one-hot encoding instead of a Bloom filter).

A record ``x`` in ``{0..k-1}`` is one-hot encoded into ``k`` bits ``B``; each bit is reported as
``1`` with probability ``f/2``, ``0`` with probability ``f/2`` and the true bit otherwise, with
``f = 2 / (1 + e^{L})``. Each bit is then binary randomized response with log-odds ``L``, and two
records differ in exactly two bits, so the mechanism is ``2L``-DP; the paper's calibration for
ε-DP is ``f = 2 / (1 + e^{ε/2})``, i.e. ``L = ε/2``.

The bits are sampled exactly: each flips with probability exactly ``1/(1 + e^L)``
(:func:`dpharness.mechanisms._exact.bernoulli`), never a rounded float.

The gallery twin :class:`RapporUnhalved` forgets the halving (``f = 2/(1 + e^{ε})``): true ε is 2ε."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from itertools import product
from typing import Any

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import (
    Claim,
    DiscreteLaw,
    Finite,
    FunctionLaw,
    InputSpec,
    Mechanism,
    PureDP,
    Substitute,
    exact,
)
from dpharness.registry import register

from ._exact import ExactProbability, bernoulli, exact_rational
from ._noise import ratio_down

__all__ = ["Rappor", "RapporUnhalved"]

_MAX_ENUMERATED_BITS = 10  # up to 2**10 outcomes the law is a DiscreteLaw with its full support


@register
@dataclass(frozen=True, kw_only=True)
class Rappor(Mechanism):
    """Basic RAPPOR (permanent randomized response on a one-hot vector).

    pmf on input ``x`` in ``{0..k-1}``, output ``y`` in ``{0,1}^k``, with ``b = onehot(x)``::

        P(y | x) = prod_j  (e^L/(1+e^L))^[y_j == b_j] * (1/(1+e^L))^[y_j != b_j]

    (each bit is kept w.p. ``1 - f/2 = e^L/(1+e^L)`` and flipped w.p. ``f/2 = 1/(1+e^L)``,
    ``f = 2/(1+e^L)``, ``L = log_odds``).
    Neighbours: any two records (local DP); they differ in two bits.
    Claim: ε-DP with ε = 2L (defaults L = 1/2, ε = 1)."""

    name = "rappor"
    source = "seed: Erlingsson, Pihur & Korolova 2014 (RAPPOR), basic one-time RAPPOR, one-hot encoding"

    k: int = 4
    log_odds: Any = Fraction(1, 2)
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.integer("k", self.k, minimum=2)
        _v.nonnegative("log_odds", self.log_odds)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, k: int = 4) -> "Rappor":
        """RAPPOR with ``f = 2/(1 + e^{ε/2})`` (log-odds ε/2, rounded down) claiming ε-DP."""
        claim = PureDP(epsilon)
        return cls(k=k, log_odds=ratio_down(claim.epsilon, 2), claim=claim)

    @property
    def f(self) -> float:
        """RAPPOR's ``f`` = 2/(1 + e^L): the probability that a bit is replaced by a fair coin."""
        return 2.0 / (1.0 + float(np.exp(float(self.log_odds))))

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(Finite(tuple(range(self.k))), Substitute(), "record")

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        x = int(data)
        # exact: each bit flips with probability exactly f/2 = 1/(1 + e^L) (L read exactly)
        flip = bernoulli(ExactProbability.odds(1, exact_rational("log_odds", self.log_odds)), (size, self.k), rng)
        out = flip.astype(np.uint8)
        out[:, x] ^= 1
        return out

    def _law(self, data: Any):
        x = int(data)
        k = self.k
        e_l = sp.exp(exact(self.log_odds))
        keep, flip = e_l / (1 + e_l), 1 / (1 + e_l)
        symbols = tuple(sp.Symbol(f"y{j}", integer=True) for j in range(k))
        expr = sp.Mul(
            *[sp.Piecewise((keep, sp.Eq(s, 1 if j == x else 0)), (flip, True)) for j, s in enumerate(symbols)]
        )
        onehot = np.zeros(k, dtype=np.int64)
        onehot[x] = 1
        l_keep = float(sp.log(keep).evalf(30))
        l_flip = float(sp.log(flip).evalf(30))

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            out = np.asarray(outputs).reshape(-1, k)
            valid = np.all((out == 0) | (out == 1), axis=1)
            agree = (out == onehot).sum(axis=1)
            return np.where(valid, agree * l_keep + (k - agree) * l_flip, -np.inf)

        if k <= _MAX_ENUMERATED_BITS:
            outcomes = tuple(product((0, 1), repeat=k))
            probs = tuple(
                keep ** int(sum(o[j] == onehot[j] for j in range(k)))
                * flip ** int(sum(o[j] != onehot[j] for j in range(k)))
                for o in outcomes
            )
            return DiscreteLaw(outcomes=outcomes, probs=probs, symbols=symbols, expr=expr)
        return FunctionLaw("discrete", log_prob, symbols, expr)

    def example_pair(self) -> tuple[Any, Any]:
        return 0, 1


@register
@dataclass(frozen=True, kw_only=True)
class RapporUnhalved(Rappor):
    """RAPPOR calibrated with ``f = 2/(1 + e^{ε})`` instead of ``2/(1 + e^{ε/2})``.

    Same pmf as :class:`Rappor` with ``L = ε``; since two bits differ between any two records the
    true privacy loss is ``2L = 2ε``. Defaults: L = 1 claiming ε = 1 (true ε = 2)."""

    name = "rappor_unhalved"
    source = "gallery: Erlingsson, Pihur & Korolova 2014 (RAPPOR) with the per-bit budget not halved"
    buggy = True
    bug = (
        "f = 2/(1 + e^ε) spends the whole ε on each bit, but a change of record flips two bits "
        "of the one-hot encoding: the true privacy loss is 2ε"
    )
    true_epsilon = 2.0

    log_odds: Any = 1

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, k: int = 4) -> "RapporUnhalved":
        """The buggy calibration: log-odds ε (not ε/2) while claiming ε-DP."""
        claim = PureDP(epsilon)
        return cls(k=k, log_odds=claim.epsilon, claim=claim)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
