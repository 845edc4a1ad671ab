"""Geofence and altitude, judged on the predicted stopping point rather than the position.

With the command acting for the reaction time and the backup braking after it, the robot must
stand still inside the fence shrunk by ``geofence.margin_m`` plus the collision radius (x and y),
and inside the altitude band (z). Otherwise, with ``clamp_thrust`` on, the command's collective
thrust is moved toward the motors' present thrust just far enough that the box fits (the stopping
model's ``clamp_thrust``: the box only shrinks on the way, docs/safety.md "The thrust clamp"); where
no such thrust exists, or with it off, the command is rejected and the backup holds the current
position (brought inside the safe region). The stopping box comes from the robot
family's stopping model (:mod:`robot_hrl.safety.stopping`; a quadrotor's takes the worst case of
the commanded thrust and the thrust the motors are estimated to produce now, along the thrust
axis now and once the body rates are stopped).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from robot_hrl.safety.stopping import StoppingModel, clamp_thrust_or_reject, tick_stopping_box
from robot_hrl.safety.units.base import ShieldContext, ShieldUnit, Tick

_STRICT = ConfigDict(frozen=True, extra="forbid")


class GeofenceCfg(BaseModel):
    model_config = _STRICT
    margin_m: float = Field(ge=0.0)
    clamp_thrust: bool = False
    """A command whose stopping point leaves the fence gets the least change of its collective thrust toward the
    motors' that brings it back (the stopping model's ``clamp_thrust``); the backup takes over only when none does."""


class AltitudeCfg(BaseModel):
    model_config = _STRICT
    min_altitude_m: float = Field(ge=0.0)
    max_altitude_m: float = Field(gt=0.0)
    margin_m: float = Field(ge=0.0)
    clamp_thrust: bool = False
    """A command whose stopping height leaves the band gets the least change of its collective thrust toward the
    motors' that brings it back (the stopping model's ``clamp_thrust``), as Nav2's slowdown zone lowers a speed;
    the backup takes over only when none does. False: every such command is handed to the backup."""
    climb_into_band: bool = False
    """Where no hold can keep the band's floor any more (below the band, a take-off; or above it by less than the
    backup's own hold sag, ``backup_sag_down_m`` of a model that has one: the hold that would replace the command sags
    the same way), the floor is the height now less that sag: a command passes when its stop does not sink below the
    height now (under the policy the robot may only rise, never sink further), and any command passes while the robot
    is on the floor (within ``rest_height_m`` of it, sinking no faster than ``rest_speed_mps``: a fall from there
    touches down at most as fast as a landing's touchdown). False: every such command is refused and the backup lifts
    the robot, as Nav2's collision monitor stops motion inside a stop zone whichever way it goes."""
    flow_check: bool = False
    """A command whose stopping box breaks the floor still passes when the backup's vertical flow after it (the command
    for one tick, then the hold, simulated forward on the weakest airframe, the slowest and the fastest motor: a model
    offering ``backup_flow_lowest``, robot_hrl/robots/quadrotor/shield/vertical_flow.py) keeps the band; and, with
    ``climb_into_band``, below the band or within the hold's sag above it when it stays off the floor (above
    ``rest_height_m``), or where the hold's own flow does not keep the band either when it goes no lower than the lower
    of the height now and that flow (while climbing only, where it reaches the floor). The box's two summed peaks are
    sound but blind to timing; the flow integrates them together (docs/safety.md, "The backup's vertical flow"). The
    ceiling likewise: a command whose box breaks it passes when the flow from above (``backup_flow_highest``, the
    strongest airframe) keeps the band's top."""
    rest_height_m: float = Field(default=0.03, ge=0.0, le=0.1, description="on the floor: this close to it (m)")
    rest_speed_mps: float = Field(default=0.1, ge=0.0, le=0.5, description="on the floor: sinking no faster than this (m/s)")

    @model_validator(mode="after")
    def _ordered(self) -> "AltitudeCfg":
        if not self.min_altitude_m < self.max_altitude_m:
            raise ValueError(f"altitude.min_altitude_m ({self.min_altitude_m}) must be below altitude.max_altitude_m ({self.max_altitude_m})")
        return self


class GeofenceUnit(ShieldUnit):
    name = "geofence"
    constraints = ("x_min", "x_max", "y_min", "y_max")
    description = "the predicted stopping point stays inside the horizontal fence"
    stage = "envelope"
    section = "geofence"
    config_model = GeofenceCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "GeofenceUnit":
        return cls(ctx.config, ctx.model, ctx.world)

    def __init__(self, cfg, model: StoppingModel, world):
        super().__init__()
        self.m = model
        self.clamp_thrust = cfg.geofence.clamp_thrust
        """Clamp the command's thrust into the fence (a model offering ``clamp_thrust``) before handing over."""
        inset = cfg.geofence.margin_m + model.collision_radius_m
        b = world.bounds
        self.x_lo, self.y_lo = b.min[0] + inset, b.min[1] + inset
        self.x_hi, self.y_hi = b.max[0] - inset, b.max[1] - inset
        if not (self.x_lo < self.x_hi and self.y_lo < self.y_hi):
            from robot_hrl.errors import ConfigError

            raise ConfigError(
                f"the fence {b.min}..{b.max} shrunk by geofence.margin_m + collision radius ({inset:.3f} m) is empty; "
                "lower geofence.margin_m"
            )

    def check(self, tick: Tick) -> None:
        self.begin()
        if not tick.has_state:
            return
        x0, x1, y0, y1 = tick_stopping_box(self.m, tick)[:4]
        if x0 < self.x_lo:
            constraint, detail = "x_min", f"stopping point x {x0:.2f} < {self.x_lo:.2f} m"
        elif x1 > self.x_hi:
            constraint, detail = "x_max", f"stopping point x {x1:.2f} > {self.x_hi:.2f} m"
        elif y0 < self.y_lo:
            constraint, detail = "y_min", f"stopping point y {y0:.2f} < {self.y_lo:.2f} m"
        elif y1 > self.y_hi:
            constraint, detail = "y_max", f"stopping point y {y1:.2f} > {self.y_hi:.2f} m"
        else:
            return
        xl, xh, yl, yh = self.x_lo, self.x_hi, self.y_lo, self.y_hi
        clamp_thrust_or_reject(self, self.m, tick, self.clamp_thrust,
                               lambda b: xl <= b[0] and b[1] <= xh and yl <= b[2] and b[3] <= yh, constraint, detail)


class AltitudeUnit(ShieldUnit):
    name = "altitude"
    constraints = ("floor", "ceiling")
    description = "the predicted stopping height stays inside the altitude band"
    stage = "envelope"
    section = "altitude"
    config_model = AltitudeCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "AltitudeUnit":
        return cls(ctx.config, ctx.model, ctx.world)

    def __init__(self, cfg, model: StoppingModel, world):
        super().__init__()
        self.m = model
        a = cfg.altitude
        self.clamp_thrust = a.clamp_thrust
        """Clamp the command's thrust into the band (a model offering ``clamp_thrust``) before handing over."""
        r = model.collision_radius_m
        self.climb_into_band = a.climb_into_band
        self.rest_z = world.bounds.min[2] + a.rest_height_m
        self.rest_speed = a.rest_speed_mps
        self.flow_check = a.flow_check and getattr(model, "backup_flow_lowest", None) is not None
        """A command whose stopping box breaks the floor is judged again on the backup's vertical flow after it
        (``altitude.flow_check``; a model offering ``backup_flow_lowest``)."""
        self.floor_z = world.bounds.min[2]
        self.z_lo = self.floor_z + a.min_altitude_m + a.margin_m
        self.z_hi = min(self.floor_z + a.max_altitude_m, world.bounds.max[2] - r) - a.margin_m
        backup = getattr(cfg, "backup", None)
        inset = float(getattr(backup, "hold_inset_m", 0.0)) if backup is not None else 0.0
        self.hold_lo, self.hold_hi = self.z_lo + inset, self.z_hi - inset
        """Where the backup's hold targets lie (the band ``backup.hold_inset_m`` in: the shield's ``safe_position``), m."""
        if not self.z_lo < self.z_hi:
            from robot_hrl.errors import ConfigError

            raise ConfigError(
                f"the altitude band is empty: floor {self.floor_z} + altitude.min_altitude_m + margin = {self.z_lo:.3f} m "
                f"is not below min(floor + altitude.max_altitude_m, fence top - collision radius) - margin = {self.z_hi:.3f} m"
            )

    def check(self, tick: Tick) -> None:
        self.begin()
        if not tick.has_state:
            return
        box = tick_stopping_box(self.m, tick)
        z0, z1 = box[4], box[5]
        z_lo = self.z_lo
        climb = False
        if self.climb_into_band:
            # the backup's own hold sag (a quadrotor's, on the weakest airframe the model allows now): the hold that
            # would replace the command sags the same way
            low = tick.p[2] - getattr(self.m, "backup_sag_down_m", 0.0)
            if low < z_lo:  # below the band, or too close above it for any hold to keep it: the robot may not sink
                on_floor = tick.p[2] <= self.rest_z and tick.v[2] >= -self.rest_speed  # a fall from here is a touch
                z_lo = -float("inf") if on_floor else low
                climb = not on_floor
        floor_ok, flow_low = z0 >= z_lo, None
        if not floor_ok and self.flow_check and tick.mode_prev != "backup_land":  # (landing: the command goes nowhere)
            floor_ok, flow_low = self._flow(tick, climb)  # the flow after the command keeps what the box cannot show
        if not floor_ok:
            constraint, detail = "floor", (f"stopping height {z0:.2f} < {self.z_lo:.2f} m" if not climb else
                                           f"stopping height {z0:.2f} m below the height now, {tick.p[2]:.2f} m, less the "
                                           "backup's hold sag (below the band, or within the sag above it, the robot may "
                                           "only climb)")
            if flow_low is not None:
                detail += f"; the backup's vertical flow after it reaches {flow_low:.2f} m"
        elif z1 > self.z_hi:
            high = None
            if self.flow_check and tick.mode_prev != "backup_land":
                high = self._flow_high(tick)
                if high <= self.z_hi:
                    return  # the backup's vertical flow after the command keeps the band's top
            constraint, detail = "ceiling", f"stopping height {z1:.2f} > {self.z_hi:.2f} m"
            if high is not None:
                detail += f"; the backup's vertical flow after it reaches {high:.2f} m"
        else:
            return
        z_hi = self.z_hi
        clamp_thrust_or_reject(self, self.m, tick, self.clamp_thrust, lambda b: z_lo <= b[4] and b[5] <= z_hi,
                               constraint, detail)

    def _flow_high(self, tick: Tick) -> float:
        """The highest height of the command for one tick, then the backup's hold, simulated forward on the strongest
        airframe (robot_hrl/robots/quadrotor/shield/vertical_flow.py); nan where it is not a number."""
        sub = tick.subgoal_w
        cap = float(sub[2]) if sub is not None else -math.inf
        high = self.m.backup_flow_highest(tick, tick.cmd[0], self.hold_lo, self.hold_hi, cap)
        return high if high == high else math.inf

    def _flow(self, tick: Tick, climb: bool) -> tuple[bool, float]:
        """(keeps, its lowest height): the command for one tick, then the backup's hold, simulated forward
        (robot_hrl/robots/quadrotor/shield/vertical_flow.py) keeps the band; or, with ``climb_into_band``, stays off the
        floor (above ``rest_height_m``) and, unless below the band or within the hold's sag above it (``climb``), goes
        no lower than the lower of the height now and the flow of the backup taking over now, where that flow does not
        keep the band either."""
        m = self.m
        lo, hi = self.hold_lo, self.hold_hi
        sub = tick.subgoal_w
        cap = float(sub[2]) if sub is not None else float("inf")
        axis = m.flow_axis(tick)  # (one axis for the command's flow and the hold's: they are compared)
        if axis is None:  # no upward thrust can be counted on
            return False, -math.inf
        cmd = m.backup_flow_lowest(tick, tick.cmd[0], lo, hi, cap, axis)
        if not cmd > -math.inf:  # (not a number)
            return False, cmd
        if cmd >= self.z_lo:
            return True, cmd
        if not self.climb_into_band:  # (the band's floor, or the backup: the rule that lets a climb go on is off)
            return False, cmd
        off_floor = cmd >= self.rest_z
        if climb and off_floor:  # below the band, or within the hold's sag above it: off the floor is what a take-off needs
            return True, cmd
        # no lower than the hold that would replace the command, where that hold does not keep the band either (the flow
        # says so where the box's sag does not: a climb's overshoot comes back); where both flows reach the floor, only
        # while climbing (two bounds that both reach the floor say little of the real flows' order: the adversary flew a
        # robot into the floor descending "no worse than the hold", 1 of 200 randomized airframes)
        if not (off_floor or tick.v[2] > 0.0):
            return False, cmd
        hold = m.backup_flow_lowest(tick, None, lo, hi, cap, axis)
        p_z = tick.p[2]
        return (climb or hold < self.z_lo) and cmd >= (hold if hold < p_z else p_z), cmd
