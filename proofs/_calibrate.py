"""Calibration: the scale of each noise part derived from the budget it may spend.

This module inverts the proof's own privacy maps (:mod:`dpharness.proofs.parts`). It reads the
stability of the transformations before a noise part exactly as the proof does, and the grid
rounding rule ``dpharness.mechanisms.parts.grid_steps`` gives the distance D of the rounded centres
in grid steps. From them:

* **Laplace**, ε: ``t = D₁/ε`` grid steps, ``scale = t·g``. This is exact, so the proof derives ε
  again.
* **Gaussian**, ρ: ``τ² >= D₂²/(2ρ)``. σ is the smallest float with ``(σ/g)² >= D₂²/(2ρ)``, checked in
  rationals.
* **Gaussian**, (ε, δ) given to one part:
  - For a scalar leaf, σ is the smallest float found whose *certified* δ(ε) is within δ. The bound
    is the same rigorous evaluation the proof makes of the exact discrete-Gaussian profile
    (Canonne, Kamath & Steinke 2020, Thm 7).
  - For a vector leaf, the largest ρ whose zCDP conversion (CKS 2020, Prop. 12, as the proof
    evaluates it) is within δ, then σ from ρ.

Like OpenDP's ``binary_search_param``, this is a search. It finds a scale; the claim is then proved
for that scale like any other.

Budgets split as :class:`dpharness.mechanisms.parts.combinators.SplitBudget` states. Shares of ε or ρ go by weight, with
equal shares inside plain compositions and 1/n per repetition. An (ε, δ) total over Gaussian parts
is first converted to the largest ρ whose zCDP conversion gives it, then ρ is split; a Laplace part
then gets ε = √(2ρ_i).

Under a group-by (:func:`_group_by`, inverting :mod:`dpharness.proofs.parts.grouping`): with L the keys one
neighbour touches (1 under add/remove of one record; min(k, ℓ[, |keys|]) for one user after
``bound_contributions``), L1 the records it adds over them and m1 at most in one key, a selection's
``t = L/ε`` and its threshold the smallest integer whose δ = 1 − (1 − p)^L is within its δ (checked
exactly); each per-key Laplace part ``t = D/ε`` grid steps, D = L1·c1/g when the grid holds the values
exactly, else min(ceil(L1·c1/g) + L − 1, L·ceil(m1·c1/g)): the L − 1 steps rounding each key's value to
the grid can add. Each budget is then spent exactly (the proof derives ε = D/t again). Budgets are
solved there from their own values or a ``dp.compose(..., epsilon=)`` split inside the part; a share of
an outer split reaching a group-by, ``rho=`` and Gaussian noise are refused.

Structures the walk cannot see through (subsampling, iteration, partitions, selections) keep their
explicit scales: a budget under them is refused, naming the node.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

import sympy as sp

from dpharness.errors import ParameterError
from dpharness.core import AddRemove, PureDP
from dpharness.mechanisms import parts as P
from dpharness.mechanisms.parts import grouping as G
from dpharness.mechanisms.parts._base import walk_nodes
from dpharness.mechanisms.parts._structure import has_budget
from dpharness.mechanisms.parts.noise import NoiseBudget
from dpharness.mechanisms.parts.combinators import SplitBudget
from dpharness.mechanisms.parts.selection import SelectionBudget

__all__ = ["calibrate"]


@dataclasses.dataclass(frozen=True)
class _Share:
    """What one part may spend: ε (and δ), or ρ; exact."""

    epsilon: Fraction | None = None
    delta: Fraction | None = None
    rho: Fraction | None = None
    origin: str = ""  # where a ρ share came from (a split (ε, δ) total converted to zCDP)

    def times(self, w: Fraction) -> "_Share":
        """The share ``w`` of this budget (ε and ρ add under composition; a split never carries δ)."""
        return _Share(
            None if self.epsilon is None else self.epsilon * w,
            None,
            None if self.rho is None else self.rho * w,
            self.origin,
        )

    def describe(self) -> str:
        if self.rho is not None:
            return f"ρ = {float(self.rho):.6g}" + (f" ({self.origin})" if self.origin else "")
        return f"ε = {self.epsilon}" + (f", δ = {float(self.delta):.6g}" if self.delta is not None else "")


def _epsilon_of(budget: _Share) -> Fraction:
    """The share's ε: its own, or (a ρ share) the ε within ρ."""
    if budget.rho is not None:
        return _eps_within_rho(budget.rho)
    assert budget.epsilon is not None  # a share holds ε or ρ (_budget_of: a split's share, or the part's own)
    return budget.epsilon


def _exact(value: Any) -> Fraction | None:
    return None if value is None else Fraction(value)


def calibrate(steps: P.Step, *, records: Any, relation: Any, shape: str, dim: int | None) -> P.Step:
    """``steps`` with every budget placeholder replaced by the concrete noise it calibrates to."""
    if shape == "record":
        raise ParameterError(
            "budgets calibrate grid noise on aggregates; a one-record input (input='record') takes "
            "local randomizers with their own parameters (e.g. dp.randomized_response(log_odds=...))."
        )
    space = P.input_space(records, shape, dim)
    d0 = P.input_distance(relation, space)
    return _walk(steps, space, d0, None)


def _holds_gaussian(step: P.Step) -> bool:
    return any(type(n) is NoiseBudget and n.family == "gaussian" for n in walk_nodes(step))


def _split(parts: tuple, share: _Share, weights: tuple | None, where: str) -> list[_Share]:
    w = [Fraction(x) for x in (weights or (1,) * len(parts))]
    total = sum(w)
    gauss = [_holds_gaussian(p) for p in parts]
    if share.rho is None and any(gauss):
        i = gauss.index(True) + 1
        raise ParameterError(
            f"{where}: part {i} holds Gaussian noise, which is not pure DP; give the composition "
            "delta= with epsilon= (or rho=)."
        )
    return [share.times(x / total) for x in w]


def _walk(step: P.Step, space: P.Space, d: P.Distance, share: _Share | None) -> P.Step:
    if not has_budget(step) and share is None:
        return step
    if type(step) is NoiseBudget:
        return _leaf(step, space, d, share)
    if type(step) is SelectionBudget:
        return _selection(step, space, d, share)
    if type(step) is SplitBudget:
        if share is not None:
            raise ParameterError(
                f"{step.describe()} splits its own total inside a split composition; give the budget at "
                "one level (the outer dp.compose(..., epsilon=...) or this one)."
            )
        total = _Share(_exact(step.epsilon), _exact(step.delta), _exact(step.rho))
        if any(_holds_gaussian(p) for p in step.parts) and total.delta is not None:
            # Gaussians compose exactly in zCDP (ρ adds), far tighter than splitting ε and δ (basic composition)
            assert total.epsilon is not None  # SplitBudget: δ only with ε (ρ excludes δ; one of ε and ρ)
            rho = _rho_for_eps_delta(total.epsilon, total.delta)
            total = _Share(
                rho=rho,
                origin=f"a share of ρ = {float(rho):.6g}, the zCDP budget of (ε, δ) = "
                f"({total.epsilon}, {float(total.delta):.6g})",
            )
        shares = _split(step.parts, total, step.weights, "dp.compose(..., " + total.describe() + ")")
        return P.Compose(tuple(_walk(p, space, d, s) for p, s in zip(step.parts, shares)))
    if type(step) is P.Compose:
        if share is None:
            return P.Compose(tuple(_walk(p, space, d, None) for p in step.parts))
        shares = _split(step.parts, share, None, step.describe())
        return P.Compose(tuple(_walk(p, space, d, s) for p, s in zip(step.parts, shares)))
    if type(step) is P.Repeat:
        inner = None if share is None else share.times(Fraction(1, step.times))
        return dataclasses.replace(step, part=_walk(step.part, space, d, inner))
    if type(step) is P.Chain:
        first = step.first
        if isinstance(first, P.Transformation):
            # the stability the proof derives (its walk's own lemma for this transformation)
            mid, d_mid = first.out_space(space), _stability_walk().transformation("", first, space, d)
            return P.Chain(first, _walk(step.second, mid, d_mid, share))
        if not isinstance(first, P.Transformation) and not has_budget(step.second):
            return P.Chain(_walk(first, space, d, share), step.second)
    if type(step) is G.GroupBy or (type(step) is P.Chain and type(step.first) is G.BoundContributions):
        if share is not None:
            raise ParameterError(
                f"a share of a split composition reaches {_short(step)}; give its selection and its parts their "
                "own budgets (dp.partition_select(epsilon=..., delta=...), dp.laplace(epsilon=...)) instead."
            )
        return _group_by(step, space, d)
    node = step.first if type(step) is P.Chain else step
    raise ParameterError(
        f"a budget under {node.describe()}: calibration follows the stability of clamp, column, count, sum, "
        "histogram, map_records, clip_norm through compose and repeat; give the noise here an explicit "
        "scale= / sigma= (its privacy is still proved)."
    )


def _short(step: P.Step) -> str:
    text = step.describe()
    return text if len(text) <= 90 else text[:87] + "..."


def _group_by(step: P.Step, space: P.Space, d: P.Distance) -> P.Step:
    """A group-by (``bound_contributions >> group_by [>> post]`` under add/remove of one user, or a group-by
    under add/remove of one record) with its selection and per-key noise solved from their budgets by the
    inverse of the family's map (:mod:`dpharness.proofs.parts.grouping`): with L keys touched by one
    neighbour, L1 records added over them and at most m1 in one key, the selection's ``t = L/ε`` and its
    threshold the smallest whose δ is within the budget; each per-key Laplace ``t = D/ε`` grid steps, D the
    part's total grid steps over the touched keys, rounding included (the proof derives ε = D/t again)."""
    from .parts import grouping as PG

    if type(step) is G.GroupBy:
        b, g, post = None, step, None
        if not isinstance(d.relation, AddRemove):
            raise ParameterError(
                f"budgets under {_short(step)} are solved under add/remove of one record (or of one user after "
                "dp.bound_contributions), as its proof is; declare relation=AddRemove() or give explicit scales."
            )
    else:
        assert type(step) is P.Chain  # headed by a BoundContributions (the caller's test)
        b, g, post = G.split_bounded(step)
        if type(g) is not G.GroupBy:
            raise ParameterError(f"{b.describe()} must be followed directly by dp.group_by(by={b.by}, ...).")
        if not isinstance(d.relation, G.AddRemoveUser):
            raise ParameterError(
                f"{b.describe()} bounds users: declare relation=dp.AddRemoveUser(user={b.user}) (budgets under it "
                "are solved for one user)."
            )
    L, L1, m1, _ = PG.keys_touched(b, g)
    select = g.select
    if type(select) is G.PartitionSelectBudget:
        select = _selection_of(select, L, PG)
    part = g.part
    if part is not None and has_budget(part):
        walk = _stability_walk()
        part = _per_key(part, space, lambda pre, agg, gq: _part_steps(walk, pre, agg, gq, space, L, L1, m1, PG), None)
    resolved = dataclasses.replace(g, select=select, part=part)  # keys from the data stay so (from_data)
    if b is None:
        return resolved
    return P.Chain(b, resolved if post is None else P.Chain(resolved, post))


def _part_steps(walk: Any, pre: list, agg: Any, gq: Fraction, space: P.Space, L: int, L1: int, m1: int, PG: Any):
    c1, agg_space = PG.part_stability(walk, "", pre, agg, space)
    return PG.part_grid_steps(c1, agg_space, gq, L, L1, m1), c1


def _selection_of(select: Any, L: int, PG: Any) -> Any:
    """The :class:`PartitionSelect` a selection budget gives when one neighbour touches L keys."""
    how = []
    if select.epsilon is not None:
        t = Fraction(L) / Fraction(select.epsilon)
        scale = _plain(t)
        e = select.epsilon
        shown = f"({e})" if isinstance(e, Fraction) and e.denominator != 1 else f"{e}"
        how.append(f"scale t = L/ε = {L}/{shown} = {t}")
    else:
        scale, t = select.scale, Fraction(select.scale)
    if select.delta is not None:
        T = PG.selection_threshold(t, L, Fraction(select.delta))
        if T is None:
            raise ParameterError(
                f"{select.describe()}: no threshold gives δ <= {select.delta} at scale {float(t):.6g} for L = {L} "
                "keys; pass a larger delta= (or threshold= explicitly)."
            )
        threshold = T
        how.append(f"threshold T = {T}, the smallest whose δ = 1 − (1 − p)^{L} is within δ = {select.delta}")
    else:
        threshold = select.threshold
    try:
        return G.PartitionSelect(threshold, scale, "from " + ", ".join(how) + f" (L = {L} keys touched)")
    except ParameterError as e:
        raise ParameterError(f"{select.describe()} gives {e}") from None


def _per_key(part: P.Step, space: P.Space, steps_of: Any, share: _Share | None) -> P.Step:
    """A group-by's part with every Laplace budget solved: ``t = D/ε`` (D from ``steps_of(pre, agg, g)``),
    a ``dp.compose(..., epsilon=)`` split by weight as :func:`_split` does, a plain compose equally."""
    if type(part) is SplitBudget:
        if share is not None:
            raise ParameterError(
                f"{part.describe()} splits its own total inside a split composition; give the budget at one level."
            )
        if part.rho is not None or part.delta is not None or any(_holds_gaussian(p) for p in part.parts):
            raise ParameterError(
                f"{part.describe()}: a group-by's parts take Laplace noise (dp.laplace()), accounted in pure ε; split epsilon= only."
            )
        total = _Share(_exact(part.epsilon))
        shares = _split(part.parts, total, part.weights, "dp.compose(..., " + total.describe() + ")")
        return P.Compose(tuple(_per_key(p, space, steps_of, s) for p, s in zip(part.parts, shares)))
    if type(part) is P.Compose:
        each: list[_Share | None] = (
            [None] * len(part.parts) if share is None else list(_split(part.parts, share, None, part.describe()))
        )
        return P.Compose(tuple(_per_key(p, space, steps_of, s) for p, s in zip(part.parts, each)))
    (pre, agg, noise), *_ = G.simple_parts(part)
    if type(noise) is not NoiseBudget:
        if share is not None:
            raise ParameterError(
                f"{noise.describe()} has an explicit scale inside a split composition; drop the scale (dp.laplace()) "
                "to give it a share, or take it out of the split."
            )
        return part
    if noise.family != "laplace":
        raise ParameterError(
            f"{noise.describe()} in a group-by's part: per-key parts take Laplace noise (pure ε, composed with the "
            "selection); pass dp.laplace(epsilon=...)."
        )
    own = _Share(_exact(noise.epsilon))
    budget = _budget_of(noise, share, own, "laplace()", "epsilon=", "scale= or epsilon=")
    g = Fraction(noise.granularity)
    D, c1 = steps_of(pre, agg, g)
    if D == 0:
        raise ParameterError(
            f"{agg.describe()} >> {noise.describe()}: the aggregate is the same on neighbouring inputs "
            "(sensitivity 0), so no scale follows from a budget; pass an explicit scale."
        )
    eps = _epsilon_of(budget)
    t = D / eps
    laplace = P.GridLaplace(
        _plain(t * g),
        noise.granularity,
        f"scale from {budget.describe()}: the touched keys' centres at most D = {D} grid steps of g = {g} apart "
        f"in all (rounding included), t = D/ε = {t} steps, scale = t·g",
    )
    out: P.Step = laplace
    for node in reversed([*pre, agg]):
        out = P.Chain(node, out)
    return out


def _stability_walk() -> Any:
    """A proof walk whose obligations are discarded: only the distances its stability lemmas return are read."""
    from ._kernel import ProofBuilder
    from .parts._walk import _Walk

    return _Walk(ProofBuilder(None, PureDP(1)))


def _budget_of(step: Any, share: _Share | None, own: _Share, name: str, own_args: str, scale_args: str) -> _Share:
    """The budget a placeholder spends: its own, or its share of a split; exactly one of them."""
    if step.budgeted and share is not None:
        raise ParameterError(
            f"{step.describe()} has its own budget inside a split composition; drop its {own_args} (the "
            "split gives it a share) or take it out of the split."
        )
    if not step.budgeted and share is None:
        raise ParameterError(
            f"{name} has neither a scale nor a budget; pass {scale_args}, or put it in "
            "dp.compose(..., epsilon=...) to take a share of a total."
        )
    return share or own


def _leaf(step: NoiseBudget, space: P.Space, d: P.Distance, share: _Share | None) -> P.Step:
    own = _Share(_exact(step.epsilon), _exact(step.delta), _exact(step.rho))
    scale_args = "scale= or epsilon=" if step.family == "laplace" else "sigma=, rho= or epsilon= with delta="
    budget = _budget_of(step, share, own, f"{step.family}()", "epsilon=/rho=", scale_args)
    if space.kind not in ("scalar", "vector"):
        raise ParameterError(
            f"{step.describe()} follows {space.describe()}; aggregate first (dp.count(), dp.sum(), ...)."
        )
    g = Fraction(step.granularity)
    d1, d2sq, _ = P.grid_steps(space, d, g)
    if d1 == 0:
        raise ParameterError(
            f"{step.describe()}: the value it perturbs is the same on neighbouring inputs (sensitivity 0), "
            "so no scale follows from a budget; pass an explicit scale."
        )
    if step.family == "laplace":
        eps = _epsilon_of(budget)
        t = d1 / eps
        return P.GridLaplace(
            _plain(t * g),
            step.granularity,
            f"scale from {budget.describe()}: centres at most D = {d1} grid steps of g = {g} apart, "
            f"t = D/ε = {t} steps, scale = t·g",
        )
    if budget.rho is not None:
        sigma = _sigma_for_rho(d2sq, budget.rho, g)
        how = (
            f"σ from {budget.describe()}: τ² >= D₂²/(2ρ) = {d2sq / (2 * budget.rho)} grid steps² (g = {g}), rounded up"
        )
    elif space.dim == 1:
        assert budget.epsilon is not None and budget.delta is not None  # a Gaussian budget: ρ, or ε with δ
        sigma = _sigma_for_eps_delta(int(d1), budget.epsilon, budget.delta, g)
        how = (
            f"σ from {budget.describe()}: the smallest σ found whose certified δ(ε) of the discrete Gaussian at shift "
            f"D = {d1} grid steps (g = {g}) is within δ"
        )
    else:
        assert budget.epsilon is not None and budget.delta is not None  # a Gaussian budget: ρ, or ε with δ
        rho = _rho_for_eps_delta(budget.epsilon, budget.delta)
        sigma = _sigma_for_rho(d2sq, rho, g)
        how = (
            f"σ from {budget.describe()} via ρ = {float(rho):.6g} (the largest ρ whose zCDP conversion gives δ(ε)) and "
            f"τ² >= D₂²/(2ρ) = {float(d2sq / (2 * rho)):.6g} grid steps² (g = {g})"
        )
    return P.GridGaussian(sigma, step.granularity, how)


def _selection(step: SelectionBudget, space: P.Space, d: P.Distance, share: _Share | None) -> P.Step:
    """The selection's scale from its family's privacy map (:mod:`dpharness.proofs.parts.selection`) at the
    scores' L∞ distance Δ: exponential mechanism ε = c·k·Δ/scale (c = 1 on monotone scores, else 2),
    permute-and-flip ε = 2Δ/scale, grid-Laplace noisy max ε = 2D/t with D the distance in grid steps."""
    budget = _budget_of(step, share, _Share(_exact(step.epsilon)), step.describe(), "epsilon=", "scale= or epsilon=")
    eps = _epsilon_of(budget)
    delta = d.linf
    if delta == 0:
        raise ParameterError(
            f"{step.describe()}: the scores are the same on neighbouring inputs (sensitivity 0), so no "
            "scale follows from a budget; pass an explicit scale."
        )
    if step.kind == "exponential":
        c = 1 if d.monotone else 2
        scale = c * step.k * delta / eps
        how = (
            f"scale from {budget.describe()}: scores at L∞ distance Δ = {delta}"
            + (", monotone" if d.monotone else "")
            + f", scale = {c}·{step.k}·Δ/ε"
        )
        return step.resolve(_plain(scale), how)
    if step.kind == "exponential_noise":
        return step.resolve(_plain(2 * delta / eps), f"scale from {budget.describe()}: Δ = {delta}, scale = 2Δ/ε")
    g = Fraction(step.granularity)
    q = space.quantum
    steps = delta / g if q is not None and (q / g).denominator == 1 else Fraction(math.ceil(delta / g))
    t = 2 * steps / eps
    return step.resolve(
        _plain(t * g), f"scale from {budget.describe()}: D = {steps} grid steps of g = {g}, t = 2D/ε, scale = t·g"
    )


def _plain(x: Fraction) -> int | float | Fraction:
    """The exact value in its plainest type (an int, a float equal to it, else the Fraction)."""
    if x.denominator == 1:
        return int(x)
    try:
        return float(x) if Fraction(float(x)) == x else x
    except OverflowError:  # beyond the doubles (a budget of 1e-320): the Fraction, which the step then judges
        return x


def _eps_within_rho(rho: Fraction) -> Fraction:
    """An exact ε with ε²/2 <= ρ (pure ε-DP is ε²/2-zCDP), within a float's rounding of √(2ρ)."""
    e = Fraction(math.sqrt(float(2 * rho)))
    while e * e / 2 > rho:
        e = Fraction(math.nextafter(float(e), 0.0))
    return e


def _sigma_for_rho(d2sq: Fraction, rho: Fraction, g: Fraction) -> float:
    """The smallest float σ with (σ/g)² >= D₂²/(2ρ), exactly."""
    need = g * g * d2sq / (2 * rho)
    try:
        s = math.sqrt(float(need))
    except OverflowError:  # σ² beyond the doubles
        raise ParameterError(
            f"the budget ρ = {float(rho):.3g} calls for a Gaussian σ beyond the doubles (σ² = g²·D₂²/(2ρ) with "
            f"D₂² = {float(d2sq):.6g}, g = {g}); pass a larger budget."
        ) from None
    while Fraction(s) ** 2 < need:
        s = math.nextafter(s, math.inf)
    while s > 0 and Fraction(math.nextafter(s, 0.0)) ** 2 >= need:
        s = math.nextafter(s, 0.0)
    return s


def _continuous_delta(eps: float, shift: float, sigma: float) -> float:
    """δ(ε) of the continuous Gaussian shift pair (Balle & Wang 2018, Thm 8): a starting point only."""
    from scipy.special import log_ndtr

    a = shift / (2 * sigma) - eps * sigma / shift
    b = -shift / (2 * sigma) - eps * sigma / shift
    return math.exp(log_ndtr(a)) - math.exp(eps + log_ndtr(b))


def _certified_delta(eps: Fraction, shift: int, tau2: Fraction) -> float:
    """The upper end of the proof's rigorous enclosure of the discrete Gaussian's δ(ε) at ``shift``."""
    from .parts import _prove as proof

    e = sp.Rational(eps.numerator, eps.denominator)
    if tau2 <= proof._MAX_ENCLOSURE_TAU2 and shift <= proof._MAX_ENCLOSURE_SHIFT:
        from .discrete_gaussian import delta_enclosure

        return delta_enclosure(e, shift, sp.Rational(tau2.numerator, tau2.denominator))[1]
    return proof._dg_delta_bounds(e, shift, tau2)[1]


def _sigma_for_eps_delta(shift: int, eps: Fraction, delta: Fraction, g: Fraction) -> float:
    """A float σ (in the data's units) whose certified δ(ε) at ``shift`` grid steps is <= δ, near the
    smallest: bisection on τ between the continuous Gaussian's answer and a certified upper end."""
    e, dl = float(eps), float(delta)
    lo, hi = 1e-6, 1.0
    while _continuous_delta(e, shift, hi) > dl:
        hi *= 2
        if hi > 2**60:
            raise ParameterError(f"no σ below 2**60 grid steps gives δ(ε = {eps}) <= {delta}; pass a larger budget.")
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _continuous_delta(e, shift, mid) > dl else (lo, mid)

    def ok(tau: float) -> bool:
        return Fraction(_certified_delta(eps, shift, Fraction(tau) ** 2)) <= delta

    up = hi
    step = 1e-9
    while not ok(up):
        up = hi * (1 + step)
        step *= 4
        if step > 1e3:
            raise ParameterError(f"no σ with a certified δ(ε = {eps}) <= {delta} was found; pass sigma= explicitly.")
    down = hi * (1 - 1e-3)
    for _ in range(24):  # the certified bound is within a hair of the continuous one: tighten toward it
        mid = (down + up) / 2
        down, up = (down, mid) if ok(mid) else (mid, up)
    return (
        float(Fraction(up) * g)
        if Fraction(float(Fraction(up) * g)) >= Fraction(up) * g
        else math.nextafter(float(Fraction(up) * g), math.inf)
    )


def _rho_for_eps_delta(eps: Fraction, delta: Fraction) -> Fraction:
    """The largest ρ found (exact) whose zCDP conversion, as the proof evaluates it, gives δ(ε) <= δ."""
    from ._kernel import exact_sign
    from .parts import _prove as proof

    e = sp.Rational(eps.numerator, eps.denominator)
    target = sp.log(sp.Rational(delta.numerator, delta.denominator))

    def ok(rho: Fraction) -> bool:
        log_delta, _ = proof._zcdp_log_delta(sp.Rational(rho.numerator, rho.denominator), e)
        return exact_sign(target - log_delta) in (0, 1)

    lo, hi = 0.0, float(eps)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(Fraction(mid)) else (lo, mid)
    rho = Fraction(lo)
    if rho == 0 or not ok(rho):
        raise ParameterError(f"no ρ gives δ(ε = {eps}) <= {delta} by the zCDP conversion; pass sigma= explicitly.")
    return rho
