"""A change of the actuator chain is one edit: the torch step, the C step and PyBullet pick it up.

tests/battery_chain.py is the Crazyflie chain plus a battery: a new state row (the voltage, sagging
under load), a new randomized parameter (the internal resistance) and new chain steps (battery
compensation, a voltage-limited top speed). Registered for the Crazyflie (``CHAINS``), it runs in
the eager torch step, the generated C step (which must agree with it) and PyBullet, and the critic
sees the new row and parameter, with no edit of any of them.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import battery_chain
from robot_hrl.contract import hover_actions
from robot_hrl.robots.quadrotor import quadrotor_action_spec
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.robots.actuator_chain import CHAINS
from sim.envs import GotoEnv, GotoEnvCfg
from sim.envs.native.codegen import step_tables_header
from sim_step_helpers import assert_same, rollout


@pytest.fixture(autouse=True)
def _battery(monkeypatch, tmp_path_factory):
    monkeypatch.setitem(CHAINS, CRAZYFLIE_2X.name, battery_chain)
    monkeypatch.setenv("ROBOT_HRL_CACHE", str(tmp_path_factory.getbasetemp() / "robot_hrl_cache"))


def _hover(n: int) -> torch.Tensor:
    return torch.tensor(hover_actions(quadrotor_action_spec(CRAZYFLIE_2X), CRAZYFLIE_2X), dtype=torch.float32).expand(n, 4)


def test_the_torch_step_stores_draws_and_shows_the_new_row_and_parameter():
    env = GotoEnv(GotoEnvCfg(), num_envs=64, seed=0)
    L = env.layout
    assert L.rows("pack_voltage_v") == slice(18, 19) and L.rows("goal_w").start == 19
    assert "internal_resistance_scale" in env.params and L.chain_params[-1] == "internal_resistance_scale"
    assert env.privileged_size == 23 and env.get_observations()["critic"].shape == (64, 22 + 23)
    scale = env.params["internal_resistance_scale"]
    assert scale.min() >= 0.9 - 1e-6 and scale.max() <= 1.1 + 1e-6 and scale.std() > 0.02
    voltage = env._state[L.rows("pack_voltage_v")]
    assert torch.all(voltage == 4.2)  # a full battery at every reset
    for _ in range(20):
        obs, *_ = env.step(_hover(64))
    voltage = env._state[L.rows("pack_voltage_v")][0]
    assert torch.all(voltage < 4.15) and torch.all(voltage > 3.8)  # it sags under the hover current (about 4 A)
    # the critic's last column is the voltage over the open-circuit voltage
    alive = env.episode_length_buf > 0
    assert torch.allclose(obs["critic"][alive, -1], voltage[alive] / 4.2)


def test_the_generated_c_step_runs_the_new_chain_as_the_torch_step_does():
    text = step_tables_header(GotoEnv(GotoEnvCfg(), num_envs=2, seed=0)._fused)
    assert "ROW_PACK_VOLTAGE_V = 18" in text and "P_INTERNAL_RESISTANCE_SCALE" in text and "CHAIN_STATE_ROWS = 6" in text
    assert "tests/battery_chain" not in text and "battery_chain.substep" in text
    assert_same(rollout("eager"), rollout("native"))


def test_pybullet_runs_the_new_chain():
    from sim.pybullet import PyBulletQuadrotorSim

    with PyBulletQuadrotorSim() as sim:
        sim.reset((0.0, 0.0, 1.0))
        assert sim.chain_state["pack_voltage_v"] == 4.2
        for _ in range(20):
            state = sim.step([CRAZYFLIE_2X.weight_n, 0.0, 0.0, 0.0])
        assert 3.8 < sim.chain_state["pack_voltage_v"] < 4.15
        # the firmware compensates the sag: the command rises above the nominal hover speed, and it still hovers
        assert np.all(sim.motor_rpm_command > CRAZYFLIE_2X.hover_rpm) and abs(state.position_w[2] - 1.0) < 0.05
