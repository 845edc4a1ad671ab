"""Stop and slowdown zones from the live range sensors: the obstacle unit without a map.

The ``obstacles`` unit needs the world file's boxes. This one, as Nav2's collision monitor does with its
``range`` and ``scan`` sources (ros-navigation/navigation2, ``nav2_collision_monitor``: ``range.cpp``,
``collision_monitor_node.cpp``), builds its picture from the readings of the range sensors it is given, so a
room nobody mapped is guarded too. Both units can be listed at once (each judges its own source; the most
restrictive outcome wins, as for every unit).

**The picture: a memory of hits, cone by cone.** A single-zone ranger reports the nearest target anywhere in
its cone, so a reading ``r`` that hit something (``min_range_m <= r < memory_range_m``) becomes points on an arc
at range ``r`` across the cone, ``obstacles_angle_rad`` apart (Nav2's range source puts its points on that arc
the same way), in the world frame with the attitude of the tick that takes the reading in (hits on the floor or
the ceiling, from a tilted ranger, are left to the altitude unit). The points go into a
:class:`robot_hrl.sensing.memory.RangeMemory` (the navigate level's memory, ``memory_capacity`` points, one
within ``memory_spacing_m`` of a kept one is not added): a surface seen before is still there when it falls
between the rangers' cones. A reading also clears: kept points inside its cone (:data:`CLEAR_CONE_FRACTION` of the
half angle) nearer than the reading by ``clear_margin_m`` are forgotten (it sees through them; a level ranger only).
The memory lives in the world frame; it is as good as the odometry.

**The rule: approach, not presence** (Nav2's collision monitor's approach behaviour: only the velocity toward
an obstacle is limited). Points are vertical lines (clearances and directions horizontal). For a point at
distance ``rho`` in the horizontal direction ``n``, the family's stopping model gives the travel along ``n``
before the robot stands still under the tick's command (:func:`robot_hrl.safety.stopping.travel_along`: the
command for the reaction time, then the backup's braking), so ``rho - travel`` bounds the distance from that
point to everywhere the robot can be before it stops. Clearances are distances minus the collision radius.

* ``stop``: every point's clearance after the stop must stay at least ``required``, else the command is rejected
  (the backup holds). With ``now`` the clearance of the nearest point now: ``required = stop_distance_m`` while
  ``now`` is larger; inside the stop zone ``required = min_clearance_m + approach_keep_fraction (now -
  min_clearance_m)`` (the approach slows as the clearance shrinks and never reaches ``min_clearance_m``); below
  ``min_clearance_m``, ``required = now`` (only moving away). Motion along a wall or away from it passes: its
  travel toward the wall's points is (about) nothing, while the old rule held the robot whenever it moved toward
  any point of an arc (sliding along a wall included).
* ``slowdown``: a point within ``slowdown_distance_m`` of clearance toward which the robot moves faster than
  ``slowdown_ratio`` times the robot's speed limit: the family's stopping model lowers the command's speed, as
  the ``obstacles`` unit's slowdown does (a clamp). When it cannot, the command goes on to the stop rule, which
  already keeps the robot able to stop.
* ``unseen``: look before you go. A bearing (world frame, horizontal, in sectors of ``obstacles_angle_rad``) no
  level ranger's cone has covered since the unit started is one the picture knows nothing about: a pillar between
  the cones at the start is not in the memory. Along such a bearing the stopping travel
  (:func:`robot_hrl.safety.stopping.travel_along`) may be at most ``unseen_travel_m``, else the command is rejected
  (the backup holds); with ``unseen_within_m``, only while the robot is within that distance of its first measured
  position. The robot moves off slowly until a cone has swept the way it goes (a face-the-velocity heading loop
  turns one there within a few tenths of a second); then the stop rule has the hit in time. Off (None) by default;
  the Crazyflie's range source turns it on (``shield_ranges.yaml``: 0.25 m within 1 m of the start).
* ``unknown``: where no cone has looked, anywhere in the flight. Every level reading marks the cells (a horizontal
  grid of ``unknown_cell_m``, :class:`robot_hrl.sensing.seen_cells.SeenCells`) its cone covers nearer than the reading
  less ``clear_margin_m`` seen empty, as a costmap clears along a ray; the robot's own disk is seen each tick. A cell
  never seen may hold an obstacle anywhere in it: toward the nearest such cell per bearing sector the stopping travel
  must end ``min_clearance_m`` short of the cell, or be at most ``unknown_creep_m``: the robot can creep, since the
  heading loop turns the front cone to where it moves and the cells ahead are seen. A robot flying along its front cone
  has the way ahead seen; one cutting round the end of a wall, into the gap between two cones, is slowed until a cone
  has looked there (a held-out flight met a wall's corner at 0.76 m/s that way: benchmarks/README.md, "Issue #19:
  where no cone has looked"). The creep's premise fails when the yaw is off the motion by more than a cone's half
  angle (about half the moving ticks of a dense flight under the heading loop's lead): a held-out flight whose yaw
  lagged its motion by 17 degrees in a turn crept on at 0.5-0.7 m/s (0.25 m of stopping travel) into a wall face
  between its front and left cones and met it 2 cm from the wall's end. The lag was the hold's: the backup kept the
  heading it found on the ticks this unit refused; with the range source's ``backup.hold_turn_max_rate_dps`` the hold
  keeps the heading loop's yaw torque (robot_hrl/robots/quadrotor/shield/backup.py ``turned_as_commanded``), and that
  flight and the range drills' walks through holds stay off (benchmarks/README.md, "Issue #19: the hold turns the
  cone"). With ``unknown_blind_creep_m`` set, while no
  cone's field of view (its horizontal bearing) holds the way the robot goes (its velocity, or from near hover where
  its command can take it), toward the unknown cells in its path (ahead, within its radius and half a cell of its
  line) the stopping travel must end short of the cell or be at most that beyond its edge. Off by default and in the
  Crazyflie's section: at 0.06 m it kept the contact's flight off the wall but cost about 2.3 s per flight and dense
  successes, and stricter forms stalled robots, since a cone's fan is narrower than the robot for its first 0.28 m and
  the cells at its shoulders stay unknown (benchmarks/README.md, "Issue #19: the creep into the blind sector"). Cells
  beyond ``memory_range_m`` are not asked about. Off (None) by default; the Crazyflie's range source turns it on
  (``shield_ranges.yaml``: a creep of 0.25 m, cells of 0.05 m).
* ``source_timeout``: a listed sensor whose latest reading is older than ``source_timeout_s`` (or that
  never reported) makes the unit reject, as Nav2's collision monitor stops the robot on a stale source
  (navigation2 PR #3880, "Add a watchdog mechanism"). ``source_timeout_s: 0`` turns the check off.

What it cannot see: an obstacle that was never inside any cone (a thin pillar met straight on along a bearing
between two rangers' cones) is not in the picture; docs/safety.md says so. The ``unseen`` rule covers the start
(nothing has been looked at); a bearing once swept counts as looked along for the rest of the run, and with
``unseen_within_m`` the rule ends at that distance from the start.

The node that owns the shield hands readings in with :meth:`RangeObstacleUnit.update` (a
``sensor_msgs/Range`` each: the sensor's name, the range, the stamp).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from robot_hrl.errors import ConfigError, ObservationError
from robot_hrl.safety.stopping import tick_stopping_box, travel_along
from robot_hrl.safety.units.base import ShieldContext, ShieldUnit, Tick

CLEAR_CONE_FRACTION = 1.0
"""A reading clears kept points inside this fraction of its cone's half angle. The whole cone: leaving its edge alone
(0.8) kept more phantoms and let more hostile flights reach the box in the range drill (5 of 103 from any bearing
instead of 4; benchmarks/README.md, "Issue #19: the picture's resolution")."""
LEVEL_SIN = math.sin(math.radians(10.0))
"""A ranger clears only while its axis is within 10 degrees of level (a tilted cone passes over or under
what a level one saw)."""
SURFACE_BAND_M = 0.1
"""A hit this close to the world's floor or ceiling is the floor or the ceiling (the altitude unit's)."""


class RangeObstaclesCfg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    sensors: tuple[str, ...] = Field(min_length=1, description="the robot's rangers that feed the zones (robot_hrl.sensing)")
    stop_distance_m: float = Field(ge=0.0, description="clearance the stopping path keeps from every remembered point")
    slowdown_distance_m: float = Field(ge=0.0)
    slowdown_ratio: float = Field(gt=0.0, le=1.0)
    source_timeout_s: float = Field(ge=0.0, description="a sensor silent this long makes the unit reject (0: off)")
    obstacles_angle_rad: float = Field(gt=0.0, le=math.pi, description="spacing of the points on a reading's arc")
    min_clearance_m: float = Field(ge=0.0, description="inside the stop zone the approach never brings the stopping path this close")
    approach_keep_fraction: float = Field(ge=0.0, le=1.0, description="inside the stop zone the stopping path keeps this fraction "
                                                                      "of the clearance beyond min_clearance_m")
    memory_range_m: float = Field(gt=0.0, description="hits at most this far are remembered")
    memory_capacity: int = Field(ge=1, description="points remembered (a ring: the oldest goes first)")
    memory_spacing_m: float = Field(ge=0.0, description="a hit this close to a remembered point is not added (it renews that one)")
    memory_age_s: float = Field(gt=0.0, description="a remembered point seen from one place only is forgotten when not seen "
                                                    "again for this long (never one inside the stop zone plus the "
                                                    "stopping reach)")
    confirm_angle_rad: float = Field(ge=0.0, le=math.pi, description="a point seen again along a line of sight this far "
                                                                     "turned from the first is confirmed (kept until a "
                                                                     "ranger sees through it)")
    clear_margin_m: float = Field(ge=0.0, description="a reading forgets points in its cone nearer than it by this much")
    unseen_travel_m: float | None = Field(None, ge=0.0, description="along a bearing no level ranger has looked along "
                                                                    "since the unit started, the stopping travel is at "
                                                                    "most this (None: the rule is off)")
    unseen_within_m: float | None = Field(None, gt=0.0, description="the unseen rule acts only while the robot is within "
                                                                    "this horizontal distance of its first measured "
                                                                    "position (None: everywhere)")
    unknown_creep_m: float | None = Field(None, ge=0.0, description="toward a cell no level ranger's cone has seen "
                                                                   "empty, the stopping travel leaves min_clearance_m "
                                                                   "before it, or is at most this (None: the rule is "
                                                                   "off)")
    unknown_blind_creep_m: float | None = Field(None, ge=0.0, description="while no cone's field of view holds the way "
                                                                        "the robot goes, toward the unknown cells in "
                                                                        "its path the stopping travel ends short of the "
                                                                        "cell or at most this beyond its edge (None: "
                                                                        "the creep holds whatever the yaw)")
    unknown_cell_m: float = Field(0.05, gt=0.0, le=0.5, description="side of the cells the unknown rule keeps "
                                                                    "(robot_hrl.sensing.seen_cells)")

    @model_validator(mode="after")
    def _ordered(self) -> "RangeObstaclesCfg":
        if self.slowdown_distance_m < self.stop_distance_m:
            raise ValueError(f"range_obstacles.slowdown_distance_m ({self.slowdown_distance_m}) must be >= "
                             f"range_obstacles.stop_distance_m ({self.stop_distance_m})")
        if self.min_clearance_m > self.stop_distance_m:
            raise ValueError(f"range_obstacles.min_clearance_m ({self.min_clearance_m}) must be <= "
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
    constraints = ("stop", "slowdown", "unseen", "unknown", "source_timeout")
    description = "stop and slowdown zones from the live range sensors and a memory of their hits (no map)"
    stage = "envelope"
    section = "range_obstacles"
    config_model = RangeObstaclesCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "RangeObstacleUnit":
        from robot_hrl.sensing import robot_range_sensors

        return cls(ctx.config, ctx.model, robot_range_sensors(ctx.robot), ctx.world)

    def __init__(self, cfg, model, sensors, world=None):
        super().__init__()
        from robot_hrl.sensing.memory import MemoryGeometry, RangeMemory
        from robot_hrl.sensing.seen_cells import SeenCells

        o = cfg.range_obstacles
        by_name = {s.name: s for s in sensors}
        missing = [n for n in o.sensors if n not in by_name]
        if missing:
            raise ConfigError(f"range_obstacles.sensors: {missing} are not the robot's rangers {list(by_name)} "
                              "(robot_hrl/robots/<robot>/rangers.py)")
        self.m = model
        self.specs = tuple(by_name[n] for n in o.sensors)
        self.index = {n: i for i, n in enumerate(o.sensors)}
        self.arcs = tuple(np.array(_arc_b(s, o.obstacles_angle_rad)) for s in self.specs)
        self.angle_step = o.obstacles_angle_rad
        self.radius = model.collision_radius_m
        self.stop_distance_m = o.stop_distance_m
        self.min_clearance_m = o.min_clearance_m
        self.keep = o.approach_keep_fraction
        self.slowdown_distance_m = o.slowdown_distance_m
        self.slow_speed = o.slowdown_ratio * model.max_speed_mps
        self.speed_h = model.speed_horizon_s
        self.timeout = o.source_timeout_s
        self.memory_range_m = o.memory_range_m
        self.clear_margin_m = o.clear_margin_m
        self.clear_cos = tuple(math.cos(CLEAR_CONE_FRACTION * 0.5 * s.field_of_view_rad) for s in self.specs)
        self.memory = RangeMemory(MemoryGeometry.of(o.sensors, self.specs), o.memory_capacity, o.memory_spacing_m, 1,
                                  o.memory_range_m, fill_empty_first=True)
        """The world-frame hits (robot_hrl.sensing.memory; its points are the unit's picture). Empty slots are written
        first: a live point goes only when all ``memory_capacity`` are live."""
        self.memory_age_s = o.memory_age_s
        self.renew_m = max(o.memory_spacing_m, 1e-3)
        self.confirm_cos = math.cos(o.confirm_angle_rad)
        self.seen_s = np.full(o.memory_capacity, -math.inf)
        """When each slot of the memory's ring was last seen (written or renewed), s."""
        self.origin_w = np.zeros((o.memory_capacity, 2))
        """Where the ranger was that first saw each slot's point (world, horizontal), m."""
        self.confirmed = np.zeros(o.memory_capacity, dtype=bool)
        """Seen again along a line of sight ``confirm_angle_rad`` turned from the first one: a target (two arcs cross
        there), not one of the places a single arc left open (those move with the ranger)."""
        self.unseen_travel_m = o.unseen_travel_m
        self.unseen_within_m = o.unseen_within_m
        self.start_xy: tuple[float, float] | None = None
        """The robot's first measured horizontal position since the unit started (the ``unseen`` rule's start), m."""
        sectors = max(int(math.ceil(2.0 * math.pi / o.obstacles_angle_rad)), 1)
        centre = -math.pi + (np.arange(sectors) + 0.5) * (2.0 * math.pi / sectors)
        self.sector_w = np.stack([np.cos(centre), np.sin(centre)], axis=1)
        """Each sector's centre bearing as a world unit vector (horizontal; ``obstacles_angle_rad`` wide or just under)."""
        self.look_cos = tuple(math.cos(0.5 * s.field_of_view_rad) for s in self.specs)
        self.directions_b = np.array([s.direction_b for s in self.specs], dtype=np.float64)
        """The rangers' axes (S, 3), body frame (:meth:`_a_cone_looks_along` turns them all at once)."""
        """A sector whose centre is within a cone's half angle of its axis is looked along by its reading."""
        self.looked = np.zeros(sectors, dtype=bool)
        """Sectors some level ranger's cone has covered since the unit started (the ``unseen`` rule's picture)."""
        self.unknown_creep_m = o.unknown_creep_m
        self.unknown_blind_creep_m = o.unknown_blind_creep_m
        self.seen_cells = SeenCells(o.unknown_cell_m, slots=max(128, int(math.ceil(2.0 * (o.memory_range_m + 1.0)
                                                                                 / o.unknown_cell_m))))
        """The cells some level cone has seen empty (the ``unknown`` rule's picture; a torus wider than twice the
        farthest look plus a margin, so a cell within reach is never aliased)."""
        bounds = getattr(world, "bounds", None)
        self.floor_z = float(bounds.min[2]) + SURFACE_BAND_M if bounds is not None else -math.inf
        self.ceiling_z = float(bounds.max[2]) - SURFACE_BAND_M if bounds is not None else math.inf
        self.reset()

    def reset(self) -> None:
        self.range_m = [math.nan] * len(self.specs)
        self.stamp_s = [-math.inf] * len(self.specs)
        self.fresh = [False] * len(self.specs)
        self.memory.reset()
        self.seen_s[:] = -math.inf
        self.confirmed[:] = False
        self.looked[:] = False
        self.seen_cells.reset()
        self.start_xy = None

    def update(self, sensor: str, range_m: float, stamp_s: float) -> bool:
        """The latest reading of ``sensor`` (a sensor_msgs/Range), REP 117's way: +inf (or anything at or beyond
        ``max_range_m``) is no target; -inf (or anything below ``min_range_m``) a target too close to measure,
        kept as one at ``min_range_m``. False (and ignored) for a sensor the unit does not listen to.
        ObservationError (the reading is dropped: the sensor goes stale, and ``source_timeout`` acts) for a NaN or
        negative range or a non-finite stamp. The next tick with a measured state takes it into the memory."""
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
        self.fresh[i] = True
        return True

    # ---- the picture ----------------------------------------------------------------------------
    def _take_in(self, tick: Tick) -> None:
        """Every fresh reading into the memory, with this tick's pose: first what it sees through, then its hits."""
        rot = np.array(tick.r, dtype=np.float64).reshape(3, 3)
        p = np.array(tick.p, dtype=np.float64)
        mem = self.memory
        body = mem.points_w[0] - p[:2]
        d2 = (body * body).sum(-1)
        guarded = self.radius + self.stop_distance_m + self._reach(tick)
        stale = ~self.confirmed & (self.seen_s < tick.now - self.memory_age_s) & (d2 > guarded * guarded)
        stale |= d2 < self.radius * self.radius                       # where the robot has got to, nothing was (this
        if stale.any():                                               # tick's own readings may put a contact back)
            mem.forget(stale[None])
            self.seen_s[stale] = math.inf                              # an empty slot
        for i, spec in enumerate(self.specs):
            if not self.fresh[i]:
                continue
            self.fresh[i] = False
            r = self.range_m[i]
            origin = p + rot @ np.asarray(spec.offset_b)
            axis = rot @ np.asarray(spec.direction_b)
            horizontal = math.hypot(axis[0], axis[1])
            if abs(axis[2]) < LEVEL_SIN and horizontal > 0.0:
                if self.unseen_travel_m is not None:  # the sectors whose centre the cone covers are looked along
                    inside = (self.sector_w @ axis[:2]) >= self.look_cos[i] * horizontal
                    self.looked |= inside
                if self.unknown_creep_m is not None:  # the cone is empty nearer than the reading (less the margin)
                    see = min(spec.max_range_m if math.isinf(r) else r, self.memory_range_m) - self.clear_margin_m
                    if see > 0.0:
                        self.seen_cells.see_cone(origin[:2], axis[:2], 0.5 * spec.field_of_view_rad, see,
                                                 0.7 * self.seen_cells.cell_m / see)
                reach = (spec.max_range_m if math.isinf(r) else r) - self.clear_margin_m
                rel = mem.points_w[0] - origin[:2]
                dist = np.sqrt((rel * rel).sum(-1))
                along = (rel[:, 0] * axis[0] + rel[:, 1] * axis[1]) / horizontal
                seen_through = (dist < reach) & (along >= self.clear_cos[i] * dist)
                if seen_through.any():
                    mem.forget(seen_through[None])
            if not r < self.memory_range_m:
                continue
            points = origin + r * (self.arcs[i] @ rot.T)                                  # (J, 3)
            keep = (points[:, 2] > self.floor_z) & (points[:, 2] < self.ceiling_z)
            if keep.any():
                hits = points[keep, :2]
                gap = mem.points_w[0][None] - hits[:, None]
                renew = max(self.renew_m, 0.5 * r * self.angle_step)                     # half the arc's spacing
                renewed = ((gap * gap).sum(-1) < renew * renew).any(0)
                self.seen_s[renewed] = tick.now                                             # seen again
                at = mem.points_w[0][renewed]
                first, again = self.origin_w[renewed] - at, origin[:2] - at
                cos = (first * again).sum(-1) / np.maximum(np.sqrt((first * first).sum(-1) * (again * again).sum(-1)), 1e-12)
                self.confirmed[renewed] |= cos <= self.confirm_cos
                written = np.flatnonzero(mem.add_points_w(points[None, :, :2], keep[None])[0])
                self.seen_s[written] = tick.now
                self.origin_w[written] = origin[:2]
                self.confirmed[written] = False

    # ---- the rules --------------------------------------------------------------------------------
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
        if any(self.fresh):
            self._take_in(tick)
        if self.start_xy is None:
            self.start_xy = (float(tick.p[0]), float(tick.p[1]))
        if self.unknown_creep_m is not None:  # where the robot is, nothing else is
            self.seen_cells.see_disk(tick.p[:2], self.radius)
        if not self._hits(tick):
            return
        if self.unseen_travel_m is not None and not self.looked.all() and self._near_start(tick):
            if not self._unseen(tick):
                return
        if self.unknown_creep_m is not None:
            self._unknown(tick)

    def _near_start(self, tick: Tick) -> bool:
        """Whether the ``unseen`` rule acts here: within ``unseen_within_m`` of the start (always without it)."""
        if self.unseen_within_m is None:
            return True
        return math.hypot(tick.p[0] - self.start_xy[0], tick.p[1] - self.start_xy[1]) <= self.unseen_within_m

    def _hits(self, tick: Tick) -> bool:
        """The ``stop`` and ``slowdown`` rules on the remembered hits; False when the command was rejected."""
        p, v = tick.p, tick.v
        rel = self.memory.points_w[0] - (p[0], p[1])
        dist = np.sqrt((rel * rel).sum(-1))
        radius = self.radius
        now = float(dist.min()) - radius
        if now >= self.slowdown_distance_m and now >= self.stop_distance_m + self._reach(tick):
            return True
        if now <= self.min_clearance_m:
            required = now
        else:
            required = min(self.stop_distance_m, self.min_clearance_m + self.keep * (now - self.min_clearance_m))
        # every point the stopping path could bring inside the required clearance, nearest first
        near = np.flatnonzero(dist < radius + required + self._reach(tick))
        m = self.m
        for k in near[np.argsort(dist[near])].tolist():
            rho = float(dist[k])
            if rho < 1e-6:
                n = (v[0], v[1], 0.0)  # at the point itself: any motion approaches it
                s = math.hypot(v[0], v[1])
                n = (n[0] / s, n[1] / s, 0.0) if s > 0.0 else (1.0, 0.0, 0.0)
            else:
                n = (float(rel[k, 0]) / rho, float(rel[k, 1]) / rho, 0.0)
            travel = travel_along(m, tick, n)
            after = rho - travel - radius
            if after < required - 1e-9:
                tick.reject(self, "stop", f"a remembered range hit {rho - radius:.3f} m of clearance away (nearest "
                                          f"{now:.3f} m); stopping travel toward it {travel:.3f} m would leave "
                                          f"{after:.3f} m < {required:.3f} m")
                return False
        self._slowdown(tick, rel, dist, now)
        return True

    def _unseen(self, tick: Tick) -> bool:
        """The ``unseen`` rule, after the hits' rules (a command they slowed is judged slowed); False when it rejected.
        The stopping box's support along each unseen sector bounds the travel there (looser, never smaller:
        :func:`travel_along`), so only sectors whose support exceeds the limit are asked of the stopping model,
        farthest first."""
        limit = self.unseen_travel_m
        n = self.sector_w[~self.looked]
        support = self._box_support(tick, n)
        for k in np.flatnonzero(support > limit)[np.argsort(-support[support > limit])].tolist():
            d = (float(n[k, 0]), float(n[k, 1]), 0.0)
            travel = travel_along(self.m, tick, d)
            if travel > limit + 1e-9:
                bearing = math.degrees(math.atan2(d[1], d[0]))
                tick.reject(self, "unseen", f"stopping travel {travel:.3f} m toward bearing {bearing:.0f} deg (world), "
                                            f"which no ranger has looked along yet, > unseen_travel_m {limit:.3f} m; "
                                            "the robot goes slower until a cone has swept that way")
                return False
        return True

    def _unknown(self, tick: Tick) -> None:
        """The ``unknown`` rule, after the others: every cell within the stopping reach that no level cone has seen
        empty may hold an obstacle anywhere in it. Toward each (the nearest per bearing sector), the stopping travel
        must leave ``min_clearance_m``, or be at most ``unknown_creep_m`` (the heading loop turns the front cone to
        where the robot moves, and the cells ahead are seen). While no cone looks the way the robot goes
        (:meth:`_way_it_goes`, :meth:`_a_cone_looks_along`) and ``unknown_blind_creep_m`` is set, toward the cells
        in its path the creep is only that beyond the cell's edge."""
        creep = self.unknown_creep_m
        reach = self._reach(tick)
        blind = self.unknown_blind_creep_m
        way = None if blind is None else self._way_it_goes(tick)
        looking = way is None or self._a_cone_looks_along(tick, way)
        if reach <= creep and (looking or reach <= blind):
            return  # the robot stops within the creep it has wherever it goes
        p = tick.p
        half_diag = 0.5 * math.sqrt(2.0) * self.seen_cells.cell_m
        look = min(self.radius + self.min_clearance_m + reach + half_diag, self.memory_range_m)  # the hits' horizon too
        centres = self.seen_cells.unknown_near(p[:2], look)
        if len(centres) == 0:
            return
        rel = centres - (p[0], p[1])
        rho = np.sqrt((rel * rel).sum(-1))
        free = np.maximum(rho - half_diag - self.radius, 0.0)  # travel that would bring the robot to the cell's edge
        allowed = np.maximum(free - self.min_clearance_m, creep)
        if not looking:  # the cells in the robot's path: only unknown_blind_creep_m beyond their edge
            ahead = rel @ way
            lateral = np.abs(rel[:, 0] * way[1] - rel[:, 1] * way[0])
            in_path = (ahead > 0.0) & (lateral < self.radius + half_diag)
            allowed = np.where(in_path, np.maximum(free - self.min_clearance_m, np.minimum(creep, np.maximum(free, blind))),
                               allowed)
        sector = self._sector_of(rel)
        limit = np.full(len(self.sector_w), np.inf)
        np.minimum.at(limit, sector, allowed)
        n = self.sector_w
        support = self._box_support(tick, n)
        over = np.flatnonzero(support > limit)
        for k in over[np.argsort(limit[over] - support[over])].tolist():
            d = (float(n[k, 0]), float(n[k, 1]), 0.0)
            travel = travel_along(self.m, tick, d)
            if travel > limit[k] + 1e-9:
                bearing = math.degrees(math.atan2(d[1], d[0]))
                tick.reject(self, "unknown", f"stopping travel {travel:.3f} m toward bearing {bearing:.0f} deg (world), "
                                             f"> {limit[k]:.3f} m: space no ranger has seen empty lies that way; the "
                                             "robot goes slower until a cone has looked there")
                return

    GOING_SPEED_MPS = 0.1
    """Above this horizontal speed the way the robot goes is its velocity's direction; below it, the direction of the
    stopping box's farthest corner (where the command can take it)."""

    def _way_it_goes(self, tick: Tick) -> np.ndarray | None:
        """The horizontal unit direction the robot goes (world): its velocity's above :attr:`GOING_SPEED_MPS`, else
        toward the stopping box's farthest corner (where its command can take it); None when it stands still."""
        v, p = tick.v, tick.p
        speed = math.hypot(v[0], v[1])
        if speed >= self.GOING_SPEED_MPS:
            return np.array([v[0] / speed, v[1] / speed])
        x0, x1, y0, y1, _, _, _ = tick_stopping_box(self.m, tick)
        dx = x1 - p[0] if x1 - p[0] >= p[0] - x0 else x0 - p[0]
        dy = y1 - p[1] if y1 - p[1] >= p[1] - y0 else y0 - p[1]
        h = math.hypot(dx, dy)
        return None if h < 1e-6 else np.array([dx / h, dy / h])

    def _a_cone_looks_along(self, tick: Tick, way: np.ndarray) -> bool:
        """Whether a cone's field of view holds the horizontal direction ``way`` now: the ``unknown`` rule's
        creep is for a robot whose cone looks ahead of it (the cells it creeps toward are seen as it goes). One whose
        yaw lags its motion by more than the cone's half angle, as the heading loop does in a quick turn, goes where
        no cone will look. The cones' horizontal bearings count, tilted or not: a robot tilts to accelerate and brake,
        and levels again while it goes on (a tilted cone sees nothing into the cells meanwhile)."""
        axes = self.directions_b @ np.array(tick.r, dtype=np.float64).reshape(3, 3).T   # (S, 3), world
        horizontal = np.hypot(axes[:, 0], axes[:, 1])
        return bool(np.any((horizontal > 0.0) & (axes[:, :2] @ way >= np.asarray(self.look_cos) * horizontal)))

    def _box_support(self, tick: Tick, n: np.ndarray) -> np.ndarray:
        """How far the stopping box reaches from the robot along each horizontal unit direction ``n`` (K, 2), m: a
        bound on :func:`travel_along` there (looser, never smaller), so the model is asked only where it exceeds a
        limit (the ``unseen`` and ``unknown`` rules)."""
        x0, x1, y0, y1, _, _, _ = tick_stopping_box(self.m, tick)
        p = tick.p
        return (np.maximum(n[:, 0] * (x0 - p[0]), n[:, 0] * (x1 - p[0]))
                + np.maximum(n[:, 1] * (y0 - p[1]), n[:, 1] * (y1 - p[1])))

    def _sector_of(self, rel: np.ndarray) -> np.ndarray:
        """The bearing sector (index into ``sector_w``) of each horizontal world offset (K, 2)."""
        sectors = len(self.sector_w)
        a = np.arctan2(rel[:, 1], rel[:, 0])
        return np.clip(((a + math.pi) * (sectors / (2.0 * math.pi))).astype(np.int64), 0, sectors - 1)

    HOLD_PUSH_MAX_M = 0.25
    """The hold target moves at most this far off the remembered hits (:meth:`hold_clear_of_hits`)."""

    def hold_clear_of_hits(self, x: float, y: float) -> tuple[float, float]:
        """Where the backup holds instead of ``(x, y)``: away from the nearest remembered hits until every one is
        at least halfway between ``min_clearance_m`` and ``stop_distance_m`` of clearance, by at most
        ``HOLD_PUSH_MAX_M``. A robot held at the edge of what the rule allows would stay there: from the pushed
        target the policy can pass beside the hit instead of being held against it (the shield's safe_position).
        A step is taken only where it leaves the nearest hit farther than before (halved up to
        :attr:`HOLD_PUSH_HALVINGS` times until it does): between two walls nearer than that, a push off one must
        not carry the target into the other (a training-split flight held 0.4 s against a wall that way,
        benchmarks/README.md, "Issue #19: where no cone has looked"); the target then stops where the two are
        balanced."""
        pts = self.memory.points_w[0]
        keep = self.radius + 0.5 * (self.min_clearance_m + self.stop_distance_m)
        budget = self.HOLD_PUSH_MAX_M

        def nearest(qx: float, qy: float) -> tuple[int, float, np.ndarray]:
            rel = np.array([qx, qy]) - pts
            dist = np.sqrt((rel * rel).sum(-1))
            k = int(np.argmin(dist))
            return k, float(dist[k]), rel[k]

        k, near, rel = nearest(x, y)
        for _ in range(4):
            short = keep - near
            if short <= 1e-6 or budget <= 1e-6 or near < 1e-6:
                break
            step = min(short, budget)
            for _ in range(self.HOLD_PUSH_HALVINGS + 1):
                qx, qy = x + step * float(rel[0]) / near, y + step * float(rel[1]) / near
                k2, near2, rel2 = nearest(qx, qy)
                if near2 > near + 1e-6:
                    break
                step *= 0.5
            else:
                break  # no step off the nearest hit leaves every hit farther: stay
            x, y, budget = qx, qy, budget - step
            k, near, rel = k2, near2, rel2
        return x, y

    HOLD_PUSH_HALVINGS = 4
    """How many times :meth:`hold_clear_of_hits` halves a step that would bring another hit nearer."""

    def _reach(self, tick: Tick) -> float:
        """How far (horizontally) the robot can get before it stands still: the stopping box's farthest corner."""
        x0, x1, y0, y1, _, _, _ = tick_stopping_box(self.m, tick)
        p = tick.p
        return math.hypot(max(x1 - p[0], p[0] - x0), max(y1 - p[1], p[1] - y0))

    def _slowdown(self, tick: Tick, rel, dist, now: float) -> None:
        if now >= self.slowdown_distance_m:
            return
        v = tick.v
        inside = np.flatnonzero(dist < self.radius + self.slowdown_distance_m)
        d = np.maximum(dist[inside], 1e-9)
        toward = float(((rel[inside, 0] * v[0] + rel[inside, 1] * v[1]) / d).max())
        if toward <= self.slow_speed:
            return
        speed = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
        vh = self.m.predicted_speed(tick, self.speed_h)
        if vh > self.slow_speed + 1e-6 and vh >= speed:
            before = tuple(tick.cmd)
            slowed = self.m.slowdown(tick, self.speed_h, self.slow_speed)
            if slowed is None:
                return  # the stop rule already keeps the robot able to stop before every point
            cmd, change = slowed
            tick.cmd[:] = cmd
            tick.record(self, "slowdown", before, tuple(tick.cmd),
                        detail=f"{change}: {toward:.2f} m/s toward a range hit {now:.2f} m of clearance away "
                               f"(limit {self.slow_speed:.2f} m/s)")
