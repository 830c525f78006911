"""The grid-Laplace family's privacy map (Dwork, McSherry, Nissim & Smith 2006; grid output after
Mironov 2012), proved once and reused: by :mod:`dpharness.proofs.parts` for every ``dp.laplace``
node (the catalog's ``laplace``, ``discrete_laplace``, clamped statistics, ``noisy_histogram``, ...),
and by the hand-written gallery proofs.

:func:`laplace_l1_steps`: normaliser of the discrete Laplace on the grid, the log-space loss of one
coordinate ``(|y − c'| − |y − c|)/b``, the L1 triangle inequality (a case split on the orderings of
(y_i, c_i, c'_i) with slack variables), and the division by b."""

from __future__ import annotations

import sympy as sp

from . import _lemmas as lemmas
from ._kernel import ProofBuilder, bounded_by, sym

__all__ = ["laplace_l1_steps"]


def laplace_l1_steps(pb: ProofBuilder, dim: int, *, grid: str) -> None:
    """The grid-independent part: normaliser, log-space loss, L1 triangle inequality, division by b."""
    u = sym("u", positive=True)
    r = sp.exp(-u)
    pb.check(
        "normaliser: tanh(u/2) · Σ_{k∈Z} e^{-|k|u} = tanh(u/2)(1 + e^{-u})/(1 - e^{-u}) = 1 (u = g/b > 0)",
        sp.Eq(sp.tanh(u / 2).rewrite(sp.exp) * (1 + r) / (1 - r), 1),
        "geometric series; tanh in exponentials",
    )
    y, c, c2 = sym("y"), sym("c"), sym("c'")
    b, T = sym("b", positive=True), sym("T", positive=True)
    loss = sp.log(T * sp.exp(-sp.Abs(y - c) / b)) - sp.log(T * sp.exp(-sp.Abs(y - c2) / b))
    pb.check(
        f"one coordinate's log-space loss: ln P(y|c) - ln P(y|c') = (|y - c'| - |y - c|)/b (normaliser T cancels; {grid})",
        sp.Eq(loss, (sp.Abs(y - c2) - sp.Abs(y - c)) / b),
        "expand_log, T > 0",
    )
    pb.fact(
        "the pmf is a product over coordinates, so the loss is the sum of the coordinates' losses",
        "independent noise per coordinate; ln of a product",
    )
    if dim <= 6:
        pb.add(lemmas.l1_triangle(dim))
    else:
        pb.add(lemmas.triangle_inequality())
        pb.fact(f"sum the 1-D triangle inequality over the {dim} coordinates", "inequalities add")
    D = sym("Delta_g", positive=True)
    dist, _ = bounded_by(D, "s")
    pb.check(
        "with ||c - c'||_1 = Δ_g - s (s >= 0, i.e. ||c - c'||_1 <= Δ_g): loss <= ||c - c'||_1/b <= Δ_g/b",
        sp.Le(dist / b, D / b),
        "slack substitution d = Δ_g - s, b > 0",
    )
