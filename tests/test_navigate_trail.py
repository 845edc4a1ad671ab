"""The level's trail (the ``trail_yaw`` term: its own earlier positions, nearest per sector): the numpy twin (the
planner node's ``LearnedNavigator``) and the torch twin (the batched environment's) agree step by step; the contract
carries it; a level trained without it warm-starts a run with it, acting exactly as before; a level that keeps one
fine-tunes with its own (``--init-onnx``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, NavigateContract, TrailSpec
from robot_hrl.errors import ContractError
from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.planning.learned import LearnedNavigator
from robot_hrl.runtime import read_model_metadata
from robot_hrl.sensing.memory import RangeMemory
from robot_hrl.world.rooms import generate_room
from sim.envs.nav_rooms import RoomPool
from sim.envs.navigate_env import NavigateEnv
from sim.envs.navigate_env_cfg import NavigateEnvCfg
from sim.envs.terms.navigate_memory import TorchRangeMemory

from test_navigate_memory import _assert_sectors_agree, reset_some_and_compare


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numpy_and_torch_trails_agree_step_by_step(seed):
    """Random walks of 10 robots, a small ring (it wraps), some robots only, resets at random moments."""
    rng = np.random.default_rng(seed)
    n = 10
    spec = TrailSpec(capacity=int(rng.integers(3, 12)), min_spacing_m=float(rng.uniform(0.0, 0.5)),
                     sectors=int(rng.integers(4, 17)), range_m=float(rng.uniform(1.0, 4.0)))
    ours = RangeMemory.for_positions(spec, n)
    theirs = TorchRangeMemory.for_positions(spec, n, dtype=torch.float64)
    pos = rng.uniform(0.0, 8.0, (n, 3))
    for step in range(50):
        pos += rng.normal(0.0, 0.3, (n, 3))
        quat = np.array([quat_from_euler_rpy(0.0, 0.0, y) for y in rng.uniform(-math.pi, math.pi, n)])
        _assert_sectors_agree(ours.sectors(pos, quat), theirs.sectors(torch.from_numpy(pos), torch.from_numpy(quat)).numpy(),
                              f"step {step}")
        if rng.random() < 0.3:
            ids = np.sort(rng.choice(n, int(rng.integers(1, n)), replace=False))
            sub = RangeMemory.for_positions(spec, len(ids))
            sub.points_w[:], sub.count[:] = ours.points_w[ids], ours.count[ids]
            sub.add_points_w(pos[ids, None, :2], np.ones((len(ids), 1), dtype=bool))
            ours.points_w[ids], ours.count[ids] = sub.points_w, sub.count
            theirs.add_points_w(torch.from_numpy(pos[ids]), torch.from_numpy(ids))
        else:
            ours.add_points_w(pos[:, None, :2], np.ones((n, 1), dtype=bool))
            theirs.add_points_w(torch.from_numpy(pos))
        reset_some_and_compare(rng, ours, theirs, n, step)
    assert ours.count.max() > spec.capacity  # the ring wrapped


@pytest.fixture(scope="module")
def trail_env(repo_root):
    pool = RoomPool.from_rooms([generate_room(d, s) for d in ("medium", "dense") for s in range(2)])
    cfg = NavigateEnvCfg(skill_path=str(repo_root / "models/crazyflie_goto.onnx"), randomize=False, range_noise=False,
                         episode_length_s=6.0)
    cfg.trail.enabled = True
    return NavigateEnv(cfg, num_envs=4, seed=0, pool=pool)


def test_the_runtime_level_sees_the_trail_the_environment_gives(trail_env):
    """``LearnedNavigator`` fed the environment's states at each decision observes the environment's own trail sectors
    (the trail after the observation in both), decision by decision, across episode ends (only the trail's
    terms are compared: the navigator's range memory is fed here at the decisions only)."""
    env = trail_env
    contract = env.contract
    assert contract.observations[-1].name == "trail_yaw" and contract.trail.sectors == env.cfg.trail.sectors
    navs = [LearnedNavigator(contract, env.sensors, lambda obs: np.zeros((1, 2), np.float32)) for _ in range(env.num_envs)]
    obs = env.reset()["policy"]
    k = contract.trail.sectors
    rng = np.random.default_rng(3)
    compared = 0
    for step in range(10):
        low = env.low
        for i, nav in enumerate(navs):
            nav.sense(low.position_w[i].double().numpy(), low.quat_wxyz[i].double().numpy(), env.ranges[i].double().numpy())
            got = nav.observation(low.position_w[i].double().numpy(), low.quat_wxyz[i].double().numpy(),
                                  low.linear_velocity_w[i].double().numpy(), env.goal_w[i].double().numpy())
            np.testing.assert_allclose(got[-k:], obs[i, -k:].numpy(), atol=2e-4, err_msg=f"decision {step}, robot {i}")
            nav.trail.add_points_w(low.position_w[i].double().numpy()[None, None, :2], np.ones((1, 1), dtype=bool))
            compared += 1
        out, _, dones, _ = env.step(torch.as_tensor(rng.uniform(-1, 1, (env.num_envs, 2)), dtype=torch.float32))
        for i in torch.nonzero(dones).squeeze(-1).tolist():
            navs[i].reset()  # the environment started a new episode there: a new task for the runtime level
        obs = out["policy"]
    assert compared == 10 * env.num_envs
    assert (obs[:, -k:] < contract.trail.range_m).any(dim=-1).sum() >= env.num_envs - 1, \
        "a robot a few decisions into its episode has been somewhere near"


def test_the_contract_carries_the_trail_and_refuses_a_term_without_it(trail_env):
    contract = trail_env.contract
    again = NavigateContract.from_json(contract.to_json())
    assert again == contract and again.trail == contract.trail
    broken = contract.model_dump()
    broken["trail"] = None
    with pytest.raises(ValueError, match="trail_yaw needs the contract's trail section"):
        NavigateContract.model_validate(broken)
    with pytest.raises(ContractError, match="malformed"):
        NavigateContract.from_json(json.dumps(broken))


def test_a_level_without_the_trail_warm_starts_a_run_with_it(trail_env, tmp_path):
    """A level without the trail starts a trail run: the trail's inputs at zero weight, so the actor acts as the file
    does (onnxruntime on the observation without the trail), whatever the trail reads."""
    import onnxruntime as ort
    from rsl_rl.runners import OnPolicyRunner

    from sim.agents.ppo_navigate import ppo_navigate_cfg
    from sim.agents.warm_start import warm_start_navigate

    env = trail_env
    # a level without the trail: an untrained actor of a run without it, exported as any run is
    plain_cfg = NavigateEnvCfg(skill_path=env.cfg.skill_path, randomize=False)
    plain = NavigateEnv(plain_cfg, num_envs=2, pool=env.pool)
    model = _export_untrained_level(plain, tmp_path / "plain", seed=5)
    assert NavigateContract.from_json(read_model_metadata(model)[NAVIGATE_METADATA_KEY]).trail is None
    runner = OnPolicyRunner(env, ppo_navigate_cfg(), log_dir=None, device="cpu")
    warm_start_navigate(model, runner.alg.actor, env.contract, std=0.15)
    obs = env.reset()
    for _ in range(3):
        obs, *_ = env.step(torch.zeros(env.num_envs, 2))
    x = obs["policy"].clone()
    x[:, -env.contract.trail.sectors:] = torch.rand(env.num_envs, env.contract.trail.sectors) * env.contract.trail.range_m
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    ref = session.run(None, {session.get_inputs()[0].name: x[:, :-env.contract.trail.sectors].numpy()})[0]
    with torch.no_grad():
        got = runner.alg.actor(obs.__class__({"policy": x, "critic": obs["critic"]}, batch_size=obs.batch_size))
    np.testing.assert_allclose(got.clamp(-1.0, 1.0).numpy(), ref, atol=2e-6)


def test_a_malformed_trail_is_refused_with_its_fix(trail_env):
    """A trail whose ring holds nothing, or a contract keeping a trail the level does not observe (which the onboard C
    would keep for nothing), is refused with what to do."""
    from deploy.crazyflie.c_navigate import check_navigate_contract
    from deploy.crazyflie.errors import CodegenError

    data = json.loads(trail_env.contract.to_json())
    data["trail"]["capacity"] = 0
    with pytest.raises(ContractError, match=r"(?s)malformed.*trail.capacity.*greater than 0.*re-export the model"):
        NavigateContract.from_json(json.dumps(data))
    data = json.loads(trail_env.contract.to_json())
    data["observations"] = [t for t in data["observations"] if t["name"] != "trail_yaw"]
    unused = NavigateContract.from_json(json.dumps(data))
    with pytest.raises(CodegenError, match="keeps a trail but observes no trail_yaw term; re-export the level"):
        check_navigate_contract(unused, trail_env.sensors)


def test_init_onnx_of_a_trail_level_fine_tunes_with_its_own_trail(repo_root, tmp_path):
    """``sim/train_navigate.py --init-onnx`` of a level that keeps a trail runs with that trail (its own ring, spacing,
    sectors and range, not the defaults), without ``--trail``: the run observes what the file does, and its export
    names the same trail."""
    import subprocess
    import sys

    pool = RoomPool.from_rooms([generate_room("dense", 0)])
    cfg = NavigateEnvCfg(skill_path=str(repo_root / "models/crazyflie_goto.onnx"), randomize=False)
    cfg.trail.enabled, cfg.trail.capacity, cfg.trail.min_spacing_m, cfg.trail.range_m = True, 24, 0.45, 2.5
    level = _export_untrained_level(NavigateEnv(cfg, num_envs=2, pool=pool), tmp_path / "src", seed=3)
    own = NavigateContract.from_json(read_model_metadata(level)[NAVIGATE_METADATA_KEY]).trail
    assert own == TrailSpec(capacity=24, min_spacing_m=0.45, sectors=8, range_m=2.5)

    run = tmp_path / "run"
    out = subprocess.run([sys.executable, "sim/train_navigate.py", "--run-dir", str(run), "--num-envs", "4",
                          "--init-onnx", str(level), "--max-iterations", "1", "--dagger-iterations", "0",
                          "--rooms-per-density", "1", "--threads", "1", "--start-level", "2",
                          "--export", str(tmp_path / "tuned.onnx")],
                         capture_output=True, text=True, cwd=repo_root)
    assert out.returncode == 0, out.stderr[-3000:]
    assert NavigateContract.from_json((run / "navigate_contract.json").read_text()).trail == own
    assert json.loads((run / "navigate_env_cfg.json").read_text())["trail"] == {
        "enabled": True, "capacity": 24, "min_spacing_m": 0.45, "sectors": 8, "range_m": 2.5}
    tuned = NavigateContract.from_json(read_model_metadata(tmp_path / "tuned.onnx")[NAVIGATE_METADATA_KEY])
    assert tuned.trail == own and tuned.observations[-1].name == "trail_yaw"


def _export_untrained_level(env, run, seed: int):
    """An untrained actor of a run over ``env`` (its contract), saved and exported as any run is: ``run``.onnx."""
    from rsl_rl.runners import OnPolicyRunner

    from deploy.onnx_export.navigate import export_navigate
    from sim.agents.ppo_navigate import ppo_navigate_cfg

    run.mkdir()
    (run / "navigate_contract.json").write_text(env.contract.to_json())
    (run / "train_cfg.json").write_text(json.dumps(ppo_navigate_cfg()))
    torch.manual_seed(seed)
    OnPolicyRunner(env, ppo_navigate_cfg(), log_dir=None, device="cpu").save(str(run / "model_0.pt"))
    return export_navigate(run, run.with_suffix(".onnx"))
