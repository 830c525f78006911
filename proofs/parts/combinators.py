"""Accounting of the combinators (:mod:`dpharness.mechanisms.parts.combinators`): basic composition (ε
adds), zCDP/Rényi composition (ρ adds; Bun & Steinke 2016), advanced composition (Dwork & Roth 2014 Thm
3.20), parallel composition (McSherry 2009), repeat (the sequential composition of identical copies) and
iterate (adaptive sequential composition; the state update is post-processing, Dwork & Roth 2014 Thm
2.1). Post-processing after noise is read by the walk itself (:meth:`~._walk._Walk._post`)."""

from __future__ import annotations

from typing import Any

import sympy as sp

from dpharness.core import AddRemove, Substitute
from dpharness.mechanisms.parts._base import Distance, Space
from dpharness.mechanisms.parts.combinators import Compose, Iterate, Parallel, Repeat

from .. import _account as A
from .. import _lemmas as lemmas
from .._model import Obligation
from ._walk import Profile, _join, node


@node(Compose)
def _compose(walk: Any, path: str, step: Compose, space: Space, d: Distance) -> Profile:
    profiles = [walk.walk(_join(path, f"part {i + 1}"), p, space, d) for i, p in enumerate(step.parts)]
    return compose(walk, path, profiles)


def compose(walk: Any, path: str, profiles: list[Profile]) -> Profile:
    eps = None if any(p.eps is None for p in profiles) else sp.Add(*[p.eps for p in profiles])
    rho = sp.Add(*[p.rho for p in profiles])
    if eps is not None:
        obs = lemmas.sequential_composition([p.eps for p in profiles])
        walk.pb.add(
            [
                Obligation(walk._tag(path, o.statement), o.formula, o.justification, o.checker, o.discharged, o.detail)
                for o in obs
            ]
        )
    walk.fact(
        path,
        f"zCDP composition: ρ = Σ ρ_i = {rho}" + (" (each pure ε_i gives ρ_i = ε_i²/2)" if eps is not None else ""),
        "Bun & Steinke 2016, Lemma 2.3 (composition) and Prop. 1.4 (ε-DP implies ε²/2-zCDP)",
    )
    return A.compose(profiles)


@node(Repeat)
def repeat(walk: Any, path: str, step: Repeat, space: Space, d: Distance) -> Profile:
    inner = walk.walk(_join(path, f"each of {step.times} rounds"), step.part, space, d)
    walk.fact(
        path,
        f"repeat: {step.times} independent runs of the part on the same input, the sequential "
        f"composition of {step.times} copies (ε and ρ multiply by {step.times}; the PLD self-composes)",
        "Dwork & Roth 2014, Thm 3.16; Bun & Steinke 2016, Lemma 2.3; Zhu, Dong & Wang 2022, Thm 10",
    )
    return A.repeat(inner, step.times)


@node(Iterate)
def iterate(walk: Any, path: str, step: Iterate, space: Space, d: Distance) -> Profile:
    inner = walk.walk(_join(path, f"each of {step.times} rounds"), step.part, space, d)
    walk.fact(
        path,
        f"iterate: {step.times} rounds, each round's account the part's whatever the state (the state reaches "
        "only record-wise maps, 1-stable for every function); adaptive sequential composition of "
        f"{step.times} rounds (ε and ρ multiply by {step.times}; the PLD self-composes)",
        "adaptive composition: Dwork & Roth 2014, Thm 3.16 (ε), Bun & Steinke 2016, Lemma 2.3 (zCDP), "
        "Zhu, Dong & Wang 2022, Thm 10 (dominating pairs, adaptively chosen mechanisms)",
    )
    walk.fact(
        path,
        f"the state update {getattr(step.update, '__name__', 'update')} and the final state are "
        "post-processing of the releases",
        "Dwork & Roth 2014, Prop. 2.1",
    )
    return A.repeat(inner, step.times)


@node(Parallel)
def parallel(walk: Any, path: str, step: Parallel, space: Space, d: Distance) -> Profile:
    ar = walk.walk(_join(path, "part (add/remove)"), step.part, space, Distance(AddRemove()))
    if isinstance(d.relation, AddRemove):
        walk.fact(
            path,
            f"parallel over {len(step.keys)} disjoint partitions: an added/removed record lands in one "
            "partition, whose part sees add/remove; the others see the same data",
            "McSherry 2009 (parallel composition); independent randomness per partition",
        )
        return A.parallel_add_remove(ar)
    sub = walk.walk(_join(path, "part (substitute)"), step.part, space, Distance(Substitute()))
    walk.fact(
        path,
        "parallel under substitution: the record either changes inside one partition (the part's "
        "substitution loss) or moves between two (two parts each see add/remove: twice that loss)",
        "McSherry 2009; composition over the two partitions touched",
    )
    out = A.parallel_substitute(sub, ar)
    if out.units.distinct[0] is not None:
        walk.fact(
            path,
            f"for advanced composition the parallel step counts as {len(out.units)} units of at most "
            f"ε₀ = {out.units.distinct[0]} each (the larger scenario: {len(sub.units)} units inside one partition, "
            f"2 × {len(ar.units)} across two)",
            "padding a composition with 0-DP units changes nothing",
        )
    return out
