"""Combinators: sequential composition (:func:`compose`), post-processing (:func:`post`), parallel
composition over disjoint partitions (:func:`parallel`), and composition over rounds: :func:`repeat`
(``times`` independent copies: the sequential composition of identical parts) and :func:`iterate`
(``times`` adaptive rounds whose record-wise maps see a state updated from the releases). ``>>``
(:class:`~._base.Chain`) and the :class:`~._base.Post` node live in :mod:`._base`: every step builds a
chain, and every family's output may be post-processed. Accounting in
:mod:`dpharness.proofs.parts.combinators`."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from dpharness import _validate as _v
from dpharness.errors import ParameterError

from dpharness.mechanisms import _rowwise

from ._base import (
    Batch,
    _budget,
    Post,
    Space,
    Step,
    _float_exact,
    _need,
    _plain,
    _Tuple,
    check_structure,
    execute,
    execute_batch,
    register,
)

__all__ = [
    "Compose",
    "Parallel",
    "Repeat",
    "Iterate",
    "SplitBudget",
    "compose",
    "post",
    "parallel",
    "repeat",
    "iterate",
]


@dataclass(frozen=True)
class Compose(Step):
    """Sequential composition: every part runs on the same input with independent randomness; the
    output is the tuple of their outputs. Accounting: basic (ε and δ add), zCDP/Rényi (ρ adds), or
    advanced composition, whichever proves the claim."""

    parts: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(self.parts))
        if len(self.parts) < 1:
            raise ParameterError(
                "compose() needs at least one part; pass e.g. dp.compose(dp.sum() >> dp.laplace(2), ...)."
            )
        for p in self.parts:
            if not isinstance(p, Step):
                raise ParameterError(
                    f"part={p!r} is not a dpharness.parts step; build parts with dp.sum() >> dp.laplace(...)."
                )

    def describe(self) -> str:
        return "compose(" + ", ".join(p.describe() for p in self.parts) + ")"

    per_key_role = "compose"

    def check(self, space: Space) -> tuple[Space | None, int]:
        total = 0
        for p in self.parts:
            out, width = check_structure(p, space)
            if out is not None:
                raise ParameterError(
                    f"compose part {p.describe()} releases no noise; end every part with a noise "
                    "measurement (e.g. >> dp.laplace(scale))."
                )
            total = -1 if (width < 0 or total < 0) else total + width
        return None, total

    def execute(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        outs = [execute(p, value, space, size, rng) for p in self.parts]
        return _Tuple(outs)


def _is_number(k: Any) -> bool:
    return isinstance(k, (int, float, Fraction, np.integer, np.floating)) and not isinstance(k, bool)


@dataclass(frozen=True)
class Parallel(Step):
    """Parallel composition over disjoint partitions: records are split by the value of column
    ``by`` (exactly equal to one of ``keys``; others dropped) and ``part`` runs on each partition with
    independent randomness; the output concatenates the parts' outputs in the order of ``keys``. Keys
    may be labels (strings or any hashable values, as ``dp.group_by``'s): records given as numbers then
    carry a label's position in ``keys``, and :func:`dpharness.release` maps a frame's labels to them.
    Under add/remove one record touches one partition (the part's loss under add/remove); under
    substitution it may move between two partitions (twice the add/remove loss) or change inside one
    (the part's substitution loss): the larger is taken."""

    part: Step
    by: int
    keys: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "by", _v.integer("by", self.by, minimum=0))
        if self.keys and not all(_is_number(k) for k in self.keys):  # labels: records carry their positions
            _v.labels("keys", self.keys)
            if len(set(self.keys)) != len(self.keys):
                raise ParameterError(f"keys={self.keys!r} must be distinct; pass each partition label once.")
            object.__setattr__(self, "keys", tuple(self.keys))
        else:
            # records are matched to keys as floats: each key is exactly a float, and distinct
            keys = tuple(_float_exact("keys", k, "a partition key") for k in self.keys)
            if not keys or len({Fraction(k) for k in keys}) != len(keys):
                raise ParameterError(f"keys={self.keys!r} must be distinct numbers; pass the partition keys.")
            object.__setattr__(self, "keys", keys)
        if not isinstance(self.part, Step):
            raise ParameterError(f"part={self.part!r} is not a dpharness.parts step.")

    @property
    def labelled(self) -> bool:
        """Whether the keys are labels (records given as numbers carry a label's position in ``keys``)."""
        return not all(_is_number(k) for k in self.keys)

    @property
    def key_values(self) -> tuple:
        """The number records carry for each key: the key itself, or a label's position in ``keys``."""
        return tuple(range(len(self.keys))) if self.labelled else self.keys

    def describe(self) -> str:
        return f"parallel({self.part.describe()}, by=column {self.by}, keys={list(self.keys)})"

    def check(self, space: Space) -> tuple[Space | None, int]:
        _need(space, "records", "parallel")
        if self.by >= space.dim:
            raise ParameterError(f"by={self.by} but records have {space.dim} column(s); pass by < {space.dim}.")
        if self.labelled and not (space.lo[self.by] <= 0 and len(self.keys) - 1 <= space.hi[self.by]):
            raise ParameterError(
                f"{self.describe()} carries its {len(self.keys)} labels as positions 0..{len(self.keys) - 1} in "
                f"column {self.by}, but the records hold [{float(space.lo[self.by]):g}, {float(space.hi[self.by]):g}] "
                "there; declare records whose key column holds every position."
            )
        out, width = check_structure(self.part, space)
        if out is not None:
            raise ParameterError(
                f"parallel part {self.part.describe()} releases no noise; end it with a noise measurement."
            )
        return None, -1 if width < 0 else width * len(self.keys)

    def execute(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        arr = np.asarray(value, dtype=float)
        key_col = arr[:, self.by] if arr.ndim == 2 else arr
        outs = []
        for key in self.key_values:
            part_data = arr[key_col == float(key)]
            outs.append(execute(self.part, part_data, space, size, rng))
        return _Tuple(outs)


@dataclass(frozen=True)
class Repeat(Step):
    """``times`` independent runs of ``part`` on the same input (fresh randomness each), outputs
    concatenated in order: sequential composition of ``times`` copies (ε and ρ multiply by ``times``;
    the privacy-loss distribution is the ``times``-fold self-composition)."""

    times: int
    part: Step

    def __post_init__(self) -> None:
        object.__setattr__(self, "times", _v.integer("times", self.times, minimum=1))
        if not isinstance(self.part, Step):
            raise ParameterError(
                f"part={self.part!r} is not a dpharness.parts step; pass e.g. dp.count() >> dp.gaussian(sigma=1)."
            )

    def describe(self) -> str:
        return f"repeat({self.times}, {self.part.describe()})"

    def check(self, space: Space) -> tuple[Space | None, int]:
        out, width = check_structure(self.part, space)
        if out is not None:
            raise ParameterError(
                f"repeat part {self.part.describe()} releases no noise; end it with a noise measurement."
            )
        return None, -1 if width < 0 else width * self.times

    def execute(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        return _Tuple([execute(self.part, value, space, size, rng) for _ in range(self.times)])


@dataclass(frozen=True)
class Iterate(Step):
    """Adaptive iteration: ``times`` rounds of ``part`` on the same input, each with fresh randomness;
    every :func:`map_records` in ``part`` receives the current state, and after each round
    ``state = update(state, release)`` (``release``: the round's noisy output). Releases the final
    state (``output="state"``) or every round's noisy output (``output="releases"``). Privacy: adaptive
    sequential composition of ``times`` rounds, each round's account the part's whatever the state
    (a record-wise map is 1-stable for every function); ``update`` is post-processing of the releases.
    ``update`` and the map functions must be pure functions of their arguments (no data access, no
    state kept between calls); the proof states it. Many runs go side by side, and ``update`` is run on
    each run alone, by construction (``path``, :mod:`dpharness.mechanisms._rowwise`): compiled with
    numba and looped over the runs in compiled code (``compiled=True`` or an ``numba.njit`` update),
    from Python once per run (the default), or, with ``vectorized=True``, on one-row arrays per run."""

    times: int
    part: Step
    init: Any = field(compare=False, default=None)
    update: Callable | None = field(compare=False, default=None)
    output: str = "state"
    vectorized: bool = False
    compiled: bool = False
    path: str = field(init=False, default=_rowwise.PYTHON)

    def __post_init__(self) -> None:
        object.__setattr__(self, "times", _v.integer("times", self.times, minimum=1))
        if not isinstance(self.part, Step):
            raise ParameterError(f"part={self.part!r} is not a dpharness.parts step.")
        if self.update is None or not callable(self.update):
            raise ParameterError(
                f"update={self.update!r} is not callable; pass update(state, release) -> the next state."
            )
        init = np.array(self.init, dtype=float).reshape(-1) if self.init is not None else None
        if init is None or len(init) == 0 or not np.all(np.isfinite(init)):
            raise ParameterError(
                f"init={self.init!r} must be a non-empty sequence of finite numbers (the first state)."
            )
        init.setflags(write=False)
        object.__setattr__(self, "init", init)
        _v.choice("output", self.output, ("state", "releases"))
        object.__setattr__(self, "path", _rowwise.choose_path("update", self.update, self.compiled, self.vectorized))

    def user_code(self, short: bool = False) -> tuple[str, ...]:
        """How ``update`` runs (said by the proof's assumptions and, ``short``, the gate line)."""
        name = getattr(self.update, "__name__", "update")
        return (f"iterate's update {name}: {_rowwise.path_phrase(self.path, 'run', short)}",)

    def describe(self) -> str:
        return (
            f"iterate({self.times}, {self.part.describe()}, update={getattr(self.update, '__name__', 'update')}, "
            f"output={self.output!r})"
        )

    def check(self, space: Space) -> tuple[Space | None, int]:
        out, width = check_structure(self.part, space)
        if out is not None:
            raise ParameterError(
                f"iterate part {self.part.describe()} releases no noise; end it with a noise measurement."
            )
        if self.output == "state":
            return None, len(self.init)
        return None, -1 if width < 0 else width * self.times

    def execute(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        return _iterated(self, value, space, size, rng)


def _iterated(step: Iterate, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` independent runs, each ``times`` rounds with its own state (the rounds of one run are
    sequential: each round's map functions see the state the previous releases produced). The runs go
    side by side: each round is one batch of ``size`` releases (:meth:`Step.execute_batch`: run i on the
    data with state i; the steps that can, run every run's records at once, with the same law per run),
    then each run's state is updated from its own release."""
    states = np.tile(step.init, (size, 1))
    releases = []
    every = Batch.tiled(value, size, None)  # every run's records, built once: only the states change
    for _ in range(step.times):
        out = execute_batch(step.part, Batch(size, states, every.rows, every.codes), space, rng)
        if step.output == "releases":  # a run's state output needs no transcript: memory stays one round's
            releases.append(out)
        if size:
            states = _updated_runs(step, states, out)
    out = states if step.output == "state" else np.concatenate(releases, axis=1) if releases else states
    return out[:, 0] if out.shape[1] == 1 else out


def _updated_runs(step: Iterate, states: np.ndarray, releases: np.ndarray) -> np.ndarray:
    """Every run's next state, ``update`` run on each run alone on the step's path."""
    assert step.update is not None  # Iterate.__post_init__ refuses a missing update
    if step.path == _rowwise.COMPILED:
        new, bad = _rowwise.compiled_update(step.update, states, releases)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ParameterError(
                f"update returned, for run {i}, a value that is not {len(step.init)} finite numbers (or not "
                "numbers at all); return a state like init."
            )
        return new
    if step.path == _rowwise.ONE_ROW:  # a function of arrays of runs, given one run
        return np.stack(
            [
                _updated(step, states[i : i + 1].copy(), releases[i : i + 1].copy(), one_row=True)
                for i in range(len(states))
            ]
        )
    return _updated_each(step, states, releases)


def _updated_each(step: Iterate, states: np.ndarray, releases: np.ndarray) -> np.ndarray:
    """``update`` called once per run, on copies of its run's state and release (a view's ``base`` is every
    run's); the results checked all at once (run by run only to name a bad one)."""
    assert step.update is not None  # Iterate.__post_init__ refuses a missing update
    scalar = releases.shape[1] == 1
    got = [step.update(states[i].copy(), releases[i, 0] if scalar else releases[i].copy()) for i in range(len(states))]
    try:
        new = np.array(got, dtype=float).reshape(len(states), -1)
    except (TypeError, ValueError):
        new = None
    if new is not None and new.shape == states.shape and np.all(np.isfinite(new)):
        return new
    return np.stack([_updated(step, states[i].copy(), releases[i].copy()) for i in range(len(states))])


def _updated(step: Iterate, state: np.ndarray, release: np.ndarray, one_row: bool = False) -> np.ndarray:
    assert step.update is not None  # Iterate.__post_init__ refuses a missing update
    arg = release if one_row or release.shape != (1,) else release[0]
    new = np.asarray(step.update(state, arg), dtype=float).reshape(-1)
    if new.shape != step.init.shape or not np.all(np.isfinite(new)):
        raise ParameterError(
            f"update returned a state of shape {new.shape} (or not finite); return {len(step.init)} finite "
            "numbers, like init."
        )
    return new


register(Compose, Parallel, Repeat, Iterate)


# --------------------------------------------------------------------------- public constructors


@dataclass(frozen=True)
class SplitBudget(Step):
    """``dp.compose(*parts, epsilon=, delta=, rho=, weights=)``: every part runs on the same input (as
    :class:`Compose`) and the total budget is split over them by ``weights`` (equal by default).

    A placeholder, never a registered step: ``dpharness.parts.mechanism`` resolves it into a plain
    :class:`Compose` of parts whose noise is calibrated to their shares (:mod:`dpharness.proofs._calibrate`):
    shares of ε or ρ by weight (basic and zCDP composition add them); when a part holds a Gaussian, an
    (ε, δ) total is first converted to the largest ρ whose zCDP conversion gives it and ρ is split
    (Gaussians compose exactly in zCDP; splitting ε and δ by basic composition would cost about 3× the
    noise over ten parts), a Laplace part then spending ε_i = √(2ρ_i). Inside a part, a plain compose
    splits its share equally and ``repeat(n, ...)`` gives each run 1/n. The proof of the whole may be
    tighter than the split (PLD), so the calibration is conservative (ten Gaussians at (1, 1e-6): exact
    ε(1e-6) = 0.927), as budget splits are in OpenDP and Tumult."""

    parts: tuple
    epsilon: Any = None
    delta: Any = None
    rho: Any = None
    weights: tuple | None = None
    is_budget: ClassVar[bool] = True
    per_key_role = "compose"  # a group-by's part may hold it until dp.mechanism calibrates it

    def __post_init__(self) -> None:
        Compose(tuple(self.parts))  # the same validation of the parts
        object.__setattr__(self, "parts", tuple(self.parts))
        for name in ("epsilon", "delta", "rho"):
            object.__setattr__(self, name, _budget(name, getattr(self, name), "the parts"))
        if self.epsilon is None and self.rho is None:
            raise ParameterError(
                f"compose(delta={self.delta!r}) splits no budget: pass epsilon= (with delta= when a part is "
                "Gaussian) or rho=."
            )
        if self.rho is not None and (self.epsilon is not None or self.delta is not None):
            raise ParameterError(
                "compose(rho=..., epsilon=...): pass a zCDP total (rho=) or an (ε, δ) total, not both."
            )
        if self.delta is not None and not Fraction(self.delta) < 1:
            raise ParameterError(f"delta={self.delta!r} must be < 1; pass a small δ such as 1e-6.")
        if self.weights is not None:
            w = tuple(_plain("weights", x) for x in self.weights)
            if len(w) != len(self.parts) or any(not Fraction(x) > 0 for x in w):
                raise ParameterError(
                    f"weights={self.weights!r}: pass one positive weight per part ({len(self.parts)})."
                )
            object.__setattr__(self, "weights", w)

    def describe(self) -> str:
        total = ", ".join(
            f"{n}={getattr(self, n)!r}" for n in ("epsilon", "delta", "rho") if getattr(self, n) is not None
        )
        return "compose(" + ", ".join(p.describe() for p in self.parts) + f"; split {total})"


def compose(
    *parts: Step, epsilon: Any = None, delta: Any = None, rho: Any = None, weights: Sequence | None = None
) -> Step:
    """Run every part on the same input (independent randomness); the output is their tuple. With a
    total budget (``epsilon=``, with ``delta=`` when a part is Gaussian, or ``rho=``), it is split over
    the parts by ``weights`` (equal by default) and each part's noise, declared without a scale
    (``dp.laplace()``, ``dp.gaussian()``), is calibrated to its share by ``dp.mechanism``
    (:class:`SplitBudget`)."""
    if epsilon is None and delta is None and rho is None and weights is None:
        return Compose(tuple(parts))
    return SplitBudget(tuple(parts), epsilon, delta, rho, None if weights is None else tuple(weights))


def post(fn: Callable) -> Post:
    """Post-process the noisy outputs with ``fn``: called once per run with that run's outputs as
    positional arguments (one per composed part). The proof assumes ``fn`` is a pure function of
    them (no state kept between calls, no access to the data)."""
    return Post(fn, False)


def parallel(part: Step, *, by: int, keys: Sequence) -> Parallel:
    """Run ``part`` on each partition of the records by column ``by``'s value in ``keys``."""
    return Parallel(part, by, tuple(keys))


def repeat(times: int, part: Step) -> Repeat:
    """``times`` independent runs of ``part`` (e.g. rounds of a subsampled Gaussian)."""
    return Repeat(times, part)


def iterate(
    times: int,
    part: Step,
    *,
    init: Any,
    update: Callable,
    output: str = "state",
    compiled: bool = False,
    vectorized: bool = False,
) -> Iterate:
    """``times`` adaptive rounds of ``part`` (DP-SGD: ``dp.poisson_sample(q) >> dp.map_records(grad) >>
    dp.clip_norm(C) >> dp.sum() >> dp.gaussian(sigma=σC)``, with ``update(θ, noisy_sum)`` the step).

    Many runs (an audit's samples) go side by side, and ``update(state, release)`` sees one run at a
    time, always: ``compiled=True`` (or an ``numba.njit`` update) compiles it with numba and loops over
    the runs in compiled code (the fast path; give ``dp.map_records(grad, compiled=True)`` too); by
    default it is called from Python once per run and round; ``vectorized=True`` declares a function of
    arrays (``update(states, releases)``, one row per run), called on one run's row at a time (a batched
    call could mix runs)."""
    _v.choice("vectorized", vectorized, (True, False))
    _v.choice("compiled", compiled, (True, False))
    return Iterate(times, part, init, update, output, vectorized, compiled)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
