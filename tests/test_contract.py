"""The policy contract: round trip, compatibility checks and their error messages."""

import json

import numpy as np
import pytest

from robot_hrl.contract import (
    PolicyContract,
    actions_to_wrench,
    compute_observation,
    goto_contract,
    hover_actions,
    wrench_to_actions,
)
from robot_hrl.errors import ContractError, ObservationError
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.robots.crazyflie_2x.actuators import mix_wrench_to_rotor_thrusts
from robot_hrl.robots.quadrotor import QuadrotorParams


@pytest.fixture
def contract():
    return goto_contract(CRAZYFLIE_2X)


def test_round_trip(contract):
    assert PolicyContract.from_json(contract.to_json()) == contract
    assert contract.observation_size == 22
    assert contract.action_size == 4


@pytest.mark.parametrize("text, fragment", [(None, "no contract"), ("", "no contract"), ("{not json", "not valid JSON"),
                                             ('{"schema_version": 99}', "schema_version 99"),
                                             ('{"schema_version": 1}', "malformed")])
def test_bad_contract_text_is_rejected(text, fragment):
    with pytest.raises(ContractError, match=fragment):
        PolicyContract.from_json(text)


def test_mismatches_are_named(contract):
    other = QuadrotorParams(**{**CRAZYFLIE_2X.__dict__, "name": "big_drone"})
    with pytest.raises(ContractError, match="robot: model trained for 'crazyflie_2x'"):
        contract.check_compatible(other)
    heavier = QuadrotorParams(**{**CRAZYFLIE_2X.__dict__, "mass_kg": 0.035})
    with pytest.raises(ContractError, match="robot parameters"):
        contract.check_compatible(heavier)
    with pytest.raises(ContractError, match="control rate"):
        contract.check_compatible(CRAZYFLIE_2X, control_rate_hz=500.0)
    with pytest.raises(ContractError, match="observation size"):
        contract.check_compatible(CRAZYFLIE_2X, observation_size=21)
    contract.check_compatible(CRAZYFLIE_2X, control_rate_hz=100.0, observation_size=22)


def test_contract_json_names_firmware_mode(contract):
    data = json.loads(contract.to_json())
    assert data["action"]["firmware_control_mode"] == "controlModeForceTorque"
    assert data["firmware"] == {"name": "crazyflie-firmware", "release": "2026.08", "platform": "cf2", "propellers": "2.1+",
                                "control_mode": "controlModeForceTorque"}
    assert data["robot"]["params_sha256"] == CRAZYFLIE_2X.params_sha256()


def test_hover_action_mixes_to_equal_rotor_thrust_equal_weight(contract):
    wrench = actions_to_wrench(contract.action, hover_actions(contract.action, CRAZYFLIE_2X))
    thrusts = mix_wrench_to_rotor_thrusts(CRAZYFLIE_2X, wrench)
    np.testing.assert_allclose(thrusts, CRAZYFLIE_2X.weight_n / 4, atol=2e-6)  # (the firmware's int32 command: 1.8e-6 N)


def test_mixer_matches_firmware_signs():
    # Positive roll torque lifts the left side (M3, M4), positive pitch the back (M2, M3),
    # positive yaw speeds up the clockwise rotors (M2, M4): crazyflie-firmware's mixer.
    base = np.array([0.3, 0.0, 0.0, 0.0])
    for axis, raised in ((1, [2, 3]), (2, [1, 2]), (3, [1, 3])):
        w = base.copy()
        w[axis] = 1e-4
        delta = mix_wrench_to_rotor_thrusts(CRAZYFLIE_2X, w) - mix_wrench_to_rotor_thrusts(CRAZYFLIE_2X, base)
        assert sorted(np.flatnonzero(delta > 0).tolist()) == raised


def test_saturation_keeps_torque(contract):
    """On a low battery (3.1 V: 0.122 N a rotor) the full thrust command saturates; the firmware's cap lowers every
    motor by the same PWM, so most of the roll torque survives (not all: the fit is convex, an equal PWM drop takes more
    force from the high rotors) and the thrust gives way."""
    from robot_hrl.robots.crazyflie_2x.actuators import max_rotor_force_n

    wrench = np.array([CRAZYFLIE_2X.max_total_thrust_n, 1e-3, 0.0, 0.0])
    thrusts = mix_wrench_to_rotor_thrusts(CRAZYFLIE_2X, wrench, battery_v=3.1)
    assert thrusts.max() <= float(max_rotor_force_n(3.1)) + 1e-9 and thrusts.sum() < CRAZYFLIE_2X.max_total_thrust_n
    tau_x = CRAZYFLIE_2X.allocation_matrix()[1] @ thrusts
    assert 0.7e-3 < tau_x < 1e-3


def test_action_round_trip(contract):
    a = np.random.default_rng(0).uniform(-1, 1, (100, 4))
    np.testing.assert_allclose(wrench_to_actions(contract.action, actions_to_wrench(contract.action, a)), a, atol=1e-12)


def _inputs(**overrides):
    x = dict(position_w=np.zeros(3), quat_wxyz=np.array([1.0, 0, 0, 0]), linear_velocity_w=np.zeros(3),
             angular_velocity_b=np.zeros(3), subgoal_w=np.array([0.5, 0, 1.0]), last_action=np.zeros(4))
    x.update(overrides)
    return x


def test_observation_layout_and_clipping(contract):
    obs = compute_observation(contract.observations, _inputs(subgoal_w=np.array([10.0, 0, 0])))
    assert obs.shape == (22,) and obs.dtype == np.float32
    assert obs[0] == 2.0  # subgoal error clipped to the contract's range
    np.testing.assert_array_equal(obs[3:12], np.eye(3).ravel())


def test_nan_state_is_rejected(contract):
    with pytest.raises(ObservationError, match="not finite"):
        compute_observation(contract.observations, _inputs(position_w=np.array([np.nan, 0, 0])))
