"""The shipped policy (models/crazyflie_goto.onnx, through the onboard runtime's onnxruntime session) flies
Isaac-Crazyflie-Goto-Direct: strict success (within 0.10 m and below 0.2 m/s at the time-out, no crash) on
200 episodes of the evaluation distribution (curriculum at its end, the whole motor-lag range, every
randomization on), judged by the task's own per-episode success through the generic Isaac Lab evaluator.
The 500-episode figure is benchmarks/bench_isaaclab.py's (benchmarks/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.isaaclab_helpers import requires_isaaclab, use_stand_in_assets

pytestmark = [pytest.mark.isaaclab, requires_isaaclab]
use_stand_in_assets()

REPO = Path(__file__).resolve().parents[1]
TASK = "Isaac-Crazyflie-Goto-Direct"
EVAL = {"curriculum": {"enabled": False}, "randomization": {"motor_time_constant_train_range_s": None}}
EPISODES = 200


def test_the_shipped_policy_flies_the_isaaclab_task():
    import torch

    from robot_hrl.runtime import OnnxPolicy
    from sim.isaaclab_adapter.evaluator import evaluate_isaaclab
    from sim.tasks import make_env

    policy = OnnxPolicy(REPO / "models" / "crazyflie_goto.onnx", provider="cpu")
    integral = next((t.integral for t in policy.contract.observations if t.integral is not None), None)
    command = {"observe_error_integral": integral is not None, "error_integral": None if integral is None else integral.model_dump()}
    env = make_env(TASK, num_envs=EPISODES, device="cpu", cfg={"goto": {**EVAL, "command": command}}, seed=21)  # the model's integral
    assert env.unwrapped.contract == policy.contract  # the task observes what the model takes (25 terms: the integral)
    try:
        result = evaluate_isaaclab(env, lambda obs: torch.from_numpy(policy.infer(obs["policy"].numpy())), EPISODES)
    finally:
        env.close()
    assert result["num_episodes"] == EPISODES and result["success_source"] == "the task's episode_end['success']"
    assert result["success_rate"] >= 0.90, result
    assert result["mean_final_position_error_m"] < 0.15 and result["logged_success_rate"] == pytest.approx(result["success_rate"], abs=0.05)
