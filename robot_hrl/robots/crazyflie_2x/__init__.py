"""The Bitcraze Crazyflie 2.x: everything the stack knows about this robot lives in this package.

``params.py``: the physical parameters, each with its published source.
"""

from robot_hrl.robots.crazyflie_2x.params import CRAZYFLIE_2X

__all__ = ["CRAZYFLIE_2X"]
