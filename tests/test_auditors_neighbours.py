"""Unit tests of the neighbour search (dpharness.auditors.neighbours): valid pairs for every input
shape, StatDP's patterns, witnesses first, determinism for a seed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from dpharness.auditors.neighbours import search_pairs, statdp_patterns
from dpharness.core import (
    AddRemove,
    BoundedChange,
    DiscreteLaw,
    Finite,
    FunctionLaw,
    InputSpec,
    IntegerRange,
    Mechanism,
    RealBox,
    RealInterval,
    Substitute,
    Witness,
)
from dpharness.errors import ParameterError


@dataclass(frozen=True, kw_only=True)
class _RR(Mechanism):
    """k-ary randomized response with log-odds 1 (record input, exact pmf)."""

    name = "_test_rr"
    k: int = 3

    @property
    def input_spec(self):
        return InputSpec(Finite(tuple(range(self.k))), Substitute(), "record")

    def _sample(self, data, size, rng):
        keep = rng.random(size) < np.e / (np.e + self.k - 1)
        other = (data + rng.integers(1, self.k, size)) % self.k
        return np.where(keep, data, other)

    def _law(self, data):
        p = np.e / (np.e + self.k - 1)
        return DiscreteLaw(
            tuple(range(self.k)), tuple(p if v == data else (1 - p) / (self.k - 1) for v in range(self.k))
        )

    def example_pair(self):
        return 0, 1


@dataclass(frozen=True, kw_only=True)
class _VecLaplace(Mechanism):
    """x + Laplace(scale) per coordinate; neighbours: L1 distance <= 1 (continuous law)."""

    name = "_test_vec_laplace"
    dim: int = 3
    scale: float = 1.0
    norm: str = "l1"

    @property
    def input_spec(self):
        return InputSpec(RealInterval(-10, 10), BoundedChange(1, self.norm), "vector", dim=self.dim)

    def _sample(self, data, size, rng):
        return np.asarray(data, float) + rng.laplace(0, self.scale, (size, self.dim))

    def _law(self, data):
        d = np.asarray(data, float)
        fn = lambda y: (
            -np.abs(np.asarray(y, float).reshape(-1, self.dim) - d).sum(axis=1) / self.scale
            - self.dim * np.log(2 * self.scale)
        )
        return FunctionLaw("continuous", fn, (), None)

    def example_pair(self):
        return np.zeros(self.dim), np.r_[1.0, np.zeros(self.dim - 1)]


@dataclass(frozen=True, kw_only=True)
class _NoisyCount(Mechanism):
    """Count of ones + Laplace(1); add/remove; no law (screened on samples)."""

    name = "_test_noisy_count"

    @property
    def input_spec(self):
        return InputSpec(IntegerRange(0, 1), AddRemove(), "dataset")

    def _sample(self, data, size, rng):
        return float(np.sum(data)) + rng.laplace(0, 1.0, size)

    def _law(self, data):
        raise NotImplementedError

    def example_pair(self):
        return np.array([0, 1]), np.array([0, 1, 1])


@dataclass(frozen=True, kw_only=True)
class _BoxHistogram(Mechanism):
    """Column sums of (x, y) records in [0, 1]^2 + Laplace(1) each; substitution; fixed size 4;
    vector output (screened with learned vector events)."""

    name = "_test_box_hist"

    @property
    def input_spec(self):
        return InputSpec(RealBox(0, 1, 2), Substitute(), "dataset", size=4)

    def _sample(self, data, size, rng):
        return np.asarray(data, float).sum(axis=0) + rng.laplace(0, 1.0, (size, 2))

    def _law(self, data):
        raise NotImplementedError

    def example_pair(self):
        d = np.zeros((4, 2))
        e = d.copy()
        e[0] = [0.5, 0.5]
        return d, e


MECHS = [_RR(), _VecLaplace(), _VecLaplace(norm="linf"), _VecLaplace(norm="l2"), _NoisyCount(), _BoxHistogram()]


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: f"{m.name}-{getattr(m, 'norm', '')}")
def test_pairs_are_valid_neighbours(mech):
    pairs = search_pairs(mech, seed=3, budget=4000)
    assert 1 <= len(pairs) <= 5
    for a, b in pairs:
        mech.input_spec.validate_pair(a, b)  # raises if not neighbours


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: f"{m.name}-{getattr(m, 'norm', '')}")
def test_deterministic_for_a_seed(mech):
    p1 = search_pairs(mech, seed=11, budget=2000)
    p2 = search_pairs(mech, seed=11, budget=2000)
    assert [(np.asarray(a).tolist(), np.asarray(b).tolist()) for a, b in p1] == [
        (np.asarray(a).tolist(), np.asarray(b).tolist()) for a, b in p2
    ]


def test_statdp_patterns_cover_the_table():
    spec = InputSpec(RealInterval(-10, 10), BoundedChange(1, "linf"), "vector", dim=6)
    pats = {(tuple(a), tuple(b)) for a, b in statdp_patterns(spec)}
    ones = (1.0,) * 6
    assert (ones, (2.0,) + (1.0,) * 5) in pats  # one above
    assert (ones, (0.0,) + (1.0,) * 5) in pats  # one below
    assert (ones, (2.0,) + (0.0,) * 5) in pats  # one above rest below
    assert (ones, (2.0,) * 3 + (0.0,) * 3) in pats  # half half
    assert (ones, (2.0,) * 6) in pats and (ones, (0.0,) * 6) in pats  # all above / all below
    assert ((1.0,) * 3 + (0.0,) * 3, (0.0,) * 3 + (1.0,) * 3) in pats  # x shape
    for a, b in statdp_patterns(spec):
        spec.validate_pair(a, b)


def test_l1_patterns_are_scaled_to_the_sensitivity():
    spec = InputSpec(RealInterval(), BoundedChange(2, "l1"), "vector", dim=4)
    for a, b in statdp_patterns(spec):
        assert np.abs(np.asarray(b) - np.asarray(a)).sum() == pytest.approx(2.0)


def test_the_exact_law_ranks_the_larger_shift_first():
    # under L1 sensitivity 1 every pattern moves the output by at most 1 in total: ties are fine, but
    # under Linf the "all above" pattern (true ε = dim) must beat a one-coordinate shift (ε = 1)
    mech = _VecLaplace(norm="linf")
    (a, b), *_ = search_pairs(mech, seed=0, budget=20_000)
    assert np.abs(np.asarray(a) - np.asarray(b)).sum() == pytest.approx(3.0)


def test_witness_pairs_are_tried_first_when_as_strong():
    mech = _RR()
    w = Witness(data=2, neighbor=0)
    pairs = search_pairs(mech, seed=0, budget=1000, candidate_witnesses=[w])
    assert (pairs[0][0], pairs[0][1]) == (2, 0)


def test_invalid_witnesses_are_dropped():
    mech = _RR()
    pairs = search_pairs(mech, seed=0, budget=1000, candidate_witnesses=[Witness(data=7, neighbor=0), (1, 1)])
    for a, b in pairs:
        mech.input_spec.validate_pair(a, b)


def test_bad_arguments_name_themselves():
    with pytest.raises(ParameterError, match="budget="):
        search_pairs(_RR(), seed=0, budget=5)
    with pytest.raises(ParameterError, match="seed="):
        search_pairs(_RR(), seed="x", budget=1000)
    with pytest.raises(ParameterError, match="mechanism="):
        search_pairs(lambda d, s, r: None, seed=0, budget=1000)


def _catalog_names():
    from dpharness import catalog

    return sorted(catalog(gallery=None))


@pytest.mark.parametrize("name", _catalog_names())
def test_catalog_mechanisms_get_valid_pairs(name):
    """Every registered mechanism (catalog and gallery, default parameters) gets valid neighbouring
    pairs from a small search, quickly."""
    import time

    from dpharness import get

    mech = get(name)()
    t0 = time.perf_counter()
    pairs = search_pairs(mech, seed=1, budget=20_000)
    assert pairs
    for a, b in pairs:
        mech.input_spec.validate_pair(a, b)
    assert time.perf_counter() - t0 < 20, f"search_pairs({name}) took {time.perf_counter() - t0:.1f} s"


_LOCAL_MODULE = """
ODD_FLOAT = 7777.125
ODD_INT = 918273
ODD_TEXT = "zyxw-constant"
"""


def test_the_search_is_the_same_whatever_local_modules_are_loaded_and_writes_nothing(tmp_path, monkeypatch):
    """The candidates for a seed do not depend on what else the process imported (hypothesis's draws, used
    before, mixed in constants from the loaded local modules and cached them in ./.hypothesis): importing a
    local module full of constants changes no candidate, and nothing is written to the working directory."""
    import sys

    from dpharness import catalog
    from dpharness.auditors import neighbours as N

    monkeypatch.chdir(tmp_path)
    m = catalog(gallery=None)["clamped_sum"]()

    def cands():
        return [
            (np.asarray(a).tolist(), np.asarray(b).tolist(), g)
            for a, b, g in N._candidates(m, np.random.default_rng(0), [])
        ]

    before = cands()
    (tmp_path / "local_constants_pkg.py").write_text(_LOCAL_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import local_constants_pkg  # noqa: F401

    try:
        assert cands() == before
        assert sum(g == "boundary-weighted" for _, _, g in before) == 6
        assert sorted(p.name for p in tmp_path.iterdir()) == ["local_constants_pkg.py"]
    finally:
        sys.modules.pop("local_constants_pkg", None)


def test_the_search_imports_no_hypothesis():
    """The audit's pair search draws with numpy only: a fresh process searching pairs never imports
    hypothesis (its import and first draws cost about 0.2 s of a short audit)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from dpharness import catalog\n"
        "from dpharness.auditors import neighbours as N\n"
        "for name in ('laplace', 'median_substitute_bug', 'randomized_response'):\n"
        "    N._candidates(catalog(gallery=None)[name](), np.random.default_rng(0), [])\n"
        "print('hypothesis' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
