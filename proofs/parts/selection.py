"""Privacy maps of the selection parts (:mod:`dpharness.mechanisms.parts.selection`), each proved once per
family from the existing lemmas and instantiated at the node's input distance by the walk of
:mod:`dpharness.proofs.parts`:

* the quantile score: its L∞ stability per neighbour relation, by the cases of how one record moves
  (#{x < c}, #{x > c}) (as :mod:`dpharness.proofs.median` derives the median's), z3 over every α in [0, 1];
* the exponential mechanism (= report noisy max with Gumbel noise): 2βΔ by the score term and log-sum-exp
  monotonicity (:mod:`._expmech`, McSherry & Talwar 2007, Dwork & Roth 2014 Thm 3.10); βΔ when the scores
  move monotonically (the same two terms, one of them <= 0); top-k by peeling: k adaptive exponential
  mechanisms, ε adds (Durfee & Rogers 2019);
* report noisy max with exponential noise (permute-and-flip): the randomness alignment for every number of
  candidates (:func:`._alignment.report_noisy_max_all_n`, Dwork & Roth 2014 Claim 3.9), 2Δ/b;
* report noisy max with discrete Laplace noise on a grid, ties to the first index: the same alignment on
  the integers, 2D/t with D the rounded scores' L∞ distance in grid steps.

Each node's account is pure: ε, ρ = ε²/2 (Bun & Steinke 2016 Prop. 1.4), one unit, no single-leaf
profile and no privacy-loss distribution (pld=None)."""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction
from typing import Any

import sympy as sp

from dpharness.core import AddRemove
from dpharness.mechanisms.parts import selection as S
from dpharness.mechanisms.parts._base import Distance, Space

from .. import _account as A
from .. import _lemmas as lemmas
from .._kernel import discharge, slack, sym
from .._model import Obligation

__all__ = ["stability", "account"]


def _F(x: Fraction) -> sp.Rational:
    return sp.Rational(x.numerator, x.denominator)


class _Collect:
    """Collects the obligations a derivation written against a ProofBuilder adds (check/add/note), so a
    family lemma can be proved once, symbolically, and added under its family tag."""

    def __init__(self) -> None:
        self.steps: list[Obligation] = []

    def check(
        self, statement: str, formula: Any, justification: str, *, hypotheses=(), use_z3: bool = True
    ) -> Obligation:
        ob = discharge(statement, formula, justification, hypotheses=hypotheses, use_z3=use_z3)
        self.steps.append(ob)
        return ob

    def add(self, obligations) -> list:
        obs = list(obligations)
        self.steps.extend(obs)
        return obs

    def note(self, text: str) -> None:  # a family lemma has no notes worth keeping
        pass


def _argued(statement: str, justification: str) -> Obligation:
    return Obligation(statement, sp.true, justification, "structural", True, "argued in the justification")


# --------------------------------------------------------------------------- family lemmas (proved once)


@functools.lru_cache(maxsize=None)
def _quantile_family() -> tuple[Obligation, ...]:
    """|u_D'(c) − u_D(c)| <= max(α, 1 − α) (add/remove) and <= 1 (substitution), every α in [0, 1], every c."""
    a, delta = sym("alpha"), sym("Delta")
    h, c = sym("h"), sym("c")
    unit = [sp.Le(0, a), sp.Le(a, 1)]
    obs = [
        _argued(
            "u(c) = −|h(c)| with h(c) = (1 − α)·#{x < c} − α·#{x > c}; one record y moves #{x < c} by +1 if "
            "y < c, #{x > c} by +1 if y > c, neither if y = c (add; remove: −1)",
            "each record is in exactly one of {x < c}, {x = c}, {x > c} (records and c compared exactly)",
        ),
        discharge(
            "reverse triangle inequality: | |h + c| − |h| | <= |c| for all reals h, c",
            sp.Le(sp.Abs(sp.Abs(h + c) - sp.Abs(h)), sp.Abs(c)),
            "z3 over the reals (case split on the signs)",
        ),
    ]
    ar_moves = {
        "add y < c": (1, 0),
        "add y > c": (0, 1),
        "add y = c": (0, 0),
        "remove y < c": (-1, 0),
        "remove y > c": (0, -1),
        "remove y = c": (0, 0),
    }
    for name, (dl, dg) in ar_moves.items():
        change = (1 - a) * dl - a * dg
        obs.append(
            discharge(
                f"[add/remove, case {name}] h moves by {sp.simplify(change)}: |·| <= Δ for Δ >= max(α, 1 − α)",
                sp.Le(sp.Abs(change), delta),
                "z3 over 0 <= α <= 1, Δ >= α, Δ >= 1 − α",
                hypotheses=unit + [sp.Ge(delta, a), sp.Ge(delta, 1 - a)],
            )
        )
    where = {"< c": (1, 0), "= c": (0, 0), "> c": (0, 1)}
    for (k1, (l1, g1)), (k2, (l2, g2)) in itertools.product(where.items(), repeat=2):
        change = (1 - a) * (l2 - l1) - a * (g2 - g1)
        obs.append(
            discharge(
                f"[substitution, case remove y {k1}, add y' {k2}] h moves by {sp.simplify(change)}: |·| <= 1",
                sp.Le(sp.Abs(change), 1),
                "z3 over 0 <= α <= 1",
                hypotheses=unit,
            )
        )
    obs.append(
        _argued(
            "the cases are exhaustive: by the reverse triangle inequality |u' − u| <= |h' − h|, so the utility "
            "vector moves by at most max(α, 1 − α) (add/remove) or 1 (substitution) in L∞; hence L1 <= kΔ and "
            "L2² <= kΔ² over k candidates",
            "OpenDP make_quantile_score_candidates (score_candidates_map), with α exact here",
        )
    )
    return tuple(obs)


@functools.lru_cache(maxsize=None)
def _exponential_family() -> tuple[Obligation, ...]:
    """ln P_u(r) − ln P_u'(r) <= 2βΔ for ||u − u'||_∞ <= Δ (the existing derivation, symbolic β and Δ)."""
    from .._expmech import derive_bound

    col = _Collect()
    b, d = sym("beta", positive=True), sym("Delta", positive=True)
    col.add(
        [
            _argued(
                "P_u(r) = e^{β u_r}/Σ_j e^{β u_j}, so L_r = ln P_u(r) − ln P_u'(r) = β(u_r − u'_r) + "
                "(ln Σ_j e^{β u'_j} − ln Σ_j e^{β u_j})",
                "log of the pmf (McSherry & Talwar 2007)",
            )
        ]
    )
    derive_bound(col, b, d, None)
    return tuple(col.steps)


@functools.lru_cache(maxsize=None)
def _monotone_family() -> tuple[Obligation, ...]:
    """L_r <= βΔ when u' − u has one sign in every coordinate (all >= 0 or all <= 0), |u' − u| <= Δ."""
    b, d = sym("beta", positive=True), sym("Delta", positive=True)
    u, s = sym("u_r"), slack("s_r")
    obs: list[Obligation] = []
    obs.append(
        discharge(
            "[scores up: u'_j = u_j + s_j, 0 <= s_j <= Δ] score term β(u_r − u'_r) = −β s_r <= 0",
            sp.Le(b * (u - (u + s)), 0),
            "β > 0, s_r >= 0",
        )
    )
    up = lemmas.logsumexp_monotone_generic(b, d)
    obs += [
        Obligation("[scores up] " + o.statement, o.formula, o.justification, o.checker, o.discharged, o.detail)
        for o in up
    ]
    obs.append(
        discharge(
            "[scores up] L_r <= 0 + βΔ",
            sp.Le(-b * s + b * d - slack("s_lse"), b * d),
            "the two bounds above (slacks >= 0)",
        )
    )
    obs.append(
        discharge(
            "[scores down: u'_j = u_j − s_j, 0 <= s_j <= Δ] score term β(u_r − u'_r) = β s_r <= βΔ",
            sp.Le(b * (u - (u - (d - s))), b * d),
            "s_r = Δ − slack, slack >= 0; β > 0",
        )
    )
    down = lemmas.logsumexp_monotone_generic(b, sp.Integer(0))
    obs += [
        Obligation(
            "[scores down, shift 0] " + o.statement, o.formula, o.justification, o.checker, o.discharged, o.detail
        )
        for o in down
    ]
    obs.append(
        discharge(
            "[scores down] L_r <= βΔ + 0",
            sp.Le(b * (d - s) - slack("s_lse"), b * d),
            "the two bounds above (slacks >= 0)",
        )
    )
    obs.append(
        _argued(
            "monotone neighbours are scores up or scores down in every coordinate (the two cases), and "
            "(D, D') and (D', D) swap them: L_r <= βΔ in both directions",
            "definition of monotone scores; the exponential mechanism's factor-2 saving (Dwork & Roth 2014 "
            "§3.4, McSherry & Talwar 2007)",
        )
    )
    return tuple(obs)


@functools.lru_cache(maxsize=None)
def _peeling_family() -> tuple[Obligation, ...]:
    return (
        _argued(
            "top-k by peeling: step m draws i_m from the candidates not yet drawn with P ∝ e^{β u_i}, an exponential "
            "mechanism whose candidate set depends only on the earlier outputs; restricting the scores to a subset "
            "keeps their L∞ distance (and monotonicity)",
            "the sampler (mechanisms.parts.selection._peel); Durfee & Rogers 2019 Lemma 4.2: this is the law of the "
            "ordered one-shot Gumbel top-k",
        ),
        _argued(
            "pure ε_m-DP steps composed adaptively give Σ_m ε_m-DP: P(i_1..i_k) = Π_m P(i_m | i_<m) and each "
            "factor's ratio is at most e^{ε_m}",
            "chain rule of the ordered output's pmf (Dwork & Roth 2014 Thm 3.16, adaptive form)",
        ),
    )


def _tagged(walk: Any, name: str, obligations: tuple) -> None:
    walk._family(name, obligations)


# --------------------------------------------------------------------------- the walk's hooks


def stability(walk: Any, path: str, t: S.QuantileScore, space: Space, d: Distance) -> Distance:
    out = t.stability(space, d)
    _tagged(walk, "quantile score", _quantile_family())
    a = _F(t.alpha_exact)
    k = len(t.candidates)
    if isinstance(d.relation, AddRemove):
        walk.evaluate(
            path,
            f"{t.describe()} under add/remove: Δ = max(α, 1 − α) = max({a}, {1 - a}) = {_F(out.linf)}",
            sp.Eq(sp.Max(a, 1 - a), _F(out.linf)),
            "the family's stability at α, exact arithmetic",
        )
    else:
        walk.evaluate(
            path,
            f"{t.describe()} under substitution: Δ = 1",
            sp.Eq(_F(out.linf), 1),
            "the family's stability (substitution case)",
        )
    walk.evaluate(
        path,
        f"over k = {k} candidates: L1 <= kΔ = {_F(out.l1)}, L2² <= kΔ² = {_F(out.l2sq)}",
        sp.And(sp.Eq(k * _F(out.linf), _F(out.l1)), sp.Eq(k * _F(out.linf) ** 2, _F(out.l2sq))),
        "exact arithmetic",
    )
    return out


def account(walk: Any, path: str, m: Any, space: Space, d: Distance) -> A.Account:
    if isinstance(m, S.ExponentialSelection):
        return _exponential(walk, path, m, d)
    if isinstance(m, S.NoisyMaxExponential):
        return _pf(walk, path, m, d)
    return _laplace(walk, path, m, space, d)


def _leaf(eps: sp.Expr) -> A.Account:
    return A.leaf(eps, eps**2 / 2)


def _exponential(walk: Any, path: str, m: S.ExponentialSelection, d: Distance) -> A.Account:
    beta = 1 / _F(m.scale_exact)
    delta = _F(d.linf)
    if d.monotone:
        _tagged(walk, "exponential mechanism, monotone scores", _monotone_family())
        walk.fact(
            path,
            "the scores move monotonically on neighbouring inputs (a histogram under add/remove: one bin "
            "gains or loses one record, the others stay)",
            "the preceding step's stability (monotone)",
        )
        one = beta * delta
        text = f"βΔ = {delta}/{_F(m.scale_exact)} = {one}"
    else:
        _tagged(walk, "exponential mechanism", _exponential_family())
        one = 2 * beta * delta
        text = f"2βΔ = 2·{delta}/{_F(m.scale_exact)} = {one}"
    walk.evaluate(
        path,
        f"{m.describe()}: β = 1/scale = {beta}, scores at L∞ distance Δ = {delta}: ε = {text}",
        sp.Eq(one, (1 if d.monotone else 2) * delta / _F(m.scale_exact)),
        "the family's privacy map at Δ, exact arithmetic",
    )
    eps = one
    if m.k > 1:
        _tagged(walk, "top-k by peeling", _peeling_family())
        eps = m.k * one
        obs = lemmas.sequential_composition([one] * m.k)
        walk.pb.add(
            [
                Obligation(walk._tag(path, o.statement), o.formula, o.justification, o.checker, o.discharged, o.detail)
                for o in obs
            ]
        )
        walk.evaluate(path, f"top-{m.k}: ε = k·{one} = {eps}", sp.Eq(eps, m.k * one), "adaptive composition, exact")
    return _leaf(eps)


def _pf(walk: Any, path: str, m: S.NoisyMaxExponential, d: Distance) -> A.Account:
    from .._alignment import report_noisy_max_all_n

    b = _F(m.scale_exact)
    delta = _F(d.linf)
    lemma = report_noisy_max_all_n(b, delta, noise="exponential")
    _tagged(
        walk,
        "report noisy max, exponential noise",
        tuple(lemma.obligations)
        + (
            _argued(
                "permute-and-flip (visit indices in a uniform random order, stop at i with probability "
                "e^{−(max u − u_i)/b}) has the law of argmax_i (u_i + E_i), E_i i.i.d. exponential with mean b",
                "Ding, Kifer et al. 2021, 'The permute-and-flip mechanism is identical to report-noisy-max with "
                "exponential noise'; the closed form P(i) = ∫_0^1 p_i Π_{j≠i}(1 − u p_j) du of both",
            ),
        ),
    )
    eps = 2 * delta / b
    walk.evaluate(
        path,
        f"{m.describe()}: scores at L∞ distance Δ = {delta}: ε = 2Δ/b = {eps}",
        sp.Eq(eps, lemma.cost_bound),
        "the family's privacy map (randomness alignment) at Δ and b",
    )
    return _leaf(eps)


def _laplace(walk: Any, path: str, m: S.NoisyMaxLaplace, space: Space, d: Distance) -> A.Account:
    from .._alignment import report_noisy_max_all_n

    g, t = _F(m.g), _F(m.t)
    q = space.quantum
    if d.linf == 0:
        steps = sp.Integer(0)
        walk.fact(path, "the scores are equal on neighbouring inputs, so the rounded scores agree", "stability 0")
    elif q is not None and (q / m.g).denominator == 1:
        steps = _F(d.linf / m.g)
        walk.fact(
            path,
            f"scores are multiples of {q}, a multiple of the grid g = {g}: rounding is exact, so the rounded "
            f"scores are at most Δ/g = {steps} grid steps apart in each coordinate",
            "floor(v/g + 1/2) = v/g when v/g is an integer",
        )
    else:
        walk.pb.add(walk._rounding())
        steps = sp.Integer(math.ceil(d.linf / m.g))
        walk.evaluate(
            path,
            f"rounding to g = {g}: each rounded score moves by at most ceil(Δ/g) = {steps} grid steps "
            "(floor(a + 1/2) − floor(b + 1/2) is an integer below |a − b| + 1)",
            sp.Eq(sp.ceiling(_F(d.linf / m.g)), steps),
            "grid-rounding lemma per coordinate",
        )
    if d.linf != 0:
        walk.fact(
            path,
            "saturating each rounded score to [−2**52, 2**52] grid steps is 1-Lipschitz, so the bound holds "
            "for the saturated scores",
            "saturation (clamping to an interval) is 1-Lipschitz",
        )
    if steps == 0:
        return _leaf(sp.Integer(0))
    lemma = report_noisy_max_all_n(t, steps, noise="laplace", ties="first")
    _tagged(
        walk,
        "report noisy max, discrete Laplace noise",
        tuple(lemma.obligations)
        + (
            _argued(
                "on the integers: rounded scores c, c' and D are integers, so the alignment shift s_i = c_i − c'_i + D is "
                "an integer and η -> η + s maps Z^k onto Z^k (a bijection); the discrete Laplace pmf ratio "
                "p(η)/p(η + s) = Π_k e^{(|η_k + s_k| − |η_k|)/t} (the normaliser cancels) <= e^{|s_i|/t} by the triangle "
                "lemma; sums over Z^k replace the integrals, and the per-candidate conditions hold on the integers as on "
                "the reals (with ties to the first index, numpy.argmax)",
                "the lemma above, restricted to integer noise (discrete Laplace, Canonne, Kamath & Steinke 2020)",
            ),
        ),
    )
    eps = 2 * steps / t
    walk.evaluate(
        path,
        f"{m.describe()}: t = scale/g = {t}, D = {steps} grid steps: ε = 2D/t = {eps}",
        sp.Eq(eps, lemma.cost_bound),
        "the family's privacy map (randomness alignment) at D and t",
    )
    return _leaf(eps)


from . import _walk as W  # noqa: E402

W.stability(S.QuantileScore)(stability)
W.account(*S.MEASUREMENT_TYPES)(account)
