"""Stop and slowdown zones from the live range sensors: the obstacle unit without a map.

The ``obstacles`` unit needs the world file's boxes. This one, as Nav2's collision monitor does with its
``range`` and ``scan`` sources (ros-navigation/navigation2, ``nav2_collision_monitor``: ``range.cpp``,
``collision_monitor_node.cpp``), builds its picture each tick from the latest reading of every range sensor
it is given, so a room nobody mapped is guarded too. Both units can be listed at once (each judges its own
source; the most restrictive outcome wins, as for every unit).

* Each fresh reading that hit something (``min_range_m <= r < max_range_m``, finite) becomes points on an
  arc at range ``r`` across the sensor's field of view, ``obstacles_angle_rad`` apart (Nav2's range
  source puts its points on that arc the same way), in the body frame, then in the world frame with the
  tick's attitude. Distances are clearances: from the robot's centre to a point, minus the collision radius.
* ``stop``: a point's clearance below ``stop_distance_m`` and the robot moving toward it: rejected, the
  backup holds (moving away is allowed, so the robot can leave the zone).
* ``slowdown``: a point's clearance below ``slowdown_distance_m``: the speed limit becomes
  ``slowdown_ratio`` times the robot's, enforced by the family's stopping model exactly as the
  ``obstacles`` unit does (a clamp; rejected when the clamp cannot hold it).
* ``source_timeout``: a listed sensor whose latest reading is older than ``source_timeout_s`` (or that
  never reported) makes the unit reject, as Nav2's collision monitor stops the robot on a stale source
  (navigation2 PR #3880, "Add a watchdog mechanism"). ``source_timeout_s: 0`` turns the check off.

The node that owns the shield hands readings in with :meth:`RangeObstacleUnit.update` (a
``sensor_msgs/Range`` each: the sensor's name, the range, the stamp).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from robot_hrl.errors import ConfigError, ObservationError
from robot_hrl.safety.units.base import ShieldContext, ShieldUnit, Tick


class RangeObstaclesCfg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    sensors: tuple[str, ...] = Field(min_length=1, description="the robot's rangers that feed the zones (robot_hrl.sensing)")
    stop_distance_m: float = Field(ge=0.0)
    slowdown_distance_m: float = Field(ge=0.0)
    slowdown_ratio: float = Field(gt=0.0, le=1.0)
    source_timeout_s: float = Field(ge=0.0, description="a sensor silent this long makes the unit reject (0: off)")
    obstacles_angle_rad: float = Field(gt=0.0, le=math.pi, description="spacing of the points on a reading's arc")

    @model_validator(mode="after")
    def _ordered(self) -> "RangeObstaclesCfg":
        if self.slowdown_distance_m < self.stop_distance_m:
            raise ValueError(f"range_obstacles.slowdown_distance_m ({self.slowdown_distance_m}) must be >= "
                             f"range_obstacles.stop_distance_m ({self.stop_distance_m})")
        return self


def _arc_b(spec, angle_step: float) -> tuple[tuple[float, float, float], ...]:
    """Unit directions (body FLU) across the sensor's field of view, in its horizontal plane of spread."""
    d = spec.direction_b
    half = 0.5 * spec.field_of_view_rad
    n = max(int(math.floor(2.0 * half / angle_step)), 0)
    angles = [-half + k * (2.0 * half / n) for k in range(n + 1)] if n > 0 else [0.0]
    # spread about the body z axis for a horizontal ranger, about the body x axis for a vertical one
    axis = (0.0, 0.0, 1.0) if abs(d[2]) < 0.9 else (1.0, 0.0, 0.0)
    out = []
    for a in angles:
        c, s = math.cos(a), math.sin(a)
        kx, ky, kz = axis
        dot = kx * d[0] + ky * d[1] + kz * d[2]
        cross = (ky * d[2] - kz * d[1], kz * d[0] - kx * d[2], kx * d[1] - ky * d[0])
        out.append(tuple(d[i] * c + cross[i] * s + axis[i] * dot * (1.0 - c) for i in range(3)))  # Rodrigues
    return tuple(out)


class RangeObstacleUnit(ShieldUnit):
    name = "range_obstacles"
    constraints = ("stop", "slowdown", "source_timeout")
    description = "stop and slowdown zones from the live range sensors (no map)"
    stage = "envelope"
    section = "range_obstacles"
    config_model = RangeObstaclesCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "RangeObstacleUnit":
        from robot_hrl.sensing import robot_range_sensors

        return cls(ctx.config, ctx.model, robot_range_sensors(ctx.robot))

    def __init__(self, cfg, model, sensors):
        super().__init__()
        o = cfg.range_obstacles
        by_name = {s.name: s for s in sensors}
        missing = [n for n in o.sensors if n not in by_name]
        if missing:
            raise ConfigError(f"range_obstacles.sensors: {missing} are not the robot's rangers {list(by_name)} "
                              "(robot_hrl/robots/<robot>/rangers.py)")
        self.m = model
        self.specs = tuple(by_name[n] for n in o.sensors)
        self.index = {n: i for i, n in enumerate(o.sensors)}
        self.arcs = tuple(_arc_b(s, o.obstacles_angle_rad) for s in self.specs)
        self.radius = model.collision_radius_m
        self.stop_m = self.radius + o.stop_distance_m
        self.slow_m = self.radius + o.slowdown_distance_m
        self.slow_speed = o.slowdown_ratio * model.max_speed_mps
        self.speed_h = model.speed_horizon_s
        self.timeout = o.source_timeout_s
        self.range_m = [math.nan] * len(self.specs)
        self.stamp_s = [-math.inf] * len(self.specs)

    def reset(self) -> None:
        self.range_m = [math.nan] * len(self.specs)
        self.stamp_s = [-math.inf] * len(self.specs)

    def update(self, sensor: str, range_m: float, stamp_s: float) -> bool:
        """The latest reading of ``sensor`` (a sensor_msgs/Range), REP 117's way: +inf (or anything at or beyond
        ``max_range_m``) is no target; -inf (or anything below ``min_range_m``) a target too close to measure,
        kept as one at ``min_range_m``. False (and ignored) for a sensor the unit does not listen to.
        ObservationError (the reading is dropped: the sensor goes stale, and ``source_timeout`` acts) for a NaN or
        negative range or a non-finite stamp."""
        i = self.index.get(sensor)
        if i is None:
            return False
        r, t = float(range_m), float(stamp_s)
        if not math.isfinite(t):
            raise ObservationError(f"range sensor {sensor!r}: stamp {stamp_s!r} is not finite; the reading is dropped")
        if math.isnan(r) or (math.isfinite(r) and r < 0.0):
            raise ObservationError(f"range sensor {sensor!r}: range {range_m!r} is not a distance (REP 117: +inf for no "
                                   "target, -inf for one too close); the reading is dropped")
        spec = self.specs[i]
        if r < spec.min_range_m:
            r = spec.min_range_m  # -inf or below the minimum: something is there, closer than the sensor measures
        elif r >= spec.max_range_m:
            r = math.inf
        self.range_m[i] = r
        self.stamp_s[i] = t
        return True

    def _points_w(self, tick: Tick):
        r, p = tick.r, tick.p
        for spec, arc, dist in zip(self.specs, self.arcs, self.range_m):
            if not (math.isfinite(dist) and spec.min_range_m <= dist < spec.max_range_m):
                continue
            ox, oy, oz = spec.offset_b
            for dx, dy, dz in arc:
                bx, by, bz = ox + dist * dx, oy + dist * dy, oz + dist * dz
                yield (p[0] + r[0] * bx + r[1] * by + r[2] * bz,
                       p[1] + r[3] * bx + r[4] * by + r[5] * bz,
                       p[2] + r[6] * bx + r[7] * by + r[8] * bz)

    def check(self, tick: Tick) -> None:
        self.begin()
        if not tick.has_state:
            return
        if self.timeout > 0.0:
            for spec, stamp in zip(self.specs, self.stamp_s):
                if tick.now - stamp > self.timeout:
                    age = "no reading yet" if stamp == -math.inf else f"last reading {tick.now - stamp:.3f} s old"
                    tick.reject(self, "source_timeout", f"range sensor {spec.name!r}: {age} (> {self.timeout} s)")
                    return
        p, v = tick.p, tick.v
        nearest, toward = math.inf, False
        for q in self._points_w(tick):
            dx, dy, dz = q[0] - p[0], q[1] - p[1], q[2] - p[2]
            d = math.sqrt(dx * dx + dy * dy + dz * dz)
            if d < nearest:
                nearest = d
            if d < self.stop_m and dx * v[0] + dy * v[1] + dz * v[2] > 0.0:
                toward = True
        if toward:
            tick.reject(self, "stop", f"a range reading within {self.stop_m - self.radius:.2f} m of clearance, moving toward it")
            return
        if nearest >= self.slow_m:
            return
        speed = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
        vh = self.m.predicted_speed(tick, self.speed_h)
        if vh > self.slow_speed + 1e-6 and vh >= speed:
            before = tuple(tick.cmd)
            slowed = self.m.slowdown(tick, self.speed_h, self.slow_speed)
            if slowed is None:
                tick.reject(self, "slowdown", f"predicted speed {vh:.2f} m/s > {self.slow_speed:.2f} m/s, a range reading "
                                              f"{nearest - self.radius:.2f} m away")
                return
            cmd, change = slowed
            tick.cmd[:] = cmd
            tick.record(self, "slowdown", before, tuple(tick.cmd),
                        detail=f"{change}: predicted speed {vh:.2f} -> {self.slow_speed:.2f} m/s, a range reading "
                               f"{nearest - self.radius:.2f} m away")
