"""The privacy-account algebra of the parts walk (proofs/_account.py): every field of every child is
read, and what advanced composition sees is complete. Fast, deterministic; the mutation target
``walk`` (mutation/walk.cfg) runs these."""

from __future__ import annotations

import pytest
import sympy as sp

from dpharness.proofs import _account as A

R = sp.Rational


def _pure(*eps):
    return A.compose([A.leaf(R(e), R(e) ** 2 / 2) for e in eps])


def _gauss(rho):
    return A.leaf(None, R(rho), ("gaussian", R(4), 1))


def test_a_leaf_is_one_unit_and_keeps_its_exact_profile():
    a = A.leaf(R(1, 2), R(1, 8), ("laplace", 3, R(6), R(1)))
    assert a.units == (R(1, 2),) and a.eps == R(1, 2) and a.rho == R(1, 8)
    assert a.laplace_1d == (3, R(6), R(1)) and a.gaussian_1d is None and a.rr_1d is None
    g = _gauss(2)
    assert g.units == (None,) and g.eps is None and g.gaussian_1d == (R(4), 1) and g.laplace_1d is None
    r = A.leaf(R(1), R(1, 2), ("rr", 3, R(1)))
    assert r.rr_1d == (3, R(1)) and r.gaussian_1d is None and r.laplace_1d is None


def test_an_account_has_units_and_a_pure_account_only_pure_units():
    with pytest.raises(ValueError, match="^a privacy account has at least one unit$"):
        A.Account(R(1), R(1, 2), ())
    with pytest.raises(ValueError, match="^a pure-DP account has pure units only$"):
        A.Account(R(1), R(1, 2), (R(1), None))
    assert A.Account(None, R(1), (R(1), None)).units == (R(1), None)


def test_compose_adds_and_concatenates_every_part():
    a = A.leaf(R(1), R(1, 2), ("laplace", 1, R(1), R(1)))
    b = A.leaf(R(2), R(2), None)
    c = A.compose([a, b, _pure(R(1, 3), R(1, 4))])
    assert c.eps == R(1) + R(2) + R(1, 3) + R(1, 4)
    assert c.rho == R(1, 2) + R(2) + R(1, 18) + R(1, 32)
    assert c.units == (R(1), R(2), R(1, 3), R(1, 4))
    assert c.single is None


def test_compose_of_one_part_is_that_part():
    a = A.leaf(R(1), R(1, 2), ("laplace", 1, R(1), R(1)))
    assert A.compose([a]) is a


def test_compose_with_a_gaussian_is_not_pure_and_keeps_its_unit():
    c = A.compose([_pure(1), _gauss(3)])
    assert c.eps is None and c.rho == R(1, 2) + 3 and c.units == (R(1), None)
    c2 = A.compose([_gauss(3), _pure(1)])
    assert c2.eps is None and c2.units == (None, R(1))


def test_parallel_under_add_remove_is_the_part_without_its_single_profile():
    part = A.leaf(R(2), R(2), ("laplace", 1, R(1, 2), R(1)))
    out = A.parallel_add_remove(part)
    assert (out.eps, out.rho, out.units, out.single) == (R(2), R(2), (R(2),), None)
    many = A.parallel_add_remove(_pure(1, 2, 3))
    assert many.units == (R(1), R(2), R(3)) and many.eps == 6


@pytest.mark.parametrize(
    "inside,across,eps,rho,k,top",
    [
        ((R(5),), (R(1),), R(5), R(25, 2), 2, R(5)),  # the inside scenario is larger
        ((R(1),), (R(5),), R(10), R(25), 2, R(5)),  # across two partitions is larger
        ((R(1), R(1), R(1)), (R(2),), R(4), R(4), 3, R(2)),  # more units inside; largest unit across
        ((R(3),), (R(1), R(1)), R(4), R(9, 2), 4, R(3)),  # more units across; largest unit inside
    ],
)
def test_parallel_under_substitution_dominates_both_scenarios(inside, across, eps, rho, k, top):
    out = A.parallel_substitute(_pure(*inside), _pure(*across))
    assert sp.simplify(out.eps - eps) == 0 and sp.simplify(out.rho - rho) == 0
    assert len(out.units) == k and all(sp.simplify(u - top) == 0 for u in out.units)
    assert out.single is None
    # the advanced-composition view covers every scenario: k units of the largest ε
    n, e0 = A.advanced_units(A.compose([out, _pure(R(1, 10))]))
    assert n == k + 1 and sp.simplify(e0 - top) == 0


def test_parallel_under_substitution_with_gaussian_noise_is_not_pure():
    for inside, across in ((_gauss(1), _pure(1)), (_pure(1), _gauss(1)), (_gauss(1), _gauss(2))):
        out = A.parallel_substitute(inside, across)
        assert out.eps is None and all(u is None for u in out.units)
    out = A.parallel_substitute(_gauss(3), _gauss(1))
    assert out.rho == 3
    out = A.parallel_substitute(_gauss(1), _gauss(2))
    assert out.rho == 4


def test_a_mixed_unit_list_is_not_pure_for_advanced_composition():
    assert A.advanced_units(A.Account(None, R(1), (R(1), None))) is None
    assert A.advanced_units(A.Account(None, R(1), (None, R(1)))) is None


def test_advanced_units_counts_every_unit_and_takes_the_largest():
    assert A.advanced_units(_pure(1)) is None
    assert A.advanced_units(_pure(1, 1)) == (2, R(1))
    assert A.advanced_units(_pure(R(1, 3), 2, R(1, 2))) == (3, R(2))
    assert A.advanced_units(_pure(3, R(1, 2))) == (2, R(3))
    assert A.advanced_units(_pure(R(1, 2), 3)) == (2, R(3))
    assert A.advanced_units(A.compose([_pure(1), _gauss(1)])) is None


def test_the_pld_recipe_is_kept_concatenated_or_dropped_where_no_pair_dominates():
    g = A.leaf(None, R(1, 2), None, (("gaussian", R(4), 1),))
    lap = A.leaf(R(1), R(1, 2), None, (("laplace", R(1), 1),))
    quiet = A.leaf(R(0), R(0), None, ())
    vector = A.leaf(R(1), R(1, 2), None, None)
    assert A.leaf(R(1), R(1, 2)).pld is None
    assert A.compose([g, lap, quiet]).pld == (("gaussian", R(4), 1), ("laplace", R(1), 1))
    assert A.compose([lap, g]).pld == (("laplace", R(1), 1), ("gaussian", R(4), 1))
    assert A.compose([g, vector]).pld is None and A.compose([vector, g]).pld is None
    assert A.parallel_add_remove(A.compose([g, lap])).pld == (("gaussian", R(4), 1), ("laplace", R(1), 1))
    assert A.parallel_substitute(lap, lap).pld is None
