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


class ApproachModel(Protocol):
    """What a direction-aware obstacle unit (``range_obstacles``) asks a stopping model that offers it (optional:
    :func:`travel_along` falls back to the stopping box)."""

    def approach_travel_m(self, tick: Tick, n) -> float:
        """How far the robot travels along the unit world direction ``n`` before it stands still under the tick's
        command (the command for the reaction time, then the backup's braking); 0 when it moves away."""


def travel_along(model: StoppingModel, tick: Tick, n) -> float:
    """How far the robot can travel along the unit world direction ``n`` before it stands still (>= 0): the
    model's own ``approach_travel_m`` where it has one (:class:`ApproachModel`: the quadrotor's), else the support
    of the tick's stopping box in that direction (a box holds every point the robot can reach, so its farthest
    corner along ``n`` bounds the travel: looser, never smaller)."""
    own = getattr(model, "approach_travel_m", None)
    if own is not None:
        t = own(tick, n)
        return t if t > 0.0 else 0.0
    x0, x1, y0, y1, z0, z1, _ = tick_stopping_box(model, tick)
    p = tick.p
    t = (max(n[0] * (x0 - p[0]), n[0] * (x1 - p[0])) + max(n[1] * (y0 - p[1]), n[1] * (y1 - p[1]))
         + max(n[2] * (z0 - p[2]), n[2] * (z1 - p[2])))
    return t if t > 0.0 else 0.0


def clamp_thrust_or_reject(unit, model: StoppingModel, tick: Tick, enabled: bool, fits, constraint: str,
                           detail: str) -> None:
    """The tick's stopping box breaks ``unit``'s ``constraint``: where ``enabled`` and the model offers ``clamp_thrust``,
    move the command's collective thrust toward the motors' until the box ``fits`` (a predicate on a box) and record
    the change; on the policy's first ticks after a hand-back (``tick.handback``), where no thrust fits, its roll and pitch
    torques moved toward the motors' (the model's ``clamp_handback_torque``); otherwise hand the tick to the backup
    (docs/safety.md, "The thrust clamp")."""
    clamp = getattr(model, "clamp_thrust", None) if enabled else None
    clamped = clamp(tick, fits) if clamp is not None else None
    if clamped is None and tick.handback:  # the policy just handed control back: its torque step scaled down
        clamp = getattr(model, "clamp_handback_torque", None)
        clamped = clamp(tick, fits) if clamp is not None else None
    if clamped is None:
        tick.reject(unit, constraint, detail)
        return
    before = tuple(tick.cmd)
    tick.cmd[:] = clamped[0]
    tick.record(unit, constraint, before, tuple(tick.cmd), detail=f"{clamped[1]}: {detail}")


def tick_stopping_box(model: StoppingModel, tick: Tick) -> tuple:
    """The tick's stopping box, computed once per tick and shared by the envelope units."""
    box = tick.stop_box
    if box is None:
        box = model.stopping_box(tick)
        tick.stop_box = box
    return box
