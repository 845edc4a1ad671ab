"""Pinhole camera model shared by the renderer (PyBullet) and perception (OpenCV).

Optical frame as in REP 103 (``camera_optical``): z forward out of the lens, x right, y down.
The camera is fixed to the body: ``mount_position_b`` in FLU, looking along body +x, tilted
down by ``pitch_down_rad``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robot_hrl.geometry import rotation_matrix_from_quat

# Optical axes expressed in a forward-looking FLU camera body: z_opt = +x, x_opt = -y, y_opt = -z.
_FLU_FROM_OPTICAL = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


@dataclass(frozen=True)
class PinholeCamera:
    """An ideal pinhole camera (no distortion): u = fx * x/z + cx, v = fy * y/z + cy."""

    width: int = 320
    """Image width, pixels."""
    height: int = 240
    """Image height, pixels."""
    horizontal_fov_rad: float = math.radians(87.0)
    """Horizontal field of view (the AI deck's HM01B0 with its stock lens is about 87 deg)."""
    near_m: float = 0.02
    far_m: float = 10.0
    mount_position_b: tuple[float, float, float] = (0.02, 0.0, 0.01)
    """Lens position in the body FLU frame, m."""
    pitch_down_rad: float = math.radians(20.0)
    """Downward tilt of the optical axis from body +x."""

    @property
    def fx(self) -> float:
        return self.width / (2.0 * math.tan(self.horizontal_fov_rad / 2.0))

    @property
    def fy(self) -> float:
        return self.fx  # square pixels

    @property
    def cx(self) -> float:
        return (self.width - 1) / 2.0

    @property
    def cy(self) -> float:
        return (self.height - 1) / 2.0

    @property
    def vertical_fov_rad(self) -> float:
        return 2.0 * math.atan((self.height / 2.0) / self.fy)

    @property
    def intrinsic_matrix(self) -> np.ndarray:
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    def rotation_body_from_optical(self) -> np.ndarray:
        c, s = math.cos(self.pitch_down_rad), math.sin(self.pitch_down_rad)
        pitch = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])  # positive = nose down about +y
        return pitch @ _FLU_FROM_OPTICAL

    def pose_in_world(self, position_w, quat_wxyz) -> tuple[np.ndarray, np.ndarray]:
        """(R_world_from_optical, camera position in world) for a body pose."""
        r_wb = rotation_matrix_from_quat(np.asarray(quat_wxyz, dtype=np.float64))
        origin = np.asarray(position_w, dtype=np.float64) + r_wb @ np.asarray(self.mount_position_b)
        return r_wb @ self.rotation_body_from_optical(), origin

    def project(self, points_w, position_w, quat_wxyz) -> tuple[np.ndarray, np.ndarray]:
        """Pixel coordinates (N, 2) and depths (N,) of world points; depth <= 0 is behind."""
        r_wo, origin = self.pose_in_world(position_w, quat_wxyz)
        p_o = (np.atleast_2d(points_w) - origin) @ r_wo  # world -> optical: R^T (p - o)
        z = p_o[:, 2]
        safe = np.where(np.abs(z) < 1e-9, 1e-9, z)
        uv = np.stack([self.fx * p_o[:, 0] / safe + self.cx, self.fy * p_o[:, 1] / safe + self.cy], axis=1)
        return uv, z

    def ray_world(self, u: float, v: float, position_w, quat_wxyz) -> tuple[np.ndarray, np.ndarray]:
        """Origin and unit direction in the world of the ray through pixel (u, v)."""
        r_wo, origin = self.pose_in_world(position_w, quat_wxyz)
        d = r_wo @ np.array([(u - self.cx) / self.fx, (v - self.cy) / self.fy, 1.0])
        return origin, d / np.linalg.norm(d)
