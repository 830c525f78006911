"""A noise scale beyond the doubles raised OverflowError (not the ParameterError naming the argument) from
the constructor: the refusal of a scale above 2**45 grid steps took float() of the exact scale for its
message. Prints what each construction raises."""

import dpharness
from dpharness import AddRemove, PureDP, RealInterval, parts as dp

for build in (
    lambda: dp.laplace(scale=10**400),
    lambda: dp.mechanism(
        name="count",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.count() >> dp.laplace(epsilon=5e-324),
        claim=PureDP(1),
    ),
):
    try:
        build()
    except Exception as e:  # noqa: BLE001 - the evidence
        print(f"{type(e).__name__}: {str(e)[:160]}")
print(dpharness.__name__, "done")
