"""Robot models. Add a robot by adding a module and registering it here."""

from robot_hrl.robots.crazyflie_2x import CRAZYFLIE_2X
from robot_hrl.robots.quadrotor import STANDARD_GRAVITY_MPS2, QuadrotorParams

ROBOTS: dict[str, QuadrotorParams] = {CRAZYFLIE_2X.name: CRAZYFLIE_2X}


def get_robot(name: str) -> QuadrotorParams:
    """Return the registered robot model called ``name``."""
    try:
        return ROBOTS[name]
    except KeyError:
        raise KeyError(
            f"unknown robot {name!r}; known robots: {sorted(ROBOTS)}. "
            "Register a new airframe in robot_hrl/robots/__init__.py."
        ) from None


__all__ = ["CRAZYFLIE_2X", "QuadrotorParams", "ROBOTS", "STANDARD_GRAVITY_MPS2", "get_robot"]
