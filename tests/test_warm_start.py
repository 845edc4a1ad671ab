"""sim/agents/warm_start.py: an exported actor back into a training checkpoint, exported again, flies the same.

A tiny run of sim/train.py gives the template checkpoint (the current env's critic and optimizer; it observes
the position error's integral as the shipped contract does); the shipped model's actor goes into it; deploy/export.py writes it out again with the current contract. On observations
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
                       "--run-dir", str(run), "--env-cfg", '{"command": {"observe_error_integral": true}}']) == 0
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
    obs = np.random.default_rng(0).normal(0.0, 0.3, (2048, old_contract.observation_size)).astype(np.float32)
    a_old = old.run(None, {"obs": obs})[0].astype(np.float64)
    a_new = new.run(None, {"obs": obs})[0].astype(np.float64)
    own = np.array([[t.low, t.high] for t in old_contract.action.terms])
    cur = np.array([[t.low, t.high] for t in new_contract.action.terms])
    wrench_old = own[:, 0] + (a_old + 1.0) * 0.5 * (own[:, 1] - own[:, 0])
    wrench_new = cur[:, 0] + (a_new + 1.0) * 0.5 * (cur[:, 1] - cur[:, 0])
    inside = (np.abs(a_old) < 0.8).all(axis=1) & (np.abs(a_new) < 0.999).all(axis=1)
    assert inside.sum() > 100  # the shipped actor saturates about 9 in 10 of these (its thrust); enough stay inside
    np.testing.assert_allclose(wrench_new[inside], wrench_old[inside], rtol=1e-4, atol=1e-7 * np.abs(own).max())


def test_an_actor_of_another_shape_is_refused(tmp_path):
    from deploy.crazyflie.example_model import build_mlp_onnx

    small = build_mlp_onnx(tmp_path / "small.onnx", hidden=(8,))
    run = tmp_path / "tiny"
    assert train_main(["--num-envs", "8", "--max-iterations", "1", "--eval-episodes", "4", "--no-progress", "--seed", "3",
                       "--run-dir", str(run)]) == 0
    with pytest.raises((SystemExit, KeyError), match="does not fit|policy.mlp"):
        warm_start(small, sorted(run.glob("model_*.pt"))[0], tmp_path / "x.pt")


def test_new_observation_terms_start_at_zero_or_at_the_chosen_integral_gains(tmp_path):
    """A run that also observes the position error's integral: zero weights give the exported actions exactly (the
    integral is ignored); gains make the integral's column the error's column times the gain (so the policy sees
    e + c I), and the first layer's other weights stay the exported ones. The source is an exported actor without
    the integral (a tiny run's: the shipped model already observes it)."""
    import torch

    from deploy.export import main as export_main

    plain = tmp_path / "plain"
    assert train_main(["--num-envs", "8", "--max-iterations", "1", "--eval-episodes", "4", "--no-progress", "--seed", "5",
                       "--run-dir", str(plain)]) == 0
    assert export_main([str(plain), "--out", str(tmp_path / "plain.onnx"), "-q"]) == 0
    run = tmp_path / "tiny"
    assert train_main(["--num-envs", "8", "--max-iterations", "1", "--eval-episodes", "4", "--no-progress", "--seed", "3",
                       "--run-dir", str(run), "--env-cfg", '{"command": {"observe_error_integral": true}}']) == 0
    template = sorted(run.glob("model_*.pt"))[0]
    source = tmp_path / "plain.onnx"
    old, old_contract = _session(source)
    assert not any(t.integral for t in old_contract.observations)
    obs = np.random.default_rng(1).normal(0.0, 0.3, (256, old_contract.observation_size)).astype(np.float32)
    for name, gains in (("zero", (0.0, 0.0)), ("gains", (3.0, 1.0))):
        warm = tmp_path / name
        warm.mkdir()
        shutil.copy(run / "run_config.json", warm / "run_config.json")
        warm_start(source, template, warm / "model_0.pt", std=0.05, normalizer_count=1e12, new_input_std=0.04,
                   integral_gain_per_s=gains[0], integral_gain_xy_per_s=gains[1])
        actor = torch.load(warm / "model_0.pt", weights_only=False)["actor_state_dict"]
        w, std = actor["mlp.0.weight"], actor["obs_normalizer._std"].reshape(-1)
        n = old_contract.observation_size
        assert w.shape[1] == n + 3 and float(actor["obs_normalizer.count"]) == 1e12
        for axis, gain in enumerate((gains[1], gains[1], gains[0])):
            expected = w[:, axis] * gain * (0.04 + 0.01) / (std[axis] + 0.01)
            torch.testing.assert_close(w[:, n + axis], expected, rtol=1e-5, atol=1e-7)
        out = tmp_path / f"{name}.onnx"
        assert export_main([str(warm), "--out", str(out), "-q"]) == 0
        new, contract = _session(out)
        assert contract.observations[-1].integral is not None and contract.observation_size == n + 3
        integral = np.random.default_rng(2).normal(0.0, 0.01, (256, 3)).astype(np.float32)
        a_new = new.run(None, {"obs": np.concatenate((obs, integral), axis=1)})[0]
        a_zero_integral = new.run(None, {"obs": np.concatenate((obs, 0.0 * integral), axis=1)})[0]
        a_old = old.run(None, {"obs": obs})[0]
        inside = (np.abs(a_old) < 0.8).all(axis=1)
        np.testing.assert_allclose(a_zero_integral[inside], a_old[inside], atol=1e-5)  # the exported policy when I = 0
        if name == "zero":
            np.testing.assert_allclose(a_new[inside], a_old[inside], atol=1e-5)
        else:
            assert np.abs(a_new - a_old)[inside].max() > 1e-3
