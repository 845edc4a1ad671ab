"""Range sensors in the batched simulator: ray casts against each environment's room, on the torch device.

The room of an environment is its fence (an axis-aligned box the robot is inside of: walls, floor
and ceiling) and up to B axis-aligned obstacles. A ray's distance is the nearest of its entry into
an obstacle (slab test) and its exit through the room's box; everything is vectorized over
(environments x rays x obstacles). A sensor (``robot_hrl.sensing.RangeSensorSpec``) samples its
cone with ``ray_directions_b`` rays and reads the minimum, adds the firmware's distance-dependent
Gaussian noise, and reports ``max_range_m`` when nothing lies within range (the observation's
convention; ROS messages send +inf there). ``sim/pybullet/ranging.py`` casts the same rays with
PyBullet's ``rayTestBatch``; ``tests/test_navigate_ranging.py`` compares the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from robot_hrl.sensing import RangeSensorSpec, ray_directions_b
from sim.envs.math_utils import rotation_matrix_from_quat

_TINY = 1e-9


def ray_box_entry(origins: torch.Tensor, directions: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor,
                  valid: torch.Tensor | None = None) -> torch.Tensor:
    """Distance along unit ``directions`` (N, R, 3) from ``origins`` (N, R, 3) to the first of the boxes
    ``lower``/``upper`` (N, B, 3) hit; +inf where none is. A ray starting inside a box reads 0.
    ``valid`` (N, B) masks out padding boxes."""
    d = torch.where(directions.abs() < _TINY, torch.full_like(directions, _TINY), directions)
    inv = (1.0 / d).unsqueeze(2)                                   # (N, R, 1, 3)
    o = origins.unsqueeze(2)
    t1 = (lower.unsqueeze(1) - o) * inv                            # (N, R, B, 3)
    t2 = (upper.unsqueeze(1) - o) * inv
    t_near = torch.minimum(t1, t2).amax(dim=-1)                    # (N, R, B)
    t_far = torch.maximum(t1, t2).amin(dim=-1)
    hit = (t_far >= t_near) & (t_far >= 0.0)
    if valid is not None:
        hit = hit & valid.unsqueeze(1)
    t = torch.where(hit, t_near.clamp(min=0.0), torch.full_like(t_near, float("inf")))
    return t.amin(dim=-1) if t.shape[-1] > 0 else torch.full(origins.shape[:-1], float("inf"), device=origins.device)


def ray_room_exit(origins: torch.Tensor, directions: torch.Tensor, room_lower: torch.Tensor, room_upper: torch.Tensor) -> torch.Tensor:
    """Distance (N, R) along the rays to the walls, floor or ceiling of the room box (N, 3) they start in."""
    d = torch.where(directions.abs() < _TINY, torch.full_like(directions, _TINY), directions)
    t1 = (room_lower.unsqueeze(1) - origins) / d
    t2 = (room_upper.unsqueeze(1) - origins) / d
    return torch.maximum(t1, t2).amin(dim=-1).clamp(min=0.0)


@dataclass
class RangeSensorArray:
    """The robot's rangers as tensors: ray directions and offsets in the body frame, limits and noise per sensor."""

    sensors: tuple[RangeSensorSpec, ...]
    rays_per_sensor: int
    directions_b: torch.Tensor
    """(S * rays_per_sensor, 3), sensor-major."""
    offsets_b: torch.Tensor
    """(S * rays_per_sensor, 3)."""
    min_range_m: torch.Tensor
    max_range_m: torch.Tensor
    noise_point_a_m: torch.Tensor
    noise_std_a_m: torch.Tensor
    noise_coefficient_per_m: torch.Tensor

    @classmethod
    def from_specs(cls, sensors: Sequence[RangeSensorSpec], rays_per_sensor: int = 5,
                   device: str | torch.device = "cpu") -> "RangeSensorArray":
        sensors = tuple(sensors)
        dirs = np.concatenate([ray_directions_b(s, rays_per_sensor) for s in sensors])
        offs = np.concatenate([np.repeat(np.asarray(s.offset_b, dtype=np.float64)[None], rays_per_sensor, 0) for s in sensors])
        f = lambda values: torch.tensor(values, dtype=torch.float32, device=device)  # noqa: E731
        return cls(sensors, int(rays_per_sensor), f(dirs), f(offs), f([s.min_range_m for s in sensors]),
                   f([s.max_range_m for s in sensors]), f([s.noise.point_a_m for s in sensors]),
                   f([s.noise.std_a_m for s in sensors]), f([s.noise.coefficient_per_m for s in sensors]))

    @property
    def num_sensors(self) -> int:
        return len(self.sensors)

    def rays_w(self, position_w: torch.Tensor, quat_wxyz: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Ray origins and unit directions (N, S * rays, 3), world frame, for body poses (N, 3), (N, 4)."""
        rot = rotation_matrix_from_quat(quat_wxyz)                            # (N, 3, 3)
        directions = torch.einsum("nij,rj->nri", rot, self.directions_b)
        origins = position_w.unsqueeze(1) + torch.einsum("nij,rj->nri", rot, self.offsets_b)
        return origins, directions

    def true_ranges(self, position_w, quat_wxyz, box_lower, box_upper, box_valid, room_lower, room_upper) -> torch.Tensor:
        """Noise-free distance to the nearest surface in each sensor's cone (N, S), unclipped."""
        origins, directions = self.rays_w(position_w, quat_wxyz)
        t = torch.minimum(ray_box_entry(origins, directions, box_lower, box_upper, box_valid),
                          ray_room_exit(origins, directions, room_lower, room_upper))
        return t.view(t.shape[0], self.num_sensors, self.rays_per_sensor).amin(dim=-1)

    def noise_std_m(self, distance_m: torch.Tensor) -> torch.Tensor:
        """The firmware's noise model (robot_hrl.sensing.ExponentialRangeNoise), per sensor."""
        return self.noise_std_a_m * (1.0 + torch.exp(self.noise_coefficient_per_m * (distance_m - self.noise_point_a_m)))

    def readings(self, true_m: torch.Tensor, generator: torch.Generator | None = None, noise: bool = True) -> torch.Tensor:
        """What the sensors report (N, S): noisy, ``max_range_m`` where no surface lies within range,
        held at ``min_range_m`` below it."""
        no_target = true_m > self.max_range_m
        clean = torch.minimum(true_m, self.max_range_m)
        if noise:
            eps = torch.randn(clean.shape, generator=generator, device=clean.device, dtype=clean.dtype)
            clean = clean + self.noise_std_m(clean) * eps
        out = torch.maximum(torch.minimum(clean, self.max_range_m), self.min_range_m)
        return torch.where(no_target, self.max_range_m.expand_as(out), out)
