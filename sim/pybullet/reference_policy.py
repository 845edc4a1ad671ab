"""A hand-written geometric controller as an ONNX policy with the goto contract.

It is not trained: a PD position loop gives the desired acceleration, the collective thrust is
its projection on the body z axis, and the attitude loop turns body z towards it (yaw is only
damped). Its gains follow from the robot model, nothing is fitted to a simulator. Because it
does not come from either simulator, its success rate in both is a check of the simulators
and of the evaluation pipeline (frames, units, the contract, the mixer), independent of
training; ``tests/test_evaluate.py`` and ``benchmarks/bench_pybullet.py`` use it.

The graph takes the contract's 22 observations ``[e_w(3), R_wb(9), v_w(3), w_b(3), a_prev(4)]``
and gives 4 normalized actions, batched ``[N, 22] -> [N, 4]``. Built with ``onnx.helper``
(opset 18); the contract goes into the metadata under ``robot_hrl.contract``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_hrl.contract import CONTRACT_METADATA_KEY, goto_contract
from robot_hrl.contract.actions import action_bounds
from robot_hrl.robots.quadrotor import STANDARD_GRAVITY_MPS2, QuadrotorParams


@dataclass(frozen=True)
class ReferenceGains:
    position_natural_frequency_radps: float = 2.0
    position_damping_ratio: float = 0.8
    attitude_natural_frequency_radps: float = 14.0
    """Kept well below 1 / motor_time_constant (20 rad/s for 0.05 s)."""
    attitude_damping_ratio: float = 0.8
    yaw_rate_damping_radps: float = 5.0
    max_tilt_acceleration_mps2: float = 6.0
    """Horizontal demand is clipped to this (about 31 degrees of tilt)."""


def _const(name: str, value) -> "object":
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def reference_policy_model(robot: QuadrotorParams, gains: ReferenceGains = ReferenceGains(),
                           control_rate_hz: float | None = None):
    """The ONNX ModelProto of the reference controller for ``robot``."""
    import onnx
    from onnx import TensorProto, helper

    contract = goto_contract(robot) if control_rate_hz is None else goto_contract(robot, control_rate_hz)
    low, high = action_bounds(contract.action)
    n_obs = contract.observation_size
    g = STANDARD_GRAVITY_MPS2
    kp = gains.position_natural_frequency_radps**2
    kd = 2 * gains.position_damping_ratio * gains.position_natural_frequency_radps
    ka = gains.attitude_natural_frequency_radps**2
    kw = 2 * gains.attitude_damping_ratio * gains.attitude_natural_frequency_radps
    inertia = np.asarray(robot.inertia_kgm2)

    # desired acceleration (world) = kp e - kd v + g e_z, a linear map of the observation
    m_acc = np.zeros((n_obs, 3))
    m_acc[0:3, 0:3] = kp * np.eye(3)
    m_acc[12:15, 0:3] = -kd * np.eye(3)
    b_acc = np.array([0.0, 0.0, g])
    a_lim = gains.max_tilt_acceleration_mps2
    lo_acc = np.array([-a_lim, -a_lim, 0.3 * g])
    hi_acc = np.array([a_lim, a_lim, 2.0 * g])
    m_zb = np.zeros((n_obs, 3))  # body z in the world: the third column of R_wb (row-major 2, 5, 8)
    m_zb[[5, 8, 11], [0, 1, 2]] = 1.0
    m_w = np.zeros((n_obs, 3))
    m_w[15:18, 0:3] = np.eye(3)
    perm1 = np.eye(3)[:, [1, 2, 0]]  # v @ perm1 = v[[1, 2, 0]]
    perm2 = np.eye(3)[:, [2, 0, 1]]
    torque_gain = inertia * ka
    rate_gain = inertia * np.array([kw, kw, gains.yaw_rate_damping_radps])
    torque_gain_z = np.array([1.0, 1.0, 0.0])

    nodes = [
        helper.make_node("MatMul", ["obs", "m_acc"], ["acc_raw"]),
        helper.make_node("Add", ["acc_raw", "b_acc"], ["acc_unc"]),
        helper.make_node("Max", ["acc_unc", "lo_acc"], ["acc_lo"]),
        helper.make_node("Min", ["acc_lo", "hi_acc"], ["acc"]),
        helper.make_node("MatMul", ["obs", "m_zb"], ["zb"]),
        # collective thrust = m a . z_b
        helper.make_node("Mul", ["acc", "zb"], ["acc_zb"]),
        helper.make_node("ReduceSum", ["acc_zb", "axis1"], ["acc_along"], keepdims=1),
        helper.make_node("Mul", ["acc_along", "mass"], ["thrust"]),
        # desired body z
        helper.make_node("Mul", ["acc", "acc"], ["acc_sq"]),
        helper.make_node("ReduceSum", ["acc_sq", "axis1"], ["acc_norm_sq"], keepdims=1),
        helper.make_node("Sqrt", ["acc_norm_sq"], ["acc_norm"]),
        helper.make_node("Div", ["acc", "acc_norm"], ["zd"]),
        # rotation axis (world) = z_b x z_d
        helper.make_node("MatMul", ["zb", "perm1"], ["zb1"]),
        helper.make_node("MatMul", ["zb", "perm2"], ["zb2"]),
        helper.make_node("MatMul", ["zd", "perm1"], ["zd1"]),
        helper.make_node("MatMul", ["zd", "perm2"], ["zd2"]),
        helper.make_node("Mul", ["zb1", "zd2"], ["c1"]),
        helper.make_node("Mul", ["zb2", "zd1"], ["c2"]),
        helper.make_node("Sub", ["c1", "c2"], ["axis_w"]),
        # body frame: R^T axis = axis (1x3) @ R (3x3)
        helper.make_node("Slice", ["obs", "r_start", "r_end", "axis1"], ["r_flat"]),
        helper.make_node("Reshape", ["r_flat", "r_shape"], ["r_wb"]),
        helper.make_node("Unsqueeze", ["axis_w", "axis1"], ["axis_w3"]),
        helper.make_node("MatMul", ["axis_w3", "r_wb"], ["axis_b3"]),
        helper.make_node("Squeeze", ["axis_b3", "axis1"], ["axis_b"]),
        helper.make_node("Mul", ["axis_b", "torque_gain"], ["tau_att"]),
        helper.make_node("Mul", ["tau_att", "torque_gain_z"], ["tau_att_xy"]),
        helper.make_node("MatMul", ["obs", "m_w"], ["w_b"]),
        helper.make_node("Mul", ["w_b", "rate_gain"], ["tau_rate"]),
        helper.make_node("Sub", ["tau_att_xy", "tau_rate"], ["tau"]),
        helper.make_node("Concat", ["thrust", "tau"], ["wrench"], axis=1),
        # normalize: a = 2 (wrench - low) / (high - low) - 1, clipped
        helper.make_node("Sub", ["wrench", "low"], ["w0"]),
        helper.make_node("Mul", ["w0", "scale"], ["w1"]),
        helper.make_node("Sub", ["w1", "one"], ["a_unc"]),
        helper.make_node("Clip", ["a_unc", "minus_one", "one"], ["actions"]),
    ]
    inits = [
        _const("m_acc", m_acc), _const("b_acc", b_acc), _const("lo_acc", lo_acc), _const("hi_acc", hi_acc),
        _const("m_zb", m_zb), _const("m_w", m_w), _const("perm1", perm1), _const("perm2", perm2),
        _const("mass", [robot.mass_kg]), _const("torque_gain", torque_gain), _const("torque_gain_z", torque_gain_z),
        _const("rate_gain", rate_gain), _const("low", low), _const("scale", 2.0 / (high - low)),
        _const("one", 1.0), _const("minus_one", -1.0),
    ]
    from onnx import numpy_helper

    inits += [
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        numpy_helper.from_array(np.array([3], dtype=np.int64), "r_start"),
        numpy_helper.from_array(np.array([12], dtype=np.int64), "r_end"),
        numpy_helper.from_array(np.array([-1, 3, 3], dtype=np.int64), "r_shape"),
    ]
    graph = helper.make_graph(
        nodes, "policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", n_obs])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, ["batch", contract.action_size])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="sim/pybullet/reference_policy.py")
    model.ir_version = 9
    entry = model.metadata_props.add()
    entry.key, entry.value = CONTRACT_METADATA_KEY, contract.to_json()
    model.doc_string = "Hand-written geometric controller (not trained), goto contract."
    onnx.checker.check_model(model, full_check=True)
    return model


def write_reference_policy(path: str | Path, robot: QuadrotorParams, gains: ReferenceGains = ReferenceGains()) -> Path:
    """Write the reference controller to ``path`` (atomically) and return the path."""
    import onnx

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model = reference_policy_model(robot, gains)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".onnx.tmp")
    os.close(fd)
    onnx.save(model, tmp)
    os.replace(tmp, path)
    return path
