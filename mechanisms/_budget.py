"""Noise given the budget it should spend instead of its scale, and compositions that split a total.

``dp.laplace(epsilon=0.5)``, ``dp.gaussian(rho=0.1)``, ``dp.gaussian(epsilon=1, delta=1e-6)`` and
``dp.compose(..., epsilon=1)`` declare what a part may spend. They are placeholders in the structure:
``dpharness.parts.mechanism(...)`` replaces each of them, before anything is sampled or proved,
with the concrete measurement whose scale is derived from the stability of what precedes it
(:mod:`dpharness.proofs._calibrate`, the inverse of the proof's own privacy map). The sampler and
the prover then see only that concrete measurement, and its ``describe()`` says where the scale
came from. The derivation is a search for a scale; the proof then checks the claim as for any other
scale. A placeholder that reaches a sampler or the prover unresolved is refused.

A split composition ``dp.compose(p_1, ..., p_k, epsilon=ε, delta=δ, rho=ρ, weights=(w_1, ..., w_k))``
gives branch i the share ``w_i / Σw`` of ε or of ρ (basic and zCDP composition add them). When a
branch holds a Gaussian, an (ε, δ) total is first converted to the largest ρ whose zCDP conversion
gives (ε, δ), and ρ is split: Gaussians compose exactly in zCDP, while splitting ε and δ by basic
composition would cost about 3× the noise over ten branches. A Laplace branch then spends
ε_i = √(2ρ_i). Inside a branch, a plain
``dp.compose`` splits its share equally, and ``dp.repeat(n, part)`` gives each repetition 1/n of it.
The noise in a split branch is written without a budget of its own (``dp.laplace()``,
``dp.gaussian()``). The proof of the whole may be tighter than the split (PLD composition), so a
split calibration is conservative (ten Gaussians at (1, 1e-6): true ε(1e-6) = 0.93), as budget
splits are in OpenDP and Tumult.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpharness.errors import ParameterError

from . import parts as P

__all__ = ["NoiseBudget", "SplitBudget", "has_budget"]


def _positive(name: str, value: Any) -> Any:
    if value is None:
        return None
    v = P._plain(name, value)
    if not Fraction(v) > 0:
        raise ParameterError(f"{name}={value!r} must be > 0; pass the positive budget this part may spend.")
    return v


@dataclass(frozen=True)
class NoiseBudget(P.Step):
    """Grid noise of ``family`` (``"laplace"`` or ``"gaussian"``) on the grid ``granularity * Z`` that
    may spend ``epsilon`` (Laplace: pure ε), ``rho`` (Gaussian: ρ-zCDP) or ``(epsilon, delta)``
    (Gaussian); all None: its share of the enclosing ``dp.compose(..., epsilon=...)``. Resolved into
    :class:`~dpharness.mechanisms.parts.GridLaplace` / ``GridGaussian`` by ``dp.mechanism``."""

    family: str
    granularity: Any
    epsilon: Any = None
    delta: Any = None
    rho: Any = None

    def __post_init__(self) -> None:
        from ._noise import check_granularity

        object.__setattr__(self, "granularity", P._plain("granularity", self.granularity))
        check_granularity("granularity", self.granularity)
        for name in ("epsilon", "delta", "rho"):
            object.__setattr__(self, name, _positive(name, getattr(self, name)))
        if self.family == "laplace":
            if self.delta is not None or self.rho is not None:
                raise ParameterError("laplace noise is pure ε-DP; pass epsilon= only (delta= and rho= are for "
                                     "dp.gaussian).")
        elif self.family == "gaussian":
            if self.rho is not None and (self.epsilon is not None or self.delta is not None):
                raise ParameterError(f"gaussian(rho={self.rho!r}, epsilon={self.epsilon!r}, delta={self.delta!r}): pass "
                                     "rho= alone or epsilon= with delta=, not both.")
            if (self.epsilon is None) != (self.delta is None):
                raise ParameterError(f"gaussian(epsilon={self.epsilon!r}, delta={self.delta!r}): Gaussian noise is not "
                                     "pure DP; pass both epsilon= and delta= (or rho=).")
            if self.delta is not None and not Fraction(self.delta) < 1:
                raise ParameterError(f"delta={self.delta!r} must be < 1; pass a small δ such as 1e-6.")
        else:
            raise ParameterError(f"family={self.family!r}; pass 'laplace' or 'gaussian'.")

    @property
    def budgeted(self) -> bool:
        return self.epsilon is not None or self.rho is not None

    def describe(self) -> str:
        what = ", ".join(f"{n}={getattr(self, n)!r}" for n in ("epsilon", "delta", "rho") if getattr(self, n) is not None)
        return f"{self.family}({what or 'budget from the enclosing compose'})"


@dataclass(frozen=True)
class SplitBudget(P.Step):
    """``dp.compose(*parts, epsilon=, delta=, rho=, weights=)``: every part runs on the same input (as
    :class:`~dpharness.mechanisms.parts.Compose`) and the total budget is split over them by
    ``weights`` (equal by default). Resolved into a plain ``Compose`` by ``dp.mechanism``."""

    parts: tuple
    epsilon: Any = None
    delta: Any = None
    rho: Any = None
    weights: tuple | None = None

    def __post_init__(self) -> None:
        P.Compose(tuple(self.parts))  # the same validation of the parts
        object.__setattr__(self, "parts", tuple(self.parts))
        for name in ("epsilon", "delta", "rho"):
            object.__setattr__(self, name, _positive(name, getattr(self, name)))
        if self.epsilon is None and self.rho is None:
            raise ParameterError(f"compose(delta={self.delta!r}) splits no budget: pass epsilon= (with delta= when a part is "
                                 "Gaussian) or rho=.")
        if self.rho is not None and (self.epsilon is not None or self.delta is not None):
            raise ParameterError("compose(rho=..., epsilon=...): pass a zCDP total (rho=) or an (ε, δ) total, not both.")
        if self.delta is not None and not Fraction(self.delta) < 1:
            raise ParameterError(f"delta={self.delta!r} must be < 1; pass a small δ such as 1e-6.")
        if self.weights is not None:
            w = tuple(P._plain("weights", x) for x in self.weights)
            if len(w) != len(self.parts) or any(not Fraction(x) > 0 for x in w):
                raise ParameterError(f"weights={self.weights!r}: pass one positive weight per part ({len(self.parts)}).")
            object.__setattr__(self, "weights", w)

    def describe(self) -> str:
        total = ", ".join(f"{n}={getattr(self, n)!r}" for n in ("epsilon", "delta", "rho") if getattr(self, n) is not None)
        return "compose(" + ", ".join(p.describe() for p in self.parts) + f"; split {total})"


def has_budget(step: Any) -> bool:
    """Whether a budget placeholder is anywhere in the structure."""
    return any(isinstance(n, (NoiseBudget, SplitBudget)) for n in P.walk_nodes(step))


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
