"""The heading loop (robot_hrl.runtime.heading): one law for numpy and torch, the contract's section, the simulators
and the skill node running it, and its refusals."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from robot_hrl.contract.navigate import HeadingSpec, NavigateContract
from robot_hrl.errors import ConfigError, ContractError
from robot_hrl.runtime.heading import HeadingLoop, heading_loop

SHIPPED_GOTO_YAW_RAD = -1.348
"""The shipped goto skill's own yaw (``python -m sim.skill_yaw models/crazyflie_goto.onnx``: -1.3480 rad, every final
yaw within 0.0002 rad; test_the_skill_yaw_is_measured_and_a_skill_without_one_is_refused measures it again)."""
SPEC = HeadingSpec(max_rate_radps=0.8, natural_frequency_radps=3.0, damping_ratio=0.9, min_speed_mps=0.2,
                   max_error_rad=0.5, skill_yaw_rad=SHIPPED_GOTO_YAW_RAD)
LEAD_SPEC = SPEC.model_copy(update={"lead_s": 0.4, "lead_filter_s": 0.1})
"""The same loop with a lead into turns (the shipped level's: robot_hrl.runtime.heading)."""
RATE_SPEC = LEAD_SPEC.model_copy(update={"max_yaw_rate_radps": 1.0})
"""With the yaw rate command clipped, below what the PD asks for (0.8 + 3 / 1.8 * 0.5 = 1.63 rad/s)."""


@pytest.fixture(scope="module")
def goto(repo_root):
    from robot_hrl.runtime import OnnxPolicy

    return OnnxPolicy(repo_root / "models/crazyflie_goto.onnx", provider="cpu")


def _wrap(a):
    return (np.asarray(a) + math.pi) % (2 * math.pi) - math.pi


@pytest.mark.parametrize("spec", [SPEC, LEAD_SPEC, RATE_SPEC], ids=["no_lead", "lead", "rate_limit"])
def test_numpy_and_torch_run_the_same_law(goto, spec):
    """Random yaws, rates, velocities (slow ones included, where the target holds) and resets: the two array kinds
    agree step by step, and the torque never leaves the contract's range."""
    rng = np.random.default_rng(4)
    n = 16
    a = heading_loop(spec, goto, n)
    b = heading_loop(spec, goto, n).to(torch.zeros(1, dtype=torch.float64))
    term = goto.contract.action.terms[a.index]
    for k in range(300):
        yaw = rng.uniform(-math.pi, math.pi, n)
        rate = rng.normal(0.0, 1.0, n)
        vel = rng.normal(0.0, 0.4, (n, 3))
        actions = rng.uniform(-1, 1, (n, 4))
        if k % 37 == 5:
            ids = rng.choice(n, 3, replace=False)
            a.reset(ids)
            b.reset(torch.as_tensor(ids))
        out_a = a.apply(actions, yaw, rate, vel)
        out_b = b.apply(torch.as_tensor(actions), torch.as_tensor(yaw), torch.as_tensor(rate), torch.as_tensor(vel))
        np.testing.assert_allclose(out_b.numpy(), out_a, atol=1e-9)
        np.testing.assert_array_equal(np.delete(out_a, a.index, axis=1), np.delete(actions, a.index, axis=1))
        assert np.all(np.abs(out_a[:, a.index]) <= 1.0 + 1e-12)
        assert np.all(np.abs(_wrap(a.setpoint_rad - yaw)) <= spec.max_error_rad + 1e-9)
    assert term.name == "torque_z"


def test_the_target_leads_into_a_turn_and_not_when_braking(goto):
    """On a path that curves at w rad/s the lead puts the target atan(lead_s w) ahead of the velocity, on the inside of
    the turn (left for a left turn, right for a right one); braking or speeding up along a straight line leads
    nothing; without a lead the target is the velocity's own direction; a reset forgets the turn."""
    dt = 0.01
    for w in (1.0, -0.5):
        lead, plain = heading_loop(LEAD_SPEC, goto), heading_loop(SPEC, goto)
        for k in range(200):  # 2 s: the filter (0.1 s) has settled
            th = w * dt * k
            v = np.array([[math.cos(th), math.sin(th), 0.0]])
            lead.torque_nm(np.array([th]), np.zeros(1), v)
            plain.torque_nm(np.array([th]), np.zeros(1), v)
        assert plain.target_rad[0] == pytest.approx(th, abs=1e-12)
        # (the filter's lag of 0.1 s costs a little of the lead: within 2 %)
        assert _wrap(lead.target_rad[0] - th) == pytest.approx(math.atan(LEAD_SPEC.lead_s * w), rel=0.02)
        lead.reset()
        lead.torque_nm(np.array([0.0]), np.zeros(1), np.array([[0.0, 1.0, 0.0]]))
        assert lead.target_rad[0] == pytest.approx(math.pi / 2)  # the first tick after a reset: no turn yet
    lead = heading_loop(LEAD_SPEC, goto)
    for k in range(100):  # braking hard along +x
        lead.torque_nm(np.zeros(1), np.zeros(1), np.array([[1.5 - 0.015 * k, 0.0, 0.0]]))
        assert lead.target_rad[0] == pytest.approx(0.0, abs=1e-9)


def test_the_setpoint_turns_toward_the_velocity_at_its_rate_and_holds_when_slow(goto):
    loop = heading_loop(SPEC, goto)
    dt = loop.dt_s
    yaw = np.zeros(1)
    loop.apply(np.zeros((1, 4)), yaw, np.zeros(1), np.array([[0.0, 1.0, 0.0]]))  # moving along +y: target pi/2
    assert loop.target_rad[0] == pytest.approx(math.pi / 2)
    assert loop.setpoint_rad[0] == pytest.approx(SPEC.max_rate_radps * dt)  # one step of the rate limit
    # too slow to tell a direction: the target stays
    loop.apply(np.zeros((1, 4)), yaw, np.zeros(1), np.array([[0.1, -0.1, 0.0]]))
    assert loop.target_rad[0] == pytest.approx(math.pi / 2)
    # a yaw left behind (the backup held it): the setpoint is pulled back to within max_error_rad
    loop.setpoint_rad[:] = 2.5
    loop.apply(np.zeros((1, 4)), yaw, np.zeros(1), np.zeros((1, 3)))
    assert abs(loop.setpoint_rad[0]) <= SPEC.max_error_rad + 1e-12
    # the torque: I_zz (wn^2 e + 2 zeta wn (r_sp - r)) at a small error, no rate
    loop = heading_loop(SPEC, goto)
    loop.setpoint_rad[:] = 0.0
    loop.target_rad[:] = 0.0
    torque = loop.torque_nm(np.array([-0.01]), np.zeros(1), np.zeros((1, 3)))
    inertia = goto.robot.inertia_kgm2[2]
    assert torque[0] == pytest.approx(inertia * SPEC.natural_frequency_radps ** 2 * 0.01)


def test_the_yaw_rate_command_is_clipped_and_the_law_is_the_pd_below_the_clip(goto):
    """``max_yaw_rate_radps``: the PD written as a rate command ``r_sp + w_n / (2 zeta) e``, clipped. Below the clip
    the torque is the PD's; far behind the setpoint the loop asks for the limit and no more, and spinning faster than
    the limit it brakes with the damping gain alone, whatever the error."""
    inertia = goto.robot.inertia_kgm2[2]
    kd = 2.0 * SPEC.damping_ratio * SPEC.natural_frequency_radps
    plain, limited = heading_loop(LEAD_SPEC, goto), heading_loop(RATE_SPEC, goto)
    for loop in (plain, limited):  # a small error: the rate command 3 / 1.8 * 0.05 = 0.083 rad/s, unclipped
        loop.setpoint_rad[:] = 0.05
        loop.target_rad[:] = 0.05
    args = (np.zeros(1), np.array([0.02]), np.zeros((1, 3)))
    assert limited.torque_nm(*args)[0] == pytest.approx(plain.torque_nm(*args)[0], rel=1e-12)
    for loop in (plain, limited):  # the setpoint 0.5 rad ahead and turning: the PD asks for 1.63 rad/s
        loop.setpoint_rad[:] = 0.5
        loop.target_rad[:] = 3.0
    rate = np.array([1.2])
    t_plain = plain.torque_nm(np.zeros(1), rate, np.zeros((1, 3)))[0]
    t_limited = limited.torque_nm(np.zeros(1), rate, np.zeros((1, 3)))[0]
    assert t_limited == pytest.approx(min(inertia * kd * (RATE_SPEC.max_yaw_rate_radps - 1.2), limited.high_nm))
    assert t_limited < t_plain  # (the PD still pushes at 1.2 rad/s; the limited loop has nearly stopped asking)
    limited.setpoint_rad[:] = 0.5
    spin = limited.torque_nm(np.zeros(1), np.array([4.3]), np.zeros((1, 3)))[0]  # the traced spin's rate
    assert spin == pytest.approx(max(inertia * kd * (RATE_SPEC.max_yaw_rate_radps - 4.3), limited.low_nm))
    assert spin < 0.0


def test_a_loop_for_another_action_mode_or_without_inertia_is_refused(goto):
    from robot_hrl.contract.schema import ActionSpec, ActionTerm

    wheels = ActionSpec(mode="body_velocity", terms=tuple(
        ActionTerm(name=n, units="u", low=-1.0, high=1.0) for n in ("linear_x", "angular_z")))
    with pytest.raises(ConfigError, match="collective_thrust_body_torque") as info:
        HeadingLoop(SPEC, wheels, 2.9e-5, 0.01)
    assert "without a heading section" in str(info.value)
    with pytest.raises(ConfigError, match="must be > 0"):
        HeadingLoop(SPEC, goto.contract.action, float("nan"), 0.01)

    class Wheeled:
        name = "diff_drive"
        contract = goto.contract
    Wheeled.robot = Wheeled
    with pytest.raises(ConfigError, match="no yaw inertia"):
        heading_loop(SPEC, Wheeled)


@pytest.mark.parametrize("field,value", [("max_rate_radps", 0.0), ("damping_ratio", -1.0), ("max_error_rad", 4.0),
                                         ("mode", "face_goal"), ("min_speed_mps", float("nan")),
                                         ("skill_yaw_rad", 4.0), ("skill_yaw_rad", None), ("lead_s", -0.1),
                                         ("lead_s", float("inf")), ("lead_filter_s", 0.0),
                                         ("max_yaw_rate_radps", -1.0), ("max_yaw_rate_radps", float("inf"))])
def test_a_contract_with_a_bad_heading_is_refused_with_the_fix(repo_root, field, value):
    from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY
    from robot_hrl.runtime import read_model_metadata

    data = json.loads(read_model_metadata(repo_root / "models/crazyflie_navigate.onnx")[NAVIGATE_METADATA_KEY])
    shipped = NavigateContract.model_validate(data).heading  # the shipped level's: face the velocity, 2 rad/s, lead
    assert shipped is not None and shipped.max_rate_radps == 2.0 and shipped.lead_s == 0.4
    data["heading"] = {**SPEC.model_dump(), field: value}
    with pytest.raises(ContractError, match="malformed") as info:
        NavigateContract.from_json(json.dumps(data))
    assert "re-export" in str(info.value)
    data["heading"] = SPEC.model_dump()
    assert NavigateContract.from_json(json.dumps(data)).heading == SPEC


def test_the_batched_simulator_turns_the_robot_to_its_velocity():
    """The frozen goto skill with the loop under it, flown toward fixed world directions: the yaw ends on the velocity,
    and the contract names the loop."""
    from sim.envs.navigate_env import NavigateEnv
    from sim.envs.navigate_env_cfg import NavigateEnvCfg
    from sim.envs.terms.navigate_observations import world_to_yaw, yaw_from_quat

    cfg = NavigateEnvCfg(rooms_per_density=2, randomize=False, range_noise=False)
    cfg.curriculum.enabled = False
    cfg.heading.enabled = True
    cfg.heading.skill_yaw_rad = SHIPPED_GOTO_YAW_RAD
    env = NavigateEnv(cfg, num_envs=6, seed=1)
    assert env.contract.heading == cfg.heading.spec()
    env.pool.box_valid[:] = False  # an empty room: every robot flies its straight line (the turn is what is judged)
    angles = torch.linspace(-2.5, 2.5, 6)
    direction = torch.stack((torch.cos(angles), torch.sin(angles)), dim=-1)
    start_error = None
    for k in range(8):  # 4 s
        a = world_to_yaw(direction, yaw_from_quat(env.low.quat_wxyz)) * 0.6
        _, _, dones, _ = env.step(a)
        assert not dones.any()
        v = env.low.linear_velocity_w
        error = torch.remainder(torch.atan2(v[:, 1], v[:, 0]) - yaw_from_quat(env.low.quat_wxyz) + math.pi, 2 * math.pi) - math.pi
        start_error = error.abs() if start_error is None else start_error
    assert (start_error > 0.5).any()  # some started well off their direction of flight
    assert error.abs().max() < 0.25, error


def test_pybullet_flies_the_loop_from_the_contract(repo_root):
    """The runtime's loop in PyBullet (``fly_pybullet``): a level whose contract names a heading turns the robot."""
    from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY
    from robot_hrl.runtime import read_model_metadata
    from robot_hrl.world.rooms import generate_room
    from robot_hrl.planning.learned import session_act
    from sim.evaluate_navigate import fly_pybullet, load_learned

    data = json.loads(read_model_metadata(repo_root / "models/crazyflie_navigate.onnx")[NAVIGATE_METADATA_KEY])
    data["heading"] = SPEC.model_dump()
    contract = NavigateContract.from_json(json.dumps(data))
    _, session = load_learned(repo_root / "models/crazyflie_navigate.onnx", repo_root / "models/crazyflie_goto.onnx")
    room = generate_room("sparse", 1000000001, "eval")
    yaws = {}
    import sim.pybullet.quadrotor_sim as qs

    step = qs.PyBulletQuadrotorSim.step

    def spy(self, wrench):
        state = step(self, wrench)
        from robot_hrl.contract.navigate import yaw_from_quat

        yaws.setdefault("log", []).append((float(yaw_from_quat(state.quat_wxyz)),
                                           math.atan2(state.linear_velocity_w[1], state.linear_velocity_w[0]),
                                           float(np.hypot(*state.linear_velocity_w[:2]))))
        return state

    qs.PyBulletQuadrotorSim.step = spy
    try:
        out = fly_pybullet(room, session_act(session, contract),  # (the level's graph: a recurrent one carries its state)
                           repo_root / "models/crazyflie_goto.onnx", seed=3, time_limit_s=6.0, contract=contract)
    finally:
        qs.PyBulletQuadrotorSim.step = step
    log = np.array(yaws["log"])
    fast = log[200:][log[200:, 2] > 0.5]  # after 2 s, while it flies
    assert len(fast) > 50 and not out["collided"]
    assert np.median(np.abs(_wrap(fast[:, 0] - fast[:, 1]))) < 0.3


def test_the_skill_node_runs_the_levels_loop_and_refuses_a_level_over_another_skill(repo_root, tmp_path, goto):
    import onnx

    from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY
    from robot_hrl.launch.graph import check_arguments, node_parameters, NAVIGATION_NODES
    from robot_hrl.nodes.skill_core import SkillCore
    from robot_hrl.runtime.heading import heading_of_level
    from robot_hrl.robots import CRAZYFLIE_2X
    from robot_hrl.safety import Shield
    from robot_hrl.state import RobotState
    from robot_hrl.world import load_world

    level = repo_root / "models/crazyflie_navigate.onnx"
    shipped = heading_of_level(level, goto)  # the shipped level was trained under the loop, in the skill's frame
    assert isinstance(shipped, HeadingLoop) and shipped.skill_yaw_rad == pytest.approx(SHIPPED_GOTO_YAW_RAD, abs=0.01)
    model = onnx.load(level)
    entry = next(p for p in model.metadata_props if p.key == NAVIGATE_METADATA_KEY)
    data = json.loads(entry.value)
    data["heading"] = None
    entry.value = json.dumps(data)
    onnx.save(model, tmp_path / "level_plain.onnx")
    assert heading_of_level(tmp_path / "level_plain.onnx", goto) is None  # a level without one: nothing runs
    data["heading"] = SPEC.model_dump()
    entry.value = json.dumps(data)
    onnx.save(model, tmp_path / "level_heading.onnx")
    loop = heading_of_level(tmp_path / "level_heading.onnx", goto)
    assert isinstance(loop, HeadingLoop) and loop.spec == SPEC
    data["lower_skill"]["model_sha256"] = "0" * 64
    entry.value = json.dumps(data)
    onnx.save(model, tmp_path / "level_other.onnx")
    with pytest.raises(ContractError, match="another goto model"):
        heading_of_level(tmp_path / "level_other.onnx", goto)
    # the goto model given as the level, and a corrupted file: refused with what to give instead
    with pytest.raises(ContractError, match="not of a navigate level"):
        heading_of_level(repo_root / "models/crazyflie_goto.onnx", goto)
    (tmp_path / "broken.onnx").write_bytes(b"not an onnx file")
    from robot_hrl.errors import RobotHrlError

    with pytest.raises(RobotHrlError):
        heading_of_level(tmp_path / "broken.onnx", goto)
    # the launch hands the skill node the learned level's file (and nothing for the other planners)
    skill_spec = next(s for s in NAVIGATION_NODES if s.name == "skill_node")
    assert node_parameters(skill_spec, check_arguments({"planner": "learned"}))["heading_model"] == \
        "models/crazyflie_navigate.onnx"
    assert "heading_model" not in node_parameters(skill_spec, check_arguments({"planner": "symbolic"}))
    # the core: the policy's command with the loop's yaw torque, then the shield
    world = load_world(repo_root / "models/worlds/demo.yaml")
    core = SkillCore(goto, Shield.from_yaml(None, CRAZYFLIE_2X, world, goto.contract.subgoal_radius_m), world,
                     heading=loop)
    c = math.cos(0.2)
    state = RobotState(position_w=np.array([1.0, 1.0, 1.0]), quat_wxyz=np.array([c, 0.0, 0.0, math.sin(0.2)]),
                       linear_velocity_w=np.array([0.0, 0.6, 0.0]), angular_velocity_b=np.zeros(3), stamp_s=0.0)
    core.on_state(state, 0.0)
    core.on_subgoal((1.0, 1.6, 1.0), 0.0)
    out = core.tick(0.0)
    yaw_torque = out.command[3]
    # the loop's torque toward the velocity (+y, left of the robot's 0.4 rad yaw): positive, within its range
    assert 0.0 < yaw_torque <= loop.high_nm + 1e-12
    assert loop.target_rad[0] == pytest.approx(math.pi / 2)


@pytest.mark.parametrize("spec", [SPEC, LEAD_SPEC, RATE_SPEC], ids=["no_lead", "lead", "rate_limit"])
def test_the_c_twin_runs_the_same_law_onboard(repo_root, tmp_path, goto, level_with_heading, spec):
    """``robot-hrl export-c --navigate`` of a level with a heading: the controller calls the generated loop, and the
    loop compiled with gcc agrees with the numpy one step by step (float32 against float64)."""
    import ctypes
    import shutil
    import subprocess

    from deploy.crazyflie.codegen import STUB_DIR, generate_project

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    level = level_with_heading(spec.model_dump(), "level_heading.onnx")
    project = generate_project(repo_root / "models/crazyflie_goto.onnx", tmp_path / "cf", navigate=level)
    src = project.out_dir / "src"
    assert "#define POLICY_HEADING_ENABLED 1" in (src / "policy_heading.h").read_text()
    controller = (src / "controller_policy.c").read_text()
    assert "policyHeadingApplyState(state, sensors, policyApplied);" in controller
    assert controller.index("policyHeadingTurnState(state, policyObs);") < controller.index("policy_forward(policyObs")
    assert src / "policy_heading.c" in project.sources
    lib = tmp_path / "heading.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-std=c11", "-Wall", "-Werror", f"-I{STUB_DIR}", f"-I{src}",
                    str(src / "policy_heading.c"), "-o", str(lib), "-lm"], check=True)
    c = ctypes.CDLL(str(lib))
    f32 = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
    c.policyHeadingApply.argtypes = [ctypes.c_float] * 4 + [f32]
    loop = heading_loop(spec, goto)
    rng = np.random.default_rng(11)
    yaw = 0.3
    v = np.zeros(3)
    for k in range(400):
        if k == 250:
            c.policyHeadingReset()
            loop.reset()
        yaw = float(_wrap(yaw + rng.normal(0.0, 0.05)))
        # a velocity that wanders (a flight's) and now and then jumps (a fresh estimate), slow ones included
        v = rng.normal(0.0, 0.5, 3) if k % 50 == 0 else v + rng.normal(0.0, 0.03, 3)
        rate = float(rng.normal(0.0, 0.5))
        actions = rng.uniform(-1, 1, 4).astype(np.float32)
        out_c = actions.copy()
        c.policyHeadingApply(yaw, rate, float(v[0]), float(v[1]), out_c)
        out_py = loop.apply(actions.astype(np.float64)[None], np.array([yaw]), np.array([rate]), v[None])[0]
        np.testing.assert_allclose(out_c, out_py, atol=2e-4)
    # the skill's frame: the observation turned in C as in numpy (random observations, corners of the clip box too)
    from robot_hrl.runtime.heading import turn_observation

    c.policyHeadingTurn.argtypes = [ctypes.c_float, f32]
    size = goto.contract.observation_size
    for k in range(200):
        obs = (rng.uniform(-1, 1, size) * rng.choice([0.05, 2.0, 6.0])).astype(np.float32)
        offset = float(rng.uniform(-math.pi, math.pi))
        out_c = obs.copy()
        c.policyHeadingTurn(offset, out_c)
        np.testing.assert_allclose(out_c, turn_observation(obs.astype(np.float64), loop.turned, offset), atol=2e-5)
    # the goto alone (no level, so no heading): the same file, a no-op
    plain = generate_project(repo_root / "models/crazyflie_goto.onnx", tmp_path / "cf_plain")
    assert "#define POLICY_HEADING_ENABLED 0" in (plain.out_dir / "src/policy_heading.h").read_text()


def _turned_state(state, subgoal, offset):
    """``state`` and ``subgoal`` in a world frame turned by ``offset`` about z (positions, velocity, attitude)."""
    from robot_hrl.state import RobotState

    c, s = math.cos(offset), math.sin(offset)
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    w, x, y, z = state.quat_wxyz
    ch, sh = math.cos(offset / 2), math.sin(offset / 2)
    quat = np.array([ch * w - sh * z, ch * x - sh * y, ch * y + sh * x, ch * z + sh * w])
    return RobotState(position_w=rz @ state.position_w, quat_wxyz=quat, linear_velocity_w=rz @ state.linear_velocity_w,
                      angular_velocity_b=state.angular_velocity_b.copy()), rz @ subgoal


def test_the_turned_observation_is_the_observation_of_a_turned_world(goto, repo_root):
    """``turn_observation`` on the built observation equals observing a world turned about z (position, subgoal,
    velocity and attitude turned; body rates and the last action kept), for random states; the integral (world frame)
    turns with the rest, and torch agrees with numpy."""
    from robot_hrl.runtime import OnnxPolicy
    from robot_hrl.runtime.heading import TurnedTerms, turn_observation
    from robot_hrl.state import RobotState

    a = OnnxPolicy(repo_root / "models/crazyflie_goto.onnx", provider="cpu")
    b = OnnxPolicy(repo_root / "models/crazyflie_goto.onnx", provider="cpu")
    turned = TurnedTerms(a.contract.observations)
    names = [t.name for t in a.contract.observations]
    assert names[:3] == ["subgoal_error_w", "rotation_matrix_wb", "linear_velocity_w"]
    assert turned.x_index[:4] == [0, 3, 4, 5] and turned.y_index[:4] == [1, 6, 7, 8]
    rng = np.random.default_rng(5)
    for k in range(50):
        q = rng.normal(size=4)
        state = RobotState(position_w=rng.uniform(-3, 3, 3), quat_wxyz=q / np.linalg.norm(q),
                           linear_velocity_w=rng.normal(0, 1, 3), angular_velocity_b=rng.normal(0, 1, 3))
        subgoal = state.position_w + rng.uniform(-0.4, 0.4, 3)
        offset = float(rng.uniform(-math.pi, math.pi))
        a.reset(), b.reset()
        obs = a.observe(state, subgoal, yaw_offset_rad=offset)
        ts, tg = _turned_state(state, subgoal, offset)
        np.testing.assert_allclose(obs, b.observe(ts, tg), atol=2e-6)
        t = turn_observation(torch.as_tensor(a.observe(state, subgoal)[None], dtype=torch.float64), turned,
                             torch.tensor([offset], dtype=torch.float64))
        np.testing.assert_allclose(t.numpy()[0], obs, atol=2e-6)
    # the integral: world-frame error held near a subgoal, then the observation turned (columns of the integral turn)
    state = RobotState(position_w=np.array([0.0, 0.0, 1.0]), quat_wxyz=np.array([1.0, 0.0, 0.0, 0.0]))
    a.reset()
    for _ in range(100):
        plain = a.observe(state, np.array([0.03, 0.0, 1.0]))
    i0 = names.index("position_error_integral")
    i0 = sum(t.size for t in a.contract.observations[:i0])
    assert plain[i0] > 0.01 and plain[i0 + 1] == 0.0
    out = turn_observation(plain, turned, math.pi / 2)
    assert out[i0] == pytest.approx(0.0, abs=1e-9) and out[i0 + 1] == pytest.approx(plain[i0])


def test_the_skill_holds_its_height_at_any_yaw_under_the_loop(goto, repo_root):
    """The node graph's takeoff stalled at 0.81 m when the loop held the yaw away from the goto skill's own (its
    torque_z ran out of range and it observed that). In its own frame it climbs to the subgoal at every start yaw, its
    own torque_z stays small, and the loop then turns it to face a move (PyBullet, the shipped goto)."""
    from robot_hrl.contract.navigate import yaw_from_quat
    from robot_hrl.geometry import quat_from_euler_rpy
    from robot_hrl.world.rooms import generate_room
    from sim.pybullet import PyBulletQuadrotorSim

    from sim.envs.navigate_env_cfg import NavigateHeadingCfg

    spec = NavigateHeadingCfg(enabled=True, skill_yaw_rad=SHIPPED_GOTO_YAW_RAD).spec()  # training's defaults
    room = generate_room("dense", 1000000003, "eval")
    start = np.array([7.45, 7.03, 0.0125])
    for yaw0 in (0.0, 1.5, 3.0, -2.0):
        loop = heading_loop(spec, goto)
        with PyBulletQuadrotorSim(robot=goto.robot, world=room.world, control_hz=100, seed=0) as sim:
            state = sim.reset(start, quat_from_euler_rpy(0.0, 0.0, yaw0))
            goto.reset()
            for k in range(600):  # 6 s: take off to 1 m and hover
                state = sim.step(goto.to_wrench(loop.step(goto, state, np.array([7.45, 7.03, 1.0]))))
            assert state.position_w[2] == pytest.approx(1.0, abs=0.02), (yaw0, state.position_w)
            assert abs(goto.last_action[3]) < 0.1, goto.last_action
            for k in range(800):  # 8 s: 0.95 m away
                state = sim.step(goto.to_wrench(loop.step(goto, state, np.array([8.2, 7.6, 1.0]))))
            assert np.linalg.norm(state.position_w - [8.2, 7.6, 1.0]) < 0.03, (yaw0, state.position_w)
            assert abs(goto.last_action[3]) < 0.1, goto.last_action


def test_the_skill_yaw_is_measured_and_a_skill_without_one_is_refused(repo_root):
    """``sim/skill_yaw.py`` measures the shipped goto's own yaw (the tests' SHIPPED_GOTO_YAW_RAD); hover cut short, the
    yaws have not met and the measurement is refused with the fix; a heading config without the yaw is refused."""
    from sim.envs.navigate_env_cfg import NavigateHeadingCfg
    from sim.skill_yaw import equilibrium_yaw, main

    yaw, spread = equilibrium_yaw(repo_root / "models/crazyflie_goto.onnx", num_envs=8)
    assert yaw == pytest.approx(SHIPPED_GOTO_YAW_RAD, abs=0.01) and spread < 0.01
    with pytest.raises(ConfigError, match="skill_yaw_rad yourself"):
        equilibrium_yaw(repo_root / "models/crazyflie_goto.onnx", num_envs=8, hover_s=0.5)
    assert main([str(repo_root / "models/crazyflie_goto.onnx"), "--num-envs", "4", "--hover-s", "0.5"]) == 2
    assert main([str(repo_root / "models/missing.onnx")]) == 2  # a missing model: its error, no traceback
    with pytest.raises(ConfigError, match="python -m sim.skill_yaw"):
        NavigateHeadingCfg(enabled=True).spec()
    assert NavigateHeadingCfg(enabled=False).spec() is None


def test_a_non_finite_state_under_the_loop_is_refused_and_names_the_term(goto):
    """A NaN attitude or position reaching the loop's tick: the policy's own error names the state field (the skill node
    withholds the command and the watchdog acts), nothing is turned or remembered."""
    from robot_hrl.errors import ObservationError
    from robot_hrl.state import RobotState

    loop = heading_loop(SPEC, goto)
    goto.reset()
    for field, value in (("quat_wxyz", np.array([np.nan, 0.0, 0.0, 1.0])), ("position_w", np.array([0.0, np.inf, 1.0]))):
        state = RobotState(position_w=np.array([0.0, 0.0, 1.0]), quat_wxyz=np.array([1.0, 0.0, 0.0, 0.0]))
        setattr(state, field, value)
        with pytest.raises(ObservationError, match=f"RobotState.{field} is not finite"):
            loop.step(goto, state, np.array([0.0, 0.0, 1.0]))
        assert np.all(goto.last_action == 0.0)
    with pytest.raises(ObservationError, match="yaw_offset_rad is not finite"):
        goto.observe(RobotState(position_w=np.array([0.0, 0.0, 1.0])), np.array([0.0, 0.0, 1.0]), yaw_offset_rad=math.nan)


def test_training_with_the_loop_measures_the_skills_yaw_and_exports_it(tmp_path, repo_root):
    """``train_navigate.py --heading`` from scratch (one PPO iteration, small): it measures the goto skill's own yaw
    (sim/skill_yaw.py) before training and the exported contract names the loop with it; the level flies it."""
    import subprocess
    import sys

    from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY
    from robot_hrl.runtime import read_model_metadata

    run = tmp_path / "nav_heading"
    out = subprocess.run([sys.executable, "sim/train_navigate.py", "--run-dir", str(run), "--num-envs", "8",
                          "--max-iterations", "1", "--rooms-per-density", "1", "--threads", "1", "--dagger-iterations", "0",
                          "--heading", "--heading-lead-s", "0.4", "--heading-max-yaw-rate-radps", "2", "--export",
                          str(run / "nav.onnx")],
                         capture_output=True, text=True, cwd=repo_root)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "the goto skill's own yaw -1.34" in out.stdout
    heading = NavigateContract.from_json(read_model_metadata(run / "nav.onnx")[NAVIGATE_METADATA_KEY]).heading
    assert heading is not None and heading.skill_yaw_rad == pytest.approx(SHIPPED_GOTO_YAW_RAD, abs=0.01)
    assert heading.max_rate_radps == 2.0 and heading.lead_s == 0.4  # NavigateHeadingCfg's default rate, the lead asked for
    assert heading.max_yaw_rate_radps == 2.0
    for argv, words in ((["--heading-lead-s", "0.4"], "add --heading"), (["--heading", "--heading-lead-s", "-1"], "[0, 2]"),
                        (["--heading-max-yaw-rate-radps", "2"], "add --heading"),
                        (["--heading", "--heading-max-yaw-rate-radps", "nan"], "[0, 20]")):
        bad = subprocess.run([sys.executable, "sim/train_navigate.py", "--run-dir", str(tmp_path / "bad"), "--num-envs", "8",
                              "--max-iterations", "1", *argv], capture_output=True, text=True, cwd=repo_root)
        assert bad.returncode != 0 and words in bad.stderr


def test_the_generated_controller_flies_the_shipped_levels_loop_as_the_runtime(repo_root, tmp_path, goto):
    """``robot-hrl export-c`` of the shipped goto with the shipped level: the controller compiled with host gcc (firmware
    header stubs) turns the observation into the skill's frame and applies the loop's yaw torque exactly as the runtime's
    ``HeadingLoop.step`` does, tick for tick, through a random flight (states near hover, yaws and velocities moving)."""
    import shutil

    from deploy.crazyflie.codegen import generate_project
    from deploy.crazyflie.host import HostController
    from robot_hrl.runtime.heading import heading_of_level
    from robot_hrl.state import RobotState

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    level = repo_root / "models/crazyflie_navigate.onnx"
    project = generate_project(repo_root / "models/crazyflie_goto.onnx", tmp_path / "cf", navigate=level)
    lib = HostController.build(project, tmp_path / "host")
    loop = heading_of_level(level, goto)
    goto.reset()
    lib.init()
    rng = np.random.default_rng(19)
    period = int(1000 / goto.contract.control_rate_hz)
    yaw, position, velocity = 0.4, np.array([1.0, 2.0, 1.0]), np.zeros(3)
    for k in range(120):
        yaw = float(_wrap(yaw + rng.normal(0.0, 0.08)))
        velocity = 0.8 * velocity + rng.normal(0.0, 0.15, 3)
        position = position + 0.01 * velocity
        tilt = rng.normal(0.0, 0.05, 2)
        q = np.array([math.cos(yaw / 2), tilt[0], tilt[1], math.sin(yaw / 2)])
        q = (q / np.linalg.norm(q)).astype(np.float32).astype(np.float64)
        state = RobotState(position_w=position.astype(np.float32).astype(np.float64), quat_wxyz=q,
                           linear_velocity_w=velocity.astype(np.float32).astype(np.float64),
                           angular_velocity_b=rng.normal(0.0, 0.5, 3).astype(np.float32).astype(np.float64))
        subgoal = (np.array([1.3, 2.2, 1.0]) if k < 60 else np.array([0.6, 2.5, 1.2])).astype(np.float32).astype(np.float64)
        expected = goto.to_wrench(loop.step(goto, state, subgoal))
        row = np.concatenate([state.position_w, state.quat_wxyz, state.linear_velocity_w,
                              np.degrees(state.angular_velocity_b), subgoal]).astype(np.float32)
        mode, out = lib.step(row, tick=k * period)
        assert mode == 0  # the policy flies
        np.testing.assert_allclose(out[:4], expected, rtol=1e-3, atol=2e-6)


def test_the_latency_benchmark_refuses_a_bad_level(repo_root, level_with_heading):
    """``bench_runtime_latency.py --heading-from``: a level without a loop, or a missing file, is a usage error."""
    import subprocess
    import sys

    for level, message in ((level_with_heading(None, "plain.onnx"), "names no heading loop"),
                           (repo_root / "models/missing.onnx", "does not exist")):
        out = subprocess.run([sys.executable, "benchmarks/bench_runtime_latency.py", "--iterations", "100",
                              "--heading-from", str(level)], capture_output=True, text=True, cwd=repo_root)
        assert out.returncode == 2 and message in out.stderr, out.stderr[-2000:]


def test_a_levels_heading_is_retuned_with_its_weights_and_provenance_kept(repo_root, tmp_path, level_with_heading,
                                                                          capsys):
    """``python -m deploy.onnx_export.heading``: a new file whose contract has the new heading fields, the same outputs
    and a record of the change (the old file's sha256, from and to); a level without a loop, a skill's file, a value
    out of the contract's range and a missing level are refused with the fix, and nothing is written."""
    import hashlib

    from deploy.onnx_export.heading import RETUNE_KEY, main
    from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY
    from robot_hrl.runtime import read_model_metadata

    shipped = repo_root / "models/crazyflie_navigate.onnx"
    out = tmp_path / "lead.onnx"
    assert main([str(shipped), "--lead-s", "0.7", "--out", str(out)]) == 0
    meta = read_model_metadata(out)
    heading = NavigateContract.from_json(meta[NAVIGATE_METADATA_KEY]).heading
    before = NavigateContract.from_json(read_model_metadata(shipped)[NAVIGATE_METADATA_KEY]).heading
    assert heading == before.model_copy(update={"lead_s": 0.7})
    record = json.loads(meta[RETUNE_KEY])[-1]
    assert record["from_sha256"] == hashlib.sha256(shipped.read_bytes()).hexdigest()
    assert record["from"] == {"lead_s": before.lead_s} and record["to"] == {"lead_s": 0.7}
    assert (tmp_path / "lead.onnx.sha256").read_text().split()[0] == hashlib.sha256(out.read_bytes()).hexdigest()
    again = tmp_path / "again.onnx"  # a second change keeps the first one's record
    assert main([str(out), "--lead-filter-s", "0.2", "--max-yaw-rate-radps", "2", "--out", str(again)]) == 0
    history = json.loads(read_model_metadata(again)[RETUNE_KEY])  # (the shipped level's own change comes first)
    assert [r["to"] for r in history[-2:]] == [{"lead_s": 0.7}, {"lead_filter_s": 0.2, "max_yaw_rate_radps": 2.0}]
    assert NavigateContract.from_json(read_model_metadata(again)[NAVIGATE_METADATA_KEY]).heading.max_yaw_rate_radps == 2.0
    bad = tmp_path / "bad.onnx"
    plain = level_with_heading(None, "plain.onnx")
    for argv, words in (([str(plain), "--lead-s", "0.4"], "--heading"),
                        ([str(repo_root / "models/crazyflie_goto.onnx"), "--lead-s", "0.4"], "navigation model"),
                        ([str(shipped), "--lead-s", "-0.4"], "greater than or equal"),
                        ([str(shipped), "--max-yaw-rate-radps", "-1"], "greater than or equal"),
                        ([str(tmp_path / "missing.onnx"), "--lead-s", "0.4"], "missing.onnx")):
        capsys.readouterr()
        assert main(argv + ["--out", str(bad)]) == 2
        assert words in capsys.readouterr().err
        assert not bad.exists()
    with pytest.raises(SystemExit):
        main([str(shipped), "--out", str(bad)])  # nothing to change: a usage error
