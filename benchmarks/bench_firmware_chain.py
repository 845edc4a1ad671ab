#!/usr/bin/env python
"""Issue 17's figures for the firmware's actuator chain: a go-to policy judged on the chain it must fly.

Every figure comes from episodes of the training simulator (the torch step on the firmware chain of
robot_hrl/robots/crazyflie_2x/actuators.py) with a seed the training never used, the policy run with
onnxruntime on the contract's observations (deterministic actions):

- strict success over 1000 episodes with the full randomization (the evaluation configuration of
  sim/evaluate.py: whole motor-lag range, disturbances at full scale, observation noise and latency);
- steady-state error: the median distance to the goal at the end of the 5 s episodes, at 36 g (every
  other parameter randomized) and at a battery of 3.3 V open-circuit (likewise);
- thrust-limited hard starts: thrust-to-weight 1.4-1.6 under full load (36 g, a battery of 3.3-3.42 V),
  started 30 deg tilted, the goal 0.3-0.5 m above the start; success rate.

A model trained before the chain changed (an older ``--before`` model) is run too, its normalized actions
mapped through its own contract's bounds onto the current contract's (the robot model's hash differs, so
the runtime would refuse it; the bench reads the contract and maps the wrench itself).

    python benchmarks/bench_firmware_chain.py --model models/crazyflie_goto.onnx --before /tmp/old.onnx
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HARD_START_TILT_RAD = math.radians(30.0)
HARD_START_CLIMB_M = (0.3, 0.5)


class OnnxActor:
    """A model's actor on the current contract: its actions mapped through its own bounds to the current ones."""

    def __init__(self, path: Path, current_spec):
        import onnxruntime as ort

        from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract

        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        contract = PolicyContract.from_json(self.session.get_modelmeta().custom_metadata_map[CONTRACT_METADATA_KEY])
        own = np.array([[t.low, t.high] for t in contract.action.terms])
        cur = np.array([[t.low, t.high] for t in current_spec.terms])
        self.robot_hash = contract.robot_params_sha256 if hasattr(contract, "robot_params_sha256") else None
        self.error_integral = next((t.integral for t in contract.observations if t.integral is not None), None)
        """The model's position error integral (None: it observes none): its evaluation env keeps the same (``_cfg``)."""
        self.observes_error_integral = self.error_integral is not None
        # wrench = lo + (a + 1) (hi - lo) / 2 with the model's bounds, then back to [-1, 1] with the current ones
        self.scale = (own[:, 1] - own[:, 0]) / (cur[:, 1] - cur[:, 0])
        self.offset = (own[:, 0] - cur[:, 0]) / (cur[:, 1] - cur[:, 0]) * 2.0 + self.scale - 1.0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        a = np.clip(self.session.run(None, {"obs": obs.astype(np.float32)})[0], -1.0, 1.0)
        return a * self.scale + self.offset


def _cfg(error_integral=None, **ranges):
    """The evaluation configuration; ``error_integral``: the model's ``ErrorIntegral`` (None: the model observes none)."""
    from sim.envs.goto_env_cfg import GotoEnvCfg

    cfg = GotoEnvCfg()
    cfg.command.observe_error_integral = error_integral is not None
    cfg.command.error_integral = None if error_integral is None else error_integral.model_dump()
    cfg.randomization.motor_time_constant_train_range_s = None  # evaluation: the whole motor-lag range
    cfg.curriculum.enabled = False
    cfg.physics.native = True
    for key, value in ranges.items():
        setattr(cfg.randomization, key, value)
    return cfg.validate()


def run_episodes(actor, cfg, episodes: int, seed: int, hard_start: bool = False, num_envs: int = 250) -> dict:
    """``episodes`` whole episodes (each env runs one); per-episode success and final distance to the goal."""
    import torch

    from sim.envs import GotoEnv

    success, error = [], []
    rng = np.random.default_rng(seed)
    done_total = 0
    while done_total < episodes:
        n = min(num_envs, episodes - done_total)
        env = GotoEnv(cfg, num_envs=n, seed=seed + done_total)
        if hard_start:
            _hard_starts(env, rng)
        obs = env.get_observations()["policy"]
        finished = torch.zeros(n, dtype=torch.bool)
        for _ in range(env.max_episode_length):
            actions = torch.as_tensor(actor(obs.numpy()), dtype=torch.float32)
            td, _, dones, extras = env.step(actions)
            obs = td["policy"]
            end = extras["episode_end"]
            new = dones.bool() & ~finished
            if new.any():
                idx = torch.nonzero(new).flatten()
                success += end["success"][idx].tolist()
                error += end["final_position_error_m"][idx].tolist()
                finished |= new
            if finished.all():
                break
        done_total += n
    s, e = np.array(success, dtype=bool), np.array(error)
    return {"episodes": int(s.size), "success_rate": float(s.mean()), "median_final_error_m": float(np.median(e)),
            "median_final_error_of_successes_m": float(np.median(e[s])) if s.any() else None}


def _hard_starts(env, rng) -> None:
    """Every env 30 deg tilted about a random horizontal axis, at rest, the goal 0.3-0.5 m above (and up to 0.2 m aside)."""
    import torch

    n = env.num_envs
    axis = rng.uniform(0.0, 2.0 * math.pi, n)
    half = 0.5 * HARD_START_TILT_RAD
    quat = np.stack((np.full(n, math.cos(half)), math.sin(half) * np.cos(axis), math.sin(half) * np.sin(axis), np.zeros(n)), axis=1)
    env.quat_wxyz[:] = torch.tensor(quat, dtype=torch.float32)
    env.linear_velocity_w[:] = 0.0
    env.angular_velocity_b[:] = 0.0
    pos = env.position_w.clone()
    goal = pos + torch.tensor(np.stack((rng.uniform(-0.2, 0.2, n), rng.uniform(-0.2, 0.2, n), rng.uniform(*HARD_START_CLIMB_M, n)), axis=1),
                              dtype=torch.float32)
    env.goal_w[:] = goal
    env._obs = env._compute_observations()


def hard_start_ranges() -> dict:
    """36 g and a battery of 3.3-3.42 V open-circuit (0.03-0.045 ohm): thrust-to-weight 1.4-1.6 under full load."""
    from robot_hrl.robots import CRAZYFLIE_2X

    heavy = 0.036 / CRAZYFLIE_2X.mass_kg
    return {"mass_scale_range": (heavy, heavy), "battery_open_circuit_range_v": (3.3, 3.42), "battery_resistance_range_ohm": (0.03, 0.045),
            "thrust_coefficient_scale_range": (1.0, 1.0)}


def thrust_to_weight_span(ranges: dict) -> tuple[float, float]:
    """The full-load thrust-to-weight at the corners of ``ranges`` (the chain's fit, the battery sagging)."""
    from robot_hrl.robots import CRAZYFLIE_2X
    from robot_hrl.robots.crazyflie_2x import actuators

    def twr(v_oc, r):
        v = v_oc
        for _ in range(100):
            v = v_oc - r * actuators.battery_current_a(4 * float(actuators.max_rotor_force_n(v)))
        return 4 * float(actuators.max_rotor_force_n(v)) / (CRAZYFLIE_2X.weight_n * ranges["mass_scale_range"][0])

    lo_v, hi_v = ranges["battery_open_circuit_range_v"]
    lo_r, hi_r = ranges["battery_resistance_range_ohm"]
    return twr(lo_v, hi_r), twr(hi_v, lo_r)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", type=Path, default=ROOT / "models" / "crazyflie_goto.onnx")
    p.add_argument("--before", type=Path, default=None, help="an older model to compare on the hard starts (its own action bounds)")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--seed", type=int, default=2027, help="a seed the training and its evaluations never used")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    import torch

    from robot_hrl.robots import CRAZYFLIE_2X

    torch.set_num_threads(1)
    spec = CRAZYFLIE_2X.action_spec()
    heavy = 0.036 / CRAZYFLIE_2X.mass_kg
    hard = hard_start_ranges()
    out = {"load_average_1min_before": os.getloadavg()[0], "hard_start_thrust_to_weight": thrust_to_weight_span(hard)}
    models = {"after": args.model, **({"before": args.before} if args.before else {})}
    for name, path in models.items():
        actor = OnnxActor(path, spec)
        r = {}
        if name == "after":
            integral = actor.error_integral
            r["full_randomization"] = run_episodes(actor, _cfg(integral), args.episodes, args.seed)
            r["at_36g"] = run_episodes(actor, _cfg(integral, mass_scale_range=(heavy, heavy)), args.episodes, args.seed + 1)
            r["at_3v3"] = run_episodes(actor, _cfg(integral, battery_open_circuit_range_v=(3.3, 3.3)), args.episodes, args.seed + 2)
        r["hard_starts"] = run_episodes(actor, _cfg(actor.error_integral, **hard), args.episodes, args.seed + 3, hard_start=True)
        out[name] = r
        for k, v in r.items():
            print(f"{name:6s} {k:18s} success {v['success_rate']:.3f}  median final error {1000 * v['median_final_error_m']:.1f} mm"
                  f"  ({v['episodes']} episodes)", flush=True)
    out["load_average_1min_after"] = os.getloadavg()[0]
    lo, hi = out["hard_start_thrust_to_weight"]
    print(f"hard starts: thrust-to-weight {lo:.2f}-{hi:.2f} under full load, 30 deg tilt, climb 0.3-0.5 m")
    print(f"load average (1 min): {out['load_average_1min_before']:.2f} before, {out['load_average_1min_after']:.2f} after")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
