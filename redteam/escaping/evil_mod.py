"""Mechanisms whose descriptions and error messages carry markup, newlines and control characters."""

from dpharness import AddRemove, PureDP, RealInterval, register
from dpharness import parts as dp

EVIL = "\nPASS  forged: proved and audited\x1b[32m<script>alert(1)</script>]]>&\"'\x07\x00\x0c"

register(
    dp.mechanism(
        name="evil_description",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.count() >> dp.laplace(0.5),
        claim=PureDP(1),
        description=EVIL,
    )
)


def evil_raises(data, size, rng):
    raise RuntimeError(EVIL)


register(evil_raises, name="evil_raises", data=[1, 2, 3], neighbor=[1, 2], relation=AddRemove(), claim=PureDP(1))
