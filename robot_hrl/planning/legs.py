"""The robot-neutral leg search: collision-free paths between points in a world of boxes.

Each leg is planned for the leg's altitude band: a straight line when it is in sight; among the
world's boxes the exact any-angle visibility graph of their inflated octagons
(:mod:`robot_hrl.planning.visibility`); on a map image, or when the graph finds no path,
weighted A* on the 8-connected inflated 2.5-D grid (:class:`~robot_hrl.planning.grid.FlightGrid`,
first on a coarser grid), then line-of-sight shortcutting. Altitude changes linearly along a
leg; a leg with no horizontal extent is a vertical column, checked against every box.

Nothing here knows what moves: the robot is a disc (sphere) of ``PlannerConfig.robot_radius_m``
plus ``safety_margin_m``. The verbs of a robot (a flying robot's takeoff, land and hover:
:mod:`robot_hrl.planning.aerial`) are built on it.
"""

from __future__ import annotations

import math

import numpy as np

from robot_hrl.errors import PlanningError
from robot_hrl.planning.config import PlannerConfig
from robot_hrl.planning.grid import FlightGrid
from robot_hrl.planning.maps import OccupancyMap, check_map_matches_world, occupied_rectangles
from robot_hrl.planning.search import astar, line_of_sight, shortcut, turning_points
from robot_hrl.planning.untrusted import show
from robot_hrl.planning.visibility import OctagonVisibilityGraph
from robot_hrl.world import Box, World


def _fmt(p) -> str:
    """A point for a message: centimetres, or 4 significant digits when it is far out (1e308)."""
    return "(" + ", ".join(f"{float(v):.2f}" if abs(float(v)) < 1e6 else f"{float(v):.4g}" for v in p) + ")"


class LegSearch:
    """Collision-free 3-D polylines between points of a world (and its optional map) for a robot of
    ``config.robot_radius_m``; caches legs, visibility graphs and coarse grids."""

    def __init__(self, world: World, config: PlannerConfig, occupancy_map: OccupancyMap | None = None):
        self.world = world
        self.config = config
        inflation = config.inflation_m  # checks robot_radius_m
        self._map_boxes: list[Box] = []
        if occupancy_map is not None:
            check_map_matches_world(occupancy_map, world)
            self._map_boxes = self._boxes_of_map(occupancy_map) or []
        self.grid = FlightGrid(world, config.resolution_m, inflation, occupancy_map, tuple(self._map_boxes))
        self._legs: dict[tuple, np.ndarray | None] = {}
        self._use_graph = config.use_visibility_graph and (occupancy_map is None or bool(self._map_boxes))
        self._graphs: dict[tuple, OctagonVisibilityGraph] = {}
        self._coarse: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.stats = {"graph_legs": 0, "grid_legs": 0, "straight_legs": 0}
        """How legs were planned (for benchmarks and diagnostics)."""

    def _boxes_of_map(self, grid_map: OccupancyMap) -> list[Box] | None:
        """The map's occupied cells as full-height boxes inside the bounds (None if too many)."""
        rects = occupied_rectangles(grid_map, self.config.max_map_boxes)
        if rects is None:
            return None
        (bx0, by0, bz0), (bx1, by1, bz1) = self.world.bounds.min, self.world.bounds.max
        res, (ox, oy) = grid_map.resolution, grid_map.origin
        boxes = []
        for r0, r1, c0, c1 in rects:
            x0, x1 = max(ox + c0 * res, bx0 - 1.0), min(ox + c1 * res, bx1 + 1.0)
            y0, y1 = max(oy + r0 * res, by0 - 1.0), min(oy + r1 * res, by1 + 1.0)
            if x1 <= x0 or y1 <= y0:
                continue
            boxes.append(Box(center=((x0 + x1) / 2, (y0 + y1) / 2, (bz0 + bz1) / 2),
                             size=(x1 - x0, y1 - y0, (bz1 - bz0) + 2.0)))
        return boxes if boxes else None

    def boxes(self) -> list[tuple[str, Box]]:
        named = [(getattr(b, "name", None) or getattr(b, "id"), b) for b in self.world.solid_boxes()]
        named += [("an occupied map cell", b) for b in getattr(self, "_map_boxes", [])]
        return named + [("added obstacle", b) for b in self.grid.added_boxes]

    def box_arrays(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        n = len(self.grid.added_boxes)
        if getattr(self, "_arrays_for", None) != n:
            named = self.boxes()
            self._arrays = ([nm for nm, _ in named], np.array([b.lower for _, b in named]).reshape(-1, 3),
                            np.array([b.upper for _, b in named]).reshape(-1, 3))
            self._arrays_for = n
        return self._arrays

    def box_distances(self, p: np.ndarray) -> tuple[list[str], np.ndarray]:
        """Names of all boxes and the distance from p to each (0 inside)."""
        names, lower, upper = self.box_arrays()
        d = np.maximum(np.maximum(lower - p, p - upper), 0.0)
        return names, np.linalg.norm(d, axis=1)

    def check_point(self, p: np.ndarray, what: str) -> None:
        if not np.all(np.isfinite(p)):
            raise PlanningError(f"{what} {p.tolist()} is not finite")
        b = self.world.bounds
        if not b.contains(p):
            raise PlanningError(f"{what} {_fmt(p)} is outside the map: the bounds are x {b.min[0]:g}..{b.max[0]:g}, "
                                f"y {b.min[1]:g}..{b.max[1]:g}, z {b.min[2]:g}..{b.max[2]:g} m")
        names, dist = self.box_distances(p)
        if len(dist) == 0:
            return
        inside = np.nonzero(dist <= 0.0)[0]
        if len(inside):
            raise PlanningError(f"{what} {_fmt(p)} is inside obstacle {names[inside[0]]!r}")
        r = self.config.inflation_m
        k = int(np.argmin(dist))
        if dist[k] < r:
            raise PlanningError(f"{what} {_fmt(p)} is {dist[k]:.2f} m from obstacle {names[k]!r}; "
                                f"it must be at least {r:.2f} m away (robot radius + margin)")

    def check_cell_clear(self, p: np.ndarray, what: str) -> None:
        """The point's cell of the grid is free at its own altitude (the grid's inflation)."""
        blocked = self.grid.blocked(p[2], p[2])
        ix, iy = self.grid.cell_index(p[:2])
        if blocked[iy, ix]:
            names = self.grid.blocking_boxes(p[:2], p[2], p[2]) or ["an obstacle"]
            raise PlanningError(f"{what} {_fmt(p)} is too close to {', '.join(names)} to reach "
                                f"(obstacles are inflated by {self.config.inflation_m:.2f} m)")

    def check_start(self, start_position_w) -> np.ndarray:
        """The robot's position as a start: x, y, z, finite, inside the bounds, not inside a box."""
        try:
            start = np.asarray(start_position_w, dtype=np.float64).reshape(3)
        except (ValueError, TypeError, OverflowError):
            raise PlanningError(f"the start position must be x, y, z in metres, got {show(repr(start_position_w))}") from None
        if not np.all(np.isfinite(start)):
            raise PlanningError(f"the start position {start.tolist()} is not finite")
        b = self.world.bounds
        if not b.contains(start):
            raise PlanningError(f"the start position {_fmt(start)} is outside the map bounds {b.min}..{b.max}")
        names, dist = self.box_distances(start)
        if len(dist) and dist.min() <= 0.0:
            raise PlanningError(f"the start position {_fmt(start)} is inside obstacle {names[int(np.argmin(dist))]!r}")
        return start

    def vertical(self, a: np.ndarray, b: np.ndarray, what: str) -> np.ndarray:
        """A vertical leg; its column must be clear of obstacles."""
        r = self.config.inflation_m
        names, lower, upper = self.box_arrays()
        z_lo, z_hi = min(a[2], b[2]), max(a[2], b[2])
        for k in range(len(names)):
            dxy = np.linalg.norm(np.maximum(np.maximum(lower[k, :2] - a[:2], a[:2] - upper[k, :2]), 0.0))
            if dxy >= r:
                continue
            # The column's closest approach in z to the box, given its horizontal distance.
            reach = math.sqrt(max(r * r - dxy * dxy, 0.0))
            if lower[k, 2] - reach < z_hi and upper[k, 2] + reach > z_lo:
                z = float(np.clip(upper[k, 2] + reach, z_lo, z_hi))
                raise PlanningError(f"cannot {what} at {_fmt(a[:2])}: obstacle {names[k]!r} is in the way "
                                    f"below z = {z:.2f} m; move to a clear spot first (e.g. `goto X Y Z`)")
        return np.stack([a, b])


    def _nearest_free(self, blocked: np.ndarray, cell: tuple[int, int]) -> tuple[int, int] | None:
        reach = int(math.ceil(self.config.start_escape_m / self.config.resolution_m))
        ix, iy = cell
        r0, r1 = max(iy - reach, 0), min(iy + reach + 1, blocked.shape[0])
        c0, c1 = max(ix - reach, 0), min(ix + reach + 1, blocked.shape[1])
        free = np.argwhere(~blocked[r0:r1, c0:c1])
        if len(free) == 0:
            return None
        d = (free[:, 0] + r0 - iy) ** 2 + (free[:, 1] + c0 - ix) ** 2
        k = int(np.argmin(d))
        return int(free[k, 1] + c0), int(free[k, 0] + r0)

    def leg(self, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        """A collision-free 3-D polyline from a to b (both included), or None if b is unreachable."""
        key = (tuple(np.round(a, 4)), tuple(np.round(b, 4)), len(self.grid.added_boxes))
        if key in self._legs:
            return self._legs[key]
        path = self._leg(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
        self._legs[key] = path
        return path

    def _graph(self, z_lo: float, z_hi: float) -> OctagonVisibilityGraph:
        """The visibility graph of the boxes that reach the altitude band (cached per set of boxes)."""
        r = self.config.inflation_m
        _, lower, upper = self.box_arrays()
        meets = (lower[:, 2] - r <= z_hi) & (upper[:, 2] + r >= z_lo)
        key = (len(lower), *np.nonzero(meets)[0].tolist())
        graph = self._graphs.get(key)
        if graph is None:
            lo, hi = lower[meets], upper[meets]
            arr = np.column_stack([(lo[:, :2] + hi[:, :2]) / 2, (hi[:, :2] - lo[:, :2]) / 2])
            (x0, y0, _), (x1, y1, _) = self.world.bounds.min, self.world.bounds.max
            graph = OctagonVisibilityGraph(arr, r, (x0 + r, y0 + r, x1 - r, y1 - r))
            self._graphs[key] = graph
        return graph

    def _with_altitude(self, xy: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        xy = np.array(xy, dtype=np.float64)
        xy[0], xy[-1] = a[:2], b[:2]
        seg = np.linalg.norm(np.diff(xy, axis=0), axis=1)
        frac = np.concatenate([[0.0], np.cumsum(seg)]) / max(seg.sum(), 1e-12)
        return np.column_stack([xy, a[2] + (b[2] - a[2]) * frac])

    def _leg(self, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        if np.linalg.norm(b[:2] - a[:2]) < 1e-9:
            self.stats["straight_legs"] += 1
            try:
                return self.vertical(a, b, "climb or descend")
            except PlanningError:
                return None
        if self._use_graph:
            xy = self._graph(min(a[2], b[2]), max(a[2], b[2])).shortest_path(a[:2], b[:2])
            if xy is not None:
                self.stats["graph_legs" if len(xy) > 2 else "straight_legs"] += 1
                return self._with_altitude(xy, a, b)
        self.stats["grid_legs"] += 1
        blocked = self.grid.blocked(a[2], b[2])
        ca, cb = self.grid.to_cell(a[:2])[0], self.grid.to_cell(b[:2])[0]
        if line_of_sight(blocked, ca, cb)[0]:
            return np.stack([a, b])
        sa, sb = self.grid.cell_index(a[:2]), self.grid.cell_index(b[:2])
        prefix = [ca]
        if blocked[sa[1], sa[0]]:
            escape = self._nearest_free(blocked, sa)
            if escape is None:
                return None
            sa = escape
            prefix.append(np.array(escape, dtype=np.float64) + 0.5)
        if blocked[sb[1], sb[0]]:
            return None
        pts = self._coarse_search(blocked, prefix[-1], sa, cb, sb)
        if pts is None:
            cells = astar(blocked, sa, sb, self.config.heuristic_weight)
            if cells is None:
                return None
            idx = turning_points(cells)
            pts = np.asarray(cells, dtype=np.float64)[idx][1:-1] + 0.5
        pts = np.vstack([*prefix, pts.reshape(-1, 2), cb[None]])
        if len(prefix) > 1:
            # The start lies in an inflated zone: leave it at the start's own altitude first.
            # Changing altitude on the way out could dip into the box the robot hovers over.
            rest = self.grid.to_world(shortcut(blocked, pts[1:]))
            exit_point = np.array([rest[0][0], rest[0][1], a[2]])
            return np.vstack([a, self._with_altitude(rest, exit_point, b)])
        pts = shortcut(blocked, pts)
        return self._with_altitude(self.grid.to_world(pts), a, b)

    def _coarse_search(self, blocked: np.ndarray, pa: np.ndarray, sa, pb: np.ndarray, sb) -> np.ndarray | None:
        """Interior points (fine cell coordinates) of a path found on the coarse grid, or None."""
        f = int(self.config.coarse_factor)
        ny, nx = blocked.shape
        if f <= 1 or min(ny, nx) < 8 * f:
            return None
        cached = self._coarse.get(id(blocked))
        if cached is None or cached[0] is not blocked:
            cy, cx = -(-ny // f), -(-nx // f)
            pad = np.ones((cy * f, cx * f), dtype=bool)
            pad[:ny, :nx] = blocked
            cached = (blocked, pad.reshape(cy, f, cx, f).any(axis=(1, 3)))
            if len(self._coarse) > 16:
                self._coarse.clear()
            self._coarse[id(blocked)] = cached
        coarse = cached[1]

        def entry(point: np.ndarray, cell) -> tuple[int, int] | None:
            # The nearest free coarse cell (within 2) whose centre the point sees on the fine grid.
            cx0, cy0 = cell[0] // f, cell[1] // f
            best = None
            for dy in range(-2, 3):
                for dx in range(-2, 3):
                    x, y = cx0 + dx, cy0 + dy
                    if 0 <= x < coarse.shape[1] and 0 <= y < coarse.shape[0] and not coarse[y, x]:
                        d = dx * dx + dy * dy
                        if best is None or d < best[0]:
                            centre = np.array([x * f + f / 2, y * f + f / 2])
                            if line_of_sight(blocked, point, centre)[0]:
                                best = (d, (x, y))
            return None if best is None else best[1]

        ca, cb = entry(pa, sa), entry(pb, sb)
        if ca is None or cb is None:
            return None
        cells = astar(coarse, ca, cb, self.config.heuristic_weight)
        if cells is None:
            return None
        idx = turning_points(cells)
        return np.asarray(cells, dtype=np.float64)[idx] * f + f / 2

    def leg_cost(self, a: np.ndarray, b: np.ndarray) -> float:
        path = self.leg(a, b)
        if path is None:
            return math.inf
        return float(np.linalg.norm(np.diff(path, axis=0), axis=1).sum())

    def unreachable(self, a: np.ndarray, b: np.ndarray, label: str) -> PlanningError:
        return PlanningError(f"goal {label} {_fmt(b)} is unreachable from {_fmt(a)}: no collision-free path "
                             f"at altitudes {min(a[2], b[2]):.2f}..{max(a[2], b[2]):.2f} m "
                             f"(obstacles inflated by {self.config.inflation_m:.2f} m)")


    def add_obstacle(self, box: Box) -> None:
        """An obstacle seen at run time; later plans avoid it."""
        self.grid.add_box(box)
        self._graphs.clear()

    def blocked_boxes(self, blocked) -> list[Box]:
        if blocked is None:
            return []
        if isinstance(blocked, Box):
            return [blocked]
        if isinstance(blocked, (list, tuple)) and blocked and all(isinstance(b, Box) for b in blocked):
            return list(blocked)
        try:
            pts = np.atleast_2d(np.asarray(blocked, dtype=np.float64))
        except (TypeError, ValueError):
            raise PlanningError("blocked must be a Box, a list of Boxes, or points (N, 3) in metres") from None
        if pts.ndim != 2 or pts.shape[1] != 3 or not np.all(np.isfinite(pts)):
            raise PlanningError(f"blocked points must be finite (N, 3) in metres, got shape {pts.shape}")
        b = self.world.bounds
        height = b.max[2] - b.min[2]
        s = 2 * self.config.blocked_radius_m
        return [Box(center=(p[0], p[1], b.min[2] + height / 2), size=(s, s, height)) for p in pts]

