"""Isaac Lab tasks through sim/isaaclab_adapter.py: a clear error without Isaac Lab, a real run with it."""

from __future__ import annotations

import importlib.util

import pytest

from robot_hrl.errors import ConfigError
from sim.isaaclab_adapter import isaaclab_available
from sim.tasks import make_env

HAVE_ISAACLAB = isaaclab_available()


@pytest.mark.skipif(HAVE_ISAACLAB, reason="Isaac Lab is installed")
def test_isaac_task_without_isaaclab_says_what_to_install():
    with pytest.raises(ConfigError) as info:
        make_env("Isaac-Velocity-Flat-Anymal-D-v0", num_envs=4)
    text = str(info.value)
    assert "Isaac Lab is not installed" in text and "pip install" in text and "crazyflie-goto" in text


@pytest.mark.skipif(HAVE_ISAACLAB, reason="Isaac Lab is installed")
def test_train_cli_reports_missing_isaaclab(tmp_path, capsys):
    from sim.train import main

    rc = main(["--task", "Isaac-Cartpole-v0", "--num-envs", "4", "--max-iterations", "1", "--run-dir", str(tmp_path / "run")])
    assert rc == 2
    assert "Isaac Lab is not installed" in capsys.readouterr().err


@pytest.mark.skipif(not HAVE_ISAACLAB or importlib.util.find_spec("torch") is None, reason="Isaac Lab is not installed")
def test_real_isaaclab_task_is_an_rsl_rl_vecenv():  # pragma: no cover - needs Isaac Sim
    import torch
    from rsl_rl.env import VecEnv

    env = make_env("Isaac-Cartpole-v0", num_envs=4, device="cuda:0" if torch.cuda.is_available() else "cpu")
    assert isinstance(env, VecEnv)
    obs = env.get_observations()
    assert "policy" in obs.keys()
    obs, rew, dones, extras = env.step(torch.zeros(env.num_envs, env.num_actions, device=env.device))
    assert rew.shape == (4,)
