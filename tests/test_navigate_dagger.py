"""DAgger's fit (sim/agents/dagger_navigate.py): near-obstacle loss weighting, and the evaluation's failure classes
(sim/evaluate_navigate.py) that the weighting was chosen from."""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDict

from sim.agents.dagger_navigate import DaggerCfg, fit_student, near_obstacle_weight
from sim.evaluate_navigate import STUCK_RADIUS_M, STUCK_WINDOW_S, failure_class, stuck


def _actor(n_obs: int):
    from rsl_rl.models import MLPModel

    from sim.agents.ppo_navigate import ppo_navigate_cfg

    cfg = {k: v for k, v in ppo_navigate_cfg()["actor"].items() if k != "class_name"}
    cfg["obs_normalization"] = False
    return MLPModel(TensorDict({"policy": torch.zeros(1, n_obs)}, batch_size=[1]), {"actor": ["policy"]}, "actor", 2, **cfg)


def test_near_obstacle_weight_rises_from_near_m_to_the_robot_radius():
    cfg = DaggerCfg(near_weight=4.0, near_m=0.8)
    w = near_obstacle_weight(torch.tensor([2.0, 0.8, 0.45, 0.1, 0.0]), cfg, radius_m=0.1)
    assert torch.allclose(w, torch.tensor([1.0, 1.0, 3.0, 5.0, 5.0]))
    assert torch.all(near_obstacle_weight(torch.rand(100) * 3, DaggerCfg(near_weight=0.0), 0.1) == 1.0)


def test_weighted_fit_moves_the_student_toward_the_heavy_labels():
    """One observation, two contradicting labels: the plain fit lands on their mean (0.8), the weighted fit on the
    weighted mean (0.0): the near-obstacle labels are no longer averaged away."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 300 tiny steps: one thread (two contend with the shared machine's other work)
    try:
        _fit_both()
    finally:
        torch.set_num_threads(threads)


def _fit_both():
    x = torch.zeros(100, 5)
    y = torch.cat((torch.ones(90, 2), -torch.ones(10, 2)))
    cfg = DaggerCfg(epochs=60, minibatch=100, learning_rate=1e-2)
    for w, want in ((torch.ones(100), 0.8), (torch.cat((torch.ones(90), torch.full((10,), 9.0))), 0.0)):
        actor = _actor(5)
        opt = torch.optim.Adam(actor.mlp.parameters(), lr=cfg.learning_rate)
        fit_student(actor, opt, x, y, w / w.mean(), cfg)
        with torch.no_grad():
            got = actor(TensorDict({"policy": x[:1]}, batch_size=[1]))
        assert torch.allclose(got, torch.full((1, 2), want), atol=0.05), (want, got)


def test_failure_classes():
    dt = 0.5
    n = int(STUCK_WINDOW_S / dt)
    rng = np.random.default_rng(0)
    hover = np.c_[3.0 + rng.uniform(-1, 1, 3 * n) * 0.6 * STUCK_RADIUS_M, 4.0 + rng.uniform(-1, 1, 3 * n) * 0.6 * STUCK_RADIUS_M]
    assert stuck(hover, dt)
    travel = np.c_[np.arange(3 * n) * dt * 0.3, np.zeros(3 * n)]  # 0.3 m/s: 3 m in the window
    assert not stuck(travel, dt)
    assert not stuck(hover[: n - 1], dt)  # shorter than the window: not judged stuck
    # held in one spot for the window after travelling: stuck
    assert stuck(np.r_[travel, np.repeat(travel[-1:], n, axis=0)], dt)
    base = {"success": False, "collided": False, "time_out": False, "stuck": False}
    assert failure_class({**base, "success": True}) is None
    assert failure_class({**base, "collided": True}) == "collision"
    assert failure_class({**base, "time_out": True, "stuck": True}) == "dead_end"
    assert failure_class({**base, "time_out": True}) == "time_out"
