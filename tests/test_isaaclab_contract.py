"""A policy contract generated from a live Isaac Lab task (the manager-based Isaac-Cartpole, its joint_vel_rel term
given a clip, a scale and a history through the env cfg overrides), exported to ONNX with it, and run by the
onboard runtime: OnnxPolicy builds the robot the contract describes, rebuilds the observation from the raw term
values (clip, scale, history) and must give exactly what Isaac Lab's own observation manager gave, step after
step across a reset; observations that do not fit are refused with a message that names the term."""

from __future__ import annotations

import numpy as np
import pytest

from tests.isaaclab_helpers import requires_isaaclab, use_stand_in_assets

pytestmark = [pytest.mark.isaaclab, requires_isaaclab]
use_stand_in_assets()

TASK = "Isaac-Cartpole"
NUM_ENVS = 4
OVERRIDES = {
    "episode_length_s": 0.5,
    "observations": {"policy": {"joint_vel_rel": {"clip": (-1.5, 1.5), "scale": 0.5, "history_length": 3}}},
}


@pytest.fixture(scope="module")
def env():
    from sim.tasks import make_env

    wrapped = make_env(TASK, num_envs=NUM_ENVS, device="cpu", cfg=OVERRIDES, seed=2)
    yield wrapped
    wrapped.close()


@pytest.fixture(scope="module")
def exported(env, tmp_path_factory):
    import copy

    from rsl_rl.runners import OnPolicyRunner

    from deploy.onnx_export import export_policy
    from sim.tasks import default_agent_cfg

    runner = OnPolicyRunner(env, copy.deepcopy(default_agent_cfg(TASK, "cpu")), log_dir=None, device="cpu")
    runner.alg.eval_mode()
    out = tmp_path_factory.mktemp("contract") / "cartpole.onnx"
    export_policy(runner.alg.get_policy(), env.contract, out)
    return out


def test_the_contract_is_read_from_the_env(env):
    c = env.contract
    assert c.skill == TASK and c.control_rate_hz == pytest.approx(60.0)  # 120 Hz physics, decimation 2
    assert c.robot.kind == "articulation" and c.robot.name == "cartpole"
    assert c.robot.joints == ("slider_to_cart", "cart_to_pole") and c.robot.default_joint_positions == (0.0, 0.0)
    pos, vel = c.observations
    assert (pos.name, pos.size, pos.history_length, pos.scale) == ("joint_pos_rel", 2, None, None)
    assert pos.clip[1] > 3e38 and pos.joints == ("slider_to_cart", "cart_to_pole")
    assert pos.source == "isaaclab.envs.mdp.observations:joint_pos_rel"
    assert (vel.name, vel.size, vel.frame_size, vel.history_length) == ("joint_vel_rel", 6, 2, 3)
    assert vel.clip == (-1.5, 1.5) and vel.scale == 0.5
    assert c.observation_size == env.get_observations()["policy"].shape[1] == 8
    # CartpolePPORunnerCfg (agents/rsl_rl_ppo_cfg.py) sets no clip_actions: the graph's outputs are not clipped
    assert c.action.mode == "joint_effort" and c.action.output_clip is None
    (term,) = c.action.terms
    assert (term.joint, term.low, term.high, term.offset, term.scale) == ("slider_to_cart", -100.0, 100.0, 0.0, 100.0)


def _raw_terms(env, i: int) -> dict:
    """Each policy term's raw value for env ``i``, computed by the term's own function (no clip, scale or history)."""
    om = env.unwrapped.observation_manager
    return {name: cfg.func(env.unwrapped, **cfg.params)[i].cpu().numpy().astype(np.float64)
            for name, cfg in zip(om.active_terms["policy"], om._group_obs_term_cfgs["policy"])}


def test_the_runtime_rebuilds_isaac_labs_observations_and_acts_as_the_graph(env, exported):
    import torch

    from robot_hrl.robots.articulation import ArticulationRobot
    from robot_hrl.runtime import OnnxPolicy

    policy = OnnxPolicy(exported, provider="cpu")
    assert isinstance(policy.robot, ArticulationRobot) and policy.raw_terms
    obs, _ = env.reset()
    policy.reset()
    generator = torch.Generator().manual_seed(0)
    resets = 0
    for _ in range(int(1.5 * env.max_episode_length)):
        mine = policy.observe_terms(_raw_terms(env, 0))
        np.testing.assert_allclose(mine, obs["policy"][0].numpy(), rtol=0, atol=1e-6)
        action = policy.infer(mine)
        np.testing.assert_allclose(action, policy.infer(obs["policy"][0].numpy()), rtol=0, atol=1e-6)
        actions = 0.5 * torch.randn(NUM_ENVS, 1, generator=generator)  # pushes that topple the poles
        obs, _, dones, _ = env.step(actions)
        if bool(dones[0]):
            policy.reset()  # Isaac Lab resets the term's history with the episode; the runtime with its reset()
            resets += 1
    assert resets >= 1
    command = policy.to_command(np.array([0.25]))
    assert command.tolist() == [25.0]  # offset + scale * a on the slider's effort


def test_observations_that_do_not_fit_are_refused(env, exported):
    from robot_hrl.errors import ContractError, ObservationError
    from robot_hrl.runtime import OnnxPolicy

    policy = OnnxPolicy(exported, provider="cpu")
    good = {"joint_pos_rel": np.zeros(2), "joint_vel_rel": np.zeros(2)}
    assert policy.act_terms(good).shape == (1,)
    with pytest.raises(ObservationError, match=r"missing: \['joint_vel_rel'\]"):
        policy.act_terms({"joint_pos_rel": np.zeros(2)})
    with pytest.raises(ObservationError, match=r"not in its contract: \['joint_effort'\]"):
        policy.act_terms({**good, "joint_effort": np.zeros(1)})
    with pytest.raises(ObservationError, match=r"'joint_vel_rel' has shape \(6,\); the contract says \(2,\)"):
        policy.act_terms({**good, "joint_vel_rel": np.zeros(6)})
    with pytest.raises(ObservationError, match="'joint_pos_rel' is not finite"):
        policy.act_terms({**good, "joint_pos_rel": np.array([0.0, np.nan])})
    with pytest.raises(ObservationError, match=r"this model takes \[\.\.\., 8\]"):
        policy.infer(np.zeros(7, dtype=np.float32))
    with pytest.raises(ObservationError, match="act_terms"):
        policy.step(None, np.zeros(3))
    with pytest.raises(ContractError, match="model trained for 'cartpole', started for 'crazyflie_2x'"):
        OnnxPolicy(exported, robot="crazyflie_2x", provider="cpu")
