"""Certified trade-off curves (dpharness.auditors.tradeoff): the points against independently computed
exact intervals, the envelope and μ bound as properties over random counts, the closed-form curves
against brute force, statistical checks on a correct and a buggy mechanism, and the report's panel."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from dpharness import registry, report
from dpharness.auditors import audit
from dpharness.auditors import tradeoff as T
from dpharness.errors import ParameterError
from dpharness.mechanisms.laplace import Laplace

import dp_fakes


# --------------------------------------------------------------------------- the points are the exact intervals


def _exact_interval_check(result):
    """Every certified point against scipy's exact one-sided intervals at the per-bound level of the
    audit's union bound, recomputed from the recorded counts."""
    t = result.tradeoff()
    rec = result.extra["certification"]
    rows = rec["events"]
    level = (1 - rec["confidence"]) / (2 * rec["candidates"])
    assert t.level == pytest.approx(level, rel=1e-12)
    assert rec["candidates"] == result.events_tested and len(rows) == len(t.alpha)
    for i, (pair, fwd, h1, n1, h0, n0, _family) in enumerate(rows):
        q_low = stats.binomtest(h1, n1, alternative="greater").proportion_ci(1 - level, method="exact").low
        p_high = stats.binomtest(h0, n0, alternative="less").proportion_ci(1 - level, method="exact").high
        assert t.alpha[i] == pytest.approx(p_high, rel=1e-7, abs=1e-12)  # binomtest solves to ~1e-9
        assert t.beta[i] == pytest.approx(1 - q_low, rel=1e-7, abs=1e-12)
        assert t.pair[i] == pair and bool(t.numerator_is_data[i]) == fwd
        # the point is inside its interval: α_hi bounds the observed null frequency, β_hi the alternative's miss rate
        assert h0 / n0 <= t.alpha[i] and 1 - h1 / n1 <= t.beta[i]
    return t


def test_points_are_the_exact_one_sided_intervals_of_the_audit():
    r = audit(Laplace(), samples=100_000, seed=5)
    t = _exact_interval_check(r)
    # the points' ε at the audit's δ is the audit's bound or better (its complements come free)
    assert t.epsilon >= r.epsilon_lower_bound - 1e-12
    assert t.epsilon == pytest.approx(max(r.epsilon_lower_bound, t.epsilon))


def test_the_record_survives_the_json_round_trip_and_old_entries_read_as_none():
    from dpharness.pipeline import _audit_from_json

    r = audit(Laplace(), samples=50_000, seed=2)
    back = _audit_from_json(r.to_dict())
    assert back.tradeoff().mu == r.tradeoff().mu
    np.testing.assert_array_equal(back.tradeoff().alpha, r.tradeoff().alpha)
    old = r.to_dict()
    del old["extra"]["certification"]
    assert _audit_from_json(old).tradeoff() is None
    assert "certified μ-GDP lower bound" in r._repr_html_()


def test_reflection_puts_each_point_on_both_orders():
    t = T.certified_tradeoff([900, 50], [1000, 1000], [300, 10], [1000, 1000], numerator_is_data=[True, False])
    a, b = t.points(order="data, neighbor")
    a2, b2 = t.points(order="neighbor, data")
    # candidate 0 (numerator = data) is on T(neighbor, data) directly, candidate 1 on T(data, neighbor)
    assert (a[0], b[0]) == (t.beta[0], t.alpha[0]) and (a2[0], b2[0]) == (t.alpha[0], t.beta[0])
    assert (a[1], b[1]) == (t.alpha[1], t.beta[1]) and (a2[1], b2[1]) == (t.beta[1], t.alpha[1])


def test_bad_input_names_the_argument():
    with pytest.raises(ParameterError, match="confidence="):
        T.certified_tradeoff([1], [10], [0], [10], confidence=1.5)
    with pytest.raises(ParameterError, match="alpha="):
        T.gaussian_curve([1.5], 1.0)
    with pytest.raises(ParameterError, match="pair=None"):
        T.certified_tradeoff([5, 5], [10, 10], [1, 1], [10, 10], pair=[0, 1]).envelope()
    with pytest.raises(ParameterError, match="order="):
        T.certified_tradeoff([5], [10], [1], [10]).points(order="sideways")


# --------------------------------------------------------------------------- properties over random counts


@st.composite
def _counts(draw):
    m = draw(st.integers(1, 8))
    n = draw(st.sampled_from([10, 100, 1000, 10**5]))
    h1 = draw(st.lists(st.integers(0, n), min_size=m, max_size=m))
    h0 = draw(st.lists(st.integers(0, n), min_size=m, max_size=m))
    conf = draw(st.sampled_from([0.5, 0.9, 0.95, 0.999]))
    return np.array(h1), n, np.array(h0), conf


@settings(max_examples=200, deadline=None)
@given(_counts())
def test_envelope_is_a_convex_non_increasing_curve_on_or_below_every_point(c):
    h1, n, h0, conf = c
    t = T.certified_tradeoff(h1, n, h0, n, confidence=conf)
    for order in ("data, neighbor", "neighbor, data"):
        a, b = t.points(order=order)
        assert np.all((a > 0) & (a <= 1) & (b >= 0) & (b <= 1))
        ea, eb = t.envelope(order=order)
        assert ea[0] == 0 and eb[0] == 1 and ea[-1] == 1 and eb[-1] == 0
        assert np.all(np.diff(ea) > 0) and np.all(np.diff(eb) <= 1e-15)
        slopes = np.diff(eb) / np.diff(ea)
        assert np.all(np.diff(slopes) >= -1e-9 * (1 + np.abs(slopes[1:])))  # convex
        assert np.all(np.interp(a, ea, eb) <= b + 1e-12)  # on or below every point
        assert np.all(eb <= 1 - ea + 1e-12)  # never above the trivial curve
        # tightness: every vertex is a certified point (or an end)
        inner = zip(ea[1:-1], eb[1:-1])
        assert all(np.any((a == x) & (b == y)) for x, y in inner)


def _mu_by_bisection(a, b):
    """The supremum of μ for which G_μ passes above some point, found by bisection on the condition."""

    def above(mu):
        return bool(np.any(special.ndtr(special.ndtri(1 - a) - mu) > b))

    if not above(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while above(hi):
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if above(mid) else (lo, mid)
    return lo


@settings(max_examples=200, deadline=None)
@given(_counts())
def test_mu_is_the_largest_mu_whose_gaussian_curve_passes_above_a_point(c):
    h1, n, h0, conf = c
    t = T.certified_tradeoff(h1, n, h0, n, confidence=conf)
    a, b = t.points()
    assert t.mu >= 0
    # G_μ at the bound passes on or below every point; just below it, above one of them
    assert np.all(T.gaussian_curve(a, t.mu) <= b + 1e-9)
    if t.mu > 1e-6:
        assert np.any(T.gaussian_curve(a, t.mu - 1e-6) > b)
    # 1 − α is computed directly in the bisection: agreement to its rounding
    assert t.mu == pytest.approx(_mu_by_bisection(a, b), abs=1e-6)
    # the ε from the points refutes f_{ε',0} for ε' below it and no point is below f_{ε,0}
    assert np.all(T.epsilon_delta_curve(a, t.epsilon) <= b + 1e-9)
    if t.epsilon > 1e-6:
        assert np.any(T.epsilon_delta_curve(a, t.epsilon - 1e-6) > b)


@settings(max_examples=100, deadline=None)
@given(_counts(), st.integers(1, 50))
def test_more_hits_on_the_alternative_lower_beta_and_more_on_the_null_raise_alpha(c, extra):
    h1, n, h0, conf = c
    t = T.certified_tradeoff(h1, n, h0, n, confidence=conf)
    t1 = T.certified_tradeoff(np.minimum(h1 + extra, n), n, h0, n, confidence=conf)
    t0 = T.certified_tradeoff(h1, n, np.minimum(h0 + extra, n), n, confidence=conf)
    assert np.all(t1.beta <= t.beta) and np.all(t0.alpha >= t.alpha)
    assert t1.mu >= t.mu and t0.mu <= t.mu


# --------------------------------------------------------------------------- the curves against brute force


def _np_curve(alpha_pts, beta_pts, a):
    """Lower convex hull of threshold-test points, evaluated at a (randomised tests interpolate)."""
    ea, eb = T._lower_hull(np.append(alpha_pts, [0, 1]), np.append(beta_pts, [1, 0]))
    return np.interp(a, ea, eb)


@pytest.mark.parametrize("k, s", [(0, 0.5), (1, 0.5), (3, 0.4), (5, 0.1), (2, 2.0)])
def test_discrete_laplace_curve_is_the_neyman_pearson_curve_of_its_pmf(k, s):
    ys = np.arange(-400, 401)
    p0 = np.exp(-s * np.abs(ys))
    p0 /= p0.sum()
    pk = np.exp(-s * np.abs(ys - k))
    pk /= pk.sum()
    # all threshold tests {y >= j}: α_j = P_0(Y >= j), β_j = P_k(Y < j)
    alpha_pts = np.concatenate([np.cumsum(p0[::-1])[::-1], [0.0]])
    beta_pts = np.concatenate([[0.0], np.cumsum(pk)])
    a = np.linspace(0, 1, 2001)
    np.testing.assert_allclose(T.discrete_laplace_curve(a, k, s), _np_curve(alpha_pts, beta_pts, a), atol=1e-12)


def test_laplace_curve_matches_threshold_tests_and_is_the_fine_grid_limit():
    mu = 1.3
    t = np.linspace(-30, 30, 60001)
    alpha_pts = np.where(t >= 0, np.exp(-t) / 2, 1 - np.exp(t) / 2)  # P(Lap(0) > t)
    beta_pts = np.where(t >= mu, 1 - np.exp(-(t - mu)) / 2, np.exp(t - mu) / 2)  # P(Lap(μ) <= t)
    a = np.linspace(0, 1, 1001)
    np.testing.assert_allclose(T.laplace_curve(a, mu), _np_curve(alpha_pts, beta_pts, a), atol=1e-6)
    g = 2.0**-12
    np.testing.assert_allclose(
        T.discrete_laplace_curve(a, int(mu / g), g), T.laplace_curve(a, int(mu / g) * g), atol=1e-6
    )
    # at a fixed grid the discrete curve is at most (never above) the continuous one in its middle part
    assert np.all(T.discrete_laplace_curve(a, 8, 0.25) <= T.laplace_curve(a, 2.0) + 1e-12)


def test_gaussian_and_epsilon_delta_curves():
    a = np.array([1e-12, 1e-3, 0.1, 0.5, 0.9])
    np.testing.assert_allclose(T.gaussian_curve(a, 1.0), stats.norm.cdf(stats.norm.isf(a) - 1.0), rtol=1e-10)
    f = T.epsilon_delta_curve(a, 1.0, 1e-3)
    np.testing.assert_allclose(f, np.maximum.reduce([0 * a, 1 - 1e-3 - math.e * a, (1 - 1e-3 - a) / math.e]))
    assert np.all(T.epsilon_delta_curve(a, math.inf) == 0)
    # symmetric: the curve is its own inverse (reflection of a point below it is below it)
    b = T.epsilon_delta_curve(a, 1.0)
    np.testing.assert_allclose(T.epsilon_delta_curve(b, 1.0), a, atol=1e-12)


# --------------------------------------------------------------------------- statistical


def _pair_shift(m: Laplace, data, neighbor) -> int:
    """Grid steps between the rounded centres of a one-coordinate pair."""
    g = m.grid
    c = [math.floor(float(np.asarray(x).reshape(-1)[0]) / g + 0.5) for x in (data, neighbor)]
    return abs(c[0] - c[1])


@pytest.mark.statistical
def test_laplace_certified_points_are_consistent_with_its_true_curve():
    """A correct Laplace (ε = 1, 3·10^5 a side, seed 0): no certified point lies below the exact trade-off
    curve of its audited pair (in either order), μ and ε stay below the truth. False-failure rate
    <= 1 − confidence = 0.05 (all points hold together by the audit's union bound)."""
    m = Laplace()
    r = audit(m, samples=300_000, seed=0)
    t = _exact_interval_check(r)
    pairs = r.extra.get("pairs") or [(r.witness.data, r.witness.neighbor)]
    s = float(m.grid) / float(m.scale)
    for p, (d, nb) in enumerate(pairs):
        k = _pair_shift(m, d, nb)
        for order in ("data, neighbor", "neighbor, data"):
            below = t.below(lambda a: T.discrete_laplace_curve(a, k, s), p, order)
            assert not below.any(), f"pair {p} ({order}): a certified point below the true curve (rate <= 0.05)"
    aa = np.logspace(-15, 0, 100001)[:-1]
    mu_true = float(np.max(-special.ndtri(aa) - special.ndtri(T.laplace_curve(aa, 1.0))))  # 1.030 (μ-equivalent sup)
    assert 0.8 < t.mu <= mu_true, f"certified μ {t.mu} vs the curve's {mu_true} (false-failure rate <= 0.05)"
    assert t.epsilon <= 1.0


@pytest.mark.statistical
def test_a_buggy_mechanism_has_certified_points_below_its_claimed_curve():
    """exponential_no_half from the gallery (claims ε = 1, true ε = 2) at 2·10^5 a side, seed 0: some
    certified point lies below the claim's f_{1,0}, so the curve refutes the claim. A failure would be a
    missed violation (the audit's power at this size, seed fixed), not a false alarm; a false alarm on
    a correct mechanism has probability <= 1 − confidence = 0.05."""
    m = registry.get("exponential_no_half")
    m = m() if isinstance(m, type) else m
    r = audit(m, samples=200_000, seed=0)
    t = r.tradeoff()
    pairs = sorted(set(t.pair.tolist()))
    claim = lambda a: T.epsilon_delta_curve(a, r.epsilon, r.delta)  # noqa: E731
    assert any(t.below(claim, p).any() for p in pairs), "no certified point below the claimed curve"
    assert t.epsilon > r.epsilon and not r.passed


# --------------------------------------------------------------------------- the report


def _with_certification(fake):
    def wrapped(*args, **kw):
        r = fake(*args, **kw)
        n = r.samples
        rows = [
            [0, True, int(0.7 * n), n, int(0.3 * n), n, "fake"],
            [0, False, int(0.5 * n), n, int(0.2 * n), n, "fake"],
        ]
        extra = {**r.extra, "certification": {"confidence": r.confidence, "candidates": 2, "events": rows}}
        import dataclasses

        return dataclasses.replace(r, extra=extra)

    return wrapped


def test_report_page_shows_the_trade_off_plot(monkeypatch, tmp_path):
    import dpharness.auditors

    dp_fakes.install(monkeypatch)
    monkeypatch.setattr(dpharness.auditors, "audit", _with_certification(dp_fakes.fake_audit), raising=False)
    r = report.build(dp_fakes.Coin(), samples=20_000, seed=3, curve_sizes=(1_000,), plot_samples=2_000)
    assert r.png is not None and r.tradeoff is not None
    from PIL import Image
    import io

    assert Image.open(io.BytesIO(r.png)).size == (1000, 1600)  # four stacked panels, the last the trade-off curve
    t = r.tradeoff
    md = report.render_markdown(r)
    html = report.render_html(r)
    for page in (md, html):
        assert "certified trade-off points" in page
        assert f"μ-GDP lower bound {report.fmt_lower(t.mu)}" in page  # a lower bound, rounded down
        assert "points below the claimed curve f_ε,δ: 0" in page


def test_report_of_an_old_audit_has_no_trade_off_words(monkeypatch):
    dp_fakes.install(monkeypatch)
    r = report.build(dp_fakes.Coin(), samples=20_000, seed=3, curve_sizes=(), plot_samples=2_000)
    assert r.tradeoff is None
    assert "Certified trade-off curve" not in report.render_markdown(r)
