"""Rollouts of the crazyflie-goto env on each step path (eager, compiled graph, native C), and the
comparison the step-path tests share (tests/test_sim_compiled.py, tests/test_sim_native.py)."""

from __future__ import annotations

import torch

from sim.envs import GotoEnv, GotoEnvCfg
from sim.envs import step_core

PATHS = ("eager", "compile", "native")


def rollout(path: str, n: int = 8, steps: int = 40, uncompiled_graphs: bool = False, randomize: bool = True) -> list[dict]:
    """``steps`` env steps of random actions (NaN and inf among them) on one step path, every output cloned.

    The eager reference draws from the counter-based streams (``noise_stream="counter",
    reset_stream="counter"``), so all three paths see the same numbers. Episodes of 15 steps: resets
    inside the rollout.
    """
    assert path in PATHS, path
    cfg = GotoEnvCfg()
    cfg.physics.compile = path == "compile"
    cfg.physics.native = path == "native"
    cfg.randomization.enabled = randomize
    cfg.command.episode_length_s = 0.15  # time-outs every 15 steps: resets inside the rollout
    env = GotoEnv(cfg, num_envs=n, seed=3, noise_stream="counter", reset_stream="counter")
    if uncompiled_graphs:  # the fused function runs eagerly: the same code, no compilation
        env._fused_control = step_core.fused_control_step
    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(steps):
        a = (torch.rand(n, 4, generator=gen) * 2 - 1) * 1.5
        if i == 5:
            a[0] = float("nan")
            a[1, 0] = float("inf")
            a[2, 1] = -float("inf")
        obs, rew, dones, extras = env.step(a)
        out.append({"policy": obs["policy"].clone(), "critic": obs["critic"].clone(), "reward": rew.clone(), "dones": dones.clone(),
                    **{f"end/{k}": v.clone() for k, v in extras["episode_end"].items()}})
    return out


def assert_same(reference: list[dict], other: list[dict], exact: list[dict] | None = None, tol: float = 1e-5) -> None:
    """``other`` gives ``reference``'s values (to ``tol``), dtypes and layouts, step by step; with ``exact``,
    ``other`` equals it bit for bit (determinism)."""
    assert sum(int(s["dones"].sum()) for s in reference) > 0, "the rollout must exercise resets"
    for i, (e, c) in enumerate(zip(reference, other)):
        for key in e:
            assert e[key].dtype == c[key].dtype and e[key].shape == c[key].shape, (i, key)
            if key in ("policy", "critic"):  # the fused step's are feature-major views (step_core.observation_groups)
                assert c[key].stride() == (1, c[key].shape[0]), (i, key, c[key].stride())
            else:
                assert e[key].is_contiguous() == c[key].is_contiguous(), (i, key)
            assert torch.allclose(e[key].double(), c[key].double(), atol=tol, rtol=tol), (i, key, (e[key].double() - c[key].double()).abs().max())
            if exact is not None:
                assert torch.equal(c[key], exact[i][key]), (i, key)
