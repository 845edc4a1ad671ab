"""sim/agents/kl_schedule.py: the late KL target of the adaptive learning rate."""

from __future__ import annotations

import json
import types

import pytest

from robot_hrl.errors import ConfigError
from sim.agents import ppo_goto_cfg
from sim.agents.kl_schedule import CFG_KEY, DesiredKlSchedule
from sim.train import main


def test_switches_once_when_the_training_success_reaches_the_level():
    schedule = DesiredKlSchedule.from_train_cfg({CFG_KEY: {"train_success_at_least": 0.75, "desired_kl": 0.01}})
    alg = types.SimpleNamespace(desired_kl=0.02)
    assert not schedule.update(alg, 3, float("nan"))  # no training episode ended yet
    assert not schedule.update(alg, 4, 0.74) and alg.desired_kl == 0.02
    assert schedule.update(alg, 5, 0.75) and alg.desired_kl == 0.01 and schedule.switched_at_iteration == 5
    alg.desired_kl = 0.03  # switched once only: later iterations leave it alone
    assert not schedule.update(alg, 6, 0.9) and alg.desired_kl == 0.03


def test_a_fixed_learning_rate_has_no_target_to_change():
    schedule = DesiredKlSchedule(0.5, 0.01)
    alg = types.SimpleNamespace(desired_kl=None)
    assert not schedule.update(alg, 0, 1.0) and alg.desired_kl is None


def test_absent_or_null_means_no_schedule():
    assert DesiredKlSchedule.from_train_cfg({}) is None
    assert DesiredKlSchedule.from_train_cfg({CFG_KEY: None}) is None
    assert DesiredKlSchedule.from_train_cfg(ppo_goto_cfg()) is not None


@pytest.mark.parametrize("raw, match", [
    ({"train_success_at_least": 0.75}, "must be null or"),
    ({"train_success_at_least": 0.75, "desired_kl": 0.01, "extra": 1}, "must be null or"),
    ({"train_success_at_least": 1.5, "desired_kl": 0.01}, r"train_success_at_least must be in \[0, 1\]"),
    ({"train_success_at_least": 0.5, "desired_kl": 0.0}, "desired_kl must be a positive number"),
    ({"train_success_at_least": 0.5, "desired_kl": "small"}, "desired_kl must be a positive number"),
    ("0.01", "must be null or"),
])
def test_bad_schedules_are_explained(raw, match):
    with pytest.raises(ConfigError, match=match):
        DesiredKlSchedule.from_train_cfg({CFG_KEY: raw})


def test_train_applies_the_schedule_and_records_the_switch(tmp_path, capsys):
    # a level of 0 switches on the first iteration whose training episodes have ended
    run_dir = tmp_path / "run"
    agent = json.dumps({CFG_KEY: {"train_success_at_least": 0.0, "desired_kl": 0.005}, "num_steps_per_env": 4})
    args = ["--num-envs", "16", "--max-iterations", "5", "--eval-episodes", "4", "--no-progress", "--run-dir", str(run_dir),
            "--agent-cfg", agent, "--env-cfg", json.dumps({"command": {"episode_length_s": 0.1}})]
    assert main(args) == 0
    result = json.loads((run_dir / "eval.json").read_text())
    assert result["desired_kl_switched_at_iteration"] is not None
    assert json.loads((run_dir / "run_config.json").read_text())["agent_cfg"][CFG_KEY]["desired_kl"] == 0.005
    bad = json.dumps({CFG_KEY: {"desired_kl": -1}})
    assert main([*args[:-6], "--run-dir", str(tmp_path / "bad"), "--agent-cfg", bad]) == 2
    assert "desired_kl must be a positive number" in capsys.readouterr().err
