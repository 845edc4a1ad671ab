"""Quadrotors: the physical parameters (``params.py``), the action spec sized from them
(``actions.py``) and the quadrotor's shield parts (``shield/``: dynamics and stopping model,
limits unit, backup controller). A quadrotor robot (e.g. robot_hrl/robots/crazyflie_2x) is a
:class:`QuadrotorParams` with a package of its own for its values and shield YAML.
"""

from robot_hrl.robots.quadrotor.params import STANDARD_GRAVITY_MPS2, WRENCH_COMMAND_TOPIC, QuadrotorParams
from robot_hrl.robots.quadrotor.actions import TORQUE_AUTHORITY_FRACTION, quadrotor_action_spec

__all__ = ["QuadrotorParams", "STANDARD_GRAVITY_MPS2", "TORQUE_AUTHORITY_FRACTION", "WRENCH_COMMAND_TOPIC",
           "quadrotor_action_spec"]
