"""The C control step (PhysicsCfg.native, sim/envs/native) against the torch step.

Built with the real C compiler; compared with the eager torch step on the counter-based streams
(the same numbers), with ``step_core.fused_control_step`` output by output on hostile inputs (NaN
and inf actions, non-finite states, floor contacts, time-outs), for several thread counts, and
through ``sim/train.py --native``. The generated part of the C (the layout enums, the actuator
chain, the parameter draws, the privileged columns: sim/envs/native/codegen.py) is regenerated and
diffed against the committed ``sim/envs/native/generated/``. Also: the errors of a missing
compiler, a corrupted cached library, a GPU device, and ``compile`` and ``native`` together.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_hrl.errors import ConfigError
from sim.envs import GotoEnv, GotoEnvCfg
from sim.envs import step_core
from sim.envs.native import NativeBuildError, NativeControlStep, build_library
from sim.envs.native.build import config_header, default_constants
from sim.envs.native.codegen import GENERATED_DIR, step_tables_header
from sim_step_helpers import assert_same, rollout

OUTPUT_NAMES = ("state", "params", "latency", "episode_length", "reward", "dones", "dones_long", "time_out", "crashed",
                "out_of_bounds", "distance", "speed", "success", "rms", "length_end", "policy", "critic", "stats",
                "obs_rows", "action_rows")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Builds go to a cache of this test session (one build per configuration)."""
    monkeypatch.setenv("ROBOT_HRL_CACHE", str(tmp_path_factory.getbasetemp() / "robot_hrl_cache"))


@pytest.mark.parametrize("randomize", [True, False])
def test_native_env_matches_the_eager_step(randomize):
    assert_same(rollout("eager", randomize=randomize), rollout("native", randomize=randomize))


def test_native_env_is_deterministic_across_thread_counts():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = rollout("native", n=600)  # 3 blocks of 256 environments
        torch.set_num_threads(2)
        two = rollout("native", n=600)
    finally:
        torch.set_num_threads(threads)
    assert_same(one, two, exact=one)


def _hostile_inputs(env: GotoEnv, seed: int):
    """A state after some steps, with NaN and inf states, floor contacts and episodes at their last step."""
    n = env.num_envs
    gen = torch.Generator().manual_seed(seed)
    state, params = env._state.clone(), env._params_soa.clone()
    latency, length = env._latency.clone(), env.episode_length_buf.clone()
    length[: n // 8] = env.max_episode_length - 1
    state[2, n // 8 : n // 4] = 0.0  # on the floor
    state[0, n // 4] = float("nan")
    state[11, n // 4 + 1] = float("inf")
    state[8, n // 4 + 2] = 1e30
    buffer = env.layout.buffer
    state[buffer] = torch.rand(state[buffer].shape, generator=gen) * 2 - 1
    actions = torch.randn(n, 4, generator=gen)
    actions[n // 2] = float("nan")
    actions[n // 2 + 1, 0] = float("inf")
    actions[n // 2 + 2, 3] = -float("inf")
    return actions, state, params, latency, length


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), disturbance=st.floats(0.0, 1.0), rate_weight=st.floats(-0.1, 0.0),
       start_scale=st.floats(0.0, 1.0), noise_key=st.integers(-(2**31), 2**31 - 1), reset_key=st.integers(-(2**31), 2**31 - 1))
def test_native_step_matches_fused_control_step_output_by_output(seed, disturbance, rate_weight, start_scale, noise_key, reset_key):
    cfg = GotoEnvCfg()
    cfg.physics.native = True
    env = GotoEnv(cfg, num_envs=300, seed=seed % 1000)
    actions, state, params, latency, length = _hostile_inputs(env, seed)
    scalars = torch.tensor([disturbance, rate_weight, start_scale, disturbance], dtype=torch.float32)
    keys = torch.tensor([noise_key, reset_key], dtype=torch.int32)
    expected = step_core.fused_control_step(env._fused, actions, state, params, latency, length, scalars, keys)
    got = env.backend.kernel(env._fused, actions, state, params, latency, length, scalars, keys)
    assert int(expected[5].sum()) > env.num_envs // 4, "the inputs must end episodes (time-outs, crashes)"
    for name, e, g in zip(OUTPUT_NAMES, expected, got):
        assert e.dtype == g.dtype and e.shape == g.shape, name
        assert torch.allclose(e.double(), g.double(), rtol=1e-4, atol=1e-4, equal_nan=True), (name, (e.double() - g.double()).abs().nan_to_num(0).max())


def test_outputs_stay_valid_until_the_step_after_next():
    """Two buffer sets used in turn: what a step returned is intact after the next step (rsl_rl keeps the
    observations it acted on until the transition is stored)."""
    cfg = GotoEnvCfg()
    cfg.physics.native = True
    env = GotoEnv(cfg, num_envs=64, seed=0)
    obs, rew, dones, _ = env.step(torch.zeros(64, 4))
    kept = (obs["policy"].clone(), rew.clone(), dones.clone())
    obs2, rew2, _, _ = env.step(torch.ones(64, 4) * 0.5)
    assert torch.equal(obs["policy"], kept[0]) and torch.equal(rew, kept[1]) and torch.equal(dones, kept[2])
    assert obs2["policy"].data_ptr() != obs["policy"].data_ptr() and not torch.equal(obs2["policy"], kept[0])


def test_library_is_cached_and_rebuilt_when_corrupted(monkeypatch, tmp_path):
    monkeypatch.setenv("ROBOT_HRL_CACHE", str(tmp_path))  # a cache no loaded library comes from
    cfg = GotoEnvCfg()
    fused = GotoEnv(cfg, num_envs=4, seed=0)._fused  # the eager env: its constants, nothing built or loaded
    path = build_library(fused)
    assert build_library(fused) == path  # the cache, not a second build
    path.unlink()
    path.write_bytes(b"not an ELF file")  # e.g. a build cut off by a full disk (a new file: never rewrite a loaded one)
    step = NativeControlStep(fused, 4)
    assert step.library_path == path and path.read_bytes()[:4] == b"\x7fELF"
    cfg.physics.native = True
    obs, _, _, _ = GotoEnv(cfg, num_envs=4, seed=0).step(torch.zeros(4, 4))
    assert torch.isfinite(obs["policy"]).all()


def test_missing_compiler_names_the_fix(monkeypatch, tmp_path):
    cfg = GotoEnvCfg()
    cfg.physics.native = True
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no cc, gcc or clang on it
    monkeypatch.setenv("ROBOT_HRL_CACHE", str(tmp_path / "empty_cache"))
    with pytest.raises(NativeBuildError, match="apt install gcc.*physics.native off"):
        GotoEnv(cfg, num_envs=4, seed=0)


def test_broken_compiler_output_is_reported(monkeypatch, tmp_path):
    fake = tmp_path / "cc"
    fake.write_text("#!/bin/sh\necho 'cc: internal error: out of memory' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setenv("ROBOT_HRL_CACHE", str(tmp_path / "cache"))
    cfg = GotoEnvCfg()
    cfg.physics.native = True
    with pytest.raises(NativeBuildError, match="(?s)building control_step.c failed.*out of memory"):
        GotoEnv(cfg, num_envs=4, seed=0)


def test_native_configuration_errors():
    cfg = GotoEnvCfg()
    cfg.physics.native = cfg.physics.compile = True
    with pytest.raises(ConfigError, match="set one of them"):
        GotoEnv(cfg, num_envs=4)
    cfg.physics.compile = False
    env = GotoEnv(cfg, num_envs=4, seed=0)
    with pytest.raises(ConfigError, match="runs on the CPU.*physics.compile"):
        NativeControlStep(env._fused, 4, "cuda")
    other = env._fused._replace(max_episode_length=7)
    with pytest.raises(ConfigError, match="other FusedConstants"):
        env.backend.kernel(other, torch.zeros(4, 4), env._state, env._params_soa, env._latency, env.episode_length_buf,
                           torch.zeros(4), torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"shape \(4, 4\)"):
        env.step(torch.zeros(3, 4))
    with pytest.raises(ConfigError, match="no C twin of observation term"):
        config_header(env._fused._replace(term_names=env._fused.term_names + ("lidar_scan",)))


def test_inputs_from_two_different_steps_are_refused():
    """State and parameters from the two buffer sets (one from each of two steps): the step would write over
    its own inputs, so it refuses and says what to pass."""
    cfg = GotoEnvCfg()
    cfg.physics.native = True
    env = GotoEnv(cfg, num_envs=4, seed=0)
    step = env.backend.kernel
    first = step(env._fused, torch.zeros(4, 4), env._state, env._params_soa, env._latency, env.episode_length_buf,
                 torch.zeros(4), torch.zeros(2, dtype=torch.int32))
    second = step(env._fused, torch.zeros(4, 4), *first[:4], torch.zeros(4), torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="mix the outputs of two different steps.*clones"):
        step(env._fused, torch.zeros(4, 4), first[0], second[1], first[2], first[3], torch.zeros(4), torch.zeros(2, dtype=torch.int32))
    # clones are foreign tensors: accepted
    out = step(env._fused, torch.zeros(4, 4), first[0].clone(), second[1].clone(), first[2].clone(), first[3].clone(),
               torch.zeros(4), torch.zeros(2, dtype=torch.int32))
    assert torch.isfinite(out[0]).all()


def test_header_carries_the_configuration():
    cfg = GotoEnvCfg()
    cfg.physics.native = True
    cfg.physics.physics_rate_hz = 500.0
    env = GotoEnv(cfg, num_envs=2, seed=0)
    header = config_header(env._fused)
    assert "#define DECIMATION 5" in header and f"#define MAX_EPISODE_LENGTH {env.max_episode_length}" in header
    assert f"#define PHYSICS_DT {float(env.physics_dt)!r}f" in header
    # a config differs in its digest, hence its library
    cfg2 = GotoEnvCfg()
    cfg2.physics.native = True
    assert build_library(GotoEnv(cfg2, num_envs=2, seed=0)._fused) != env.backend.kernel.library_path


@pytest.mark.parametrize("flags, native", [([], True), (["--native"], True), (["--eager"], False)])
def test_train_uses_the_native_step_by_default_on_the_cpu(tmp_path, flags, native):
    from sim.train import main

    run = tmp_path / "run"
    rc = main([*flags, "--num-envs", "64", "--max-iterations", "2", "--eval-episodes", "20", "--run-dir", str(run),
               "--no-progress", "--seed", "1"])
    assert rc == 0
    config = json.loads((run / "run_config.json").read_text())
    assert config["env_cfg"]["physics"]["native"] is native
    result = json.loads((run / "eval.json").read_text())
    assert result["env_steps"] == 2 * 64 * 16 and 0.0 <= result["success_rate"] <= 1.0
    assert math.isfinite(result["mean_final_position_error_m"])


def test_train_without_a_compiler_falls_back_to_eager(tmp_path, monkeypatch, capsys):
    from sim.train import main

    bin_dir = tmp_path / "bin"  # git (rsl_rl records the code state) but no cc, gcc or clang
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git"))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    run = tmp_path / "run"
    assert main(["--num-envs", "16", "--max-iterations", "1", "--eval-episodes", "4", "--run-dir", str(run), "--no-progress"]) == 0
    assert json.loads((run / "run_config.json").read_text())["env_cfg"]["physics"]["native"] is False
    assert "note: the eager simulator step: no C compiler was found" in capsys.readouterr().out


def test_state_attributes_write_through_to_the_next_step():
    """``env.position_w`` and the other attributes are views of the current buffer set: writes reach the next
    step, as on the compiled path (the safety and sim-to-sim tests place robots this way)."""
    cfg = GotoEnvCfg()
    cfg.physics.native = True
    env = GotoEnv(cfg, num_envs=4, seed=0)
    for _ in range(3):  # into the double-buffered sets
        env.step(torch.zeros(4, 4))
    env.position_w[1] = torch.tensor([0.5, -0.5, 3.0])
    env.goal_w[1] = torch.tensor([0.5, -0.5, 3.0])
    env.linear_velocity_w[1] = 0.0
    env.params["mass_scale"][1] = 1.05
    assert env._state[2, 1] == 3.0 and env._params_soa[0, 1] == 1.05
    _, _, dones, _ = env.step(torch.zeros(4, 4))
    assert not dones[1] and abs(env.position_w[1, 2].item() - 3.0) < 0.01 and env.params["mass_scale"][1] == 1.05


def test_generated_c_is_committed_and_current():
    """The C generated from the actuator chain and the layout table for the default configuration equals the
    committed sim/envs/native/generated/ (a chain or table change shows up as a reviewed C diff)."""
    f = default_constants()
    for name, text in (("step_config.h", config_header(f)), ("step_tables.h", step_tables_header(f))):
        committed = (GENERATED_DIR / name).read_text()
        assert text == committed, (
            f"sim/envs/native/generated/{name} is stale: regenerate it with `python -m sim.envs.native.regenerate` and commit it"
        )


def test_generated_c_follows_the_layout_table():
    """The C row enums and sizes are the layout's (one table), and the generated chain is the robot's chain."""
    f = default_constants()
    text = step_tables_header(f)
    L = f.layout
    for name, start, _ in L.state:
        assert f"ROW_{name.upper()} = {start}," in text
    for name, start, _ in L.params:
        assert f"P_{name.upper()} = {start}," in text
    assert f"STATE_ROWS = {L.num_rows}," in text and f"PARAM_ROWS = {L.num_params}," in text
    assert f"PRIVILEGED = {L.privileged_size}," in text and f"BUFFER = {L.buffer_start}," in text
    assert "robot_hrl.robots.crazyflie_2x.actuators.substep" in text
    # another configuration: the literals follow it (a wider motor-lag range in the draws, another physics rate)
    cfg = GotoEnvCfg()
    cfg.physics.physics_rate_hz = 500.0
    cfg.randomization.motor_time_constant_train_range_s = None
    env = GotoEnv(cfg, num_envs=2, seed=0)
    other = step_tables_header(env._fused)
    assert other != text and "-0.002f / param[2]" in other and "-0.005f / param[2]" in text
