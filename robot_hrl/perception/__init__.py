"""Perception: the camera model and landmark detection."""

from robot_hrl.perception.camera import PinholeCamera

__all__ = ["PinholeCamera"]
