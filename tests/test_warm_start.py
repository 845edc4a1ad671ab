"""sim/agents/warm_start.py: an exported actor back into a training checkpoint, exported again, flies the same.

A tiny run of sim/train.py gives the template checkpoint (the current env's critic and optimizer); the shipped
model's actor goes into it; deploy/export.py writes it out again with the current contract. On observations
where the shipped model's output is not clipped, the re-export gives the same actions, its torque_z rescaled
from the model's own bound to the current contract's (the wrench commanded is the same).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract
from robot_hrl.robots import CRAZYFLIE_2X
from sim.agents.warm_start import warm_start
from sim.train import main as train_main

REPO = Path(__file__).resolve().parents[1]


def _session(path: Path):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s, PolicyContract.from_json(s.get_modelmeta().custom_metadata_map[CONTRACT_METADATA_KEY])


def test_an_exported_actor_warm_starts_a_run_and_exports_to_the_same_wrench(tmp_path):
    from deploy.export import main as export_main

    run = tmp_path / "tiny"
    assert train_main(["--num-envs", "8", "--max-iterations", "1", "--eval-episodes", "4", "--no-progress", "--seed", "3",
                       "--run-dir", str(run)]) == 0
    template = sorted(run.glob("model_*.pt"))[0]
    source = REPO / "models" / "crazyflie_goto.onnx"
    warm = tmp_path / "warm"
    warm.mkdir()
    shutil.copy(run / "run_config.json", warm / "run_config.json")
    warm_start(source, template, warm / "model_0.pt", std=0.05)
    out = tmp_path / "again.onnx"
    assert export_main([str(warm), "--out", str(out), "-q"]) == 0
    old, old_contract = _session(source)
    new, new_contract = _session(out)
    assert new_contract.robot.params_sha256 == CRAZYFLIE_2X.params_sha256() and new_contract.firmware is not None
    obs = np.random.default_rng(0).normal(0.0, 0.3, (512, old_contract.observation_size)).astype(np.float32)
    a_old = old.run(None, {"obs": obs})[0].astype(np.float64)
    a_new = new.run(None, {"obs": obs})[0].astype(np.float64)
    own = np.array([[t.low, t.high] for t in old_contract.action.terms])
    cur = np.array([[t.low, t.high] for t in new_contract.action.terms])
    wrench_old = own[:, 0] + (a_old + 1.0) * 0.5 * (own[:, 1] - own[:, 0])
    wrench_new = cur[:, 0] + (a_new + 1.0) * 0.5 * (cur[:, 1] - cur[:, 0])
    inside = (np.abs(a_old) < 0.8).all(axis=1) & (np.abs(a_new) < 0.999).all(axis=1)
    assert inside.sum() > 50
    np.testing.assert_allclose(wrench_new[inside], wrench_old[inside], rtol=1e-4, atol=1e-7 * np.abs(own).max())


def test_an_actor_of_another_shape_is_refused(tmp_path):
    from deploy.crazyflie.example_model import build_mlp_onnx

    small = build_mlp_onnx(tmp_path / "small.onnx", hidden=(8,))
    run = tmp_path / "tiny"
    assert train_main(["--num-envs", "8", "--max-iterations", "1", "--eval-episodes", "4", "--no-progress", "--seed", "3",
                       "--run-dir", str(run)]) == 0
    with pytest.raises((SystemExit, KeyError), match="does not fit|policy.mlp"):
        warm_start(small, sorted(run.glob("model_*.pt"))[0], tmp_path / "x.pt")
