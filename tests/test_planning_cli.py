"""`robot-hrl plan` through a subprocess, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from test_llm_planner import llm_server  # noqa: F401  (the scripted server fixture)


def robot_hrl(*args, cwd=None):
    code = "import sys; from robot_hrl.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_plan_prints_saves_and_draws(tmp_path, demo_world_path):
    out = robot_hrl("plan", "--world", str(demo_world_path), "--task",
                    "takeoff 1.0; visit red_box green_box blue_box; goto 2 2 1; land",
                    "--json", str(tmp_path / "plan.json"), "--plot", str(tmp_path / "plan.png"))
    assert out.returncode == 0, out.stderr
    assert "planner: symbolic" in out.stdout and "subgoals (" in out.stdout
    for name in ("red_box", "green_box", "blue_box"):
        assert name in out.stdout
    data = json.loads((tmp_path / "plan.json").read_text())
    assert data["planner"] == "symbolic" and data["fallback_reason"] is None
    assert len(data["subgoals"]) > 10 and data["goals"][-1]["position"][2] == 0.0
    assert (tmp_path / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, needle", [
    (["--task", "takeoff 1; goto 1.5 1.5 1"], "inside obstacle 'pillar_a'"),
    (["--task", "takeoff 1; goto 30 1 1"], "outside the map"),
    (["--task", "takeoff 1; goto nowhere"], "unknown landmark"),
    (["--task", "dance"], "unknown action"),
    (["--task", "takeoff 1", "--subgoal-radius", "0"], "--subgoal-radius must be positive"),
    (["--task", "@/no/such/file"], "does not exist"),
])
def test_plan_failures_exit_1_with_a_message(demo_world_path, args, needle):
    out = robot_hrl("plan", "--world", str(demo_world_path), *args)
    assert out.returncode == 1
    assert needle in out.stderr and "Traceback" not in out.stderr


def test_missing_world_and_help(tmp_path):
    out = robot_hrl("plan", "--world", str(tmp_path / "none.yaml"), "--task", "takeoff")
    assert out.returncode == 1 and "does not exist" in out.stderr
    out = robot_hrl("plan", "--help")
    assert out.returncode == 0 and "--planner" in out.stdout and "--llm-url" in out.stdout


def test_plan_with_llm_endpoint_and_fallback(llm_server, demo_world_path):  # noqa: F811
    url = llm_server("cli_llm", [{"content": "not json at all"}])
    out = robot_hrl("plan", "--world", str(demo_world_path), "--planner", "llm", "--llm-url", url,
                    "--llm-model", "scripted", "--max-attempts", "2", "--task", "takeoff 1; goto green_box")
    assert out.returncode == 0, out.stderr
    assert "planner: symbolic" in out.stdout and "fallback: llm planner gave no valid plan" in out.stdout
    assert out.stdout.count("rejected answer") == 2
