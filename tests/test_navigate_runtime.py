"""The shipped navigate level (models/crazyflie_navigate.onnx) at run time: its contract names the shipped goto
skill by hash and is refused over any other skill or robot; the runtime navigator (robot_hrl.planning.learned,
what the PyBullet evaluation and the planner node run) decides subgoals inside the adjacency radius and
feeds its range memory; its observation equals the batched simulator's on the same state."""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
import onnx
import pytest
import torch

from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, NavigateContract, contract_sha256
from robot_hrl.errors import ContractError
from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.planning.learned import LearnedNavigator
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.runtime import read_model_metadata


@pytest.fixture(scope="module")
def paths(repo_root):
    level, skill = repo_root / "models/crazyflie_navigate.onnx", repo_root / "models/crazyflie_goto.onnx"
    assert level.is_file(), "the navigate level is shipped in models/ (python sim/train_navigate.py --export ...)"
    return level, skill


def test_the_shipped_level_names_the_shipped_skill(paths):
    level, skill = paths
    contract = NavigateContract.from_json(read_model_metadata(level)[NAVIGATE_METADATA_KEY])
    digest = hashlib.sha256(skill.read_bytes()).hexdigest()
    assert contract.lower_skill.skill == "goto" and contract.lower_skill.model_sha256 == digest
    assert skill.with_name(skill.name + ".sha256").read_text().split()[0] == digest
    assert level.with_name(level.name + ".sha256").read_text().split()[0] == hashlib.sha256(level.read_bytes()).hexdigest()
    assert contract.memory is not None and contract.max_offset_m <= contract.lower_skill.subgoal_radius_m


def test_refused_over_another_skill_or_robot(paths, tmp_path):
    level, skill = paths
    LearnedNavigator.load(level, CRAZYFLIE_2X, skill)
    model = onnx.load(skill)
    init = model.graph.initializer[1]
    arr = onnx.numpy_helper.to_array(init).copy() + 0.01          # another goto model: same contract, other weights
    init.CopyFrom(onnx.numpy_helper.from_array(arr, init.name))
    onnx.save(model, tmp_path / "other_goto.onnx")
    with pytest.raises(ContractError, match="another goto model"):
        LearnedNavigator.load(level, CRAZYFLIE_2X, tmp_path / "other_goto.onnx")

    class FewerRangers:                                           # the same robot with only a Multi-ranger deck
        name = CRAZYFLIE_2X.name
        params_sha256 = CRAZYFLIE_2X.params_sha256
        range_sensors = tuple(s for s in __import__("robot_hrl.sensing", fromlist=["x"]).robot_range_sensors(CRAZYFLIE_2X)
                              if s.name != "down")

    with pytest.raises(ContractError, match="range sensors"):
        LearnedNavigator.load(level, FewerRangers(), skill)


def test_decisions_stay_within_the_adjacency_radius_and_the_memory_fills(paths):
    level, skill = paths
    nav = LearnedNavigator.load(level, CRAZYFLIE_2X, skill)
    rng = np.random.default_rng(3)
    r_max = nav.contract.max_offset_m
    for _ in range(40):
        p = np.array([*rng.uniform(0, 10, 2), 1.0])
        q = quat_from_euler_rpy(0.0, 0.0, rng.uniform(-math.pi, math.pi))
        ranges = rng.uniform(0.1, 5.0, 6)
        nav.sense(p, q, ranges)
        sub = nav.decide(p, q, rng.normal(0, 0.5, 3), np.array([*rng.uniform(0, 10, 2), 1.0]))
        assert np.linalg.norm(sub[:2] - p[:2]) <= r_max + 1e-9 and sub[2] == nav.contract.subgoal.flight_height_m
    assert nav.memory.count[0] > 0 and nav.decisions == 40
    nav.reset()
    assert nav.memory.count[0] == 0 and nav.last_subgoal_w is None


def test_the_runtime_observation_equals_the_batched_simulators(paths):
    """The same state, ranges and memory in both: the navigator's numpy observation is the env's torch one."""
    from robot_hrl.world.rooms import generate_room
    from sim.envs.nav_rooms import RoomPool
    from sim.envs.navigate_env import NavigateEnv
    from sim.envs.navigate_env_cfg import NavigateEnvCfg

    level, skill = paths
    nav = LearnedNavigator.load(level, CRAZYFLIE_2X, skill)
    cfg = NavigateEnvCfg(skill_path=str(skill), randomize=False, range_noise=False, episode_length_s=5.0)
    cfg.curriculum.enabled = False
    env = NavigateEnv(cfg, num_envs=4, seed=0, pool=RoomPool.from_rooms([generate_room("dense", s) for s in range(2)]))
    assert env.contract.observations == nav.contract.observations and env.contract.memory == nav.contract.memory
    obs = env.reset()
    for _ in range(3):
        obs, *_ = env.step(torch.tensor(np.random.default_rng(0).uniform(-1, 1, (4, 2)), dtype=torch.float32))
    i = 0
    mem = env.memory
    nav.memory.points_w[0] = mem.points_w[i].double().numpy()
    nav.memory.count[0] = int(mem.count[i])
    nav.ranges_m = env.ranges[i].double().numpy()
    nav.last_subgoal_w = env.subgoal_w[i].double().numpy()
    low = env.low
    ours = nav.observation(low.position_w[i].double().numpy(), low.quat_wxyz[i].double().numpy(),
                           low.linear_velocity_w[i].double().numpy(), env.goal_w[i].double().numpy())
    np.testing.assert_allclose(ours, obs["policy"][i].numpy(), atol=2e-4)
    assert dataclasses.asdict(cfg.memory)["sectors"] == nav.contract.memory.sectors
    assert contract_sha256(env.skill.contract) == nav.contract.lower_skill.contract_sha256
