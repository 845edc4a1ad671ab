"""Small real ONNX policies built with onnx.helper (no torch) for the runtime tests.

Each model is a two-layer MLP with a clip to [-1, 1], with or without a contract in its
metadata, so the runtime's checks can be exercised on graphs that differ in one thing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from robot_hrl.contract import CONTRACT_METADATA_KEY, goto_contract
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.runtime import write_sha256_sidecar

HIDDEN = 16


def mlp_weights(n_obs: int, n_act: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": rng.normal(0, 0.5, (n_obs, HIDDEN)).astype(np.float32),
        "b1": rng.normal(0, 0.1, HIDDEN).astype(np.float32),
        "w2": rng.normal(0, 0.5, (HIDDEN, n_act)).astype(np.float32),
        "b2": rng.normal(0, 0.1, n_act).astype(np.float32),
    }


def reference(weights: dict[str, np.ndarray], obs: np.ndarray) -> np.ndarray:
    """The graph's function in numpy."""
    h = np.tanh(obs.astype(np.float32) @ weights["w1"] + weights["b1"])
    return np.clip(h @ weights["w2"] + weights["b2"], -1.0, 1.0)


def make_policy_model(
    path: Path,
    *,
    contract_json: str | None = "default",
    n_obs: int = 22,
    n_act: int = 4,
    seed: int = 0,
    weights: dict[str, np.ndarray] | None = None,
    extra_metadata: dict[str, str] | None = None,
    sidecar: bool = True,
) -> dict[str, np.ndarray]:
    """Write a policy graph obs[batch, n_obs] -> actions[batch, n_act]; return its weights."""
    weights = weights or mlp_weights(n_obs, n_act, seed)
    inits = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    inits += [numpy_helper.from_array(np.array(-1.0, np.float32), "lo"), numpy_helper.from_array(np.array(1.0, np.float32), "hi")]
    nodes = [
        helper.make_node("MatMul", ["obs", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Tanh", ["a1"], ["h1"]),
        helper.make_node("MatMul", ["h1", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["a2"]),
        helper.make_node("Clip", ["a2", "lo", "hi"], ["actions"]),
    ]
    graph = helper.make_graph(
        nodes,
        "policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", n_obs])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, ["batch", n_act])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    metadata = dict(extra_metadata or {})
    if contract_json == "default":
        contract_json = goto_contract(CRAZYFLIE_2X).to_json()
    if contract_json is not None:
        metadata[CONTRACT_METADATA_KEY] = contract_json
    helper.set_model_props(model, metadata)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    if sidecar:
        write_sha256_sidecar(path)
    return weights


def test_builder_graph_matches_its_numpy_reference(tmp_path):
    """The test models are what they claim: onnxruntime computes the numpy reference."""
    import onnxruntime as ort

    path = tmp_path / "m.onnx"
    weights = make_policy_model(path)
    obs = np.random.default_rng(1).normal(size=(5, 22)).astype(np.float32)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"obs": obs})[0], reference(weights, obs), atol=1e-6)
