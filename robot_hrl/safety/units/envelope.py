"""Geofence and altitude, judged on the predicted stopping point rather than the position.

With the command acting for the reaction time and the backup braking after it
(:meth:`robot_hrl.safety.model.DynamicsModel.stopping_distance`), the robot must stand still
inside the fence shrunk by ``geofence.margin_m`` plus the collision radius (x and y), and
inside the altitude band (z). Otherwise the command is rejected and the backup holds the
current position (brought inside the safe region). The acceleration of the command is taken
from the larger (or, against a direction, the smaller) of the commanded thrust and the thrust
the motors are estimated to produce now.
"""

from __future__ import annotations

import math

from robot_hrl.safety.model import DynamicsModel
from robot_hrl.safety.units.base import ShieldUnit, Tick


def command_accelerations(m: DynamicsModel, tick: Tick):
    """(strong, weak) thrust accelerations along the thrust axis: the worst cases of the
    commanded thrust and the estimated actual thrust."""
    t1, t2 = tick.cmd[0], tick.thrust_est
    if t1 < t2:
        t1, t2 = t2, t1
    return t1 / m.mass, t2 / m.mass


class GeofenceUnit(ShieldUnit):
    name = "geofence"
    constraints = ("x_min", "x_max", "y_min", "y_max")
    description = "the predicted stopping point stays inside the horizontal fence"

    def __init__(self, cfg, model: DynamicsModel, world):
        super().__init__()
        self.m = model
        inset = cfg.geofence.margin_m + model.robot.collision_radius_m
        b = world.bounds
        self.x_lo, self.y_lo = b.min[0] + inset, b.min[1] + inset
        self.x_hi, self.y_hi = b.max[0] - inset, b.max[1] - inset
        if not (self.x_lo < self.x_hi and self.y_lo < self.y_hi):
            from robot_hrl.errors import ConfigError

            raise ConfigError(
                f"the fence {b.min}..{b.max} shrunk by geofence.margin_m + collision radius ({inset:.3f} m) is empty; "
                "lower geofence.margin_m"
            )

    def stopping_extent(self, tick: Tick):
        """(x_min, x_max, y_min, y_max) the robot may reach before it stands still."""
        m = self.m
        r = tick.r
        strong, weak = command_accelerations(m, tick)
        p, v = tick.p, tick.v
        t = m.reaction_time
        b = m.brake_horizontal
        zx, zy = r[2], r[5]
        # worst acceleration toward +x is with the strong thrust if the thrust axis points +x
        ax_pos = (strong if zx > 0 else weak) * zx
        ax_neg = (weak if zx > 0 else strong) * zx
        ay_pos = (strong if zy > 0 else weak) * zy
        ay_neg = (weak if zy > 0 else strong) * zy
        v1x = abs(v[0]) + max(abs(ax_pos), abs(ax_neg)) * t
        v1y = abs(v[1]) + max(abs(ay_pos), abs(ay_neg)) * t
        plane = math.sqrt(v1x * v1x + v1y * v1y)
        sd = m.stopping_distance
        return (
            p[0] - sd(-v[0], -ax_neg, plane, b),
            p[0] + sd(v[0], ax_pos, plane, b),
            p[1] - sd(-v[1], -ay_neg, plane, b),
            p[1] + sd(v[1], ay_pos, plane, b),
        )

    def check(self, tick: Tick) -> None:
        self.begin()
        if not tick.has_state:
            return
        x0, x1, y0, y1 = self.stopping_extent(tick)
        if x0 < self.x_lo:
            tick.reject(self, "x_min", f"stopping point x {x0:.2f} < {self.x_lo:.2f} m")
        elif x1 > self.x_hi:
            tick.reject(self, "x_max", f"stopping point x {x1:.2f} > {self.x_hi:.2f} m")
        elif y0 < self.y_lo:
            tick.reject(self, "y_min", f"stopping point y {y0:.2f} < {self.y_lo:.2f} m")
        elif y1 > self.y_hi:
            tick.reject(self, "y_max", f"stopping point y {y1:.2f} > {self.y_hi:.2f} m")


class AltitudeUnit(ShieldUnit):
    name = "altitude"
    constraints = ("floor", "ceiling")
    description = "the predicted stopping height stays inside the altitude band"

    def __init__(self, cfg, model: DynamicsModel, world):
        super().__init__()
        self.m = model
        a = cfg.altitude
        r = model.robot.collision_radius_m
        self.floor_z = world.bounds.min[2]
        self.z_lo = self.floor_z + a.min_altitude_m + a.margin_m
        self.z_hi = min(self.floor_z + a.max_altitude_m, world.bounds.max[2] - r) - a.margin_m
        if not self.z_lo < self.z_hi:
            from robot_hrl.errors import ConfigError

            raise ConfigError(
                f"the altitude band is empty: floor {self.floor_z} + altitude.min_altitude_m + margin = {self.z_lo:.3f} m "
                f"is not below min(floor + altitude.max_altitude_m, fence top - collision radius) - margin = {self.z_hi:.3f} m"
            )

    def stopping_extent(self, tick: Tick):
        """(z_min, z_max) the robot may reach before it stands still."""
        m = self.m
        strong, weak = command_accelerations(m, tick)
        zz = tick.r[8]
        vz = tick.v[2]
        g = m.g
        a_up = (strong if zz > 0 else weak) * zz - g
        a_dn = (weak if zz > 0 else strong) * zz - g
        sd = m.stopping_distance
        return tick.p[2] - sd(-vz, -a_dn, 0.0, m.brake_up), tick.p[2] + sd(vz, a_up, 0.0, m.brake_down)

    def check(self, tick: Tick) -> None:
        self.begin()
        if not tick.has_state:
            return
        z0, z1 = self.stopping_extent(tick)
        if z0 < self.z_lo:
            tick.reject(self, "floor", f"stopping height {z0:.2f} < {self.z_lo:.2f} m")
        elif z1 > self.z_hi:
            tick.reject(self, "ceiling", f"stopping height {z1:.2f} > {self.z_hi:.2f} m")
