"""The range memory, torch and batched: the twin of ``robot_hrl.sensing.memory.RangeMemory`` (same steps,
same order; tests/test_navigate_memory.py proves they agree). See that module for what it does."""

from __future__ import annotations

import math
from typing import Sequence

import torch

from robot_hrl.sensing.memory import FAR_M, MemoryGeometry
from robot_hrl.sensing.range import RangeSensorSpec
from sim.envs.math_utils import rotation_matrix_from_quat
from sim.envs.terms.navigate_observations import world_to_yaw, yaw_from_quat


class TorchRangeMemory:
    """The rings of ``num_envs`` robots on the device."""

    def __init__(self, geometry: MemoryGeometry, capacity: int, min_spacing_m: float, sectors: int, range_m: float,
                 num_envs: int, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32):
        self.geometry = geometry
        self.capacity, self.min_spacing_m = int(capacity), float(min_spacing_m)
        self.num_sectors, self.range_m = int(sectors), float(range_m)
        f = dict(dtype=dtype, device=device)
        self.indices = list(geometry.indices)
        self.directions_b = torch.tensor(geometry.directions_b, **f)
        self.offsets_b = torch.tensor(geometry.offsets_b, **f)
        self.min_range_m = torch.tensor(geometry.min_range_m, **f)
        self.max_range_m = torch.tensor(geometry.max_range_m, **f)
        self.points_w = torch.full((num_envs, self.capacity, 2), FAR_M, **f)
        self.count = torch.zeros(num_envs, dtype=torch.long, device=device)
        self._sector_ids = torch.arange(self.num_sectors, device=device)

    @classmethod
    def from_spec(cls, spec, sensors: Sequence[RangeSensorSpec], num_envs: int, device="cpu",
                  dtype: torch.dtype = torch.float32) -> "TorchRangeMemory":
        return cls(MemoryGeometry.of(spec.sensors, sensors), spec.capacity, spec.min_spacing_m, spec.sectors, spec.range_m,
                   num_envs, device, dtype)

    @classmethod
    def for_positions(cls, spec, num_envs: int, device="cpu", dtype: torch.dtype = torch.float32) -> "TorchRangeMemory":
        """A ring of the robot's own positions (a contract's TrailSpec: capacity, spacing, sectors, range), written with
        :meth:`add_points_w` only."""
        return cls(MemoryGeometry.none(), spec.capacity, spec.min_spacing_m, spec.sectors, spec.range_m, num_envs, device, dtype)

    def reset(self, ids: torch.Tensor | None = None) -> None:
        if ids is None:
            self.points_w.fill_(FAR_M)
            self.count.zero_()
        else:
            self.points_w[ids] = FAR_M
            self.count[ids] = 0

    def add(self, position_w: torch.Tensor, quat_wxyz: torch.Tensor, ranges_m: torch.Tensor,
            ids: torch.Tensor | None = None) -> None:
        """Remember one reading of every memory sensor (of environments ``ids``, whose rows the inputs are; None: all)."""
        if ids is not None:
            points, count = self.points_w[ids], self.count[ids]
            self._add(points, count, position_w, quat_wxyz, ranges_m)
            self.points_w[ids], self.count[ids] = points, count
        else:
            self._add(self.points_w, self.count, position_w, quat_wxyz, ranges_m)

    def add_points_w(self, points_w: torch.Tensor, ids: torch.Tensor | None = None) -> None:
        """Remember one horizontal world point per environment (of ``ids``; None: all), as ``add`` writes a sensor's
        hit (the ring, ``min_spacing_m``): the twin of ``RangeMemory.add_points_w`` with one point each, all kept."""
        pts = points_w[:, :2].to(self.points_w.dtype)
        keep = torch.ones(len(pts), dtype=torch.bool, device=pts.device)
        if ids is None:
            self._write(self.points_w, self.count, pts, keep)
            return
        points, count = self.points_w[ids], self.count[ids]
        self._write(points, count, pts, keep)
        self.points_w[ids], self.count[ids] = points, count

    def _write(self, points_w: torch.Tensor, count: torch.Tensor, point: torch.Tensor, hit: torch.Tensor) -> None:
        nearest = ((points_w - point[:, None]) ** 2).sum(-1).sqrt().amin(dim=1)
        write = hit & (nearest >= self.min_spacing_m)
        slot = count % self.capacity
        rows = torch.nonzero(write).squeeze(-1)
        points_w[rows, slot[write]] = point[write]
        count += write.long()

    def _add(self, points_w: torch.Tensor, count: torch.Tensor, position_w, quat_wxyz, ranges_m) -> None:
        p = position_w.to(self.points_w.dtype)
        rot = rotation_matrix_from_quat(quat_wxyz.to(self.points_w.dtype))
        r_all = ranges_m.to(self.points_w.dtype)
        for j, idx in enumerate(self.indices):
            r = r_all[:, idx]
            hit = torch.isfinite(r) & (r >= self.min_range_m[j]) & (r < self.max_range_m[j])
            r = torch.where(hit, r, torch.zeros_like(r))
            local = self.offsets_b[j][None] + r[:, None] * self.directions_b[j][None]
            point = p[:, :2] + torch.einsum("nij,nj->ni", rot, local)[:, :2]
            self._write(points_w, count, point, hit)

    def sectors(self, position_w: torch.Tensor, quat_wxyz: torch.Tensor) -> torch.Tensor:
        p = position_w.to(self.points_w.dtype)
        yaw = yaw_from_quat(quat_wxyz.to(self.points_w.dtype))
        rel = world_to_yaw(self.points_w - p[:, None, :2], yaw[:, None])             # (N, M, 2)
        x, y = rel[..., 0], rel[..., 1]
        dist = (x * x + y * y).sqrt()
        width = 2.0 * math.pi / self.num_sectors
        sector = torch.remainder(torch.floor(torch.atan2(y, x) / width + 0.5), self.num_sectors).long()
        near = torch.where(dist < self.range_m, dist, torch.full_like(dist, self.range_m))
        out = torch.full((p.shape[0], self.num_sectors), self.range_m, dtype=dist.dtype, device=dist.device)
        return out.scatter_reduce(1, sector, near, reduce="amin", include_self=True)
