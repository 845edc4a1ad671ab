"""The Bitcraze Crazyflie 2.x: everything the stack knows about this robot lives in this package.

``params.py``: the physical parameters, each with its published source (a
:class:`robot_hrl.robots.quadrotor.QuadrotorParams`, which answers the robot protocol).
``shield.yaml``: the shield's units and limits for this robot.
"""

from robot_hrl.robots.crazyflie_2x.params import CRAZYFLIE_2X

ROBOT = CRAZYFLIE_2X
"""Registered by robot_hrl.robots under ``crazyflie_2x``."""

__all__ = ["CRAZYFLIE_2X", "ROBOT"]
