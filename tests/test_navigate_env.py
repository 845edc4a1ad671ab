"""The navigate level: contract, numpy/torch observation twins, the batched environment over the frozen goto skill."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from robot_hrl.contract import goto_contract
from robot_hrl.contract.navigate import (
    NavigateContract, compute_navigate_observation, contract_sha256, subgoal_from_action,
)
from robot_hrl.errors import ConfigError, ContractError, ObservationError
from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.world.rooms import generate_room
from sim.envs.nav_rooms import RoomPool
from sim.envs.navigate_env import NavigateEnv
from sim.envs.navigate_env_cfg import NavigateEnvCfg
from sim.envs.terms import navigate_observations as torch_terms
from sim.envs.terms import observations as goto_terms


@pytest.fixture(scope="module")
def pool():
    return RoomPool.from_rooms([generate_room(d, s) for d in ("sparse", "medium", "dense") for s in range(2)])


@pytest.fixture
def env(pool, repo_root):
    # a fresh env per test: with a module-scoped one, each test inherited the rooms and goals the tests before it on
    # the same xdist worker left (make test distributes them by load), which hid an alias in
    # test_collision_success_and_time_limit until a fresh-clone CI run ordered them otherwise
    cfg = NavigateEnvCfg(skill_path=str(repo_root / "models/crazyflie_goto.onnx"), randomize=False, range_noise=False,
                         episode_length_s=3.0)
    return NavigateEnv(cfg, num_envs=12, seed=0, pool=pool)


def _random_inputs(rng, n):
    quat = np.array([quat_from_euler_rpy(*rng.uniform(-0.3, 0.3, 2), rng.uniform(-np.pi, np.pi)) for _ in range(n)])
    return {"position_w": rng.uniform(0, 10, (n, 3)), "quat_wxyz": quat, "linear_velocity_w": rng.normal(0, 2, (n, 3)),
            "goal_w": rng.uniform(-5, 15, (n, 3)), "ranges_m": rng.uniform(0, 5, (n, 6)),
            "last_subgoal_w": rng.uniform(0, 10, (n, 3)), "range_memory_yaw": rng.uniform(0, 4, (n, 16))}


def test_numpy_and_torch_terms_agree(env):
    rng = np.random.default_rng(0)
    x = _random_inputs(rng, 500)
    ours = compute_navigate_observation(env.observation_terms, x)
    theirs = torch_terms.compute_navigate_observation(env.observation_terms, {k: torch.tensor(v, dtype=torch.float32) for k, v in x.items()})
    np.testing.assert_allclose(ours, theirs.numpy(), atol=2e-4)
    assert ours.shape == (500, 13 + env.contract.memory.sectors)
    # the goal in the yaw frame: a robot facing +y sees a goal at +y straight ahead
    one = {k: v[:1].copy() for k, v in x.items()}
    one["quat_wxyz"] = quat_from_euler_rpy(0, 0, math.pi / 2)[None]
    one["goal_w"] = one["position_w"] + np.array([[0.0, 3.0, 0.0]])
    np.testing.assert_allclose(compute_navigate_observation(env.observation_terms, one)[0, :2], [3.0, 0.0], atol=1e-6)
    bad = dict(x, ranges_m=np.full((500, 6), np.nan))
    with pytest.raises(ObservationError, match="not finite"):
        compute_navigate_observation(env.observation_terms, bad)


def test_contract_names_the_skill_and_refuses_another(env, tmp_path):
    c = env.contract
    assert NavigateContract.from_json(c.to_json()) == c
    assert c.lower_skill.model_sha256 == env.skill.sha256 and c.max_offset_m <= c.lower_skill.subgoal_radius_m
    assert c.sensors.names == ("front", "back", "left", "right", "up", "down")
    c.check_lower_skill(env.skill.contract, env.skill.sha256)
    other_rate = goto_contract(CRAZYFLIE_2X, control_rate_hz=50.0)
    with pytest.raises(ContractError, match="lower skill contract"):
        c.check_lower_skill(other_rate)
    with pytest.raises(ContractError, match="another goto model"):
        c.check_lower_skill(env.skill.contract, "0" * 64)
    assert contract_sha256(env.skill.contract) == c.lower_skill.contract_sha256
    with pytest.raises(ContractError, match="not of a navigate level"):
        NavigateContract.from_json(env.skill.contract.to_json())
    with pytest.raises(ContractError, match="carries no contract"):
        NavigateContract.from_json("")
    data = c.model_dump(mode="json")
    for t in data["action"]["terms"]:
        t["low"], t["high"] = -1.5, 1.5
    with pytest.raises(ContractError, match="adjacency"):
        NavigateContract.from_json(__import__("json").dumps(data))


def test_subgoals_stay_inside_the_subgoal_radius(env):
    rng = np.random.default_rng(1)
    spec = env.contract
    x = _random_inputs(rng, 200)
    actions = rng.normal(0, 3, (200, 2))
    actions[:5] = [[np.nan, 1], [1, 1], [-1, -1], [0, 0], [1e9, -1e9]]
    sub = subgoal_from_action(actions, x["position_w"], x["quat_wxyz"], spec)
    assert np.all(np.linalg.norm(sub[:, :2] - x["position_w"][:, :2], axis=1) <= spec.max_offset_m + 1e-9)
    assert np.all(sub[:, 2] == spec.subgoal.flight_height_m)
    # the environment maps actions the same way
    env.reset()
    a = torch.tensor(rng.uniform(-1.5, 1.5, (env.num_envs, 2)), dtype=torch.float32)
    pos, quat = env.low.position_w.clone().numpy(), env.low.quat_wxyz.clone().numpy()
    env.step(a)
    expected = subgoal_from_action(a.numpy(), pos, quat, spec)
    np.testing.assert_allclose(env.subgoal_w.numpy(), expected, atol=1e-4)


def test_skill_observation_reuse_equals_the_contract_build(env):
    low = env.low
    assert low.reuse_env_observation
    env.reset()
    env.step(torch.zeros(env.num_envs, 2))
    reused = low._env_obs.clone()
    built = goto_terms.compute_observation(low.terms, {"position_w": low.env.position_w, "quat_wxyz": low.env.quat_wxyz,
                                                      "linear_velocity_w": low.env.linear_velocity_w,
                                                      "angular_velocity_b": low.env.angular_velocity_b,
                                                      "subgoal_w": env.subgoal_w, "last_action": low.skill_last_action,
                                                      "position_error_integral": low.env.position_error_integral})
    np.testing.assert_allclose(reused.numpy(), built.numpy(), atol=1e-5)


def test_collision_success_and_time_limit(env):
    env.reset()
    n = env.num_envs
    ids = torch.arange(n)
    r = env.room.clone()  # (the step resets the finished envs in place: env.room itself then names their next rooms)
    # env 0: inside its first obstacle; env 1: at its goal; the rest hover in place
    box_mid = (env.pool.box_lower[r[0], 0] + env.pool.box_upper[r[0], 0]) / 2
    box_mid[2] = 1.0
    env.low.place(ids[:1], box_mid[None], torch.zeros(1))
    env.low.place(ids[1:2], env.goal_w[1:2].clone(), torch.zeros(1))
    goal_1 = env.goal_w[1].clone()
    _, rewards, dones, extras = env.step(torch.zeros(n, 2))
    e = extras["episode_end"]
    assert bool(e["collided"][0]) and not bool(e["success"][0])
    # where it ended (sim/diagnose_navigate.py reads it): inside the box, not a ground contact; the goal within tolerance
    lo, hi = env.pool.box_lower[r[0], 0], env.pool.box_upper[r[0], 0]
    end = e["end_position_w"][0]
    assert bool(((end >= lo - 0.1) & (end <= hi + 0.1)).all()) and not bool(e["ground_contact"][0])
    assert float((e["end_position_w"][1] - goal_1).norm()) < env.cfg.goal_tolerance_m
    assert bool(e["success"][1]) and not bool(e["collided"][1])
    assert rewards[0] < -5 and rewards[1] > 5
    assert dones[:2].all() and not dones[2:].any()
    # the finished envs were reset to their room's start, at rest
    starts = env.pool.start_w[env.room[:2]]
    np.testing.assert_allclose(env.low.position_w[:2, :2].numpy(), starts[:, :2].numpy(), atol=1e-5)
    # hovering in place runs into the time limit
    steps = 0
    while not bool(dones[2]) and steps < env.max_episode_length + 2:
        _, _, dones, extras = env.step(torch.zeros(n, 2))
        steps += 1
    assert bool(extras["episode_end"]["time_out"][2]) and steps == env.max_episode_length - 1


def test_proximity_in_all_directions_sees_what_the_rangers_miss(env, pool, repo_root):
    """rewards.proximity_source: the true distance to the nearest obstacle in any direction is never more than the
    rangers' (a ray ends on an obstacle), and it sees a pillar on the diagonal that the four cones miss."""
    env.reset()
    env.step(torch.zeros(env.num_envs, 2))
    r = env.room
    args = (env.pool.box_lower[r], env.pool.box_upper[r], env.pool.box_valid[r], env.pool.room_lower[r], env.pool.room_upper[r])
    env.cfg.rewards.proximity_source = "all_directions"
    try:
        every = env._proximity_distance(*args)
        env.cfg.rewards.proximity_source = "rangers"
        rangers = env._proximity_distance(*args)
    finally:
        env.cfg.rewards.proximity_source = "rangers"
    assert bool((every <= rangers + 1e-4).all())
    # env 0 facing +x, 0.3 m diagonally off its first obstacle's corner (45 degrees: between the cones)
    lo, hi = env.pool.box_lower[r[0], 0], env.pool.box_upper[r[0], 0]
    corner = torch.tensor([float(hi[0]), float(hi[1]), 1.0])
    env.low.place(torch.tensor([0]), (corner + torch.tensor([0.3, 0.3, 0.0]) / math.sqrt(2))[None], torch.zeros(1))
    env._sense()
    env.cfg.rewards.proximity_source = "all_directions"
    try:
        d = float(env._proximity_distance(*args)[0])
    finally:
        env.cfg.rewards.proximity_source = "rangers"
    assert d <= 0.3 + 1e-4
    assert float(env.true_ranges[0, :4].min()) > d + 0.1
    with pytest.raises(ConfigError, match="proximity_source"):
        bad = NavigateEnvCfg(skill_path=str(repo_root / "models/crazyflie_goto.onnx"))
        bad.rewards.proximity_source = "lidar"
        NavigateEnv(bad, num_envs=2, pool=pool)


def test_bad_actions_and_configs_are_refused(env, pool, repo_root):
    with pytest.raises(ValueError, match=r"shape \(12, 2\)"):
        env.step(torch.zeros(12, 4))
    from robot_hrl.errors import ConfigError
    with pytest.raises(ConfigError, match="adjacency"):
        NavigateEnv(NavigateEnvCfg(skill_path=str(repo_root / "models/crazyflie_goto.onnx"), max_offset_fraction=1.5),
                    num_envs=2, pool=pool)
    with pytest.raises(ConfigError, match="must divide"):
        NavigateEnv(NavigateEnvCfg(skill_path=str(repo_root / "models/crazyflie_goto.onnx"), decision_rate_hz=3.0),
                    num_envs=2, pool=pool)


def test_one_reader_for_both_kinds_and_each_refuses_the_other(env):
    from robot_hrl.contract import PolicyContract, read_contract

    assert read_contract(env.contract.to_json()) == env.contract
    assert read_contract(env.skill.contract.to_json()) == env.skill.contract
    with pytest.raises(ContractError, match="level above a skill"):
        PolicyContract.from_json(env.contract.to_json())
    with pytest.raises(ContractError, match="not valid JSON"):
        read_contract("{nope")
    data = env.contract.model_dump(mode="json")
    data["memory"]["sectors"] = 3  # the observation's range_memory_yaw says 16
    with pytest.raises(ContractError, match="range_memory_yaw"):
        NavigateContract.from_json(__import__("json").dumps(data))


def test_the_environment_remembers_what_its_rangers_hit(env):
    env.reset()
    assert torch.all(env.memory.count >= 0)
    for _ in range(3):
        obs, *_ = env.step(torch.zeros(env.num_envs, 2))
    sectors = obs["policy"][:, -env.contract.memory.sectors:]
    assert (env.memory.count > 0).any() and (sectors < env.contract.memory.range_m).any()
    np.testing.assert_allclose(sectors.numpy(), env.memory.sectors(env.low.position_w, env.low.quat_wxyz).numpy(), atol=1e-6)
