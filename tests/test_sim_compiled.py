"""The fused, compiled control step (PhysicsCfg.compile) against the eager step.

Same seed, same actions: the compiled path must give the eager path's observations, rewards,
dones and episode-end values (to float tolerance), resets included, and be deterministic.
"""

from __future__ import annotations

import pytest
import torch

from sim.envs import GotoEnv, GotoEnvCfg

pytestmark = pytest.mark.slow  # compiles two graphs (about 20-40 s on 2 shared cores)


def _rollout(compile_step: bool, n: int = 8, steps: int = 40):
    cfg = GotoEnvCfg()
    cfg.physics.compile = compile_step
    cfg.command.episode_length_s = 0.15  # time-outs every 15 steps: resets inside the rollout
    env = GotoEnv(cfg, num_envs=n, seed=3, noise_stream="counter")
    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(steps):
        a = (torch.rand(n, 4, generator=gen) * 2 - 1) * 1.5
        if i == 5:
            a[0] = float("nan")
            a[1, 0] = float("inf")
        obs, rew, dones, extras = env.step(a)
        out.append({"policy": obs["policy"].clone(), "critic": obs["critic"].clone(), "reward": rew.clone(), "dones": dones.clone(),
                    **{f"end/{k}": v.clone() for k, v in extras["episode_end"].items()}})
    return out


def test_compiled_step_matches_eager_step_and_is_deterministic():
    eager, compiled, again = _rollout(False), _rollout(True), _rollout(True)
    assert sum(int(s["dones"].sum()) for s in eager) > 0, "the rollout must exercise resets"
    for i, (e, c, a) in enumerate(zip(eager, compiled, again)):
        for key in e:
            assert e[key].dtype == c[key].dtype and e[key].shape == c[key].shape, (i, key)
            assert torch.allclose(e[key].double(), c[key].double(), atol=1e-5, rtol=1e-5), (i, key, (e[key].double() - c[key].double()).abs().max())
            assert torch.equal(c[key], a[key]), (i, key)
