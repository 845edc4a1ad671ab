"""DAgger for a recurrent level (sim/agents/dagger_navigate.py with ``--memory-gru``): the fit through time computes the
function the actor computes while acting (its state carried and zeroed after a done step), and a run from the first
iteration trains and exports a recurrent level."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import torch
from tensordict import TensorDict

from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, NavigateContract, RecurrentSpec
from robot_hrl.runtime import read_model_metadata


def _actor(hidden: int, n_obs: int = 29):
    from rsl_rl.utils import resolve_callable

    from sim.agents.ppo_navigate import ppo_navigate_cfg

    cfg = ppo_navigate_cfg(hidden)["actor"]
    torch.manual_seed(0)
    return resolve_callable(cfg["class_name"])(TensorDict({"policy": torch.zeros(1, n_obs)}, batch_size=[1]),
                                               {"actor": ["policy"]}, "actor", 2,
                                               **{k: v for k, v in cfg.items() if k != "class_name"})


def test_the_fit_through_time_is_the_actor_acting():
    """``sequence_output`` over stored decisions (the state before them, the done flags) equals the actor stepped one
    decision at a time with rsl_rl's ``reset(dones)`` between, and its gradient reaches the GRU."""
    actor = _actor(16)
    rng = np.random.default_rng(0)
    T, B = 7, 5
    obs = torch.from_numpy(rng.normal(size=(T, B, 29)).astype(np.float32))
    dones = torch.from_numpy(rng.random((T, B)) < 0.25)
    h0 = torch.from_numpy(rng.normal(0.0, 0.5, (1, B, 16)).astype(np.float32))
    actor.reset(None, h0.clone())
    stepped = []
    with torch.no_grad():
        for t in range(T):
            stepped.append(actor(TensorDict({"policy": obs[t]}, batch_size=[B])))
            actor.reset(dones[t].long())
    seq = actor.sequence_output(obs, h0, dones)
    assert torch.allclose(seq.detach(), torch.stack(stepped), atol=1e-6)
    seq.square().sum().backward()
    assert actor.rnn.rnn.weight_hh_l0.grad.abs().max() > 0.0  # (the fit trains the memory, not only the MLP)


def test_a_recurrent_level_trains_from_the_first_iteration_and_exports(repo_root, tmp_path):
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, "sim/train_navigate.py", "--run-dir", str(run), "--num-envs", "16",
                          "--max-iterations", "1", "--rooms-per-density", "1", "--threads", "1", "--dagger-iterations", "2",
                          "--memory-gru", "8", "--near-weight", "4", "--export", str(run / "nav.onnx")],
                         capture_output=True, text=True, cwd=repo_root)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((run / "train_summary.json").read_text())
    assert summary["dagger"]["iterations"] == 2 and summary["dagger"]["samples"] == 2 * 16 * 24
    assert np.isfinite(summary["dagger"]["final_loss"])
    contract = NavigateContract.from_json(read_model_metadata(run / "nav.onnx")[NAVIGATE_METADATA_KEY])
    assert contract.recurrent == RecurrentSpec(hidden_size=8)
    cfg = json.loads((run / "train_cfg.json").read_text())["actor"]
    assert cfg["class_name"] == "sim.agents.memory_model:MemoryMLPModel" and cfg["rnn_hidden_dim"] == 8
