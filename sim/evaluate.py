#!/usr/bin/env python3
r"""Sim-to-sim evaluation of an exported go-to policy, in PyBullet or in the training simulator.

    python sim/evaluate.py --model models/crazyflie_goto.onnx --sim pybullet --episodes 100 \
        --json runs/eval/pybullet.json --plots runs/eval/pybullet [--randomize] [--seed 0]

The policy runs through the robot runtime (robot_hrl.runtime.OnnxPolicy: onnxruntime, the
model's embedded contract), exactly as on the robot. The task, its initial states, its
terminations and its success definition are the training environment's
(sim/envs/goto_env_cfg.py): success = at the end of the 5 s episode, within 0.10 m of the goal,
slower than 0.2 m/s, not crashed. ``--sim torch`` runs the batched training simulator with the
same model; ``--sim pybullet`` runs sim/pybullet (rotor forces, motor lag, ground effect,
PyBullet contacts). The difference between the two is the sim-to-sim gap.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parent
# `python sim/evaluate.py` puts sim/ first on sys.path, where sim/pybullet would shadow the real
# pybullet package: replace it with the repository root.
sys.path[:] = [p for p in sys.path if (Path(p).resolve() if p else Path.cwd().resolve()) != _HERE]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from robot_hrl.errors import RobotHrlError  # noqa: E402

DEFAULT_MODEL = _REPO / "models" / "crazyflie_goto.onnx"
TASK = "crazyflie-goto"
SIMS = ("pybullet", "torch")
PYBULLET_PHYSICS_HZ = 500.0
"""PyBullet's default physics rate (the torch sim's default is the training env's, ``PhysicsCfg.physics_rate_hz``)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python sim/evaluate.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", type=Path, default=DEFAULT_MODEL,
                   help=f"exported ONNX policy with its contract (default: {DEFAULT_MODEL.relative_to(_REPO)})")
    p.add_argument("--sim", default="pybullet", choices=SIMS,
                   help="simulator: 'pybullet' (sim/pybullet) or 'torch' (the training env); default pybullet")
    p.add_argument("--episodes", type=int, default=100, help="number of episodes (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of initial states, goals and randomization (default 0)")
    p.add_argument("--randomize", action="store_true",
                   help="domain randomization as in training: airframe, motor lag, disturbances, action latency, "
                        "observation noise (default: the nominal robot, no noise)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the metrics as JSON here")
    p.add_argument("--plots", type=Path, metavar="DIR",
                   help="write trajectories_3d.png and position_error.png into this folder")
    p.add_argument("--world", type=Path, metavar="YAML",
                   help="pybullet only: fly inside this world file (obstacles, landmarks; starts and goals drawn "
                        "inside its bounds, clear of its boxes). Default: an empty ground plane, as in training")
    p.add_argument("--physics-hz", type=float, default=None,
                   help="physics rate, an integer multiple of the contract's control rate (default: pybullet 500, torch "
                        "the training env's 200). The policy was trained at 200 Hz; the torch sim at 500 Hz measures what "
                        "the coarser integration is worth (benchmarks/README.md, 'the PyBullet gap')")
    p.add_argument("--no-ground-effect", action="store_true",
                   help="pybullet only: switch the ground effect off (to attribute a sim-to-sim gap)")
    p.add_argument("--shield", action="store_true",
                   help="put the safety shield units (robot_hrl.safety) between policy and motors and count their "
                        "interventions")
    p.add_argument("--gui", action="store_true", help="pybullet only: open the PyBullet GUI (needs a display)")
    p.add_argument("--provider", default="cpu", choices=("auto", "cpu", "cuda", "tensorrt"),
                   help="onnxruntime execution provider (default cpu)")
    p.add_argument("--device", default="cpu", help="torch only: device of the training simulator (default cpu)")
    p.add_argument("--step", default="auto", choices=("auto", "native", "compile", "eager"),
                   help="torch only: how the simulator step runs (sim/envs/backends.py; the same numbers to float rounding): "
                        "native C, one torch.compiled graph, or eager torch; auto: native on a CPU with a C compiler, "
                        "else eager (default auto)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _env_cfg(randomize: bool):
    from sim.envs.goto_env_cfg import GotoEnvCfg

    cfg = GotoEnvCfg()
    cfg.randomization.enabled = bool(randomize)
    cfg.randomization.motor_time_constant_train_range_s = None  # evaluation: the whole motor-lag range
    cfg.curriculum.enabled = False  # every ramp at its final value (full disturbances)
    return cfg.validate()


# ---- PyBullet ---------------------------------------------------------------------------------
def evaluate_pybullet(policy, args, cfg, shield_factory=None):
    from robot_hrl.world import load_world
    from sim.pybullet import PyBulletQuadrotorSim, RandomizationCfg

    world = load_world(args.world) if args.world is not None else None
    randomization = RandomizationCfg.from_training(cfg.randomization) if args.randomize else None
    rng = np.random.default_rng(args.seed)
    sim = PyBulletQuadrotorSim(robot=policy.robot, world=world, physics_hz=args.physics_hz,
                               control_hz=policy.control_rate_hz, gui=args.gui, seed=args.seed,
                               randomization=randomization, ground_effect=not args.no_ground_effect)
    from tqdm import tqdm

    from sim.pybullet.goto_eval import WORLD_CLEARANCE_MARGIN_M, run_episode, sample_initial_condition, summarize
    shield = shield_factory(sim, cfg) if shield_factory is not None else None
    clearance = policy.robot.collision_radius_m + WORLD_CLEARANCE_MARGIN_M

    def controller(state, goal):
        if shield is None:
            return policy.to_wrench(policy.step(state, goal))
        subgoal = shield.subgoal(goal, state.position_w, sim.time_s)
        return shield.command(state, policy.step(state, subgoal), sim.time_s)

    def on_reset():
        policy.reset()
        if shield is not None:
            shield.reset()

    results = []
    start = time.perf_counter()
    try:
        for _ in tqdm(range(args.episodes), desc="pybullet", unit="ep", disable=args.no_progress, leave=False):
            init = sample_initial_condition(cfg, rng, world, clearance)
            result = run_episode(sim, controller, init, cfg, rng, observation_noise=args.randomize, on_reset=on_reset)
            if shield is not None:
                result.shield_interventions, result.shield_units = shield.episode_counts()
            results.append(result)
    finally:
        sim.close()
    wall = time.perf_counter() - start
    metrics = summarize(results, 1.0 / policy.control_rate_hz)
    simulated = sum(r.episode_length for r in results) / policy.control_rate_hz
    metrics["crash_reasons"] = _count(r.crash_reason for r in results if r.crashed)
    metrics["simulator"] = {"name": "pybullet", "physics_hz": args.physics_hz, "control_hz": policy.control_rate_hz,
                            "world": str(args.world) if args.world else None, "ground_effect": not args.no_ground_effect,
                            "real_time_factor": simulated / wall if wall > 0 else None}
    if shield is not None:
        metrics["shield"] = _shield_summary(results)
    trajectories = [{"positions_w": r.positions_w, "goal_w": r.goal_w, "errors_m": r.position_errors_m,
                     "success": r.success} for r in results]
    return metrics, trajectories


# ---- the training simulator --------------------------------------------------------------------
class _RecordingEnv:
    """Delegates to the training env; records the first episode of the first few environments."""

    def __init__(self, env, n_record: int):
        self._env = env
        self._n = min(n_record, env.num_envs)
        self.trajectories: list[dict] = []
        self._reset_records()

    def _reset_records(self):
        self._pos = [[] for _ in range(self._n)]
        self._err = [[] for _ in range(self._n)]
        self._done = [False] * self._n
        self.trajectories = []

    def __getattr__(self, name):
        return getattr(self._env, name)

    def reset(self):
        out = self._env.reset()
        self._reset_records()
        return out

    def step(self, actions):
        env = self._env
        pos = env.position_w[: self._n].detach().cpu().numpy().copy()
        goal = env.goal_w[: self._n].detach().cpu().numpy().copy()
        for i in range(self._n):
            if not self._done[i]:
                self._pos[i].append(pos[i])
                self._err[i].append(float(np.linalg.norm(goal[i] - pos[i])))
        out = env.step(actions)
        end = out[3]["episode_end"]
        dones = out[2].detach().cpu().numpy()
        for i in range(self._n):
            if not self._done[i] and dones[i]:
                self._done[i] = True
                self._err[i].append(float(end["final_position_error_m"][i]))
                self.trajectories.append({"positions_w": np.asarray(self._pos[i]), "goal_w": goal[i],
                                          "errors_m": np.asarray(self._err[i]), "success": bool(end["success"][i])})
        return out


def evaluate_torch(policy, args, cfg):
    import torch

    from sim.evaluation import evaluate
    from sim.tasks import make_env

    if args.shield:
        raise RobotHrlError("--shield works with --sim pybullet only (the shield units run per robot, not batched)")
    num_envs = max(1, min(args.episodes, 256))
    step = _step_backend(args.step, args.device)
    cfg.physics.native, cfg.physics.compile = step == "native", step == "compile"
    env = make_env(TASK, num_envs=num_envs, device=args.device, cfg=cfg, seed=args.seed)
    rec = _RecordingEnv(env, 12)

    def act(obs: torch.Tensor) -> torch.Tensor:
        actions = policy.infer(obs.detach().cpu().numpy().astype(np.float32, copy=False))
        return torch.as_tensor(actions, device=obs.device)

    start = time.perf_counter()
    metrics = evaluate(rec, act, args.episodes, progress=not args.no_progress)
    wall = time.perf_counter() - start
    metrics["simulator"] = {"name": "torch", "step": step, "physics_hz": cfg.physics.physics_rate_hz,
                            "control_hz": cfg.command.control_rate_hz, "num_envs": num_envs, "ground_effect": False,
                            "real_time_factor": None if wall <= 0 else
                            metrics["mean_episode_length_s"] * metrics["num_episodes"] / wall}
    return metrics, rec.trajectories


def _step_backend(choice: str, device: str) -> str:
    """The step backend of ``--step``: auto is native on a CPU with a C compiler (as sim/train.py), else eager."""
    if choice != "auto":
        return choice
    import torch

    from sim.envs.native.build import compiler_missing

    if torch.device(device).type != "cpu":
        return "eager"
    reason = compiler_missing()
    if reason:
        print(f"note: the eager simulator step: {reason}")
    return "eager" if reason else "native"


# ---- shield -------------------------------------------------------------------------------------
def _shield_factory(policy):
    """A factory of the per-episode shield adapter, or an error when robot_hrl.safety has none yet."""
    try:
        from sim.pybullet.shield_adapter import ShieldAdapter
    except ImportError as exc:
        raise RobotHrlError(f"--shield: the safety shield units are not available ({exc})") from None
    return lambda sim, cfg: ShieldAdapter(policy, sim, cfg)


def _shield_summary(results) -> dict:
    units: dict[str, int] = {}
    for r in results:
        for k, v in r.shield_units.items():
            units[k] = units.get(k, 0) + v
    total = sum(r.shield_interventions for r in results)
    return {"interventions": total, "episodes_with_interventions": sum(1 for r in results if r.shield_interventions),
            "per_unit": units}


def _count(items) -> dict:
    out: dict[str, int] = {}
    for item in items:
        out[str(item)] = out.get(str(item), 0) + 1
    return out


def _print_metrics(m: dict) -> None:
    print(f"sim={m['sim']}  episodes={m['num_episodes']}  randomize={m['randomize']}  seed={m['seed']}")
    print(f"  success_rate                 {m['success_rate']:.3f}")
    print(f"  crash_rate                   {m['crash_rate']:.3f}")
    print(f"  out_of_bounds_rate           {m['out_of_bounds_rate']:.3f}")
    print(f"  mean_final_position_error_m  {m['mean_final_position_error_m']:.4f}")
    print(f"  rms_tracking_error_m         {m['rms_tracking_error_m']:.4f}")
    print(f"  mean_final_speed_mps         {m['mean_final_speed_mps']:.4f}")
    if "shield" in m:
        print(f"  shield interventions         {m['shield']['interventions']}  {m['shield']['per_unit']}")
    rtf = m.get("simulator", {}).get("real_time_factor")
    if rtf:
        print(f"  real-time factor             {rtf:.1f}x")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be a positive integer, got {args.episodes}")
    if args.sim == "torch" and (args.world is not None or args.gui or args.no_ground_effect):
        parser.error("--world, --gui and --no-ground-effect apply to --sim pybullet only")
    if args.sim == "pybullet" and args.step != "auto":
        parser.error("--step applies to --sim torch only")
    if args.physics_hz is not None and (not math.isfinite(args.physics_hz) or args.physics_hz <= 0):
        parser.error(f"--physics-hz must be a positive number, got {args.physics_hz}")
    if args.physics_hz is None and args.sim == "pybullet":
        args.physics_hz = PYBULLET_PHYSICS_HZ
    try:
        from robot_hrl.runtime import OnnxPolicy
        from robot_hrl.world import load_world

        if args.world is not None:
            load_world(args.world)  # fail before loading anything heavier
        policy = OnnxPolicy(args.model, provider=args.provider)
        if policy.contract.skill != "goto":
            raise RobotHrlError(f"{args.model} is a {policy.contract.skill!r} policy; this evaluation runs the goto task")
        if args.sim == "pybullet":
            from sim.pybullet.quadrotor_sim import check_rates

            check_rates(args.physics_hz, policy.control_rate_hz)  # before the (slow) training-side imports
        cfg = _env_cfg(args.randomize)
        if args.sim == "torch" and args.physics_hz is not None:
            cfg.physics.physics_rate_hz = float(args.physics_hz)
            cfg.validate()  # an integer multiple of the control rate, or a ConfigError naming the fix
        integral = next((t.integral for t in policy.contract.observations if t.integral is not None), None)
        cfg.command.observe_error_integral = integral is not None
        cfg.command.error_integral = None if integral is None else integral.model_dump()  # --sim torch: the model's own
        if abs(policy.control_rate_hz - cfg.command.control_rate_hz) > 1e-9:
            raise RobotHrlError(f"the model runs at {policy.control_rate_hz} Hz, the task at "
                                f"{cfg.command.control_rate_hz} Hz; evaluate it with the config it was trained on")
        if args.sim == "pybullet":
            shield_factory = _shield_factory(policy) if args.shield else None
            metrics, trajectories = evaluate_pybullet(policy, args, cfg, shield_factory)
        else:
            metrics, trajectories = evaluate_torch(policy, args, cfg)
    except (RobotHrlError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    metrics = {"sim": args.sim, "model": str(args.model), "model_sha256": policy.sha256, "task": TASK,
               "randomize": bool(args.randomize), "seed": args.seed,
               "success_definition": {"position_tolerance_m": cfg.success.position_tolerance_m,
                                      "speed_tolerance_mps": cfg.success.speed_tolerance_mps,
                                      "episode_length_s": cfg.command.episode_length_s},
               **metrics}
    _print_metrics(metrics)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(metrics, indent=2) + "\n")
        print(f"wrote {args.json}")
    if args.plots is not None:
        from sim.pybullet.eval_plots import write_plots

        title = f"{args.model.name} in {args.sim}{' (randomized)' if args.randomize else ''}"
        for path in write_plots(trajectories, args.plots, title, cfg.success.position_tolerance_m,
                                policy.control_rate_hz):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
