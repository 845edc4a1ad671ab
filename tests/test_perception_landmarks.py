"""Landmark perception on real images rendered from the demo world with PyBullet's TinyRenderer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_hrl.errors import ObservationError
from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.perception import (
    PinholeCamera,
    color_mask,
    detect_colored_blobs,
    ground_landmarks,
    localize_on_plane,
)
from robot_hrl.world import load_world

pybullet = pytest.importorskip("pybullet")


def render_world(world, camera: PinholeCamera, position_w, quat_wxyz) -> tuple[np.ndarray, np.ndarray]:
    """RGB (H, W, 3) uint8 and metric depth along the optical axis (H, W), from a fresh DIRECT client."""
    client = pybullet.connect(pybullet.DIRECT)
    try:
        def box(center, size, rgb):
            half = [s / 2 for s in size]
            vis = pybullet.createVisualShape(pybullet.GEOM_BOX, halfExtents=half, rgbaColor=[*rgb, 1.0],
                                             physicsClientId=client)
            pybullet.createMultiBody(0, -1, vis, basePosition=list(center), physicsClientId=client)

        b = world.bounds
        size = [b.max[0] - b.min[0], b.max[1] - b.min[1], 0.02]
        box([(b.min[0] + b.max[0]) / 2, (b.min[1] + b.max[1]) / 2, b.min[2] - 0.01], size, (0.5, 0.5, 0.5))
        for o in world.obstacles:
            box(o.center, o.size, o.color)
        for lm in world.landmarks:
            box(lm.center, lm.size, lm.rgb)
        r_wo, eye = camera.pose_in_world(position_w, quat_wxyz)
        view = pybullet.computeViewMatrix(eye.tolist(), (eye + r_wo[:, 2]).tolist(), (-r_wo[:, 1]).tolist(),
                                          physicsClientId=client)
        proj = pybullet.computeProjectionMatrixFOV(math.degrees(camera.vertical_fov_rad), camera.width / camera.height,
                                                   camera.near_m, camera.far_m, physicsClientId=client)
        _, _, rgba, zbuf, _ = pybullet.getCameraImage(camera.width, camera.height, view, proj,
                                                       renderer=pybullet.ER_TINY_RENDERER, physicsClientId=client)
    finally:
        pybullet.disconnect(client)
    rgb = np.asarray(rgba, dtype=np.uint8).reshape(camera.height, camera.width, 4)[..., :3].copy()
    z = np.asarray(zbuf, dtype=np.float64).reshape(camera.height, camera.width)
    n, f = camera.near_m, camera.far_m
    depth = f * n / (f - (f - n) * z)
    return rgb, depth


@pytest.fixture(scope="module")
def world(demo_world_path):
    return load_world(demo_world_path)


# name: (position, yaw, the landmarks in sight: chosen so that no pillar or wall hides them)
VIEWS = {
    "south": ((3.2, 2.2, 1.2), math.radians(-90.0), ["red_box"]),
    "east": ((2.0, 3.8, 1.2), math.radians(0.0), ["green_box"]),
    "north_west": ((2.2, 2.6, 1.4), math.radians(143.0), ["blue_box"]),
}


@pytest.fixture(scope="module")
def views(world):
    camera = PinholeCamera()
    out = {}
    for name, (pos, yaw, _) in VIEWS.items():
        quat = quat_from_euler_rpy(0.0, 0.0, yaw)
        out[name] = (pos, quat, *render_world(world, camera, pos, quat))
    return camera, out


def test_render_matches_the_camera_model(world, views):
    camera, out = views
    pos, quat, rgb, depth = out["east"]
    green = world.landmark("green_box")
    uv, z = camera.project(np.asarray(green.center)[None], pos, quat)
    assert z[0] > 0 and 0 <= uv[0, 0] < camera.width and 0 <= uv[0, 1] < camera.height
    u, v = int(round(uv[0, 0])), int(round(uv[0, 1]))
    assert color_mask(rgb, "green")[v, u], "the green box is not where the camera model projects it"
    # Depth at that pixel: the box surface, a little closer than its centre.
    assert 0.0 < z[0] - depth[v, u] < 0.3


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_detects_and_localizes_visible_landmarks(world, views, view):
    camera, out = views
    pos, quat, rgb, depth = out[view]
    visible = VIEWS[view][2]
    for lm_id in visible:
        uv, z = camera.project(np.asarray(world.landmark(lm_id).center)[None], pos, quat)
        assert z[0] > 0 and 5 <= uv[0, 0] < camera.width - 5 and 5 <= uv[0, 1] < camera.height - 5
    for depth_image, tol in ((None, 0.05), (depth, 0.08)):
        found = {g.landmark_id: g for g in ground_landmarks(world, rgb, camera, pos, quat, depth_m=depth_image)}
        assert sorted(found) == sorted(visible)
        for lm_id, g in found.items():
            err = np.linalg.norm(g.position_w - world.landmark(lm_id).position)
            assert err < tol, f"{view}: {lm_id} estimated {g.position_w} ({g.method}), error {err:.3f} m"


def test_grey_scene_has_no_detections(world):
    camera = PinholeCamera()
    rgb = np.full((camera.height, camera.width, 3), 128, np.uint8)
    rgb[:, : camera.width // 2] = (200, 200, 210)
    assert detect_colored_blobs(rgb) == []


def test_synthetic_blob_centroid_and_ray():
    camera = PinholeCamera()
    rgb = np.zeros((camera.height, camera.width, 3), np.uint8)
    rgb[100:120, 200:220] = (230, 20, 20)
    (det,) = detect_colored_blobs(rgb, ["red"])
    assert det.color == "red" and det.area_px == 400
    assert abs(det.u - 209.5) < 1e-6 and abs(det.v - 109.5) < 1e-6
    # Looking level from 1 m up, a pixel below the horizon meets the floor in front of the robot.
    p = localize_on_plane(det, camera, (0.0, 0.0, 1.0), (1.0, 0.0, 0.0, 0.0), 0.0)
    assert p is not None and p[0] > 0 and abs(p[2]) < 1e-9
    # A pixel above the horizon never meets the floor.
    rgb2 = np.zeros_like(rgb)
    rgb2[0:6, 150:170] = (230, 20, 20)
    camera_level = PinholeCamera(pitch_down_rad=0.0)
    (det2,) = detect_colored_blobs(rgb2, ["red"])
    assert localize_on_plane(det2, camera_level, (0.0, 0.0, 1.0), (1.0, 0.0, 0.0, 0.0), 0.0) is None


def test_bad_inputs_are_rejected(world):
    camera = PinholeCamera()
    with pytest.raises(ObservationError, match="RGB uint8"):
        detect_colored_blobs(np.zeros((10, 10), np.uint8))
    with pytest.raises(ObservationError, match="RGB uint8"):
        detect_colored_blobs(np.zeros((10, 10, 3), np.float32))
    with pytest.raises(ObservationError, match="no HSV thresholds"):
        color_mask(np.zeros((10, 10, 3), np.uint8), "ultraviolet")
    rgb = np.zeros((camera.height, camera.width, 3), np.uint8)
    rgb[100:120, 200:220] = (230, 20, 20)
    with pytest.raises(ObservationError, match="depth image"):
        ground_landmarks(world, rgb, camera, (0.0, 0.0, 1.0), (1.0, 0.0, 0.0, 0.0), depth_m=np.ones((5, 5)))
