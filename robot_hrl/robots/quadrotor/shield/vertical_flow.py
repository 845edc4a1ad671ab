"""The backup's vertical flow, simulated forward: how low the robot goes if the tick's command flies one tick and the
backup then holds (the take-off's check of the altitude unit, ``altitude.climb_into_band``).

The stopping box bounds a descent with a reaction time and the sum of two peaks (the backup's linear stop from the
handover, its hold's sag on the weakest airframe): sound, but blind to timing. A decelerating command during a climb
has its push counted as if the robot stood still at the handover, so below the altitude band (where the rule is that
the robot may not sink) every command that slows a take-off was clamped to the motors' thrust: 3.2 % of a whole
mission's ticks (benchmarks/README.md, "Issue #16: the take-off, simulated forward").

This module integrates instead, tick by tick, the one-dimensional vertical motion the backup would fly:

* the **command judged now** goes out for one tick (its successor is judged again next tick: the simplex pattern's
  one-step argument); the **backup** takes over from the next tick, its integral reset, holding the target it would
  set there (the shield's ``safe_position``: the height at the takeover, brought into the band ``hold_inset_m`` in;
  no higher than the subgoal, toward which a hold creeps);
* its **vertical law** is the backup's own (:func:`robot_hrl.robots.quadrotor.shield.backup.vertical_accel`, the one
  home of it), with its speed limit, thrust range on the measured battery and feed-forward mass;
* the **motors**: the commands delayed by the actuation latency, then a first-order lag of the rotor speed (thrust
  ~ speed^2) with the slowest motor designed for (``stopping.motor_time_constant_s``), from the thrust the shield
  estimates they produce now;
* the **airframe**: the weakest the model allows now (``weak_fraction``: before the hover-thrust estimate converges,
  the randomization's heaviest airframe with its weakest rotors), the thrust along the worst of the body z axis now,
  once the body rates are stopped, and once the rates the torque in the motors still adds are stopped too
  (``DynamicsModel.flow_axis``), kept there; the backup's collective thrust is its desired thrust vector projected on
  the body z axis, so its vertical part is counted at the least cosine between the two (that tilt plus the tilt the
  backup asks for to brake the horizontal speed), kept too;
* the **ground effect**: a share (``stopping.flow_ground_effect_fraction``) of the model's gain
  (robot_hrl/robots/quadrotor/ground_effect.py, the one PyBullet flies), at the body's height.

The altitude unit (robot_hrl/safety/units/envelope.py) passes a command whose stopping box breaks the band's floor
when the flow's lowest height keeps the band; and, with ``climb_into_band``, below the band or within the hold's sag
above it when the flow stays off the floor (above ``rest_height_m``); or when it goes no lower than the lower of the
height now and the flow of the backup taking over now, where that flow does not keep the band either (while climbing
only, where the command's flow reaches the floor). Each is a statement about the flow from the next tick, which is the
one just judged: if the command passes at tick k, the flow from tick k + 1 keeps what was asked at tick k (the
backup-set argument of T. Gurriet et al., "A scalable safety critical control framework for nonlinear systems", IEEE
Access 8, 2020, in one dimension; docs/safety.md, "The backup's vertical flow"). The ceiling likewise, on the flow from
above (``highest``: ``DynamicsModel.backup_flow_highest``, the strongest airframe, the thrust counted straight up).

What it does not model (docs/safety.md, "The backup's vertical flow"): the horizontal position error a hold builds up
(its creep toward a subgoal, a drift: the tilt it asks for is counted from the speed now only), motors between the
slowest and the fastest designed for (the model takes the lower of the two), and any vertical disturbance beyond the
one the weak bound is derated for (none before the hover-thrust estimate converges). ``tests/test_vertical_flow.py`` flies the real backup on PyBullet's randomized
airframes against it.
"""

from __future__ import annotations

import math

from robot_hrl.robots.quadrotor.shield.backup import vertical_accel

FLOW_HORIZON_S = 2.0
"""How far ahead the flow is integrated: the weakest airframe's hold sags for about a second before its integral
catches up (:func:`robot_hrl.robots.quadrotor.shield.model.backup_hold_sag_m` peaks within 1.5 s)."""


def backup_flow_extreme_m(z: float, vz: float, cz: float, align: float, motor_thrust_n: float, queued_n: tuple,
                         first_n: float | None, accel_per_n: float, ff_mass: float, thrust_lo_n: float, thrust_hi_n: float,
                         g: float, kp: float, kv: float, ki: float, i_max: float, max_speed: float, alpha: float, dt: float,
                         target_lo: float, target_hi: float, target_cap: float, ground_k_m2: float = 0.0,
                         ground_clip_m: float = 0.0, floor_z: float = 0.0, horizon_s: float = FLOW_HORIZON_S,
                         highest: bool = False) -> float:
    """The lowest height (m) of the vertical flow: ``first_n`` (N; None: the backup from now) for one tick, then the
    backup holding ``clip(min(height at the takeover, target_cap), target_lo, target_hi)``; with ``highest``, the
    highest height, the hold at ``clip(max(height at the takeover, target_cap), target_lo, target_hi)`` (a hold creeps
    toward its subgoal: ``target_cap`` its height).

    ``z``, ``vz``: height and vertical speed now (m, m/s, up); ``cz``: the thrust axis' vertical component (kept);
    ``align``: the least cosine between the backup's desired thrust vector and the body z axis (its collective thrust is
    that vector projected on the body z: ``ff_mass (a_z + g) align`` at least);
    ``motor_thrust_n``: the motors' thrust now; ``queued_n``: the commands already sent that reach the motors first
    (the latency, oldest first); ``accel_per_n``: the airframe's acceleration per newton along the thrust axis;
    ``ff_mass``: the backup's feed-forward mass; ``thrust_lo_n``, ``thrust_hi_n``: the backup's thrust range; ``kp``,
    ``kv``, ``ki``, ``i_max``, ``max_speed``: its vertical law; ``alpha``: the motor lag's gain per tick (rotor speed);
    ``dt``: the control period; ``ground_k_m2``, ``ground_clip_m``, ``floor_z``: the ground effect the flow counts on,
    a thrust gain ``1 + ground_k_m2 / h^2`` at the height ``h`` above ``floor_z`` (no lower than ``ground_clip_m``; 0:
    none). The thrust over a tick is the mean of the rotor speed's squares at its two ends; the height's minimum inside
    a tick is counted (the parabola's vertex)."""
    queue = list(queued_n)
    s = math.sqrt(motor_thrust_n) if motor_thrust_n > 0.0 else 0.0
    sign = -1.0 if highest else 1.0  # (the extreme is tracked as the lowest of sign * height)
    lowest = sign * z
    integral = 0.0
    ki_dt = ki * dt
    az_lo = thrust_lo_n / ff_mass - g
    az_hi = thrust_hi_n / ff_mass - g
    target = 0.0
    takeover = 0 if first_n is None else 1  # the tick the backup takes over (now, or after the judged command's)
    n = int(round(horizon_s / dt))
    for k in range(n):
        if k < takeover:
            out = first_n
        else:
            if k == takeover:  # the hold target is set from the height there
                target = max(z, target_cap) if highest else min(z, target_cap)
                target = target_lo if target < target_lo else target_hi if target > target_hi else target
            vr = kp * (target - z)
            vr = max_speed if vr > max_speed else -max_speed if vr < -max_speed else vr
            az, integral = vertical_accel(kv, ki_dt, i_max, vr - vz, integral, az_lo, az_hi)
            out = ff_mass * (az + g) * align
            out = thrust_lo_n if out < thrust_lo_n else thrust_hi_n if out > thrust_hi_n else out
        queue.append(out)
        applied = queue[k]
        s1 = s + alpha * ((math.sqrt(applied) if applied > 0.0 else 0.0) - s)
        gain = 1.0
        if ground_k_m2 > 0.0:
            h = z - floor_z
            gain += ground_k_m2 / (h * h if h > ground_clip_m else ground_clip_m * ground_clip_m)
        a = accel_per_n * 0.5 * (s * s + s1 * s1) * gain * cz - g
        s = s1
        z1 = z + vz * dt + 0.5 * a * dt * dt
        v1 = vz + a * dt
        if (vz < 0.0 < v1) if sign > 0.0 else (v1 < 0.0 < vz):  # turned around inside the tick: its vertex
            zv = sign * (z - vz * vz / (2.0 * a))
            if zv < lowest:
                lowest = zv
        z, vz = z1, v1
        if sign * z < lowest:
            lowest = sign * z
    return sign * lowest
