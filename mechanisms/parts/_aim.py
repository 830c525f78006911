"""Pairs aimed at the terms of the bound: for a mechanism declared from parts, the neighbouring pairs
where each term of its privacy account is attained or nearly so, read off the same structure the
sampler executes and the prover walks (STYLE 21: an audit is aimed by the structure).

* a group-by's partition selection: a key held by T − 1 records against T, and T against T + 1
  (:func:`.grouping.selection_pairs`; user-level: :func:`.grouping.user_level_pairs`);
* a record-wise map followed by clipping (DP-SGD): the *canary*, the record of the declared domain whose
  mapped value (at the iteration's first state) is longest, so that it sits at the clipping norm, added
  to the empty data set (add/remove) or substituted for the record whose mapped value points most the
  other way (substitution);
* every noise leaf: its extreme pair (:func:`._law.extreme_pairs`, the domain's extremes).

Nothing here is certified and nothing needs to be right for soundness: the auditor validates every pair
with ``input_spec.validate_pair`` (a neighbour pair of the declared relation, inside the declared
records domain) and counts every pair it runs in its union bound. The pairs depend on the structure
only, not on a proof, so an UNPROVEN mechanism is aimed at as well."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpharness.core import AddRemove, Substitute, Witness
from dpharness.errors import DPHarnessError

from ._base import walk_nodes
from ._law import _record_extremes, extreme_pairs
from .combinators import Iterate
from .grouping import AddRemoveUser, GroupBy, selection_pairs, user_level_pairs
from .transformations import ClipNorm, MapRecords

__all__ = ["aimed_pairs"]

_MAX_CANARY_CANDIDATES = 64  # records whose mapped value is computed when looking for the canary
_EXTREME_PAIRS = 2  # extreme pairs of the noise leaves kept


def aimed_pairs(m: Any) -> tuple[Witness, ...]:
    """The aimed pairs of a :class:`~._mechanism.PartsMechanism`, most specific term first, each a
    :class:`~dpharness.core.Witness` (``event`` None) whose ``description`` names the term; only pairs
    the mechanism's ``input_spec.validate_pair`` accepts, without duplicates."""
    found: list[tuple[Any, Any, str]] = []
    extremes = _safe(lambda: _record_extremes(m), [])
    if any(type(n) is GroupBy for n in walk_nodes(m.steps)):
        found += _safe(lambda: selection_pairs(m, extremes), [])
        if isinstance(m.relation, AddRemoveUser):
            found += [
                (a, b, "partition selection under add/remove of one user: the keys of one user")
                for a, b in _safe(lambda: user_level_pairs(m), [])
            ]
    found += _safe(lambda: _canary_pairs(m, extremes), [])
    found += [
        (a, b, "the extreme pair of the noise leaves (the records domain's extremes)")
        for a, b in _safe(lambda: extreme_pairs(m), [])[:_EXTREME_PAIRS]
    ]
    out: list[Witness] = []
    for a, b, text in found:
        try:
            pa, pb = m.input_spec.validate_pair(a, b)
        except (DPHarnessError, ValueError, TypeError):
            continue
        if any(_same(pa, w.data) and _same(pb, w.neighbor) for w in out):
            continue
        out.append(Witness(data=pa, neighbor=pb, description=f"aimed at {text}"))
    return tuple(out)


def _safe(build: Any, default: Any) -> Any:
    """What ``build()`` returns, or ``default`` when the structure offers no such pair (aiming is a
    help to the audit: a structure it cannot read is audited on the searched pairs alone)."""
    try:
        return build()
    except (DPHarnessError, ArithmeticError, ValueError, TypeError, IndexError):
        return default


def _same(a: Any, b: Any) -> bool:
    aa, bb = np.asarray(a), np.asarray(b)
    return aa.shape == bb.shape and bool(np.array_equal(aa, bb))


def _canary_pairs(m: Any, extremes: list) -> list[tuple[Any, Any, str]]:
    """For each record-wise map followed by a norm clip: the canary (the domain record whose mapped
    value is longest at the first state of its iteration, so at or beyond the clipping norm when any
    record is) against the empty data set (add/remove), or substituted for the record whose mapped
    value points most the other way (substitution, a data set of one record)."""
    if m.shape != "dataset" or not isinstance(m.relation, (AddRemove, Substitute)):
        return []
    nodes = walk_nodes(m.steps)
    clips = [n for n in nodes if type(n) is ClipNorm]
    maps = [n for n in nodes if type(n) is MapRecords]
    if not clips or not maps or not extremes:
        return []
    cands = np.array([np.asarray(e, dtype=float).reshape(-1) for e in extremes[:_MAX_CANARY_CANDIDATES]])
    if m.space.dim == 1:
        cands = cands.reshape(-1, 1)
    out: list[tuple[Any, Any, str]] = []
    for mr in maps:
        loop = next((it for it in nodes if type(it) is Iterate and any(n is mr for n in walk_nodes(it.part))), None)
        states = None if loop is None else np.tile(loop.init, (len(cands), 1))
        rows = cands if m.space.dim > 1 else cands[:, 0]
        values = np.asarray(mr.apply_rows(rows, states), dtype=float).reshape(len(cands), -1)
        norms = np.linalg.norm(values, axis=1)
        best = int(np.argmax(norms))
        bound = float(clips[0].bound)
        where = "at or beyond" if norms[best] >= bound else "nearest"
        text = (
            f"the clipping norm: the canary {cands[best].tolist()} (its {mr.describe()} value has norm "
            f"{norms[best]:.3g}, {where} clip {bound:g}{' at the first state' if loop is not None else ''})"
        )
        canary = cands[best : best + 1]
        if isinstance(m.relation, AddRemove):
            empty = np.zeros((0, cands.shape[1]))
            a, b = empty, canary
        else:
            other = int(np.argmin(values @ values[best]))
            a, b = cands[other : other + 1], canary
        if m.space.dim == 1:
            a, b = a[:, 0], b[:, 0]
        out.append((a, b, text))
    return out
