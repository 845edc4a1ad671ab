"""The crazyflie-goto env: VecEnv conformance, resets, randomization ranges, bad inputs, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from robot_hrl.contract import goto_contract
from robot_hrl.errors import ConfigError
from robot_hrl.robots import CRAZYFLIE_2X
from sim.envs import GotoEnv, GotoEnvCfg
from sim.envs.backends import CompiledStep
from sim.tasks import TASKS, make_env

PRIVILEGED_SIZE = 21
"""mass, inertia (3), k_f, k_tau, motor tau, battery V_oc and R, latency, force (3), torque (3), rotor speeds (4), battery voltage."""


def test_vecenv_conformance():
    env = make_env("crazyflie-goto", num_envs=8, seed=0)
    assert isinstance(env, VecEnv)
    assert env.num_envs == 8 and env.num_actions == 4
    assert env.max_episode_length == 500  # 5 s at 100 Hz
    assert env.episode_length_buf.shape == (8,)
    assert env.device == torch.device("cpu")
    assert env.cfg is not None
    obs = env.get_observations()
    assert isinstance(obs, TensorDict) and set(obs.keys()) == {"policy", "critic"}
    assert env.privileged_size == PRIVILEGED_SIZE
    assert obs["policy"].shape == (8, 22) and obs["critic"].shape == (8, 22 + PRIVILEGED_SIZE)
    out, rew, dones, extras = env.step(torch.zeros(8, 4))
    assert isinstance(out, TensorDict) and rew.shape == (8,) and dones.shape == (8,)
    assert rew.dtype == torch.float32
    assert extras["time_outs"].shape == (8,) and isinstance(extras["log"], dict)
    assert env.contract == goto_contract(CRAZYFLIE_2X, 100.0, 1.0)
    for name, shape in (("position_w", 3), ("quat_wxyz", 4), ("linear_velocity_w", 3), ("angular_velocity_b", 3), ("goal_w", 3)):
        assert getattr(env, name).shape == (8, shape)


def test_observations_respect_contract_clip_ranges():
    env = make_env("crazyflie-goto", num_envs=32, seed=1)
    lo, hi = torch.tensor(env._fused.obs_low), torch.tensor(env._fused.obs_high)
    for _ in range(20):
        obs, *_ = env.step(torch.rand(32, 4) * 4 - 2)
        assert (obs["policy"] >= lo).all() and (obs["policy"] <= hi).all()


def test_env_resets_finished_episodes_itself():
    cfg = GotoEnvCfg()
    cfg.command.episode_length_s = 0.1  # 10 control steps
    env = GotoEnv(cfg, num_envs=4, seed=2)
    seen_timeout = False
    for i in range(1, 31):
        _, _, dones, extras = env.step(torch.zeros(4, 4))
        if extras["time_outs"].any():
            seen_timeout = True
            assert (env.episode_length_buf[extras["time_outs"]] == 0).all()
        assert (env.episode_length_buf <= env.max_episode_length).all()
    assert seen_timeout


def test_crash_resets_with_new_start_and_goal():
    cfg = GotoEnvCfg()
    cfg.randomization.enabled = False
    env = GotoEnv(cfg, num_envs=4, seed=3)
    goals_before = env.goal_w.clone()
    for _ in range(200):
        _, _, dones, extras = env.step(-torch.ones(4, 4))  # motors off: crash
        if dones.any():
            break
    assert dones.any() and not extras["time_outs"][dones.bool()].any()
    idx = dones.bool()
    assert (env.position_w[idx, 2] >= cfg.command.spawn_height_range_m[0] - 1e-6).all()
    assert not torch.allclose(env.goal_w[idx], goals_before[idx])


def test_initial_states_follow_the_task():
    env = make_env("crazyflie-goto", num_envs=2048, seed=4, cfg={"curriculum": {"enabled": False}})
    cmd = env.cfg.command
    tilt = torch.acos((1 - 2 * (env.quat_wxyz[:, 1] ** 2 + env.quat_wxyz[:, 2] ** 2)).clamp(-1, 1))
    assert tilt.max().item() <= cmd.max_initial_tilt_rad + 1e-4 and tilt.max().item() > math.radians(25)
    speed = env.linear_velocity_w.norm(dim=-1)
    assert speed.max().item() <= cmd.max_initial_speed_mps + 1e-5 and speed.max().item() > 0.9
    assert env.angular_velocity_b.abs().max().item() <= cmd.max_initial_body_rate_radps + 1e-5
    dist = (env.goal_w - env.position_w).norm(dim=-1)
    assert dist.max().item() <= cmd.subgoal_radius_m + 1e-5
    assert (env.goal_w[:, 2] >= cmd.min_goal_height_m - 1e-6).all()


def test_training_draws_the_motor_lag_from_its_training_part_of_the_range():
    cfg = GotoEnvCfg()
    assert cfg.randomization.motor_time_constant_train_range_s == (0.05, 0.15)
    tau = GotoEnv(cfg, num_envs=4096, seed=5).params["motor_time_constant_s"]
    assert tau.min().item() >= 0.05 - 1e-6 and tau.max().item() <= 0.15 + 1e-6 and tau.min().item() < 0.055
    with pytest.raises(ConfigError, match="motor_time_constant_train_range_s"):
        GotoEnvCfg.from_dict({"randomization": {"motor_time_constant_range_s": [0.08, 0.15]}}).validate()
    cfg = GotoEnvCfg.from_dict({"randomization": {"motor_time_constant_train_range_s": None}}).validate()
    assert cfg.randomization.motor_time_constant_train_range_s is None
    assert GotoEnvCfg.from_dict(cfg.to_dict()).randomization.motor_time_constant_train_range_s is None


def test_randomization_stays_inside_configured_ranges():
    cfg = GotoEnvCfg()
    r = cfg.randomization
    r.mass_scale_range = (0.8, 1.3)
    r.motor_time_constant_range_s = (0.02, 0.15)
    r.motor_time_constant_train_range_s = None  # the whole range (evaluation)
    r.action_latency_steps_range = (1, 3)
    env = GotoEnv(cfg, num_envs=4096, seed=5)
    p = env.params

    def inside(t, lo, hi):
        return t.min().item() >= lo - 1e-6 and t.max().item() <= hi + 1e-6

    assert inside(p["mass_scale"], 0.8, 1.3) and p["mass_scale"].std() > 0.05
    assert inside(p["inertia_scale"], *r.inertia_scale_range)
    assert inside(p["thrust_coefficient_scale"], *r.thrust_coefficient_scale_range)
    assert inside(p["torque_coefficient_scale"], *r.torque_coefficient_scale_range)
    tau = p["motor_time_constant_s"]
    assert inside(tau, 0.02, 0.15) and tau.min() < 0.025 and tau.max() > 0.13
    assert inside(p["disturbance_force_w"].norm(dim=-1), 0.0, r.max_disturbance_force_n)
    assert inside(p["disturbance_torque_b"], -r.max_disturbance_torque_nm, r.max_disturbance_torque_nm)
    assert set(p["action_latency_steps"].unique().tolist()) == {1, 2, 3}
    # ranges hold after resets too
    for _ in range(30):
        env.step(-torch.ones(4096, 4))
    assert inside(env.params["mass_scale"], 0.8, 1.3)
    assert inside(env.params["motor_time_constant_s"], 0.02, 0.15)


def test_randomization_off_gives_the_nominal_robot():
    cfg = GotoEnvCfg()
    cfg.randomization.enabled = False
    env = GotoEnv(cfg, num_envs=16, seed=6)
    assert torch.all(env.params["mass_scale"] == 1) and torch.all(env.params["disturbance_force_w"] == 0)
    assert torch.allclose(env.params["motor_time_constant_s"], torch.tensor(CRAZYFLIE_2X.motor_time_constant_s))
    obs = env.get_observations()
    # no noise: policy group equals the clean terms in the critic group
    assert torch.equal(obs["policy"], obs["critic"][:, :22])


def test_curriculum_ramps_disturbance_and_penalty():
    from sim.envs.curriculum import ramp, ramp_progress

    cfg = GotoEnvCfg()
    cfg.curriculum.ramp_steps = 100
    assert ramp_progress(cfg.curriculum, 0) == 0.0 and ramp_progress(cfg.curriculum, 50) == 0.5
    assert ramp_progress(cfg.curriculum, 1000) == 1.0
    assert ramp((0.0, 1.0), 0.25) == 0.25
    cfg.curriculum.enabled = False
    assert ramp_progress(cfg.curriculum, 0) == 1.0
    env = GotoEnv(GotoEnvCfg(), num_envs=4, seed=7)
    _, _, _, extras = env.step(torch.zeros(4, 4))
    assert extras["log"]["/curriculum/progress"] < 0.01


def test_same_seed_same_trajectory():
    def rollout(seed):
        env = make_env("crazyflie-goto", num_envs=16, seed=seed)
        gen = torch.Generator().manual_seed(0)
        out = []
        for _ in range(30):
            obs, rew, dones, _ = env.step(torch.rand(16, 4, generator=gen) * 2 - 1)
            out.append(torch.cat((obs["critic"], rew[:, None]), dim=-1))
        return torch.stack(out)

    a, b, c = rollout(11), rollout(11), rollout(12)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


# ---- bad inputs ---------------------------------------------------------------------------
def test_unknown_task_lists_tasks():
    with pytest.raises(ConfigError, match="crazyflie-goto"):
        make_env("crazyflie-flip", num_envs=1)


@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_bad_num_envs(bad):
    with pytest.raises(ConfigError, match="num_envs"):
        make_env("crazyflie-goto", num_envs=bad)


def test_bad_device():
    with pytest.raises(ConfigError, match="device"):
        make_env("crazyflie-goto", num_envs=1, device="nosuchdevice")


def test_wrong_action_shape_says_expected_shape():
    env = make_env("crazyflie-goto", num_envs=3, seed=0)
    with pytest.raises(ValueError, match=r"\(3, 4\)"):
        env.step(torch.zeros(3, 2))
    with pytest.raises(ValueError, match="numeric"):
        env.step("full throttle")


def test_any_finite_or_nonfinite_actions_are_accepted():
    env = make_env("crazyflie-goto", num_envs=1, seed=0)
    env.step(np.array([0.1, 0.0, 0.0, 0.0]))  # numpy, unbatched for a single env
    _, _, dones, _ = env.step([[float("nan"), float("inf"), -float("inf"), 5.0]])
    # NaN -> 0 (mid-range), +inf -> 1, -inf -> -1, then the contract's clip: the step's last action
    assert not dones[0] and torch.equal(env.last_action, torch.tensor([[0.0, 1.0, -1.0, 1.0]]))
    assert torch.isfinite(env.get_observations()["critic"]).all()


@pytest.mark.parametrize(
    "cfg, match",
    [
        ({"physics": {"physics_rate_hz": 150.0}}, "integer multiple"),
        ({"physics": {"nosuchkey": 1}}, "unknown key"),
        ({"randomization": {"mass_scale_range": [1.2, 0.8]}}, "mass_scale_range"),
        ({"randomization": {"action_latency_steps_range": [0, 1.5]}}, "action_latency"),
        ({"randomization": {"mass_scale_range": 1.0}}, "list of 2"),
        ({"command": {"subgoal_radius_m": 0.0}}, "subgoal_radius_m"),
        ({"curriculum": {"ramp_steps": -1}}, "ramp_steps"),
    ],
)
def test_bad_config_is_refused_with_a_clear_error(cfg, match):
    with pytest.raises(ConfigError, match=match):
        make_env("crazyflie-goto", num_envs=1, cfg=cfg)


def test_cfg_dict_round_trip():
    cfg = GotoEnvCfg()
    cfg.randomization.enabled = False
    cfg.command.subgoal_radius_m = 0.5
    again = GotoEnvCfg.from_dict(cfg.to_dict())
    assert again == cfg
    env = make_env("crazyflie-goto", num_envs=1, cfg=cfg.to_dict())
    assert env.contract.subgoal_radius_m == 0.5
    assert "crazyflie-goto" in TASKS


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_state_stays_writable_after_stepping_in_inference_mode(compiled):
    # rsl_rl and sim/evaluation.py step the env inside torch.inference_mode(); the state must still
    # take in-place writes outside it afterwards (reset(), safety_eval's env.position_w[ids] = ...)
    cfg = {"physics": {"compile": compiled}}
    env = make_env("crazyflie-goto", num_envs=4, cfg=cfg, seed=0)
    if compiled:  # the compile backend's function, without paying for the compilation
        env.backend = CompiledStep(env._fused, env.device, compile=False)
    with torch.inference_mode():
        for _ in range(3):
            env.step(torch.zeros(4, 4))
    env.reset()
    env.position_w[torch.tensor([1])] = torch.tensor([[0.5, 0.5, 1.0]])
    assert torch.allclose(env.position_w[1], torch.tensor([0.5, 0.5, 1.0]))
    obs, rewards, dones, extras = env.step(torch.zeros(4, 4))
    assert torch.isfinite(obs["policy"]).all()
