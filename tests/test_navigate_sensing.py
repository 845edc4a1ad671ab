"""The range sensing description (robot_hrl.sensing, the Crazyflie's rangers) and sensor_msgs/Range on the wire."""

from __future__ import annotations

import math

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore

from robot_hrl.errors import ConfigError
from robot_hrl.msgs import Range, RangeJazzy, message_class, range_class_for_distro
from robot_hrl.robots.crazyflie_2x.rangers import CRAZYFLIE_RANGERS, FLOW_DECK_DOWN, MULTIRANGER_DECK
from robot_hrl.sensing import ExponentialRangeNoise, RangeSensorSpec, range_message, ray_directions_b, sensor_suite_sha256


def test_crazyflie_rangers_point_along_the_body_axes():
    names = [s.name for s in CRAZYFLIE_RANGERS]
    assert names == ["front", "back", "left", "right", "up", "down"]
    axes = np.array([s.direction_b for s in CRAZYFLIE_RANGERS])
    np.testing.assert_array_equal(axes, [[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]])
    assert len(MULTIRANGER_DECK) == 5 and FLOW_DECK_DOWN.name == "down"
    for s in CRAZYFLIE_RANGERS:
        assert s.max_range_m == 4.0 and s.min_range_m == 0.04
        assert math.degrees(s.field_of_view_rad) == pytest.approx(27.0)
        assert s.update_rate_hz == 10.0 and s.radiation_type == Range.INFRARED
        assert s.topic == f"/range/{s.name}" and s.frame_id == f"range_{s.name}"


def test_noise_model_is_the_firmware_model():
    noise = ExponentialRangeNoise()
    # zranger2.c: std = expStdA * (1 + exp(expCoeff * (d - expPointA))), expCoeff = ln(0.2 / 0.0025) / 1.5
    for d in (0.1, 1.0, 2.5, 3.3, 4.0):
        expected = 0.0025 * (1 + math.exp(math.log(0.2 / 0.0025) / 1.5 * (d - 2.5)))
        assert noise.std_m(d) == pytest.approx(expected)
    assert noise.std_m(4.0) == pytest.approx(0.2025)
    assert np.all(np.diff(noise.std_m(np.linspace(0, 4, 20))) > 0)


@pytest.mark.parametrize("rays", [1, 5, 9])
def test_cone_rays_are_unit_vectors_on_the_field_of_view(rays):
    for spec in CRAZYFLIE_RANGERS:
        d = ray_directions_b(spec, rays)
        assert d.shape == (rays, 3)
        np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(d[0], spec.direction_b)
        angles = np.arccos(np.clip(d[1:] @ np.asarray(spec.direction_b), -1, 1))
        np.testing.assert_allclose(angles, spec.field_of_view_rad / 2, atol=1e-9)


def test_bad_sensor_descriptions_are_refused_with_the_reason():
    with pytest.raises(ConfigError, match="unit 3-vector"):
        RangeSensorSpec("x", (1.0, 1.0, 0.0))
    with pytest.raises(ConfigError, match="min_range_m < max_range_m"):
        RangeSensorSpec("x", (1.0, 0.0, 0.0), min_range_m=5.0, max_range_m=4.0)
    with pytest.raises(ConfigError, match="field_of_view"):
        RangeSensorSpec("x", (1.0, 0.0, 0.0), field_of_view_rad=4.0)
    with pytest.raises(ConfigError, match="update_rate_hz"):
        RangeSensorSpec("x", (1.0, 0.0, 0.0), update_rate_hz=0.0)
    with pytest.raises(ConfigError, match="rays_per_sensor"):
        ray_directions_b(CRAZYFLIE_RANGERS[0], 0)


def test_suite_hash_changes_with_any_field():
    base = sensor_suite_sha256(CRAZYFLIE_RANGERS)
    assert base == sensor_suite_sha256(tuple(CRAZYFLIE_RANGERS))
    moved = (RangeSensorSpec("front", (1.0, 0.0, 0.0), max_range_m=3.9), *CRAZYFLIE_RANGERS[1:])
    assert sensor_suite_sha256(moved) != base
    assert sensor_suite_sha256(CRAZYFLIE_RANGERS[::-1]) != base


@pytest.mark.parametrize("store,cls", [(Stores.ROS2_HUMBLE, Range), (Stores.ROS2_JAZZY, RangeJazzy)])
def test_range_cdr_bytes_are_ros2s(store, cls):
    typestore = get_typestore(store)
    ros = "sensor_msgs/msg/Range"
    ours_fields = list(cls.__dataclass_fields__)
    assert ours_fields == [name for name, _ in typestore.fielddefs[ros][1]]
    assert [(n, v) for n, _, v in typestore.fielddefs[ros][0]] == [("ULTRASOUND", cls.ULTRASOUND), ("INFRARED", cls.INFRARED)]
    rng = np.random.default_rng(3)
    for _ in range(5):
        values = {"radiation_type": int(rng.integers(0, 2)), "field_of_view": float(np.float32(rng.uniform(0, 1))),
                  "min_range": float(np.float32(rng.uniform(0, 0.1))), "max_range": float(np.float32(rng.uniform(1, 5))),
                  "range": float(np.float32(rng.uniform(0, 5)))}
        if cls is RangeJazzy:
            values["variance"] = float(np.float32(rng.uniform(0, 0.1)))
        msg = range_message(CRAZYFLIE_RANGERS[0], 1.0, 12.5, distro="humble" if cls is Range else "jazzy")
        assert type(msg) is cls
        msg = cls(header=msg.header, **values)
        rb_header = typestore.types["std_msgs/msg/Header"](
            stamp=typestore.types["builtin_interfaces/msg/Time"](sec=msg.header.stamp.sec, nanosec=msg.header.stamp.nanosec),
            frame_id=msg.header.frame_id)
        theirs = bytes(typestore.serialize_cdr(typestore.types[ros](header=rb_header, **values), ros))
        assert msg.serialize() == theirs
        back = typestore.deserialize_cdr(msg.serialize(), ros)
        assert back.range == pytest.approx(values["range"]) and back.header.frame_id == "range_front"
        assert cls.deserialize(theirs) == msg


def test_range_message_follows_rep117_and_the_registry():
    front = CRAZYFLIE_RANGERS[0]
    # two layouts under one type name: chosen by distribution, not in the one-class-per-name registry
    with pytest.raises(Exception, match="Range"):
        message_class("sensor_msgs/msg/Range")
    assert range_class_for_distro("humble") is Range and range_class_for_distro("jazzy") is RangeJazzy
    assert range_class_for_distro(None) is RangeJazzy
    assert type(range_message(front, 1.0, 0.0, distro="humble")) is Range
    msg = range_message(front, 1.234, 3.5, frame_prefix="cf1/", distro="jazzy", variance_m2=1e-4)
    assert type(msg) is RangeJazzy and msg.variance == pytest.approx(1e-4)
    assert msg.header.frame_id == "cf1/range_front" and msg.header.stamp.sec == 3
    assert msg.range == pytest.approx(1.234) and msg.max_range == 4.0 and msg.radiation_type == Range.INFRARED
    assert range_message(front, 4.5, 0.0).range == math.inf
    assert range_message(front, float("nan"), 0.0).range == math.inf
    assert range_message(front, 0.01, 0.0).range == -math.inf
