"""The backup controller: hold a position, or land, with a cascaded PD controller.

position error --P--> velocity reference (speed-limited) --P (+ bounded I on z)--> acceleration (tilt-limited)
--> thrust vector --> collective thrust + desired attitude --PD with a rate lead (geometric, Lee et
al. 2010)--> body torques. Its output is the same command the policy produces: collective thrust (N) and
body torques (N m), and the matching normalized actions. It is what the shield falls back to
when the policy's command cannot be made safe (the simplex pattern).

The small, bounded integral on the vertical velocity error removes the steady sag that a PD
alone leaves when the mass or the thrust coefficient differ from the model.

The attitude loop damps the body rate predicted ``rate_lead_s`` ahead, ``w + T dw/dt`` (dw/dt:
the change of the measured rate over the last tick), rather than the rate itself: a lead
against the motor lag and a step of actuation latency. Its gains are chosen for the whole
motor time-constant range the training randomizes (0.02-0.15 s, with 0-1 step of latency;
docs/safety.md): without the lead, an attitude gain that is fast with the nominal 0.05 s
motors oscillates with 0.09-0.15 s ones, and one that is stable with those brakes too slowly.
Plain floats throughout: one call costs a few microseconds. Call it once per control tick.

**A spin first** (``backup.spin_yaw_rate_dps``). Above that yaw rate the yaw torque may use the whole range, not
``yaw_torque_fraction`` of it. A heading loop above the skill can leave the robot spinning at 250-320 deg/s when a hold
begins (its last torques still in slow motors). At that rate the roll/pitch torques the attitude loop asks for are
realized a motor lag later, by then turned with the body (about ``atan(r tau)``: 40 degrees at 5.5 rad/s and a 0.15 s
motor), and the loop went unstable: tilt 60-90 degrees, the robot on the floor from 1.3 m, twice in 900 held-out
flights (benchmarks/README.md, "Issue #19: a spin first"). With ``yaw_torque_fraction`` (0.3) the brake takes over a
second at those rates; with the whole range a third of that, and the attitude loop held.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the model imports the vertical law from here: robot_hrl/robots/quadrotor/shield/vertical_flow.py)
    from robot_hrl.robots.quadrotor.shield.model import DynamicsModel


def vertical_accel(kv: float, ki_dt: float, i_max: float, ez: float, integral: float, az_lo: float,
                   az_hi: float) -> tuple[float, float]:
    """The backup's vertical acceleration command and its new integral, from the vertical velocity error ``ez``
    (m/s): ``kv ez + i``, the integral ``i += ki dt ez`` bounded at ``i_max``, not grown while the command is
    saturated in its direction (anti-windup: it would keep pushing after a recovery from a fall or a climb, past the
    hold height), the command bounded to ``[az_lo, az_hi]`` (the backup's thrust range over its feed-forward mass).
    The one home of the vertical law: :meth:`BackupController.command` and the forward simulation of the backup's
    vertical flow (robot_hrl/robots/quadrotor/shield/vertical_flow.py) both call it."""
    iz = integral + ki_dt * ez
    iz = -i_max if iz < -i_max else i_max if iz > i_max else iz
    az = kv * ez + iz
    if (az > az_hi and iz > integral) or (az < az_lo and iz < integral):
        iz = integral
        az = kv * ez + iz
    return (az_lo if az < az_lo else az_hi if az > az_hi else az), iz


class BackupController:
    """Cascaded PD position -> attitude -> torque controller (hold or land)."""

    def __init__(self, model: DynamicsModel, cfg):
        b = cfg.backup
        self.m = model
        self.kp = b.position_gain_per_s
        self.kv = b.velocity_gain_per_s
        self.kr = b.attitude_gain_per_s2
        self.kw = b.rate_gain_per_s
        self.lead = b.rate_lead_s
        self.max_speed = b.max_speed_mps
        self.tan_tilt = math.tan(math.radians(b.max_tilt_deg))
        self.min_thrust = b.min_thrust_fraction_of_weight * model.weight
        self.max_thrust_fraction = b.max_thrust_fraction_of_max
        """Of the model's ``max_total_thrust``: the thrust the chain reaches on the measured battery (or its worst case)."""
        self.land_speed = b.land_speed_mps
        self.recovery_thrust = b.recovery_thrust_fraction_of_weight * model.weight
        self.recovery_cos = math.cos(math.radians(b.recovery_angle_deg))
        self.yaw_max = b.yaw_torque_fraction * model.high[3]
        self.hold_turn_rate = None if b.hold_turn_max_rate_dps is None else math.radians(b.hold_turn_max_rate_dps)
        """``backup.hold_turn_max_rate_dps`` in rad/s (None: a hold damps the yaw; :meth:`turned_as_commanded`)."""
        self.spin_rate = None if b.spin_yaw_rate_dps is None else math.radians(b.spin_yaw_rate_dps)
        """``backup.spin_yaw_rate_dps`` in rad/s: above it the yaw torque bound is the whole range (:meth:`command`)."""
        self.ki = b.velocity_integral_gain_per_s2
        self.i_max = b.integral_limit_mps2
        self.dt = model.dt
        self.touchdown = b.touchdown_altitude_m
        self.touchdown_speed = 1.5 * b.land_speed_mps
        """Landed: within touchdown_altitude_m of the floor and no faster than this (m/s)."""
        self.reset()

    @property
    def max_thrust(self) -> float:
        """The most collective thrust it commands now, N (``backup.max_thrust_fraction_of_max`` of the thrust the chain
        reaches on the measured battery)."""
        return self.max_thrust_fraction * self.m.max_total_thrust

    def reset(self) -> None:
        """Forget the integral and the last body rate (call when the backup takes over)."""
        self.integral_z = 0.0
        self.w_prev = None
        self.ff_mass = self.m.ff_mass
        """The feed-forward mass the integral was built with (a change of the estimate is taken over bumplessly)."""

    def turned_as_commanded(self, out: list, w, command) -> list:
        """A hold's command ``out`` with the yaw torque of the refused ``command`` (a wrench, N m), bounded by
        ``yaw_torque_fraction`` of its range, while the body's yaw rate ``w[2]`` is at most ``hold_turn_max_rate_dps``
        (beyond it, and with the key None, ``out`` as it is: the backup damps the yaw). In place; returns ``out``.

        Why: the backup holds the heading it finds (its attitude keeps the body x axis), so under a range source a
        robot held for a few ticks at a time stops turning while it still moves on, and its front ranger's cone falls
        behind the way it goes. The heading loop (robot_hrl.runtime.heading) owns the command's yaw torque and turns
        the cone toward the motion; passed through the hold, it keeps turning the cone there, so what the robot goes
        toward gets into the picture. Held by the range source, a held-out flight's yaw fell 6 degrees while its
        heading loop asked to turn 20 degrees left, and it met a wall face between its cones (benchmarks/README.md,
        "Issue #19: the hold turns the cone"). A quadrotor's yaw is decoupled from its thrust and roll/pitch torques in
        the mixer (crazyflie-firmware ``power_distribution_quadrotor.c``), and the hold's attitude law keeps whatever
        heading it finds, so the position hold is the same; the bound is the one the backup's own yaw torque has
        (yaw gives way to roll and pitch), and the rate bound keeps a spinning command from winding the robot up.
        On in the Crazyflie's range source since the backup brakes a spin first (``backup.spin_yaw_rate_dps``): before
        that, levels flown with it crashed 3 times in 1800 flights after yaw spins the hold could not stop (the same
        benchmarks/README.md section, and "Issue #19: a spin first")."""
        r = self.hold_turn_rate
        if r is None or not abs(w[2]) <= r:
            return out
        tz, ym = command[3], self.yaw_max
        out[3] = -ym if tz < -ym else ym if tz > ym else tz
        return out

    def landed(self, tick, floor_z: float) -> bool:
        """The landing is over: on the floor (within ``touchdown_altitude_m``) and slow."""
        return tick.p[2] - floor_z <= self.touchdown and abs(tick.v[2]) <= self.touchdown_speed

    def command(self, p, v, r, w, target, land: bool = False) -> list[float]:
        """Wrench [thrust N, tau_x, tau_y, tau_z N m] that holds ``target`` (or lands below it).

        ``p``, ``v``: position and velocity (world); ``r``: body-to-world rotation, 9 floats
        row-major; ``w``: body rates; ``target``: (x, y, z). ``land`` descends at the landing
        speed instead of holding the target height.
        """
        m = self.m
        kp, kv = self.kp, self.kv
        # position -> velocity reference, speed limited
        ex = target[0] - p[0]
        ey = target[1] - p[1]
        ez = target[2] - p[2]
        vrx, vry, vrz = kp * ex, kp * ey, kp * ez
        if land:
            vrz = -self.land_speed
        s = math.sqrt(vrx * vrx + vry * vry + vrz * vrz)
        if s > self.max_speed:
            f = self.max_speed / s
            vrx, vry, vrz = vrx * f, vry * f, vrz * f
        # velocity -> acceleration (+ a bounded integral: mass, thrust and disturbance errors), tilt limited
        ez = vrz - v[2]
        g = m.g
        mass = m.ff_mass  # the airframe's hover thrust over g once estimated (hover_thrust unit), else the model's mass
        if mass != self.ff_mass:  # bumpless: the integral keeps the thrust it stood for (m0 (i + g) = m1 (i' + g))
            self.integral_z = self.ff_mass * (self.integral_z + m.g) / mass - m.g
            self.ff_mass = mass
        az_lo = self.min_thrust / mass - g
        max_thrust = self.max_thrust_fraction * m.max_total_thrust  # on the battery measured this tick
        az_hi = max_thrust / mass - g
        az, self.integral_z = vertical_accel(kv, self.ki * self.dt, self.i_max, ez, self.integral_z, az_lo, az_hi)
        ax = kv * (vrx - v[0])
        ay = kv * (vry - v[1])
        ah = math.sqrt(ax * ax + ay * ay)
        ah_max = (az + g) * self.tan_tilt
        if ah > ah_max:
            f = ah_max / ah
            ax, ay = ax * f, ay * f
        fx, fy, fz = mass * ax, mass * ay, mass * (az + g)
        fn = math.sqrt(fx * fx + fy * fy + fz * fz)
        zdx, zdy, zdz = fx / fn, fy / fn, fz / fn
        # collective thrust: the thrust vector projected on the current body z; far from the
        # desired attitude, enough thrust that the mixer keeps the torque authority to recover
        thrust = fx * r[2] + fy * r[5] + fz * r[8]
        floor = self.min_thrust
        if zdx * r[2] + zdy * r[5] + zdz * r[8] < self.recovery_cos and floor < self.recovery_thrust:
            floor = self.recovery_thrust
        if thrust < floor:
            thrust = floor
        elif thrust > max_thrust:
            thrust = max_thrust
        # desired attitude: body z along the thrust vector, heading kept (current body x)
        bx, by, bz = r[0], r[3], r[6]
        yx = zdy * bz - zdz * by
        yy = zdz * bx - zdx * bz
        yz = zdx * by - zdy * bx
        yn = math.sqrt(yx * yx + yy * yy + yz * yz)
        if yn < 1e-6:  # body x along the thrust: use body y to fix the heading instead
            cx, cy, cz = r[1], r[4], r[7]
            xx = cy * zdz - cz * zdy
            xy = cz * zdx - cx * zdz
            xz = cx * zdy - cy * zdx
            xn = math.sqrt(xx * xx + xy * xy + xz * xz)
            xx, xy, xz = xx / xn, xy / xn, xz / xn
            yx = zdy * xz - zdz * xy
            yy = zdz * xx - zdx * xz
            yz = zdx * xy - zdy * xx
        else:
            yx, yy, yz = yx / yn, yy / yn, yz / yn
            xx = yy * zdz - yz * zdy
            xy = yz * zdx - yx * zdz
            xz = yx * zdy - yy * zdx
        # e_R = 1/2 vee(Rd^T R - R^T Rd); A = Rd^T R, A_ij = col_i(Rd) . col_j(R)
        a01 = xx * r[1] + xy * r[4] + xz * r[7]
        a10 = yx * r[0] + yy * r[3] + yz * r[6]
        a02 = xx * r[2] + xy * r[5] + xz * r[8]
        a20 = zdx * r[0] + zdy * r[3] + zdz * r[6]
        a12 = yx * r[2] + yy * r[5] + yz * r[8]
        a21 = zdx * r[1] + zdy * r[4] + zdz * r[7]
        erx = 0.5 * (a21 - a12)
        ery = 0.5 * (a02 - a20)
        erz = 0.5 * (a10 - a01)
        jx, jy, jz = m.inertia
        wx, wy, wz = w[0], w[1], w[2]
        kr, kw = self.kr, self.kw
        # the rate damped: the one predicted rate_lead_s ahead from the last tick's change (lead)
        wp = self.w_prev
        self.w_prev = (wx, wy, wz)
        if wp is not None:
            c = self.lead / self.dt
            wx, wy, wz = wx + c * (wx - wp[0]), wy + c * (wy - wp[1]), wz + c * (wz - wp[2])
        w0, w1, w2 = w[0], w[1], w[2]
        tx = jx * (-kr * erx - kw * wx) + (jz - jy) * w1 * w2
        ty = jy * (-kr * ery - kw * wy) + (jx - jz) * w2 * w0
        tz = jz * (-kr * erz - kw * wz) + (jy - jx) * w0 * w1
        lo, hi = m.low, m.high
        tx = lo[1] if tx < lo[1] else hi[1] if tx > hi[1] else tx
        ty = lo[2] if ty < lo[2] else hi[2] if ty > hi[2] else ty
        if self.spin_rate is not None and abs(w2) > self.spin_rate:  # a spin: brake it with the whole range first
            tz = lo[3] if tz < lo[3] else hi[3] if tz > hi[3] else tz
        else:
            ym = self.yaw_max  # yaw last: its differential thrust would starve roll and pitch in the mixer
            tz = -ym if tz < -ym else ym if tz > ym else tz
        return [thrust, tx, ty, tz]
