"""The Crazyflie 2.x's rangers: the Multi-ranger deck (five VL53L1x) and the Flow deck v2's downward VL53L1x.

Sources (each number below names one):

- ST VL53L1X datasheet (DocID031281, Rev 3, Nov 2018), "Features": up to 400 cm distance
  measurement, up to 50 Hz ranging frequency, typical full field of view 27 degrees; its ranging
  tables start at 4 cm. Class 1 940 nm laser: ``sensor_msgs/Range.INFRARED``.
- bitcraze/crazyflie-firmware ``src/deck/drivers/src/multiranger.c``: five sensors (front, back,
  up, left, right, one PCA95x4 XSHUT pin each), read in one task every 100 ms
  (``vTaskDelayUntil(..., M2T(100))``: 10 Hz), range in mm / 1000; an invalid reading
  (no target, status != valid) is not written, so the log keeps the previous value.
- bitcraze/crazyflie-firmware ``src/deck/drivers/src/zranger2.c`` (the Flow deck v2's down
  ranger, same driver as the Z-ranger v2): read every 100 ms in the version consulted
  (``M2T(100)``); readings >= 5000 mm are outliers (``RANGE_OUTLIER_LIMIT``); the noise model
  ``std(d) = 0.0025 (1 + exp(k (d - 2.5)))`` with std 0.2 m at 4 m
  (:class:`robot_hrl.sensing.ExponentialRangeNoise` holds those four numbers). The same model
  is used for the Multi-ranger's sensors (the same chip; the firmware has no model of its own for them).
- Bitcraze's Multi-ranger deck product page: "up to 4 m" in five directions.

Mounting: the optical axes are the body axes (front +x, back -x, left +y, right -y, up +z, down
-z: the deck's silk screen and the driver's names). The sensors sit within about 2 cm of the
body centre; the offsets are neglected (0) here: no published drawing was consulted, and 2 cm is
below the 4 cm minimum range.
"""

from __future__ import annotations

import math

from robot_hrl.sensing.range import ExponentialRangeNoise, RangeSensorSpec

VL53L1X_MAX_RANGE_M = 4.0
"""VL53L1X datasheet: "up to 400 cm distance measurement"."""
VL53L1X_MIN_RANGE_M = 0.04
"""VL53L1X datasheet ranging tables start at 4 cm."""
VL53L1X_FIELD_OF_VIEW_RAD = math.radians(27.0)
"""VL53L1X datasheet: "typical full field-of-view (FoV): 27 degrees"."""
MULTIRANGER_UPDATE_RATE_HZ = 10.0
"""multiranger.c: one read of every sensor per 100 ms task period."""
ZRANGER2_UPDATE_RATE_HZ = 10.0
"""zranger2.c (version consulted): one read per 100 ms task period."""
VL53L1X_NOISE = ExponentialRangeNoise()
"""zranger2.c measurement noise model (expPointA/B, expStdA/B)."""


def _vl53l1x(name: str, direction_b: tuple[float, float, float], rate_hz: float) -> RangeSensorSpec:
    return RangeSensorSpec(name=name, direction_b=direction_b, min_range_m=VL53L1X_MIN_RANGE_M,
                           max_range_m=VL53L1X_MAX_RANGE_M, field_of_view_rad=VL53L1X_FIELD_OF_VIEW_RAD,
                           update_rate_hz=rate_hz, noise=VL53L1X_NOISE, radiation_type=1)


MULTIRANGER_DECK: tuple[RangeSensorSpec, ...] = (
    _vl53l1x("front", (1.0, 0.0, 0.0), MULTIRANGER_UPDATE_RATE_HZ),
    _vl53l1x("back", (-1.0, 0.0, 0.0), MULTIRANGER_UPDATE_RATE_HZ),
    _vl53l1x("left", (0.0, 1.0, 0.0), MULTIRANGER_UPDATE_RATE_HZ),
    _vl53l1x("right", (0.0, -1.0, 0.0), MULTIRANGER_UPDATE_RATE_HZ),
    _vl53l1x("up", (0.0, 0.0, 1.0), MULTIRANGER_UPDATE_RATE_HZ),
)
"""The Multi-ranger deck's five sensors (multiranger.c: front, back, up, left, right)."""

FLOW_DECK_DOWN = _vl53l1x("down", (0.0, 0.0, -1.0), ZRANGER2_UPDATE_RATE_HZ)
"""The Flow deck v2's downward VL53L1x (zranger2.c)."""

CRAZYFLIE_RANGERS: tuple[RangeSensorSpec, ...] = (*MULTIRANGER_DECK, FLOW_DECK_DOWN)
"""Every ranger, in the order the navigation policy observes them: front, back, left, right, up, down."""

RANGERS = CRAZYFLIE_RANGERS
"""The robot's range sensors by the package convention (robot_hrl.sensing.robot_range_sensors reads ``RANGERS``)."""
