"""Grouping parts: a group-by over keys that come from the data, with partition selection (a partition
is released only if its noisy count passes a threshold), and per-user contribution bounding under
the add/remove-one-user relation. The privacy map is proved once in
:mod:`dpharness.proofs.parts.grouping` and instantiated at each node.

Used as::

    from dpharness import parts as dp, ApproxDP, RealBox

    # records (user id, key): count the distinct users per key, keys unknown in advance
    per_key = dp.mechanism(
        name="users_per_key", records=RealBox(0, 1000, 2), relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=4, max_per_partition=1)
              >> dp.group_by(by=1, keys=range(0, 1001), select=dp.partition_select(threshold=40, scale=2)),
        claim=ApproxDP(2, 1e-8),
    )

Design (as PipelineDP's count of privacy units per partition with Laplace thresholding and
post-aggregation thresholding, Tumult's and OpenDP's group-by-id):

* **Partition selection** (Korolova, Kenthapadi, Mishra & Ntoulas 2009, "Releasing search queries and
  clicks privately", WWW; Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo & Gipson 2020,
  "Differentially private SQL with bounded user contribution", PoPETs, §3.2 and §5): for every key
  present in the (bounded) data, ``c`` = the number of distinct users with a record under that key
  (under add/remove of one record every record is its own user: the number of records), a noisy count
  ``c + K`` with ``K`` discrete Laplace, ``P(K = k) ∝ exp(−|k|/t)``, ``t = scale`` (exact sampler,
  Canonne, Kamath & Steinke 2020), and the key is released with its noisy count iff ``c + K >= τ``
  (``threshold``, read exactly; on the integers: ``c + K >= T = ceil(τ)``, ``T >= 1``). A key absent
  from the data is never released.
* **Output encoding** (fixed width, for audits): ``keys`` is a declared universe used only to encode
  the release, one coordinate per key in the order given: the released noisy count, or ``0`` when the
  key is not released (released counts are ``>= T >= 1``, so ``0`` is unambiguous). Keys outside the
  universe are computed and dropped; partitions are independent, so this equals running the group-by
  over every key and then discarding the coordinates outside ``keys`` (post-processing): the
  universe plays no part in the selection or in the proof, except that a user can touch at most
  ``|keys|`` encoded partitions. Keys may be labels (strings or any hashable values): records given as
  numbers then carry a label's position in ``keys``.
* **Keys from the data** (``keys=None``): the universe is the set of keys present in the data set, and
  the release is the mapping of the released keys to their values, as a tuple of ``(key, noisy count,
  part values...)`` sorted by key (:func:`discovered_release`). It is the encoded release over those keys
  with its zeros dropped, and that equals the release over any universe holding them (absent keys are
  never released, and each key's noise is independent), so the proof is the same, with no bound on the
  keys one user touches beyond contribution bounding's. Such a group-by is the whole structure (after
  ``bound_contributions`` under user-level relations).
* **Contribution bounding** (:func:`bound_contributions`): records carry a user id (column ``user``);
  the neighbour relation is :class:`AddRemoveUser` (all records of one user added or removed). For each
  user, independently: draw a uniformly random order of that user's records (exact: ``numpy``'s
  integer permutation), keep each record that is among the first ``max_per_partition`` of its
  partition (key) in that order, and of those the first ``max_records`` in that order. So after
  bounding one user has at most ``k = max_records`` records in all, at most ``m`` per partition, and
  touches at most ``k`` partitions; what a user keeps depends only on that user's records and fresh
  randomness (never on other users). The selection counts distinct users, so each touched partition's
  count moves by exactly 1 (L0 <= k, L∞ = 1).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Protocol, Sequence, runtime_checkable

import numpy as np

from dpharness import _validate as _v
from dpharness.core import RealBox, Relation, record_definition
from dpharness.errors import ParameterError, UnsupportedError

from ._base import (
    Chain,
    Measurement,
    Post,
    Space,
    Step,
    _budget,
    _float_exact,
    _need,
    _plain,
    _post_chain,
    check_structure,
    execute,
    register,
    walk_nodes,
)
from ._grid import LAPLACE_MIN_UNITS, _check_scale_units

__all__ = [
    "AddRemoveUser",
    "BoundContributions",
    "GroupBy",
    "PartitionSelect",
    "PartitionSelectBudget",
    "STEP_TYPES",
    "bound_contributions",
    "group_by",
    "partition_select",
    "GroupLeaf",
    "user_level_pairs",
    "user_level_full_pairs",
    "release_encoding",
]

_MAX_KEYS = 2**12  # encoded output coordinates
_CHUNK = 50_000  # releases bounded at once
_CELLS = 2**22  # at most this many (release, record) cells a bounding draw holds at once: no cap on a user


def _chunk(records: int) -> int:
    """Releases whose bounding draws of one user's ``records`` are made at once (memory: chunk × records)."""
    return max(1, min(_CHUNK, _CELLS // max(records, 1)))


# --------------------------------------------------------------------------- the user-level relation


def _key(row: Any) -> tuple:
    return tuple(np.atleast_1d(np.asarray(row, dtype=float)).tolist())


@dataclass(frozen=True)
class AddRemoveUser(Relation):
    """Data sets of records that differ by adding or removing ONE USER: every record whose column
    ``user`` holds that user's id (user-level DP, PipelineDP's privacy unit, Tumult's and OpenDP's
    group-by-id). Decided exactly on the records' float values: the larger data set, as a multiset of
    rows, is the smaller plus a non-empty set of rows that all carry one user id that no row of the
    smaller carries."""

    user: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "user", _v.integer("user", self.user, minimum=0))

    def is_neighbour(self, a, b) -> bool:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or self.user >= a.shape[1] or len(a) == len(b):
            return False
        small, big = (a, b) if len(a) < len(b) else (b, a)
        rest: dict[tuple, int] = {}
        for row in map(_key, big):
            rest[row] = rest.get(row, 0) + 1
        for row in map(_key, small):
            if rest.get(row, 0) == 0:
                return False
            rest[row] -= 1
        added = [row for row, n in rest.items() for _ in range(n)]
        ids = {row[self.user] for row in added}
        if len(ids) != 1:
            return False
        (uid,) = ids
        return not np.any(small[:, self.user] == uid) if len(small) else True

    def describe(self) -> str:
        return f"add/remove one user (all records with the same id in column {self.user})"


# --------------------------------------------------------------------------- partition selection


def _threshold(value: Any) -> Any:
    value = _plain("threshold", value)
    if Fraction(value) < 1:
        raise ParameterError(
            f"threshold={value!r} must be >= 1 (a key is released when its noisy count reaches it; "
            "below 1 most absent-looking keys pass); pass e.g. threshold=20."
        )
    return value


@dataclass(frozen=True)
class PartitionSelect:
    """Laplace thresholding: a present key is released iff ``c + K >= threshold``, ``K`` discrete
    Laplace with scale ``t = scale`` (on the integers). Not a step: a parameter of :func:`group_by`."""

    threshold: Any
    scale: Any
    derived: str = ""  # how the scale or threshold was derived from a budget (shown, never read)

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold", _threshold(self.threshold))
        scale = _plain("scale", self.scale)
        if Fraction(scale) <= 0:
            raise ParameterError(f"scale={scale!r} must be > 0; pass the discrete Laplace scale of the noisy count.")
        _check_scale_units("scale", scale, 1)
        if Fraction(scale) < LAPLACE_MIN_UNITS:
            raise ParameterError(
                f"scale={scale!r} is below 2**-1000, the smallest scale the exact sampler draws; pass a larger scale."
            )
        object.__setattr__(self, "scale", scale)

    @property
    def t(self) -> Fraction:
        return Fraction(self.scale)

    @property
    def T(self) -> int:
        """The integer threshold: ``c + K >= threshold`` iff ``c + K >= ceil(threshold)``."""
        return math.ceil(Fraction(self.threshold))

    def describe(self) -> str:
        derived = f" [{self.derived}]" if self.derived else ""
        return f"partition_select(threshold={self.threshold!r}, scale={self.scale!r}){derived}"


record_definition(PartitionSelect)  # a monkeypatch of it is caught by the prover (proof_registry.patched_code)


@dataclass(frozen=True)
class PartitionSelectBudget:
    """``dp.partition_select(epsilon=..., delta=...)``: Laplace thresholding whose scale is given by the ε
    it may spend (``scale=`` otherwise) and whose threshold by the δ (``threshold=`` otherwise).

    A placeholder, never run or proved: ``dpharness.parts.mechanism`` resolves it into a
    :class:`PartitionSelect` from the keys one neighbour touches, L (:mod:`dpharness.proofs._calibrate`,
    the inverse of :mod:`dpharness.proofs.parts.grouping`'s map): ``t = L/ε`` exactly, and the threshold
    the smallest integer ``T >= 1`` whose ``δ = 1 − (1 − p)^L``, ``p = e^{−(T−1)/t}/(1 + e^{−1/t})``, is at
    most the budget's δ (checked exactly, as the proof checks it)."""

    threshold: Any = None
    scale: Any = None
    epsilon: Any = None
    delta: Any = None
    is_budget: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if (self.scale is None) == (self.epsilon is None):
            raise ParameterError(
                f"partition_select(scale={self.scale!r}, epsilon={self.epsilon!r}): pass the noise scale= or "
                "the epsilon= the selection may spend, exactly one of them."
            )
        if (self.threshold is None) == (self.delta is None):
            raise ParameterError(
                f"partition_select(threshold={self.threshold!r}, delta={self.delta!r}): pass the threshold= or "
                "the delta= the selection may spend (the threshold follows from it), exactly one of them."
            )
        if self.threshold is not None:
            object.__setattr__(self, "threshold", _threshold(self.threshold))
        if self.scale is not None:
            PartitionSelect(1, self.scale)  # the same validation of the scale
            object.__setattr__(self, "scale", _plain("scale", self.scale))
        object.__setattr__(self, "epsilon", _budget("epsilon", self.epsilon, "the selection"))
        object.__setattr__(self, "delta", _budget("delta", self.delta, "the selection"))
        if self.delta is not None and not Fraction(self.delta) < 1:
            raise ParameterError(f"delta={self.delta!r} must be < 1; pass a small δ such as 1e-6.")

    def describe(self) -> str:
        given = ", ".join(
            f"{n}={getattr(self, n)!r}"
            for n in ("threshold", "scale", "epsilon", "delta")
            if getattr(self, n) is not None
        )
        return f"partition_select({given})"


def partition_select(
    *, threshold: Any = None, scale: Any = None, epsilon: Any = None, delta: Any = None
) -> PartitionSelect | PartitionSelectBudget:
    """Laplace thresholding: release a key iff its count plus discrete Laplace noise of ``scale``
    reaches ``threshold`` (>= 1). A parameter of :func:`group_by`. Or give the budget instead:
    ``epsilon=`` for the scale (``t = L/ε``, L the keys one neighbour touches) and ``delta=`` for the
    threshold (the smallest whose proven δ is within it); ``dp.mechanism`` solves them
    (:class:`PartitionSelectBudget`)."""
    if epsilon is None and delta is None:
        if threshold is None or scale is None:
            raise ParameterError(
                f"partition_select(threshold={threshold!r}, scale={scale!r}): pass threshold= and scale=, or "
                "the budget they should spend (epsilon= for the scale, delta= for the threshold)."
            )
        return PartitionSelect(threshold, scale)
    return PartitionSelectBudget(threshold, scale, epsilon, delta)


# --------------------------------------------------------------------------- the group-by


def _rows(value: Any) -> np.ndarray:
    """Records as a 2-D float array (one-column records as one column)."""
    arr = np.asarray(value, dtype=float)
    return arr.reshape(-1, 1) if arr.ndim == 1 else arr


def _is_number(k: Any) -> bool:
    return isinstance(k, (int, float, Fraction, np.integer, np.floating))


def _encoding_keys(keys: Any) -> tuple:
    """The key universe: numbers (records carry the key itself), or labels (strings, or any hashable
    values, when one key is not a number: records given as numbers carry a label's position in ``keys``,
    and :func:`dpharness.release` maps a data frame's labels to their positions)."""
    if isinstance(keys, (str, bytes)) or not hasattr(keys, "__iter__"):
        raise ParameterError(
            f"keys={keys!r} is not a sequence; pass the key universe used to encode the release "
            "(e.g. keys=range(0, 100) or keys=['FR', 'DE'])."
        )
    keys = list(keys)
    if all(_is_number(k) for k in keys):
        vals = tuple(_float_exact("keys", k, "a partition key") for k in keys)
        distinct = len({Fraction(k) for k in vals})
    else:
        from dpharness._records import normalise

        _v.labels("keys", keys)
        vals = tuple(keys)
        distinct = len(set(vals))
        read = len({normalise(k) for k in vals})  # as the release reads labels: None, NaT and pd.NA are one
        if distinct == len(vals) and read != distinct:
            raise ParameterError(
                f"keys has {len(vals)} values that the release reads as {read} labels (every missing value, "
                "None, NaT or pd.NA, is the one label None; True is 1.0); pass each label once."
            )
    if not 1 <= len(vals) <= _MAX_KEYS or distinct != len(vals):
        raise ParameterError(f"keys has {len(vals)} values; pass between 1 and {_MAX_KEYS} distinct keys.")
    return vals


@dataclass(frozen=True)
class GroupBy(Measurement):
    """Group the records by column ``by`` (keys from the data) and release, per key, the noisy count of
    its users if it passes ``select`` (:class:`PartitionSelect`), encoded over the universe ``keys``
    (one coordinate per key: the noisy count, or 0 when not released). Law per encoded key with count
    ``c`` (independent across keys)::

        c = 0:  output 0 with probability 1                       (an absent key is never released)
        c >= 1: P(y) = P(K = y − c) for y >= T,  P(0) = P(K <= T − 1 − c),   T = ceil(threshold).

    ``part`` (optional): per-key aggregates with their own noise, run on the key's (bounded) records and
    released only with the key (zeros otherwise), each ``[dp.clamp(lo, hi) >>] [dp.column(j) >>]
    dp.count() | dp.sum() >> dp.laplace(scale)``, or a ``dp.compose`` of such. Output per key, key after
    key: the selection coordinate, then the part's coordinates.

    Privacy map (proved in :mod:`dpharness.proofs.parts.grouping`): when one neighbour changes the
    counts of at most ``L`` encoded keys by at most 1 each, (ε, δ) = (L/t, 1 − (1 − p)^L) with
    p = P(K >= T − 1) = e^{−(T−1)/t}/(1 + e^{−1/t}); ``L = 1`` under add/remove of one record. Each part
    adds D/t_part, D its total grid steps over the touched keys (at most L1 records in all, m per key)."""

    by: int
    keys: tuple  # () with from_data: the keys present in the data
    select: PartitionSelect
    part: Any = None
    # keys=None: the keys present in the data, released as a mapping (:meth:`with_keys`, :func:`discovered_release`)
    from_data: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "by", _v.integer("by", self.by, minimum=0))
        if self.keys is None or self.from_data:  # the keys present in the data (see :meth:`with_keys`)
            object.__setattr__(self, "keys", ())
            object.__setattr__(self, "from_data", True)
        else:
            object.__setattr__(self, "keys", _encoding_keys(self.keys))
        if type(self.select) not in (PartitionSelect, PartitionSelectBudget):  # a subclass could read it two ways
            raise ParameterError(
                f"select={self.select!r} is not a partition selection; pass "
                "select=dp.partition_select(threshold=..., scale=...)."
            )
        if self.part is not None:
            simple_parts(self.part)

    @property
    def part_width(self) -> int:
        return 0 if self.part is None else len(simple_parts(self.part))

    def with_keys(self, found: Sequence) -> "GroupBy":
        """This group-by over the universe ``found`` (distinct keys, sorted: those present in a data set),
        without the limit on a declared universe's size (only present keys are ever released)."""
        g = copy.copy(self)
        object.__setattr__(g, "keys", tuple(found))
        object.__setattr__(g, "from_data", False)
        return g

    @property
    def labelled(self) -> bool:
        """Whether the keys are labels (records given as numbers carry a label's position in ``keys``)."""
        return not self.from_data and not all(_is_number(k) for k in self.keys)

    @property
    def key_values(self) -> tuple:
        """The number records carry for each key: the key itself, or a label's position in ``keys``."""
        return tuple(range(len(self.keys))) if self.labelled else self.keys

    def describe(self) -> str:
        k = self.keys
        if self.from_data:
            part = "" if self.part is None else f", part={self.part.describe()}"
            return f"group_by(by=column {self.by}, keys from the data, select={self.select.describe()}{part})"
        show = repr if self.labelled else str
        shown = ", ".join(map(show, k)) if len(k) <= 4 else f"{show(k[0])}, {show(k[1])}, ..., {show(k[-1])}"
        part = "" if self.part is None else f", part={self.part.describe()}"
        return f"group_by(by=column {self.by}, keys=[{shown}] ({len(k)}), select={self.select.describe()}{part})"

    def out_width(self, space: Space) -> int:
        _need(space, "records", "group_by")
        if self.by >= space.dim:
            raise ParameterError(f"by={self.by} but records have {space.dim} column(s); pass by < {space.dim}.")
        if self.part is not None:
            out, width = check_structure(self.part, space)
            if out is not None or width != self.part_width:
                raise ParameterError(f"part={self.part.describe()} must end every branch in noise (one number each).")
        if self.labelled and not (space.lo[self.by] <= 0 and len(self.keys) - 1 <= space.hi[self.by]):
            # of the mechanism alone, so refused when it is declared (never at a release, by the data)
            raise ParameterError(
                f"{self.describe()} carries its {len(self.keys)} labels as positions 0..{len(self.keys) - 1} in "
                f"column {self.by}, but the records hold [{float(space.lo[self.by]):g}, {float(space.hi[self.by]):g}] "
                "there; declare records whose key column holds every position."
            )
        if self.from_data:
            return -1  # a mapping of the keys released, not a fixed layout
        return len(self.keys) * (1 + self.part_width)

    def codes(self, col: np.ndarray) -> np.ndarray:
        """Each value's position in ``keys`` (−1 when it is none of them), by float equality as
        ``col == float(k)`` (so −0.0 is the key 0). Integer keys spanning at most ``2**16``: a table
        look-up; distinct keys about evenly spaced (stand-ins): a guess by arithmetic, checked by equality;
        others: a binary search in the sorted keys."""
        col = np.asarray(col, dtype=float)
        keys = np.array([float(k) for k in self.key_values])
        low, high = float(keys.min()), float(keys.max())
        if np.all(np.trunc(keys) == keys) and high - low <= 2**16 and max(-low, high) < 2**52:
            table = np.full(int(high - low) + 3, -1, dtype=np.int64)  # one slot either side: outside the keys
            table[(keys - low).astype(np.int64) + 1] = np.arange(len(keys))
            whole = np.fmax(col, low - 1)  # exact (integer bounds below 2**52); NaN -> low - 1
            np.fmin(whole, high + 1, out=whole)
            index = whole.astype(np.int64)  # truncates: a value that is not an integer differs from it
            bad = index != whole
            index -= int(low)
            if np.array_equal(keys, low + np.arange(len(keys))):  # keys low, low + 1, ...: the code is the offset
                bad |= index == len(keys)
                codes = index
            else:
                codes = table[index + 1]
            if bad.any():
                codes[bad] = -1
            return codes
        order = np.argsort(keys)
        ordered = keys[order]
        step = (ordered[-1] - ordered[0]) / max(len(keys) - 1, 1)
        if len(col) > 4096 and len(keys) > 2 and np.isfinite(step) and step > 0 and np.all(ordered[1:] > ordered[:-1]):
            spread = np.abs(ordered - (ordered[0] + step * np.arange(len(keys)))).max()
        else:
            spread = np.inf
        if spread < step / 4:
            # distinct keys about evenly spaced (the stand-ins of keys found in the data): each value's key
            # guessed by arithmetic and kept only where it equals the value (one key equals it at most);
            # the values guessed wrong, and those that are no key, by the search below
            with np.errstate(invalid="ignore", over="ignore"):
                guess = np.rint((col - ordered[0]) / step)
            guess[~(guess >= 0)] = 0  # NaN too
            np.minimum(guess, len(keys) - 1, out=guess)
            at = guess.astype(np.intp)
            hit = ordered[at] == col
            codes = np.where(hit, order[at], -1)
            miss = np.flatnonzero(~hit)
            if len(miss):
                codes[miss] = self._searched(col[miss], order, ordered)
            return codes
        return self._searched(col, order, ordered)

    @staticmethod
    def _searched(col: np.ndarray, order: np.ndarray, ordered: np.ndarray) -> np.ndarray:
        """:meth:`codes` by a binary search in the sorted keys ``ordered`` (``order``: their positions)."""
        at = np.minimum(np.searchsorted(ordered, col), len(ordered) - 1)
        return np.where(ordered[at] == col, order[at], -1)

    def counts(
        self, value: Any, user: int | None = None, kept: np.ndarray | None = None, codes: np.ndarray | None = None
    ) -> np.ndarray:
        """Per encoded key: the number of records (``user`` None) or of distinct users among the kept
        records (``kept``: a boolean mask of rows, or None for all); users are distinct as floats
        (``np.unique``'s equality). ``codes``: :meth:`codes` of the key column, when already known."""
        arr = _rows(value)
        if kept is not None:
            arr = arr[kept]
            codes = None if codes is None else codes[kept]
        if len(arr) == 0:
            return np.zeros(len(self.keys), dtype=np.int64)
        codes = self.codes(arr[:, self.by]) if codes is None else codes
        inside = codes >= 0
        codes = codes[inside]
        if user is not None:  # count each (key, user) pair once: sorted by key then user, the first of each run
            users = arr[inside, user]
            order = np.lexsort((users, codes))
            codes, users = codes[order], users[order]
            first = np.ones(len(codes), dtype=bool)
            first[1:] = (codes[1:] != codes[:-1]) | (users[1:] != users[:-1])
            codes = codes[first]
        return np.bincount(codes, minlength=len(self.keys)).astype(np.int64)

    def release(
        self,
        counts: np.ndarray,
        rng: np.random.Generator,
        records: Any = None,
        space: Space | None = None,
        codes: np.ndarray | None = None,
        size: int | None = None,
        aggregates: list | None = None,
    ) -> np.ndarray:
        """Rows of counts (size, |keys|) -> encoded releases (exact integers, as floats); with a part, its
        outputs on each key's ``records`` (zeros where the key is not released; ``codes``: :meth:`codes`
        of their key column, when already known), or on the per-key ``aggregates`` when given
        (:meth:`part_aggregates`, e.g. merged from the partitions of a Dask frame). ``counts`` of shape (|keys|,) with ``size``: the same
        counts for every release. A key no release counts anything under is never released (0 whatever
        its noise): noise is drawn for the present keys only, the same law with fewer draws."""
        from dpharness.mechanisms._exact import discrete_laplace

        counts = np.asarray(counts, dtype=np.int64)
        if counts.ndim == 2:
            rows = len(counts)
        else:
            assert size is not None  # one row of counts comes with the number of releases
            rows = int(size)
        present = np.flatnonzero(counts.any(axis=0) if counts.ndim == 2 else counts > 0)
        here = counts[..., present]
        noise = discrete_laplace(self.select.t, (rows, len(present)), rng)
        if noise.dtype == object:
            noisy = noise + here.astype(object)
            kept = np.where((here > 0) & (noisy >= self.select.T), noisy, 0)
            sel = np.vectorize(float, otypes=[float])(kept) if kept.size else np.zeros(kept.shape)
        else:
            noisy = noise.astype(np.int64) + here
            sel = np.where((here > 0) & (noisy >= self.select.T), noisy, 0).astype(float)
        w = 0 if self.part is None else self.part_width
        # Key-major storage (viewed as rows of |keys| x (1 + w) values): only the present keys' columns
        # are written, so the absent keys' zeros are never touched (a calloc'd block stays unpaged).
        out = np.zeros((len(self.keys), 1 + w, rows))
        out[present, 0, :] = sel.T
        if self.part is not None and len(present):
            if aggregates is None:
                assert space is not None  # a group-by with a part is released with its records' space
                aggregates = self.part_aggregates(_rows(records), space, codes)
            self._part_outputs(aggregates, rng, present, sel != 0, out)
        return out.transpose(2, 0, 1).reshape(rows, len(self.keys) * (1 + w))

    def part_aggregates(self, arr: np.ndarray, space: Space, codes: np.ndarray | None = None) -> list:
        """Each (record-wise steps, aggregate, noise) of the part as (per-key aggregate, its space, noise):
        the record-wise steps run once on every record under a key (a record-wise map of a subset is the
        subset of the map) and the aggregate per key at once (``apply_by``: exact, the value ``apply``
        gives on the key's records, 0 for a key without records). Exact values (integers, rationals), so
        per-key aggregates of disjoint parts of the records add to those of their union."""
        n_keys = len(self.keys)
        if codes is None:
            codes = self.codes(arr[:, self.by]) if len(arr) else np.zeros(0, dtype=np.int64)
        inside = codes >= 0
        if not inside.all():
            codes, arr = codes[inside], arr[inside]
        aggregates = []
        for pre, agg, noise in simple_parts(self.part):
            value, sp = arr, space
            for step in pre:
                value, sp = step.apply(value), step.out_space(sp)
            if hasattr(agg, "apply_by"):
                per_key = agg.apply_by(value, codes, n_keys)
            else:  # an aggregate without a grouped form: on each key's records
                per_key = [agg.apply(value[codes == i]) for i in range(n_keys)]
            aggregates.append((per_key, agg.out_space(sp), noise))
        return aggregates

    def _part_outputs(
        self, aggregates: list, rng: np.random.Generator, present: np.ndarray, released: np.ndarray, out: np.ndarray
    ) -> None:
        """Write into ``out`` (|keys|, 1 + w, size) the part's outputs where a key is released
        (``released``: (size, |present|), column j for ``present[j]``): the same law as executing
        ``part`` on ``arr[arr[:, by] == k]`` for each key ``k`` in each release, computed together from
        :meth:`part_aggregates`: each part's noise on each key's aggregate, for the releases that release
        the key only (a key not released outputs 0 whatever its part's noise, so the draws it would not
        use are not made: independent draws, the same law). Grid noises (laplace, gaussian) draw once per
        part for every released key, part after part; other noises key after key, a key's parts in order."""
        keys = [(i, rows) for j, i in enumerate(present.tolist()) if len(rows := np.flatnonzero(released[:, j]))]
        if not keys:  # nothing released: the parts draw nothing
            return
        if all(hasattr(noise, "run_repeated") for _, _, noise in aggregates):
            # a noise with run_repeated (the grid noises): one draw per part for every released (release, key),
            # part after part, keys in order
            col = 1
            for per_key, sp, noise in aggregates:
                got = noise.run_repeated([per_key[i] for i, _ in keys], [len(rows) for _, rows in keys], rng)
                start, width = 0, got.shape[1]
                for i, rows in keys:
                    out[i, col : col + width, rows] = got[start : start + len(rows)]
                    start += len(rows)
                col += width
            return
        for i, rows in keys:  # key after key, each key's parts in order
            outs = [execute(noise, per_key[i], sp, len(rows), rng) for per_key, sp, noise in aggregates]
            out[i, 1:, rows] = np.concatenate([np.asarray(o).reshape(len(rows), -1) for o in outs], axis=1)

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        arr = _rows(value)
        codes = self.codes(arr[:, self.by]) if len(arr) else np.zeros(0, dtype=np.int64)
        c = self.counts(arr, codes=codes)
        return self.release(c, rng, arr, space, codes, size=size)


# --------------------------------------------------------------------------- contribution bounding


@dataclass(frozen=True)
class BoundContributions(Step):
    """Per-user contribution bounding before a :class:`GroupBy` on the same key column ``by``: each
    user keeps at most ``max_records`` records in all and at most ``max_per_partition`` per key
    (uniformly random order per user, see the module docstring), a fresh draw for every release. Under
    :class:`AddRemoveUser` (column ``user``), one user's kept records touch at most ``max_records``
    partitions."""

    user: int
    by: int
    max_records: int
    max_per_partition: int
    max_partitions: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "user", _v.integer("user", self.user, minimum=0))
        object.__setattr__(self, "by", _v.integer("by", self.by, minimum=0))
        object.__setattr__(self, "max_records", _v.integer("max_records", self.max_records, minimum=1))
        object.__setattr__(
            self, "max_per_partition", _v.integer("max_per_partition", self.max_per_partition, minimum=1)
        )
        if self.max_partitions is not None:
            object.__setattr__(self, "max_partitions", _v.integer("max_partitions", self.max_partitions, minimum=1))
        if self.user == self.by:
            raise ParameterError(
                f"user={self.user} and by={self.by} are the same column; pass the user id column and the key column."
            )

    @property
    def partitions(self) -> int:
        """At most this many partitions per user after bounding: min(max_partitions, max_records) (each kept
        record is in one kept partition)."""
        return self.max_records if self.max_partitions is None else min(self.max_partitions, self.max_records)

    def describe(self) -> str:
        extra = "" if self.max_partitions is None else f", max_partitions={self.max_partitions}"
        return (
            f"bound_contributions(user=column {self.user}, by=column {self.by}, max_records={self.max_records}, "
            f"max_per_partition={self.max_per_partition}{extra})"
        )

    def check(self, space: Space) -> tuple[Space | None, int]:
        raise ParameterError(f"{self.describe()} must be followed by >> dp.group_by(by={self.by}, ...).")

    def check_head(self, chain: Chain, space: Space) -> tuple[Space | None, int]:
        """``bound_contributions(...) >> group_by(...)``: a chain the family runs and proves as one."""
        return None, check_bounded(chain, space)

    def execute_head(self, chain: Chain, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        return execute_bounded(chain, value, space, size, rng)


def _role(step: Any, inherited: bool = False) -> str | None:
    """A step's ``per_key_role`` (see :class:`~._base.Step`): declared by its own class (a subclass of a part
    is not a part the proof covers), or for ``inherited`` also by a base class."""
    if inherited:
        return getattr(type(step), "per_key_role", None)
    return vars(type(step)).get("per_key_role") if isinstance(step, Step) else None


def simple_parts(step: Any) -> list[tuple[list, Any, Any]]:
    """The per-key parts as (record-wise transformations, aggregate, noise) triples; refuses other forms
    (their stability for several records of one user is not proved here)."""
    if _role(step, inherited=True) == "compose":
        return [t for p in step.parts for t in simple_parts(p)]
    steps = []
    node = step
    while isinstance(node, Chain):
        steps.append(node.first)
        node = node.second
    steps.append(node)
    *pre, agg, noise = steps if len(steps) >= 2 else (None, None)
    if (
        len(steps) < 2
        or _role(noise) != "noise"
        or _role(agg) != "aggregate"
        or any(_role(x) != "record-wise" for x in pre)
    ):
        raise ParameterError(
            f"part={step.describe() if isinstance(step, Step) else step!r} is not a per-key aggregate "
            "this family proves; pass [dp.clamp(lo, hi) >>] [dp.column(j) >>] dp.count() or dp.sum() "
            ">> dp.laplace(scale), or dp.compose(...) of such."
        )
    return [(pre, agg, noise)]


def bound_contributions(
    *, user: int, by: int, max_records: int, max_per_partition: int = 1, max_partitions: int | None = None
) -> BoundContributions:
    """Keep at most ``max_records`` records per user (id in column ``user``) and at most
    ``max_per_partition`` per (user, key in column ``by``), of at most ``max_partitions`` keys per user
    (default: no bound beyond ``max_records``), in a uniformly random order per user;
    declare ``relation=dp.AddRemoveUser(user=...)`` and chain ``>> dp.group_by(by=..., ...)``. See
    :mod:`dpharness.mechanisms.parts.grouping`."""
    return BoundContributions(user, by, max_records, max_per_partition, max_partitions)


def group_by(*, by: int, keys: Sequence | None, select: PartitionSelect, part: Any = None) -> GroupBy:
    """Group records by column ``by`` over keys that come from the data; each present key's user count
    gets discrete Laplace noise and is released when it passes ``select`` (``dp.partition_select``);
    the release is encoded over the universe ``keys`` (the noisy count, or 0: not released). (ε, δ) =
    (L/t, 1 − (1 − p)^L), p = P(K >= ceil(threshold) − 1), L keys touched by one neighbour. ``part``:
    per-key ``dp.count()`` / ``dp.sum()`` ``>> dp.laplace(scale)`` (after record-wise clamp/column, or a
    ``dp.compose`` of such) on each key's records, released with the key. ``keys=None``: keys come from
    the data and the release is a mapping of the released keys (see the module docstring); records
    given as numbers carry the keys themselves, and :func:`dpharness.release` reads labels from a frame.
    Budgets instead of scales (``dp.partition_select(epsilon=, delta=)``, ``dp.laplace(epsilon=)`` in
    ``part``) are solved by ``dp.mechanism`` (:mod:`dpharness.proofs._calibrate`)."""
    if keys is None:
        return GroupBy(by, (), select, part, from_data=True)
    universe = tuple(keys) if not isinstance(keys, (str, bytes)) and hasattr(keys, "__iter__") else _encoding_keys(keys)
    return GroupBy(by, universe, select, part)


def whole_group_by(steps: Any) -> GroupBy | None:
    """The group-by when ``steps`` is exactly one (after ``bound_contributions`` or not), else None."""
    from ._base import Chain

    g = steps.second if isinstance(steps, Chain) and type(steps.first) is BoundContributions else steps
    return g if type(g) is GroupBy else None


def discovered_head(steps: Any) -> GroupBy | None:
    """The group-by with ``keys=None`` when ``steps`` is one (after ``bound_contributions`` or not), else None."""
    g = whole_group_by(steps)
    return g if g is not None and g.from_data else None


def with_found_keys(steps: Any, found: Sequence) -> Any:
    """``steps`` (a structure :func:`discovered_head` accepts) with its group-by over the keys ``found``."""
    from ._base import Chain

    if isinstance(steps, Chain):
        assert type(steps.second) is GroupBy  # discovered_head accepted it
        return Chain(steps.first, steps.second.with_keys(found))
    assert type(steps) is GroupBy
    return steps.with_keys(found)


def present_keys(arr: np.ndarray, by: int) -> np.ndarray:
    """The distinct values of column ``by`` (as floats, sorted; −0.0 is the key 0)."""
    arr = _rows(arr)
    return np.unique(arr[:, by] + 0.0) if len(arr) else np.zeros(0)


def discovered_release(encoded: np.ndarray, g: GroupBy) -> np.ndarray:
    """Encoded releases over ``g.keys`` (rows) -> one mapping per row: a tuple of ``(key, noisy count,
    part values...)`` for the released keys (count not 0), sorted by key (an object array)."""
    w = 1 + g.part_width
    rows = np.asarray(encoded, dtype=float).reshape(len(encoded), len(g.keys), w)
    out = np.empty(len(rows), dtype=object)
    keys = list(g.keys)
    for i, row in enumerate(rows):
        hit = np.flatnonzero(row[:, 0])
        out[i] = tuple((keys[j], *row[j].tolist()) for j in hit.tolist())
    return out


class ReleaseEncoding:
    """The mapping releases of a group-by whose keys come from the data (:func:`discovered_release`) laid out
    over a fixed list of ``keys``: per key, its noisy selection count and part values, or zeros when it is
    not released (the layout of a group-by over declared keys). A deterministic function of one release,
    so applying it is post-processing; a release naming a key outside ``keys`` is an error (the caller lists
    every key its inputs hold, and a key is released only when present)."""

    def __init__(self, keys: Sequence[float], width: int) -> None:
        self.keys = tuple(keys)
        self.width = width
        self._slot = {k: i for i, k in enumerate(self.keys)}

    def __call__(self, releases: np.ndarray) -> np.ndarray:
        out = np.zeros((len(releases), len(self.keys) * self.width))
        for i, release in enumerate(releases):
            for item in release:
                j = self._slot.get(item[0])
                if j is None:
                    raise ValueError(f"a release names key {item[0]!r}, which no audited input holds")
                out[i, j * self.width : (j + 1) * self.width] = item[1:]
        return out


def release_encoding(steps: Any, inputs: Sequence[np.ndarray]) -> ReleaseEncoding | None:
    """For a structure that is one group-by with keys from the data and a per-key part: its releases on any
    of ``inputs`` (records arrays) as fixed-width vectors over the keys those inputs hold
    (:class:`ReleaseEncoding`), so an audit sees the parts' values; None otherwise (without a part, a
    release is a set of keys with integer counts, whose exact outcomes the audit's histograms count)."""
    g = discovered_head(steps)
    if g is None or g.part is None:
        return None
    found: set[float] = set()
    for x in inputs:
        found.update(present_keys(np.asarray(x, dtype=float), g.by).tolist())
    return ReleaseEncoding(sorted(found), 1 + g.part_width)


STEP_TYPES = frozenset({GroupBy, BoundContributions})


# --------------------------------------------------------------------------- structure hooks (check_head/execute_head)


def split_bounded(step: Chain) -> tuple[BoundContributions, Any, Step | None]:
    """``bound_contributions >> group_by [>> post ...]`` as (bounding, group-by, the post-processing or None)."""
    assert isinstance(step.first, BoundContributions)  # called for chains whose head is a BoundContributions
    rest = step.second
    if isinstance(rest, Chain):
        return step.first, rest.first, rest.second
    return step.first, rest, None


def check_bounded(step: Chain, space: Space) -> int:
    """``bound_contributions(...) >> group_by(...) [>> dp.post(fn)]``: validated; returns the output width
    (−1 when post-processing decides it)."""
    b, g, post = split_bounded(step)
    _need(space, "records", "bound_contributions")
    if type(g) is not GroupBy:
        raise ParameterError(
            f"{b.describe()} must be followed directly by dp.group_by(by={b.by}, ...); the bounded "
            "records feed a group-by only."
        )
    if post is not None and not all(type(n) in (Post, Chain) for n in walk_nodes(post)):
        raise ParameterError(f"{post.describe()} follows the group-by; only dp.post(fn) may follow it.")
    if max(b.user, b.by) >= space.dim:
        raise ParameterError(f"{b.describe()} but records have {space.dim} column(s); pass columns below {space.dim}.")
    if g.by != b.by:
        raise ParameterError(f"group_by(by={g.by}) after bound_contributions(by={b.by}); pass the same key column.")
    width = g.out_width(space)
    return width if post is None else -1


@runtime_checkable
class _Composite(Protocol):
    """A step whose ``per_key_role`` is ``"compose"`` (``dp.compose``): it holds its ``parts``."""

    parts: tuple


def check_user_level(relation: AddRemoveUser, steps: Step, space: Space) -> None:
    """Under :class:`AddRemoveUser` the structure must be ``bound_contributions(user=relation.user, ...)
    >> group_by(...)`` (or a composition of such): no other step's stability is proved for one user."""
    if _role(steps, inherited=True) == "compose":
        assert isinstance(steps, _Composite)  # the "compose" role is declared by dp.compose, which has parts
        for p in steps.parts:
            check_user_level(relation, p, space)
        return
    if not (isinstance(steps, Chain) and isinstance(steps.first, BoundContributions)):
        raise ParameterError(
            f"relation={relation.describe()} needs steps = dp.bound_contributions(user={relation.user}, "
            "...) >> dp.group_by(...) (a user's records are bounded before anything else sees them); "
            f"got {steps.describe()}."
        )
    if steps.first.user != relation.user:
        raise ParameterError(
            f"bound_contributions(user={steps.first.user}) but the relation's user column is "
            f"{relation.user}; pass the same column."
        )
    if space.kind != "records" or space.dim < 2:
        raise ParameterError(
            "user-level records need a user id column and a key column; declare records=RealBox(dim, ...)."
        )


def _kept_deterministically(arr: np.ndarray, rows: np.ndarray, b: BoundContributions) -> bool:
    """A user whose every record is kept whatever the order: at most m per key, k in all, ℓ keys."""
    if len(rows) > b.max_records:
        return False
    _, n = np.unique(arr[rows, b.by], return_counts=True)
    return bool(n.max(initial=0) <= b.max_per_partition) and (b.max_partitions is None or len(n) <= b.max_partitions)


def _user_runs(arr: np.ndarray, b: BoundContributions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The users without a Python loop: (``order``, ``bounds``, ``kept``): user ``j``'s rows are
    ``order[bounds[j]:bounds[j + 1]]`` (users by increasing id, equal as floats; rows by key), and
    ``kept[j]`` says whether every record of user ``j`` is kept whatever the order
    (:func:`_kept_deterministically`: at most k records, m per key, ℓ keys), from one sort by (user, key)."""
    users, keys = arr[:, b.user], arr[:, b.by]
    if len(users) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(0, dtype=bool)
    by_pair = np.lexsort((keys, users))
    order = by_pair  # each user's rows together (by key within the user)
    u, k = users[by_pair], keys[by_pair]
    new_user = np.concatenate([[True], u[1:] != u[:-1]])
    new_pair = new_user | np.concatenate([[True], k[1:] != k[:-1]])
    starts, pair_starts = np.flatnonzero(new_user), np.flatnonzero(new_pair)
    records = np.diff(np.append(starts, len(u)))
    pairs = np.add.reduceat(new_pair.astype(np.int64), starts)  # distinct keys per user
    per_pair = np.diff(np.append(pair_starts, len(u)))  # records per (user, key)
    first_pair = np.searchsorted(pair_starts, starts)  # each user's first (user, key) run
    most = np.maximum.reduceat(per_pair, first_pair)
    kept = (records <= b.max_records) & (most <= b.max_per_partition)
    if b.max_partitions is not None:
        kept &= pairs <= b.max_partitions
    return order, np.append(starts, len(u)), kept


def _kept_in_order(keys: np.ndarray, rank: np.ndarray, b: BoundContributions) -> np.ndarray:
    """(size, n) mask: for each row of ``rank`` (the position of each record in that release's random
    order), the records whose key is among the first ℓ distinct keys met in that order (all keys when
    ``max_partitions`` is None) and that are among the first m of their key, and of those the first k, in
    that order: walking the order and keeping a record while all three bounds hold. Array operations
    only (one sort by (key, position) per row), whatever the number of distinct keys."""
    size, n = rank.shape
    if n == 0:
        return np.zeros((size, 0), dtype=bool)
    _, code, per_key = np.unique(keys, return_inverse=True, return_counts=True)
    code = np.asarray(code).reshape(-1)
    start = np.concatenate([[0], np.cumsum(per_key)[:-1]])  # where each key's records begin in key order
    by_key = np.argsort(code[None, :] * n + rank, axis=1, kind="stable")  # records grouped by key, then order
    position = np.empty_like(by_key)
    np.put_along_axis(position, by_key, np.arange(n)[None, :].repeat(size, axis=0), axis=1)
    eligible = (position - start[code][None, :]) < b.max_per_partition  # among the first m of its key
    if b.max_partitions is not None:
        first_seen = np.take_along_axis(rank, by_key[:, start], axis=1)  # (size, #keys): a key's first position
        key_order = np.argsort(np.argsort(first_seen, axis=1, kind="stable"), axis=1, kind="stable")
        eligible &= key_order[:, code] < b.max_partitions
    masked = np.where(eligible, rank, n + 1)
    overall = np.argsort(np.argsort(masked, axis=1, kind="stable"), axis=1, kind="stable")
    return eligible & (overall < b.max_records)


def _starts(codes: np.ndarray, groups: int) -> np.ndarray:
    """Where each group begins among the codes sorted (codes in ``0..groups-1``)."""
    counts = np.bincount(codes, minlength=groups)
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def _scatter(by: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``out[s, by[s, j]] = values[s, j]``: values given in a sorted order, put back at their records."""
    out = np.empty(by.shape, dtype=values.dtype)
    np.put_along_axis(out, by, values, axis=1)
    return out


def _pairs(users: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(user code, (user, key) pair code, each pair's user code), codes dense from 0 (equal as floats)."""
    _, ucode = np.unique(users, return_inverse=True)
    _, kcode = np.unique(keys, return_inverse=True)
    ucode, kcode = ucode.reshape(-1).astype(np.int64), kcode.reshape(-1).astype(np.int64)
    width = int(kcode.max(initial=-1)) + 1
    pairs, pcode = np.unique(ucode * width + kcode, return_inverse=True)
    return ucode, pcode.reshape(-1).astype(np.int64), (pairs // max(width, 1)).astype(np.int64)


def _kept_by_order(ucode: np.ndarray, pcode: np.ndarray, pair_user: np.ndarray, rank: np.ndarray, b: Any) -> np.ndarray:
    """(size, n) mask: :func:`_kept_in_order` for every user at once, each user's records walked in the
    order ``rank`` restricts to them (``rank[s, i]``: position of record i in release s's order over all the
    records given). Three sorts a row, whatever the number of users and keys: by (pair, position) for the
    first m of each (user, key), by (user, first position) for the first ℓ keys of each user, by (user,
    position) for the first k of each user."""
    size, n = rank.shape
    if n == 0:
        return np.zeros((size, 0), dtype=bool)
    n_pairs, n_users = len(pair_user), int(ucode.max()) + 1
    by_pair = np.argsort(pcode[None, :] * n + rank, axis=1)
    pair_start = _starts(pcode, n_pairs)
    position = _scatter(by_pair, np.arange(n)[None, :] - pair_start[pcode[by_pair]])
    eligible = position < b.max_per_partition  # among the first m of its (user, key)
    if b.max_partitions is not None:
        first_seen = np.take_along_axis(rank, by_pair[:, pair_start], axis=1)  # (size, pairs): a key's first position
        by_user_pairs = np.argsort(pair_user[None, :] * n + first_seen, axis=1)
        user_pair_start = _starts(pair_user, n_users)
        key_order = _scatter(by_user_pairs, np.arange(n_pairs)[None, :] - user_pair_start[pair_user[by_user_pairs]])
        eligible &= key_order[:, pcode] < b.max_partitions  # its key among the user's first ℓ keys met
    by_user = np.argsort(ucode[None, :] * n + rank, axis=1)
    ordered = np.take_along_axis(eligible, by_user, axis=1)
    before = np.cumsum(ordered, axis=1) - ordered  # eligible records before it in the row
    user_start = _starts(ucode, n_users)
    before -= before[:, user_start][:, ucode[by_user[0]]]  # ... and before it in its user's records
    return _scatter(by_user, ordered & (before < b.max_records))  # of those, the first k of its user


def _drawn(arr: np.ndarray, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """(the rows of the users whose kept records depend on the order, in the canonical order of
    :func:`canonical_rows`; a mask over the rows of ``arr``: whether each is such a row)."""
    order, bounds, kept_all = _user_runs(arr, b)
    rows = canonical_rows(arr, order[np.repeat(~kept_all, np.diff(bounds))], b)
    mask = np.zeros(len(arr), dtype=bool)
    mask[rows] = True
    return rows, mask


def canonical_rows(arr: np.ndarray, rows: np.ndarray, b: Any) -> np.ndarray:
    """``rows`` sorted by user, key, then every other column: an order that depends on the records alone,
    not on the input's row order or partitioning (rows equal in every column are interchangeable), so
    the bounding draws of a data set are the same however it is laid out."""
    if len(rows) < 2:
        return rows
    from dpharness._records import sorted_distinct, sorting_order

    sub = arr[rows]
    n = len(rows)
    others = [j for j in range(sub.shape[1]) if j not in (b.user, b.by)]
    # each column's values by their rank among its distinct values (equal numbers, NaNs last, one rank),
    # the ranks read as the digits of one integer whose last digit is the row's place (ties as given, as
    # lexsort keeps them): one unstable (SIMD) argsort of distinct integers instead of a stable sort per
    # column. The digits so far are re-ranked (at most n values) when the next would not fit.
    key, span = np.zeros(n, dtype=np.int64), 1
    for j in (b.user, b.by, *others, None):
        distinct, rank = (None, np.arange(n, dtype=np.int64)) if j is None else sorted_distinct(sub[:, j])
        width = n if distinct is None else len(distinct)
        if span * width >= _DIGITS_LIMIT:
            seen, key = sorted_distinct(key)
            span = len(seen)
        if span * width >= _DIGITS_LIMIT:  # too many rows for one integer: the sort column by column
            columns = [sub[:, j] for j in reversed(others)]
            return rows[np.lexsort((*columns, sub[:, b.by], sub[:, b.user]))]
        key, span = key * width + rank, span * width
    return rows[sorting_order(key)]  # distinct integers: the one order


_DIGITS_LIMIT = 2**63  # canonical_rows' integer keys stay below it (int64)


def random_orders(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """(size, n): a uniformly random order of ``0..n-1`` per release, the bounding's generator call (the
    streamed release of a Dask frame makes the same call: :func:`dpharness._release._drawn_order`). The
    rows shuffled in place (``out``: the same draws, with no copy of 10^7 positions; one release's row is
    ``arange`` itself, not a tiled copy)."""
    orders = (
        np.arange(n, dtype=np.int64).reshape(1, n) if size == 1 else np.tile(np.arange(n, dtype=np.int64), (size, 1))
    )
    return rng.permuted(orders, axis=1, out=orders)


def _kept_draws(arr: np.ndarray, rows: np.ndarray, b: Any, size: int, rng: np.random.Generator):
    """(chunk start, chunk stop, (stop − start, len(rows)) kept mask) for each chunk of releases: one
    uniformly random order of all of ``rows`` per release, whose restriction to each user's records is a
    uniformly random order of them, independent across users (the bounding's law)."""
    ucode, pcode, pair_user = _pairs(arr[rows, b.user], arr[rows, b.by])
    n = len(rows)
    chunk = _chunk(n)
    for start in range(0, size, chunk):
        stop = min(size, start + chunk)
        order = random_orders(n, stop - start, rng)
        rank = np.argsort(order, axis=1, kind="stable")  # rank[s, i] = position of record i in order s
        yield start, stop, _kept_by_order(ucode, pcode, pair_user, rank, b)


def user_counts(b: BoundContributions, g: GroupBy, value: Any, size: int, rng: np.random.Generator) -> np.ndarray:
    """(size, |keys|) distinct-user counts per encoded key after a fresh bounding draw per release: the users
    whose records are all kept whatever the order counted at once (they draw nothing), the others from one
    random order of all their records per release (:func:`_kept_draws`)."""
    arr = np.asarray(value, dtype=float)
    arr = arr.reshape(0, max(b.user, b.by) + 1) if arr.size == 0 else arr
    total = np.zeros((size, len(g.keys)), dtype=np.int64)
    rows, drawn = _drawn(arr, b)
    if len(arr) and not drawn.all():  # one count per distinct (user, key) of those users
        total += g.counts(arr[~drawn], user=b.user)[None, :]
    if not len(rows):
        return total
    _, pcode, _ = _pairs(arr[rows, b.user], arr[rows, b.by])
    n_pairs = int(pcode.max()) + 1
    first = np.zeros(n_pairs, dtype=np.int64)
    first[pcode[::-1]] = np.arange(len(rows))[::-1]  # a record of each pair
    pair_code = g.codes(arr[rows[first], b.by])  # each pair's encoded key (−1: none)
    inside = pair_code >= 0
    for start, stop, kept in _kept_draws(arr, rows, b, size, rng):
        m = stop - start
        cells = (np.arange(m)[:, None] * n_pairs + pcode[None, :])[kept]
        pair_kept = np.bincount(cells, minlength=m * n_pairs).reshape(m, n_pairs) > 0
        for_keys = (np.arange(m)[:, None] * len(g.keys) + pair_code[None, inside])[pair_kept[:, inside]]
        total[start:stop] += np.bincount(for_keys, minlength=m * len(g.keys)).reshape(m, len(g.keys))
    return total


def kept_rows(b: BoundContributions, value: Any, size: int, rng: np.random.Generator) -> np.ndarray:
    """(size, n) mask of the records each release keeps (a fresh bounding draw per release for the users
    whose records are not all kept whatever the order: :func:`_kept_draws`)."""
    arr = np.asarray(value, dtype=float)
    arr = arr.reshape(0, max(b.user, b.by) + 1) if arr.size == 0 else arr
    mask = np.ones((size, len(arr)), dtype=bool)
    rows, _ = _drawn(arr, b)
    if len(rows):
        for start, stop, kept in _kept_draws(arr, rows, b, size, rng):
            mask[start:stop, rows] = kept
    return mask


def execute_bounded(step: Chain, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
    b, g, post = split_bounded(step)
    out = _execute_bounded(b, g, value, space, size, rng)
    return out if post is None else _post_chain(post, out)


def _execute_bounded(
    b: BoundContributions, g: GroupBy, value: Any, space: Space, size: int, rng: np.random.Generator
) -> np.ndarray:
    if g.part is None:
        return g.release(user_counts(b, g, value, size, rng), rng)
    arr = np.asarray(value, dtype=float)
    arr = arr.reshape(0, space.dim) if arr.size == 0 else arr
    out = np.zeros((size, g.out_width(space)))
    codes = g.codes(arr[:, g.by]) if len(arr) else np.zeros(0, dtype=np.int64)
    for start in range(0, size, _CHUNK):
        stop = min(size, start + _CHUNK)
        mask = kept_rows(b, arr, stop - start, rng)
        if len(mask) == 1:  # one release: its pattern (np.unique over rows promotes to a structured array)
            patterns, inverse = mask, np.zeros(1, dtype=np.int64)
        else:
            patterns, inverse = np.unique(mask, axis=0, return_inverse=True)
        inverse = np.asarray(inverse).reshape(-1)
        for j, pattern in enumerate(patterns):  # releases that kept the same records run together
            rows = start + np.flatnonzero(inverse == j)
            data, data_codes = arr[pattern], codes[pattern]
            counts = g.counts(data, user=b.user, codes=data_codes)
            out[rows] = g.release(counts, rng, data, space, data_codes, size=len(rows))
    return out


# --------------------------------------------------------------------------- exact law (read by _law)


class GroupLeaf:
    """One group-by and the exact per-key counts it perturbs on some input (deterministic bounding only);
    ``log_prob`` of its ``width`` encoded columns."""

    def __init__(
        self,
        measurement: GroupBy,
        counts: np.ndarray,
        records: Any = None,
        space: Space | None = None,
        walk: Any = None,
    ) -> None:
        self.measurement = measurement
        self.counts = [int(c) for c in counts]
        w = measurement.part_width
        self.width = len(self.counts) * (1 + w)
        self.part_leaves = []
        if w:
            arr = np.asarray(records, dtype=float)
            arr = arr.reshape(-1, 1) if arr.ndim == 1 else arr
            col = arr[:, measurement.by] if len(arr) else np.zeros(0)
            self.part_leaves = [walk(measurement.part, arr[col == float(k)], space) for k in measurement.keys]

    def log_prob(self, cols: np.ndarray) -> np.ndarray:
        from dpharness.mechanisms._noise import discrete_laplace_logpmf

        sel = self.measurement.select
        t, T = float(sel.t), sel.T
        allcols = np.asarray(cols, dtype=float).reshape(len(cols), -1)
        w = self.measurement.part_width
        total = np.zeros(len(allcols))
        q = math.exp(-1 / t)
        for j, c in enumerate(self.counts):
            y = allcols[:, j * (1 + w)]
            if w:
                rest = allcols[:, j * (1 + w) + 1 : (j + 1) * (1 + w)]
                zeros = np.all(rest == 0, axis=1)
                part_lp = sum(lf.log_prob(rest[:, i : i + 1]) for i, lf in enumerate(self.part_leaves[j]))
                total += np.where(y == 0, np.where(zeros, 0.0, -np.inf), part_lp)
            if c == 0:
                total += np.where(y == 0, 0.0, -np.inf)
                continue
            a = T - 1 - c  # P(0) = P(K <= a)
            # P(K <= a) = 1 − q^{a+1}/(1 + q) for a >= 0; q^{−a}/(1 + q) for a < 0
            log_unreleased = math.log1p(-(q ** (a + 1)) / (1 + q)) if a >= 0 else -a * math.log(q) - math.log1p(q)
            whole = (y == np.round(y)) & (y >= T)
            lp = np.where(whole, discrete_laplace_logpmf(np.where(whole, y, c) - c, t), -np.inf)
            total += np.where(y == 0, log_unreleased, lp)
        return total


def leaf(step: Step, value: Any, space: Space | None = None, walk: Any = None) -> GroupLeaf:
    """The exact leaf of a group-by (``step`` a GroupBy, or bound_contributions >> group_by whose bounding
    keeps every record on this input); UnsupportedError when the bounding is random here."""
    if isinstance(step, GroupBy):
        return GroupLeaf(step, step.counts(value), value, space, walk)
    assert isinstance(step, Chain)  # not a GroupBy: bound_contributions >> group_by
    b, g, _ = split_bounded(step)
    arr = np.asarray(value, dtype=float)
    if arr.size == 0:  # no records: as wide as the records (the part may read any of their columns)
        arr = arr.reshape(0, space.dim if space is not None else max(b.user, b.by) + 1)
    if not _user_runs(arr, b)[2].all():
        raise UnsupportedError(
            f"{b.describe()} drops records at random on this input; its output law is a mixture over "
            "the draws, not listed here (the proof covers every draw)"
        )
    return GroupLeaf(g, g.counts(arr, user=b.user), arr, space, walk)


register(GroupBy, BoundContributions, leaf=leaf)


# --------------------------------------------------------------------------- extreme pairs


def selection_pairs(m: Any, records: Sequence[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """Pairs where a group-by's terms are attained under a record-level relation (add/remove or
    substitution of one record), for the audit: a key held by T − 1 copies of a record against T (the
    added record on the key), T = ceil(threshold). There the release probability moves by its largest
    ratio, P(K >= 0) / P(K >= 1) = e^{1/t}, at about 1/2, and the key's part, released with it, moves by
    its own largest step in the same direction, so every term of the bound is exercised at once; and T
    against T + 1 (the ratio of not releasing). ``records``: candidate records (the domain's extremes:
    the part's clamped aggregates at their bounds), each given the key in column ``by``; the first two
    distinct ones are used. Each entry: (data, neighbor, the term in words); the caller validates them.
    Substitution moves one record from another key onto the key (with a fixed size, the rest of the
    records sit on that other key)."""
    from dpharness.core import AddRemove, Substitute

    if not isinstance(m.relation, (AddRemove, Substitute)) or isinstance(m.relation, AddRemoveUser):
        return []
    out: list[tuple[np.ndarray, np.ndarray, str]] = []
    dim = m.space.dim
    box = isinstance(m.records, RealBox)
    for g in (n for n in walk_nodes(m.steps) if type(n) is GroupBy):
        if g.by >= dim:
            continue
        lo, hi = Fraction(m.space.lo[g.by]), Fraction(m.space.hi[g.by])
        if g.from_data:
            keys = [float(v) for v in (lo, lo + 1, hi) if lo <= v <= hi]
        else:
            keys = [float(k) for k in g.key_values if lo <= Fraction(k) <= hi]
        keys = list(dict.fromkeys(keys))
        if not keys:
            continue
        T = g.select.T

        def on(key: float, r: np.ndarray) -> np.ndarray:
            row = np.array(r, dtype=float).reshape(-1).copy() if box else np.array([key])
            row[g.by if box else 0] = key
            return row

        rows: list[np.ndarray] = []
        for r in records:
            row = on(keys[0], r)
            if not any(np.array_equal(row, x) for x in rows):
                rows.append(row)
            if len(rows) == 2:
                break
        for i, row in enumerate(rows):  # the second record: only the pair where every term moves together
            for base_n in (T - 1, T) if i == 0 else (T - 1,):
                text = (
                    f"{g.describe()[:60]}: key {keys[0]:g} held by {base_n} records against {base_n + 1} "
                    f"(threshold {T}: the selection's {'release' if base_n < T else 'suppression'} ratio "
                    "and the key's part at their largest together)"
                )
                if isinstance(m.relation, AddRemove):
                    if base_n < 0:
                        continue
                    a = np.array([row] * base_n).reshape(base_n, dim)
                    b = np.array([row] * (base_n + 1)).reshape(base_n + 1, dim)
                else:
                    if len(keys) < 2 or base_n < 0:
                        continue
                    off = on(keys[1], row)
                    n = int(m.size) if m.size is not None else base_n + 1
                    if n < base_n + 1:
                        continue
                    a = np.array([row] * base_n + [off] * (n - base_n)).reshape(n, dim)
                    b = np.array([row] * (base_n + 1) + [off] * (n - base_n - 1)).reshape(n, dim)
                if not box:
                    a, b = a[:, 0], b[:, 0]
                out.append((a, b, text))
    return out


# An aimed pair larger than these is not built (no audit runs it, and building it might not end): one user's
# records against none, and T − 1 or T other users on each of the user's keys.
_MAX_USER_ROWS = 2**20
_MAX_PAIR_ROWS = 2**16


def user_level_pairs(m: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """Neighbouring pairs for the audit: the empty data set against one user with records under
    L = min(k, |keys|) distinct encoded keys (the pair where δ is attained), and a data set where those
    keys already hold T users against it plus one more user (the pair where ε is attained)."""
    nodes = walk_nodes(m.steps)
    g = next(n for n in nodes if type(n) is GroupBy)
    b = next((n for n in nodes if type(n) is BoundContributions), None)
    dim = m.space.dim
    lo, hi = float(m.space.lo[0]), float(m.space.hi[0])
    user_col = b.user if b is not None else None
    if g.from_data:  # keys from the data: any values of the key column's domain
        width = b.max_records if b is not None else 1
        if width > _MAX_USER_ROWS:
            return []
        step = 1.0 if lo + width - 1 <= hi else (hi - lo) / width  # consecutive integers where they fit
        keys = sorted({float(lo + step * i) for i in range(width)})
    else:
        width = min(b.max_records if b is not None else 1, len(g.keys))
        keys = [float(k) for k in g.key_values[:width] if Fraction(lo) <= Fraction(k) <= Fraction(hi)]
    if not keys:
        return []
    ids = [v for v in (hi, lo, (lo + hi) / 2) if Fraction(lo) <= Fraction(v) <= Fraction(hi)]

    def row(uid: float, key: float) -> np.ndarray:
        r = np.full(dim, lo)
        if user_col is not None:
            r[user_col] = uid
        r[g.by] = key
        return r

    if user_col is None:
        one = np.array([row(0, keys[0])])
        return [
            (np.zeros((0, dim)), one) if m.space.dim > 1 or isinstance(m.records, RealBox) else (np.zeros(0), one[:, 0])
        ]
    new_user = np.array([row(ids[0], k) for k in keys])
    pairs = [(np.zeros((0, dim)), new_user)]
    # existing partitions: T distinct other users under each key (ids spread between lo and hi)
    T = g.select.T
    if T * len(keys) > _MAX_PAIR_ROWS:
        return pairs
    others = [lo + (hi - lo) * (i + 1) / (T + 2) for i in range(T)]
    others = [u for u in others if u != ids[0]]
    if len(set(others)) == len(others) and others:
        base = np.array([row(u, k) for u in others for k in keys])
        pairs.append((base, np.concatenate([base, new_user])))
    return pairs


def user_level_full_pairs(m: Any) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """Pairs where every term of a user-level bound is attained at once, for the audit: one user at the
    full contribution that bounding keeps, ``max_records`` records over L = ``partitions`` keys (at least one
    on each, then up to ``max_per_partition`` on each), every value column at the domain's end of larger
    magnitude (the per-key parts' clamped values at their bound), against the data without that user: the
    empty data set, and T − 1 other users (one record on each of the L keys) holding each key. The selection
    moves by L users and each key's part by all the user's records on it, the bound's L/t + Σ of the parts'
    terms; :func:`user_level_pairs` places one record at the domain's low end on each key, which attains the
    selection's terms only (a count part moves by 1 a key, a sum part by nothing). Each entry: (data,
    neighbor, the term in words); the caller validates them."""
    nodes = walk_nodes(m.steps)
    g = next(n for n in nodes if type(n) is GroupBy)
    b = next((n for n in nodes if type(n) is BoundContributions), None)
    if b is None or not isinstance(m.records, RealBox):
        return []
    dim = m.space.dim
    lo, hi = float(m.space.lo[0]), float(m.space.hi[0])
    width = b.partitions
    if b.max_records > _MAX_USER_ROWS:
        return []
    if g.from_data:
        step = 1.0 if lo + width - 1 <= hi else (hi - lo) / width
        keys = sorted({float(lo + step * i) for i in range(width)})
    else:
        keys = [float(k) for k in g.key_values if Fraction(lo) <= Fraction(k) <= Fraction(hi)][:width]
    if not keys:
        return []
    per_key = [1] * len(keys)
    left = b.max_records - len(keys)
    for i in range(len(keys)):  # fill each key up to max_per_partition while records are left
        more = max(0, min(b.max_per_partition - 1, left))
        per_key[i] += more
        left -= more
    value = hi if abs(hi) >= abs(lo) else lo
    T = g.select.T
    if (T - 1) * len(keys) > _MAX_PAIR_ROWS:
        T = 1  # no pair with T − 1 other users a key (too large to build or run): the pair against none only
    others = [lo + (hi - lo) * (i + 1) / (T + 1) for i in range(max(T - 1, 0))]

    def row(uid: float, key: float) -> np.ndarray:
        r = np.full(dim, value)
        r[b.user] = uid
        r[g.by] = key
        return r

    uid = next((v for v in (lo, hi, (lo + hi) / 2) if v not in others), None)
    if uid is None or len(set(others)) != len(others):
        return []
    user = np.array([row(uid, k) for k, n in zip(keys, per_key) for _ in range(n)])
    what = (
        f"one user at the full contribution bounding keeps ({len(user)} records over {len(keys)} keys, up to "
        f"{b.max_per_partition} a key, values at {value:g})"
    )
    out = [(np.zeros((0, dim)), user, f"{what} against none")]
    if others:
        base = np.array([row(u, k) for u in others for k in keys])
        out.append((base, np.concatenate([base, user]), f"{what}, each key held by {T - 1} other users"))
    return out


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
