"""Crazyflie C code generation: ONNX lowering, host-gcc parity with onnxruntime, error paths.

The generated C is compiled with the host's gcc and called through ctypes; onnxruntime runs the
same ONNX file. The shipped model is used when it exists, a stand-in of the same architecture
(normalization + 64x64 Elu MLP + Clip, as rsl_rl exports it) otherwise.
"""

from __future__ import annotations

import shutil

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from deploy.crazyflie.cli import PARITY_TOLERANCE, host_parity
from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.errors import CodegenError, UnsupportedOperatorError
from deploy.crazyflie.example_model import build_mlp_onnx, random_observations
from deploy.crazyflie.graph import Activation, Clamp, ConstOp, Dense, lower_onnx
from deploy.crazyflie.host import HostController
from robot_hrl.contract import CONTRACT_METADATA_KEY, ObservationTerm, goto_contract
from robot_hrl.errors import ContractError
from robot_hrl.robots import CRAZYFLIE_2X

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a host gcc")

N_PARITY = 10_000


@pytest.fixture(scope="module")
def policy_model(repo_root, tmp_path_factory):
    """The shipped model, or a stand-in with its architecture until it exists."""
    shipped = repo_root / "models" / "crazyflie_goto.onnx"
    if shipped.is_file():
        return shipped
    return build_mlp_onnx(tmp_path_factory.mktemp("model") / "standin_goto.onnx", hidden=(64, 64), activation="elu")


def _ort(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    if inp.shape[0] == 1:
        return np.concatenate([session.run(None, {inp.name: x[k:k + 1]})[0] for k in range(len(x))])
    return session.run(None, {inp.name: x})[0]


def test_shipped_or_standin_model_parity_over_10k_observations(policy_model, tmp_path):
    project = generate_project(policy_model, tmp_path / "cf")
    err = host_parity(project, policy_model, n=N_PARITY, build_dir=tmp_path / "host")
    assert err <= PARITY_TOLERANCE
    assert (tmp_path / "cf" / "src" / "policy_model.c").read_text().count("static const float") >= 3


def test_generated_code_uses_only_math_h_and_no_heap(policy_model, tmp_path):
    project = generate_project(policy_model, tmp_path / "cf")
    for src in project.sources:
        text = src.read_text()
        assert "malloc" not in text and "calloc" not in text and "free(" not in text
    includes = {line.strip() for line in (project.src_dir / "policy_model.c").read_text().splitlines()
                if line.startswith("#include")}
    assert includes == {"#include <math.h>", '#include "policy_model.h"'}


@pytest.mark.parametrize("hidden, activation", [((32, 48, 16), "tanh"), ((100,), "relu"), ((24, 24), "sigmoid")])
def test_other_layer_sizes_and_activations(tmp_path, hidden, activation):
    path = build_mlp_onnx(tmp_path / "m.onnx", hidden=hidden, activation=activation, seed=3)
    project = generate_project(path, tmp_path / "cf")
    assert [d.weight.shape for d in project.model.dense_layers] == [
        (h, w) for h, w in zip(list(hidden) + [4], [22] + list(hidden))]
    err = host_parity(project, path, n=2000, build_dir=tmp_path / "host")
    assert err <= PARITY_TOLERANCE


def test_dynamo_exporter_graph_lowers_to_the_same_steps(repo_root, tmp_path):
    """deploy/export.py uses torch's dynamo exporter (scalar Clip bounds, folded initializers);
    the shipped model is such a graph, else one is exported here (slow: torch.export)."""
    path = repo_root / "models" / "crazyflie_goto.onnx"
    if not path.is_file():
        path = build_mlp_onnx(tmp_path / "dyn.onnx", hidden=(16, 16), dynamo=True)
    model = lower_onnx(path)
    assert [type(s) for s in model.steps] == [ConstOp, ConstOp, Dense, Activation, Dense, Activation, Dense, Clamp]
    x = random_observations(500, model.input_size, seed=1)  # 25 for the shipped model (the error's integral), 22 without
    np.testing.assert_allclose(model.run(x), _ort(path, x), atol=1e-5)


def _contract_json():
    return goto_contract(CRAZYFLIE_2X).to_json()


def _save(tmp_path, nodes, initializers, name="g.onnx", contract=True, opset=18, in_shape=(1, 22), out_size=4):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, list(in_shape))],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, out_size])],
        [numpy_helper.from_array(v.astype(np.float32) if v.dtype.kind == "f" else v, k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    if contract:
        model.metadata_props.add(key=CONTRACT_METADATA_KEY, value=_contract_json())
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def test_matmul_add_graph_with_reshape_constant_and_residual(tmp_path):
    rng = np.random.default_rng(0)
    inits = {"w1": rng.standard_normal((22, 30)) * 0.3, "b1": rng.standard_normal(30) * 0.1,
             "w2": rng.standard_normal((30, 30)) * 0.2, "w3": rng.standard_normal((30, 4)) * 0.3,
             "b3": rng.standard_normal((1, 4)) * 0.1, "shape": np.array([1, -1], dtype=np.int64),
             "scale": np.array([0.5], dtype=np.float32)}
    nodes = [
        helper.make_node("Flatten", ["obs"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["h1"]),
        helper.make_node("LeakyRelu", ["h1"], ["a1"], alpha=0.1),
        helper.make_node("MatMul", ["a1", "w2"], ["m2"]),
        helper.make_node("Tanh", ["m2"], ["t2"]),
        helper.make_node("Add", ["t2", "a1"], ["res"]),  # residual: two observation-path rows
        helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2.0, dtype=np.float32))),
        helper.make_node("Mul", ["two", "scale"], ["one"]),  # folded at generation time
        helper.make_node("Mul", ["res", "one"], ["r1"]),
        helper.make_node("Reshape", ["r1", "shape"], ["r2"]),
        helper.make_node("Identity", ["r2"], ["r3"]),
        helper.make_node("MatMul", ["r3", "w3"], ["m3"]),
        helper.make_node("Add", ["m3", "b3"], ["o"]),
        helper.make_node("Sigmoid", ["o"], ["s"]),
        helper.make_node("Sub", ["one", "s"], ["actions"]),  # constant on the left
    ]
    path = _save(tmp_path, nodes, inits)
    model = lower_onnx(path)
    dense = model.dense_layers
    assert len(dense) == 3 and dense[0].bias is not None and dense[2].bias is not None  # MatMul+Add fused
    project = generate_project(path, tmp_path / "cf")
    lib = HostController.build(project, tmp_path / "host")
    x = random_observations(2000, 22, seed=2)
    np.testing.assert_allclose(lib.forward(x), _ort(path, x), atol=PARITY_TOLERANCE)


def test_unsupported_operator_is_named(tmp_path):
    nodes = [helper.make_node("Gemm", ["obs", "w", "b"], ["h"], transB=1),
             helper.make_node("Softmax", ["h"], ["actions"], axis=-1)]
    path = _save(tmp_path, nodes, {"w": np.ones((4, 22)), "b": np.zeros(4)})
    with pytest.raises(UnsupportedOperatorError, match="'Softmax'.*not supported"):
        generate_project(path, tmp_path / "cf")


def test_weights_computed_from_the_observation_are_refused(tmp_path):
    nodes = [helper.make_node("MatMul", ["obs", "obs"], ["actions"])]
    path = _save(tmp_path, nodes, {})
    with pytest.raises(UnsupportedOperatorError, match="constant-weights"):
        lower_onnx(path)


def test_model_without_contract_is_refused(tmp_path):
    path = _save(tmp_path, [helper.make_node("Gemm", ["obs", "w"], ["actions"], transB=1)], {"w": np.ones((4, 22))},
                 contract=False)
    with pytest.raises(ContractError, match="carries no contract"):
        generate_project(path, tmp_path / "cf")


def test_graph_sizes_must_match_the_contract(tmp_path):
    path = _save(tmp_path, [helper.make_node("Gemm", ["obs", "w"], ["actions"], transB=1)], {"w": np.ones((3, 22))},
                 out_size=3)
    with pytest.raises(CodegenError, match="gives 3 actions, its contract says 4"):
        generate_project(path, tmp_path / "cf")


def test_non_finite_weight_is_refused(tmp_path):
    w = np.ones((4, 22))
    w[1, 2] = np.nan
    path = _save(tmp_path, [helper.make_node("Gemm", ["obs", "w"], ["actions"], transB=1)], {"w": w})
    with pytest.raises(CodegenError, match="non-finite constant"):
        generate_project(path, tmp_path / "cf")


def test_missing_and_corrupt_model_files(tmp_path):
    with pytest.raises(CodegenError, match="does not exist"):
        generate_project(tmp_path / "nope.onnx", tmp_path / "cf")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx file at all")
    with pytest.raises(CodegenError, match="not a valid ONNX model"):
        generate_project(bad, tmp_path / "cf")


def test_control_rate_must_divide_the_stabilizer_loop(tmp_path):
    contract = goto_contract(CRAZYFLIE_2X, control_rate_hz=300.0)
    path = build_mlp_onnx(tmp_path / "m.onnx", hidden=(8,), contract=contract)
    with pytest.raises(CodegenError, match="does not divide the firmware's 1000 Hz"):
        generate_project(path, tmp_path / "cf")


def test_observation_term_without_onboard_implementation_is_refused(tmp_path):
    base = goto_contract(CRAZYFLIE_2X)
    terms = base.observations[:-1] + (ObservationTerm(name="camera_features", size=4, frame="none", units="1",
                                                      clip=(-1.0, 1.0)),)
    contract = base.model_copy(update={"observations": terms})
    path = build_mlp_onnx(tmp_path / "m.onnx", hidden=(8,), contract=contract)
    with pytest.raises(CodegenError, match="'camera_features' has no onboard"):
        generate_project(path, tmp_path / "cf")


@pytest.mark.parametrize("update, fragment", [
    (None, "names no firmware actuator chain"),
    ({"release": "2025.09"}, "firmware release '2025.09'"),
    ({"propellers": "legacy"}, "firmware propellers 'legacy'"),
    ({"platform": "cf21bl"}, "firmware platform 'cf21bl'"),
])
def test_a_model_trained_on_another_firmware_chain_is_refused(tmp_path, update, fragment):
    """The generator builds into the pinned release (deploy/crazyflie/firmware.py): a contract whose firmware
    (PolicyContract.firmware) is missing or another is refused, naming the field, as the runtime refuses it."""
    from robot_hrl.errors import ContractError

    base = goto_contract(CRAZYFLIE_2X)
    firmware = None if update is None else base.firmware.model_copy(update=update)
    contract = base.model_copy(update={"firmware": firmware})
    path = build_mlp_onnx(tmp_path / "m.onnx", hidden=(8,), contract=contract)
    with pytest.raises(CodegenError, match=fragment):
        generate_project(path, tmp_path / "cf")
    with pytest.raises(ContractError, match="firmware"):
        contract.check_compatible(CRAZYFLIE_2X)


def test_action_terms_in_wrong_units_are_refused(tmp_path):
    base = goto_contract(CRAZYFLIE_2X)
    terms = (base.action.terms[0].model_copy(update={"units": "g"}),) + base.action.terms[1:]
    contract = base.model_copy(update={"action": base.action.model_copy(update={"terms": terms})})
    path = build_mlp_onnx(tmp_path / "m.onnx", hidden=(8,), contract=contract)
    with pytest.raises(CodegenError, match="collective_thrust.*'g'"):
        generate_project(path, tmp_path / "cf")


def test_opset10_clip_attributes_squeeze_unsqueeze_dropout(tmp_path):
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("Gemm", ["obs", "w", "b"], ["h"], transB=1),
        helper.make_node("Dropout", ["h"], ["d"]),
        helper.make_node("Squeeze", ["d"], ["s"], axes=[0]),
        helper.make_node("Unsqueeze", ["s"], ["u"], axes=[0]),
        helper.make_node("Clip", ["u"], ["actions"], min=-0.5, max=0.25),
    ]
    path = _save(tmp_path, nodes, {"w": rng.standard_normal((4, 22)), "b": rng.standard_normal(4)}, opset=10)
    model = lower_onnx(path)
    assert isinstance(model.steps[-1], Clamp) and (model.steps[-1].low, model.steps[-1].high) == (-0.5, 0.25)
    x = random_observations(300, 22, seed=4)
    np.testing.assert_allclose(model.run(x), _ort(path, x), atol=1e-5)


def test_graph_with_a_fixed_batch_or_two_inputs_is_refused(tmp_path):
    nodes = [helper.make_node("Gemm", ["obs", "w"], ["actions"], transB=1)]
    path = _save(tmp_path, nodes, {"w": np.ones((4, 22))}, in_shape=(2, 22))
    with pytest.raises(CodegenError, match=r"shape \[2, 22\]"):
        lower_onnx(path)
    graph = helper.make_graph(
        [helper.make_node("Add", ["obs", "obs2"], ["actions"])], "two",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info("obs2", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    with pytest.raises(CodegenError, match="exactly one input"):
        lower_onnx(model)
