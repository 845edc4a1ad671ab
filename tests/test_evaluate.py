"""sim/evaluate.py: the goto evaluation in PyBullet and in the torch env, its outputs and its errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pybullet")
torch = pytest.importorskip("torch")

from robot_hrl.geometry import rotation_matrix_from_quat  # noqa: E402
from robot_hrl.robots import CRAZYFLIE_2X  # noqa: E402
from robot_hrl.world import load_world  # noqa: E402
from sim import evaluate as evaluate_cli  # noqa: E402
from sim.envs.goto_env_cfg import GotoEnvCfg  # noqa: E402
from sim.envs.terms import terminations  # noqa: E402
from sim.pybullet.goto_eval import out_of_bounds, sample_initial_condition  # noqa: E402
from sim.pybullet.reference_policy import write_reference_policy  # noqa: E402


@pytest.fixture(scope="module")
def reference_model(tmp_path_factory):
    return write_reference_policy(tmp_path_factory.mktemp("model") / "reference.onnx", CRAZYFLIE_2X)


def test_pybullet_evaluation_writes_json_and_plots(reference_model, tmp_path, capsys):
    out_json, plots = tmp_path / "eval.json", tmp_path / "plots"
    rc = evaluate_cli.main(["--model", str(reference_model), "--sim", "pybullet", "--episodes", "2", "--seed", "1",
                            "--json", str(out_json), "--plots", str(plots), "--no-progress"])
    assert rc == 0
    data = json.loads(out_json.read_text())
    for key in ("success_rate", "crash_rate", "mean_final_position_error_m", "rms_tracking_error_m",
                "out_of_bounds_rate", "num_episodes"):
        assert key in data
    assert data["num_episodes"] == 2 and data["sim"] == "pybullet"
    cfg = GotoEnvCfg()
    assert data["success_definition"]["position_tolerance_m"] == cfg.success.position_tolerance_m
    # the hand-written controller flies the task: a check of frames, units, mixer and contract
    assert data["success_rate"] == 1.0 and data["crash_rate"] == 0.0
    assert data["mean_final_position_error_m"] < cfg.success.position_tolerance_m
    for name in ("trajectories_3d.png", "position_error.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "success_rate" in capsys.readouterr().out


def test_torch_and_randomized_pybullet_evaluations_run(reference_model, tmp_path):
    out_json = tmp_path / "torch.json"
    assert evaluate_cli.main(["--model", str(reference_model), "--sim", "torch", "--episodes", "4",
                              "--json", str(out_json), "--no-progress", "--randomize"]) == 0
    data = json.loads(out_json.read_text())
    assert data["sim"] == "torch" and data["num_episodes"] == 4 and data["randomize"] is True
    assert data["simulator"]["step"] == "native"  # (as sim/train.py: the C step on a CPU with a compiler)
    # the eager torch step flies the same episodes (the same random streams; float rounding apart)
    assert evaluate_cli.main(["--model", str(reference_model), "--sim", "torch", "--episodes", "4", "--step", "eager",
                              "--json", str(tmp_path / "eager.json"), "--no-progress", "--randomize"]) == 0
    eager = json.loads((tmp_path / "eager.json").read_text())
    assert eager["simulator"]["step"] == "eager" and eager["success_rate"] == data["success_rate"]
    assert abs(eager["mean_final_position_error_m"] - data["mean_final_position_error_m"]) < 1e-3
    assert data["simulator"]["physics_hz"] == 200.0  # the training env's rate by default
    # --physics-hz reaches the torch sim's config (PyBullet's 500 Hz, to attribute the sim-to-sim gap)
    assert evaluate_cli.main(["--model", str(reference_model), "--sim", "torch", "--episodes", "2", "--physics-hz", "500",
                              "--json", str(tmp_path / "t500.json"), "--no-progress", "--randomize"]) == 0
    assert json.loads((tmp_path / "t500.json").read_text())["simulator"]["physics_hz"] == 500.0
    out_json = tmp_path / "pb.json"
    assert evaluate_cli.main(["--model", str(reference_model), "--episodes", "1", "--json", str(out_json),
                              "--no-progress", "--randomize", "--plots", str(tmp_path / "p")]) == 0
    assert json.loads(out_json.read_text())["randomize"] is True


def test_evaluation_in_a_world_file_with_the_shield(reference_model, tmp_path, demo_world_path):
    pytest.importorskip("robot_hrl.safety")
    out_json = tmp_path / "world.json"
    assert evaluate_cli.main(["--model", str(reference_model), "--episodes", "1", "--world", str(demo_world_path),
                              "--json", str(out_json), "--no-progress", "--shield", "--seed", "2"]) == 0
    data = json.loads(out_json.read_text())
    assert data["simulator"]["world"] == str(demo_world_path)
    shield = data["shield"]
    assert 0 <= shield["interventions"] <= sum(shield["per_unit"].values())
    assert set(shield) == {"interventions", "episodes_with_interventions", "per_unit"}
    assert all("." in key for key in shield["per_unit"])  # unit.constraint
    world = load_world(demo_world_path)
    rng = np.random.default_rng(0)
    clearance = CRAZYFLIE_2X.collision_radius_m
    for _ in range(50):
        init = sample_initial_condition(GotoEnvCfg(), rng, world, clearance)
        for p in (init.position_w, init.goal_w):
            assert world.bounds.contains(p, clearance) and not world.collides(p, clearance)


def test_initial_conditions_follow_the_training_config():
    cfg = GotoEnvCfg()
    cmd = cfg.command
    rng = np.random.default_rng(0)
    tilts, speeds = [], []
    for _ in range(300):
        init = sample_initial_condition(cfg, rng)
        tilt = math.acos(np.clip(rotation_matrix_from_quat(init.quat_wxyz)[2, 2], -1, 1))
        tilts.append(tilt)
        speeds.append(np.linalg.norm(init.linear_velocity_w))
        assert np.all(np.abs(init.position_w[:2]) <= cmd.spawn_xy_half_extent_m)
        assert cmd.spawn_height_range_m[0] <= init.position_w[2] <= cmd.spawn_height_range_m[1]
        assert np.all(np.abs(init.angular_velocity_b) <= cmd.max_initial_body_rate_radps)
        assert init.goal_w[2] >= cmd.min_goal_height_m
        goal = init.goal_w.copy()
        if goal[2] > cmd.min_goal_height_m:
            assert np.linalg.norm(goal - init.position_w) <= cmd.subgoal_radius_m + 1e-9
    assert max(tilts) <= cmd.max_initial_tilt_rad + 1e-9 and max(tilts) > 0.8 * cmd.max_initial_tilt_rad
    assert max(speeds) <= cmd.max_initial_speed_mps + 1e-9 and max(speeds) > 0.8 * cmd.max_initial_speed_mps


def test_out_of_bounds_twin_matches_the_training_term():
    cfg = GotoEnvCfg()
    t = cfg.terminations
    rng = np.random.default_rng(1)
    pos = rng.uniform(-3, 3, size=(200, 3)) + np.array([0, 0, 3.0])
    goal = rng.uniform(-1, 1, size=(200, 3)) + np.array([0, 0, 1.5])
    expected = terminations.out_of_bounds(torch.tensor(pos), torch.tensor(goal), t.out_of_bounds_distance_m, t.ceiling_m)
    got = [out_of_bounds(p, g, cfg) for p, g in zip(pos, goal)]
    assert got == expected.tolist() and any(got) and not all(got)


def test_bad_inputs_give_clear_errors(reference_model, tmp_path, capsys):
    assert evaluate_cli.main(["--model", str(tmp_path / "missing.onnx"), "--episodes", "1"]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        evaluate_cli.main(["--model", str(reference_model), "--sim", "gazebo"])
    assert exc.value.code == 2
    assert "invalid choice: 'gazebo'" in capsys.readouterr().err
    bad_world = tmp_path / "bad.yaml"
    bad_world.write_text("name: bad\nbounds: {min: [0, 0, 0], max: [1, 1, 1]}\nobstacles: [{name: a, center: [9, 9, 9]}]\n")
    assert evaluate_cli.main(["--model", str(reference_model), "--world", str(bad_world), "--episodes", "1"]) == 2
    assert "world file" in capsys.readouterr().err
    assert evaluate_cli.main(["--model", str(reference_model), "--world", str(tmp_path / "nope.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        evaluate_cli.main(["--model", str(reference_model), "--episodes", "0"])
    assert "--episodes must be a positive integer" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        evaluate_cli.main(["--model", str(reference_model), "--sim", "torch", "--world", str(bad_world)])
    assert "pybullet only" in capsys.readouterr().err
    assert evaluate_cli.main(["--model", str(reference_model), "--sim", "torch", "--shield", "--episodes", "1"]) == 2
    assert "--shield works with --sim pybullet only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        evaluate_cli.main(["--model", str(reference_model), "--step", "native", "--episodes", "1"])
    assert "--step applies to --sim torch only" in capsys.readouterr().err
    not_onnx = tmp_path / "garbage.onnx"
    not_onnx.write_bytes(b"not a model")
    assert evaluate_cli.main(["--model", str(not_onnx), "--episodes", "1"]) == 2
    assert "cannot load" in capsys.readouterr().err
    assert evaluate_cli.main(["--model", str(reference_model), "--physics-hz", "250", "--episodes", "1"]) == 2
    assert "integer multiple" in capsys.readouterr().err
    # the torch sim takes a physics rate too (the PyBullet gap's attribution), checked by the env config
    assert evaluate_cli.main(["--model", str(reference_model), "--sim", "torch", "--physics-hz", "250", "--episodes", "1"]) == 2
    assert "integer multiple of command.control_rate_hz" in capsys.readouterr().err


def test_cli_runs_from_the_repo_root(repo_root, reference_model):
    """`python sim/evaluate.py` must not let sim/pybullet shadow the pybullet package."""
    out = subprocess.run([sys.executable, "sim/evaluate.py", "--help"], cwd=repo_root, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--randomize" in out.stdout and "--sim {pybullet,torch}" in out.stdout
    # gets as far as building the PyBullet world (the real pybullet), which refuses 250 Hz
    out = subprocess.run([sys.executable, "sim/evaluate.py", "--model", str(reference_model), "--episodes", "1",
                          "--physics-hz", "250"], cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "physics_hz=250.0 must be an integer multiple" in out.stderr, out.stderr
