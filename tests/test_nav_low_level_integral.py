"""The navigation environment's low level (sim/envs/nav_low_level.py) flying a go-to skill that observes the
position error's integral: the goto step keeps the integral as a state row, the skill's observation carries it,
and a subgoal move restarts it where it moved only, as the runtime's ErrorIntegrator does (replayed here on the
simulator's own positions and subgoals)."""

from __future__ import annotations

import numpy as np
import torch

from robot_hrl.contract import GOTO_ERROR_INTEGRAL, goto_contract
from robot_hrl.contract.error_integral import ErrorIntegrator
from robot_hrl.robots import CRAZYFLIE_2X
from sim.envs.frozen_skill import FrozenSkill
from sim.envs.nav_low_level import SkillDrivenQuadrotor


def test_a_skill_with_the_integral_flies_and_restarts_it_per_subgoal(tmp_path):
    from deploy.crazyflie.example_model import build_mlp_onnx

    contract = goto_contract(CRAZYFLIE_2X, error_integral=GOTO_ERROR_INTEGRAL)
    skill = FrozenSkill(build_mlp_onnx(tmp_path / "skill.onnx", contract=contract))
    low = SkillDrivenQuadrotor(skill, num_envs=4, seed=3, randomize=False)
    assert low.env.contract.observations[-1].integral == GOTO_ERROR_INTEGRAL and low.reuse_env_observation
    ids = torch.arange(4)
    low.place(ids, torch.tensor([[0.0, 0.0, 1.0]] * 4), torch.zeros(4))
    integrators = [ErrorIntegrator(GOTO_ERROR_INTEGRAL, contract.control_rate_hz) for _ in range(4)]
    # env 0 far (the gate keeps its integral at zero), the others within GOTO_ERROR_INTEGRAL.active_radius_m (integrated)
    subgoal = torch.tensor([[0.3, 0.0, 1.2], [0.0, 0.06, 1.0], [-0.05, 0.03, 0.96], [0.04, 0.04, 1.05]])
    low.new_subgoal()
    for k in range(40):
        if k == 20:  # env 0 gets a new subgoal; the others keep theirs (re-sent unchanged)
            subgoal = subgoal.clone()
            subgoal[0] = torch.tensor([0.5, 0.2, 1.3])
            low.new_subgoal()
        pos, quat = low.env.position_w.double().numpy().copy(), low.env.quat_wxyz.double().numpy().copy()
        expected = np.array([integ.update(pos[e], quat[e], subgoal[e].double().numpy()) for e, integ in enumerate(integrators)])
        obs = low.skill_observation(subgoal) if low._env_obs is None else low._env_obs
        if low._env_obs is None:  # the contract build: the integral row after the subgoal restart
            moved = (subgoal - low.env.goal_w).abs().amax(dim=-1) > GOTO_ERROR_INTEGRAL.subgoal_change_m
            row = torch.where(moved[:, None], 0.0, low.env.position_error_integral)
        else:
            row = obs[:, -3:]
        np.testing.assert_allclose(row.double().numpy(), expected, atol=2e-5, err_msg=f"step {k}")
        crashed = low.step(subgoal)
        assert not crashed.any()
    assert np.abs(expected[1:]).max() > 1e-3  # the integral ran on
    assert np.all(np.abs(expected[0]) < np.abs(expected[1:]).max())  # env 0's new subgoal is far: barely anything


def test_a_skill_flies_with_its_own_integral_parameters(tmp_path):
    """A skill exported with other integral parameters (here without the gate) gets them in the simulator's step: the
    env's contract carries the skill's ErrorIntegral, not GOTO_ERROR_INTEGRAL."""
    from deploy.crazyflie.example_model import build_mlp_onnx

    other = GOTO_ERROR_INTEGRAL.model_copy(update={"active_radius_m": None, "time_constant_s": 1.0})
    skill = FrozenSkill(build_mlp_onnx(tmp_path / "skill.onnx", contract=goto_contract(CRAZYFLIE_2X, error_integral=other)))
    low = SkillDrivenQuadrotor(skill, num_envs=2, seed=0, randomize=False)
    assert low.env.contract.observations[-1].integral == other
    assert low.env._fused.step.integral_active_radius_sq_m2 is None
