"""The fused, compiled control step (PhysicsCfg.compile) against the eager step.

Same seed, same actions: the compiled path must give the eager path's observations, rewards,
dones and episode-end values (to float tolerance), resets included, and be deterministic. The
compiled path draws its observation noise from ``step_core.counter_gaussian`` (not from the
env's generator), so the eager reference runs with ``noise_stream="counter"``: the same noise
numbers and the same generator stream for the resets. The structure-of-arrays twins of the
physics and the observation terms, and the noise generator, are checked without compiling.
"""

from __future__ import annotations

import math

import pytest
import torch

from sim.envs import GotoEnv, GotoEnvCfg, dynamics
from sim.envs import step_core
from sim.envs.terms import observations as obs_terms


def _rollout(compile_step: bool, n: int = 8, steps: int = 40, uncompiled_graphs: bool = False):
    cfg = GotoEnvCfg()
    cfg.physics.compile = compile_step
    cfg.command.episode_length_s = 0.15  # time-outs every 15 steps: resets inside the rollout
    env = GotoEnv(cfg, num_envs=n, seed=3, noise_stream="counter")
    if uncompiled_graphs:  # the fused functions run eagerly: the same code, no compilation
        env._fused_step, env._fused_observations = step_core.fused_step, step_core.fused_observations
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


def _assert_same(reference, other, exact=None):
    assert sum(int(s["dones"].sum()) for s in reference) > 0, "the rollout must exercise resets"
    for i, (e, c) in enumerate(zip(reference, other)):
        for key in e:
            assert e[key].dtype == c[key].dtype and e[key].shape == c[key].shape, (i, key)
            assert e[key].is_contiguous() == c[key].is_contiguous(), (i, key)
            assert torch.allclose(e[key].double(), c[key].double(), atol=1e-5, rtol=1e-5), (i, key, (e[key].double() - c[key].double()).abs().max())
            if exact is not None:
                assert torch.equal(c[key], exact[i][key]), (i, key)


@pytest.mark.slow  # compiles two graphs (about 40-70 s on 2 shared cores)
def test_compiled_step_matches_eager_step_and_is_deterministic():
    eager, compiled, again = _rollout(False), _rollout(True), _rollout(True)
    _assert_same(eager, compiled, exact=again)


def test_structure_of_arrays_step_matches_eager_step_without_compiling():
    _assert_same(_rollout(False), _rollout(True, uncompiled_graphs=True))


def test_soa_physics_substep_matches_the_batched_one():
    n = 256
    g = torch.Generator().manual_seed(1)
    k = dynamics.RobotConstants.from_robot(GotoEnv(num_envs=1, seed=0).robot, "cpu")

    def r(*shape, lo=-1.0, hi=1.0):
        return lo + (hi - lo) * torch.rand(shape, generator=g)

    pos = r(n, 3, lo=-0.5, hi=1.0)  # some below the floor
    quat = torch.nn.functional.normalize(r(n, 4), dim=-1)
    vel, omega = r(n, 3) * 2, r(n, 3) * 20
    omega[:8] = 1e-7  # the small-angle branch of the exponential map
    rpm = r(n, 4, lo=k.rpm_min, hi=k.rpm_max)
    cmd = r(n, 4, lo=k.rpm_min, hi=k.rpm_max)
    alpha, kf = r(n, 1, lo=0.03, hi=0.2), k.thrust_coefficient * r(n, 1, lo=0.9, hi=1.1)
    ktau, mass = k.torque_to_thrust_m * r(n, 1, lo=0.9, hi=1.1), k.mass_kg * r(n, 1, lo=0.9, hi=1.1)
    inertia = k.inertia_kgm2 * r(n, 3, lo=0.85, hi=1.15)
    force, torque = r(n, 3) * 0.01, r(n, 3) * 5e-5
    consts = (0.005, 9.81, k.rpm_min, k.rpm_max, 0.0, 0.5)
    ref = dynamics.physics_substep(pos.clone(), quat, vel.clone(), omega, rpm, cmd, alpha, kf, ktau, mass, inertia, force, torque,
                                   k.rotor_xy, k.spin, *consts)
    rows = lambda t: tuple(t.t())  # noqa: E731
    soa = dynamics.physics_substep_soa(
        rows(pos), rows(quat), rows(vel), rows(omega), rows(rpm), rows(cmd), alpha[:, 0], kf[:, 0], ktau[:, 0], mass[:, 0],
        rows(inertia), rows(force), rows(torque), tuple(map(tuple, k.rotor_xy.tolist())), tuple(k.spin.tolist()), *consts,
    )
    for name, a, b in zip(("position", "quat", "velocity", "omega", "rpm"), ref[:5], soa[:5]):
        assert torch.allclose(a, torch.stack(b, dim=-1), rtol=1e-5, atol=1e-5 * float(a.abs().max())), name
    assert torch.equal(ref[5], soa[5]) and ref[5].any() and not ref[5].all()


def test_soa_observation_terms_match_the_terms():
    g = torch.Generator().manual_seed(2)
    inputs = {
        "position_w": torch.randn(64, 3, generator=g), "quat_wxyz": torch.nn.functional.normalize(torch.randn(64, 4, generator=g), dim=-1),
        "linear_velocity_w": torch.randn(64, 3, generator=g), "angular_velocity_b": torch.randn(64, 3, generator=g),
        "subgoal_w": torch.randn(64, 3, generator=g), "last_action": torch.rand(64, 4, generator=g),
    }
    soa_inputs = {key: tuple(v.t()) for key, v in inputs.items()}
    assert set(obs_terms.SOA_OBSERVATION_TERMS) == set(obs_terms.OBSERVATION_TERMS)
    for name, term in obs_terms.OBSERVATION_TERMS.items():
        assert torch.allclose(term(inputs), torch.stack(obs_terms.SOA_OBSERVATION_TERMS[name](soa_inputs), dim=-1), atol=1e-6), name


def test_counter_gaussian_is_standard_normal_and_keyed():
    key = torch.tensor(step_core.noise_key(3, 0), dtype=torch.int32)
    z = step_core.counter_gaussian(key, 18, 20000)
    assert z.shape == (18, 20000) and z.dtype == torch.float32
    assert torch.equal(z, step_core.counter_gaussian(key, 18, 20000))
    flat = z.flatten().double()
    assert abs(flat.mean().item()) < 0.005 and abs(flat.std().item() - 1.0) < 0.005
    assert abs(((flat - flat.mean()) ** 4).mean().item() / flat.var().item() ** 2 - 3.0) < 0.05  # kurtosis
    assert abs((flat.abs() < 1.0).double().mean().item() - math.erf(1 / math.sqrt(2))) < 0.005
    # rows, neighbouring environments and other keys (draws, seeds) are uncorrelated
    assert abs(torch.corrcoef(z[:2])[0, 1].item()) < 0.03 and abs(torch.corrcoef(z[9:11])[0, 1].item()) < 0.03
    assert abs(torch.corrcoef(torch.stack((z[0, :-1], z[0, 1:])))[0, 1].item()) < 0.03
    for other in (step_core.noise_key(3, 1), step_core.noise_key(4, 0)):
        w = step_core.counter_gaussian(torch.tensor(other, dtype=torch.int32), 18, 20000)
        assert abs(torch.corrcoef(torch.stack((z.flatten(), w.flatten())))[0, 1].item()) < 0.01
    assert len({step_core.noise_key(s, d) for s in range(20) for d in range(200)}) == 4000


def test_compiled_env_state_attributes_write_through():
    cfg = GotoEnvCfg()
    cfg.physics.compile = True
    env = GotoEnv(cfg, num_envs=4, seed=0)
    env._fused_step, env._fused_observations = step_core.fused_step, step_core.fused_observations
    env.position_w[1] = torch.tensor([0.5, -0.5, 3.0])
    env.goal_w[1] = torch.tensor([0.5, -0.5, 3.0])
    env.linear_velocity_w[1] = 0.0
    env.params["mass_scale"][1] = 1.05
    assert env._state[2, 1] == 3.0 and env._params_soa[0, 1] == 1.05
    env.step(torch.zeros(4, 4))
    assert abs(env.position_w[1, 2].item() - 3.0) < 0.01 and env.position_w.shape == (4, 3)
    assert env.action_buffer.shape == (4, 2, 4) and env.last_action.shape == (4, 4)


def test_noise_stream_choice():
    with pytest.raises(Exception, match="noise_stream"):
        GotoEnv(num_envs=2, seed=0, noise_stream="mersenne")
    cfg = GotoEnvCfg()
    cfg.physics.compile = True
    with pytest.raises(Exception, match="noise_stream"):
        GotoEnv(cfg, num_envs=2, seed=0, noise_stream="generator")
    assert GotoEnv(num_envs=2, seed=0).noise_stream == "generator" and GotoEnv(cfg, num_envs=2, seed=0).noise_stream == "counter"
