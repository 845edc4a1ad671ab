"""A range sensor (a single-zone time-of-flight ranger): where it looks, how far, how wide, how often, how noisy.

Frames: body FLU (x forward, y left, z up), metres, seconds. The sensor measures along a cone of
full angle ``field_of_view_rad`` around ``direction_b``; a single-zone ranger reports the nearest
target inside that cone (the Multi-ranger driver keeps the smallest ``RangeMinMilliMeter`` of the
targets it reports). Simulators sample the cone with :func:`ray_directions_b` rays and keep the
minimum, and both simulators take the rays from here, so their ranges agree by construction.

numpy only; no torch (``robot_hrl`` never imports it).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from robot_hrl.errors import ConfigError


@dataclass(frozen=True)
class ExponentialRangeNoise:
    """Standard deviation of a range reading that grows exponentially with distance:

    ``std(d) = std_a_m * (1 + exp(k * (d - point_a_m)))``, ``k = ln(std_b_m / std_a_m) / (point_b_m - point_a_m)``.

    The model and its four numbers are crazyflie-firmware's measurement model for the VL53L1x
    that it feeds to the Kalman filter (``src/deck/drivers/src/zranger2.c``: expPointA 2.5 m,
    expStdA 0.0025 m, expPointB 4.0 m, expStdB 0.2 m).
    """

    point_a_m: float = 2.5
    """Distance at which the standard deviation is about ``2 * std_a_m`` (zranger2.c expPointA)."""
    std_a_m: float = 0.0025
    """Scale of the standard deviation near the sensor (zranger2.c expStdA)."""
    point_b_m: float = 4.0
    """Second anchor distance (zranger2.c expPointB)."""
    std_b_m: float = 0.2
    """Standard deviation scale at ``point_b_m`` (zranger2.c expStdB)."""

    @property
    def coefficient_per_m(self) -> float:
        return math.log(self.std_b_m / self.std_a_m) / (self.point_b_m - self.point_a_m)

    def std_m(self, distance_m):
        """Standard deviation (m) of a reading at ``distance_m`` (array or float)."""
        d = np.asarray(distance_m, dtype=np.float64)
        return self.std_a_m * (1.0 + np.exp(self.coefficient_per_m * (d - self.point_a_m)))


@dataclass(frozen=True)
class RangeSensorSpec:
    """One ranger mounted on the robot."""

    name: str
    """Sensor name, also the last part of its ROS topic (``/range/<name>``) and of its frame (``range_<name>``)."""
    direction_b: tuple[float, float, float]
    """Unit vector of the optical axis, body FLU."""
    offset_b: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Position of the sensor in the body frame, m (rays start here)."""
    min_range_m: float = 0.04
    """Readings below this are not reported."""
    max_range_m: float = 4.0
    """Farthest distance the sensor reports; beyond it there is no reading (ROS: +inf)."""
    field_of_view_rad: float = math.radians(27.0)
    """Full cone angle."""
    update_rate_hz: float = 10.0
    """Rate of new readings."""
    noise: ExponentialRangeNoise = field(default_factory=ExponentialRangeNoise)
    """Zero-mean Gaussian noise of a reading, by distance."""
    radiation_type: int = 1
    """sensor_msgs/Range radiation_type: 0 ULTRASOUND, 1 INFRARED (a 940 nm laser is infrared)."""

    def __post_init__(self) -> None:
        d = np.asarray(self.direction_b, dtype=np.float64)
        if d.shape != (3,) or not np.all(np.isfinite(d)) or abs(np.linalg.norm(d) - 1.0) > 1e-6:
            raise ConfigError(f"range sensor {self.name!r}: direction_b {self.direction_b} must be a unit 3-vector (body FLU)")
        if not 0.0 <= self.min_range_m < self.max_range_m:
            raise ConfigError(f"range sensor {self.name!r}: need 0 <= min_range_m < max_range_m, got "
                              f"{self.min_range_m}, {self.max_range_m}")
        if not 0.0 <= self.field_of_view_rad < math.pi:
            raise ConfigError(f"range sensor {self.name!r}: field_of_view_rad must be in [0, pi), got {self.field_of_view_rad}")
        if not self.update_rate_hz > 0.0:
            raise ConfigError(f"range sensor {self.name!r}: update_rate_hz must be > 0, got {self.update_rate_hz}")

    @property
    def topic(self) -> str:
        return f"/range/{self.name}"

    @property
    def frame_id(self) -> str:
        return f"range_{self.name}"


def ray_directions_b(spec: RangeSensorSpec, rays_per_sensor: int = 5) -> np.ndarray:
    """Unit ray directions (rays_per_sensor, 3), body FLU, that sample the sensor's cone.

    1 ray: the optical axis. 5 rays: the axis and four rays on the cone's edge (half angle
    ``field_of_view_rad / 2``), at 0, 90, 180 and 270 degrees around it; in general the axis and
    ``rays_per_sensor - 1`` rays evenly spaced on the edge. The reading is the minimum over the rays.
    """
    if not isinstance(rays_per_sensor, (int, np.integer)) or rays_per_sensor < 1:
        raise ConfigError(f"rays_per_sensor must be a positive integer, got {rays_per_sensor!r}")
    axis = np.asarray(spec.direction_b, dtype=np.float64)
    if rays_per_sensor == 1:
        return axis[None].copy()
    # two unit vectors perpendicular to the axis
    helper = np.array([0.0, 0.0, 1.0]) if abs(axis[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    u = np.cross(axis, helper)
    u /= np.linalg.norm(u)
    v = np.cross(axis, u)
    half = spec.field_of_view_rad / 2.0
    angles = 2.0 * np.pi * np.arange(rays_per_sensor - 1) / (rays_per_sensor - 1)
    edge = (np.cos(half) * axis[None] + np.sin(half) * (np.cos(angles)[:, None] * u + np.sin(angles)[:, None] * v))
    rays = np.vstack([axis[None], edge])
    rays[np.abs(rays) < 1e-12] = 0.0
    return rays


def sensor_suite_sha256(sensors) -> str:
    """A hash of an ordered tuple of sensor specs (a policy contract names the suite it was trained with)."""
    text = json.dumps([asdict(s) for s in sensors], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def range_message(spec: RangeSensorSpec, range_m: float, stamp_s: float, frame_prefix: str = "",
                  distro: str | None = None, variance_m2: float = 0.0):
    """A ``sensor_msgs/Range`` for one reading, in the layout of ROS 2 ``distro`` (default: the
    ``ROS_DISTRO`` environment variable; Jazzy's layout adds ``variance``). Out of range (``range_m``
    beyond ``max_range_m``, +inf or NaN: no target) is sent as +inf, as REP 117 asks; below
    ``min_range_m`` (-inf included) as -inf."""
    import os

    from robot_hrl.msgs import header, range_class_for_distro  # (lazy: the msgs need cyclonedds)

    cls = range_class_for_distro(os.environ.get("ROS_DISTRO") if distro is None else distro)

    r = float(range_m)
    if math.isnan(r) or r > spec.max_range_m:
        r = math.inf
    elif r < spec.min_range_m:  # (-inf included: a target too close to measure stays one)
        r = -math.inf
    extra = {"variance": float(variance_m2)} if "variance" in cls.__dataclass_fields__ else {}
    return cls(header=header(stamp_s, frame_prefix + spec.frame_id), radiation_type=spec.radiation_type,
               field_of_view=float(spec.field_of_view_rad), min_range=float(spec.min_range_m),
               max_range=float(spec.max_range_m), range=r, **extra)
