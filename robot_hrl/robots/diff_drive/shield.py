"""The differential drive's shield family: its stopping model, two units of its own, its backup (stop).

* :class:`DiffDriveModel`: the stopping model the robot-neutral geofence and obstacle units ask
  (robot_hrl.safety.stopping): at the larger of the measured and the commanded speed the robot goes
  on for ``stopping.reaction_time_s``, then brakes at ``stopping.brake_decel_mps2``; a yaw rate
  spreads that path sideways. Its slowdown scales the forward speed (Nav2's slowdown action).
* ``velocity_limits`` (:class:`VelocityLimitsUnit`): forward speed and yaw rate within their limits
  (clamps), each changing by at most its acceleration limit per tick (clamps).
* ``stop_zone`` (:class:`StopZoneUnit`): Nav2's stop polygon: a rectangle ahead of the robot in the
  direction it is commanded to drive, ``stop_zone.length_m`` long beyond its footprint; a box in it
  sets the forward speed to zero (the robot may still turn, or back away).
* :class:`StopBackup`: the backup brakes to a standstill (zero velocity; the drive's own acceleration
  limits shape the stop) and reports ``landed`` once slower than ``backup.stopped_speed_mps``.
* :class:`UnicyclePredictor`: dead reckoning of the commanded velocity while the odometry is stale.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from robot_hrl.errors import ConfigError
from robot_hrl.safety.config import BackupCommonCfg
from robot_hrl.safety.families import ShieldFamily, register_family
from robot_hrl.safety.units.base import ShieldContext, ShieldUnit, Tick

_STRICT = ConfigDict(frozen=True, extra="forbid")


class StoppingCfg(BaseModel):
    model_config = _STRICT
    reaction_time_s: float = Field(ge=0.0, le=2.0, description="the command keeps acting this long before braking")
    brake_decel_mps2: float = Field(gt=0.0, description="deceleration the backup's stop reaches")
    velocity_time_constant_s: float = Field(gt=0.0, le=2.0, description="first-order lag of the drive's velocity response")


class VelocityLimitsCfg(BaseModel):
    model_config = _STRICT
    max_speed_mps: float = Field(gt=0.0)
    max_yaw_rate_radps: float = Field(gt=0.0)
    max_accel_mps2: float = Field(gt=0.0)
    max_yaw_accel_radps2: float = Field(gt=0.0)
    speed_horizon_s: float = Field(ge=0.0, le=1.0, description="the speed predicted this far ahead is judged (obstacle slowdown)")


class StopZoneCfg(BaseModel):
    model_config = _STRICT
    length_m: float = Field(gt=0.0, description="the zone reaches this far beyond the footprint, ahead of the robot")
    half_width_m: float = Field(gt=0.0, description="half the zone's width")


class BackupCfg(BackupCommonCfg):
    stopped_speed_mps: float = Field(gt=0.0, description="slower than this, the stop is over (motors off after a 'land')")


def _heading(r) -> tuple[float, float]:
    """(cos, sin) of the heading: the body x axis in the world plane."""
    hx, hy = r[0], r[3]
    n = math.hypot(hx, hy)
    return (1.0, 0.0) if n < 1e-9 else (hx / n, hy / n)


class DiffDriveModel:
    """The robot's constants and its stopping model (plain floats)."""

    def __init__(self, robot, cfg, action):
        lim = cfg.velocity_limits
        if lim.max_speed_mps > robot.max_speed_mps + 1e-9 or lim.max_yaw_rate_radps > robot.max_yaw_rate_radps + 1e-9:
            raise ConfigError(
                f"the shield config does not fit the robot: velocity_limits ({lim.max_speed_mps} m/s, "
                f"{lim.max_yaw_rate_radps} rad/s) exceed {robot.name}'s {robot.max_speed_mps} m/s, {robot.max_yaw_rate_radps} rad/s"
            )
        self.robot = robot
        self.action = action
        self.low, self.high = action.low, action.high
        self.dt = 1.0 / cfg.control_rate_hz
        self.collision_radius_m = robot.collision_radius_m
        self.max_speed_mps = lim.max_speed_mps
        self.speed_horizon_s = lim.speed_horizon_s
        s = cfg.stopping
        self.reaction_time = s.reaction_time_s
        self.brake = s.brake_decel_mps2
        self.estimate_gain = self.reckoning_gain = self.dt / (s.velocity_time_constant_s + self.dt)
        self.blind_brake_s = self.reaction_time + self.max_speed_mps / self.brake
        """How long the stop takes from the speed limit (the stale-state hold)."""
        self.max_acceleration_mps2 = 2.0 * max(lim.max_accel_mps2, s.brake_decel_mps2)
        """An acceleration the drive cannot exceed (twice the commanded limit and the stop's; odometry jumps)."""

    def neutral_command(self) -> list[float]:
        return [0.0, 0.0]

    def blind_command(self) -> list[float]:
        return [0.0, 0.0]

    def off_command(self) -> list[float]:
        return [0.0, 0.0]

    # ---- the stopping-model protocol ------------------------------------------------------------
    def stopping_distance(self, speed: float) -> float:
        return speed * self.reaction_time + speed * speed / (2.0 * self.brake)

    def stopping_box(self, tick: Tick) -> tuple:
        hx, hy = _heading(tick.r)
        v = tick.v
        along = v[0] * hx + v[1] * hy
        c = tick.cmd[0]
        fwd = max(along, c, 0.0)  # worst case forward and backward: measured or commanded
        back = max(-along, -c, 0.0)
        d_f, d_b = self.stopping_distance(fwd), self.stopping_distance(back)
        t_stop = self.reaction_time + max(fwd, back) / self.brake
        side = max(d_f, d_b) * min(1.0, max(abs(tick.w[2]), abs(tick.cmd[1])) * t_stop)  # a turn spreads the path
        xs = (tick.p[0] + d_f * hx, tick.p[0] - d_b * hx)
        ys = (tick.p[1] + d_f * hy, tick.p[1] - d_b * hy)
        x0, x1 = min(tick.p[0], *xs) - side, max(tick.p[0], *xs) + side
        y0, y1 = min(tick.p[1], *ys) - side, max(tick.p[1], *ys) + side
        z = tick.p[2]
        return (x0, x1, y0, y1, z, z, z)

    def predicted_speed(self, tick: Tick, horizon_s: float) -> float:
        """The commanded forward speed (the drive tracks it within ``velocity_time_constant_s``)."""
        return abs(tick.cmd[0])

    def slowdown(self, tick: Tick, horizon_s: float, limit_mps: float):
        c = tick.cmd[0]
        slowed = math.copysign(limit_mps, c)
        return [slowed, tick.cmd[1]], f"speed {c:.3f} -> {slowed:.3f} m/s"


class VelocityLimitsUnit(ShieldUnit):
    name = "velocity_limits"
    constraints = ("speed", "yaw_rate", "acceleration")
    description = "forward speed and yaw rate within their limits, changing within the acceleration limits"
    stage = "command"
    section = "velocity_limits"
    config_model = VelocityLimitsCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "VelocityLimitsUnit":
        return cls(ctx.config, ctx.model)

    def __init__(self, cfg, model: DiffDriveModel):
        super().__init__()
        lim = cfg.velocity_limits
        self.limit = (lim.max_speed_mps, lim.max_yaw_rate_radps)
        self.step = (lim.max_accel_mps2 * model.dt, lim.max_yaw_accel_radps2 * model.dt)

    def check(self, tick: Tick) -> None:
        self.begin()
        cmd = tick.cmd
        for i, constraint in ((0, "speed"), (1, "yaw_rate")):
            lim = self.limit[i]
            if cmd[i] > lim or cmd[i] < -lim:
                before = tuple(cmd)
                cmd[i] = lim if cmd[i] > lim else -lim
                tick.record(self, constraint, before, tuple(cmd))
        prev, before = tick.prev, None
        for i in range(2):
            d = cmd[i] - prev[i]
            if d > self.step[i] or d < -self.step[i]:
                before = before or tuple(cmd)
                cmd[i] = prev[i] + (self.step[i] if d > 0 else -self.step[i])
        if before is not None:
            tick.record(self, "acceleration", before, tuple(cmd))


class StopZoneUnit(ShieldUnit):
    name = "stop_zone"
    constraints = ("stop",)
    description = "no forward speed toward a box inside the stop polygon ahead (Nav2's stop action)"
    stage = "envelope"
    section = "stop_zone"
    config_model = StopZoneCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "StopZoneUnit":
        return cls(ctx.config, ctx.model, ctx.world)

    def __init__(self, cfg, model: DiffDriveModel, world):
        super().__init__()
        z = cfg.stop_zone
        self.reach = model.collision_radius_m + z.length_m
        self.half_width = max(z.half_width_m, model.collision_radius_m)
        boxes = world.solid_boxes()
        self.boxes = tuple((float(b.lower[0]), float(b.lower[1]), float(b.upper[0]), float(b.upper[1])) for b in boxes)
        self.names = tuple(getattr(b, "name", None) or getattr(b, "id", "box") for b in boxes)

    def _blocked(self, px: float, py: float, hx: float, hy: float) -> int | None:
        """Index of a box that the rectangle [0, reach] x [-half_width, half_width] along (hx, hy) overlaps
        (separating axes: the rectangle's two and the world's two)."""
        corners = [(px + a * hx - b * hy, py + a * hy + b * hx) for a in (0.0, self.reach)
                   for b in (-self.half_width, self.half_width)]
        xs, ys = [c[0] for c in corners], [c[1] for c in corners]
        for i, (x0, y0, x1, y1) in enumerate(self.boxes):
            if max(xs) < x0 or min(xs) > x1 or max(ys) < y0 or min(ys) > y1:
                continue
            box = ((x0, y0), (x1, y0), (x0, y1), (x1, y1))
            along = [(bx - px) * hx + (by - py) * hy for bx, by in box]
            across = [-(bx - px) * hy + (by - py) * hx for bx, by in box]
            if max(along) < 0.0 or min(along) > self.reach or max(across) < -self.half_width or min(across) > self.half_width:
                continue
            return i
        return None

    def check(self, tick: Tick) -> None:
        self.begin()
        c = tick.cmd[0]
        if c == 0.0 or not self.boxes:
            return
        hx, hy = _heading(tick.r)
        if c < 0.0:
            hx, hy = -hx, -hy
        i = self._blocked(tick.p[0], tick.p[1], hx, hy)
        if i is not None:
            before = tuple(tick.cmd)
            tick.cmd[0] = 0.0
            tick.record(self, "stop", before, tuple(tick.cmd), detail=f"{self.names[i]!r} inside the stop zone")


class StopBackup:
    """Brake to a standstill: zero velocity."""

    def __init__(self, model: DiffDriveModel, cfg):
        self.stopped_speed = cfg.backup.stopped_speed_mps

    def reset(self) -> None:
        pass

    def command(self, p, v, r, w, target, land: bool = False) -> list[float]:
        return [0.0, 0.0]

    def landed(self, tick: Tick, floor_z: float) -> bool:
        v = tick.v
        return math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) <= self.stopped_speed


class UnicyclePredictor:
    """Dead reckoning: the robot drives the (lagged) commanded velocity along its heading."""

    def __init__(self, model: DiffDriveModel):
        self.m = model
        self.p, self.v, self.q, self.w = [0.0] * 3, [0.0] * 3, [1.0, 0.0, 0.0, 0.0], [0.0] * 3
        self.velocity = [0.0, 0.0]
        self.valid = False

    def reset(self, p, v, q, w, history) -> None:
        """From the measured state and the outputs sent before it (oldest first): their lag is the velocity."""
        self.p = [float(c) for c in p]
        self.v = [float(c) for c in v]
        self.q = [float(c) for c in q]
        self.w = [float(c) for c in w]
        history = list(history)
        vel = [float(history[0][0]), float(history[0][1])] if history else [0.0, 0.0]
        k = self.m.reckoning_gain
        for command in history[1:]:
            vel[0] += (command[0] - vel[0]) * k
            vel[1] += (command[1] - vel[1]) * k
        self.velocity = vel
        self.valid = True

    def step(self, command) -> None:
        k, dt = self.m.reckoning_gain, self.m.dt
        vel = self.velocity
        vel[0] += (command[0] - vel[0]) * k
        vel[1] += (command[1] - vel[1]) * k
        qw, qx, qy, qz = self.q
        yaw = math.atan2(2.0 * (qw * qz + qx * qy), 1.0 - 2.0 * (qy * qy + qz * qz)) + vel[1] * dt
        hx, hy = math.cos(yaw), math.sin(yaw)
        self.v = [vel[0] * hx, vel[0] * hy, 0.0]
        self.p = [self.p[0] + self.v[0] * dt, self.p[1] + self.v[1] * dt, self.p[2]]
        self.w = [0.0, 0.0, vel[1]]
        self.q = [math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0)]


FAMILY = register_family(ShieldFamily(
    name="diff_drive",
    sections={"velocity_limits": VelocityLimitsCfg, "stopping": StoppingCfg, "backup": BackupCfg},
    units={"velocity_limits": VelocityLimitsUnit, "stop_zone": StopZoneUnit},
    build_model=DiffDriveModel,
    build_backup=StopBackup,
    build_predictor=UnicyclePredictor,
    description="a differential drive in body velocity: stopping model, velocity limits, stop zone, backup stops",
))
