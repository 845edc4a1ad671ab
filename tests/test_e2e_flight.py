"""End to end, the whole command: `robot-hrl launch navigation` flies a task with several goals
around obstacles with the shipped model, lands, exits by itself, and leaves a result JSON, a
plot and an MCAP recording that rosbags opens, holding every topic of the graph."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robot_hrl.launch import graph
from robot_hrl.transport.dds_config import loopback_env, unique_domain_id
from test_e2e_support import E2E_DOMAIN_BLOCK

pytestmark = pytest.mark.slow

TASK = "takeoff 1.0; goto red_box; goto green_box; goto blue_box; goto 1.5 3.0 1.0; land"
"""Three landmarks behind the wall and the pillars, then a clear spot to land on."""


def _launch(tmp_path: Path, *extra: str, timeout_s: float = 400.0) -> subprocess.CompletedProcess:
    domain = unique_domain_id(block=E2E_DOMAIN_BLOCK)
    env = {**os.environ, **loopback_env(domain)}
    cmd = [sys.executable, "-c", "import sys; from robot_hrl.cli import main; sys.exit(main())", "launch", "navigation", "--no-live", "--domain-id", str(domain),
           *extra]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)


def test_navigation_task_completes_with_no_violations_and_a_full_recording(tmp_path):
    out = tmp_path / "run"
    proc = _launch(tmp_path, "--task", TASK, "--out", str(out), "--result", str(tmp_path / "result.json"),
                   "--timeout", "300", "-p", "sim_node.camera=true", "-p", "sim_node.camera_rate_hz=0.5")
    assert (tmp_path / "result.json").is_file(), proc.stdout + proc.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result["success"] and result["reason"] == "task done, landed"
    assert result["goals_total"] == 6 and result["goals_reached"] == 6
    assert result["violations"] == 0 and result["collisions"] == 0
    assert isinstance(result["interventions"], dict) and result["wall_time_s"] > 0
    assert "goals reached   6/6" in proc.stdout
    assert Path(result["plot"]).stat().st_size > 10_000

    from rosbags.highlevel import AnyReader

    with AnyReader([Path(result["recording"])]) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        types = {c.topic: c.msgtype for c in reader.connections}
        for topic, (ros_type, _latched) in graph.TOPICS.items():
            assert types.get(topic) == ros_type, (topic, types)
            if topic != "/estop" and not topic.startswith("/range/"):  # estop: when pressed; rangers: planner:=learned
                assert counts[topic] > 0, (topic, counts)
        assert counts["/task"] == 1
        # the messages decode as the ROS 2 types
        odom = next(reader.messages(connections=[c for c in reader.connections if c.topic == "/odom"]))
        msg = reader.deserialize(odom[2], odom[0].msgtype)
        assert msg.child_frame_id == "base_link"
        # the measured battery the skill node's shield brakes with (the nominal battery sagging under the hover load)
        battery = next(reader.messages(connections=[c for c in reader.connections if c.topic == "/battery"]))
        msg = reader.deserialize(battery[2], battery[0].msgtype)
        assert 3.5 < msg.voltage < 3.8 and msg.present


def test_the_graph_also_flies_in_real_time(tmp_path):
    """Without use_sim_time: the sim paces itself to the wall clock, the skill node runs its
    fixed-rate loop, stamps are wall-clock times."""
    off = [a for node in ("sim_node", "skill_node", "planner_node") for a in ("-p", f"{node}.use_sim_time=false")]
    proc = _launch(tmp_path, "--task", "takeoff 0.8; goto 1.0 1.0 0.8; land", "--out", str(tmp_path / "run"),
                   "--result", str(tmp_path / "result.json"), "--timeout", "120", "--no-record", *off)
    result = json.loads((tmp_path / "result.json").read_text())
    assert proc.returncode == 0 and result["success"], proc.stdout + proc.stderr
    assert result["goals_reached"] == result["goals_total"] == 3 and result["violations"] == 0
    assert float(result["deadline"]["ticks"]) > 100 and float(result["deadline"]["rate_hz"]) == 100.0


@pytest.mark.parametrize("args, message", [
    (["--world", "models/worlds/none.yaml"], "was not found"),
    (["--model", "nope.onnx"], "was not found"),
    (["--planner", "oracle"], "invalid choice"),
    (["--timeout", "-1"], "positive number"),
    (["-p", "skill_node"], "NODE.NAME=VALUE"),
    (["-p", "brain_node.x=1"], "unknown node"),
])
def test_launch_bad_arguments_are_clear_errors(tmp_path, capsys, args, message):
    from robot_hrl.cli import main

    try:
        code = main(["launch", "navigation", "--no-live", "--out", str(tmp_path / "run"), *args])
    except SystemExit as exc:  # argparse
        code = exc.code
    assert code != 0
    assert message in capsys.readouterr().err
