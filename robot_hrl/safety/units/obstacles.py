"""Obstacle zones around the world's boxes, as in Nav2's collision monitor.

Distances are clearances: from the robot's centre to a box surface, minus the collision radius.

* ``stop``: clearance below ``obstacles.stop_distance_m`` and moving toward the box: rejected,
  the backup holds. Moving away is allowed, so the robot can leave the zone.
* ``slowdown``: clearance below ``obstacles.slowdown_distance_m``: the speed limit becomes
  ``slowdown_ratio`` times the robot's speed limit. A command whose predicted speed exceeds it
  while growing is slowed to the limit by the robot family's stopping model, as Nav2's slowdown
  scales the velocity command (a clamp: the policy keeps control and can leave the zone at the
  limited speed). A quadrotor lowers its collective thrust, never below what holds the altitude
  (no descent is added next to a box) nor below what the motors still produce; a differential
  drive scales its forward speed. When that is not enough, the command is rejected (the backup brakes).
* ``approach``: the predicted stopping box (everywhere the robot can be before it stands
  still; the stopping model's box, shared with the geofence and altitude units) must keep ``obstacles.approach_margin_m`` of clearance from every box, or, already
  closer than that, must come no closer than the robot is now; otherwise rejected (the
  backup brakes before the box), or, with ``obstacles.clamp_thrust`` on (on in the Crazyflie's
  YAML: docs/safety.md, "The thrust clamp"), the collective thrust moved toward the motors' until it does. Nav2's approach polygon does the same with a
  time to collision.

A tick far from every box costs six comparisons per box.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from robot_hrl.safety.stopping import StoppingModel, clamp_thrust_or_reject, tick_stopping_box
from robot_hrl.safety.units.base import ShieldContext, ShieldUnit, Tick


class ObstaclesCfg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    stop_distance_m: float = Field(ge=0.0)
    slowdown_distance_m: float = Field(ge=0.0)
    slowdown_ratio: float = Field(gt=0.0, le=1.0)
    approach_margin_m: float = Field(ge=0.0)
    clamp_thrust: bool = False
    """A command whose stopping box breaks an approach clearance gets the least change of its collective thrust toward
    the motors' that restores it (the stopping model's ``clamp_thrust``); the backup takes over only when none does."""

    @model_validator(mode="after")
    def _ordered(self) -> "ObstaclesCfg":
        if self.slowdown_distance_m < self.stop_distance_m:
            raise ValueError(
                f"obstacles.slowdown_distance_m ({self.slowdown_distance_m}) must be >= obstacles.stop_distance_m ({self.stop_distance_m})"
            )
        return self


def _inflate(box, d: float) -> tuple:
    lo, hi = box.lower, box.upper
    return (float(lo[0]) - d, float(lo[1]) - d, float(lo[2]) - d, float(hi[0]) + d, float(hi[1]) + d, float(hi[2]) + d)


def inside(x, y, z, box) -> bool:
    return box[0] <= x <= box[3] and box[1] <= y <= box[4] and box[2] <= z <= box[5]


class ObstacleUnit(ShieldUnit):
    name = "obstacles"
    constraints = ("stop", "slowdown", "approach")
    description = "stop, slowdown and approach zones around the world's boxes"
    stage = "envelope"
    section = "obstacles"
    config_model = ObstaclesCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "ObstacleUnit":
        return cls(ctx.config, ctx.model, ctx.world)

    def __init__(self, cfg, model: StoppingModel, world):
        super().__init__()
        self.m = model
        o = cfg.obstacles
        radius = model.collision_radius_m
        boxes = world.solid_boxes()
        self.names = tuple(getattr(b, "name", None) or getattr(b, "id", "box") for b in boxes)
        self.raw = tuple(_inflate(b, 0.0) for b in boxes)
        self.stop_boxes = tuple(_inflate(b, radius + o.stop_distance_m) for b in boxes)
        self.slow_boxes = tuple(_inflate(b, radius + o.slowdown_distance_m) for b in boxes)
        self.approach_boxes = tuple(_inflate(b, radius + o.approach_margin_m) for b in boxes)
        self.margin = o.approach_margin_m
        self.radius = radius
        self.slow_speed = o.slowdown_ratio * model.max_speed_mps
        self.speed_h = model.speed_horizon_s
        self.clamp_thrust = o.clamp_thrust
        self._travel_h = getattr(model, "horizontal_travel_m", None)
        """The model's stop travel along a horizontal direction (the quadrotor's), or None: the box alone."""
        k = self.DIRECTIONS
        self._circle = tuple((math.cos(2.0 * math.pi * j / k), math.sin(2.0 * math.pi * j / k)) for j in range(k))

    def _toward(self, i: int, p, v) -> float:
        raw = self.raw[i]
        x, y, z = p
        cx = min(max(x, raw[0]), raw[3])
        cy = min(max(y, raw[1]), raw[4])
        cz = min(max(z, raw[2]), raw[5])
        return (cx - x) * v[0] + (cy - y) * v[1] + (cz - z) * v[2]

    def check(self, tick: Tick) -> None:
        self.begin()
        if not tick.has_state or not self.raw:
            return
        p, v = tick.p, tick.v
        x, y, z = p
        for i, box in enumerate(self.slow_boxes):
            if not inside(x, y, z, box):
                continue
            if inside(x, y, z, self.stop_boxes[i]) and self._toward(i, p, v) > 0.0:
                tick.reject(self, "stop", f"in the stop zone of {self.names[i]!r}, moving toward it")
                return
            speed = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
            vh = self.m.predicted_speed(tick, self.speed_h)
            if vh > self.slow_speed + 1e-6 and vh >= speed:
                before = tuple(tick.cmd)
                slowed = self.m.slowdown(tick, self.speed_h, self.slow_speed)
                if slowed is None:
                    tick.reject(self, "slowdown", f"predicted speed {vh:.2f} m/s > {self.slow_speed:.2f} m/s near {self.names[i]!r}")
                    return
                cmd, change = slowed
                tick.cmd[:] = cmd
                tick.record(self, "slowdown", before, tuple(tick.cmd),
                            detail=f"{change}: predicted speed {vh:.2f} -> {self.slow_speed:.2f} m/s near {self.names[i]!r}")
        hit = self._approach_violation(tick_stopping_box(self.m, tick), p, tick)
        if hit is None:
            return
        i, reach = hit
        detail = f"stopping box comes within {reach:.3f} m of {self.names[i]!r}"
        clamp_thrust_or_reject(self, self.m, tick, self.clamp_thrust, lambda b: self._approach_violation(b, p, tick) is None,
                               "approach", detail)

    def _approach_violation(self, stop_box, p, tick=None) -> tuple[int, float] | None:
        """(the first box whose approach clearance the stopping box breaks, the clearance it keeps), or None: every box
        keeps ``approach_margin_m`` from the stopping box, or (already inside it) no less than the robot has now.

        Where the box breaks it and the model offers ``horizontal_travel_m`` (the quadrotor's), separating planes are
        tried too (:meth:`_separation`): the stop's travel along a direction bounds it as the box does along an axis. An
        axis-aligned box around a diagonal stop holds corners the robot cannot reach; passing a pillar's corner they broke
        the margin on 4.6 % of the ticks of whole missions (benchmarks/README.md, "Issue #16: whole missions")."""
        x0, x1, y0, y1, z0, _, z1 = stop_box
        x, y, z = p
        margin, radius = self.margin, self.radius
        for i, box in enumerate(self.approach_boxes):
            if x1 < box[0] or x0 > box[3] or y1 < box[1] or y0 > box[4] or z1 < box[2] or z0 > box[5]:
                continue
            raw = self.raw[i]
            gx = max(raw[0] - x1, x0 - raw[3], 0.0)
            gy = max(raw[1] - y1, y0 - raw[4], 0.0)
            gz = max(raw[2] - z1, z0 - raw[5], 0.0)
            reach = math.sqrt(gx * gx + gy * gy + gz * gz) - radius
            if reach >= margin:
                continue
            dx = max(raw[0] - x, x - raw[3], 0.0)
            dy = max(raw[1] - y, y - raw[4], 0.0)
            dz = max(raw[2] - z, z - raw[5], 0.0)
            now = math.sqrt(dx * dx + dy * dy + dz * dz) - radius
            if reach >= now - 1e-9:  # inside the margin, only moving away is allowed
                continue
            if self._travel_h is not None and tick is not None:
                kept = self._separation(tick, raw, p, z0, z1, now + radius, (dx, dy, dz))
                if kept >= margin or kept >= now - 1e-9:
                    continue
                reach = max(reach, kept)
            return i, reach
        return None

    DIRECTIONS = 16
    """Horizontal directions tried as separating planes (besides the nearest point's and across the velocity)."""

    def _separation(self, tick, raw, p, z0, z1, dist, gaps) -> float:
        """The clearance from the obstacle ``raw`` that the stop keeps by the best separating plane tried, m: for a
        unit direction ``u``, the obstacle lies where ``u.(y - p) >= min over the box``, and the stop reaches at most
        ``travel(u)`` along ``u``, so it keeps ``min_box u.(y - p) - travel(u) - radius`` (a box is convex, the robot a
        sphere). Tried: the direction to the nearest point (3D: its vertical part travels the stopping box's own
        vertical extent), the two across the horizontal velocity (a pass beside a corner), and
        :attr:`DIRECTIONS` around the circle. The horizontal travel is the model's ``horizontal_travel_m``: the
        stopping box's extent turned to ``u``. -inf when none separates."""
        x, y, z = p
        radius, travel_h = self.radius, self._travel_h
        best = -math.inf
        dx, dy, dz = gaps
        if dist > 1e-9:  # the nearest point's direction
            nx = (dx if x < raw[0] else -dx) / dist  # (a gap is 0 within the box's span on that axis)
            ny = (dy if y < raw[1] else -dy) / dist
            nz = (dz if z < raw[2] else -dz) / dist
            h = math.sqrt(nx * nx + ny * ny)
            travel = h * travel_h(tick, nx / h, ny / h) if h > 1e-9 else 0.0
            travel += nz * (z1 - z) if nz > 0.0 else -nz * (z - z0)
            best = dist - travel - radius
        v = tick.v
        sp = math.sqrt(v[0] * v[0] + v[1] * v[1])
        across = ((-v[1] / sp, v[0] / sp), (v[1] / sp, -v[0] / sp)) if sp > 1e-6 else ()
        for ux, uy in across + self._circle:
            lead = ((raw[0] - x) * ux if ux > 0.0 else (raw[3] - x) * ux) + ((raw[1] - y) * uy if uy > 0.0 else (raw[4] - y) * uy)
            if lead - radius <= best:  # not even a stop in place beats the best
                continue
            kept = lead - travel_h(tick, ux, uy) - radius
            if kept > best:
                best = kept
        return best
