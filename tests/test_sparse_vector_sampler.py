"""The sparse vector samplers run the algorithm's own loop: query by query, noise drawn only for the
queries a run answers, value noise only for its ⊤ answers (mechanisms/sparse_vector.py). Deterministic
checks of that structure on the generator's stream; the law itself is checked by the chi-square tests
of tests/test_mechanisms_literature.py (``test_sampler_matches_exact_law``)."""

from __future__ import annotations

import numpy as np
import pytest

from dpharness.mechanisms._noise import discrete_laplace, round_half_up, to_units
from dpharness.mechanisms.sparse_vector import (
    BOT,
    BOTTOM,
    NOT_ANSWERED,
    STOPPED,
    TOP,
    NumericalSparseVector,
    SparseVector,
    SparseVectorAlg3,
    SparseVectorAlg4,
    SparseVectorAlg5,
    SparseVectorAlg6,
)

SIZE = 20_000


def _pairs(m):
    return [np.asarray(x, dtype=float) for x in m.example_pair()] + [np.linspace(-3.0, 5.0, m.n_queries)]


@pytest.mark.parametrize(
    "mech",
    [SparseVector(), SparseVector(c=3, n_queries=7), SparseVectorAlg4(c=2), SparseVectorAlg3()],
    ids=lambda m: f"{m.name}-c{m.c}",
)
def test_cutoff_runs_draw_one_noise_per_answered_query(mech):
    """A run draws ρ, then ν_i only for the queries it answers (up to its c-th ⊤): the generator
    advances by exactly one uniform per run plus one per answered query (numpy's Laplace takes one
    double per draw; it redraws only on an exact 0.0, probability 2**-53 per draw)."""
    for q in _pairs(mech):
        rng = np.random.default_rng(11)
        codes = mech.sample(q, SIZE, rng)
        codes = mech._decode(codes) if codes.dtype != np.int8 else codes
        assert mech._valid(codes).all()
        answered = int(np.count_nonzero(codes != NOT_ANSWERED))
        assert answered < codes.size  # the cutoff stopped some runs early (the case the test is about)
        ref = np.random.default_rng(11)
        ref.random(SIZE + answered)
        assert rng.bit_generator.state == ref.bit_generator.state


@pytest.mark.parametrize("mech", [SparseVectorAlg5(), SparseVectorAlg6(n_queries=6)], ids=lambda m: m.name)
def test_runs_without_cutoff_answer_every_query(mech):
    """No cutoff: ρ, then every ν at once (sample by sample), q_i + ν_i >= T + ρ."""
    for q in _pairs(mech):
        got = mech.sample(q, SIZE, np.random.default_rng(3))
        rng = np.random.default_rng(3)
        rho = rng.laplace(0.0, float(mech.rho_scale), (SIZE, 1))
        nu = (
            rng.laplace(0.0, float(mech.nu_scale), (SIZE, mech.n_queries))
            if float(mech.nu_scale) > 0
            else np.zeros((SIZE, mech.n_queries))
        )
        want = (q[None, :] + nu >= float(mech.threshold) + rho).astype(np.int8)
        assert got.dtype == np.int8 and np.array_equal(got, want)


@pytest.mark.parametrize("c", [1, 2])
def test_numerical_svt_draws_value_noise_for_the_top_answers_only(c):
    """Numerical SVT = the SVT pattern from the same stream, then one DiscreteLaplace(value_scale/g)
    per ⊤ answer in row-major order, released as round_g(q_i) + g·K; ⊥ and not-answered carry their
    sentinels."""
    m = NumericalSparseVector.calibrated(1, c=c)
    pattern = SparseVector(
        n_queries=m.n_queries, threshold=m.threshold, c=m.c, rho_scale=m.rho_scale, nu_scale=m.nu_scale
    )
    g = float(m.granularity)
    for q in _pairs(m):
        out = m.sample(q, SIZE, np.random.default_rng(5))
        rng = np.random.default_rng(5)
        codes = pattern.sample(q, SIZE, rng)
        assert np.array_equal(m._decode(out), codes)
        rows, cols = np.nonzero(codes == TOP)
        k = discrete_laplace(float(m.value_scale) / g, len(cols), rng)
        want = (to_units("q", q, g)[cols] + k).astype(float) * g
        assert np.array_equal(out[rows, cols], want)
        assert np.all(out[codes == BOT] == BOTTOM) and np.all(out[codes == NOT_ANSWERED] == STOPPED)


def test_alg3_releases_the_compared_value_rounded_to_the_grid():
    """Alg. 3 releases the same q_i + ν_i that was compared with T + ρ, rounded to the grid."""
    m = SparseVectorAlg3(c=2)
    g = float(m.granularity)
    for q in _pairs(m):
        codes, noisy = m._answers(q, SIZE, np.random.default_rng(9), values=True)
        out = m.sample(q, SIZE, np.random.default_rng(9))
        assert np.array_equal(m._decode(out), codes)
        top = codes == TOP
        assert np.array_equal(out[top], round_half_up(noisy[top] / g).astype(float) * g)
        assert np.isnan(noisy[codes == NOT_ANSWERED]).all() and not np.isnan(noisy[codes != NOT_ANSWERED]).any()
