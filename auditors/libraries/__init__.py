"""Ready audit targets for third-party differential-privacy libraries.

Researchers audit implementations they did not write: each target wraps one library's mechanism
as a callable for :func:`dpharness.auditors.audit`, with a default neighbouring pair under the
library's own neighbour relation and the claim read from the library's own parameters or privacy
map. One module per library (:mod:`.opendp`, :mod:`.diffprivlib`, :mod:`.pydp`, :mod:`.pipeline_dp`,
:mod:`.tmlt_core`, :mod:`.opacus`); none imports its library until a target is built, so
:func:`list_targets` works with none of them installed.

>>> from dpharness.auditors.libraries import get_target
>>> t = get_target("opendp:laplace", {"scale": "2.0"})   # doctest: +SKIP
>>> t.audit(samples=100_000).passed                      # doctest: +SKIP
True
"""

from __future__ import annotations

from ._convert import zcdp_to_approx
from ._registry import LibraryTarget, MissingExtra, TargetInfo, TargetMechanism, get_target, list_targets
from . import diffprivlib as _diffprivlib  # noqa: F401  (registers its targets)
from . import opacus as _opacus  # noqa: F401
from . import opendp as _opendp  # noqa: F401
from . import pipeline_dp as _pipeline_dp  # noqa: F401
from . import pydp as _pydp  # noqa: F401
from . import tmlt_core as _tmlt_core  # noqa: F401

__all__ = [
    "get_target",
    "list_targets",
    "LibraryTarget",
    "MissingExtra",
    "TargetInfo",
    "TargetMechanism",
    "zcdp_to_approx",
]
