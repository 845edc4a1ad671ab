"""The compiled control step (PhysicsCfg.compile) against the eager step: one function, two backends.

Same seed, same actions: the compiled graph must give the eager backend's observations, rewards,
dones and episode-end values (to float tolerance), resets included, and be deterministic. Both draw
their observation noise (``counter_random.counter_gaussian``) and their resets
(``step_core.reset_draws``) from the counter-based streams: the same numbers. The rigid body against
an independent array-of-structs formulation, the structure-of-arrays observation terms, the noise
generator and the reset draws (ranges, and the distributions of plain generator draws) are checked
without compiling.
"""

from __future__ import annotations

import math

import pytest
import torch

from robot_hrl.errors import ConfigError
from sim.envs import GotoEnv, GotoEnvCfg, dynamics
from sim.envs import step_core
from sim.envs.backends import CompiledStep, EagerStep, NativeStep
from sim.envs.counter_random import NOISE_STREAM, RESET_STREAM, counter_gaussian, counter_key, noise_key
from sim.envs.math_utils import quat_from_rotvec, quat_mul
from sim.envs.terms import observations as obs_terms
from sim_step_helpers import assert_same as _assert_same
from sim_step_helpers import reference_reset_draws, rollout


@pytest.mark.slow  # compiles two graphs (about 40-70 s on 2 shared cores)
def test_compiled_step_matches_eager_step_and_is_deterministic():
    eager, compiled, again = rollout("eager"), rollout("compile"), rollout("compile")
    _assert_same(eager, compiled, exact=again)


def test_compiled_path_matches_the_eager_backend_bit_for_bit_without_compiling():
    """The function the compile backend compiles (resets drawn for every environment, kept with ``where``), run
    uncompiled, gives the eager backend's numbers exactly (resets drawn for the finished environments only)."""
    eager = rollout("eager")
    _assert_same(eager, rollout("compile", uncompiled_graphs=True), exact=eager)


def _reference_rigid_body(pos, quat, vel, omega, thrust, tau_rotors, mass, inertia, force, torque, dt, gravity, floor_z, friction):
    """The rigid body in array-of-structs form with math_utils' quaternion product and exponential map and
    torch's cross product: an independent formulation of ``dynamics.rigid_body_substep``'s equations."""
    tau = tau_rotors + torque
    w, x, y, z = quat.unbind(-1)
    body_z_w = torch.stack((2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)), dim=-1)
    acc = (body_z_w * thrust + force) / mass
    acc[:, 2] -= gravity
    vel = vel + acc * dt
    pos = pos + vel * dt
    omega = omega + (tau - torch.linalg.cross(omega, inertia * omega, dim=-1)) / inertia * dt
    quat = quat_mul(quat, quat_from_rotvec(omega * dt))
    quat = quat / torch.linalg.vector_norm(quat, dim=-1, keepdim=True)
    contact = pos[:, 2] <= floor_z
    pos[:, 2].clamp_(min=floor_z)
    keep = 1.0 - friction * contact.unsqueeze(-1).to(vel.dtype)
    vel[:, 2] = torch.where(contact, vel[:, 2].clamp(min=0.0), vel[:, 2])
    vel[:, :2] *= keep
    return pos, quat, vel, omega * keep, contact


def test_rigid_body_substep_matches_an_array_of_structs_formulation():
    n = 256
    g = torch.Generator().manual_seed(1)

    def r(*shape, lo=-1.0, hi=1.0):
        return lo + (hi - lo) * torch.rand(shape, generator=g)

    pos = r(n, 3, lo=-0.5, hi=1.0)  # some below the floor
    quat = torch.nn.functional.normalize(r(n, 4), dim=-1)
    vel, omega = r(n, 3) * 2, r(n, 3) * 20
    omega[:8] = 1e-7  # the small-angle branch of the exponential map
    thrust, tau = r(n, 1, lo=0.0, hi=0.6), r(n, 3) * 5e-3
    mass, inertia = 0.027 * r(n, 1, lo=0.9, hi=1.1), torch.tensor([1.66e-5, 1.67e-5, 2.93e-5]) * r(n, 3, lo=0.85, hi=1.15)
    force, torque = r(n, 3) * 0.01, r(n, 3) * 5e-5
    consts = (0.005, 9.81, 0.0, 0.5)
    ref = _reference_rigid_body(pos.clone(), quat, vel.clone(), omega, thrust, tau, mass, inertia, force, torque, *consts)
    rows = lambda t: tuple(t.t())  # noqa: E731
    soa = dynamics.rigid_body_substep(rows(pos), rows(quat), rows(vel), rows(omega), thrust[:, 0], rows(tau), mass[:, 0],
                                      rows(inertia), rows(force), rows(torque), *consts)
    for name, a, b in zip(("position", "quat", "velocity", "omega"), ref[:4], soa[:4]):
        assert torch.allclose(a, torch.stack(b, dim=-1), rtol=1e-5, atol=1e-5 * float(a.abs().max())), name
    assert torch.equal(ref[4], soa[4]) and ref[4].any() and not ref[4].all()


def test_soa_observation_terms_match_the_terms():
    g = torch.Generator().manual_seed(2)
    inputs = {
        "position_w": torch.randn(64, 3, generator=g), "quat_wxyz": torch.nn.functional.normalize(torch.randn(64, 4, generator=g), dim=-1),
        "linear_velocity_w": torch.randn(64, 3, generator=g), "angular_velocity_b": torch.randn(64, 3, generator=g),
        "subgoal_w": torch.randn(64, 3, generator=g), "last_action": torch.rand(64, 4, generator=g),
        "position_error_integral": torch.randn(64, 3, generator=g),
    }
    soa_inputs = {key: tuple(v.t()) for key, v in inputs.items()}
    assert set(obs_terms.SOA_OBSERVATION_TERMS) == set(obs_terms.OBSERVATION_TERMS)
    for name, term in obs_terms.OBSERVATION_TERMS.items():
        assert torch.allclose(term(inputs), torch.stack(obs_terms.SOA_OBSERVATION_TERMS[name](soa_inputs), dim=-1), atol=1e-6), name


def test_counter_gaussian_is_standard_normal_and_keyed():
    key = torch.tensor(noise_key(3, 0), dtype=torch.int32)
    z = counter_gaussian(key, 18, 20000)
    assert z.shape == (18, 20000) and z.dtype == torch.float32
    assert torch.equal(z, counter_gaussian(key, 18, 20000))
    flat = z.flatten().double()
    assert abs(flat.mean().item()) < 0.005 and abs(flat.std().item() - 1.0) < 0.005
    assert abs(((flat - flat.mean()) ** 4).mean().item() / flat.var().item() ** 2 - 3.0) < 0.05  # kurtosis
    assert abs((flat.abs() < 1.0).double().mean().item() - math.erf(1 / math.sqrt(2))) < 0.005
    # rows, neighbouring environments and other keys (draws, seeds) are uncorrelated
    assert abs(torch.corrcoef(z[:2])[0, 1].item()) < 0.03 and abs(torch.corrcoef(z[9:11])[0, 1].item()) < 0.03
    assert abs(torch.corrcoef(torch.stack((z[0, :-1], z[0, 1:])))[0, 1].item()) < 0.03
    for other in (noise_key(3, 1), noise_key(4, 0)):
        w = counter_gaussian(torch.tensor(other, dtype=torch.int32), 18, 20000)
        assert abs(torch.corrcoef(torch.stack((z.flatten(), w.flatten())))[0, 1].item()) < 0.01
    assert len({noise_key(s, d) for s in range(20) for d in range(200)}) == 4000


def test_compiled_env_state_attributes_write_through():
    cfg = GotoEnvCfg()
    cfg.physics.compile = True
    env = GotoEnv(cfg, num_envs=4, seed=0)
    env.backend = CompiledStep(env._fused, env.device, compile=False)
    env.position_w[1] = torch.tensor([0.5, -0.5, 3.0])
    env.goal_w[1] = torch.tensor([0.5, -0.5, 3.0])
    env.linear_velocity_w[1] = 0.0
    env.params["mass_scale"][1] = 1.05
    assert env._state[2, 1] == 3.0 and env._params_soa[0, 1] == 1.05
    env.step(torch.zeros(4, 4))
    assert abs(env.position_w[1, 2].item() - 3.0) < 0.01 and env.position_w.shape == (4, 3)
    assert env.action_buffer.shape == (4, 2, 4) and env.last_action.shape == (4, 4)


def test_backend_choice():
    """PhysicsCfg picks the backend; every backend runs the same function on the same state layout."""
    cfg = GotoEnvCfg()
    assert isinstance(GotoEnv(cfg, num_envs=2, seed=0).backend, EagerStep)
    cfg.physics.compile = True
    env = GotoEnv(cfg, num_envs=2, seed=0)  # (compiled on the first step: not stepped here)
    assert isinstance(env.backend, CompiledStep) and env.backend_name == "compile"
    cfg.physics.compile, cfg.physics.native = False, True
    assert isinstance(GotoEnv(cfg, num_envs=2, seed=0).backend, NativeStep)
    cfg.physics.compile = True
    with pytest.raises(ConfigError, match="set one of them"):
        GotoEnv(cfg, num_envs=2, seed=0)


def _wide_randomization() -> GotoEnvCfg:
    cfg = GotoEnvCfg()
    r = cfg.randomization
    r.mass_scale_range = (0.8, 1.3)
    r.motor_time_constant_range_s = (0.02, 0.15)
    r.motor_time_constant_train_range_s = None
    r.action_latency_steps_range = (1, 3)
    return cfg


def _counter_draws(env: GotoEnv, n: int, start_scale: float):
    key = torch.tensor(counter_key(7, 0, RESET_STREAM), dtype=torch.int32)
    state, params, latency = step_core.reset_draws(env._fused, key, torch.arange(n, dtype=torch.int32), torch.tensor(start_scale))
    return torch.stack(state), torch.stack(params), latency


def _quantities(env: GotoEnv, state: torch.Tensor, params: torch.Tensor) -> dict[str, torch.Tensor]:
    L = env.layout
    pos, quat, vel, omega, goal = (state[L.rows(n)] for n in ("position_w", "quat_wxyz", "linear_velocity_w", "angular_velocity_b", "goal_w"))
    return {
        "x": pos[0], "z": pos[2], "tilt": torch.acos((1 - 2 * (quat[1] ** 2 + quat[2] ** 2)).clamp(-1, 1)),
        "yaw": torch.atan2(2 * (quat[0] * quat[3] + quat[1] * quat[2]), 1 - 2 * (quat[2] ** 2 + quat[3] ** 2)),
        "speed": vel.norm(dim=0), "vel_z": vel[2], "omega_x": omega[0], "goal_distance": (goal - pos).norm(dim=0),
        "goal_dz": goal[2] - pos[2], "mass": params[0], "inertia_y": params[2], "kf": params[4], "ktau": params[5],
        "log_tau": params[6].log(), "force": params[L.param_rows("disturbance_force_w")].norm(dim=0),
        "force_z": params[L.param_rows("disturbance_force_w").stop - 1], "torque_z": params[L.param_rows("disturbance_torque_b").stop - 1],
        "rpm": state[L.rows("rotor_speed_rpm").start],
    }


@pytest.mark.parametrize("start_scale", [1.0, 0.3])
def test_counter_reset_draws_follow_the_configured_distributions(start_scale):
    """The counter-based reset draws: inside the configured ranges and distributed as plain generator draws are."""
    cfg = _wide_randomization()
    env = GotoEnv(cfg, num_envs=1, seed=0)
    n = 40000
    state, params, latency = _counter_draws(env, n, start_scale)
    r, cmd = cfg.randomization, cfg.command

    def inside(t, lo, hi, reach=True):  # inside [lo, hi]; reach: comes within 1 % of both ends
        span = hi - lo
        ok = t.min().item() >= lo - 1e-6 and t.max().item() <= hi + 1e-6
        return ok and (not reach or (t.min().item() < lo + 0.01 * span and t.max().item() > hi - 0.01 * span))

    q = _quantities(env, state, params)
    assert inside(q["mass"], 0.8, 1.3) and inside(q["inertia_y"], *r.inertia_scale_range)
    assert inside(q["kf"], *r.thrust_coefficient_scale_range) and inside(q["ktau"], *r.torque_coefficient_scale_range)
    assert inside(params[6], 0.02, 0.15) and inside(q["force"], 0.0, r.max_disturbance_force_n)
    assert inside(params[env.layout.param_rows("disturbance_torque_b")].flatten(), -r.max_disturbance_torque_nm, r.max_disturbance_torque_nm)
    counts = torch.bincount(latency, minlength=4)
    assert latency.dtype == torch.long and counts[0] == 0 and (counts[1:] - n / 3).abs().max() < 0.02 * n
    assert inside(state[0:2].flatten(), -cmd.spawn_xy_half_extent_m, cmd.spawn_xy_half_extent_m)
    assert inside(q["z"], *cmd.spawn_height_range_m)
    assert torch.allclose(state[3:7].norm(dim=0), torch.ones(n), atol=1e-5)
    assert inside(q["tilt"], 0.0, cmd.max_initial_tilt_rad * start_scale)
    assert inside(q["speed"], 0.0, cmd.max_initial_speed_mps * start_scale)
    assert inside(state[10:13].flatten(), -cmd.max_initial_body_rate_radps * start_scale, cmd.max_initial_body_rate_radps * start_scale)
    assert inside(q["goal_distance"], 0.0, cmd.subgoal_radius_m, reach=False) and q["goal_distance"].max() > 0.99 * cmd.subgoal_radius_m and (state[env.layout.rows("goal_w").stop - 1] >= cmd.min_goal_height_m - 1e-6).all()
    hover = torch.sqrt(env.robot.mass_kg * params[0] * cfg.physics.gravity_mps2 / (4 * env.robot.thrust_coefficient_n_per_rpm2 * params[4]))
    assert torch.allclose(state[13:17], hover.expand(4, n), rtol=1e-5)
    # the same distributions as plain generator draws (quantiles of every drawn quantity)
    g_state, g_params, g_latency = reference_reset_draws(env, n, start_scale, torch.Generator().manual_seed(0))
    g = _quantities(env, g_state, g_params)
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
    key = torch.tensor(counter_key(7, 0, RESET_STREAM), dtype=torch.int32)
    sub = step_core.reset_draws(env._fused, key, ids, torch.tensor(1.0))
    assert torch.equal(torch.stack(sub[0]), state[:, ids.long()]) and torch.equal(sub[2], latency[ids.long()])
    other = step_core.reset_draws(env._fused, torch.tensor(counter_key(7, 1, RESET_STREAM), dtype=torch.int32), ids, torch.tensor(1.0))
    assert not torch.equal(torch.stack(other[0]), torch.stack(sub[0]))
    assert counter_key(7, 0, RESET_STREAM) != counter_key(7, 0, NOISE_STREAM)
    assert counter_key(7, 3) == noise_key(7, 3)


def test_compiled_path_resets_stay_inside_configured_ranges():
    """A compiled env (its function run uncompiled) after many crashes and resets; and nominal without randomization."""
    cfg = _wide_randomization()
    cfg.physics.compile = True
    cfg.command.episode_length_s = 0.1  # time-outs every 10 steps
    env = GotoEnv(cfg, num_envs=2048, seed=5)
    env.backend = CompiledStep(env._fused, env.device, compile=False)
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
    env.backend = CompiledStep(env._fused, env.device, compile=False)
    for _ in range(3):
        env.step(-torch.ones(16, 4))
    assert torch.all(env.params["mass_scale"] == 1) and torch.all(env.params["disturbance_force_w"] == 0)
    assert torch.all(env.params["action_latency_steps"] == 0)
    assert torch.allclose(env.params["motor_time_constant_s"], torch.tensor(env.robot.motor_time_constant_s))
