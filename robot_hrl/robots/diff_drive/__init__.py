"""A minimal differential-drive robot (the ROBOTIS TurtleBot3 Burger's numbers): everything the stack
knows about it lives in this package.

``params.py``: its parameters and the robot protocol (body-velocity commands on ``/cmd_vel``).
``observations.py``: its observation terms. ``contract.py``: its go-to contract.
``shield.py``: its shield family (stopping model, velocity limits and stop-zone units, backup: stop).
``shield.yaml``: its shield's units and limits.
"""

from robot_hrl.robots.diff_drive.params import DIFF_DRIVE, DiffDriveParams

ROBOT = DIFF_DRIVE
"""Registered by robot_hrl.robots under ``diff_drive``."""

__all__ = ["DIFF_DRIVE", "DiffDriveParams", "ROBOT"]
