"""sim/train.py end to end (tiny runs), load_run, determinism, evaluation and bad inputs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from rsl_rl.runners import OnPolicyRunner

from robot_hrl.errors import ConfigError
from sim.agents import ppo_goto_cfg
from sim.evaluation import episode_quota, evaluate, policy_act_fn
from sim.runs import load_run, read_run_config
from sim.tasks import make_env
from sim.train import main

TINY = ["--num-envs", "32", "--max-iterations", "2", "--eval-episodes", "8", "--no-progress", "--seed", "3"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs") / "tiny"
    assert main([*TINY, "--run-dir", str(run_dir)]) == 0
    return run_dir


def test_train_writes_a_complete_run_dir(tiny_run):
    config = read_run_config(tiny_run)
    for key in ("task", "env_cfg", "agent_cfg", "seed", "device", "num_envs", "command", "git_commit"):
        assert key in config
    assert config["task"] == "crazyflie-goto" and config["num_envs"] == 32 and config["seed"] == 3
    assert config["command"].startswith("python sim/train.py") and "--num-envs 32" in config["command"]
    assert sorted(p.name for p in tiny_run.glob("model_*.pt")) == ["model_0.pt", "model_1.pt"]
    assert list(tiny_run.glob("events.out.tfevents.*"))
    result = json.loads((tiny_run / "eval.json").read_text())
    for key in ("success_rate", "mean_final_position_error_m", "crash_rate", "train_wall_time_s", "env_steps", "rms_tracking_error_m"):
        assert key in result
    assert result["env_steps"] == 2 * ppo_goto_cfg()["num_steps_per_env"] * 32
    assert result["num_episodes"] == 8 and 0.0 <= result["success_rate"] <= 1.0
    assert set(result["time_breakdown_s"]) >= {"simulation_s", "inference_s", "ppo_update_s"}


def test_load_run_rebuilds_env_and_policy(tiny_run):
    env, runner = load_run(tiny_run)
    assert env.num_envs == 1
    policy = runner.get_inference_policy()
    actions = policy(env.get_observations())
    assert actions.shape == (1, 4)
    assert hasattr(runner.alg.get_policy(), "obs_normalizer")
    env0, runner0 = load_run(tiny_run, checkpoint="model_0.pt")
    a0 = runner0.get_inference_policy()(env.get_observations())
    assert not torch.equal(a0, actions)


def test_same_seed_same_result(tiny_run, tmp_path):
    again = tmp_path / "again"
    assert main([*TINY, "--run-dir", str(again)]) == 0
    a = torch.load(tiny_run / "model_1.pt", weights_only=False)["actor_state_dict"]
    b = torch.load(again / "model_1.pt", weights_only=False)["actor_state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ea, eb = (json.loads((d / "eval.json").read_text()) for d in (tiny_run, again))
    assert ea["mean_final_position_error_m"] == eb["mean_final_position_error_m"]


def test_resume_continues_from_the_checkpoint(tiny_run, tmp_path):
    out = tmp_path / "resumed"
    assert main([*TINY[:2], "--max-iterations", "1", "--eval-episodes", "4", "--no-progress", "--run-dir", str(out), "--resume", str(tiny_run)]) == 0
    assert (out / "model_2.pt").is_file()


def _train_to_target(run_dir, target: float, max_iterations: int, eval_interval: int, skip_margin: float = 1.0) -> dict:
    args = ["--num-envs", "32", "--max-iterations", str(max_iterations), "--eval-episodes", "8",
            "--eval-episodes-during-training", "8", "--eval-interval", str(eval_interval), "--no-progress", "--seed", "3",
            "--target-success", str(target), "--eval-skip-margin", str(skip_margin), "--run-dir", str(run_dir)]
    assert main(args) == 0
    return json.loads((run_dir / "eval.json").read_text())


def test_target_success_stops_at_the_first_evaluation_that_reaches_it(tmp_path):
    # success 0.0 is reached by any evaluation: training stops after the first one (iteration 0)
    result = _train_to_target(tmp_path / "stop", 0.0, max_iterations=5, eval_interval=1)
    assert result["iterations"] == 1 and result["target_reached"] is True
    assert [h["iteration"] for h in result["evaluations_during_training"]] == [0]
    assert result["env_steps"] == 1 * ppo_goto_cfg()["num_steps_per_env"] * 32


def test_target_success_not_reached_runs_every_iteration_and_says_so(tmp_path):
    # an untrained policy never reaches 100 %: all iterations run, evaluated every --eval-interval
    result = _train_to_target(tmp_path / "no_stop", 1.0, max_iterations=4, eval_interval=2)
    assert result["iterations"] == 4 and result["target_reached"] is False
    assert [h["iteration"] for h in result["evaluations_during_training"]] == [1, 3]
    assert all(h["success_rate"] < 1.0 for h in result["evaluations_during_training"])
    # a target of 100 % is out of reach at the first failed episode: those evaluations stop there
    assert all(h["stopped_early"] and h["success_rate_at_most"] < 1.0 for h in result["evaluations_during_training"])
    assert all(h["num_episodes"] < h["episodes_planned"] for h in result["evaluations_during_training"])


def test_evaluations_are_skipped_while_the_training_episodes_are_far_from_the_target(tmp_path):
    # an untrained policy's training episodes all crash (success 0, more than 0.3 under 1.0): of the
    # evaluations due every iteration only every 5th runs
    result = _train_to_target(tmp_path / "skip", 1.0, max_iterations=10, eval_interval=1, skip_margin=0.3)
    assert result["iterations"] == 10 and result["target_reached"] is False
    assert [h["iteration"] for h in result["evaluations_during_training"]] == [4, 9]


def test_eval_skip_margin_outside_0_1_is_rejected(capsys):
    assert main([*TINY, "--target-success", "0.9", "--eval-skip-margin", "-0.1"]) == 2
    assert "--eval-skip-margin must be in [0, 1]" in capsys.readouterr().err


def test_eval_env_cfg_overrides_apply_to_evaluation_only(tmp_path):
    out = tmp_path / "eval_cfg"
    slow = {"randomization": {"motor_time_constant_train_range_s": [0.08, 0.15]}}
    judge = {"randomization": {"max_disturbance_force_n": 0.02}}
    assert main([*TINY, "--max-iterations", "1", "--run-dir", str(out), "--env-cfg", json.dumps(slow), "--eval-env-cfg", json.dumps(judge)]) == 0
    config = read_run_config(out)
    assert config["env_cfg"]["randomization"]["motor_time_constant_train_range_s"] == [0.08, 0.15]
    assert config["eval_env_cfg"]["randomization"]["max_disturbance_force_n"] == 0.02
    assert config["env_cfg"]["randomization"]["max_disturbance_force_n"] == 0.01
    assert config["eval_env_cfg"]["rewards"] == config["env_cfg"]["rewards"]  # everything else is the training's
    result = json.loads((out / "eval.json").read_text())
    assert result["eval_env_cfg_differs_from_training"] is True and result["randomization"] is True


def test_evaluation_draws_the_motor_lag_from_the_whole_range(tiny_run):
    from sim.train import make_eval_env

    config = read_run_config(tiny_run)
    assert config["env_cfg"]["randomization"]["motor_time_constant_train_range_s"] == [0.05, 0.15]
    env = make_eval_env("crazyflie-goto", config["env_cfg"], 2048, "cpu", 0)
    tau = env.params["motor_time_constant_s"]
    assert tau.min().item() < 0.025 and tau.max().item() > 0.13
    assert not env.cfg.curriculum.enabled


def test_short_training_improves_the_return():
    torch.manual_seed(0)
    cfg = {"randomization": {"enabled": False}}
    env = make_env("crazyflie-goto", num_envs=128, cfg=cfg, seed=0)
    runner = OnPolicyRunner(env, ppo_goto_cfg(), log_dir=None, device="cpu")
    returns: list[float] = []  # undiscounted returns of finished episodes, in order
    running = torch.zeros(env.num_envs)
    obs = env.get_observations()
    for _ in range(240 // runner.cfg["num_steps_per_env"]):  # 240 control steps: enough finished episodes
        with torch.inference_mode():
            for _ in range(runner.cfg["num_steps_per_env"]):
                actions = runner.alg.act(obs)
                obs, rew, dones, extras = env.step(actions)
                runner.alg.process_env_step(obs, rew, dones, extras)
                running += rew
                done = dones.bool()
                returns += running[done].tolist()
                running[done] = 0.0
            runner.alg.compute_returns(obs)
        runner.alg.update()
    first, last = returns[:128], returns[-128:]
    assert len(returns) > 256
    assert sum(last) / len(last) > sum(first) / len(first) + 5.0, (sum(first) / 128, sum(last) / 128)


def test_the_hooked_runner_trains_as_rsl_rls_own_learn_loop():
    """sim/train.py's TrainingRunner is rsl_rl's OnPolicyRunner.learn with hooks: the same seed gives the same
    networks bit for bit, and the hooks see every iteration."""
    from sim.agents.runner import TrainingRunner
    from sim.train import seed_everything

    seen = []

    def train(cls, **hooks):
        seed_everything(0)
        env = make_env("crazyflie-goto", num_envs=32, seed=0)
        runner = cls(env, ppo_goto_cfg(), log_dir=None, device="cpu", **hooks)
        runner.learn(2)
        return runner

    plain = train(OnPolicyRunner)
    hooked = train(TrainingRunner, on_iteration=lambda it, stats: seen.append((it, stats)) or False, show_progress=False)
    for name in ("actor", "critic"):
        a, b = getattr(plain.alg, name).state_dict(), getattr(hooked.alg, name).state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a), name
    assert [it for it, _ in seen] == [0, 1] and hooked.iterations_done == 2
    assert hooked.timers.simulation_s > 0 and hooked.timers.ppo_update_s > 0
    assert all(set(stats) >= {"train_success", "mean_reward"} for _, stats in seen)
    stopped = train(TrainingRunner, on_iteration=lambda it, stats: True, show_progress=False)
    assert stopped.iterations_done == 1 and stopped.current_learning_iteration == 0


def test_evaluate_counts_whole_episodes():
    cfg = {"randomization": {"enabled": False}, "command": {"episode_length_s": 0.2}}
    env = make_env("crazyflie-goto", num_envs=4, cfg=cfg, seed=0)
    result = evaluate(env, lambda o: torch.zeros(o.shape[0], 4), num_episodes=10)
    assert result["num_episodes"] == 10
    assert 0.0 <= result["crash_rate"] <= 1.0 and result["rms_tracking_error_m"] > 0
    with pytest.raises(ConfigError, match="num_episodes"):
        evaluate(env, lambda o: torch.zeros(o.shape[0], 4), num_episodes=0)


def test_evaluate_rates_are_exact_fractions():
    # 950 successes of 1000 must read 0.95 (a float32 mean gives 0.94999999, below a 0.95 target)
    from sim import evaluation

    flags = torch.zeros(1000)
    flags[:950] = 1.0
    assert evaluation._fraction(flags) == 0.95 >= 0.95
    assert float(flags.mean()) < 0.95  # what the mean gave


def test_episode_quota_spreads_the_episodes_over_the_envs():
    assert episode_quota(10, 4).tolist() == [3, 3, 2, 2]
    assert episode_quota(3, 8).tolist() == [1, 1, 1, 0, 0, 0, 0, 0]
    assert int(episode_quota(1000, 1000).sum()) == 1000


def _half_crashing_env_and_policy():
    """8 envs: odd ones cut the thrust and crash together after ~0.25 s; even ones climb slowly,
    never reach the goal and time out at 0.5 s."""
    still = {"max_initial_tilt_rad": 0.0, "max_initial_speed_mps": 0.0, "max_initial_body_rate_radps": 0.0}
    cfg = {"randomization": {"enabled": False}, "curriculum": {"enabled": False},
           "command": {"episode_length_s": 0.5, "spawn_height_range_m": [0.3, 0.3], **still}}
    env = make_env("crazyflie-goto", num_envs=8, cfg=cfg, seed=0)

    def act(obs):
        actions = torch.zeros(obs.shape[0], 4)
        actions[1::2, 0] = -1.0  # no thrust
        return actions

    return env, act


def test_evaluate_of_fewer_episodes_than_envs_is_not_biased_to_the_first_to_end():
    # 4 episodes of 8 envs are envs 0-3: half crashes (keeping the first 4 to end gave 4 crashes)
    env, act = _half_crashing_env_and_policy()
    result = evaluate(env, act, num_episodes=4)
    assert result["num_episodes"] == 4
    assert result["crash_rate"] == pytest.approx(0.5)
    assert evaluate(env, act, num_episodes=8)["crash_rate"] == pytest.approx(0.5)


def test_evaluate_stops_once_the_success_rate_cannot_reach_stop_below():
    env, act = _half_crashing_env_and_policy()
    stopped = evaluate(env, act, num_episodes=8, stop_below=0.9)
    assert stopped["stopped_early"] and stopped["episodes_planned"] == 8
    assert stopped["num_episodes"] == 4 and stopped["crash_rate"] == 1.0
    assert stopped["success_rate_at_most"] == pytest.approx(0.5)
    # 4 failures leave 50 % possible: a 0.4 target needs the whole run, which then ends normally
    full = evaluate(env, act, num_episodes=8, stop_below=0.4)
    assert not full["stopped_early"] and full["num_episodes"] == 8 and "success_rate_at_most" not in full
    assert full["crash_rate"] == pytest.approx(0.5) and full["success_rate"] == 0.0
    assert not evaluate(env, act, num_episodes=8, stop_below=0.0)["stopped_early"]
    with pytest.raises(ConfigError, match="stop_below"):
        evaluate(env, act, num_episodes=8, stop_below=1.5)


def test_policy_act_fn_wraps_an_rsl_rl_actor():
    env = make_env("crazyflie-goto", num_envs=2, seed=0)
    runner = OnPolicyRunner(env, ppo_goto_cfg(), log_dir=None, device="cpu")
    act = policy_act_fn(runner.get_inference_policy())
    assert act(env.get_observations()["policy"]).shape == (2, 4)


# ---- bad inputs ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, match",
    [
        (["--num-envs", "0"], "--num-envs"),
        (["--max-iterations", "0"], "--max-iterations"),
        (["--target-success", "1.5"], "--target-success"),
        (["--eval-env-cfg", "{not json"], "--eval-env-cfg"),
        (["--eval-env-cfg", '{"randomization": {"no_such_key": 1}}'], "no_such_key"),
        (["--threads", "0"], "--threads"),
        (["--env-cfg", "{not json"], "--env-cfg"),
        (["--env-cfg", '{"physics": {"warp": 9}}'], "unknown key"),
        (["--agent-cfg", "[1, 2]"], "JSON object"),
        (["--distributed"], "torchrun"),
        (["--task", "crazyflie-backflip"], "crazyflie-goto"),
    ],
)
def test_bad_arguments_give_clear_errors(args, match, tmp_path, capsys):
    rc = main([*args, "--run-dir", str(tmp_path / "r"), "--no-progress"])
    assert rc == 2
    assert match in capsys.readouterr().err


def test_resume_from_nothing(tmp_path, capsys):
    assert main([*TINY, "--run-dir", str(tmp_path / "r"), "--resume", str(tmp_path / "missing.pt")]) == 2
    assert "--resume" in capsys.readouterr().err


def test_load_run_refuses_a_non_run_dir(tmp_path):
    with pytest.raises(ConfigError, match="run_config.json"):
        load_run(tmp_path)
    (tmp_path / "run_config.json").write_text("{}")
    with pytest.raises(ConfigError, match="lacks"):
        load_run(tmp_path)


def test_help_runs_from_the_repo_root(repo_root):
    out = subprocess.run([sys.executable, "sim/train.py", "--help"], cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    for flag in ("--task", "--num-envs", "--device", "--max-iterations", "--seed", "--run-dir", "--resume", "--target-success", "--distributed"):
        assert flag in out.stdout
