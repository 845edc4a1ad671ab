"""A pool of generated rooms as tensors on the device, for the batched navigation environment.

Each room (``robot_hrl.world.rooms``) becomes padded obstacle boxes, its fence box, its start and
goal, and a geodesic distance field to its goal (the shortest 8-connected path length through the
free cells of the planner's grid, robot radius inflation) used only for reward shaping and the
critic. Environments index the pool with a room id per environment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from robot_hrl.planning.grid import FlightGrid
from robot_hrl.world.rooms import DENSITIES, Room

FIELD_RESOLUTION_M = 0.2
"""Cell size of the geodesic distance fields."""


@dataclass
class RoomPool:
    box_lower: torch.Tensor
    """(R, B, 3) obstacle boxes, padded."""
    box_upper: torch.Tensor
    box_valid: torch.Tensor
    """(R, B) bool."""
    room_lower: torch.Tensor
    """(R, 3) the fence box (walls, floor, ceiling)."""
    room_upper: torch.Tensor
    start_w: torch.Tensor
    """(R, 3)."""
    goal_w: torch.Tensor
    density: torch.Tensor
    """(R,) long: index into DENSITIES."""
    optimal_path_length_m: torch.Tensor
    geodesic_m: torch.Tensor
    """(R, ny, nx) distance to the goal through free space, m (large where blocked)."""
    field_origin_w: torch.Tensor
    """(R, 2) world position of cell (0, 0)'s corner."""
    names: list[str]

    @property
    def num_rooms(self) -> int:
        return int(self.box_lower.shape[0])

    @classmethod
    def from_rooms(cls, rooms: Sequence[Room], device: str | torch.device = "cpu", inflation_m: float | None = None) -> "RoomPool":
        rooms = list(rooms)
        if not rooms:
            raise ValueError("a room pool needs at least one room")
        b = max(len(r.world.obstacles) for r in rooms)
        n = len(rooms)
        lower, upper = np.zeros((n, max(b, 1), 3)), np.zeros((n, max(b, 1), 3))
        valid = np.zeros((n, max(b, 1)), dtype=bool)
        for i, r in enumerate(rooms):
            for j, o in enumerate(r.world.obstacles):
                lower[i, j], upper[i, j], valid[i, j] = o.lower, o.upper, True
        blocked, shapes = [], set()
        for r in rooms:
            infl = r.cfg.inflation_m - r.cfg.planner_margin_m if inflation_m is None else inflation_m  # the robot radius
            grid = FlightGrid(r.world, FIELD_RESOLUTION_M, max(infl, 0.0))
            blocked.append(grid.blocked(r.start_w[2], r.start_w[2]))
            shapes.add(blocked[-1].shape)
        if len(shapes) != 1:
            raise ValueError(f"rooms of one pool must have one size (grids {sorted(shapes)})")
        f = lambda a, dt=torch.float32: torch.as_tensor(np.asarray(a), dtype=dt, device=device)  # noqa: E731
        goals = np.array([r.goal_w for r in rooms])
        field = geodesic_fields(torch.as_tensor(np.stack(blocked), device=device),
                                torch.as_tensor(np.floor(goals[:, :2] / FIELD_RESOLUTION_M).astype(np.int64), device=device))
        return cls(
            box_lower=f(lower), box_upper=f(upper), box_valid=f(valid, torch.bool),
            room_lower=f([r.world.bounds.min for r in rooms]), room_upper=f([r.world.bounds.max for r in rooms]),
            start_w=f([r.start_w for r in rooms]), goal_w=f(goals),
            density=f([list(DENSITIES).index(r.density) for r in rooms], torch.long),
            optimal_path_length_m=f([r.optimal_path_length_m for r in rooms]),
            geodesic_m=field * FIELD_RESOLUTION_M, field_origin_w=f([r.world.bounds.min[:2] for r in rooms]),
            names=[r.name for r in rooms],
        )

    def geodesic_at(self, room_ids: torch.Tensor, xy_w: torch.Tensor) -> torch.Tensor:
        """Geodesic distance to the goal (N,) at positions (N, 2) in rooms (N,), nearest cell."""
        ny, nx = self.geodesic_m.shape[1:]
        cell = torch.floor((xy_w - self.field_origin_w[room_ids]) / FIELD_RESOLUTION_M).long()
        ix, iy = cell[:, 0].clamp(0, nx - 1), cell[:, 1].clamp(0, ny - 1)
        return self.geodesic_m[room_ids, iy, ix]


def geodesic_fields(blocked: torch.Tensor, goal_cells: torch.Tensor, max_iterations: int = 2000) -> torch.Tensor:
    """Shortest 8-connected path length in cells from every free cell to the goal cell, batched over
    rooms (R, ny, nx); blocked cells and cells with no path get the largest finite value + the grid size.
    Diagonal moves cost sqrt(2) (corner cutting allowed: a shaping signal, not a plan)."""
    r, ny, nx = blocked.shape
    big = float(ny * nx)
    dist = torch.full((r, ny, nx), big, device=blocked.device)
    rows = torch.arange(r, device=blocked.device)
    gx, gy = goal_cells[:, 0].clamp(0, nx - 1), goal_cells[:, 1].clamp(0, ny - 1)
    dist[rows, gy, gx] = 0.0
    free = ~blocked
    free[rows, gy, gx] = True
    moves = [(dy, dx, math.hypot(dy, dx)) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx]
    for _ in range(max_iterations):
        padded = torch.nn.functional.pad(dist, (1, 1, 1, 1), value=big)
        best = dist
        for dy, dx, cost in moves:
            best = torch.minimum(best, padded[:, 1 + dy: 1 + dy + ny, 1 + dx: 1 + dx + nx] + cost)
        best = torch.where(free, best, torch.full_like(best, big))
        if torch.equal(best, dist):
            break
        dist = best
    reachable = dist < big
    top = torch.where(reachable, dist, torch.zeros_like(dist)).flatten(1).amax(dim=1)
    return torch.where(reachable, dist, (top + nx + ny)[:, None, None].expand_as(dist))
