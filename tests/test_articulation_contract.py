"""A contract that describes its own robot (an Isaac Lab articulation; sim/isaaclab_adapter/contract.py writes
them), in the main suite without Isaac Lab: the schema's optional fields stay out of the Crazyflie's JSON, the
runtime builds the described robot, rebuilds the observation from raw term values (clip, then scale, then a
history oldest first, filled after a reset, as Isaac Lab's ObservationManager) checked against a numpy
reference, maps joint actions without clipping, and refuses what does not fit. The real Isaac Lab side:
tests/test_isaaclab_contract.py (.ci/isaaclab)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robot_hrl.contract import ActionSpec, ActionTerm, ObservationTerm, PolicyContract, RobotRef, goto_contract
from robot_hrl.errors import ContractError, ObservationError
from robot_hrl.robots import get_robot
from robot_hrl.robots.articulation import ArticulationRobot, articulation_params_sha256
from robot_hrl.runtime import OnnxPolicy
from tests.test_runtime_models import make_policy_model, reference

JOINTS = ("hip", "knee")
DEFAULTS = (0.1, -0.2)


def contract() -> PolicyContract:
    return PolicyContract(
        skill="Isaac-Test", control_rate_hz=50.0,
        robot=RobotRef(name="leg", params_sha256=articulation_params_sha256("leg", JOINTS, DEFAULTS), kind="articulation",
                       joints=JOINTS, default_joint_positions=DEFAULTS),
        observations=(
            ObservationTerm(name="joint_pos_rel", size=2, frame="none", units="rad", clip=(-1.0, 1.0), scale=(2.0, 0.5), joints=JOINTS),
            ObservationTerm(name="joint_vel_rel", size=6, frame="none", units="rad/s", clip=(-3.0, 3.0), scale=0.1, history_length=3),
        ),
        action=ActionSpec(mode="joint_position", terms=tuple(
            ActionTerm(name=j, units="rad", low=d - 0.5, high=d + 0.5, joint=j, default_position=d) for j, d in zip(JOINTS, DEFAULTS))),
    )


@pytest.fixture()
def policy(tmp_path):
    path = tmp_path / "leg.onnx"
    weights = make_policy_model(path, contract_json=contract().to_json(), n_obs=8, n_act=2)
    p = OnnxPolicy(path, provider="cpu")
    p.weights = weights
    return p


def test_optional_fields_stay_out_of_the_crazyflies_json():
    data = json.loads(goto_contract(get_robot("crazyflie_2x")).to_json())
    assert "kind" not in data["robot"] and "output_clip" not in data["action"]
    assert all(set(t) == {"name", "size", "frame", "units", "clip", "description"} for t in data["observations"])
    assert PolicyContract.from_json(contract().to_json()) == contract()


def test_the_runtime_rebuilds_the_observation_with_clip_scale_and_history(policy):
    assert isinstance(policy.robot, ArticulationRobot) and policy.robot.joints == JOINTS
    assert policy.robot.neutral_command().tolist() == list(DEFAULTS)
    rng = np.random.default_rng(0)
    history = None
    for tick in range(6):
        if tick == 4:
            policy.reset()
            history = None
        pos, vel = rng.normal(0, 1.0, 2), rng.normal(0, 4.0, 2)
        frame = np.clip(vel, -3.0, 3.0) * 0.1
        history = [frame] * 3 if history is None else history[1:] + [frame]  # oldest first, filled after a reset
        expected = np.concatenate([np.clip(pos, -1.0, 1.0) * np.array([2.0, 0.5]), *history]).astype(np.float32)
        action = policy.act_terms({"joint_pos_rel": pos, "joint_vel_rel": vel})
        np.testing.assert_allclose(policy.last_observation, expected, atol=1e-7)
        np.testing.assert_allclose(action, reference(policy.weights, expected[None])[0], atol=1e-6)
    # joint positions: default + 0.5 a, not clipped (Isaac Lab's JointPositionAction)
    np.testing.assert_allclose(policy.to_command(np.array([2.0, -1.0])), [0.1 + 1.0, -0.2 - 0.5], atol=1e-12)


def test_what_does_not_fit_is_refused(policy, tmp_path):
    good = {"joint_pos_rel": np.zeros(2), "joint_vel_rel": np.zeros(2)}
    with pytest.raises(ObservationError, match=r"missing: \['joint_vel_rel'\]"):
        policy.act_terms({"joint_pos_rel": np.zeros(2)})
    with pytest.raises(ObservationError, match=r"'joint_vel_rel' has shape \(6,\); the contract says \(2,\), 3 of which"):
        policy.act_terms({**good, "joint_vel_rel": np.zeros(6)})
    with pytest.raises(ObservationError, match=r"'joint_pos_rel' has shape \(3,\).*joints \['hip', 'knee'\]"):
        policy.act_terms({**good, "joint_pos_rel": np.zeros(3)})
    with pytest.raises(ObservationError, match="not finite"):
        policy.act_terms({**good, "joint_vel_rel": np.array([np.inf, 0.0])})
    with pytest.raises(ObservationError, match="act_terms"):
        policy.step(None, np.zeros(3))
    with pytest.raises(ContractError, match="model trained for 'leg', started for 'crazyflie_2x'"):
        OnnxPolicy(policy.path, robot="crazyflie_2x", provider="cpu")
    data = json.loads(contract().to_json())
    data["robot"]["default_joint_positions"] = [0.0, 0.0]  # the description no longer matches its hash
    bad = tmp_path / "bad.onnx"
    make_policy_model(bad, contract_json=json.dumps(data), n_obs=8, n_act=2)
    with pytest.raises(ContractError, match="robot parameters"):
        OnnxPolicy(bad, provider="cpu")
    with pytest.raises(ValueError, match="not a multiple of its history_length"):
        ObservationTerm(name="x", size=5, frame="none", units="1", clip=(-1.0, 1.0), history_length=2)
    with pytest.raises(ValueError, match="one default position per joint"):
        RobotRef(name="leg", params_sha256="0", kind="articulation", joints=JOINTS, default_joint_positions=(0.0,))
