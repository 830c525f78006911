"""Privacy map of the grouping parts (:mod:`dpharness.mechanisms.parts.grouping`): a group-by over keys
from the data with Laplace partition selection, after per-user contribution bounding or under add/remove
of one record, proved once and instantiated at each node by the walk of :mod:`dpharness.proofs.parts`.

The family lemma (every t > 0, every integer threshold T >= 1, every L >= 0). Let K be discrete Laplace,
P(K = k) = (1 − q)/(1 + q)·q^{|k|}, q = e^{−1/t}, and let the encoded output of a key with count c be
f(c + K) (f(y) = y if y >= T else 0) when c >= 1, and 0 when c = 0. If D' is D plus one unit (a record,
or one user's bounded records) and the unit raises the counts of a set E of keys by exactly 1 and brings
a set N of keys from 0 to 1, |E| + |N| <= L, every other key unchanged in law, then for every event S
and both orders of (D, D'):

    P_A(S) <= e^{L/t} P_B(S) + 1 − (1 − p)^L,        p = P(K >= T − 1) = q^{T−1}/(1 + q).

Proof: (i) a key in E is the discrete Laplace release shifted by 1 and post-processed by f: its
pointwise loss is at most 1/t (triangle inequality; Dwork & Roth 2014 Thm 2.1); the keys are
independent, so the E block is |E|/t-DP. (ii) A key in N is 0 surely on D and released with
probability p on D' (1 + K >= T). Let R = "some key of N released": P_D(R) = 0, P_D'(R) = 1 − (1−p)^{|N|}.
Adding: P_D'(S) <= P_D'(S ∖ R) + P_D'(R) <= e^{|E|/t} P_D(S) + 1 − (1−p)^{|N|}. Removing: with S₀ the
slice of S where the N keys are 0 and P^E the law of the other keys, P_D(S) − e^ε P_D'(S) <=
P_D^E(S₀) − e^ε (1 − p)^{|N|} P_D'^E(S₀) <= P_D^E(S₀)(1 − (1 − p)^{|N|}) for ε >= |E|/t. (iii) δ grows
with |N| and ε with |E|: the worst case is L/t and 1 − (1 − p)^L. Korolova et al. 2009 (thresholding
noisy counts of present keys); Wilson et al. 2020 §3.2 (δ of Laplace thresholding per partition, its
union over a user's partitions). Tight: (empty, one unit on L new keys) attains δ at every ε, and
(L existing keys) attains ε = L/t.

Contribution bounding (add/remove one user): each user's kept records are drawn from that user's own
records with that user's own randomness, so the other users' bounded records have the same law on D and
D' (a mixture with the same weights: the bound holds for every draw, and the hockey-stick divergence is
jointly convex); the added user keeps at most k records, hence raises at most k keys' distinct-user
counts, each by exactly 1: L = min(k, |keys|) encoded keys.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from dpharness.core import AddRemove, ApproxDP, Event, PureDP, Witness, exact
from dpharness.mechanisms.parts import grouping as G
from dpharness.mechanisms.parts._base import Chain, Distance, Space, Transformation
from dpharness.mechanisms.parts._structure import has_compose, has_post, has_sampling

from .. import _account as A
from .._kernel import discharge, exact_sign, sym
from .._model import Obligation

__all__ = [
    "account",
    "account_bounded",
    "judge",
    "part_grid_steps",
    "part_stability",
    "selection_delta",
    "selection_threshold",
    "keys_touched",
]


def _F(x: Fraction) -> sp.Rational:
    return sp.Rational(x.numerator, x.denominator)


def _argued(statement: str, justification: str) -> Obligation:
    return Obligation(statement, sp.true, justification, "structural", True, "argued in the justification")


@functools.lru_cache(maxsize=None)
def _family() -> tuple[Obligation, ...]:
    t = sym("t", positive=True)
    q = sp.exp(-1 / t)
    a = sym("a", integer=True, nonnegative=True)
    y, c = sym("y"), sym("c")
    p, n = sym("p", nonnegative=True), sym("n", integer=True, nonnegative=True)
    return (
        discharge(
            "discrete Laplace tail: Σ_{k>=a} (1 − q)/(1 + q)·q^k = q^a/(1 + q) for integers a >= 0 (geometric "
            "series, 0 < q = e^{−1/t} < 1)",
            sp.Eq(sp.simplify((1 - q) / (1 + q) * q**a / (1 - q)), q**a / (1 + q)),
            "algebra (sympy simplify)",
            use_z3=False,
        ),
        _argued("the geometric series Σ_{k>=a} q^k = q^a/(1 − q) converges for 0 <= q < 1", "standard"),
        discharge(
            "[key in E] pointwise loss of a count raised by 1: ln P(K = y − c) − ln P(K = y − c − 1) = "
            "(|y − c − 1| − |y − c|)/t <= 1/t",
            sp.Le(sp.Abs(y - c - 1) - sp.Abs(y - c), 1),
            "triangle inequality (z3 over the reals; both orders by symmetry)",
        ),
        _argued(
            "[key in E] the encoded output f(c + K) (f(y) = y if y >= T else 0) is a function of c + K: post-"
            "processing keeps the 1/t bound; the keys of E are independent, so the block is |E|/t-DP",
            "Dwork & Roth 2014 Thm 2.1 (post-processing) and Thm 3.16 (composition of independent parts)",
        ),
        _argued(
            "[key in N] on D the key is absent (count 0) and encoded 0 surely; on D' its count is 1 and it is "
            "released iff 1 + K >= T, with probability p = P(K >= T − 1) = q^{T−1}/(1 + q) (T >= 1)",
            "the sampler: an absent key is never released (mechanisms.parts.grouping.GroupBy.release)",
        ),
        _argued(
            "[adding] R = 'some key of N released' has P_D(R) = 0 and P_D'(R) = 1 − (1 − p)^{|N|} (independent keys); "
            "P_D'(S) <= P_D'(S ∖ R) + P_D'(R) <= e^{|E|/t} P_D(S) + 1 − (1 − p)^{|N|}",
            "on the complement of R the N keys are 0 as on D; then (i)",
        ),
        _argued(
            "[removing] P_D(S) − e^ε P_D'(S) <= P_D^E(S₀) − e^ε (1 − p)^{|N|} P_D'^E(S₀) <= P_D^E(S₀)(1 − (1 − p)^{|N|}) "
            "<= 1 − (1 − p)^{|N|} for ε >= |E|/t (S₀: S with the N keys 0; P^E: the other keys' law)",
            "P_D'(S) >= P_D'(S ∖ R) = (1 − p)^{|N|} P_D'^E(S₀) and P_D'^E(S₀) >= e^{−|E|/t} P_D^E(S₀) by (i)",
        ),
        discharge(
            "[worst case] δ = 1 − (1 − p)^n grows with n: 1 − (1 − p)^{n+1} − (1 − (1 − p)^n) = p(1 − p)^n >= 0",
            sp.Eq(sp.expand((1 - (1 - p) ** (n + 1)) - (1 - (1 - p) ** n) - p * (1 - p) ** n), 0),
            "algebra; 0 <= p <= 1",
            use_z3=False,
        ),
        _argued(
            "hence with |E| + |N| <= L: (ε, δ) = (L/t, 1 − (1 − p)^L) in both directions",
            "ε grows with |E| and δ with |N|; Korolova et al. 2009, Wilson et al. 2020 §3.2",
        ),
    )


@functools.lru_cache(maxsize=None)
def _bounding_family() -> tuple[Obligation, ...]:
    return (
        _argued(
            "bound_contributions: each user's kept records are a function of that user's records and that user's "
            "own random order only; other users' kept records have the same law on D and D' = D + one user",
            "the sampler (mechanisms.parts.grouping._kept_draws: one uniformly random order of the drawn users' "
            "records per release, whose restriction to each user is a uniformly random order of that user's "
            "records, independent across users)",
        ),
        _argued(
            "the added user keeps at most k = max_records records of at most ℓ = max_partitions keys, so raises at "
            "most min(k, ℓ) keys' distinct-user counts, each by exactly 1 (the user counts once per key)",
            "the kept set: walking the user's order, a record is kept while its key is among the first ℓ keys met, "
            "fewer than m of its key and fewer than k in all are kept",
        ),
        _argued(
            "the bound for every draw of the bounding gives the bound for the mixture: P_D'(S) − e^ε P_D(S) = "
            "Σ_r w_r (P_{D',r}(S) − e^ε P_{D,r}(S)) with the same weights w_r (other users' draws) on both sides",
            "the hockey-stick divergence is jointly convex (a mixture over a shared random draw)",
        ),
    )


def selection_delta(select: G.PartitionSelect, L: int) -> tuple[sp.Expr, sp.Expr]:
    """(p, δ) exactly: p = e^{−(T−1)/t}/(1 + e^{−1/t}), δ = 1 − (1 − p)^L."""
    t = _F(select.t)
    q = sp.exp(-1 / t)
    p = q ** (select.T - 1) / (1 + q)
    return p, 1 - (1 - p) ** L


def _parts_epsilon(
    walk: Any, path: str, g: G.GroupBy, space: Space, L: int, L1: int, m1: int, budgets: list
) -> sp.Expr:
    """Σ over the per-key parts of D/t: D the total grid steps the touched keys' aggregates move when one
    unit adds at most L1 records over at most L keys, at most m1 in one key. Records in ``budgets`` the ε of
    each part whose scale was solved from a budget, and, for the headline's cause, each part's ε from the
    grid rounding (``ProofBuilder.terms``)."""
    total = sp.Integer(0)
    for i, (pre, agg, noise) in enumerate(G.simple_parts(g.part)):
        here = _join(path, f"part {i + 1}")
        c1, agg_space = part_stability(walk, here, pre, agg, space)
        walk.fact(
            here,
            f"one unit adds at most {L1} records over at most {L} keys, at most {m1} in one key; the key's "
            f"{agg.describe()} is a sum of per-record contributions, each moving it by at most {c1} (above): "
            f"per key |Δ| <= {m1}·{c1}, over the keys Σ|Δ| <= {L1}·{c1}",
            "triangle inequality over the added records (group privacy of an additive aggregate)",
        )
        walk.laplace_family()
        gq, tq = noise.g, noise.t
        D = part_grid_steps(c1, agg_space, gq, L, L1, m1)
        if agg_space.quantum is not None and (agg_space.quantum / gq).denominator == 1:
            walk.fact(
                here,
                f"values are multiples of {agg_space.quantum}, a multiple of the grid g = {gq}: rounding is "
                f"exact, so the keys' centres move by Σ D_key <= {L1}·{c1}/g = {D} grid steps",
                "floor(v/g + 1/2) = v/g when v/g is an integer",
            )
        else:
            walk.pb.add(walk._rounding())
            walk.evaluate(
                here,
                f"rounding to g = {gq}: each key's centre moves by at most ceil(|Δ_key|/g) < |Δ_key|/g + 1, "
                f"so Σ D_key <= min(ceil({L1}·{c1}/g) + L − 1, L·ceil({m1}·{c1}/g)) = {D} grid steps",
                sp.Eq(
                    sp.Min(sp.ceiling(_F(Fraction(L1) * c1 / gq)) + L - 1, L * sp.ceiling(_F(Fraction(m1) * c1 / gq))),
                    _F(D),
                ),
                "grid-rounding lemma per key; an integer below X + L is at most ceil(X) + L − 1",
            )
        walk.fact(here, "each key's centre is an exact integer of any size (no centre is capped)", "exact centres")
        eps = _F(D) / _F(tq)
        walk.evaluate(
            here,
            f"{noise.describe()} on each released key, independent: ε = Σ D_key/t = {_F(D)}/{_F(tq)} = {eps}",
            sp.Eq(eps, _F(D / tq)),
            "grid Laplace privacy map per key, composed over the keys (independent)",
        )
        total += eps
        unrounded = Fraction(L1) * c1 / gq
        if noise.derived:  # its scale was solved from a budget: ε is the budget itself
            budgets.append(D / tq)
        elif D > unrounded and L > 1:
            walk.pb.terms.append(
                (
                    _F((D - unrounded) / tq),
                    f"from rounding each key's {agg.describe()} to the grid (up to L − 1 = {L - 1} steps of "
                    f"g = {gq} more over the touched keys)",
                    functools.partial(_raise_scale, i + 1, agg, noise, D),
                )
            )
    walk.fact(
        path,
        "a part's outputs are released only with their key: on a key in N they are 0 on D and, outside the "
        "event R, on D' too, so R absorbs them; on a key in E they add their ε to the key's",
        "the sampler zeroes the part where the selection coordinate is 0 (GroupBy.release)",
    )
    return total


def part_stability(walk: Any, here: str, pre: list, agg: Any, space: Space) -> tuple[Fraction, Space]:
    """(c1, the aggregate's space): how far one record moves a per-key part's aggregate (L1), through its
    record-wise steps, by the walk's own stability lemmas (recorded in ``walk``)."""
    sp_, d = space, Distance(AddRemove())
    for t in pre:
        d = walk.transformation(_join(here, t.describe()), t, sp_, d)
        sp_ = t.out_space(sp_)
    one = walk.transformation(_join(here, agg.describe()), agg, sp_, d)
    return one.l1, agg.out_space(sp_)


def part_grid_steps(c1: Fraction, agg_space: Space, g: Fraction, L: int, L1: int, m1: int) -> Fraction:
    """D: the grid steps (of g) the touched keys' centres of one part move in all, when one unit adds at most
    L1 records over at most L keys, at most m1 in one key, each moving the aggregate by at most c1: L1·c1/g
    when every value is a multiple of the grid (rounding exact), else min(ceil(L1·c1/g) + L − 1,
    L·ceil(m1·c1/g)) (each key's rounding adds less than one step: the L − 1 term)."""
    if agg_space.quantum is not None and (agg_space.quantum / g).denominator == 1:
        return Fraction(L1) * c1 / g
    return Fraction(min(math.ceil(Fraction(L1) * c1 / g) + L - 1, L * math.ceil(Fraction(m1) * c1 / g)))


def keys_touched(b: G.BoundContributions | None, g: G.GroupBy) -> tuple[int, int, int, list]:
    """(L, L1, m1, the bounds L is the least of): the keys one neighbour touches, the records it adds over
    them, and at most in one key; add/remove of one record (``b`` None): (1, 1, 1)."""
    if b is None:
        return 1, 1, 1, [1]
    ell = b.max_records if b.max_partitions is None else b.max_partitions
    bounds = [b.max_records, ell] + ([] if g.from_data else [len(g.keys)])  # keys from the data: no universe
    L = min(bounds)
    m1 = min(b.max_per_partition, b.max_records)
    return L, min(b.max_records, L * m1), m1, bounds


def selection_threshold(t: Fraction, L: int, delta: Fraction) -> int | None:
    """The smallest integer T >= 1 whose δ = 1 − (1 − p)^L (:func:`selection_delta`, scale t) is at most
    ``delta``, checked exactly as :func:`judge` checks δ (sign of ln δ_budget − ln δ); None when even a huge T
    does not reach it (δ below what a float estimate can place)."""
    target = sp.log(_F(Fraction(delta)))

    def ok(T: int) -> bool:
        _, d = selection_delta(G.PartitionSelect(T, _plain_t(t)), L)
        return exact_sign(target - sp.log(d)) in (0, 1)

    q = math.exp(-1 / float(t))
    p_max = -math.expm1(math.log1p(-float(delta)) / L)  # (1 − p)^L >= 1 − δ
    if not p_max > 0:
        return None
    T = max(1, math.ceil(1 - float(t) * math.log(p_max * (1 + q))))
    for _ in range(10_000):
        if ok(T):
            break
        T += 1
    else:
        return None
    while T > 1 and ok(T - 1):
        T -= 1
    return T


def _plain_t(t: Fraction) -> int | float | Fraction:
    return int(t) if t.denominator == 1 else float(t) if Fraction(float(t)) == t else t


def _leaf(walk: Any, path: str, g: G.GroupBy, L: int, why: str, space: Space, L1: int = 1, m1: int = 1) -> A.Account:
    from dpharness.proof_registry import patched_code

    patched = patched_code(G.PartitionSelect)
    if patched is not None:
        walk.pb.add(
            [
                Obligation(
                    walk._tag(path, f"{patched} is the code as defined"),
                    sp.false,
                    "the family's lemma is about PartitionSelect as its class statement defined it",
                    "lemma",
                    False,
                    "patched code",
                )
            ]
        )
    walk._family("group-by with Laplace partition selection", _family())
    sel = g.select
    t = _F(sel.t)
    T = sel.T
    walk.evaluate(
        path,
        f"integer threshold T = ceil({sel.threshold}) = {T} >= 1",
        sp.Ge(T, 1),
        "c + K is an integer, so c + K >= τ iff c + K >= ceil(τ); exact",
    )
    walk.fact(
        path,
        f"one neighbour changes the counts of at most L = {L} encoded keys, each by exactly 1: {why}",
        "the stability of what precedes the group-by",
    )
    p, delta = selection_delta(sel, L)
    eps = sp.Integer(L) / t
    walk.evaluate(path, f"{g.describe()}: ε = L/t = {L}/{t} = {eps}", sp.Eq(eps, L / t), "the family's map, exact")
    budgets = [Fraction(L) / sel.t] if sel.derived and "t = L/ε" in sel.derived else []
    if g.part is not None:
        part_eps = _parts_epsilon(walk, path, g, space, L, L1, m1, budgets)
        eps = eps + part_eps
        walk.evaluate(
            path,
            f"selection and parts: ε = {eps}",
            sp.Eq(eps, sp.Integer(L) / t + part_eps),
            "basic composition per key (independent noise), exact",
        )
    walk.evaluate(
        path,
        f"p = P(K >= T − 1) = e^(−{T - 1}/{t})/(1 + e^(−1/{t})) ≈ {float(sp.N(p, 15)):.6g} in (0, 1); "
        f"δ = 1 − (1 − p)^{L} ≈ {float(sp.N(delta, 15)):.6g}",
        sp.And(sp.Gt(p, 0), sp.Lt(p, 1)),
        "exact evaluation",
    )
    _float_budgets_term(walk, budgets)
    return A.leaf(eps, sp.oo, ("partition_select", L), None, delta)


def _float_budgets_term(walk: Any, budgets: list) -> None:
    """For the headline's cause: budgets given as binary floats that are each a little above the decimal
    they print as (0.2 is 0.2000000000000000111...), so that decimals summing to the claim sum above it as
    floats; the term is how much more than their decimals they spend."""
    above = [e for e in budgets if Fraction(float(e)) == e and e > Fraction(repr(float(e)))]
    if not above:
        return
    extra = sum((e - Fraction(repr(float(e))) for e in above), Fraction(0))
    shown = ", ".join(repr(float(e)) for e in above)
    exact_forms = ", ".join(
        f"Fraction({Fraction(repr(float(e))).numerator}, {Fraction(repr(float(e))).denominator})" for e in above
    )
    walk.pb.terms.append(
        (
            _F(extra),
            f"from the budgets {shown}: binary floats, each a little above the decimal it prints as "
            f"({float(extra):.3g} above them in all)",
            lambda excess: f"pass them exactly ({exact_forms}) or as sums of powers of two (0.5, 0.25, ...)",
        )
    )


def _raise_scale(i: int, agg: Any, noise: Any, D: Fraction, excess: sp.Expr) -> str | None:
    """The fix for a bound above the claim by ``excess`` when part ``i``'s rounding term covers it: a round
    raise of its scale (one significant digit, checked exactly) that brings its ε = D/t down by the excess."""
    excess = sp.sympify(excess)
    if not excess.is_Rational:
        return None
    gap = Fraction(int(excess.p), int(excess.q))
    eps = D / noise.t
    if gap >= eps:
        return None
    need = (D / (eps - gap)) * noise.g - Fraction(noise.scale)  # the exact raise
    step = Fraction(10) ** math.floor(math.log10(float(need)))
    raise_by = math.ceil(need / step) * step
    for _ in range(4):
        new = float(Fraction(noise.scale) + raise_by)  # typed as repr(new), read back as this float, exactly
        if D / (Fraction(new) / noise.g) <= eps - gap:
            return (
                f"raise part {i}'s ({agg.describe()}) scale by {float(raise_by):g} (to {new!r}) or declare "
                "dp.laplace(epsilon=...)"
            )
        raise_by *= 2
    return None


def account(walk: Any, path: str, g: G.GroupBy, space: Space, d: Distance) -> A.Account:
    """A group-by on records under add/remove of one record (each record its own user)."""
    if not isinstance(d.relation, AddRemove):
        walk.pb.add(
            [
                Obligation(
                    walk._tag(path, f"{g.describe()} under {d.describe()}"),
                    sp.false,
                    "partition selection is proved here under add/remove of one record or of one user "
                    "(dp.bound_contributions); declare relation=AddRemove() or dp.AddRemoveUser(...)",
                    "lemma",
                    False,
                    "not proved for this relation",
                )
            ]
        )
        return A.leaf(None, sp.oo, None, None, sp.Integer(1))
    return _leaf(
        walk,
        path,
        g,
        1,
        "under add/remove one record, whose key is one key (a record-wise step before keeps it one record)",
        space,
    )


def account_bounded(walk: Any, path: str, step: Chain, space: Space, d: Distance) -> A.Account:
    """``bound_contributions(...) >> group_by(...)`` under add/remove of one user."""
    b, g, post = G.split_bounded(step)
    if post is not None:
        walk._post(path, post)
    if not isinstance(d.relation, G.AddRemoveUser) or d.relation.user != b.user:
        walk.pb.add(
            [
                Obligation(
                    walk._tag(path, f"{b.describe()} under {d.describe()}"),
                    sp.false,
                    "contribution bounding is proved for add/remove of one user in its user column",
                    "lemma",
                    False,
                    "not proved for this relation",
                )
            ]
        )
        return A.leaf(None, sp.oo, None, None, sp.Integer(1))
    walk._family("contribution bounding", _bounding_family())
    ell = b.max_records if b.max_partitions is None else b.max_partitions
    L, L1, m1, bounds = keys_touched(b, g)
    rule, touched = (
        ("min(k, ℓ)", "keys touched (keys from the data)")
        if g.from_data
        else ("min(k, ℓ, |keys|)", "encoded keys touched")
    )
    walk.evaluate(
        _join(path, "bound_contributions"),
        f"{b.describe()}: at most k = {b.max_records} kept records and ℓ = {ell} keys per user, so at most "
        f"L = {rule} = min({', '.join(map(str, bounds))}) = {L} {touched}",
        sp.Eq(sp.Min(*bounds), L),
        "exact",
    )
    return _leaf(
        walk, _join(path, "group_by"), g, L, f"one user, bounded to {L} keys, counted once per key", space, L1, m1
    )


def _join(path: str, part: str) -> str:
    return f"{path} › {part}" if path else part


# --------------------------------------------------------------------------- judging an (ε, δ) account


def judge(pb: Any, prof: A.Account, m: Any) -> tuple[sp.Expr | None, float | None]:
    """The verdict for an account with δ > 0 (partition selection), by basic composition only."""
    claim = pb.claim
    delta = prof.delta
    witness = _delta_witness(m, prof)
    if not isinstance(claim, ApproxDP):
        pb.add(
            [
                Obligation(
                    f"{claim.describe()}: partition selection releases a key with probability 0 on one neighbour "
                    "and > 0 on the other, so no pure or Rényi bound holds",
                    sp.false,
                    "δ > 0 is necessary (the released event has probability 0 on D)",
                    "lemma",
                    False,
                    "not pure DP",
                )
            ]
        )
        if witness is not None and isinstance(claim, PureDP):
            w, p_release = witness
            assert w.event is not None  # the release event, built with the witness
            pb.refute(w, f"P_D(S) = 0 and P_D'(S) = {p_release} > 0 for S = {w.event.description}: no finite ε")
        return None, None
    exact(claim.epsilon)  # read exactly (raises on a non-exact claim)
    delta_c = exact(claim.delta)
    if prof.eps is None:
        pb.add(
            [
                Obligation(
                    "every part beside the partition selection is pure DP",
                    sp.false,
                    "(ε, δ) parts are composed here by basic composition of pure parts and selections only",
                    "lemma",
                    False,
                    "a part is not pure DP",
                )
            ]
        )
        return None, None
    pb.fact(
        f"basic composition: ε = Σ ε_i = {prof.eps}, δ = Σ δ_i = {delta}",
        "Dwork & Roth 2014 Thm 3.16 (pure parts have δ_i = 0)",
    )
    pb.claim_bound(prof.eps)
    pb.explain_excess(prof.eps, _F(Fraction(claim.epsilon)))
    ok = exact_sign(sp.log(delta_c) - sp.log(delta)) in (0, 1)
    pb.add(
        [
            Obligation(
                f"δ = {delta} ≈ {float(sp.N(delta, 15)):.6g} <= claimed δ = {claim.delta}: ln δ <= ln δ_claim",
                sp.Le(sp.log(delta), sp.log(delta_c), evaluate=False),
                "exact evaluation (log space)",
                "exact",
                bool(ok),
                f"sign of ln δ_claim − ln δ: {exact_sign(sp.log(delta_c) - sp.log(delta))}",
            )
        ]
    )
    if witness is not None and exact_sign(delta - delta_c) == 1:
        w, p_release = witness
        assert w.event is not None  # the release event, built with the witness
        pb.refute(
            w,
            f"P_D'(S) = {float(sp.N(p_release, 15)):.6g} > e^ε·P_D(S) + δ = 0 + {claim.delta} for S = "
            f"{w.event.description} (P_D(S) = 0)",
            delta_checked=True,
        )
    return prof.eps, float(sp.N(delta, 20))


def _delta_witness(m: Any, prof: A.Account) -> tuple[Witness, sp.Expr] | None:
    """For a structure that is exactly one group-by: a pair (empty, one unit whose records land on L new
    encoded keys) and the event 'one of those keys released', of probability 0 on the empty side and
    exactly 1 − (1 − p)^L on the other. The pair is run through the steps before the group-by (the code
    that runs, not the raw records), and the counts the group-by itself computes on it must be 1 on
    exactly L encoded keys and 0 elsewhere; otherwise there is no witness (None)."""
    if prof.single is None or prof.single[0] != "partition_select":
        return None
    if has_post(m.steps) or has_sampling(m.steps) or has_compose(m.steps):
        return None
    prefix, head = _before_group_by(m.steps)
    if head is None:
        return None
    g = head if type(head) is G.GroupBy else G.split_bounded(head)[1]
    b = None if type(head) is G.GroupBy else G.split_bounded(head)[0]
    L = prof.single[1]
    for d, d2 in _candidate_pairs(m, g):
        try:
            m.input_spec.validate_pair(d, d2)
            seen = np.asarray(d2, dtype=float)
            for t in prefix:
                seen = t.apply(seen)
            seen = np.asarray(seen, dtype=float)
            seen = seen.reshape(-1, 1) if seen.ndim == 1 else seen
            if b is not None and not G._kept_deterministically(seen, np.arange(len(seen)), b):
                continue
            here = g.with_keys(G.present_keys(seen, g.by).tolist()) if g.from_data else g
            counts = here.counts(seen, user=None if b is None else b.user)
        except Exception:  # noqa: BLE001 - a candidate the steps or the relation refuse is no witness
            continue
        if sorted(set(counts.tolist())) not in ([0, 1], [1]) or int(counts.sum()) != L:
            continue
        cols = [i * (1 + g.part_width) for i, c in enumerate(counts.tolist()) if c == 1]
        labelled = here.labelled  # a property that reads every key: once, not once per key
        keys = [here.keys[i] if labelled else float(here.keys[i]) for i, c in enumerate(counts.tolist()) if c == 1]
        if g.from_data:
            event = Event(_ReleasedKeys(keys), f"one of the keys {keys} released (in the mapping)")
        else:
            event = Event(_Released(cols), f"one of the keys {keys} released (coordinates {cols} not 0)")
        _, delta = selection_delta(g.select, L)
        return Witness(
            d2, d, event, None, float("inf"), "a unit on L new keys: released with probability δ on D', never on D"
        ), delta
    return None


class _Released:
    """Membership of 'one of these encoded coordinates is not 0' (picklable)."""

    def __init__(self, cols: list) -> None:
        self.cols = cols

    def __call__(self, out: np.ndarray) -> np.ndarray:
        out = np.asarray(out, dtype=float).reshape(len(out), -1)
        return np.any(out[:, self.cols] != 0, axis=1)


class _ReleasedKeys:
    """Membership of 'one of these keys is in the released mapping' (keys from the data; picklable)."""

    def __init__(self, keys: list) -> None:
        self.keys = frozenset(keys)

    def __call__(self, out: np.ndarray) -> np.ndarray:
        return np.fromiter((any(item[0] in self.keys for item in o) for o in out), dtype=bool, count=len(out))


def _before_group_by(step: Any) -> tuple[list, Any]:
    """(the record-wise transformations before the group-by, in order; the group-by or the bounding chain
    that heads it), or ([], None) when something else comes first."""
    prefix: list = []
    while True:
        if type(step) is G.GroupBy:
            return prefix, step
        if isinstance(step, Chain) and type(step.first) is G.BoundContributions:
            return prefix, step
        if isinstance(step, Chain) and isinstance(step.first, Transformation):
            prefix.append(step.first)
            step = step.second
            continue
        return [], None


def _candidate_pairs(m: Any, g: G.GroupBy) -> list:
    """The audit's user-level pairs, and the same records with the key written into each other column (a
    step before the group-by may read the key from another column)."""
    pairs = list(G.user_level_pairs(m))
    out = list(pairs)
    for d, d2 in pairs:
        new = np.asarray(d2, dtype=float)
        if new.ndim != 2:
            continue
        for c in range(new.shape[1]):
            if c == g.by:
                continue
            moved = new.copy()
            moved[:, c], moved[:, g.by] = new[:, g.by], new[:, c]
            out.append((d, moved))
    return out


from . import _walk as W  # noqa: E402

W.account(G.GroupBy)(account)
W.head(G.BoundContributions)(account_bounded)
