"""Speed never buys a change in what is proved or audited: every catalog and gallery mechanism's proof
verdict and bound, and its audit's certified lower bound at a fixed seed (20 000 samples a side, one
worker), equal the reference recorded before the executor was vectorised
(``tests/data/catalog_reference.json``, written by the code of the commit before that work with the
script in this module's ``_reference`` and checked equal on the vectorised code). A mechanism added
later is checked only for having a verdict; update the file deliberately when a change is meant to move
a value, and say why in the commit.

Re-pinned for issue 36 (audits aimed by the structure; certification at the cost of sampling): a
mechanism declared from parts now also trains on the pairs its structure aims at the terms of its bound
(``Mechanism.aimed_pairs``), and an audit with 20 000 or more training samples a side certifies only the
pair its training draws rank best (and the proof's witness pair); below that, as here (2 000 a side),
every pair is still certified. Six audit bounds moved, all of mechanisms declared from parts (the aimed
pairs changed the candidates and the Bonferroni share of each); every proof verdict and bound and every
audit verdict is unchanged, so every gallery case is still caught as it was. The rule for re-pinning: no
bound drops below its pinned value by more than its own confidence width (the certified event's point
estimate minus its bound, on the new run at seed 0):

=================  ==========  ==========  =====
mechanism          pinned      now         width
=================  ==========  ==========  =====
clamped_count      0.94154     0.94140     0.077
clamped_mean       0.90824     0.91311     0.095
clamped_sum        0.94140     0.94154     0.078
noisy_histogram    0.94403     0.94793     0.068
noisy_pearson      0.55059     0.53526     0.188
noisy_std          0.84179     0.87605     0.154
=================  ==========  ==========  =====

Re-pinned again for issue 36 (certification at the cost of sampling): the events of the float-structure
and rounding families are certified only where their multiplicity-shaded training projection beats
every value event's, or in a one-sided slot (an event that ties with the values only widened the
Bonferroni share), and half-lines and intervals are ranked on the sorted outputs (the same counts).
Eighteen audit bounds moved, fourteen of them up; every proof verdict and bound and every audit verdict
is unchanged, so every gallery case is still caught. The four that fell, each by less than its width:

=====================  ==========  ==========  =====
mechanism              pinned      now         width
=====================  ==========  ==========  =====
gaussian               0.19718     0.18608     0.080
median_substitute_bug  1.21306     1.11622     0.211
snapping               0.92356     0.92025     0.069
truncated_geometric    0.96529     0.95986     0.050
=====================  ==========  ==========  =====

Re-pinned for soundness (four verdicts, no audit bound): the catalog's report_noisy_max_laplace,
report_noisy_max_exponential, sparse_vector and numerical_sparse_vector draw numpy's float noise, whose
support is bounded, while their derivations are of continuous noise: PROVED was false about the code
(no finite ε at extreme inputs). They are UNPROVEN now, with that one obligation open, and registered
audit-only; their derived bounds and audit bounds are unchanged.

Re-pinned for soundness (two audit bounds, no verdict): the median (and its gallery twin) sampled with a
float cdf, so a run whose weight underflows had probability 0 on one neighbour and at least 2^-53 on the
other (1494 against 1493 copies of 5 on the 8-bit grid); it now draws the exact law
(``_exact.categorical_counts``), which consumes the random stream differently. median rose from 0 to
0.00319; median_substitute_bug fell from 1.11622 to 1.05993, less than its width 0.110 (point estimate
ln(4512/1400) = 1.170), and is still caught.

Re-pinned for soundness (one verdict, one audit bound): report_noisy_max_exponential now draws
permute-and-flip exactly (``_exact.permute_and_flip``), whose law its proof derives to be the argmax law
of exponential noise, so it is PROVED again about its code; its audit bound fell from 0.91159 to 0.85588,
less than its width 0.121 (point estimate ln(3582/1349) = 0.977).

Re-pinned for reproducibility (two audit bounds, no verdict): the neighbour search's hypothesis draws
mixed in constants hypothesis collects from the local modules the process has loaded, so the same seed
gave other pairs after ``import dpharness.report`` (and in ``dpharness audit`` than in a script); those
constants are now switched off for the search. clamped_sum moved from 0.94236 to 0.94194 (width 0.077)
and clamped_sum_unclamped from 7.93209 to 7.92275 (its certified event has no hits on one side: an
unbounded width); every other value is unchanged.

Re-pinned for soundness (one audit bound, no verdict): snapping drew the exponent of U* with numpy's
geometric(0.5), which never exceeds 53, so its noise stopped at 36.74 λ and the output 38 was impossible
from x = 0 and possible from x = 1 at the defaults (no finite ε while PROVED); U* is now exact
(``_exact.uniform_double``) and B beyond the noise's reach is refused. Its audit bound rose from 0.92025
to 0.92734.

Re-pinned again for reproducibility (thirteen audit bounds, no verdict): the neighbour search draws its
second six random pairs with numpy (boundary-weighted records for vectors and single records, uniform
ones for data sets) instead of hypothesis, which needed a private switch to stay independent of the
loaded modules and could not run inside a @given test. Eight bounds rose; five fell, each by less than
its width: laplace 0.92429 -> 0.92368 (0.066), noisy_histogram 0.94864 -> 0.92952 (0.066), gaussian_rdp
2.15218 -> 2.07317 (0.979), and two gallery cases whose certified event has no hits on one side (an
unbounded width; both still caught): report_noisy_max_value_exponential 6.50874 -> 5.94606, textbook_laplace
7.01373 -> 7.00836. Over 12 seeds the search certifies as much as before (median_substitute_bug 1.16
against 1.10 on average, svt3 0.76 against 0.78).
"""

from __future__ import annotations

import json
import os

import pytest

REFERENCE = os.path.join(os.path.dirname(__file__), "data", "catalog_reference.json")


def _reference(name, cls):
    from dpharness.pipeline import run_audit
    from dpharness.proofs import prove

    m = cls()
    p = prove(m)
    r, _ = run_audit(m, p, samples=20_000, seed=0, workers=1)
    return {
        "verdict": p.verdict.name,
        "bound": repr(float(p.bound)),
        "audit_lower_bound": repr(float(r.epsilon_lower_bound)),
        "audit_passed": bool(r.passed),
    }


with open(REFERENCE) as f:
    _WANT = json.load(f)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_WANT))
def test_catalog_and_gallery_proofs_and_audits_are_unchanged(name):
    from dpharness.registry import catalog

    got = _reference(name, catalog(gallery=None)[name])
    assert got == _WANT[name]
