"""The textbook floating-point Laplace mechanism ``x + numpy.random.Generator.laplace(0, scale)``,
in the gallery: Mironov 2012, "On significance of the least significant bits for differential
privacy" (CCS 2012), §3-4, shows that the set of doubles such an implementation can output
depends on x, so some outputs are possible on one input and impossible on its neighbour: the
implementation's true ε is ∞ even though the real-arithmetic mechanism is 1/scale-DP.
The catalog's ``laplace`` (grid + discrete noise) and ``snapping`` are the fixes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import BoundedChange, FunctionLaw, InputSpec, Mechanism, PureDP, RealInterval, exact
from dpharness.registry import register

from ._literature import exact_ratio, laplace_logpdf, sym_laplace_pdf

__all__ = ["TextbookLaplace"]


@register
@dataclass(frozen=True, kw_only=True)
class TextbookLaplace(Mechanism):
    """GALLERY. ``y = x + L`` computed in doubles, ``L = rng.laplace(0, scale)`` (numpy's
    inverse-cdf sampler on a 53-bit uniform).

    Density (of the real-arithmetic mechanism it imitates; the float implementation's law is a
    discrete law on doubles that this density only approximates):
    ``Π_i exp(-|y_i - x_i|/scale) / (2·scale)``.
    Neighbours: ``||x - x'||_1 <= sensitivity``. Claim: PureDP(sensitivity/scale) = PureDP(1).
    True ε = ∞ as implemented (Mironov 2012): the float output y = x ⊕ L reveals x through which
    doubles are reachable. Defaults: scale = 1, sensitivity = 1, dim = 1.
    Output: float64 ``(size,)`` (dim = 1) or ``(size, dim)``."""

    name: ClassVar[str] = "textbook_laplace"
    source: ClassVar[str] = "Mironov 2012, §3-4 (the naive floating-point Laplace mechanism)"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "floating-point Laplace: the low-order bits of x + L depend on x (Mironov 2012)"
    true_epsilon: ClassVar[float] = math.inf

    scale: Any = 1
    sensitivity: Any = 1
    dim: int = 1

    def _check(self) -> None:
        _v.positive("scale", self.scale)
        _v.positive("sensitivity", self.sensitivity)
        _v.integer("dim", self.dim, minimum=1)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, sensitivity: Any = 1, dim: int = 1):
        """``scale = Δ/ε`` (the textbook calibration), claim PureDP(ε)."""
        epsilon = _v.positive("epsilon", epsilon)
        return cls(scale=exact_ratio(sensitivity, epsilon), sensitivity=sensitivity, dim=dim, claim=PureDP(epsilon))

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(RealInterval(), BoundedChange(self.sensitivity, "l1"), "vector", dim=self.dim, any_data=True)

    def example_pair(self) -> tuple[Any, Any]:
        """0 vs sensitivity in the first coordinate."""
        a = np.zeros(self.dim)
        b = a.copy()
        b[0] = float(self.sensitivity)
        return a, b

    def _sample(self, data, size, rng):
        out = np.asarray(data, dtype=float)[None, :] + rng.laplace(0.0, float(self.scale), (size, self.dim))
        return out[:, 0] if self.dim == 1 else out

    def _law(self, data):
        x = np.asarray(data, dtype=float)
        b = float(self.scale)
        ys = sp.symbols(f"y1:{self.dim + 1}", real=True)
        bs = exact(self.scale)
        expr = sp.Mul(*[sym_laplace_pdf(ys[i] - exact(float(x[i])), bs) for i in range(self.dim)])

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            out = np.asarray(outputs, dtype=float).reshape(-1, self.dim)
            return laplace_logpdf(out - x[None, :], b).sum(axis=1)

        return FunctionLaw("continuous", log_prob, ys, expr)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
