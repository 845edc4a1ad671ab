"""A short-term memory of range hits: where the horizontal rangers saw something, kept in the world frame
and read back as the nearest remembered obstacle per sector around the robot (numpy; the runtime side).

Four single-beam rangers see four narrow cones. A level that decides from them alone forgets a wall
the moment it turns away from it; with this memory it sees, in every direction, the nearest point its
rangers have hit lately, which is what lets a map-free policy go around a wall instead of into the same
dead end again (a local, sensor-built picture, as a bug algorithm remembers its hit point; no prior map).

The memory is a term with state, built the same way by the batched simulator
(``sim/envs/terms/navigate_memory.py``, the torch twin; ``tests/test_navigate_memory.py`` proves they
agree) and the planner node. What it does, exactly (both twins):

``add(position_w, quat_wxyz, ranges_m)`` (at ``update_rate_hz``): for each memory sensor in the
spec's order, a reading that hit something (``min_range_m <= r < max_range_m``, finite) gives the
point ``position + R(q) (offset_b + r direction_b)``, horizontal part; it is written into the
ring of ``capacity`` points unless a point already in the memory (this update's earlier sensors
included) lies within ``min_spacing_m`` of it.

``sectors(position_w, quat_wxyz)``: the ring's points relative to the robot, in its yaw frame;
sector ``k`` (of ``sectors``) is centred on the bearing ``2 pi k / sectors`` (0: straight ahead,
counter-clockwise); its value is the distance to the nearest point in it, ``range_m`` when it
holds none or only farther ones.

Inputs carry a leading batch dimension (N, ...): the node keeps one robot (N = 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from robot_hrl.errors import ConfigError, ObservationError
from robot_hrl.geometry import rotation_matrix_from_quat
from robot_hrl.sensing.range import RangeSensorSpec

FAR_M = 1.0e4
"""Where an empty slot of the ring lies (no point: farther than any sector's range)."""


def yaw_of(quat_wxyz: np.ndarray) -> np.ndarray:
    w, x, y, z = np.moveaxis(np.asarray(quat_wxyz, dtype=np.float64), -1, 0)
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


@dataclass(frozen=True)
class MemoryGeometry:
    """The memory sensors' geometry, resolved from the spec and the sensor descriptions."""

    indices: tuple[int, ...]
    """Index of each memory sensor in the observation's ``ranges_m`` (the contract's sensor order)."""
    directions_b: np.ndarray
    """(J, 3) optical axes, body FLU."""
    offsets_b: np.ndarray
    """(J, 3) sensor positions, body FLU, m."""
    min_range_m: np.ndarray
    max_range_m: np.ndarray

    @classmethod
    def none(cls) -> "MemoryGeometry":
        """No sensor: a ring written with ``add_points_w`` only (the trail of the robot's own positions)."""
        return cls((), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0))

    @classmethod
    def of(cls, memory_sensors: Sequence[str], sensors: Sequence[RangeSensorSpec]) -> "MemoryGeometry":
        by_name = {s.name: (i, s) for i, s in enumerate(sensors)}
        missing = [n for n in memory_sensors if n not in by_name]
        if missing:
            raise ConfigError(f"memory sensors {missing} are not among the robot's rangers {list(by_name)}")
        picked = [by_name[n] for n in memory_sensors]
        return cls(tuple(i for i, _ in picked), np.array([s.direction_b for _, s in picked], dtype=np.float64),
                   np.array([s.offset_b for _, s in picked], dtype=np.float64),
                   np.array([s.min_range_m for _, s in picked]), np.array([s.max_range_m for _, s in picked]))


class RangeMemory:
    """The ring of remembered hits of ``num_envs`` robots (numpy, float64)."""

    def __init__(self, geometry: MemoryGeometry, capacity: int, min_spacing_m: float, sectors: int, range_m: float,
                 num_envs: int = 1, fill_empty_first: bool = False):
        if capacity < 1 or sectors < 1 or not (range_m > 0) or not (min_spacing_m >= 0):
            raise ConfigError(f"range memory: capacity {capacity} and sectors {sectors} must be >= 1, range_m {range_m} > 0, "
                              f"min_spacing_m {min_spacing_m} >= 0")
        self.geometry = geometry
        self.capacity, self.min_spacing_m = int(capacity), float(min_spacing_m)
        self.num_sectors, self.range_m = int(sectors), float(range_m)
        self.points_w = np.full((num_envs, self.capacity, 2), FAR_M)
        self.count = np.zeros(num_envs, dtype=np.int64)
        self.fill_empty_first = bool(fill_empty_first)
        """Write into an empty slot (never written, or forgotten) before the ring's next one, so a live point is
        overwritten only while every slot is live. Off for the navigate level's memory, which its torch and C twins
        share; on for the shield's picture (``range_obstacles``), which forgets points as rangers see through them
        and must not lose a wall to the ring's turn (benchmarks/README.md, "Issue #19: the picture's resolution")."""

    @classmethod
    def from_spec(cls, spec, sensors: Sequence[RangeSensorSpec], num_envs: int = 1) -> "RangeMemory":
        """From a contract's memory spec (robot_hrl.contract.navigate.RangeMemorySpec) and the robot's rangers."""
        return cls(MemoryGeometry.of(spec.sensors, sensors), spec.capacity, spec.min_spacing_m, spec.sectors, spec.range_m,
                   num_envs)

    @classmethod
    def for_positions(cls, spec, num_envs: int = 1) -> "RangeMemory":
        """A ring of the robot's own earlier positions (a contract's TrailSpec: capacity, spacing, sectors, range; the
        ``trail_yaw`` term), written with :meth:`add_points_w` only: no sensor feeds it."""
        return cls(MemoryGeometry.none(), spec.capacity, spec.min_spacing_m, spec.sectors, spec.range_m, num_envs)

    def reset(self, ids=None) -> None:
        """Forget everything (of environments ``ids``; None: all)."""
        sel = slice(None) if ids is None else ids
        self.points_w[sel] = FAR_M
        self.count[sel] = 0

    def add(self, position_w, quat_wxyz, ranges_m) -> None:
        """Remember the hits of one reading of every memory sensor (see the module docstring)."""
        p = np.asarray(position_w, dtype=np.float64).reshape(-1, 3)
        q = np.asarray(quat_wxyz, dtype=np.float64).reshape(-1, 4)
        r_all = np.asarray(ranges_m, dtype=np.float64).reshape(len(p), -1)
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))):
            raise ObservationError("the range memory got a non-finite position or attitude; the reading is not remembered")
        g = self.geometry
        rot = rotation_matrix_from_quat(q)                                           # (N, 3, 3)
        rows = np.arange(len(p))
        for j, idx in enumerate(g.indices):
            r = r_all[:, idx]
            hit = np.isfinite(r) & (r >= g.min_range_m[j]) & (r < g.max_range_m[j])
            r = np.where(hit, r, 0.0)
            local = g.offsets_b[j][None] + r[:, None] * g.directions_b[j][None]    # (N, 3)
            point = p[:, :2] + np.einsum("nij,nj->ni", rot, local)[:, :2]
            self._write(rows, point, hit)

    def add_points_w(self, points_w, hit) -> np.ndarray:
        """Remember world points directly: ``points_w`` (N, J, 2) horizontal, ``hit`` (N, J) which of them to keep;
        written in order as :meth:`add` writes its sensors' hits (ring, ``min_spacing_m``). For a caller that computes
        its own hit points (the shield's ``range_obstacles``: the points across each ranger's cone). Returns (N,
        capacity): the slots this call wrote."""
        pts = np.asarray(points_w, dtype=np.float64).reshape(len(self.points_w), -1, 2)
        ok = np.asarray(hit, dtype=bool).reshape(len(self.points_w), -1)
        if not np.all(np.isfinite(pts[ok])):
            raise ObservationError("the range memory got a non-finite point; the reading is not remembered")
        rows = np.arange(len(self.points_w))
        written = np.zeros(self.points_w.shape[:2], dtype=bool)
        for j in range(pts.shape[1]):
            slot, write = self._write(rows, pts[:, j], ok[:, j])
            written[rows[write], slot[write]] = True
        return written

    def _write(self, rows, point, hit) -> tuple[np.ndarray, np.ndarray]:
        nearest = np.sqrt(((self.points_w - point[:, None]) ** 2).sum(-1)).min(axis=1)
        write = hit & (nearest >= self.min_spacing_m)
        slot = self.count % self.capacity
        if self.fill_empty_first:
            empty = self.points_w[:, :, 0] >= FAR_M
            slot = np.where(empty.any(axis=1), empty.argmax(axis=1), slot)
        self.points_w[rows[write], slot[write]] = point[write]
        self.count += write
        return slot, write

    def forget(self, mask) -> None:
        """Forget the points where ``mask`` (N, capacity) is true (a ranger has since seen through them); their
        slots lie empty until the ring comes round to them."""
        self.points_w[np.asarray(mask, dtype=bool)] = FAR_M

    def sectors(self, position_w, quat_wxyz) -> np.ndarray:
        """(N, sectors): the nearest remembered point per sector around the robot, m (``range_m`` if none)."""
        p = np.asarray(position_w, dtype=np.float64).reshape(-1, 3)
        yaw = yaw_of(np.asarray(quat_wxyz, dtype=np.float64).reshape(-1, 4))
        rel = self.points_w - p[:, None, :2]                                         # (N, M, 2)
        c, s = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
        x, y = c * rel[..., 0] + s * rel[..., 1], -s * rel[..., 0] + c * rel[..., 1]
        dist = np.sqrt(x * x + y * y)
        width = 2.0 * math.pi / self.num_sectors
        sector = np.mod(np.floor(np.arctan2(y, x) / width + 0.5), self.num_sectors).astype(np.int64)
        near = np.where(dist < self.range_m, dist, self.range_m)
        onehot = sector[..., None] == np.arange(self.num_sectors)                   # (N, M, K)
        return np.where(onehot, near[..., None], self.range_m).min(axis=1)
