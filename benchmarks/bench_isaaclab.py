#!/usr/bin/env python
"""Isaac Lab 3.0 on this machine: env steps/s of an Isaac Lab task (kitless, Newton), and the wall time of
the CI step (``.ci/isaaclab``) with an empty and with a filled cache.

Run it with the Isaac Lab venv's Python (``bash .ci/isaaclab --no-tests`` builds it and prints its path);
with another Python it says so and exits 0 (``make bench`` runs every benchmark with the main Python).

    $VENV/bin/python benchmarks/bench_isaaclab.py                       # Isaac-Cartpole-Direct, 64 and 1024 envs, CPU
    $VENV/bin/python benchmarks/bench_isaaclab.py --num-envs 4096 65536 --device cuda:0
    $VENV/bin/python benchmarks/bench_isaaclab.py --ci-step             # + .ci/isaaclab uncached then cached (~20 min, ~13 GB)
    $VENV/bin/python benchmarks/bench_isaaclab.py --crazyflie           # Isaac-Crazyflie-Goto-Direct next to the project's simulator
    $VENV/bin/python benchmarks/bench_isaaclab.py --sim2sim 500         # the shipped policy in both, 500 episodes each

``--crazyflie``: the task is ``Isaac-Crazyflie-Goto-Direct`` (this project's ``crazyflie-goto`` on Isaac Lab's
physics) and each batch size is also measured on the project's own simulator (``sim.envs.goto_env.GotoEnv``,
eager torch and native C steps), in the same run, with the same random actions and the same seconds.
``--sim2sim N``: ``models/crazyflie_goto.onnx`` (onnxruntime, batched) on N episodes of the evaluation
distribution (curriculum at its end, every randomization on, the whole motor-lag range) in the Isaac Lab task
(the generic evaluator, the task's own per-episode success) and in the project's simulator
(``sim.evaluation.evaluate``): strict success (within 0.10 m and below 0.2 m/s at the time-out) and the mean
final position error.

Each batch size runs in a child process (Isaac Lab allows one simulation per process): the env is built
(its build time is printed), stepped 10 times to warm up, then stepped with random actions in [-1, 1]
for ``--seconds`` (at least 20 steps). Episodes end and reset as they do in training. The 1-minute load
average is printed next to each figure: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def load1() -> float:
    return os.getloadavg()[0]


def _time_steps(env, actions: list, seconds: float, sync=lambda: None) -> tuple[int, int, float, float]:
    """Step ``env`` through ``actions`` in turn for ``seconds`` (at least 20 steps): (steps, episodes ended, wall s,
    1-min load average before); ``sync`` waits for the device before the clock is read."""
    steps = resets = 0
    load_before = load1()
    t0 = time.perf_counter()
    while steps < 20 or time.perf_counter() - t0 < seconds:
        _, _, dones, _ = env.step(actions[steps % len(actions)])
        resets += int(dones.sum())
        steps += 1
    sync()
    return steps, resets, time.perf_counter() - t0, load_before


def measure(task: str, num_envs: int, device: str, seconds: float, seed: int = 0) -> dict:
    """Env steps per second of ``task`` at ``num_envs`` (in this process: call it once per process)."""
    import torch

    from sim.isaaclab_adapter.assets import ASSET_ROOT_ENV, default_asset_root, ensure_assets

    os.environ.setdefault(ASSET_ROOT_ENV, str(ensure_assets(default_asset_root())))
    from sim.isaaclab_adapter.env import make_isaaclab_env

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    env = make_isaaclab_env(task, num_envs=num_envs, device=device, seed=seed)
    build_s = time.perf_counter() - t0
    gen = torch.Generator(device=env.device).manual_seed(seed)
    actions = [torch.rand((num_envs, env.num_actions), generator=gen, device=env.device) * 2 - 1 for _ in range(8)]
    for i in range(10):
        env.step(actions[i % 8])
    sync = torch.cuda.synchronize if str(env.device).startswith("cuda") else (lambda: None)
    sync()
    steps, resets, dt, load_before = _time_steps(env, actions, seconds, sync)
    env.close()
    return {"task": task, "num_envs": num_envs, "device": str(device), "steps": steps, "episodes_ended": resets,
            "env_steps_per_s": num_envs * steps / dt, "ms_per_step": 1e3 * dt / steps, "build_s": build_s,
            "load1_before": load_before, "load1_after": load1()}


CRAZYFLIE_TASK = "Isaac-Crazyflie-Goto-Direct"
EVAL_GOTO = {"curriculum": {"enabled": False}, "randomization": {"motor_time_constant_train_range_s": None}}
"""The evaluation distribution of crazyflie-goto (sim/train.py's evaluation env cfg)."""


def eval_goto_for(contract) -> dict:
    """``EVAL_GOTO`` with the model's own position error integral (the shipped model observes one, issue 17)."""
    integral = next((t.integral for t in contract.observations if t.integral is not None), None)
    command = {"observe_error_integral": integral is not None,
               "error_integral": None if integral is None else integral.model_dump()}
    return {**EVAL_GOTO, "command": command}


def measure_project(num_envs: int, seconds: float, backend: str, seed: int = 0) -> dict:
    """Env steps per second of the project's ``crazyflie-goto`` (GotoEnv) with ``backend`` (eager or native)."""
    import torch

    from sim.envs.goto_env import GotoEnv
    from sim.envs.goto_env_cfg import GotoEnvCfg

    torch.set_num_threads(1)
    cfg = GotoEnvCfg.from_dict({"physics": {"native": backend == "native"}})
    t0 = time.perf_counter()
    env = GotoEnv(cfg, num_envs=num_envs, device="cpu", seed=seed)
    build_s = time.perf_counter() - t0
    gen = torch.Generator().manual_seed(seed)
    actions = [torch.rand((num_envs, env.num_actions), generator=gen) * 2 - 1 for _ in range(8)]
    for i in range(10):
        env.step(actions[i % 8])
    steps, resets, dt, load_before = _time_steps(env, actions, seconds)
    return {"task": f"crazyflie-goto ({backend})", "num_envs": num_envs, "device": "cpu", "steps": steps, "episodes_ended": resets,
            "env_steps_per_s": num_envs * steps / dt, "ms_per_step": 1e3 * dt / steps, "build_s": build_s,
            "load1_before": load_before, "load1_after": load1()}


def sim2sim(num_episodes: int, num_envs: int, which: str, seed: int = 21) -> dict:
    """The shipped policy on ``num_episodes`` of the evaluation distribution: in Isaac Lab (``which == "isaaclab"``)
    or in the project's simulator (``"project"``)."""
    import torch

    from robot_hrl.runtime import OnnxPolicy

    policy = OnnxPolicy(REPO / "models" / "crazyflie_goto.onnx", provider="cpu")
    load_before = load1()
    t0 = time.perf_counter()
    if which == "isaaclab":
        from sim.isaaclab_adapter.assets import ASSET_ROOT_ENV, default_asset_root, ensure_assets

        os.environ.setdefault(ASSET_ROOT_ENV, str(ensure_assets(default_asset_root())))
        from sim.isaaclab_adapter.evaluator import evaluate_isaaclab
        from sim.tasks import make_env

        env = make_env(CRAZYFLIE_TASK, num_envs=num_envs, device="cpu", cfg={"goto": eval_goto_for(policy.contract)}, seed=seed)
        try:
            r = evaluate_isaaclab(env, lambda obs: torch.from_numpy(policy.infer(obs["policy"].numpy())), num_episodes, progress=True)
        finally:
            env.close()
        out = {"success_rate": r["success_rate"], "mean_final_position_error_m": r["mean_final_position_error_m"]}
    else:
        from sim.envs.goto_env import GotoEnv
        from sim.envs.goto_env_cfg import GotoEnvCfg
        from sim.evaluation import evaluate

        env = GotoEnv(GotoEnvCfg.from_dict(eval_goto_for(policy.contract)), num_envs=num_envs, device="cpu", seed=seed)
        r = evaluate(env, lambda obs: torch.from_numpy(policy.infer(obs.numpy())), num_episodes)
        out = {"success_rate": r["success_rate"], "mean_final_position_error_m": r["mean_final_position_error_m"]}
    return {"sim": which, "num_episodes": r["num_episodes"], **out, "wall_s": time.perf_counter() - t0,
            "load1_before": load_before, "load1_after": load1()}


def _child(args_list: list[str]) -> dict | None:
    done = subprocess.run([sys.executable, __file__, *args_list], capture_output=True, text=True, cwd=REPO)
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not rows:
        print(f"  failed (rc {done.returncode}): {' '.join(args_list)}\n{done.stderr[-2000:]}")
        return None
    return json.loads(rows[-1])


def _print_rate(r: dict) -> None:
    print(f"  {r['task']:>40s} {r['num_envs']:6d} envs: {r['env_steps_per_s']:10.0f} env steps/s ({r['ms_per_step']:.1f} ms per step, "
          f"{r['steps']} steps, {r['episodes_ended']} episodes ended); built in {r['build_s']:.1f} s; "
          f"load average {r['load1_before']:.2f} -> {r['load1_after']:.2f}")


def ci_step(keep: bool) -> list[dict]:
    """``bash .ci/isaaclab`` twice with one fresh ROBOT_HRL_CACHE: empty (download, build, compile), then filled."""
    cache = Path(tempfile.mkdtemp(prefix="robot_hrl_cache_"))
    rows = []
    try:
        for label in ("uncached", "cached"):
            load = load1()
            t0 = time.perf_counter()
            done = subprocess.run(["bash", ".ci/isaaclab"], cwd=REPO, env={**os.environ, "ROBOT_HRL_CACHE": str(cache)},
                                  capture_output=True, text=True)
            wall = time.perf_counter() - t0
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("isaaclab:")]
            rows.append({"cache": label, "wall_s": wall, "rc": done.returncode, "load1_before": load, "load1_after": load1(), "log": lines})
            if done.returncode != 0:
                print(done.stdout[-3000:] + done.stderr[-3000:], file=sys.stderr)
                break
    finally:
        if not keep:
            shutil.rmtree(cache, ignore_errors=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--task", default="Isaac-Cartpole-Direct", help="Isaac Lab task id")
    p.add_argument("--num-envs", type=int, nargs="+", default=[64, 1024], help="batch sizes (one child process each)")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N")
    p.add_argument("--seconds", type=float, default=15.0, help="time stepped per batch size after the warm-up")
    p.add_argument("--ci-step", action="store_true", help="also time `bash .ci/isaaclab` with an empty, then the filled, cache (a temporary ROBOT_HRL_CACHE)")
    p.add_argument("--keep-cache", action="store_true", help="with --ci-step: keep the temporary cache")
    p.add_argument("--crazyflie", action="store_true", help=f"bench {CRAZYFLIE_TASK} and the project's simulator side by side")
    p.add_argument("--sim2sim", type=int, default=0, metavar="N", help="the shipped policy on N episodes in both simulators")
    p.add_argument("--sim2sim-envs", type=int, default=250, metavar="E", help="parallel envs of --sim2sim")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-project", default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-sim2sim", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.crazyflie:
        args.task = CRAZYFLIE_TASK

    from sim.isaaclab_adapter.availability import isaaclab_available

    if not isaaclab_available():
        print("bench_isaaclab: skipped, Isaac Lab is not installed in this Python; run it with the venv of "
              "`bash .ci/isaaclab --no-tests` (it prints the path)")
        return 0
    if args.child is not None:
        if args.child_project:
            print(json.dumps(measure_project(args.child, args.seconds, args.child_project)))
        else:
            print(json.dumps(measure(args.task, args.child, args.device, args.seconds)))
        return 0
    if args.child_sim2sim:
        print(json.dumps(sim2sim(args.sim2sim, args.sim2sim_envs, args.child_sim2sim)))
        return 0
    print(f"{args.task} on {args.device}, random actions in [-1, 1], Python {sys.version.split()[0]}")
    for n in args.num_envs:
        r = _child(["--child", str(n), "--task", args.task, "--device", args.device, "--seconds", str(args.seconds)])
        if r is None:
            return 1
        _print_rate(r)
        if args.crazyflie and args.device == "cpu":  # the project's simulator in the same run
            for backend in ("eager", "native"):
                r = _child(["--child", str(n), "--child-project", backend, "--seconds", str(args.seconds)])
                if r is not None:
                    _print_rate(r)
    if args.sim2sim:
        print(f"sim-to-sim: models/crazyflie_goto.onnx, {args.sim2sim} episodes of the evaluation distribution, {args.sim2sim_envs} envs")
        for which in ("isaaclab", "project"):
            r = _child(["--sim2sim", str(args.sim2sim), "--sim2sim-envs", str(args.sim2sim_envs), "--child-sim2sim", which])
            if r is None:
                return 1
            print(f"  {which:>9s}: strict success {r['success_rate']:.3f}, mean final position error {r['mean_final_position_error_m']:.4f} m "
                  f"over {r['num_episodes']} episodes ({r['wall_s']:.0f} s; load average {r['load1_before']:.2f} -> {r['load1_after']:.2f})")
    if args.ci_step:
        for r in ci_step(args.keep_cache):
            print(f"  .ci/isaaclab, {r['cache']}: {r['wall_s']:.0f} s (rc {r['rc']}), load average {r['load1_before']:.2f} -> {r['load1_after']:.2f}")
            for line in r["log"]:
                print(f"      {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
