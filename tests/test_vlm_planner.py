"""The VLM planner: a rendered camera image goes to a real HTTP server as an OpenAI image_url part."""

from __future__ import annotations

import base64
import json
import math

import cv2
import numpy as np
import pytest

from robot_hrl.errors import PlanningError
from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.perception import PinholeCamera
from robot_hrl.planning import VLMPlanner, make_planner
from robot_hrl.world import load_world
from test_llm_planner import llm_server  # noqa: F401  (the scripted server fixture)

pytest.importorskip("pybullet")
from test_perception_landmarks import VIEWS, render_world  # noqa: E402
from robot_hrl.planning import PlannerConfig
from robot_hrl.robots import CRAZYFLIE_2X

ROBOT_RADIUS_M = CRAZYFLIE_2X.collision_radius_m
"""The planner asks the robot for its collision radius; these tests fly the Crazyflie 2.x."""


@pytest.fixture(scope="module")
def world(demo_world_path):
    return load_world(demo_world_path)


@pytest.fixture(scope="module")
def view(world):
    pos, yaw, _ = VIEWS["north_west"]
    quat = quat_from_euler_rpy(0.0, 0.0, yaw)
    rgb, _ = render_world(world, PinholeCamera(), pos, quat)
    return np.asarray(pos), quat, rgb


def test_vlm_sends_the_image_and_grounds_the_landmark(llm_server, world, view):  # noqa: F811
    pos, quat, rgb = view
    answer = {"steps": [{"action": "goto", "landmark": "the blue box"}, {"action": "hover", "duration_s": 1}]}
    url = llm_server("vlm_ok", [{"content": json.dumps(answer)}])
    planner = VLMPlanner(world, 1.0, llm_url=url, model="scripted-vlm", timeout_s=5.0,
                         config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    plan = planner.plan("fly to the box you can see", pos, image_rgb=rgb, quat_wxyz=quat)
    assert plan.planner == "vlm" and plan.fallback_reason is None
    assert np.allclose(plan.goals[0], world.landmark("blue_box").approach_point)
    (req,) = llm_server.requests("vlm_ok")
    user = req["body"]["messages"][-1]["content"]
    parts = {p["type"]: p for p in user}
    assert "blue_box (blue): seen at pixel" in parts["text"]["text"]
    assert "flying" in parts["text"]["text"]
    url_data = parts["image_url"]["image_url"]["url"]
    assert url_data.startswith("data:image/png;base64,")
    png = np.frombuffer(base64.b64decode(url_data.split(",", 1)[1]), np.uint8)
    decoded = cv2.cvtColor(cv2.imdecode(png, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    assert np.array_equal(decoded, rgb)


def test_vlm_without_image_says_so_and_falls_back(llm_server, world):  # noqa: F811
    url = llm_server("vlm_bad", [{"content": "I see a blue box! Let's go."}])
    planner = make_planner("vlm", world, 1.0, llm_url=url, model="m", timeout_s=5.0, max_attempts=2, robot_radius_m=ROBOT_RADIUS_M)
    plan = planner.plan("takeoff 1; goto blue_box; hover 2", world.start)
    assert plan.planner == "symbolic" and "not valid JSON" in plan.fallback_reason
    req = llm_server.requests("vlm_bad")[0]
    assert "No camera image is available" in json.dumps(req["body"]["messages"])


def test_vlm_rejects_a_bad_image(world):
    planner = VLMPlanner(world, 1.0, llm_url="http://127.0.0.1:9/v1", model="m",
                         config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    with pytest.raises(PlanningError, match="RGB uint8"):
        planner.set_image(np.zeros((4, 4), np.float32))
    assert math.isfinite(planner.subgoal_radius_m)


def test_plan_cli_sends_an_image_file(llm_server, world, view, tmp_path, demo_world_path):  # noqa: F811
    import subprocess
    import sys

    pos, quat, rgb = view
    image = tmp_path / "camera.png"
    cv2.imwrite(str(image), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    answer = {"steps": [{"action": "goto", "landmark": "blue"}, {"action": "hover", "duration_s": 1}]}
    url = llm_server("vlm_cli", [{"content": json.dumps(answer)}])
    code = "import sys; from robot_hrl.cli import main; sys.exit(main(sys.argv[1:]))"
    base = [sys.executable, "-c", code, "plan", "--world", str(demo_world_path), "--task", "go to the box you see",
            "--start", *(str(v) for v in pos), "--image", str(image), "--yaw-deg", "143"]
    out = subprocess.run([*base, "--planner", "vlm", "--llm-url", url, "--llm-model", "m"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "planner: vlm" in out.stdout and "blue_box" in out.stdout
    user = llm_server.requests("vlm_cli")[0]["body"]["messages"][-1]["content"]
    assert [p["type"] for p in user] == ["text", "image_url"]
    assert "blue_box (blue): seen at pixel" in user[0]["text"]
    out = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "--image is only used by --planner vlm" in out.stderr
