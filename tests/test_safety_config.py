"""Shield configuration: the shipped YAML loads; every kind of invalid configuration is refused
with a ConfigError that names the key."""

from __future__ import annotations

import copy

import pytest
import yaml

from robot_hrl.errors import ConfigError
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.safety import DEFAULT_SHIELD_CONFIG, Shield, load_shield_config, parse_shield_config
from robot_hrl.world import load_world


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load(DEFAULT_SHIELD_CONFIG.read_text())


@pytest.fixture(scope="module")
def world(demo_world_path):
    return load_world(demo_world_path)


def test_shipped_config_loads_and_builds_a_shield(world):
    cfg = load_shield_config()
    assert cfg.robot == CRAZYFLIE_2X.name
    assert cfg.limits.max_tilt_deg == 35.0
    # designed for the slowest motor of the training's range and a step of latency (docs/safety.md)
    assert cfg.stopping.motor_time_constant_s == 0.15 and cfg.stopping.actuation_latency_s == 0.01
    shield = Shield.from_yaml(DEFAULT_SHIELD_CONFIG, CRAZYFLIE_2X, world, subgoal_radius_m=1.0)
    assert [u.name for u in shield.units] == ["estop", "odometry", "watchdog", "battery", "command", "hover_thrust", "motor_lag", "limits",
                                             "geofence", "altitude", "obstacles", "subgoal"]
    assert Shield.from_yaml(None, CRAZYFLIE_2X, world, 1.0).config == cfg


def _with(raw, path, value):
    data = copy.deepcopy(raw)
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (("limits", "max_tilt_deg"), -5.0, "limits.max_tilt_deg"),
        (("limits", "max_tilt_deg"), 95.0, "limits.max_tilt_deg"),
        (("limits", "max_tilt_deg"), "steep", "limits.max_tilt_deg"),
        (("limits", "min_thrust_n"), 1.0, "min_thrust_n"),
        (("limits", "unknown_limit"), 1.0, "limits.unknown_limit"),
        (("geofence", "margin_m"), -0.1, "geofence.margin_m"),
        (("altitude", "min_altitude_m"), 3.0, "altitude.min_altitude_m"),
        (("battery", "land_voltage_v"), 3.5, "battery.land_voltage_v"),
        (("obstacles", "slowdown_distance_m"), 0.01, "slowdown_distance_m"),
        (("stopping", "brake_decel_fraction"), 0.0, "stopping.brake_decel_fraction"),
        (("stopping", "motor_time_constant_s"), 0.0, "stopping.motor_time_constant_s"),
        (("stopping", "actuation_latency_s"), -0.01, "stopping.actuation_latency_s"),
        (("limits", "motor_counter_torque_fraction"), 1.5, "limits.motor_counter_torque_fraction"),
        (("backup", "rate_lead_s"), -0.01, "backup.rate_lead_s"),
        (("backup", "rate_lead_s"), _DELETE, "backup.rate_lead_s"),
        (("watchdog", "state_timeout_s"), 0.0, "watchdog.state_timeout_s"),
        (("backup",), _DELETE, "backup"),
        (("control_rate_hz",), -100.0, "control_rate_hz"),
        (("geofence", "clamp_thrust"), "sometimes", "geofence.clamp_thrust"),
        (("altitude", "clamp_thrust"), "sometimes", "altitude.clamp_thrust"),
        (("obstacles", "clamp_thrust"), [True], "obstacles.clamp_thrust"),
        (("hover_thrust", "use_in_stopping_model"), "maybe", "hover_thrust.use_in_stopping_model"),
        (("hover_thrust", "narrow_after_samples"), -1, "hover_thrust.narrow_after_samples"),
        (("hover_thrust", "narrow_after_samples"), 2.5, "hover_thrust.narrow_after_samples"),
        (("hover_thrust", "narrow_after_samples"), float("nan"), "hover_thrust.narrow_after_samples"),
        (("hover_thrust", "narrow_after_samples"), "soon", "hover_thrust.narrow_after_samples"),
        (("motor_lag", "candidates_range_s"), [0.15, 0.02], "motor_lag.candidates_range_s"),
        (("motor_lag", "samples_per_independent"), 0.5, "motor_lag.samples_per_independent"),
        (("motor_lag", "margin_fraction"), float("nan"), "motor_lag.margin_fraction"),
        (("motor_lag", "window_s"), _DELETE, "motor_lag.window_s"),
        (("motor_lag",), _DELETE, "motor_lag: missing"),
        (("backup", "creep_speed_mps"), -0.1, "backup.creep_speed_mps"),
        (("backup", "creep_speed_mps"), 5.0, "backup.creep_speed_mps"),
        (("backup", "creep_speed_mps"), float("nan"), "backup.creep_speed_mps"),
        (("backup", "recover_s"), -0.1, "backup.recover_s"),
        (("backup", "recover_s"), float("nan"), "backup.recover_s"),
        (("backup", "recover_s"), "soon", "backup.recover_s"),
        (("altitude", "climb_into_band"), "sometimes", "altitude.climb_into_band"),
        (("altitude", "rest_height_m"), -0.01, "altitude.rest_height_m"),
        (("altitude", "rest_height_m"), 0.5, "altitude.rest_height_m"),
        (("altitude", "rest_height_m"), float("nan"), "altitude.rest_height_m"),
        (("altitude", "rest_speed_mps"), 2.0, "altitude.rest_speed_mps"),
        (("altitude", "flow_check"), "maybe", "altitude.flow_check"),
        (("stopping", "fastest_motor_time_constant_s"), 0.5, "stopping.fastest_motor_time_constant_s"),
        (("stopping", "fastest_motor_time_constant_s"), 0.0, "stopping.fastest_motor_time_constant_s"),
        (("stopping", "flow_ground_effect_fraction"), 1.5, "stopping.flow_ground_effect_fraction"),
        (("stopping", "flow_ground_effect_fraction"), float("nan"), "stopping.flow_ground_effect_fraction"),
    ],
)
def test_invalid_values_are_refused_naming_the_key(raw, path, value, expected):
    with pytest.raises(ConfigError, match=expected.replace(".", r"\.")):
        parse_shield_config(_with(raw, path, value), "test")


def test_not_a_mapping_is_refused():
    with pytest.raises(ConfigError, match="mapping"):
        parse_shield_config([1, 2, 3], "test")


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_shield_config(tmp_path / "nope.yaml")


def test_invalid_yaml_is_refused(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("limits: {max_tilt_deg: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_shield_config(path)


def test_yaml_file_with_bad_key_names_the_file(tmp_path, raw):
    path = tmp_path / "shield.yaml"
    path.write_text(yaml.safe_dump(_with(raw, ("limits", "max_speed_mps"), 0.0)))
    with pytest.raises(ConfigError, match=r"shield\.yaml.*limits\.max_speed_mps"):
        load_shield_config(path)


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (("robot",), "other_drone", "robot"),
        (("limits", "max_tilt_deg"), 60.0, "max tilt"),
        (("limits", "max_speed_mps"), 9.0, "max_speed_mps"),
        (("limits", "max_thrust_n"), 2.0, "max_thrust_n"),
        (("limits", "min_thrust_n"), 0.35, "min_thrust_n"),  # (above the 31.5 g weight, 0.309 N)
        (("stopping", "motor_time_constant_s"), 0.02, "stopping.motor_time_constant_s"),
    ],
)
def test_config_that_does_not_fit_the_robot_is_refused(raw, world, path, value, expected):
    cfg = parse_shield_config(_with(raw, path, value), "test")
    with pytest.raises(ConfigError, match=expected):
        Shield(cfg, CRAZYFLIE_2X, world, 1.0)


def test_fence_too_small_for_the_margins_is_refused(raw, world):
    cfg = parse_shield_config(_with(raw, ("geofence", "margin_m"), 3.0), "test")
    with pytest.raises(ConfigError, match="geofence.margin_m"):
        Shield(cfg, CRAZYFLIE_2X, world, 1.0)


def test_backup_that_cannot_lift_is_refused(raw, world):
    cfg = parse_shield_config(_with(raw, ("backup", "max_thrust_fraction_of_max"), 0.3), "test")
    with pytest.raises(ConfigError, match="cannot stop a descent"):
        Shield(cfg, CRAZYFLIE_2X, world, 1.0)


@pytest.mark.parametrize("radius", [0.0, -1.0, float("nan"), float("inf"), "1"])
def test_bad_subgoal_radius_is_refused(world, radius):
    with pytest.raises(ConfigError, match="subgoal_radius_m"):
        Shield.from_yaml(None, CRAZYFLIE_2X, world, radius)
