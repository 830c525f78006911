"""The exponential mechanism over a finite set of candidates (McSherry & Talwar 2007, "Mechanism
design via differential privacy", FOCS; Dwork & Roth 2014, "The Algorithmic Foundations of
Differential Privacy", Def. 3.4 and Thm. 3.10).

Candidate ``r`` is chosen with probability proportional to ``exp(beta * u_r)``; with utilities of
sensitivity Δ (each utility moves by at most Δ between neighbours) this is ``2·beta·Δ``-DP, so the
textbook calibration is ``beta = ε / (2Δ)``.

The gallery twin :class:`ExponentialNoHalf` uses ``beta = ε / Δ`` (the missing /2): true ε is 2ε."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import (
    BoundedChange,
    Claim,
    DiscreteLaw,
    InputSpec,
    Mechanism,
    PureDP,
    RealInterval,
    exact,
)
from dpharness.registry import register

from ._noise import ratio_down

__all__ = ["ExponentialMechanism", "ExponentialNoHalf"]


@register
@dataclass(frozen=True, kw_only=True)
class ExponentialMechanism(Mechanism):
    """The exponential mechanism on a vector of utilities ``u`` (one per candidate).

    pmf on input ``u`` in ``R^n`` (n = ``n_candidates``), output ``r`` in ``{0..n-1}``::

        P(r | u) = exp(beta * u_r) / sum_j exp(beta * u_j)

    Neighbours: utility vectors at L-infinity distance <= ``sensitivity``
    (``BoundedChange(sensitivity, "linf")``).
    Claim: ε-DP with ε = 2·beta·sensitivity (defaults beta = 1/2, Δ = 1: ε = 1)."""

    name = "exponential"
    source = "seed: McSherry & Talwar 2007, exponential mechanism over finite candidates"

    n_candidates: int = 4
    sensitivity: Any = 1
    beta: Any = Fraction(1, 2)
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.integer("n_candidates", self.n_candidates, minimum=2)
        _v.positive("sensitivity", self.sensitivity)
        _v.nonnegative("beta", self.beta)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, n_candidates: int = 4, sensitivity: Any = 1) -> "ExponentialMechanism":
        """beta = ε / (2Δ) (rounded down); claims ε-DP."""
        claim = PureDP(epsilon)
        _v.positive("sensitivity", sensitivity)
        beta = ratio_down(claim.epsilon, 2 * Fraction(sensitivity))
        return cls(n_candidates=n_candidates, sensitivity=sensitivity, beta=beta, claim=claim)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(
            RealInterval(), BoundedChange(self.sensitivity, "linf"), "vector", dim=self.n_candidates, any_data=True
        )

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        from ._exact import categorical_exp, exact_rational

        beta = exact_rational("beta", self.beta)
        u = [Fraction(float(v)) for v in np.asarray(data, dtype=float)]
        return categorical_exp([beta * v for v in u], size, rng)  # exact: P(r) = e^{β u_r} / Σ e^{β u}

    def _law(self, data: Any) -> DiscreteLaw:
        u = [exact(float(v)) for v in np.asarray(data, dtype=float)]
        b = exact(self.beta)
        weights = [sp.exp(b * v) for v in u]
        z = sp.Add(*weights)
        r = sp.Symbol("r", integer=True)
        expr = sp.Piecewise(*[(w / z, sp.Eq(r, i)) for i, w in enumerate(weights)], (0, True))
        # exact numbers for the prover, but stable floats for the sum check (exp(beta*u) may overflow)
        probs = tuple(sp.exp(b * v - _log_sum_exp_exact(b, u)) for v in u)
        return DiscreteLaw(outcomes=tuple(range(self.n_candidates)), probs=probs, symbols=(r,), expr=expr)

    def example_pair(self) -> tuple[Any, Any]:
        """u = (0, 4Δ, ..., 4Δ) vs u' = (-Δ, 5Δ, ..., 5Δ): candidate 0 loses Δ while every other
        candidate gains Δ, so P(0)/P'(0) is within a few percent of e^{2·beta·Δ} at the defaults
        while P(0) stays observable (about 4%)."""
        d = float(self.sensitivity)
        u = np.full(self.n_candidates, 4 * d)
        v = np.full(self.n_candidates, 5 * d)
        u[0], v[0] = 0.0, -d
        return u, v


def _log_sum_exp_exact(b, u) -> sp.Expr:
    """log sum_j exp(b u_j) as an exact expression, shifted by the max so float evaluation is stable."""
    top = max(u)
    return b * top + sp.log(sp.Add(*[sp.exp(b * (v - top)) for v in u]))


@register
@dataclass(frozen=True, kw_only=True)
class ExponentialNoHalf(ExponentialMechanism):
    """The exponential mechanism calibrated with ``beta = ε/Δ`` (the /2 forgotten).

    Same pmf and neighbours as :class:`ExponentialMechanism`; the true privacy loss is
    2·beta·Δ = 2ε (the supremum is approached when the other candidates dominate the normaliser).
    Defaults: beta = 1, Δ = 1 claiming ε = 1 (true ε = 2)."""

    name = "exponential_no_half"
    source = "gallery: McSherry & Talwar 2007 exponential mechanism with beta = ε/Δ instead of ε/(2Δ)"
    buggy = True
    bug = (
        "beta = ε/Δ omits the factor 1/2: a change of Δ in the utilities moves both the chosen "
        "candidate's score and the normaliser, so the true privacy loss is 2·beta·Δ = 2ε"
    )
    true_epsilon = 2.0

    beta: Any = 1

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, n_candidates: int = 4, sensitivity: Any = 1) -> "ExponentialNoHalf":
        """The buggy calibration beta = ε/Δ while claiming ε-DP."""
        claim = PureDP(epsilon)
        _v.positive("sensitivity", sensitivity)
        return cls(
            n_candidates=n_candidates,
            sensitivity=sensitivity,
            beta=ratio_down(claim.epsilon, Fraction(sensitivity)),
            claim=claim,
        )


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
