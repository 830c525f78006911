"""``from dpharness import parts as dp``: mechanisms built from proven parts.

See :mod:`dpharness.mechanisms.parts` for the algebra (transformations, noise measurements,
combinators), its numeric model and the privacy maps ``dpharness.prove`` derives for it."""

from dpharness.mechanisms.parts import *  # noqa: F401,F403 - the curated public surface
from dpharness.mechanisms.parts import __all__  # noqa: F401
