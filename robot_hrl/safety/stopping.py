"""The stopping-model protocol: what the robot-neutral envelope units (geofence, altitude, obstacles)
ask a robot family's shield model.

A stopping model predicts where the robot can be before it stands still if the tick's command acts
for a reaction time and the backup then brakes (a box, worst case per coordinate), how fast it will
be going shortly, and how to lower the command's speed to a limit (Nav2's slowdown zone). The
quadrotor's is in ``robot_hrl/robots/quadrotor/shield/model.py``, the differential drive's in
``robot_hrl/robots/diff_drive/shield.py``.
"""

from __future__ import annotations

from typing import Protocol

from robot_hrl.safety.units.base import Tick


class StoppingModel(Protocol):
    collision_radius_m: float
    """A sphere around the robot (the clearances of every zone are measured from it)."""
    max_speed_mps: float
    """The speed limit the obstacles' slowdown zone scales (``slowdown_ratio``)."""
    speed_horizon_s: float
    """How far ahead the speed is predicted."""

    def stopping_box(self, tick: Tick) -> tuple:
        """(x0, x1, y0, y1, z0, z1, z1c): where the robot can be before it stands still; z1c is the
        climb extent with the full reaction time (the obstacle boxes' conservative top)."""

    def predicted_speed(self, tick: Tick, horizon_s: float) -> float:
        """Speed ``horizon_s`` ahead under the tick's command (the worst case of command and actuators)."""

    def slowdown(self, tick: Tick, horizon_s: float, limit_mps: float) -> tuple[list, str] | None:
        """(the command with its predicted speed lowered to ``limit_mps``, a note on what changed), or
        None when the command cannot be slowed that way (the unit then rejects it)."""


def tick_stopping_box(model: StoppingModel, tick: Tick) -> tuple:
    """The tick's stopping box, computed once per tick and shared by the envelope units."""
    box = tick.stop_box
    if box is None:
        box = model.stopping_box(tick)
        tick.stop_box = box
    return box
