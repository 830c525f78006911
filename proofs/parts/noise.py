"""Privacy maps of the noise measurements (:mod:`dpharness.mechanisms.parts.noise`), each proved once and
instantiated at the node's input distance in grid steps (:func:`grid_units`: the grid-rounding lemma):
grid Laplace (normaliser, log-space loss, triangle inequality; pure DP ε = D/t) and the discrete
Gaussian (Rényi divergence by completing the square, Canonne, Kamath & Steinke 2020; ρ = D₂²/(2τ²)
zCDP), each with the leaf the PLD accountant reads."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import sympy as sp

from dpharness.mechanisms.parts._base import Distance, Space
from dpharness.mechanisms.parts._grid import grid_steps
from dpharness.mechanisms.parts.noise import GridGaussian, GridLaplace

from .. import _account as A
from .._kernel import sym
from .._model import Obligation
from ._walk import _F, Profile, account


def grid_units(walk: Any, path: str, m: Any, space: Space, d: Distance) -> tuple[sp.Expr, sp.Expr]:
    """(D₁, D₂²): bounds on the L1 and squared-L2 distance of the rounded centres, in grid steps."""
    g = m.g
    d1, d2, how = grid_steps(space, d, g)
    if d.l1 != 0:
        walk.fact(
            path,
            "the sampler adds the noise to each rounded centre as an exact integer of any size (no centre is "
            "capped), and the float it releases is a function of that integer alone (post-processing)",
            "exact integer centres",
        )
    if how == "zero":
        walk.fact(
            path,
            "the value is the same on neighbouring inputs (distance 0), so the rounded centres agree",
            "stability 0",
        )
    elif how == "exact":
        walk.fact(
            path,
            f"values are multiples of {space.quantum}, a multiple of the grid g = {g}: rounding to the grid "
            "is exact, so distances in grid steps are the distances divided by g",
            "floor(v/g + 1/2) = v/g when v/g is an integer",
        )
    else:
        walk.pb.add(walk._rounding())
        if how == "scalar":
            walk.evaluate(
                path,
                f"rounding to g = {g}: |c − c'| <= ceil(Δ/g) = {d1} grid steps",
                sp.Eq(sp.ceiling(_F(d.l1 / g)), _F(d1)),
                "grid-rounding lemma, exact arithmetic",
            )
        else:
            walk.evaluate(
                path,
                f"rounding to g = {g}: ||c − c'||₁ <= ceil(Δ₁/g) + dim − 1 = {d1} grid steps; "
                f"||c − c'||₂² <= Σ(d_i + 1)² <= Δ₂²/g² + 2Δ₁/g + dim = {d2}",
                sp.Eq(sp.ceiling(_F(d.l1 / g)) + space.dim - 1, _F(d1)),
                "grid-rounding lemma (per coordinate |r(u) − r(v)| <= |u − v| + 1)",
            )
    return _F(d1), _F(d2)


def gaussian_family(walk) -> None:
    if "gaussian" in walk.families:
        return
    walk.families.add("gaussian")
    y, a, d, sg = sym("y"), sym("alpha", positive=True), sym("d", positive=True), sym("tau2", positive=True)
    tag = "[family: discrete Gaussian] "
    walk.pb.check(
        tag + "completing the square: α y² + (1−α)(y − d)² = (y − (1−α)d)² + α(1−α)d²",
        sp.Eq(sp.expand(a * y**2 + (1 - a) * (y - d) ** 2), sp.expand((y - (1 - a) * d) ** 2 + a * (1 - a) * d**2)),
        "polynomial identity",
    )
    walk.pb.check(
        tag + "hence D_α(N_Z(c, τ²) || N_Z(c', τ²)) <= (1/(α−1))·α(α−1)d²/(2τ²) = α d²/(2τ²)",
        sp.Eq(sp.simplify(-a * (1 - a) * d**2 / (2 * sg) / (a - 1)), a * d**2 / (2 * sg)),
        "algebra",
    )
    walk.pb.add(
        [
            Obligation(
                tag + "Σ_y e^{−(y − s)²/(2τ²)} <= Σ_y e^{−y²/(2τ²)} for every real shift s",
                sp.true,
                "cited: Canonne, Kamath & Steinke 2020 (the discrete Gaussian's theta sum is maximal "
                "at integer shifts), so the shifted normaliser never exceeds Z",
                "lemma",
                True,
            )
        ]
    )
    walk.pb.add(
        [
            Obligation(
                tag + "independent coordinates: Rényi divergences add, so D_α <= α ||c − c'||₂²/(2τ²); "
                "i.e. ρ-zCDP with ρ = D₂²/(2τ²)",
                sp.true,
                "Rényi divergence of a product measure is the sum (Mironov 2017)",
                "lemma",
                True,
            )
        ]
    )


def _pld_leaf(kind: str, param: sp.Expr, d1: sp.Expr, space: Space) -> tuple | None:
    """The worst pair of a scalar grid leaf for the PLD accountant: centres at most D = floor(d1) grid steps
    apart (the centres are integers), and the leaf's hockey-stick divergence grows with the shift, so
    the pair (0, D) dominates. None for a vector leaf (no single scalar pair dominates it here)."""
    if space.dim != 1:
        return None
    shift = int(sp.floor(d1))
    return () if shift == 0 else ((kind, Fraction(int(param.p), int(param.q)), shift),)


@account(GridLaplace, GridGaussian)
def _grid_noise(walk: Any, path: str, m: Any, space: Space, d: Distance) -> Profile:
    d1, d2 = grid_units(walk, path, m, space, d)
    if isinstance(m, GridLaplace):
        walk.laplace_family()
        t = _F(m.t)
        eps = d1 / t
        walk.evaluate(
            path,
            f"{m.describe()}: t = scale/g = {t}; ε = D/t = {d1}/{t} = {eps}",
            sp.Eq(eps, d1 / t),
            "the family's privacy map at distance D (triangle inequality)",
        )
        one_d: tuple | None = ("laplace", int(d1), _F(m.scale_exact), _F(m.g)) if space.dim == 1 else None
        return A.leaf(eps, eps**2 / 2, one_d, _pld_leaf("laplace", t, d1, space))
    gaussian_family(walk)
    tau2 = _F(m.tau2)
    rho = d2 / (2 * tau2)
    walk.evaluate(
        path,
        f"{m.describe()}: τ² = (σ/g)² = {tau2}; ρ = D₂²/(2τ²) = {rho}",
        sp.Eq(rho, d2 / (2 * tau2)),
        "the family's privacy map at distance D₂",
    )
    one_d = ("gaussian", tau2, int(d1)) if space.dim == 1 and int(d1) != 0 else None
    return A.leaf(None if rho != 0 else sp.Integer(0), rho, one_d, _pld_leaf("gaussian", tau2, d1, space))
