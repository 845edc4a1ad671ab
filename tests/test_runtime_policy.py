"""OnnxPolicy: loading, contract checks, integrity, observations, inference and actions."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from robot_hrl.contract import actions_to_wrench, compute_observation, goto_contract
from robot_hrl.errors import ContractError, ModelLoadError, ObservationError
from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.runtime import OnnxPolicy, read_model_metadata, sha256_file, sidecar_path
from robot_hrl.state import RobotState
from test_runtime_models import make_policy_model, reference

CONTRACT = goto_contract(CRAZYFLIE_2X)


@pytest.fixture()
def model(tmp_path):
    path = tmp_path / "policy.onnx"
    weights = make_policy_model(path, extra_metadata={"robot_hrl.provenance.seed": "7"})
    return path, weights


def flying_state() -> RobotState:
    return RobotState(
        position_w=np.array([0.2, -0.1, 1.0]),
        quat_wxyz=quat_from_euler_rpy(0.1, -0.05, 0.3),
        linear_velocity_w=np.array([0.3, 0.0, -0.1]),
        angular_velocity_b=np.array([0.5, -0.2, 0.1]),
    )


def state_inputs(state: RobotState, subgoal, last_action) -> dict:
    return {
        "position_w": state.position_w, "quat_wxyz": state.quat_wxyz, "linear_velocity_w": state.linear_velocity_w,
        "angular_velocity_b": state.angular_velocity_b, "subgoal_w": np.asarray(subgoal, float), "last_action": last_action,
    }


# ---- the good path ---------------------------------------------------------------------------
def test_loads_contract_provider_and_provenance(model):
    path, _ = model
    policy = OnnxPolicy(path)
    assert policy.contract == CONTRACT
    assert policy.provider == "cpu"
    assert (policy.observation_size, policy.action_size, policy.control_rate_hz) == (22, 4, 100.0)
    assert policy.sha256 == sha256_file(path)
    assert policy.provenance == {"seed": 7}
    assert "crazyflie_2x" in repr(policy)
    assert read_model_metadata(path)["robot_hrl.contract"] == CONTRACT.to_json()


def test_infer_single_and_batched_matches_the_graph(model):
    path, weights = model
    policy = OnnxPolicy(path)
    obs = np.random.default_rng(0).normal(size=(2, 3, 22)).astype(np.float32)
    batched = policy.infer(obs)
    assert batched.shape == (2, 3, 4) and batched.dtype == np.float32
    np.testing.assert_allclose(batched, reference(weights, obs.reshape(-1, 22)).reshape(2, 3, 4), atol=1e-6)
    single = policy.infer(obs[1, 2])
    assert single.shape == (4,)
    np.testing.assert_allclose(single, batched[1, 2], atol=1e-6)
    # the returned array is a copy: the next call must not change it
    kept = single.copy()
    policy.infer(obs[0, 0].astype(np.float64))  # float64 input is accepted
    np.testing.assert_array_equal(single, kept)


def test_step_builds_the_contract_observation_and_feeds_back_the_action(model):
    path, weights = model
    policy = OnnxPolicy(path)
    state, subgoal = flying_state(), [0.8, 0.4, 1.5]

    first = policy.step(state, subgoal)
    expected_obs = compute_observation(CONTRACT.observations, state_inputs(state, subgoal, np.zeros(4)))
    np.testing.assert_allclose(policy.last_observation, expected_obs)
    np.testing.assert_allclose(first, reference(weights, expected_obs[None])[0], atol=1e-6)
    np.testing.assert_allclose(policy.last_action, first, atol=1e-7)

    second = policy.step(state, subgoal)
    expected_obs2 = compute_observation(CONTRACT.observations, state_inputs(state, subgoal, first.astype(np.float64)))
    np.testing.assert_allclose(policy.last_observation, expected_obs2, atol=1e-7)
    np.testing.assert_allclose(second, reference(weights, expected_obs2[None])[0], atol=1e-6)

    policy.reset()
    np.testing.assert_array_equal(policy.last_action, np.zeros(4))
    assert policy.last_observation is None
    np.testing.assert_allclose(policy.step(state, subgoal), first, atol=1e-7)


def test_to_wrench_uses_the_contract_action_mapping(model):
    policy = OnnxPolicy(model[0])
    actions = np.array([-1.0, 1.0, 0.0, 0.5])
    wrench = policy.to_wrench(actions)
    np.testing.assert_allclose(wrench, actions_to_wrench(CONTRACT.action, actions))
    assert wrench[0] == pytest.approx(0.0) and wrench[1] == pytest.approx(CONTRACT.action.terms[1].high)
    batch = policy.to_wrench(np.zeros((5, 4)))
    assert batch.shape == (5, 4)


def test_verify_sha256_false_skips_the_check(model):
    path, _ = model
    sidecar_path(path).write_text("0" * 64 + "  policy.onnx\n")
    policy = OnnxPolicy(path, verify_sha256=False)
    assert policy.sha256 is None


def test_model_without_sidecar_loads(tmp_path):
    path = tmp_path / "bare.onnx"
    make_policy_model(path, sidecar=False)
    assert OnnxPolicy(path).sha256 is None


# ---- bad files -----------------------------------------------------------------------------------
def test_missing_file(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        OnnxPolicy(tmp_path / "nope.onnx")
    with pytest.raises(ModelLoadError, match="does not exist"):
        read_model_metadata(tmp_path / "nope.onnx")


def test_corrupted_file(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(np.random.default_rng(0).bytes(3000))
    with pytest.raises(ModelLoadError, match="corrupted, truncated or not an ONNX model"):
        OnnxPolicy(path)


def test_truncated_file_without_sidecar(model):
    path, _ = model
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    sidecar_path(path).unlink()
    with pytest.raises(ModelLoadError, match="corrupted, truncated"):
        OnnxPolicy(path)


def test_truncated_file_is_caught_by_the_sidecar(model):
    path, _ = model
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(ModelLoadError, match="integrity check failed.*re-export"):
        OnnxPolicy(path)


def test_sha256_mismatch(model):
    path, _ = model
    sidecar_path(path).write_text("ab" * 32 + "  policy.onnx\n")
    with pytest.raises(ModelLoadError, match="integrity check failed"):
        OnnxPolicy(path)


def test_malformed_sidecar(model):
    path, _ = model
    sidecar_path(path).write_text("not a checksum\n")
    with pytest.raises(ModelLoadError, match="malformed"):
        OnnxPolicy(path)


# ---- contracts -----------------------------------------------------------------------------------
def test_missing_contract(tmp_path):
    path = tmp_path / "nocontract.onnx"
    make_policy_model(path, contract_json=None)
    with pytest.raises(ContractError, match="carries no contract.*deploy/export.py"):
        OnnxPolicy(path)


def test_malformed_contract(tmp_path):
    path = tmp_path / "bad.onnx"
    make_policy_model(path, contract_json="{not json")
    with pytest.raises(ContractError, match="not valid JSON"):
        OnnxPolicy(path)
    data = json.loads(CONTRACT.to_json())
    data["schema_version"] = 99
    make_policy_model(path, contract_json=json.dumps(data))
    with pytest.raises(ContractError, match="schema_version 99"):
        OnnxPolicy(path)


def test_contract_for_another_robot(tmp_path):
    other = dataclasses.replace(CRAZYFLIE_2X, name="bigquad")
    path = tmp_path / "other.onnx"
    make_policy_model(path, contract_json=goto_contract(other).to_json())
    with pytest.raises(ContractError, match="trained for 'bigquad', started for 'crazyflie_2x'"):
        OnnxPolicy(path)


def test_contract_with_different_robot_parameters(model):
    heavier = dataclasses.replace(CRAZYFLIE_2X, mass_kg=0.032)
    with pytest.raises(ContractError, match="robot parameters"):
        OnnxPolicy(model[0], robot=heavier)


def test_control_rate_mismatch(model):
    with pytest.raises(ContractError, match="control rate: model runs at 100.0 Hz, node configured for 50.0 Hz"):
        OnnxPolicy(model[0], control_rate_hz=50.0)
    assert OnnxPolicy(model[0], control_rate_hz=100.0).control_rate_hz == 100.0


def test_graph_observation_size_differs_from_contract(tmp_path):
    path = tmp_path / "obs21.onnx"
    make_policy_model(path, n_obs=21)
    with pytest.raises(ContractError, match="observation size: contract says 22, the graph takes 21"):
        OnnxPolicy(path)


def test_graph_action_size_differs_from_contract(tmp_path):
    path = tmp_path / "act3.onnx"
    make_policy_model(path, n_act=3)
    with pytest.raises(ContractError, match="action size: contract says 4, the graph gives 3"):
        OnnxPolicy(path)


def test_every_mismatch_is_named_at_once(tmp_path):
    path = tmp_path / "obs21.onnx"
    make_policy_model(path, n_obs=21)
    with pytest.raises(ContractError) as info:
        OnnxPolicy(path, control_rate_hz=200.0)
    assert "control rate" in str(info.value) and "observation size" in str(info.value)


def test_unknown_observation_term(tmp_path):
    data = json.loads(CONTRACT.to_json())
    data["observations"][3]["name"] = "airspeed_b"
    path = tmp_path / "term.onnx"
    make_policy_model(path, contract_json=json.dumps(data))
    with pytest.raises(ContractError, match="'airspeed_b'.*not implemented by this runtime"):
        OnnxPolicy(path)


# ---- bad observations ------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [np.zeros(21), np.zeros((3, 23)), np.zeros(()), np.zeros((2, 0))])
def test_wrong_sized_observation(model, bad):
    policy = OnnxPolicy(model[0])
    with pytest.raises(ObservationError, match=r"this model takes \[\.\.\., 22\]"):
        policy.infer(bad)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_observation(model, value):
    policy = OnnxPolicy(model[0])
    obs = np.zeros(22, np.float32)
    obs[5] = value
    with pytest.raises(ObservationError, match="NaN or inf.*withheld"):
        policy.infer(obs)
    with pytest.raises(ObservationError, match="NaN or inf"):
        policy.infer(np.stack([np.zeros(22, np.float32), obs]))


def test_non_finite_state_or_subgoal(model):
    policy = OnnxPolicy(model[0])
    state = flying_state()
    state.linear_velocity_w = np.array([0.0, np.nan, 0.0])
    with pytest.raises(ObservationError, match="not finite"):
        policy.step(state, [0.0, 0.0, 1.0])
    state = flying_state()
    state.angular_velocity_b = np.array([np.inf, 0.0, 0.0])  # the term's clip would hide it
    with pytest.raises(ObservationError, match="angular_velocity_b is not finite"):
        policy.step(state, [0.0, 0.0, 1.0])
    with pytest.raises(ObservationError, match="subgoal_w is not finite"):
        policy.step(flying_state(), [0.0, np.inf, 1.0])
    np.testing.assert_array_equal(policy.last_action, np.zeros(4))  # nothing was fed back


def test_malformed_state_or_subgoal(model):
    policy = OnnxPolicy(model[0])
    with pytest.raises(ObservationError, match=r"subgoal_w has shape \(2,\), expected \(3,\)"):
        policy.step(flying_state(), [1.0, 2.0])
    with pytest.raises(ObservationError, match=r"subgoal_w has shape \(1,\)"):
        policy.step(flying_state(), [1.0])  # would broadcast silently without the check
    state = flying_state()
    state.quat_wxyz = np.array([1.0, 0.0, 0.0])
    with pytest.raises(ObservationError, match=r"RobotState.quat_wxyz has shape \(3,\), expected \(4,\)"):
        policy.step(state, [0.0, 0.0, 1.0])


def test_non_finite_output_is_returned_but_not_fed_back(tmp_path):
    path = tmp_path / "nan.onnx"
    weights = make_policy_model(path)
    weights["b2"][2] = np.nan
    make_policy_model(path, weights=weights)
    policy = OnnxPolicy(path)
    action = policy.step(flying_state(), [0.0, 0.0, 1.0])
    assert np.isnan(action[2])
    np.testing.assert_array_equal(policy.last_action, np.zeros(4))


# ---- properties --------------------------------------------------------------------------------------
def test_single_and_batched_inference_agree_and_stay_in_range(tmp_path):
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from hypothesis.extra.numpy import arrays

    path = tmp_path / "p.onnx"
    weights = make_policy_model(path)
    policy = OnnxPolicy(path)
    finite = st.floats(-50.0, 50.0, allow_nan=False, width=32)

    @settings(max_examples=60, deadline=None)
    @given(arrays(np.float32, st.tuples(st.integers(1, 6), st.just(22)), elements=finite))
    def check(obs):
        batched = policy.infer(obs)
        assert batched.shape == (len(obs), 4)
        assert np.all(np.abs(batched) <= 1.0)
        for row, expected in zip(obs, batched):
            np.testing.assert_allclose(policy.infer(row), expected, atol=1e-6)
        # float32 inference against a float64 reference: inputs up to 50 give pre-activations of a few hundred,
        # whose float32 rounding (eps 1.2e-7 relative) reaches ~1e-5 after the layers (hypothesis found 1.05e-5)
        np.testing.assert_allclose(batched, reference(weights, obs), atol=1e-4)

    check()


def test_provenance_values_that_are_not_json_are_kept_as_text():
    from robot_hrl.runtime import decode_provenance

    decoded = decode_provenance({"robot_hrl.provenance.seed": "3", "robot_hrl.provenance.note": "free text", "other": "x"})
    assert decoded == {"seed": 3, "note": "free text"}
