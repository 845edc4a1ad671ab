"""`python sim/train.py --task Isaac-Crazyflie-Goto-Direct --device cpu` on a tiny budget (its own process: one
Isaac Lab simulation per process), then `python deploy/export.py` on the run: the exported model carries the
project's go-to contract (the shipped model's), so the onboard runtime, the shield and `ros2 launch` take it
as they take models/crazyflie_goto.onnx."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.isaaclab_helpers import requires_isaaclab, use_stand_in_assets

pytestmark = [pytest.mark.isaaclab, requires_isaaclab]
use_stand_in_assets()
REPO = Path(__file__).resolve().parents[1]
TASK = "Isaac-Crazyflie-Goto-Direct"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def test_train_then_export_gives_a_model_the_runtime_takes(tmp_path):
    import numpy as np

    from robot_hrl.contract import goto_contract
    from robot_hrl.robots import get_robot
    from robot_hrl.runtime import OnnxPolicy
    from robot_hrl.state import RobotState

    run = tmp_path / "cf"
    done = _run("sim/train.py", "--task", TASK, "--device", "cpu", "--no-progress", "--num-envs", "32", "--max-iterations", "2",
                "--seed", "3", "--run-dir", str(run), "--eval-episodes", "32", "--env-cfg", '{"goto": {"command": {"episode_length_s": 1.0}}}')
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((run / "eval.json").read_text())
    assert report["task"] == TASK and report["num_episodes"] == 32 and report["iterations"] == 2
    assert 0.0 <= report["success_rate"] <= 1.0 and report["success_source"] == "the task's episode_end['success']"
    assert report["mean_episode_length_s"] <= 1.0 + 1e-6 and "mean_final_position_error_m" in report
    out = tmp_path / "cf.onnx"
    done = _run("deploy/export.py", str(run), "--out", str(out), "-q")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    cf = get_robot("crazyflie_2x")
    policy = OnnxPolicy(out, robot=cf, provider="cpu", control_rate_hz=100.0)
    assert policy.contract == goto_contract(cf)
    state = RobotState(position_w=np.array([0.0, 0.0, 1.0]), quat_wxyz=np.array([1.0, 0.0, 0.0, 0.0]),
                       linear_velocity_w=np.zeros(3), angular_velocity_b=np.zeros(3))
    command = policy.to_command(policy.step(state, np.array([0.3, 0.0, 1.2])))
    assert command.shape == (4,) and 0.0 <= command[0] <= policy.contract.action.terms[0].high
