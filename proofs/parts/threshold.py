"""Privacy map of the threshold parts (:mod:`dpharness.mechanisms.parts.threshold`): above threshold / the
sparse vector technique of Lyu, Su & Li 2017 (Alg. 1) with discrete Laplace noise on a grid, proved once
per family and instantiated at the node's parameters by the walk of :mod:`dpharness.proofs.parts`:

* the queries' sensitivity: each query is walked by the same stability lemmas as every transformation
  of the algebra (a user query's sensitivity is a stated precondition); rounding to the grid moves each
  answer by at most D grid steps (D = Δ/g on multiples of g, else ceil(Δ/g));
* general queries: the randomness alignment of the catalog's sparse vector proof, for EVERY number of
  queries (:func:`._alignment.sparse_vector_all_n`: ρ -> ρ + D, ν_i -> ν_i + D + c_i − c'_i on each ⊤),
  restricted to integer noise (every shift is an integer, a bijection of Z^{n+1}; the discrete Laplace pmf
  ratio is bounded by the same triangle lemma): ε = D/t_ρ + 2mD/t_ν, m = min(c, n);
* monotone queries (on every ordered neighbouring pair all answers move up, or all move down: counts
  under add/remove): two alignments, one per direction (up: ρ -> ρ + D, ν_i -> ν_i + D − e_i on each ⊤;
  down: ρ unchanged, ν_i -> ν_i + e_i on each ⊤), ε = D/t_ρ + mD/t_ν (Lyu, Su & Li 2017, §4.2).

Both bounds are the supremum of the loss over inputs (approached when many ⊥ answers push the threshold
noise into its upper tail, where both pmf ratios are exact exponentials), so the claim is proved at the
algorithm's exact ε. The node's account is pure: ε, ρ = ε²/2, no single-leaf profile, no PLD."""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import sympy as sp

from dpharness.core import AddRemove
from dpharness.mechanisms.parts import threshold as T
from dpharness.mechanisms.parts._base import Distance, Space, _scalar_distance

from .. import _account as A
from .._kernel import discharge, slack, sym
from .._model import Obligation

__all__ = ["account", "STEP_TYPES"]

STEP_TYPES = T.STEP_TYPES


def _F(x: Fraction) -> sp.Rational:
    return sp.Rational(x.numerator, x.denominator)


def _argued(statement: str, justification: str) -> Obligation:
    return Obligation(statement, sp.true, justification, "structural", True, "argued in the justification")


# --------------------------------------------------------------------------- family lemmas (proved once)

_INTEGERS = _argued(
    "on the integers: the answers' rounded centres c_i, c'_i, the rounded threshold T_g, D and the noise are integers, "
    "so every alignment shift (of ρ and of each ν_i) is an integer and η -> η + s maps Z^{n+1} onto Z^{n+1} (a "
    "bijection); the discrete Laplace pmf ratio p(η)/p(η + s) = Π_k e^{(|η_k + s_k| − |η_k|)/t_k} (the normalisers "
    "cancel) <= e^{Σ_k |s_k|/t_k} by the triangle lemma; sums over Z^{n+1} replace the integrals: "
    "P_D(ω) = Σ_{η ∈ E_ω(D)} p(η) <= e^{cost} Σ_{η ∈ E_ω(D')} p(η) = e^{cost} P_D'(ω)",
    "randomness alignment (Lyu, Su & Li 2017 proof of Thm. 2; Ding et al. 2019) with discrete Laplace noise "
    "(Canonne, Kamath & Steinke 2020); the sampler draws ρ and every ν_i by _exact.discrete_laplace",
)

_UNUSED = _argued(
    "the sampler draws ν_i for every query, also after the c-th ⊤; those draws are never read (the answer is −1), "
    "so the output's law is that of the algorithm that stops",
    "independent unused randomness does not change the law (mechanisms.parts.threshold.AboveThreshold.run)",
)


@functools.lru_cache(maxsize=None)
def _general_family() -> tuple[Obligation, ...]:
    from .._alignment import sparse_vector_all_n

    lemma = sparse_vector_all_n(
        2, 1, sym("b_rho", positive=True), sym("b_nu", positive=True), sym("Delta", positive=True)
    )
    return tuple(lemma.obligations) + (
        _argued(
            "the lemma's comparison is the sampler's: ⊤ iff c_i + ν_i >= T_g + ρ (non-strict), read with Δ = D grid "
            "steps, b_ρ = t_ρ and b_ν = t_ν",
            "mechanisms.parts.threshold.AboveThreshold.run",
        ),
        _INTEGERS,
        _UNUSED,
    )


@functools.lru_cache(maxsize=None)
def _monotone_family() -> tuple[Obligation, ...]:
    """ln P_D(ω) − ln P_D'(ω) <= D/t_ρ + m·D/t_ν when every answer moves the same way by at most D."""
    d, tr, tn = sym("D", positive=True), sym("t_rho", positive=True), sym("t_nu", positive=True)
    Tg, rho, ci = sym("T_g"), sym("rho"), sym("c_i")
    a, b, e = slack("a"), sym("b", positive=True), slack("e_i")
    m, s_t = sym("m", integer=True, positive=True), slack("s_t")
    in_range = [sp.Le(e, d)]
    obs: list[Obligation] = [
        _argued(
            "monotone neighbours: for the ordered pair (D, D') either every rounded answer goes up, c'_i = c_i + e_i, "
            "or every one goes down, c'_i = c_i − e_i, with 0 <= e_i <= D (rounding floor(v/g + 1/2) is "
            "non-decreasing, so it keeps the direction)",
            "the queries' monotonicity (checked at the node)",
        ),
        # scores up
        discharge(
            "[answers up; alignment ρ' = ρ + D, ν'_i = ν_i + D − e_i on ⊤, ν_i unchanged on ⊥] a ⊤ on D "
            "(c_i + ν_i = T_g + ρ + a) stays ⊤: c'_i + ν'_i >= T_g + ρ'",
            sp.Ge((ci + e) + (Tg + rho + a - ci) + d - e, Tg + rho + d),
            "algebra; a >= 0",
            hypotheses=in_range,
        ),
        discharge(
            "[answers up] a ⊥ on D (c_i + ν_i = T_g + ρ − b, b > 0) stays ⊥: c'_i + ν_i < T_g + ρ'",
            sp.Lt((ci + e) + (Tg + rho - b - ci), Tg + rho + d),
            "z3; e_i <= D, b > 0",
            hypotheses=in_range,
        ),
        discharge(
            "[answers up] cost: |D|/t_ρ for ρ, |D − e_i|/t_ν <= D/t_ν for each ⊤",
            sp.Le(sp.Abs(d - e) / tn, d / tn),
            "z3; 0 <= e_i <= D",
            hypotheses=in_range,
        ),
        # scores down
        discharge(
            "[answers down; alignment ρ' = ρ, ν'_i = ν_i + e_i on ⊤, ν_i unchanged on ⊥] a ⊤ on D stays ⊤: "
            "c'_i + ν'_i >= T_g + ρ",
            sp.Ge((ci - e) + (Tg + rho + a - ci) + e, Tg + rho),
            "algebra; a >= 0",
        ),
        discharge(
            "[answers down] a ⊥ on D stays ⊥: c'_i + ν_i < T_g + ρ",
            sp.Lt((ci - e) + (Tg + rho - b - ci), Tg + rho),
            "z3; e_i >= 0, b > 0",
        ),
        discharge(
            "[answers down] cost: 0 for ρ, |e_i|/t_ν <= D/t_ν for each ⊤",
            sp.Le(sp.Abs(e) / tn, d / tn),
            "z3; 0 <= e_i <= D",
            hypotheses=in_range,
        ),
        _argued(
            "output preserved for every n: by induction on i = 1..n both runs have the same count of ⊤ answers "
            "before query i, hence the same liveness (count < c), the same answer at i (the steps above) and the "
            "same count after i; a query answered ⊥ or not answered has zero ν-shift",
            "induction on the query index; conditional on the noise the algorithm is a deterministic loop",
        ),
        discharge(
            "[answers up] total cost D/t_ρ + t·D/t_ν <= D/t_ρ + m·D/t_ν for t = m − s_t ⊤ answers, m = min(c, n)",
            sp.Le(d / tr + (m - s_t) * d / tn, d / tr + m * d / tn),
            "s_t >= 0",
        ),
        discharge(
            "[answers down] total cost t·D/t_ν <= D/t_ρ + m·D/t_ν",
            sp.Le((m - s_t) * d / tn, d / tr + m * d / tn),
            "s_t >= 0, D/t_ρ > 0",
        ),
        _argued(
            "(D, D') and (D', D) swap up and down, so both directions are bounded by D/t_ρ + m·D/t_ν",
            "Lyu, Su & Li 2017 §4.2 (monotonic queries: ν_i ~ Lap(cΔ/ε₂) suffices)",
        ),
        _INTEGERS,
        _UNUSED,
    ]
    return tuple(obs)


# --------------------------------------------------------------------------- the walk's hook


def _steps(q_space: Space, dist: Distance, g: Fraction) -> tuple[Fraction, str]:
    """Grid steps D_i of one query's rounded answer, and how."""
    if dist.linf == 0:
        return Fraction(0), "zero"
    q = q_space.quantum
    if q is not None and (q / g).denominator == 1:
        return dist.linf / g, "exact"
    return Fraction(math.ceil(dist.linf / g)), "rounded"


def account(walk: Any, path: str, m: T.AboveThreshold, space: Space, d: Distance) -> A.Account:
    g = m.g
    tr, tn = _F(m.t_rho), _F(m.t_nu)
    rows: list[tuple[Fraction, str]] = []
    if m.queries is None:
        n = space.dim
        steps, how = _steps(space, d, g)
        rows = [(steps, how)]
        monotone = bool(d.monotone)
        walk.fact(
            path,
            f"the queries are the {n} coordinates of {space.describe()}, each moving by at most "
            f"Δ = {d.linf} on neighbouring inputs" + (" (all in the same direction)" if monotone else ""),
            "the preceding step's stability (L∞" + (", monotone" if monotone else "") + ")",
        )
    else:
        n = len(m.queries)
        directions = []
        for i, (q, q_space) in enumerate(zip(m.queries, m.query_spaces(space))):
            qpath = f"{path or 'above_threshold'} › query {i + 1}"
            if isinstance(q, T.UserQuery):
                dist = _scalar_distance(Fraction(q.sensitivity))
                walk.pb.precondition(
                    f"[{qpath}] STATED (not derived): the user function {q.describe()} moves by at most "
                    f"{q.sensitivity} between neighbouring data sets ({d.describe()})"
                    + ("; adding a record never decreases it, removing never increases it" if q.increasing else "")
                )
            else:
                _, dist = walk.walk(qpath, q, space, d)
            rows.append(_steps(q_space, dist, g))
            directions.append(T.add_direction(q, space) if isinstance(d.relation, AddRemove) else None)
        monotone = isinstance(d.relation, AddRemove) and len(set(directions)) == 1 and directions[0] is not None
        if monotone:
            word = "up" if directions[0] == 1 else "down"
            walk.fact(
                path,
                f"every query goes {word} when a record is added and the other way when one is removed (counts, "
                "one-bin histograms, sums of contributions of one sign"
                + (", user queries stated increasing" if any(isinstance(q, T.UserQuery) for q in m.queries) else "")
                + "): the answers are monotone",
                "each query's contribution per record has one sign (its aggregate and the records' bounds)",
            )
    D = max(s for s, _ in rows)
    hows = {h for _, h in rows}
    if "rounded" in hows:
        walk.pb.add(walk._rounding())
        walk.fact(
            path,
            f"rounding to the grid g = {_F(g)}: an answer at distance Δ_i moves by at most ceil(Δ_i/g) grid "
            "steps (floor(a + 1/2) − floor(b + 1/2) is an integer below |a − b| + 1); the threshold is rounded "
            "once, the same on both inputs",
            "grid-rounding lemma per query",
        )
    if "exact" in hows:
        walk.fact(
            path,
            f"answers that are multiples of the grid g = {_F(g)} round exactly: D_i = Δ_i/g",
            "floor(v/g + 1/2) = v/g when v/g is an integer",
        )
    walk.fact(
        path,
        "the sampler saturates each rounded answer to [−2**52, 2**52] grid steps: 1-Lipschitz and "
        "non-decreasing, so the step bounds and the monotonicity hold for the saturated answers",
        "saturation (clamping to an interval) is 1-Lipschitz and monotone",
    )
    walk.evaluate(
        path,
        f"D = max_i D_i = {_F(D)} grid steps over the {n} queries",
        sp.Eq(_F(D), sp.Max(*[_F(s) for s, _ in rows])),
        "exact arithmetic",
    )
    mm = min(m.c, n)
    if D == 0:
        walk.fact(
            path,
            "every answer is the same on neighbouring inputs (D = 0): the output's law is the same",
            "the algorithm reads the data only through the answers",
        )
        return A.leaf(sp.Integer(0), sp.Integer(0))
    Ds = _F(D)
    if monotone:
        walk._family("above threshold, monotone queries", _monotone_family())
        eps = Ds / tr + mm * Ds / tn
        text = f"D/t_ρ + m·D/t_ν = {Ds}/{tr} + {mm}·{Ds}/{tn} = {eps}"
    else:
        walk._family("above threshold", _general_family())
        eps = Ds / tr + 2 * mm * Ds / tn
        text = f"D/t_ρ + 2m·D/t_ν = {Ds}/{tr} + 2·{mm}·{Ds}/{tn} = {eps}"
    walk.evaluate(
        path,
        f"{m.describe()}: t_ρ = scale/g = {tr}, t_ν = query_scale/g = {tn}, m = min(c, n) = {mm}: ε = {text}",
        sp.Eq(eps, Ds / tr + (1 if monotone else 2) * mm * Ds / tn),
        "the family's privacy map at D, exact arithmetic",
    )
    return A.leaf(eps, eps**2 / 2)


from . import _walk as W  # noqa: E402

W.account(*T.MEASUREMENT_TYPES)(account)
