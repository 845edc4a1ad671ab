"""Range sensors in PyBullet: the rays of ``robot_hrl.sensing`` cast with ``rayTestBatch``.

The same description as the batched simulator (``sim/envs/ranging.py``): each sensor samples its
cone with ``ray_directions_b`` rays and reads the minimum distance, with the firmware's noise
model, ``max_range_m`` where nothing is within range. A room's fence, floor and ceiling are
physical here: :func:`build_enclosure` adds them as static boxes (the world file's scene has only
the ground and the obstacles).

Rays start ``start_offset_m`` out from the sensor (past the robot's own collision shape, which
a ray would otherwise hit first: ``rayTestBatch`` reports one hit per ray and cannot exclude a
body); the offset is added back, so readings are distances from the sensor.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from robot_hrl.geometry import rotation_matrix_from_quat
from robot_hrl.sensing import RangeSensorSpec, ray_directions_b
from robot_hrl.world import World

ENCLOSURE_THICKNESS_M = 0.1
ENCLOSURE_RGBA = (0.85, 0.85, 0.85, 0.35)


def build_enclosure(bullet, world: World) -> dict[int, str]:
    """Four walls just outside the world's bounds and a ceiling on top; returns {body id: name}."""
    (x0, y0, z0), (x1, y1, z1) = world.bounds.min, world.bounds.max
    t = ENCLOSURE_THICKNESS_M
    cx, cy, cz = (x0 + x1) / 2, (y0 + y1) / 2, (z0 + z1) / 2
    sx, sy, sz = x1 - x0 + 2 * t, y1 - y0 + 2 * t, z1 - z0
    parts = {
        "fence_west": ((x0 - t / 2, cy, cz), (t, sy, sz)), "fence_east": ((x1 + t / 2, cy, cz), (t, sy, sz)),
        "fence_south": ((cx, y0 - t / 2, cz), (sx, t, sz)), "fence_north": ((cx, y1 + t / 2, cz), (sx, t, sz)),
        "ceiling": ((cx, cy, z1 + t / 2), (sx, sy, t)),
    }
    names = {}
    for name, (center, size) in parts.items():
        half = [s / 2 for s in size]
        col = bullet.createCollisionShape(bullet.GEOM_BOX, halfExtents=half)
        vis = bullet.createVisualShape(bullet.GEOM_BOX, halfExtents=half, rgbaColor=list(ENCLOSURE_RGBA))
        names[bullet.createMultiBody(baseMass=0.0, baseCollisionShapeIndex=col, baseVisualShapeIndex=vis,
                                     basePosition=list(center))] = name
    return names


class PyBulletRangers:
    """Cast the robot's rangers in a PyBullet client."""

    def __init__(self, bullet, sensors: Sequence[RangeSensorSpec], rays_per_sensor: int = 5, start_offset_m: float = 0.08,
                 seed: int | None = None):
        self.bullet = bullet
        self.sensors = tuple(sensors)
        self.rays_per_sensor = int(rays_per_sensor)
        self.start_offset_m = float(start_offset_m)
        self.directions_b = np.concatenate([ray_directions_b(s, rays_per_sensor) for s in self.sensors])
        self.offsets_b = np.concatenate([np.repeat(np.asarray(s.offset_b, dtype=np.float64)[None], rays_per_sensor, 0)
                                         for s in self.sensors])
        self.max_range_m = np.array([s.max_range_m for s in self.sensors])
        self.min_range_m = np.array([s.min_range_m for s in self.sensors])
        self._rng = np.random.default_rng(seed)

    def true_ranges(self, position_w, quat_wxyz) -> np.ndarray:
        """Noise-free distance to the nearest surface in each sensor's cone (S,); +inf beyond max range."""
        rot = rotation_matrix_from_quat(np.asarray(quat_wxyz, dtype=np.float64))
        dirs = self.directions_b @ rot.T
        origins = np.asarray(position_w, dtype=np.float64)[None] + self.offsets_b @ rot.T
        length = np.repeat(self.max_range_m, self.rays_per_sensor) - self.start_offset_m
        start = origins + dirs * self.start_offset_m
        end = start + dirs * length[:, None]
        hits = self.bullet.rayTestBatch(start.tolist(), end.tolist())
        distance = np.full(len(hits), np.inf)
        for i, hit in enumerate(hits):
            if hit[0] >= 0:
                distance[i] = self.start_offset_m + hit[2] * length[i]
        return distance.reshape(len(self.sensors), self.rays_per_sensor).min(axis=1)

    def readings(self, position_w, quat_wxyz, noise: bool = True) -> np.ndarray:
        """What the sensors report (S,): noisy, ``max_range_m`` where nothing is within range."""
        true = self.true_ranges(position_w, quat_wxyz)
        no_target = ~np.isfinite(true) | (true > self.max_range_m)
        clean = np.minimum(np.where(np.isfinite(true), true, self.max_range_m), self.max_range_m)
        if noise:
            std = np.array([s.noise.std_m(c) for s, c in zip(self.sensors, clean)])
            clean = clean + std * self._rng.standard_normal(len(clean))
        out = np.clip(clean, self.min_range_m, self.max_range_m)
        return np.where(no_target, self.max_range_m, out)
