"""The contract's action mapping is the only one: the action-mode registry, the mapping (numpy and
torch from one function), the robot's check of a contract's bounds, and proof that every consumer
(runtime, shield, skill core) maps with ``contract.action``'s bounds, not the robot's."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from robot_hrl.contract import (
    ACTION_MODES,
    ActionMode,
    ActionSpec,
    ActionTerm,
    PolicyContract,
    action_map,
    action_mismatches,
    command_to_normalized,
    goto_contract,
    normalized_to_command,
)
from robot_hrl.errors import ConfigError, ContractError
from robot_hrl.robots import get_robot
from test_runtime_models import make_policy_model

REPO = Path(__file__).resolve().parents[1]
CRAZYFLIE = get_robot("crazyflie_2x")
DIFF_DRIVE = get_robot("diff_drive")


def narrowed(spec: ActionSpec, factors) -> ActionSpec:
    """``spec`` with each term's bounds scaled by its factor (<= 1: a gentler model than the robot allows)."""
    terms = tuple(t.model_copy(update={"low": t.low * f, "high": t.high * f}) for t, f in zip(spec.terms, factors))
    return ActionSpec(mode=spec.mode, firmware_control_mode=spec.firmware_control_mode, terms=terms)


# ---- the registry ------------------------------------------------------------------------------------
def test_modes_name_their_message_and_what_executes_them():
    thrust = ACTION_MODES["collective_thrust_body_torque"]
    assert thrust.message_type == "geometry_msgs/msg/WrenchStamped" and thrust.target_modes[0] == "controlModeForceTorque"
    velocity = ACTION_MODES["body_velocity"]
    assert velocity.message_fields == ("twist.linear.x", "twist.angular.z") and velocity.size == 2
    assert ACTION_MODES["joint_position"].size is None and not ACTION_MODES["joint_position"].clip
    for robot in (CRAZYFLIE, DIFF_DRIVE):  # a robot's own spec uses its mode's units
        for mode in robot.action_modes:
            spec = robot.action_spec(mode)
            assert tuple(t.units for t in spec.terms) == ACTION_MODES[mode].term_units
            assert action_mismatches(spec, robot) == []


def test_an_unknown_mode_is_refused_naming_the_known_ones():
    data = json.loads(goto_contract(CRAZYFLIE).to_json())
    data["action"]["mode"] = "rotor_speeds"
    with pytest.raises(ContractError, match=r"unknown action mode 'rotor_speeds'.*body_velocity.*collective_thrust_body_torque"):
        PolicyContract.from_json(json.dumps(data))
    data["action"]["mode"] = "body_velocity"  # a known mode, but another robot's controller and term count
    with pytest.raises(ContractError, match="executed by"):
        PolicyContract.from_json(json.dumps(data))


def test_the_target_mode_defaults_to_the_modes_first_and_is_checked():
    terms = DIFF_DRIVE.action_spec().terms
    assert ActionSpec(mode="body_velocity", terms=terms).firmware_control_mode == "diff_drive_controller"
    with pytest.raises(ValueError, match="takes 2 terms"):
        ActionSpec(mode="body_velocity", terms=terms[:1])
    with pytest.raises(ValueError, match="low < high"):
        ActionTerm(name="x", units="m/s", low=1.0, high=1.0)


def test_the_shipped_contract_json_is_unchanged():
    """The registry changed no byte of what a model carries (schema_version 1, same JSON)."""
    from robot_hrl.contract import GOTO_ERROR_INTEGRAL
    from robot_hrl.runtime import read_model_metadata

    shipped = read_model_metadata(REPO / "models" / "crazyflie_goto.onnx")["robot_hrl.contract"]
    # (the shipped model observes the position error's gated integral since issue 17's no-sag model)
    assert goto_contract(CRAZYFLIE, error_integral=GOTO_ERROR_INTEGRAL).to_json() == shipped
    # (the firmware chain, issue 17: THRUST2TORQUE 0.00699 and the 31.5 g nominal mass changed the hash; schema_version 1
    # with the optional firmware field)
    assert CRAZYFLIE.params_sha256() == "98e1bea1e7c0b890b15fce917708c2cb8a50dd8706b5825ad1f0d43e8aff90b5"
    assert PolicyContract.from_json(shipped).mismatches(CRAZYFLIE) == []


# ---- the mapping ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("robot", [CRAZYFLIE, DIFF_DRIVE], ids=lambda r: r.name)
def test_mapping_is_affine_clipped_and_its_inverse(robot):
    spec = robot.action_spec()
    low = np.array([t.low for t in spec.terms])
    high = np.array([t.high for t in spec.terms])
    a = np.random.default_rng(0).uniform(-1.5, 1.5, (200, spec.size))
    c = normalized_to_command(spec, a)
    np.testing.assert_allclose(c, low + (np.clip(a, -1, 1) + 1) / 2 * (high - low), rtol=1e-15, atol=1e-18)
    np.testing.assert_allclose(command_to_normalized(spec, c), np.clip(a, -1, 1), atol=1e-12)
    m = action_map(spec)
    for row in a[:20]:  # the shield's float path gives the same bits as the array path
        assert m.command(row.tolist()) == normalized_to_command(spec, row).tolist()
        assert m.normalized(m.command(row.tolist())) == command_to_normalized(spec, normalized_to_command(spec, row)).tolist()


def test_the_same_function_maps_torch_tensors():
    torch = pytest.importorskip("torch")
    spec = CRAZYFLIE.action_spec()
    a = np.random.default_rng(1).uniform(-1.2, 1.2, (64, 4))
    t64 = normalized_to_command(spec, torch.tensor(a, dtype=torch.float64))
    assert isinstance(t64, torch.Tensor) and t64.dtype == torch.float64
    np.testing.assert_array_equal(t64.numpy(), normalized_to_command(spec, a))  # bit for bit in float64
    t32 = normalized_to_command(spec, torch.tensor(a, dtype=torch.float32))
    assert t32.dtype == torch.float32
    np.testing.assert_allclose(t32.numpy(), normalized_to_command(spec, a), rtol=1e-6, atol=1e-9)
    back = command_to_normalized(spec, t64)
    np.testing.assert_allclose(back.numpy(), np.clip(a, -1, 1), atol=1e-12)


def test_joint_position_maps_without_clipping():
    spec = ActionSpec(mode="joint_position", terms=tuple(
        ActionTerm(name=f"joint_{i}", units="rad", low=-0.5, high=0.5) for i in range(3)))
    np.testing.assert_allclose(normalized_to_command(spec, [2.0, 0.0, -1.0]), [1.0, 0.0, -0.5])


# ---- the robot's check of a contract's bounds ------------------------------------------------------------
def test_bounds_beyond_the_robots_are_refused_narrower_ones_accepted():
    contract = goto_contract(CRAZYFLIE)
    wider = contract.model_copy(update={"action": narrowed(contract.action, (1.0, 2.0, 2.0, 1.0))})
    with pytest.raises(ContractError, match=r"action bounds: the model maps torque_x onto .* beyond robot 'crazyflie_2x'"):
        wider.check_compatible(CRAZYFLIE)
    gentle = contract.model_copy(update={"action": narrowed(contract.action, (0.8, 0.5, 0.5, 0.5))})
    gentle.check_compatible(CRAZYFLIE)
    other = contract.model_copy(update={"action": DIFF_DRIVE.action_spec()})
    assert any("takes ['collective_thrust_body_torque']" in p for p in other.mismatches(CRAZYFLIE))


# ---- every consumer maps with the contract's bounds --------------------------------------------------------
def _constant_policy(path: Path, contract: PolicyContract, actions) -> None:
    """An ONNX policy whose output is ``actions`` whatever it observes (weights zero, bias the output)."""
    n_obs, n_act = contract.observation_size, contract.action_size
    weights = {"w1": np.zeros((n_obs, 16), np.float32), "b1": np.zeros(16, np.float32),
               "w2": np.zeros((16, n_act), np.float32), "b2": np.asarray(actions, np.float32)}
    make_policy_model(path, contract_json=contract.to_json(), n_obs=n_obs, n_act=n_act, weights=weights)


@pytest.mark.parametrize("robot, factors, actions, position", [
    (CRAZYFLIE, (1.0, 0.5, 0.5, 0.5), (-0.11, 0.2, -0.1, 0.3), (2.0, 2.3, 1.0)),
    (DIFF_DRIVE, (0.5, 1.0), (0.4, 0.05), (0.5, 0.5, 0.0)),
], ids=["crazyflie_2x", "diff_drive"])
def test_runtime_shield_and_skill_core_fly_the_contracts_bounds(tmp_path, demo_world_path, robot, factors, actions, position):
    """A model exported with narrower bounds than its robot's: the command out of the skill core is the
    contract's mapping of the policy's output, not the robot's (which would double it)."""
    from robot_hrl.nodes.skill_core import SkillCore
    from robot_hrl.runtime import OnnxPolicy
    from robot_hrl.safety import Shield, load_shield_config
    from robot_hrl.state import RobotState
    from robot_hrl.world import load_world

    base = goto_contract(robot) if robot is CRAZYFLIE else __import__(
        "robot_hrl.robots.diff_drive.contract", fromlist=["goto_contract"]).goto_contract(robot)
    contract = base.model_copy(update={"action": narrowed(base.action, factors)})
    path = tmp_path / "gentle.onnx"
    _constant_policy(path, contract, actions)
    policy = OnnxPolicy(path, robot=robot.name, provider="cpu")
    world = load_world(demo_world_path)
    config = load_shield_config(robot.shield_config_path)
    # no wall-clock judgement here: a loaded test machine may take longer than the deadline to infer
    config = config.model_copy(update={"watchdog": config.watchdog.model_copy(update={"inference_deadline_s": 60.0})})
    shield = Shield(config, robot, world, contract.subgoal_radius_m, action=policy.contract.action)
    core = SkillCore(policy, shield, world)
    now = 1.0
    core.on_state(RobotState(position_w=np.array(position), stamp_s=now), now)
    core.on_subgoal(position, now)
    core.on_battery(3.9, now, now)  # a measured battery, as the node graph feeds it (none: the worst case holds a descent)
    out = core.tick(now)
    a = np.asarray(actions, np.float32).astype(np.float64)
    expected = normalized_to_command(contract.action, a)
    assert out.mode == "policy" and out.interventions == ()
    np.testing.assert_array_equal(out.command, expected)
    np.testing.assert_array_equal(policy.to_command(a), expected)
    robots_own = normalized_to_command(robot.action_spec(), a)
    assert not np.allclose(out.command, robots_own)
    # the shield's actuator range is the contract's too: a full command is clamped to it, not the robot's
    full = Shield.from_yaml(None, robot, world, 1.0, action=contract.action)
    assert full.action.high == tuple(t.high for t in contract.action.terms)


def test_a_shield_refuses_an_action_spec_beyond_its_robot(demo_world_path):
    from robot_hrl.safety import Shield
    from robot_hrl.world import load_world

    with pytest.raises(ConfigError, match="action spec does not fit the robot"):
        Shield.from_yaml(None, CRAZYFLIE, load_world(demo_world_path), 1.0,
                         action=narrowed(CRAZYFLIE.action_spec(), (1.0, 3.0, 1.0, 1.0)))


# ---- nobody maps actions by hand -----------------------------------------------------------------------------
def _one(n) -> bool:
    return isinstance(n, ast.Constant) and isinstance(n.value, float) and n.value == 1.0


def _plus_one(n) -> bool:
    return isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and (_one(n.left) or _one(n.right))


def _scaled(n) -> bool:
    return isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) and any(_plus_one(x) or _scaled(x) for x in (n.left, n.right))


def _has_sub(n) -> bool:
    return any(isinstance(x, ast.BinOp) and isinstance(x.op, ast.Sub) for x in ast.walk(n))


def affine_maps(source: str) -> list[int]:
    """Lines that compute ``low + (a + 1.0) * span`` or ``(c - low) / span - 1.0`` (an action map by hand)."""
    lines = []
    for n in ast.walk(ast.parse(source)):
        if not isinstance(n, ast.BinOp):
            continue
        if isinstance(n.op, ast.Add) and (_scaled(n.left) or _scaled(n.right)):
            lines.append(n.lineno)
        elif isinstance(n.op, ast.Sub) and _one(n.right) and isinstance(n.left, ast.BinOp) \
                and isinstance(n.left.op, ast.Div) and _has_sub(n.left.left):
            lines.append(n.lineno)
    return sorted(set(lines))


MAPPING_HOME = "robot_hrl/contract/action_modes.py"
SIM_TWINS_BEING_REPLACED = {
    "sim/envs/dynamics.py": "the torch step's own map; the actuator-chain work (branch sim-chain) calls normalized_to_command",
    "sim/envs/step_core.py": "the same, structure of arrays",
}


def test_the_detector_finds_a_hand_written_map():
    assert affine_maps("cmd = [lo[0] + (c0 + 1.0) * hs[0]]") == [1]
    assert affine_maps("n0 = (out[0] - lo[0]) / hs[0] - 1.0") == [1]
    assert affine_maps("a = np.clip(2.0 * (w - low) / (high - low) - 1.0, -1, 1)") == [1]
    assert affine_maps("w = low + (a.clamp(-1.0, 1.0) + 1.0) * 0.5 * (high - low)") == [1]
    assert affine_maps("s = (start[1] + 1) * w + start[0] + 1") == []  # integer grid arithmetic is not an action map


def test_no_module_maps_actions_outside_the_contract():
    found = {}
    for folder in ("robot_hrl", "sim", "deploy"):
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel == MAPPING_HOME or rel in SIM_TWINS_BEING_REPLACED:
                continue
            lines = affine_maps(path.read_text())
            if lines:
                found[rel] = lines
    assert found == {}, (f"these modules map normalized actions by hand: {found}; call "
                         "robot_hrl.contract.normalized_to_command / command_to_normalized (or action_map(spec)) with "
                         "contract.action instead")
    assert affine_maps((REPO / MAPPING_HOME).read_text())  # the one home does map


def test_the_command_output_comes_from_the_robot_and_the_mode():
    from robot_hrl.nodes.skill_command import CommandChannel

    cf = CommandChannel.of(CRAZYFLIE, "collective_thrust_body_torque")
    assert (cf.topic, cf.message_type, cf.fields[0], cf.frame_id) == ("/cmd_wrench", "geometry_msgs/msg/WrenchStamped",
                                                                     "wrench.force.z", "base_link")
    dd = CommandChannel.of(DIFF_DRIVE, "body_velocity")
    assert (dd.topic, dd.message_type, dd.fields) == ("/cmd_vel", "geometry_msgs/msg/TwistStamped", ("twist.linear.x", "twist.angular.z"))
    with pytest.raises(ConfigError, match="'joint_position' has no command output in this runtime yet"):
        CommandChannel.of(DIFF_DRIVE, "joint_position")
    assert isinstance(ACTION_MODES["body_velocity"], ActionMode)
