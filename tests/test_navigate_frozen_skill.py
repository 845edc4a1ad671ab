"""The frozen goto skill in torch gives onnxruntime's actions; broken files are refused with the reason."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

from robot_hrl.errors import ContractError, ModelLoadError
from robot_hrl.runtime import OnnxPolicy
from sim.envs.frozen_skill import FrozenSkill

MODEL = "models/crazyflie_goto.onnx"


def test_torch_skill_matches_onnxruntime(repo_root):
    skill = FrozenSkill(repo_root / MODEL)
    runtime = OnnxPolicy(repo_root / MODEL, provider="cpu")
    assert skill.contract == runtime.contract and len(skill.sha256) == 64
    rng = np.random.default_rng(0)
    lows = np.concatenate([np.full(t.size, t.clip[0]) for t in skill.contract.observations])
    highs = np.concatenate([np.full(t.size, t.clip[1]) for t in skill.contract.observations])
    obs = rng.uniform(lows, highs, size=(4096, skill.observation_size)).astype(np.float32)
    obs[:2048] *= 0.2  # the typical, near-hover part too
    ours = skill(torch.from_numpy(obs)).numpy()
    theirs = runtime.infer(obs)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    assert np.all(np.abs(ours) <= 1.0)


def test_refusals(tmp_path, repo_root):
    with pytest.raises(ModelLoadError, match="does not exist"):
        FrozenSkill(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x00not an onnx file" * 10)
    with pytest.raises(ModelLoadError, match="not a readable ONNX model"):
        FrozenSkill(tmp_path / "junk.onnx")
    model = onnx.load(repo_root / MODEL)
    del model.metadata_props[:]
    onnx.save(model, tmp_path / "no_contract.onnx")
    with pytest.raises(ContractError, match="carries no contract"):
        FrozenSkill(tmp_path / "no_contract.onnx")
    model = onnx.load(repo_root / MODEL)
    for node in model.graph.node:
        if node.op_type == "Elu":
            node.op_type = "Softplus"
            break
    onnx.save(model, tmp_path / "softplus.onnx")
    with pytest.raises(ModelLoadError, match="'Softplus'"):
        FrozenSkill(tmp_path / "softplus.onnx")
    skill = FrozenSkill(repo_root / MODEL)
    n = skill.contract.observation_size  # 25: the shipped skill observes the position error's integral (issue 17)
    with pytest.raises(ValueError, match=f"takes {n} observations"):
        skill(torch.zeros(3, n - 1))
