"""Perception: the camera model and landmark detection."""

from robot_hrl.perception.camera import PinholeCamera
from robot_hrl.perception.landmarks import (
    COLOR_HSV_RANGES,
    Detection,
    GroundedLandmark,
    color_mask,
    detect_colored_blobs,
    ground_landmarks,
    localize_on_plane,
    localize_with_depth,
)

__all__ = [
    "COLOR_HSV_RANGES", "Detection", "GroundedLandmark", "PinholeCamera", "color_mask", "detect_colored_blobs",
    "ground_landmarks", "localize_on_plane", "localize_with_depth",
]
