"""Is a model's contract physically plausible for the robot it is started on?

:meth:`PolicyContract.mismatches` checks that a contract names the robot and fits its action range (a
model may command less than the robot can do, never more: a thrust x10 or a torque x100 is refused
there). This module checks the rest of what an edited contract could change silently (issue #16):

* observation clip ranges, by the term's units: ``1`` (normalized, rotation entries) within [-1, 1];
  ``m`` (a subgoal error) at least the subgoal radius (the policy must see the subgoal) and at most
  ``MAX_ERROR_CLIP_RADII`` radii; ``m/s`` within ``MAX_VELOCITY_CLIP_FACTOR`` x the robot's speed limit;
  ``rad/s`` within ``MAX_BODY_RATE_RADPS`` (the gyro's range);
* the control rate, within [``MIN_CONTROL_RATE_HZ``, ``MAX_CONTROL_RATE_HZ``] (a node also checks it
  against its shield's ``control_rate_hz``);
* the subgoal radius (where the contract has one): within the error clip, and no more than
  ``SUBGOAL_HORIZON_S`` of travel at the robot's speed limit.

A robot the contract describes itself (``robot.kind == "articulation"``, Isaac Lab tasks) has no robot
model here to judge against: nothing is checked for it.

Each problem names the field, the value and the bound.
"""

from __future__ import annotations

import math

MAX_BODY_RATE_RADPS = math.radians(2000.0) * 1.01
"""The Crazyflie 2.x gyro's full range, 2000 deg/s (Bosch BMI088 datasheet, the gyro of the Crazyflie 2.1;
crazyflie-firmware sensors_bmi088: BMI088_GYRO_RANGE_2000_DPS), plus 1 % for rounding (the shipped clip is 35 rad/s)."""
MAX_VELOCITY_CLIP_FACTOR = 3.0
"""A velocity clip may reach this many times the robot's speed limit (falls and overshoots), no more."""
MAX_ERROR_CLIP_RADII = 4.0
"""A position-error clip may reach this many subgoal radii (the shield keeps subgoals within one radius)."""
MIN_CONTROL_RATE_HZ = 20.0
MAX_CONTROL_RATE_HZ = 1000.0
"""The control rates a skill may run at (the stack's robots: 20 Hz differential drive, 100 Hz Crazyflie;
the Crazyflie's stabilizer loop runs at 1000 Hz, crazyflie-firmware src/modules/interface/stabilizer_types.h
RATE_MAIN_LOOP)."""
SUBGOAL_HORIZON_S = 5.0
"""A subgoal radius beyond this much travel at the robot's speed limit is implausible (10 m for the Crazyflie, 1.1 m for the
TurtleBot3 Burger)."""


def plausibility_problems(contract, robot, shield_control_rate_hz: float | None = None) -> list[str]:
    """Every implausible value of ``contract`` for ``robot`` (empty: plausible)."""
    problems: list[str] = []
    if getattr(contract.robot, "kind", None) == "articulation":
        return problems  # a robot the contract describes (Isaac Lab): no robot model to judge it against
    radius = None if contract.subgoal_radius_m is None else float(contract.subgoal_radius_m)
    speed = float(getattr(robot, "max_speed_mps", 0.0) or 0.0)
    error_clip = 0.0
    for term in contract.observations:
        lo, hi = (float(v) for v in term.clip)
        span = max(abs(lo), abs(hi))
        where = f"observation {term.name!r} clip [{lo:g}, {hi:g}] {term.units}"
        if term.units == "1" and span > 1.0 + 1e-9:
            problems.append(f"{where}: a normalized term lies within [-1, 1]")
        elif term.units == "m":
            error_clip = max(error_clip, span)
            if radius is not None and span > MAX_ERROR_CLIP_RADII * radius:
                problems.append(f"{where}: beyond {MAX_ERROR_CLIP_RADII:g} subgoal radii ({MAX_ERROR_CLIP_RADII * radius:g} m); "
                                "the policy never sees such errors")
        elif term.units == "m/s" and speed > 0 and span > MAX_VELOCITY_CLIP_FACTOR * speed:
            problems.append(f"{where}: beyond {MAX_VELOCITY_CLIP_FACTOR:g} x the robot's speed limit {speed:g} m/s")
        elif term.units == "rad/s" and span > MAX_BODY_RATE_RADPS:
            problems.append(f"{where}: beyond the gyro's range, {MAX_BODY_RATE_RADPS:.1f} rad/s (2000 deg/s)")
    rate = float(contract.control_rate_hz)
    if not MIN_CONTROL_RATE_HZ <= rate <= MAX_CONTROL_RATE_HZ:
        problems.append(f"control rate {rate:g} Hz: outside [{MIN_CONTROL_RATE_HZ:g}, {MAX_CONTROL_RATE_HZ:g}] Hz")
    if shield_control_rate_hz is not None and abs(rate - float(shield_control_rate_hz)) > 1e-9:
        problems.append(f"control rate {rate:g} Hz: the robot's shield is designed for {float(shield_control_rate_hz):g} Hz "
                        "(its control_rate_hz); its stopping model and limits assume that period")
    if radius is None:
        return problems
    if error_clip > 0 and radius > error_clip + 1e-9:
        problems.append(f"subgoal radius {radius:g} m: beyond the subgoal-error clip {error_clip:g} m (the policy could not see the subgoal)")
    if speed > 0 and radius > SUBGOAL_HORIZON_S * speed:
        problems.append(f"subgoal radius {radius:g} m: more than {SUBGOAL_HORIZON_S:g} s of flight at the robot's speed "
                        f"limit {speed:g} m/s ({SUBGOAL_HORIZON_S * speed:g} m)")
    return problems
