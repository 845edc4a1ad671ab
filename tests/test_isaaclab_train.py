"""`python sim/train.py --task Isaac-Cartpole-Direct --device cpu` end to end on a tiny budget, in its own
process (one Isaac Lab simulation per process): training, evaluations on the training env during training
(--target-success), the final evaluation, eval.json, run_config.json, checkpoints and TensorBoard scalars;
then the flags that cannot apply to an Isaac Lab task, refused with a message and exit code 2 before any
simulation starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.isaaclab_helpers import TASK, requires_isaaclab, use_stand_in_assets

pytestmark = [pytest.mark.isaaclab, requires_isaaclab]
use_stand_in_assets()
REPO = Path(__file__).resolve().parents[1]
OVERRIDES = '{"episode_length_s": 1.0, "max_cart_pos": 0.5}'


def _train(*args: str, timeout_s: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "sim/train.py", "--task", TASK, "--device", "cpu", "--no-progress", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s,
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("isaaclab_run") / "cartpole"
    done = _train(
        "--num-envs", "32", "--max-iterations", "3", "--seed", "5", "--run-dir", str(out),
        # carts start within 1 m of the centre (initial_cart_position_range) and now fail beyond 0.5 m: about
        # half the episodes fail at once, whatever the policy, so the target below is never reached
        "--env-cfg", OVERRIDES,
        # an evaluation after every iteration (never skipped): each stops at its first failure, and training
        # continues on the env it reset
        "--target-success", "1.0", "--eval-interval", "1", "--eval-skip-margin", "1.0",
        "--eval-episodes", "32", "--eval-episodes-during-training", "8",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_train_writes_eval_json_with_return_length_and_success(run_dir):
    report = json.loads((run_dir / "eval.json").read_text())
    assert report["task"] == TASK and report["iterations"] == 3 and report["num_envs"] == 32
    assert report["env_steps"] == 3 * 16 * 32  # the task's rsl_rl cfg: 16 steps per env and iteration
    assert report["num_episodes"] == 32 and not report["stopped_early"]
    assert report["mean_episode_length_s"] <= 1.0 + 1e-6  # the --env-cfg override reached the env
    assert report["success_source"] == "time-out (survival)" and 0.0 < report["success_rate"] < 1.0
    assert len(report["evaluations_during_training"]) == 3 and not report["target_reached"]
    assert all(h["stopped_early"] and h["episodes_planned"] == 8 for h in report["evaluations_during_training"])
    assert report["device"] == "cpu" and report["randomization"] is None


def test_train_records_a_run_that_load_run_can_rebuild(run_dir):
    config = json.loads((run_dir / "run_config.json").read_text())
    assert config["env_cfg"] == json.loads(OVERRIDES)  # the overrides: what sim.runs.load_run passes back
    assert config["resolved_env_cfg"]["episode_length_s"] == 1.0 and config["resolved_env_cfg"]["scene"]["num_envs"] == 32
    assert config["agent_cfg"]["device"] == "cpu"
    assert sorted(p.name for p in run_dir.glob("model_*.pt")) == ["model_0.pt", "model_2.pt"]
    from sim.runs import load_run

    env, runner = load_run(run_dir)  # in this process: the only simulation it holds, closed below
    try:
        assert env.task == TASK and env.num_envs == 1
        assert env.unwrapped.cfg.max_cart_pos == 0.5 and env.unwrapped.cfg.episode_length_s == 1.0  # overrides re-applied
        actions = runner.get_inference_policy(device="cpu")(env.get_observations())
        assert actions.shape == (1, 1)
    finally:
        env.close()


def test_train_logs_tensorboard_scalars(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"Loss/value", "Loss/surrogate", "Train/success_rate_rolling"} <= tags, sorted(tags)
    assert len(events.Scalars("Loss/value")) == 3


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--no-randomization"], "--no-randomization"),
        (["--native"], "built-in simulator"),
        (["--eval-env-cfg", '{"episode_length_s": 2.0}'], "one simulation per process"),
        (["--env-cfg", '{"episode_length": 2.0}'], "does not fit"),
    ],
)
def test_flags_that_cannot_apply_are_refused(tmp_path, capsys, flags, message):
    """In this process: each is refused before a simulation is launched."""
    from sim.train import main

    rc = main(["--task", TASK, "--device", "cpu", "--num-envs", "4", "--max-iterations", "1", "--run-dir", str(tmp_path / "run"), *flags])
    err = capsys.readouterr().err
    assert rc == 2 and message in err, err
    from sim.isaaclab_adapter.env import live_env

    assert live_env() is None


def test_export_cli_writes_the_contract_generated_from_the_env(run_dir, tmp_path):
    """`python deploy/export.py <run>` on the Isaac Lab run (its own process rebuilds the env): the direct task's
    contract (Isaac-Cartpole-Direct's terms, read off its source in sim/isaaclab_adapter/contract.py) in the model,
    which the runtime loads for the robot the contract describes."""
    import numpy as np

    from robot_hrl.runtime import OnnxPolicy

    out = tmp_path / "cartpole_direct.onnx"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "deploy/export.py", str(run_dir), "--out", str(out), "-q"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    policy = OnnxPolicy(out, provider="cpu")
    c = policy.contract
    assert c.skill == TASK and c.robot.kind == "articulation" and c.robot.joints == ("slider_to_cart", "cart_to_pole")
    assert [(t.name, t.size, t.joints) for t in c.observations] == [
        ("joint_pos_rel", 2, ("slider_to_cart", "cart_to_pole")), ("joint_vel_rel", 2, ("slider_to_cart", "cart_to_pole"))]
    assert c.action.mode == "joint_effort" and [(t.joint, t.low, t.high) for t in c.action.terms] == [("slider_to_cart", -100.0, 100.0)]
    assert c.control_rate_hz == pytest.approx(60.0)
    action = policy.act_terms({"joint_pos_rel": np.array([0.1, -0.05]), "joint_vel_rel": np.zeros(2)})
    assert action.shape == (1,) and np.isfinite(action).all()
    assert json.loads(policy.metadata["robot_hrl.provenance.config"])["task"] == TASK
