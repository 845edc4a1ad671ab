"""Subgoals: finite, inside the fence, above the floor, outside obstacles, within the subgoal
radius of the current position. Each violation is clamped (not refused) and reported.

Order: ``non_finite`` (replaced by the current position: hold), then repeated up to four
times until nothing changes: ``fence`` (x, y into the fence shrunk by
``subgoal.fence_margin_m`` + collision radius), ``altitude`` (z into the altitude band),
``radius`` (pulled along the line to the robot to within the subgoal radius), ``obstacle``
(pushed out of any box inflated by ``subgoal.obstacle_margin_m`` + collision radius, through
its nearest face). If the result still violates a constraint, the subgoal becomes the current
position, clamped (``fallback``).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from robot_hrl.errors import ConfigError
from robot_hrl.safety.records import Intervention
from robot_hrl.safety.units.base import ShieldContext, ShieldUnit, Tick
from robot_hrl.safety.units.obstacles import _inflate


class SubgoalCfg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    fence_margin_m: float = Field(ge=0.0)
    obstacle_margin_m: float = Field(ge=0.0)
    min_altitude_m: float = Field(ge=0.0)
    max_altitude_m: float | None = Field(default=None, ge=0.0,
                                         description="above the floor; None: the altitude unit's altitude.max_altitude_m")


class SubgoalUnit(ShieldUnit):
    name = "subgoal"
    constraints = ("non_finite", "fence", "altitude", "radius", "obstacle", "fallback")
    description = "subgoals finite, inside the fence and altitude band, outside obstacles, within the subgoal radius"
    stage = "subgoal"
    section = "subgoal"
    config_model = SubgoalCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "SubgoalUnit":
        cfg = ctx.config
        top = cfg.subgoal.max_altitude_m
        if top is None:
            altitude = getattr(cfg, "altitude", None)
            if altitude is None:
                raise ConfigError("subgoal.max_altitude_m is needed: the shield config has no altitude section to take it from")
            top = altitude.max_altitude_m
        return cls(cfg, ctx.robot, ctx.world, ctx.subgoal_radius_m, ctx.world.bounds.min[2] + top)

    def __init__(self, cfg, robot, world, subgoal_radius_m: float, altitude_max_m: float):
        super().__init__()
        if not (isinstance(subgoal_radius_m, (int, float)) and math.isfinite(subgoal_radius_m) and subgoal_radius_m > 0):
            raise ConfigError(f"subgoal_radius_m must be a positive finite number (the contract's), got {subgoal_radius_m!r}")
        s = cfg.subgoal
        inset = s.fence_margin_m + robot.collision_radius_m
        b = world.bounds
        self.lo = [b.min[0] + inset, b.min[1] + inset, b.min[2] + s.min_altitude_m]
        self.hi = [b.max[0] - inset, b.max[1] - inset, min(altitude_max_m, b.max[2] - inset)]
        for axis in range(3):
            # x and y need room; z may be pinned (a ground robot's subgoals lie on the floor)
            if not (self.lo[axis] < self.hi[axis] or axis == 2 and self.lo[axis] == self.hi[axis]):
                raise ConfigError(
                    f"no subgoal can satisfy the fence on axis {'xyz'[axis]}: [{self.lo[axis]:.3f}, {self.hi[axis]:.3f}] m; "
                    "lower subgoal.fence_margin_m or subgoal.min_altitude_m"
                )
        self.radius = float(subgoal_radius_m)
        self.boxes = tuple(_inflate(bx, robot.collision_radius_m + s.obstacle_margin_m) for bx in world.solid_boxes())
        self.names = tuple(getattr(bx, "name", None) or getattr(bx, "id", "box") for bx in world.solid_boxes())

    def check(self, tick: Tick) -> None:
        """Nothing per tick: subgoals are filtered on arrival (:meth:`filter`, ``Shield.filter_subgoal``)."""

    # ---- the constraints ------------------------------------------------------------------
    def in_fence(self, g) -> bool:
        return all(self.lo[i] <= g[i] <= self.hi[i] for i in range(3))

    def colliding(self, g):
        for i, box in enumerate(self.boxes):
            if box[0] < g[0] < box[3] and box[1] < g[1] < box[4] and box[2] < g[2] < box[5]:
                return i
        return None

    def satisfied(self, g, position) -> bool:
        """Every constraint of this unit holds for subgoal ``g`` seen from ``position``."""
        if not all(math.isfinite(c) for c in g):
            return False
        if not self.in_fence(g) or self.colliding(g) is not None:
            return False
        if position is not None and math.dist(g, position) > self.radius:
            return False
        return True

    def _push_out(self, g, i):
        box = self.boxes[i]
        best = None
        for axis in range(3):
            for face, sign in ((box[axis], -1.0), (box[axis + 3], 1.0)):
                d = abs(g[axis] - face)
                cand = list(g)
                cand[axis] = face + sign * 1e-6
                if not (self.lo[axis] <= cand[axis] <= self.hi[axis]):
                    d += 1e6  # leaves the fence: only if nothing else works
                if best is None or d < best[0]:
                    best = (d, cand)
        return best[1]

    def filter(self, subgoal_w, position_w, now_s: float, record) -> tuple[np.ndarray, list[Intervention]]:
        self.begin()
        g_in = np.asarray(subgoal_w, dtype=np.float64)
        if g_in.shape != (3,):
            raise ValueError(f"subgoal_w must have shape (3,) (x, y, z in the world frame, m), got shape {g_in.shape}")
        pos = None
        if position_w is not None:
            p = np.asarray(position_w, dtype=np.float64)
            if p.shape != (3,):
                raise ValueError(f"position_w must have shape (3,) or be None, got shape {p.shape}")
            if np.all(np.isfinite(p)):
                pos = [float(p[0]), float(p[1]), float(p[2])]
        out: list[Intervention] = []
        g = [float(c) for c in g_in]

        def rec(constraint, before, after, detail=""):
            out.append(record(self, constraint, tuple(before), tuple(after), "clamp", detail))

        if not all(math.isfinite(c) for c in g):
            after = list(pos) if pos is not None else [(lo + hi) / 2 for lo, hi in zip(self.lo, self.hi)]
            rec("non_finite", g, after, "non-finite subgoal replaced by the current position (hold)")
            g = after
        for _ in range(4):
            changed = False
            before = list(g)
            for axis in (0, 1):
                g[axis] = min(max(g[axis], self.lo[axis]), self.hi[axis])
            if g != before:
                rec("fence", before, g, "outside the geofence")
                changed = True
            before = list(g)
            g[2] = min(max(g[2], self.lo[2]), self.hi[2])
            if g != before:
                rec("altitude", before, g, "outside the altitude band")
                changed = True
            if pos is not None:
                d = math.dist(g, pos)
                if d > self.radius:
                    before = list(g)
                    k = self.radius / d * (1.0 - 1e-9)
                    g = [pos[i] + (g[i] - pos[i]) * k for i in range(3)]
                    rec("radius", before, g, f"{d:.2f} m away > subgoal radius {self.radius} m")
                    changed = True
            i = self.colliding(g)
            if i is not None:
                before = list(g)
                g = self._push_out(g, i)
                rec("obstacle", before, g, f"inside {self.names[i]!r} (inflated)")
                changed = True
            if not changed:
                break
        if not self.satisfied(g, pos):
            before = list(g)
            if pos is not None:
                g = [min(max(pos[i], self.lo[i]), self.hi[i]) for i in range(3)]
            rec("fallback", before, g, "no clamped subgoal satisfies every constraint: holding the current position")
        return np.array(g), out
