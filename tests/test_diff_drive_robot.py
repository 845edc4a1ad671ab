"""A second robot, added as a package: the differential drive (robot_hrl/robots/diff_drive).

Its contract, its observation terms, its shield (its own units over the robot-neutral ones), a policy
exported with the project's exporter and run by the runtime, and the skill node as a separate
process over Cyclone DDS publishing geometry_msgs/TwistStamped on /cmd_vel while the test drives a
unicycle from those commands. Nothing of the Crazyflie is used."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from robot_hrl.errors import ConfigError
from robot_hrl.robots import ROBOTS, Robot, get_robot
from robot_hrl.robots.diff_drive.contract import goto_contract
from robot_hrl.robots.diff_drive.observations import DIFF_DRIVE_OBSERVATION_TERMS, heading_rad
from robot_hrl.safety import Shield, ShieldInput, load_shield_config, parse_shield_config
from robot_hrl.state import RobotState
from robot_hrl.world import load_world

REPO = Path(__file__).resolve().parents[1]
ROBOT = get_robot("diff_drive")
CONTRACT = goto_contract(ROBOT)


def yaw_quat(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def ground_state(x: float, y: float, yaw: float = 0.0, speed: float = 0.0, yaw_rate: float = 0.0, t: float = 0.0) -> RobotState:
    return RobotState(position_w=np.array([x, y, 0.0]), quat_wxyz=yaw_quat(yaw),
                      linear_velocity_w=np.array([speed * math.cos(yaw), speed * math.sin(yaw), 0.0]),
                      angular_velocity_b=np.array([0.0, 0.0, yaw_rate]), stamp_s=t)


@pytest.fixture(scope="module")
def world():
    return load_world(REPO / "models" / "worlds" / "demo.yaml")


def shield(world, **kwargs) -> Shield:
    return Shield.from_yaml(None, ROBOT, world, CONTRACT.subgoal_radius_m, action=CONTRACT.action, **kwargs)


# ---- the robot, its contract and terms ------------------------------------------------------------------
def test_the_package_registers_a_robot_with_its_own_answers():
    assert ROBOTS["diff_drive"] is ROBOT and isinstance(ROBOT, Robot)
    assert ROBOT.action_modes == ("body_velocity",) and not ROBOT.lands
    assert ROBOT.command_output().topic == "/cmd_vel"
    assert ROBOT.shield_config_path == REPO / "robot_hrl" / "robots" / "diff_drive" / "shield.yaml"
    spec = ROBOT.action_spec()
    assert [(t.name, t.low, t.high) for t in spec.terms] == [("linear_x", -0.22, 0.22), ("angular_z", -2.84, 2.84)]
    assert spec.firmware_control_mode == "diff_drive_controller"
    assert ROBOT.params_sha256() == get_robot("diff_drive").params_sha256() and len(ROBOT.params_sha256()) == 64
    assert (CONTRACT.observation_size, CONTRACT.action_size, CONTRACT.mismatches(ROBOT)) == (6, 2, [])
    crazyflie = get_robot("crazyflie_2x")
    assert any("robot: model trained for 'diff_drive'" in p for p in CONTRACT.mismatches(crazyflie))
    with pytest.raises(ValueError, match="no action mode 'collective_thrust_body_torque'"):
        ROBOT.action_spec("collective_thrust_body_torque")


def test_its_observation_terms_see_the_subgoal_in_the_body_frame():
    from robot_hrl.contract import compute_observation

    s = ground_state(1.0, 2.0, yaw=math.pi / 2, speed=0.2, yaw_rate=0.5)
    x = {"position_w": s.position_w, "quat_wxyz": s.quat_wxyz, "linear_velocity_w": s.linear_velocity_w,
         "angular_velocity_b": s.angular_velocity_b, "subgoal_w": np.array([1.0, 3.0, 0.0]), "last_action": np.array([0.1, -0.2])}
    obs = compute_observation(CONTRACT.observations, x, DIFF_DRIVE_OBSERVATION_TERMS)
    np.testing.assert_allclose(obs, [1.0, 0.0, 0.2, 0.5, 0.1, -0.2], atol=1e-6)  # the goal is straight ahead
    x["subgoal_w"] = np.array([2.0, 2.0, 0.0])  # facing +y, world +x is to the right: -y in the body frame
    np.testing.assert_allclose(compute_observation(CONTRACT.observations, x, DIFF_DRIVE_OBSERVATION_TERMS)[:2], [0.0, -1.0], atol=1e-6)
    yaws = np.linspace(-3.0, 3.0, 7)
    np.testing.assert_allclose(heading_rad(np.stack([yaw_quat(y) for y in yaws])), yaws, atol=1e-12)  # batched


# ---- its shield ---------------------------------------------------------------------------------------------
def test_its_shield_lists_its_units_and_refuses_limits_beyond_the_robot(world):
    s = shield(world)
    assert [u.name for u in s.units] == ["estop", "odometry", "watchdog", "command", "velocity_limits", "geofence", "stop_zone",
                                         "obstacles", "subgoal"]
    raw = load_shield_config(ROBOT.shield_config_path).model_dump()
    raw["velocity_limits"]["max_speed_mps"] = 0.5
    with pytest.raises(ConfigError, match="exceed diff_drive's 0.22 m/s"):
        Shield(parse_shield_config(raw, "test"), ROBOT, world, 1.0)
    raw = load_shield_config(ROBOT.shield_config_path).model_dump()
    raw["units"] = ["estop", "watchdog", "limits", "subgoal"]
    with pytest.raises(ConfigError, match=r"\['limits'\] unknown; a diff_drive shield knows"):
        parse_shield_config(raw, "test")
    raw["units"] = ["estop", "velocity_limits", "watchdog", "subgoal"]
    with pytest.raises(ConfigError, match="by stage"):
        parse_shield_config(raw, "test")


def test_velocity_limits_clamp_speed_yaw_rate_and_acceleration(world):
    s = shield(world)
    out = s.step(ShieldInput(0.0, ground_state(0.5, 0.5), np.array([1.0, -1.0]), subgoal_w=np.array([1.0, 0.5, 0.0])))
    assert out.mode == "policy"
    np.testing.assert_allclose(out.command, [0.05, -0.2])  # one tick of acceleration from standstill (1.0 m/s^2, 4 rad/s^2 at 20 Hz)
    assert [i.constraint for i in out.interventions] == ["yaw_rate", "acceleration"]
    for k in range(1, 10):
        out = s.step(ShieldInput(0.05 * k, ground_state(0.5, 0.5, t=0.05 * k), np.array([1.0, -1.0]), subgoal_w=np.array([1.0, 0.5, 0.0])))
    np.testing.assert_allclose(out.command, [0.22, -2.0])  # the config's limits (the contract would map to 0.22, -2.84)


def test_the_stop_zone_stops_forward_motion_toward_a_box_only(world):
    s = shield(world)
    wall_x = 2.4  # the demo wall's near face
    near = ground_state(wall_x - ROBOT.collision_radius_m - 0.08, 0.6)  # facing the wall, within the zone
    out = s.step(ShieldInput(0.0, near, np.array([0.2, 0.0]), subgoal_w=near.position_w))
    assert out.command[0] == 0.0 and any(i.constraint == "stop" and i.unit == "stop_zone" for i in out.interventions)
    s.reset_faults()
    out = s.step(ShieldInput(0.05, ground_state(near.position_w[0], 0.6, t=0.05), np.array([-0.2, 0.0]), subgoal_w=near.position_w))
    assert out.command[0] < 0.0 and not any(i.unit == "stop_zone" for i in out.interventions)  # backing away is allowed
    facing_away = ground_state(near.position_w[0], 0.6, yaw=math.pi, t=0.1)
    s.reset_faults()
    out = s.step(ShieldInput(0.1, facing_away, np.array([0.2, 0.0]), subgoal_w=near.position_w))
    assert out.command[0] > 0.0 and not any(i.unit == "stop_zone" for i in out.interventions)


def test_the_neutral_envelope_units_judge_its_stopping_model(world):
    s = shield(world)
    g = s.geofence
    fast = ground_state(g.x_hi - 0.01, 2.0, speed=0.22, t=0.0)  # at the fence, driving out of it
    out = s.step(ShieldInput(0.0, fast, np.array([1.0, 0.0]), subgoal_w=fast.position_w))
    assert out.mode == "backup_hold" and out.reason == "geofence.x_max"
    np.testing.assert_array_equal(out.command, [0.0, 0.0])  # the backup stops


def test_a_stop_request_stops_then_cuts_the_motors(world):
    s = shield(world)
    s.request_land(0.0)
    out = s.step(ShieldInput(0.0, ground_state(1.0, 2.0, speed=0.2), np.array([0.5, 0.0]), subgoal_w=np.array([1.0, 2.0, 0.0])))
    assert out.mode == "backup_land" and out.command.tolist() == [0.0, 0.0]
    out = s.step(ShieldInput(0.05, ground_state(1.0, 2.0, t=0.05), np.array([0.5, 0.0]), subgoal_w=np.array([1.0, 2.0, 0.0])))
    assert out.mode == "motors_off"


def test_stale_odometry_is_dead_reckoned_then_stopped(world):
    s = shield(world)
    start = ground_state(1.0, 2.0, speed=0.1)
    for k in range(10):
        s.step(ShieldInput(0.05 * k, ground_state(1.0 + 0.005 * k, 2.0, speed=0.1, t=0.05 * k), np.array([0.45, 0.0]),
                           subgoal_w=start.position_w))
    out = s.step(ShieldInput(1.0, ground_state(1.0, 2.0, t=0.45), np.array([0.45, 0.0]), subgoal_w=start.position_w))
    assert out.mode == "backup_hold" and out.reason == "watchdog.stale_state"
    assert s.predictor.valid and s.predictor.p[0] > 1.0 + 0.005 * 9  # it kept moving in the estimate


# ---- a policy through the export, the runtime and the skill node ---------------------------------------------------
def export_p_controller(path: Path, contract=CONTRACT) -> Path:
    """A proportional go-to controller as an rsl_rl MLP actor, exported with deploy/onnx_export: forward
    speed tanh(3 x_err), yaw rate tanh(3 y_err) (normalized), the subgoal error in the body frame."""
    torch = pytest.importorskip("torch")
    from rsl_rl.models import MLPModel
    from tensordict import TensorDict

    from deploy.onnx_export import export_policy

    obs = TensorDict({"policy": torch.zeros(4, contract.observation_size)}, batch_size=[4])
    actor = MLPModel(obs, {"actor": ["policy"]}, "actor", contract.action_size, hidden_dims=[2], activation="tanh",
                     obs_normalization=False, distribution_cfg={"class_name": "GaussianDistribution", "init_std": 0.5})
    with torch.no_grad():
        first, last = actor.mlp[0], actor.mlp[-1]
        first.weight.zero_()
        first.weight[0, 0] = first.weight[1, 1] = 3.0
        first.bias.zero_()
        last.weight.copy_(torch.eye(2))
        last.bias.zero_()
    export_policy(actor.eval(), contract, path, provenance={"command": "tests/test_diff_drive_robot.py"})
    return path


def test_an_exported_policy_runs_through_the_runtime(tmp_path):
    from robot_hrl.contract import normalized_to_command
    from robot_hrl.runtime import OnnxPolicy

    path = export_p_controller(tmp_path / "diff_drive_goto.onnx")
    policy = OnnxPolicy(path, robot="diff_drive", provider="cpu")
    assert policy.contract == CONTRACT and policy.sha256 is not None
    a = policy.step(ground_state(0.0, 0.0), np.array([0.2, 0.1, 0.0]))
    np.testing.assert_allclose(a, [math.tanh(0.6), math.tanh(0.3)], atol=1e-6)
    np.testing.assert_array_equal(policy.to_command(a), normalized_to_command(CONTRACT.action, a))
    from robot_hrl.errors import ContractError

    with pytest.raises(ContractError, match="trained for 'diff_drive', started for 'crazyflie_2x'"):
        OnnxPolicy(path, robot="crazyflie_2x", provider="cpu")


def _backends() -> list:
    from robot_hrl.transport import rclpy_available

    return ["cyclonedds", pytest.param("rclpy", marks=pytest.mark.skipif(not rclpy_available(), reason="rclpy is not installed"))]


@pytest.mark.parametrize("backend", _backends())
def test_the_skill_node_process_drives_it_with_twist_stamped_over_dds(tmp_path, monkeypatch, backend):
    """The skill node executable (robot diff_drive, simulated time) over DDS, on Cyclone DDS and (where
    rclpy is installed) on rclpy: the test is the robot, integrating a unicycle from each /cmd_vel and
    sending /odom and /clock in lockstep. The model's contract halves the forward-speed bounds: every
    command shows the contract's scaling."""
    from dds_helpers import peer_env, use_domain

    from robot_hrl.contract import ActionSpec
    from robot_hrl.msgs import Clock, Odometry, PoseStamped, String, TwistStamped, header, odometry_from_state, time_from_seconds
    from robot_hrl.transport import COMMAND_QOS, SENSOR_QOS, create_node

    half = CONTRACT.action.terms[0].model_copy(update={"low": -0.11, "high": 0.11})
    gentle = CONTRACT.model_copy(update={"action": ActionSpec(mode="body_velocity", terms=(half, CONTRACT.action.terms[1]))})
    model = export_p_controller(tmp_path / "gentle.onnx", gentle)
    domain = use_domain(monkeypatch)
    proc = subprocess.Popen(
        [sys.executable, "-m", "robot_hrl.nodes.skill_node", "--backend", backend, "--domain-id", str(domain),
         "--ros-args", "-p", "robot:=diff_drive",
         "-p", f"model:={model}", "-p", "world:=models/worlds/demo.yaml", "-p", "use_sim_time:=true",
         "-p", "provider:=cpu"],
        cwd=REPO, env=peer_env(domain), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    node = create_node("diff_drive_sim", backend=backend, domain_id=domain)
    try:
        cmds: list[TwistStamped] = []
        status: list[str] = []
        cmd_sub = node.create_subscription(TwistStamped, "/cmd_vel", cmds.append, COMMAND_QOS)
        node.create_subscription(String, "/skill/status", lambda m: status.append(m.data), COMMAND_QOS)
        odom_pub = node.create_publisher(Odometry, "/odom", SENSOR_QOS)
        clock_pub = node.create_publisher(Clock, "/clock", SENSOR_QOS)
        goal_pub = node.create_publisher(PoseStamped, "/subgoal", COMMAND_QOS)

        def wait(condition, what: str, guard_s: float = 90.0, retry=None, retry_s: float = 1.0) -> None:
            """Spin until ``condition()``; ``retry()`` again every ``retry_s`` (a best-effort sample sent before
            the other side matched our writer is dropped, as DDS does)."""
            end = time.monotonic() + guard_s
            again = time.monotonic() + retry_s
            while not condition():
                assert proc.poll() is None, f"the skill node exited ({proc.returncode}): {proc.stderr.read()[-2000:]}"
                assert time.monotonic() < end, f"timed out waiting for {what}"
                if retry is not None and time.monotonic() > again:
                    retry()
                    again = time.monotonic() + retry_s
                node.spin_once(0.01)

        wait(lambda: min(odom_pub.get_subscription_count(), clock_pub.get_subscription_count(),
                         goal_pub.get_subscription_count(), cmd_sub.get_publisher_count()) > 0, "discovery of the skill node")
        x, y, yaw, v, w = 0.5, 0.5, 0.0, 0.0, 0.0
        goal = (1.0, 1.0)
        dt = 1.0 / gentle.control_rate_hz
        for k in range(600):
            t = round(1.0 + k * dt, 6)

            def send(t=t, k=k):  # this period's odometry, the planner's heartbeat, then the clock that ticks the node
                odom_pub.publish(odometry_from_state(ground_state(x, y, yaw, v, w, t)))
                if k % 4 == 0:
                    msg = PoseStamped(header=header(t, "map"))
                    msg.pose.position.x, msg.pose.position.y = goal
                    goal_pub.publish(msg)
                clock_pub.publish(Clock(clock=time_from_seconds(t)))  # the same time again does not tick twice

            send()
            n = len(cmds)
            wait(lambda: len(cmds) > n and cmds[-1].header.stamp == time_from_seconds(t), f"the command of tick {k}",
                 retry=send)
            c = cmds[-1].twist
            v, w = c.linear.x, c.angular.z  # the drive follows its command (the shield already limits acceleration)
            yaw += w * dt
            x += v * math.cos(yaw) * dt
            y += v * math.sin(yaw) * dt
            if k > 40 and math.hypot(goal[0] - x, goal[1] - y) < 0.03 and abs(v) < 0.01:
                break
        wait(lambda: status and '"reached"' in status[-1], "the status 'reached'", guard_s=30.0)
    finally:
        node.shutdown()
        proc.terminate()
        proc.wait(20)
    assert math.hypot(goal[0] - x, goal[1] - y) < 0.03, (x, y)
    assert all(m.header.frame_id == "base_link" for m in cmds)
    assert all((m.twist.linear.y, m.twist.linear.z, m.twist.angular.x, m.twist.angular.y) == (0.0, 0.0, 0.0, 0.0) for m in cmds)
    forward = [m.twist.linear.x for m in cmds]
    assert max(forward) <= 0.11 + 1e-12  # the contract's bounds (the robot's own reach 0.22 m/s)
    assert max(forward) > 0.09  # and the policy's near-saturated output mapped onto them
    assert max(abs(m.twist.angular.z) for m in cmds) <= 2.0 + 1e-12  # the shield's yaw-rate limit
