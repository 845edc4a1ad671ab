"""The level's fine-tune with the runtime's shield in the training loop (``sim/train_navigate.py --init-onnx ...
--range-shield-envs N``): the shipped level loaded back into a run's actor exactly, refused when its contract does not
fit the run, the range source's share of ticks charged exactly by ``rewards.shield_stop_weight``, and a small run whose
critic warm-up leaves the actor untouched."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
import torch

from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, NavigateContract
from robot_hrl.errors import ContractError
from robot_hrl.world.rooms import generate_room

SKILL = "models/crazyflie_goto.onnx"
LEVEL = "models/crazyflie_navigate_mlp.onnx"
"""A feed-forward level (the one shipped until 2026-11-30): the shielded fine-tune warm-starts an MLP actor."""


def _actor(contract):
    from rsl_rl.models import MLPModel
    from tensordict import TensorDict

    from sim.agents.ppo_navigate import ppo_navigate_cfg

    cfg = {k: v for k, v in ppo_navigate_cfg()["actor"].items() if k != "class_name"}
    obs = TensorDict({"policy": torch.zeros(1, contract.observation_size)}, batch_size=[1])
    return MLPModel(obs, {"actor": ["policy"]}, "actor", 2, **cfg)


def _contract(repo_root) -> NavigateContract:
    s = ort.InferenceSession(str(repo_root / LEVEL), providers=["CPUExecutionProvider"])
    return NavigateContract.from_json(s.get_modelmeta().custom_metadata_map[NAVIGATE_METADATA_KEY])


def test_the_shipped_level_warm_starts_an_actor_that_acts_as_the_file(repo_root):
    from deploy.onnx_export.actor import ExportableActor
    from sim.agents.warm_start import warm_start_navigate

    contract = _contract(repo_root)
    actor = _actor(contract)
    warm_start_navigate(repo_root / LEVEL, actor, contract, std=0.25)
    obs = np.random.default_rng(5).normal(0.0, 1.0, (1024, contract.observation_size)).astype(np.float32)
    with torch.no_grad():
        ours = ExportableActor(actor)(torch.from_numpy(obs)).numpy()
    ref = ort.InferenceSession(str(repo_root / LEVEL), providers=["CPUExecutionProvider"]).run(None, {"obs": obs})[0]
    np.testing.assert_allclose(ours, ref, atol=2e-6)
    assert torch.allclose(actor.state_dict()["distribution.std_param"], torch.tensor(0.25))


def test_a_level_that_does_not_fit_the_run_is_refused(repo_root):
    from sim.agents.warm_start import warm_start_navigate

    contract = _contract(repo_root)
    other = contract.model_copy(update={"lower_skill": contract.lower_skill.model_copy(update={"model_sha256": "0" * 64})})
    with pytest.raises(SystemExit, match="lower_skill differs.*fine-tune it over the skill"):
        warm_start_navigate(repo_root / LEVEL, _actor(contract), other)
    with pytest.raises(ContractError, match="contract of skill 'goto', not of a navigate level"):
        warm_start_navigate(repo_root / SKILL, _actor(contract), contract)


def test_a_file_without_a_contract_is_refused(repo_root, tmp_path):
    import onnx

    from sim.agents.warm_start import warm_start_navigate

    model = onnx.load(str(repo_root / LEVEL))
    del model.metadata_props[:]
    onnx.save(model, tmp_path / "bare.onnx")
    contract = _contract(repo_root)
    with pytest.raises(SystemExit, match="carries no navigate contract.*give an exported navigate level"):
        warm_start_navigate(tmp_path / "bare.onnx", _actor(contract), contract)
    out = subprocess.run([sys.executable, "sim/train_navigate.py", "--run-dir", str(tmp_path / "run"), "--init-onnx",
                          str(tmp_path / "bare.onnx")], capture_output=True, text=True, cwd=repo_root)
    assert out.returncode != 0 and "carries no navigate contract" in out.stderr and "Traceback" not in out.stderr


def _fly(repo_root, rooms, weight: float, decisions: int):
    """A hostile level (straight at the first box) through the shield; the rewards of each decision and the range
    source's ticks."""
    from robot_hrl.runtime import OnnxPolicy
    from sim.envs.nav_rooms import RoomPool
    from sim.envs.navigate_env import NavigateEnv
    from sim.envs.navigate_env_cfg import NavigateEnvCfg
    from sim.envs.terms.navigate_observations import world_to_yaw, yaw_from_quat
    from sim.navigate_shield import BatchedShield

    cfg = NavigateEnvCfg(skill_path=str(repo_root / SKILL), randomize=False)
    cfg.curriculum.enabled = False
    cfg.rewards.shield_stop_weight = weight
    env = NavigateEnv(cfg, num_envs=len(rooms), seed=4, pool=RoomPool.from_rooms(rooms))
    env.forced_rooms = torch.arange(len(rooms))
    env.shield = BatchedShield(env, rooms, OnnxPolicy(repo_root / SKILL, provider="cpu"), seed=4)
    env.reset()
    target = torch.tensor([np.add(r.world.solid_boxes()[0].lower, r.world.solid_boxes()[0].upper)[:2] / 2 for r in rooms],
                          dtype=torch.float32)
    rewards, ticks = [], []
    for _ in range(decisions):
        d = target - env.low.position_w[:, :2]
        a = world_to_yaw(d / d.norm(dim=-1, keepdim=True).clamp(min=1e-6), yaw_from_quat(env.low.quat_wxyz))
        _, r, dones, _ = env.step(a)
        assert not dones.any()
        rewards.append(r.clone())
        ticks.append(torch.as_tensor(env.shield.range_ticks, dtype=torch.float32).clone())
    return torch.stack(rewards), torch.stack(ticks), env.low_steps


def test_the_range_sources_share_of_ticks_is_charged_exactly(repo_root):
    rooms = [generate_room("dense", s, "train") for s in (3, 4)]
    bare, ticks, steps = _fly(repo_root, rooms, 0.0, 8)
    charged, ticks_again, _ = _fly(repo_root, rooms, -0.5, 8)
    assert torch.equal(ticks, ticks_again)  # the same flights: the reward does not act on the physics
    assert ticks.sum() > 0, "the hostile level never met the stop zone: the test would be vacuous"
    torch.testing.assert_close(charged - bare, -0.5 * ticks / steps)


def test_a_small_shielded_fine_tune_runs_and_its_warm_up_leaves_the_actor_alone(tmp_path, repo_root):
    from sim.agents.warm_start import exported_actor

    run = tmp_path / "run"
    out = subprocess.run([sys.executable, "sim/train_navigate.py", "--run-dir", str(run), "--num-envs", "4",
                          "--range-shield-envs", "2", "--shield-stop-weight", "-0.5", "--init-onnx", LEVEL,
                          "--critic-warmup", "1", "--max-iterations", "1", "--dagger-iterations", "0",
                          "--rooms-per-density", "1", "--threads", "1", "--start-level", "2"],
                         capture_output=True, text=True, cwd=repo_root)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((run / "train_summary.json").read_text())
    assert summary["range_shield_envs"] == 2 and summary["critic_warmup"] == 1 and summary["iterations"] == 1
    env_cfg = json.loads((run / "navigate_env_cfg.json").read_text())
    assert env_cfg["rewards"]["shield_stop_weight"] == -0.5
    assert tuple(env_cfg["randomization"]["battery_open_circuit_range_v"]) == (3.7, 4.2)
    weights, _ = exported_actor(repo_root / LEVEL)
    after_warmup = torch.load(run / "model_0.pt", weights_only=False)["actor_state_dict"]  # (the runner's own save)
    final = torch.load(run / "model_2.pt", weights_only=False)["actor_state_dict"]
    assert np.array_equal(after_warmup["mlp.0.weight"].numpy(), weights["policy.mlp.0.weight"])  # frozen in the warm-up
    assert not torch.equal(final["mlp.0.weight"], after_warmup["mlp.0.weight"])  # then fine-tuned


def test_init_onnx_with_resume_is_refused(tmp_path, repo_root):
    out = subprocess.run([sys.executable, "sim/train_navigate.py", "--run-dir", str(tmp_path), "--init-onnx", LEVEL,
                          "--resume", str(tmp_path / "model_0.pt")], capture_output=True, text=True, cwd=repo_root)
    assert out.returncode != 0 and "choose one" in out.stderr


@pytest.mark.parametrize("options, message", [
    (["--range-shield-envs", "9", "--num-envs", "8"], r"--range-shield-envs 9: give 0 \(no shield\) to --num-envs \(8\)"),
    (["--range-shield-envs", "-1"], r"--range-shield-envs -1: give 0"),
    (["--critic-warmup", "-2"], r"--critic-warmup -2: give 0 \(none\) or more"),
    (["--learning-rate", "0"], r"--learning-rate 0.0: give a positive number"),
    (["--learning-rate", "nan"], r"--learning-rate nan: give a positive number"),
    (["--init-std", "-0.1"], r"--init-std -0.1: give a positive number"),
])
def test_options_that_make_no_run_are_refused_before_anything_is_built(tmp_path, options, message):
    from sim.train_navigate import build_parser, check_args

    with pytest.raises(SystemExit, match=message):
        check_args(build_parser().parse_args(["--run-dir", str(tmp_path), *options]))
    assert not any(tmp_path.iterdir())
