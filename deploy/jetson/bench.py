"""Latency of one policy inference (one observation, the control loop's case) on a provider.

Measures ``OnnxPolicy.infer`` on a single observation with ``time.perf_counter_ns`` after a
warm-up (the first TensorRT run builds or loads the engine), and ``OnnxPolicy.step`` (the
observation from a state, inference, last-action bookkeeping). Reports percentiles in
microseconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_hrl.errors import ConfigError
from robot_hrl.state import RobotState

from deploy.jetson.engine import DEFAULT_CACHE_DIR, environment_report, open_policy


@dataclass
class LatencyReport:
    model: str
    provider: str
    fp16: bool
    iterations: int
    infer_us: dict[str, float]
    step_us: dict[str, float]
    environment: dict[str, str]

    def describe(self) -> str:
        def fmt(d):
            return ", ".join(f"{k} {v:.1f}" for k, v in d.items())

        return (f"{self.model} on {self.provider} (fp16 {'on' if self.fp16 else 'off'}), {self.iterations} iterations\n"
                f"infer (1 observation) us: {fmt(self.infer_us)}\n"
                f"step (state -> action) us: {fmt(self.step_us)}")

    def as_dict(self) -> dict:
        return {"model": self.model, "provider": self.provider, "fp16": self.fp16, "iterations": self.iterations,
                "infer_us": self.infer_us, "step_us": self.step_us, "environment": self.environment}


def _stats(ns: np.ndarray) -> dict[str, float]:
    us = ns / 1e3
    return {"mean": float(us.mean()), "p50": float(np.percentile(us, 50)), "p90": float(np.percentile(us, 90)),
            "p99": float(np.percentile(us, 99)), "max": float(us.max())}


def benchmark(model: str | Path, provider: str = "auto", fp16: bool = False, iterations: int = 2000,
              warmup: int = 200, cache_dir: str | Path | None = DEFAULT_CACHE_DIR, seed: int = 0) -> LatencyReport:
    if iterations < 1 or warmup < 0:
        raise ConfigError(f"iterations must be >= 1 and warmup >= 0 (got {iterations}, {warmup})")
    policy = open_policy(model, provider, fp16, cache_dir)
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (iterations + warmup, policy.observation_size)).astype(np.float32)
    infer_ns = np.empty(iterations, dtype=np.int64)
    for k in range(warmup + iterations):
        t0 = time.perf_counter_ns()
        policy.infer(obs[k])
        t1 = time.perf_counter_ns()
        if k >= warmup:
            infer_ns[k - warmup] = t1 - t0
    state = RobotState(position_w=np.zeros(3), quat_wxyz=np.array([1.0, 0, 0, 0]), linear_velocity_w=np.zeros(3),
                       angular_velocity_b=np.zeros(3))
    subgoal = np.array([0.5, 0.0, 1.0])
    step_ns = np.empty(iterations, dtype=np.int64)
    for k in range(warmup + iterations):
        state.position_w = obs[k, :3].astype(np.float64)
        t0 = time.perf_counter_ns()
        policy.step(state, subgoal)
        t1 = time.perf_counter_ns()
        if k >= warmup:
            step_ns[k - warmup] = t1 - t0
    return LatencyReport(model=str(model), provider=policy.provider, fp16=fp16, iterations=iterations,
                         infer_us=_stats(infer_ns), step_us=_stats(step_ns), environment=environment_report())
