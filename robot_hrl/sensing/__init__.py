"""Onboard sensing described once, robot-neutral: range sensors (time-of-flight rangers).

A robot package lists its sensors with these types (``robot_hrl/robots/crazyflie_2x/rangers.py``);
the batched torch simulator (``sim/envs/ranging.py``), PyBullet (``sim/pybullet/ranging.py``),
the learned navigation policy's contract and the ROS ``sensor_msgs/Range`` output all read them.
"""

from robot_hrl.sensing.range import (
    ExponentialRangeNoise,
    RangeSensorSpec,
    range_message,
    ray_directions_b,
    sensor_suite_sha256,
)
from robot_hrl.sensing.robot import range_sensor, robot_range_sensors

__all__ = ["ExponentialRangeNoise", "RangeSensorSpec", "range_message", "range_sensor", "ray_directions_b", "robot_range_sensors",
           "sensor_suite_sha256"]
