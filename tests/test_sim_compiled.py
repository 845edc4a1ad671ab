"""The fused, compiled control step (PhysicsCfg.compile) against the eager step.

Same seed, same actions: the compiled path must give the eager path's observations, rewards,
dones and episode-end values (to float tolerance), resets included, and be deterministic. The
compiled path draws its observation noise (``step_core.counter_gaussian``) and its resets
(``step_core.reset_draws``) from counter-based streams, not from the env's generator, so the eager
reference runs with ``noise_stream="counter", reset_stream="counter"``: the same numbers. The
structure-of-arrays twins of the physics and the observation terms, the noise generator and the
reset draws (ranges, and the eager generator's distributions) are checked without compiling.
"""

from __future__ import annotations

import math

import pytest
import torch

from sim.envs import GotoEnv, GotoEnvCfg, dynamics
from sim.envs import step_core
from sim.envs.terms import observations as obs_terms
from sim_step_helpers import assert_same as _assert_same
from sim_step_helpers import rollout


@pytest.mark.slow  # compiles two graphs (about 40-70 s on 2 shared cores)
def test_compiled_step_matches_eager_step_and_is_deterministic():
    eager, compiled, again = rollout("eager"), rollout("compile"), rollout("compile")
    _assert_same(eager, compiled, exact=again)


def test_structure_of_arrays_step_matches_eager_step_without_compiling():
    _assert_same(rollout("eager"), rollout("compile", uncompiled_graphs=True))


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
    env._fused_control = step_core.fused_control_step
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
    with pytest.raises(Exception, match="reset_stream"):
        GotoEnv(cfg, num_envs=2, seed=0, reset_stream="generator")
    with pytest.raises(Exception, match="reset_stream"):
        GotoEnv(num_envs=2, seed=0, reset_stream="philox")
    eager, compiled = GotoEnv(num_envs=2, seed=0), GotoEnv(cfg, num_envs=2, seed=0)
    assert (eager.noise_stream, eager.reset_stream) == ("generator", "generator")
    assert (compiled.noise_stream, compiled.reset_stream) == ("counter", "counter")


def _wide_randomization() -> GotoEnvCfg:
    cfg = GotoEnvCfg()
    r = cfg.randomization
    r.mass_scale_range = (0.8, 1.3)
    r.motor_time_constant_range_s = (0.02, 0.15)
    r.motor_time_constant_train_range_s = None
    r.action_latency_steps_range = (1, 3)
    return cfg


def _counter_draws(env: GotoEnv, n: int, start_scale: float):
    key = torch.tensor(step_core.counter_key(7, 0, step_core.RESET_STREAM), dtype=torch.int32)
    state, params, latency = step_core.reset_draws(env._fused, key, torch.arange(n, dtype=torch.int32), torch.tensor(start_scale))
    return torch.stack(state), torch.stack(params), latency


def _quantities(state: torch.Tensor, params: torch.Tensor) -> dict[str, torch.Tensor]:
    L = step_core.StateLayout
    pos, quat, vel, omega, goal = state[L.POS], state[L.QUAT], state[L.VEL], state[L.OMEGA], state[L.GOAL]
    return {
        "x": pos[0], "z": pos[2], "tilt": torch.acos((1 - 2 * (quat[1] ** 2 + quat[2] ** 2)).clamp(-1, 1)),
        "yaw": torch.atan2(2 * (quat[0] * quat[3] + quat[1] * quat[2]), 1 - 2 * (quat[2] ** 2 + quat[3] ** 2)),
        "speed": vel.norm(dim=0), "vel_z": vel[2], "omega_x": omega[0], "goal_distance": (goal - pos).norm(dim=0),
        "goal_dz": goal[2] - pos[2], "mass": params[0], "inertia_y": params[2], "kf": params[4], "ktau": params[5],
        "log_tau": params[6].log(), "force": params[7:10].norm(dim=0), "force_z": params[9], "torque_z": params[12],
        "rpm": state[L.RPM.start],
    }


@pytest.mark.parametrize("start_scale", [1.0, 0.3])
def test_counter_reset_draws_follow_the_configured_distributions(start_scale):
    """The compiled path's reset draws: inside the configured ranges and distributed as the eager generator's."""
    cfg = _wide_randomization()
    env = GotoEnv(cfg, num_envs=1, seed=0)
    n = 40000
    state, params, latency = _counter_draws(env, n, start_scale)
    r, cmd = cfg.randomization, cfg.command

    def inside(t, lo, hi, reach=True):  # inside [lo, hi]; reach: comes within 1 % of both ends
        span = hi - lo
        ok = t.min().item() >= lo - 1e-6 and t.max().item() <= hi + 1e-6
        return ok and (not reach or (t.min().item() < lo + 0.01 * span and t.max().item() > hi - 0.01 * span))

    q = _quantities(state, params)
    assert inside(q["mass"], 0.8, 1.3) and inside(q["inertia_y"], *r.inertia_scale_range)
    assert inside(q["kf"], *r.thrust_coefficient_scale_range) and inside(q["ktau"], *r.torque_coefficient_scale_range)
    assert inside(params[6], 0.02, 0.15) and inside(q["force"], 0.0, r.max_disturbance_force_n)
    assert inside(params[10:13].flatten(), -r.max_disturbance_torque_nm, r.max_disturbance_torque_nm)
    counts = torch.bincount(latency, minlength=4)
    assert latency.dtype == torch.long and counts[0] == 0 and (counts[1:] - n / 3).abs().max() < 0.02 * n
    assert inside(state[0:2].flatten(), -cmd.spawn_xy_half_extent_m, cmd.spawn_xy_half_extent_m)
    assert inside(q["z"], *cmd.spawn_height_range_m)
    assert torch.allclose(state[3:7].norm(dim=0), torch.ones(n), atol=1e-5)
    assert inside(q["tilt"], 0.0, cmd.max_initial_tilt_rad * start_scale)
    assert inside(q["speed"], 0.0, cmd.max_initial_speed_mps * start_scale)
    assert inside(state[10:13].flatten(), -cmd.max_initial_body_rate_radps * start_scale, cmd.max_initial_body_rate_radps * start_scale)
    assert inside(q["goal_distance"], 0.0, cmd.subgoal_radius_m, reach=False) and q["goal_distance"].max() > 0.99 * cmd.subgoal_radius_m and (state[19] >= cmd.min_goal_height_m - 1e-6).all()
    hover = torch.sqrt(env.k.mass_kg * params[0] * cfg.physics.gravity_mps2 / (4 * env.k.thrust_coefficient * params[4]))
    assert torch.allclose(state[13:17], hover.expand(4, n), rtol=1e-5)
    # the same distributions as the eager path's generator draws (quantiles of every drawn quantity)
    g_state, g_params, g_latency = env._generator_reset_draws(n, start_scale)
    g = _quantities(g_state, g_params)
    probs = torch.linspace(0.05, 0.95, 19)
    for name, values in q.items():
        a, b = torch.quantile(values.double(), probs.double()), torch.quantile(g[name].double(), probs.double())
        spread = (torch.quantile(g[name].double(), 0.99) - torch.quantile(g[name].double(), 0.01)).item()
        assert (a - b).abs().max().item() < 0.02 * spread, (name, (a - b).abs().max().item(), spread)
    assert (torch.bincount(g_latency, minlength=4) - counts).abs().max() < 0.02 * n


def test_counter_reset_draws_are_per_environment_and_keyed():
    env = GotoEnv(num_envs=1, seed=0)
    state, params, latency = _counter_draws(env, 64, 1.0)
    ids = torch.tensor([5, 17, 63], dtype=torch.int32)
    key = torch.tensor(step_core.counter_key(7, 0, step_core.RESET_STREAM), dtype=torch.int32)
    sub = step_core.reset_draws(env._fused, key, ids, torch.tensor(1.0))
    assert torch.equal(torch.stack(sub[0]), state[:, ids.long()]) and torch.equal(sub[2], latency[ids.long()])
    other = step_core.reset_draws(env._fused, torch.tensor(step_core.counter_key(7, 1, step_core.RESET_STREAM), dtype=torch.int32),
                                  ids, torch.tensor(1.0))
    assert not torch.equal(torch.stack(other[0]), torch.stack(sub[0]))
    assert step_core.counter_key(7, 0, step_core.RESET_STREAM) != step_core.counter_key(7, 0, step_core.NOISE_STREAM)
    assert step_core.counter_key(7, 3) == step_core.noise_key(7, 3)


def test_compiled_path_resets_stay_inside_configured_ranges():
    """A compiled env (its fused function run eagerly) after many crashes and resets; and nominal without randomization."""
    cfg = _wide_randomization()
    cfg.physics.compile = True
    cfg.command.episode_length_s = 0.1  # time-outs every 10 steps
    env = GotoEnv(cfg, num_envs=2048, seed=5)
    env._fused_control = step_core.fused_control_step
    ended = 0
    for _ in range(30):
        _, _, dones, extras = env.step(-torch.ones(2048, 4))
        ended += int(dones.sum())
        assert (env.episode_length_buf[dones.bool()] == 0).all() and (env.last_action[dones.bool()] == 0).all()
    assert ended > 2048
    p = env.params
    assert p["mass_scale"].min() >= 0.8 - 1e-6 and p["mass_scale"].max() <= 1.3 + 1e-6
    assert p["motor_time_constant_s"].min() >= 0.02 - 1e-6 and p["motor_time_constant_s"].max() <= 0.15 + 1e-6
    assert set(p["action_latency_steps"].unique().tolist()) == {1, 2, 3}
    cfg = GotoEnvCfg()
    cfg.physics.compile = True
    cfg.randomization.enabled = False
    env = GotoEnv(cfg, num_envs=16, seed=6)
    env._fused_control = step_core.fused_control_step
    for _ in range(3):
        env.step(-torch.ones(16, 4))
    assert torch.all(env.params["mass_scale"] == 1) and torch.all(env.params["disturbance_force_w"] == 0)
    assert torch.all(env.params["action_latency_steps"] == 0)
    assert torch.allclose(env.params["motor_time_constant_s"], torch.tensor(env.k.motor_time_constant_s))
