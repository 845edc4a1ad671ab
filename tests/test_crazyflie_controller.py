"""The generated out-of-tree controller, compiled with host gcc against our firmware header stubs.

Checks the onboard contract against the Python runtime: the observation built from the
firmware's structures (gyro in deg/s, quaternion through named fields, legacy Euler attitude
poisoned) equals robot_hrl.contract.compute_observation; the action mapping equals
actions_to_wrench; the controller equals OnnxPolicy tick for tick; and the shield's onboard
part (rate, hold, clamps, PID fallback on NaN) behaves.
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.example_model import build_mlp_onnx
from deploy.crazyflie.host import HostController
from robot_hrl.contract import actions_to_wrench, compute_observation, goto_contract
from robot_hrl.geometry import quat_normalize
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.runtime import OnnxPolicy
from robot_hrl.state import RobotState

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a host gcc")

MODE_POLICY, MODE_PID_NO_SETPOINT, MODE_PID_DISABLED, MODE_PID_NONFINITE = 0, 1, 2, 3
MODE_ABS, MODE_VELOCITY = 1, 2
CONTROL_MODE_LEGACY, CONTROL_MODE_FORCE_TORQUE = 0, 1
RAD_TO_DEG = 180.0 / math.pi


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ctrl")
    path = build_mlp_onnx(tmp / "m.onnx", hidden=(32, 32), activation="elu", seed=7)
    project = generate_project(path, tmp / "cf")
    return path, project, HostController.build(project, tmp / "host")


def _random_state(rng, far=False):
    q = quat_normalize(rng.standard_normal(4))
    pos = rng.uniform(-3, 3, 3)
    sub = pos + rng.uniform(-4, 4, 3) if far else pos + rng.uniform(-1, 1, 3)
    return {
        "position_w": pos, "quat_wxyz": q, "linear_velocity_w": rng.uniform(-6, 6, 3),
        "angular_velocity_b": rng.uniform(-40, 40, 3), "subgoal_w": sub, "last_action": rng.uniform(-1.2, 1.2, 4),
    }


def _row(s):
    """Firmware units: the gyro in deg/s."""
    return np.concatenate([s["position_w"], s["quat_wxyz"], s["linear_velocity_w"],
                           np.asarray(s["angular_velocity_b"]) * RAD_TO_DEG, s["subgoal_w"]]).astype(np.float32)


def test_observation_from_firmware_structs_matches_compute_observation(built):
    _, project, lib = built
    terms = project.contract.observations
    rng = np.random.default_rng(0)
    worst = 0.0
    for k in range(2000):
        s = _random_state(rng, far=k % 2 == 0)
        # The firmware holds floats: compare on the float32-rounded inputs.
        s32 = {key: np.asarray(v, dtype=np.float32).astype(np.float64) for key, v in s.items()}
        expected = compute_observation(terms, s32)
        obs, ok = lib.observation(_row(s32), s32["last_action"])
        assert ok
        worst = max(worst, float(np.max(np.abs(obs - expected))))
    assert worst < 2e-5, worst


def test_observation_units_and_frames_explicitly(built):
    _, _, lib = built
    yaw90 = np.array([math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)])  # w x y z
    s = {"position_w": [1.0, 2.0, 0.5], "quat_wxyz": yaw90, "linear_velocity_w": [0.1, -0.2, 0.3],
         "angular_velocity_b": [0.5, -1.0, 2.0], "subgoal_w": [1.5, 1.0, 3.5], "last_action": [0.1, 0.2, -0.3, 2.0]}
    obs, ok = lib.observation(_row(s), np.asarray(s["last_action"]))
    assert ok
    np.testing.assert_allclose(obs[0:3], [0.5, -1.0, 2.0], atol=1e-6)  # subgoal error, z clipped at 2 m
    np.testing.assert_allclose(obs[3:12], [0, -1, 0, 1, 0, 0, 0, 0, 1], atol=1e-6)  # yaw +90 deg, body x -> world y
    np.testing.assert_allclose(obs[12:15], [0.1, -0.2, 0.3], atol=1e-6)
    np.testing.assert_allclose(obs[15:18], [0.5, -1.0, 2.0], atol=1e-5)  # deg/s in, rad/s out
    np.testing.assert_allclose(obs[18:22], [0.1, 0.2, -0.3, 1.0], atol=1e-6)  # clipped to [-1, 1]


def test_non_finite_state_is_reported(built):
    _, _, lib = built
    s = _random_state(np.random.default_rng(1))
    for index in (0, 3, 10, 15):  # position, quaternion, gyro, setpoint
        row = _row(s)
        row[index] = np.nan
        _, ok = lib.observation(row, s["last_action"])
        assert not ok
    row = _row(s)
    row[3:7] = 0.0  # a zero quaternion cannot be normalized
    assert not lib.observation(row, s["last_action"])[1]


def test_action_mapping_matches_actions_to_wrench(built):
    _, project, lib = built
    rng = np.random.default_rng(2)
    for _ in range(500):
        a = rng.uniform(-1.5, 1.5, 4)
        wrench, mode = lib.actions_to_control(a)
        assert mode == CONTROL_MODE_FORCE_TORQUE
        np.testing.assert_allclose(wrench, actions_to_wrench(project.contract.action, a), rtol=1e-5, atol=1e-8)
    spec = project.contract.action
    wrench, _ = lib.actions_to_control(np.array([5.0, -5.0, 5.0, -5.0]))  # clamped to the contract's ranges
    assert wrench[0] == pytest.approx(spec.terms[0].high, rel=1e-6)
    assert wrench[1] == pytest.approx(spec.terms[1].low, rel=1e-6)


def test_controller_equals_python_runtime_tick_for_tick(built):
    path, project, lib = built
    policy = OnnxPolicy(path, robot=CRAZYFLIE_2X, provider="cpu")
    lib.init()
    rng = np.random.default_rng(3)
    period = int(1000 / project.contract.control_rate_hz)
    for k in range(30):
        s = _random_state(rng)
        s = {key: np.asarray(v, dtype=np.float32).astype(np.float64) for key, v in s.items()}
        state = RobotState(position_w=s["position_w"], quat_wxyz=s["quat_wxyz"],
                           linear_velocity_w=s["linear_velocity_w"], angular_velocity_b=s["angular_velocity_b"])
        expected = policy.to_wrench(policy.step(state, s["subgoal_w"]))
        mode, out = lib.step(_row(s), tick=k * period)
        assert mode == MODE_POLICY and out[4] == CONTROL_MODE_FORCE_TORQUE
        np.testing.assert_allclose(out[:4], expected, rtol=1e-4, atol=1e-6)


def test_rate_hold_and_pid_when_there_is_no_position_setpoint(built):
    _, project, lib = built
    lib.init()
    period = int(1000 / project.contract.control_rate_hz)
    assert period == 10 and lib.self_test()
    rng = np.random.default_rng(4)
    s0, s1 = _row(_random_state(rng)), _row(_random_state(rng))
    pid0 = lib.pid_calls
    mode, first = lib.step(s0, tick=1)  # not a policy tick yet: the PID flies
    assert mode == MODE_PID_NO_SETPOINT and first[4] == CONTROL_MODE_LEGACY and lib.pid_calls == pid0 + 1
    mode, first = lib.step(s0, tick=10)
    assert mode == MODE_POLICY and first[4] == CONTROL_MODE_FORCE_TORQUE
    for tick in range(11, 20):  # held between policy ticks, whatever the state
        mode, held = lib.step(s1, tick=tick)
        assert mode == MODE_POLICY
        np.testing.assert_array_equal(held[:4], first[:4])
    _, fresh = lib.step(s1, tick=20)
    assert not np.array_equal(fresh[:4], first[:4])
    pid0 = lib.pid_calls
    mode, out = lib.step(s1, tick=30, position_mode=MODE_VELOCITY)
    assert mode == MODE_PID_NO_SETPOINT and out[4] == CONTROL_MODE_LEGACY
    assert out[5] == lib.pid_outputs()["thrust"] > 0  # the PID's thrust, in the legacy view of control_t
    assert lib.pid_calls == pid0 + 1


def test_non_finite_state_falls_back_to_pid_and_latches(built):
    _, _, lib = built
    lib.init()
    good = _row(_random_state(np.random.default_rng(5)))
    assert lib.step(good, tick=0)[0] == MODE_POLICY
    bad = good.copy()
    bad[8] = np.inf  # velocity y
    pid0 = lib.pid_calls
    mode, out = lib.step(bad, tick=10)
    assert mode == MODE_PID_NONFINITE and out[4] == CONTROL_MODE_LEGACY and lib.pid_calls == pid0 + 1
    for tick in (11, 20, 30):  # latched: the PID keeps flying even when the state is good again
        mode, out = lib.step(good, tick=tick)
        assert mode == MODE_PID_NONFINITE and out[4] == CONTROL_MODE_LEGACY
    lib.init()  # controllerOutOfTreeInit (reboot) clears the latch
    assert lib.step(good, tick=40)[0] == MODE_POLICY


def test_non_finite_network_output_falls_back_to_pid(tmp_path):
    """A network that overflows to inf/NaN (huge weights, no final clip) is caught after inference."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from robot_hrl.contract import CONTRACT_METADATA_KEY

    w = np.full((4, 22), 1e38, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["obs", "w"], ["h"], transB=1), helper.make_node("Tanh", ["h"], ["t"]),
         helper.make_node("Mul", ["t", "big"], ["m"]), helper.make_node("Mul", ["m", "big"], ["actions"])],
        "overflow", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, 22])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([3e38], dtype=np.float32), "big")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    model.metadata_props.add(key=CONTRACT_METADATA_KEY, value=goto_contract(CRAZYFLIE_2X).to_json())
    path = tmp_path / "overflow.onnx"
    onnx.save(model, str(path))
    lib = HostController.build(generate_project(path, tmp_path / "cf"), tmp_path / "host")
    lib.init()
    s = _random_state(np.random.default_rng(6))
    s["position_w"] = s["subgoal_w"] - np.array([0.3, 0.0, 0.0])  # positive first input: tanh -> 1 -> inf
    mode, out = lib.step(_row(s), tick=0)
    assert mode == MODE_PID_NONFINITE and out[4] == CONTROL_MODE_LEGACY
