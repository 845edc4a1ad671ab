"""Render the onboard camera with PyBullet's TinyRenderer from a PinholeCamera.

Intrinsic model (robot_hrl.perception.PinholeCamera): an ideal pinhole without distortion,
square pixels, ``fx = fy = width / (2 tan(hfov / 2))``, principal point at the image centre
``cx = (width - 1) / 2``, ``cy = (height - 1) / 2`` (pixel indices, origin at the centre of the
top-left pixel). OpenGL's symmetric perspective projection with vertical field of view
``2 atan(height / (2 fy))`` and aspect ``width / height`` is exactly this camera: pixel column i
spans NDC ``2 (i + 0.5) / width - 1``, so NDC 0 falls on ``i = (width - 1) / 2``.

Extrinsics: the optical frame (z forward, x right, y down) is ``PinholeCamera.pose_in_world``
of the body pose; the view matrix looks from the lens along optical +z with optical -y as "up".

Depth: TinyRenderer's z-buffer value d in [0, 1] is linearised to metres,
``z = far near / (far - (far - near) d)``; this is the distance along the optical axis (the
pinhole z of ``PinholeCamera.project``), as a depth camera reports it, not the ray length.
Pixels that hit nothing read ``far_m``.
"""

from __future__ import annotations

import math

import numpy as np

from robot_hrl.perception.camera import PinholeCamera


def view_matrix(bullet, camera: PinholeCamera, position_w, quat_wxyz) -> list[float]:
    r_wo, origin = camera.pose_in_world(position_w, quat_wxyz)
    forward = r_wo[:, 2]
    up = -r_wo[:, 1]
    return bullet.computeViewMatrix(
        cameraEyePosition=origin.tolist(),
        cameraTargetPosition=(origin + forward).tolist(),
        cameraUpVector=up.tolist(),
    )


def projection_matrix(bullet, camera: PinholeCamera) -> list[float]:
    return bullet.computeProjectionMatrixFOV(
        fov=math.degrees(camera.vertical_fov_rad),
        aspect=camera.width / camera.height,
        nearVal=camera.near_m,
        farVal=camera.far_m,
    )


def linearize_depth(zbuffer: np.ndarray, near_m: float, far_m: float) -> np.ndarray:
    d = np.asarray(zbuffer, dtype=np.float64)
    return (far_m * near_m / (far_m - (far_m - near_m) * d)).astype(np.float32)


def render(bullet, camera: PinholeCamera, position_w, quat_wxyz) -> tuple[np.ndarray, np.ndarray]:
    """(rgb uint8 HxWx3, depth_m float32 HxW) seen from the body pose."""
    _, _, rgba, zbuf, _ = bullet.getCameraImage(
        width=camera.width,
        height=camera.height,
        viewMatrix=view_matrix(bullet, camera, position_w, quat_wxyz),
        projectionMatrix=projection_matrix(bullet, camera),
        renderer=bullet.ER_TINY_RENDERER,
        flags=bullet.ER_NO_SEGMENTATION_MASK,
    )
    rgb = np.asarray(rgba, dtype=np.uint8).reshape(camera.height, camera.width, 4)[:, :, :3].copy()
    depth = linearize_depth(np.asarray(zbuf).reshape(camera.height, camera.width), camera.near_m, camera.far_m)
    return rgb, depth
