"""A subnormal budget raised OverflowError (a traceback, not a ParameterError naming the argument):
dp.laplace(epsilon=1e-320) (its scale a Fraction beyond the doubles: float() of it in the calibration's
_plain) and dp.gaussian(rho=1e-320) (σ² beyond the doubles in _sigma_for_rho). epsilon=5e-324 (a power of
two) was already refused with ParameterError.

Run: python redteam/r3_subnormal_budget_overflow.py
"""

from dpharness import AddRemove, PureDP, RealInterval
from dpharness import parts as dp

for noise in (lambda: dp.laplace(epsilon=1e-320), lambda: dp.gaussian(rho=1e-320), lambda: dp.laplace(epsilon=5e-324)):
    try:
        dp.mechanism(
            name="c", records=RealInterval(0, 1), relation=AddRemove(), steps=dp.count() >> noise(), claim=PureDP(1)
        )
    except Exception as exc:  # noqa: BLE001
        print(type(exc).__name__, str(exc)[:120])
