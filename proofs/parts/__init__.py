"""The proof of a mechanism declared from parts (:mod:`dpharness.mechanisms.parts`), derived by walking
the same step structure its sampler executes (:mod:`._walk`), judged against the claim (:mod:`._prove`).

One module per family, under the same name as its code in :mod:`dpharness.mechanisms.parts`: each
registers, by the node's type, the stability lemma of its transformations and the privacy map of its
measurements (proved once, instantiated at the node's input distance), and imports only the walk
(:mod:`._walk`, its registries and shared lemmas) and its own family's code, never another family:

* :mod:`.transformations`: stability maps for the mechanism's neighbour relation (add/remove,
  substitution, or bounded change of a query vector), checked with z3/sympy on the exact bounds;
* :mod:`.noise`: grid Laplace (normaliser, log-space loss, triangle inequality, grid rounding) and the
  discrete Gaussian (Rényi divergence by completing the square, Canonne, Kamath & Steinke 2020);
* :mod:`.local`: k-ary randomized response, Warner's randomized response, RAPPOR's bit flipping;
* :mod:`.selection`, :mod:`.threshold`, :mod:`.grouping`: the exponential mechanism and report noisy
  max, above threshold, group-by with partition selection and contribution bounding;
* :mod:`.sampling`: amplification by Poisson subsampling;
* :mod:`.combinators`: basic, zCDP/Rényi and advanced composition (Dwork & Roth 2014 Thm 3.20),
  parallel composition (McSherry 2009), repeat and iterate; post-processing (Dwork & Roth 2014 Thm 2.1)
  is read by the walk.

Each node adds named obligations, prefixed by its path in the structure (``compose[1] › count ›
laplace``), so a report shows the derivation as a tree. The accountants (:mod:`dpharness.proofs._account`,
:mod:`dpharness.proofs._pld`) interpret the accounts the walk returns."""

from . import combinators, grouping, local, noise, sampling, selection, threshold, transformations  # noqa: F401 - register
from ._prove import prove, prove_at_distance, prove_composite
from ._walk import _Walk

__all__ = ["prove", "prove_composite", "prove_at_distance", "_Walk"]
