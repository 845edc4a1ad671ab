"""Coloured landmark detection (OpenCV, HSV thresholds) and localization with the camera model.

``detect_colored_blobs`` finds saturated blobs of the named colours in an RGB image.
``ground_landmarks`` matches them to the world's landmarks (by colour) and estimates where
they are: from a depth image when one is given (metres along the optical axis), otherwise by
intersecting the pixel's ray (:meth:`PinholeCamera.ray_world`) with the horizontal plane at
the landmark's known centre height. This grounds names like "the red box" for the VLM planner.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from robot_hrl.errors import ObservationError
from robot_hrl.perception.camera import PinholeCamera

HsvRange = tuple[tuple[int, int, int], tuple[int, int, int]]

COLOR_HSV_RANGES: dict[str, tuple[HsvRange, ...]] = {
    # OpenCV hue is 0..179. Saturation >= 100 keeps grey floors, walls and sky out.
    "red": (((0, 100, 50), (8, 255, 255)), ((170, 100, 50), (179, 255, 255))),
    "orange": (((9, 100, 50), (19, 255, 255)),),
    "yellow": (((20, 100, 50), (34, 255, 255)),),
    "green": (((35, 100, 40), (85, 255, 255)),),
    "cyan": (((86, 100, 40), (99, 255, 255)),),
    "blue": (((100, 100, 40), (130, 255, 255)),),
    "magenta": (((140, 100, 50), (169, 255, 255)),),
}
"""HSV thresholds per colour name; extend for new landmark colours."""


@dataclass(frozen=True)
class Detection:
    color: str
    u: float
    """Centroid column, pixels."""
    v: float
    """Centroid row, pixels."""
    area_px: int
    bbox: tuple[int, int, int, int]
    """x, y, width, height."""
    mask: np.ndarray
    """(H, W) bool: the blob's pixels."""


@dataclass(frozen=True)
class GroundedLandmark:
    landmark_id: str
    color: str
    detection: Detection
    position_w: np.ndarray
    """Estimated centre of the landmark, world ENU, m."""
    method: str
    """``depth`` or ``plane``."""


def _check_rgb(image_rgb) -> np.ndarray:
    image = np.asarray(image_rgb)
    if image.ndim != 3 or image.shape[2] not in (3, 4) or image.dtype != np.uint8:
        raise ObservationError(f"expected an RGB uint8 image (H, W, 3), got {image.dtype} {image.shape}")
    return np.ascontiguousarray(image[..., :3])


def color_mask(image_rgb: np.ndarray, color: str) -> np.ndarray:
    """Pixels of ``color`` (a key of :data:`COLOR_HSV_RANGES`)."""
    if color not in COLOR_HSV_RANGES:
        raise ObservationError(f"no HSV thresholds for colour {color!r}; known: {sorted(COLOR_HSV_RANGES)}")
    hsv = cv2.cvtColor(_check_rgb(image_rgb), cv2.COLOR_RGB2HSV)
    mask = np.zeros(hsv.shape[:2], dtype=np.uint8)
    for lo, hi in COLOR_HSV_RANGES[color]:
        mask |= cv2.inRange(hsv, np.array(lo, np.uint8), np.array(hi, np.uint8))
    return cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)) > 0


def detect_colored_blobs(image_rgb: np.ndarray, colors=None, min_area_px: int = 12) -> list[Detection]:
    """Connected blobs of each colour, largest first within a colour."""
    image = _check_rgb(image_rgb)
    out: list[Detection] = []
    for color in colors or COLOR_HSV_RANGES:
        mask = color_mask(image, color).astype(np.uint8)
        n, labels, stats, centroids = cv2.connectedComponentsWithStats(mask, connectivity=8)
        found = []
        for i in range(1, n):
            area = int(stats[i, cv2.CC_STAT_AREA])
            if area < min_area_px:
                continue
            x, y, w, h = (int(stats[i, k]) for k in (cv2.CC_STAT_LEFT, cv2.CC_STAT_TOP, cv2.CC_STAT_WIDTH,
                                                     cv2.CC_STAT_HEIGHT))
            found.append(Detection(color, float(centroids[i, 0]), float(centroids[i, 1]), area, (x, y, w, h),
                                   labels == i))
        out.extend(sorted(found, key=lambda d: -d.area_px))
    return out


def localize_on_plane(detection: Detection, camera: PinholeCamera, position_w, quat_wxyz,
                      plane_z: float) -> np.ndarray | None:
    """Where the ray through the blob's centroid meets the plane z = plane_z (None if it does not)."""
    origin, d = camera.ray_world(detection.u, detection.v, position_w, quat_wxyz)
    if abs(d[2]) < 1e-9:
        return None
    t = (plane_z - origin[2]) / d[2]
    if t <= 0:
        return None
    return origin + t * d


def localize_with_depth(detection: Detection, camera: PinholeCamera, position_w, quat_wxyz,
                        depth_m: np.ndarray, centre_offset_m: float = 0.0) -> np.ndarray | None:
    """The blob's surface point from a depth image (metres along the optical axis), pushed
    ``centre_offset_m`` further along the ray to reach the object's centre."""
    depth = np.asarray(depth_m, dtype=np.float64)
    if depth.shape != detection.mask.shape:
        raise ObservationError(f"the depth image is {depth.shape}, the colour image {detection.mask.shape}")
    values = depth[detection.mask]
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) == 0:
        return None
    z = float(np.median(values))
    r_wo, origin = camera.pose_in_world(position_w, quat_wxyz)
    p_o = np.array([(detection.u - camera.cx) / camera.fx * z, (detection.v - camera.cy) / camera.fy * z, z])
    p = origin + r_wo @ p_o
    ray = p - origin
    return p + ray / np.linalg.norm(ray) * centre_offset_m


def ground_landmarks(world, image_rgb: np.ndarray, camera: PinholeCamera, position_w, quat_wxyz,
                     depth_m: np.ndarray | None = None, min_area_px: int = 12) -> list[GroundedLandmark]:
    """The world's landmarks visible in the image, with estimated positions.

    Each detection of a landmark's colour is matched to the landmark of that colour closest to
    the estimate; each landmark is reported once (its largest blob).
    """
    colors = sorted({lm.color for lm in world.landmarks if lm.color in COLOR_HSV_RANGES})
    detections = detect_colored_blobs(image_rgb, colors, min_area_px)
    out: dict[str, GroundedLandmark] = {}
    for det in detections:
        candidates = [lm for lm in world.landmarks if lm.color == det.color]
        best = None
        for lm in candidates:
            if depth_m is not None:
                p = localize_with_depth(det, camera, position_w, quat_wxyz, depth_m,
                                        centre_offset_m=float(np.mean(lm.size[:2])) / 2.0)
                method = "depth"
            else:
                p = localize_on_plane(det, camera, position_w, quat_wxyz, float(lm.center[2]))
                method = "plane"
            if p is None:
                continue
            err = float(np.linalg.norm(p - lm.position))
            if best is None or err < best[0]:
                best = (err, lm, p, method)
        if best is None:
            continue
        _, lm, p, method = best
        if lm.id not in out:
            out[lm.id] = GroundedLandmark(lm.id, lm.color, det, p, method)
    return list(out.values())
