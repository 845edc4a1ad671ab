"""Prior knowledge of the dynamics the shield units use: plain floats, no allocation.

* :class:`DynamicsModel`: the rigid-body constants of the robot (robot_hrl.robots), the action
  mapping of the contract, and the decelerations the backup controller can brake with.
* :meth:`DynamicsModel.stopping_distance`: how far the robot travels toward a wall before it
  stands still, if the current command acts for the reaction time and the backup then brakes.
* :class:`StatePredictor`: dead reckoning of the state from the commanded wrench, used by the
  backup controller while the odometry is stale.

The stopping model along one direction n (speed v = v.n, acceleration a = a.n):

    reaction (the command keeps acting):  s_r = max(0, v t_r + a t_r^2 / 2),  v_1 = max(0, v + a t_r)
    braking (the backup at deceleration b): s_b = v_1 * |v_1_vec| / (2 b)
    stopping distance d = s_r + s_b

``|v_1_vec|`` is the speed in the braking plane: braking along the velocity vector, the travel
along n is the straight-line stopping distance projected on n. ``b`` is the deceleration the
backup reaches at its tilt limit (horizontal), with its thrust range (vertical), times
``brake_decel_fraction``; ``t_r`` is ``stopping.reaction_time_s`` horizontally (a tick, the
motor lag and the attitude swing) and for stopping a descent, and
``stopping.vertical_reaction_time_s`` for stopping a climb (a tick and the motor lag: less
thrust brakes a climb at any attitude).
"""

from __future__ import annotations

import math

from robot_hrl.contract.actions import action_bounds, goto_action_spec
from robot_hrl.robots.quadrotor import STANDARD_GRAVITY_MPS2, QuadrotorParams


class DynamicsModel:
    """Robot constants as floats, and the braking capability of the backup controller."""

    def __init__(self, robot: QuadrotorParams, cfg, control_rate_hz: float):
        self.robot = robot
        self.g = STANDARD_GRAVITY_MPS2
        self.mass = robot.mass_kg
        self.weight = robot.weight_n
        self.inertia = tuple(float(v) for v in robot.inertia_kgm2)
        self.dt = 1.0 / control_rate_hz
        self.motor_tau = robot.motor_time_constant_s
        """The robot model's motor time constant, s (dead reckoning: the best estimate)."""
        self.design_motor_tau = cfg.stopping.motor_time_constant_s
        """The motor time constant the safety predictions assume (the slowest motor designed for), s."""
        self.latency = cfg.stopping.actuation_latency_s
        self.spec = goto_action_spec(robot)
        low, high = action_bounds(self.spec)
        self.low = tuple(float(v) for v in low)
        self.high = tuple(float(v) for v in high)
        self.half_span = tuple((h - lo) / 2.0 for lo, h in zip(self.low, self.high))
        self.max_total_thrust = robot.max_total_thrust_n
        self.reaction_time = cfg.stopping.reaction_time_s
        self.vertical_reaction_time = cfg.stopping.vertical_reaction_time_s
        self.tilt_lag = self.design_motor_tau + self.dt + self.latency
        """Time before a new torque command takes effect (design motor lag + one tick + latency), s."""
        self.tilt_alpha = 0.5 * self.high[1] / max(self.inertia[0], self.inertia[1])
        """Angular deceleration (roll/pitch) with half the torque range, rad/s^2."""
        frac = cfg.stopping.brake_decel_fraction
        tilt = math.radians(cfg.backup.max_tilt_deg)
        backup_max_thrust = cfg.backup.max_thrust_fraction_of_max * self.max_total_thrust
        backup_min_thrust = cfg.backup.min_thrust_fraction_of_weight * self.weight
        # horizontal: thrust tilted by the backup's tilt limit while holding altitude
        self.brake_horizontal = frac * self.g * math.tan(tilt)
        # stopping a descent: the most upward acceleration the backup commands, with the weakest
        # robot designed for (thrust_fraction: heavier and weaker motors than the model)
        weak = cfg.stopping.thrust_fraction
        self.brake_up = frac * (weak * backup_max_thrust * math.cos(tilt) / self.mass - self.g)
        # stopping a climb: thrust down to the backup's minimum
        self.brake_down = frac * (self.g - backup_min_thrust / self.mass)
        if self.brake_up <= 0.0:
            from robot_hrl.errors import ConfigError

            raise ConfigError(
                f"the backup cannot stop a descent: max thrust {backup_max_thrust:.3f} N at {cfg.backup.max_tilt_deg} deg "
                f"does not lift {self.weight:.3f} N; raise backup.max_thrust_fraction_of_max or lower backup.max_tilt_deg"
            )

    # ---- action mapping (floats) ----------------------------------------------------------
    def actions_to_wrench(self, a0: float, a1: float, a2: float, a3: float) -> list[float]:
        lo, hs = self.low, self.half_span
        return [lo[0] + (a0 + 1.0) * hs[0], lo[1] + (a1 + 1.0) * hs[1], lo[2] + (a2 + 1.0) * hs[2], lo[3] + (a3 + 1.0) * hs[3]]

    def wrench_to_action(self, i: int, w: float) -> float:
        return (w - self.low[i]) / self.half_span[i] - 1.0

    # ---- stopping distance ----------------------------------------------------------------
    def stopping_distance(self, v: float, a: float, speed_plane: float, brake: float, t: float | None = None) -> float:
        """Travel along a direction with speed ``v`` and acceleration ``a`` (both along it)
        before standing still; ``speed_plane`` is the speed in the braking plane after the
        reaction time ``t`` (default: the horizontal one) (>= |v_1|), ``brake`` the
        deceleration available in that plane."""
        if t is None:
            t = self.reaction_time
        s_r = v * t + 0.5 * a * t * t
        if s_r < 0.0:
            s_r = 0.0
        v1 = v + a * t
        if v1 <= 0.0:
            return s_r
        if speed_plane < v1:
            speed_plane = v1
        return s_r + v1 * speed_plane / (2.0 * brake)


def stopping_box(m: DynamicsModel, p, v, r, w, thrust_a: float, thrust_b: float) -> tuple:
    """(x0, x1, y0, y1, z0, z1, z1c): the box the robot stays in until it stands still.

    Braking a climb only needs less thrust, which works at any attitude: z1 uses the short
    vertical reaction time. Braking a descent needs the thrust pointed up again (an attitude
    recovery first, after a tilting command): z0 uses the full reaction time. z1c is the
    climb extent with the full reaction time, the conservative top for the obstacle boxes.

    The thrust lies between ``thrust_a`` and ``thrust_b`` (N) during the reaction time, along
    the body z axis now or the one reached once the body rates are stopped (motor lag, then
    ``m.tilt_alpha``); every coordinate takes its worst case. Then the backup brakes
    (:meth:`DynamicsModel.stopping_distance`).
    """
    strong, weak = (thrust_a, thrust_b) if thrust_a > thrust_b else (thrust_b, thrust_a)
    strong /= m.mass
    weak /= m.mass
    w0, w1 = w[0], w[1]
    tp = m.tilt_lag + math.sqrt(w0 * w0 + w1 * w1) / (2.0 * m.tilt_alpha)
    c = (r[2], r[5], r[8])
    qx = r[2] + tp * (w1 * r[0] - w0 * r[1])
    qy = r[5] + tp * (w1 * r[3] - w0 * r[4])
    qz = r[8] + tp * (w1 * r[6] - w0 * r[7])
    n = math.sqrt(qx * qx + qy * qy + qz * qz)
    d = (qx / n, qy / n, qz / n)
    lo = [0.0, 0.0, 0.0]
    hi = [0.0, 0.0, 0.0]
    for i in range(3):
        a, b = c[i], d[i]
        a_hi = strong * a if a > 0 else weak * a
        a_lo = weak * a if a > 0 else strong * a
        b_hi = strong * b if b > 0 else weak * b
        b_lo = weak * b if b > 0 else strong * b
        hi[i] = a_hi if a_hi > b_hi else b_hi
        lo[i] = a_lo if a_lo < b_lo else b_lo
    hi[2] -= m.g
    lo[2] -= m.g
    t = m.reaction_time
    ax = hi[0] if hi[0] > -lo[0] else -lo[0]
    ay = hi[1] if hi[1] > -lo[1] else -lo[1]
    v1x = abs(v[0]) + ax * t
    v1y = abs(v[1]) + ay * t
    plane = math.sqrt(v1x * v1x + v1y * v1y)
    sd = m.stopping_distance
    bh = m.brake_horizontal
    tv = m.vertical_reaction_time
    return (
        p[0] - sd(-v[0], -lo[0], plane, bh), p[0] + sd(v[0], hi[0], plane, bh),
        p[1] - sd(-v[1], -lo[1], plane, bh), p[1] + sd(v[1], hi[1], plane, bh),
        p[2] - sd(-v[2], -lo[2], 0.0, m.brake_up, t), p[2] + sd(v[2], hi[2], 0.0, m.brake_down, tv),
        p[2] + sd(v[2], hi[2], 0.0, m.brake_down, t),
    )


class StatePredictor:
    """Dead reckoning: integrates the rigid body under the commanded wrench (motor lag included).

    Holds position, velocity, quaternion (w, x, y, z), body rate and the lagged thrust and
    torques, all floats. ``reset`` from a measured state, ``step`` by one control period.
    """

    def __init__(self, model: DynamicsModel):
        self.m = model
        self.p = [0.0, 0.0, 0.0]
        self.v = [0.0, 0.0, 0.0]
        self.q = [1.0, 0.0, 0.0, 0.0]
        self.w = [0.0, 0.0, 0.0]
        self.wrench = [model.weight, 0.0, 0.0, 0.0]
        self.valid = False

    def reset(self, p, v, q, w, wrench) -> None:
        self.p = [float(p[0]), float(p[1]), float(p[2])]
        self.v = [float(v[0]), float(v[1]), float(v[2])]
        self.q = [float(q[0]), float(q[1]), float(q[2]), float(q[3])]
        self.w = [float(w[0]), float(w[1]), float(w[2])]
        self.wrench = list(wrench)
        self.valid = True

    def step(self, command) -> None:
        m = self.m
        dt = m.dt
        k = dt / (m.motor_tau + dt)
        wr = self.wrench
        for i in range(4):
            wr[i] += (command[i] - wr[i]) * k
        qw, qx, qy, qz = self.q
        # body z axis in the world (third column of R)
        zx = 2 * (qx * qz + qw * qy)
        zy = 2 * (qy * qz - qw * qx)
        zz = 1 - 2 * (qx * qx + qy * qy)
        acc = wr[0] / m.mass
        v = self.v
        v[0] += acc * zx * dt
        v[1] += acc * zy * dt
        v[2] += (acc * zz - m.g) * dt
        p = self.p
        p[0] += v[0] * dt
        p[1] += v[1] * dt
        p[2] += v[2] * dt
        jx, jy, jz = m.inertia
        w = self.w
        wx, wy, wz = w
        w[0] += (wr[1] - (jz - jy) * wy * wz) / jx * dt
        w[1] += (wr[2] - (jx - jz) * wz * wx) / jy * dt
        w[2] += (wr[3] - (jy - jx) * wx * wy) / jz * dt
        wx, wy, wz = w
        h = 0.5 * dt
        nq = (
            qw - h * (qx * wx + qy * wy + qz * wz),
            qx + h * (qw * wx + qy * wz - qz * wy),
            qy + h * (qw * wy + qz * wx - qx * wz),
            qz + h * (qw * wz + qx * wy - qy * wx),
        )
        n = math.sqrt(nq[0] ** 2 + nq[1] ** 2 + nq[2] ** 2 + nq[3] ** 2)
        self.q = [nq[0] / n, nq[1] / n, nq[2] / n, nq[3] / n]


def rotation_from_quat(qw: float, qx: float, qy: float, qz: float) -> tuple:
    """Body-to-world rotation matrix, row-major, as 9 floats."""
    return (
        1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qw * qz), 2 * (qx * qz + qw * qy),
        2 * (qx * qy + qw * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qw * qx),
        2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy),
    )
