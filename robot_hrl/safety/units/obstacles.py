"""Obstacle zones around the world's boxes, as in Nav2's collision monitor.

Distances are clearances: from the robot's centre to a box surface, minus the collision radius.

* ``stop``: clearance below ``obstacles.stop_distance_m`` and moving toward the box: rejected,
  the backup holds. Moving away is allowed, so the robot can leave the zone.
* ``slowdown``: clearance below ``obstacles.slowdown_distance_m``: the speed limit becomes
  ``slowdown_ratio * limits.max_speed_mps``; a command whose predicted speed exceeds it while
  growing is rejected (the backup brakes).
* ``approach``: the predicted stopping path (reaction, then braking along the velocity) must
  keep ``obstacles.approach_margin_m`` of clearance; otherwise rejected (the backup brakes
  before the box). Nav2's approach polygon does the same with a time to collision.

Boxes are tested by axis-aligned bounding boxes first, so a tick far from every box costs a
few comparisons per box.
"""

from __future__ import annotations

import math

from robot_hrl.safety.model import DynamicsModel
from robot_hrl.safety.units.base import ShieldUnit, Tick


def _inflate(box, d: float) -> tuple:
    lo, hi = box.lower, box.upper
    return (float(lo[0]) - d, float(lo[1]) - d, float(lo[2]) - d, float(hi[0]) + d, float(hi[1]) + d, float(hi[2]) + d)


def segment_hits_box(ax, ay, az, bx, by, bz, box) -> bool:
    """Slab test: does the segment a->b touch the axis-aligned box (x0, y0, z0, x1, y1, z1)?"""
    t0, t1 = 0.0, 1.0
    for a, b, lo, hi in ((ax, bx, box[0], box[3]), (ay, by, box[1], box[4]), (az, bz, box[2], box[5])):
        d = b - a
        if abs(d) < 1e-12:
            if a < lo or a > hi:
                return False
            continue
        u0 = (lo - a) / d
        u1 = (hi - a) / d
        if u0 > u1:
            u0, u1 = u1, u0
        if u0 > t0:
            t0 = u0
        if u1 < t1:
            t1 = u1
        if t0 > t1:
            return False
    return True


def inside(x, y, z, box) -> bool:
    return box[0] <= x <= box[3] and box[1] <= y <= box[4] and box[2] <= z <= box[5]


class ObstacleUnit(ShieldUnit):
    name = "obstacles"
    constraints = ("stop", "slowdown", "approach")
    description = "stop, slowdown and approach zones around the world's boxes"

    def __init__(self, cfg, model: DynamicsModel, world):
        super().__init__()
        self.m = model
        o = cfg.obstacles
        radius = model.robot.collision_radius_m
        boxes = world.solid_boxes()
        self.names = tuple(getattr(b, "name", None) or getattr(b, "id", "box") for b in boxes)
        self.raw = tuple(_inflate(b, 0.0) for b in boxes)
        self.stop_boxes = tuple(_inflate(b, radius + o.stop_distance_m) for b in boxes)
        self.slow_boxes = tuple(_inflate(b, radius + o.slowdown_distance_m) for b in boxes)
        self.approach_boxes = tuple(_inflate(b, radius + o.approach_margin_m) for b in boxes)
        self.slow_speed = o.slowdown_ratio * cfg.limits.max_speed_mps
        self.speed_h = cfg.limits.speed_horizon_s
        self.brake = min(model.brake_horizontal, model.brake_up, model.brake_down)

    def stopping_path(self, tick: Tick, thrust: float):
        """(p1, p2): where the reaction ends and where braking ends, for a thrust (N)."""
        m = self.m
        acc = thrust / m.mass
        r = tick.r
        p, v = tick.p, tick.v
        t = m.reaction_time
        ax, ay, az = acc * r[2], acc * r[5], acc * r[8] - m.g
        p1x = p[0] + v[0] * t + 0.5 * ax * t * t
        p1y = p[1] + v[1] * t + 0.5 * ay * t * t
        p1z = p[2] + v[2] * t + 0.5 * az * t * t
        v1x, v1y, v1z = v[0] + ax * t, v[1] + ay * t, v[2] + az * t
        k = math.sqrt(v1x * v1x + v1y * v1y + v1z * v1z) / (2.0 * self.brake)
        return (p1x, p1y, p1z), (p1x + v1x * k, p1y + v1y * k, p1z + v1z * k)

    def check(self, tick: Tick) -> None:
        self.begin()
        if not tick.has_state or not self.raw:
            return
        p, v = tick.p, tick.v
        x, y, z = p
        t_strong, t_weak = tick.cmd[0], tick.thrust_est
        if t_strong < t_weak:
            t_strong, t_weak = t_weak, t_strong
        for i, box in enumerate(self.slow_boxes):
            if not inside(x, y, z, box):
                continue
            # inside the slowdown zone of this box
            raw = self.raw[i]
            cx = min(max(x, raw[0]), raw[3])
            cy = min(max(y, raw[1]), raw[4])
            cz = min(max(z, raw[2]), raw[5])
            toward = (cx - x) * v[0] + (cy - y) * v[1] + (cz - z) * v[2]
            if inside(x, y, z, self.stop_boxes[i]) and toward > 0.0:
                tick.reject(self, "stop", f"in the stop zone of {self.names[i]!r}, moving toward it")
                return
            speed = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
            vh = _predicted_speed(tick, self.m, self.speed_h)
            if vh > self.slow_speed and vh >= speed:
                tick.reject(self, "slowdown", f"predicted speed {vh:.2f} m/s > {self.slow_speed:.2f} m/s near {self.names[i]!r}")
                return
        (s1x, s1y, s1z), (s2x, s2y, s2z) = self.stopping_path(tick, t_strong)
        (w1x, w1y, w1z), (w2x, w2y, w2z) = self.stopping_path(tick, t_weak)
        lx, hx = min(x, s1x, s2x, w1x, w2x), max(x, s1x, s2x, w1x, w2x)
        ly, hy = min(y, s1y, s2y, w1y, w2y), max(y, s1y, s2y, w1y, w2y)
        lz, hz = min(z, s1z, s2z, w1z, w2z), max(z, s1z, s2z, w1z, w2z)
        for i, box in enumerate(self.approach_boxes):
            if hx < box[0] or lx > box[3] or hy < box[1] or ly > box[4] or hz < box[2] or lz > box[5]:
                continue
            if inside(x, y, z, box):  # already inside the margin: only moving away is allowed
                raw = self.raw[i]
                cx = min(max(x, raw[0]), raw[3])
                cy = min(max(y, raw[1]), raw[4])
                cz = min(max(z, raw[2]), raw[5])
                if (cx - x) * v[0] + (cy - y) * v[1] + (cz - z) * v[2] > 0.0:
                    tick.reject(self, "approach", f"inside the approach margin of {self.names[i]!r}, moving toward it")
                    return
                continue
            if (
                segment_hits_box(x, y, z, s1x, s1y, s1z, box) or segment_hits_box(s1x, s1y, s1z, s2x, s2y, s2z, box)
                or segment_hits_box(x, y, z, w1x, w1y, w1z, box) or segment_hits_box(w1x, w1y, w1z, w2x, w2y, w2z, box)
            ):
                tick.reject(self, "approach", f"stopping path reaches {self.names[i]!r}")
                return


def _strong_thrust(tick: Tick) -> float:
    return tick.cmd[0] if tick.cmd[0] > tick.thrust_est else tick.thrust_est


def _predicted_speed(tick: Tick, m: DynamicsModel, h: float) -> float:
    r = tick.r
    v = tick.v
    acc = _strong_thrust(tick) / m.mass
    px = v[0] + h * acc * r[2]
    py = v[1] + h * acc * r[5]
    pz = v[2] + h * (acc * r[8] - m.g)
    return math.sqrt(px * px + py * py + pz * pz)
