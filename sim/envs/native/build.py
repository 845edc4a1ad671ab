"""Build ``control_step.c`` for one environment configuration, with the system C compiler.

Every configuration value becomes a literal of a generated header (``step_config.h``), so the
compiler folds them as inductor does for the compiled graph; the layout, the actuator chain, the
parameter draws and the privileged columns are generated C (``step_tables.h``, codegen.py). The shared library is cached under
``$ROBOT_HRL_CACHE`` (default ``~/.cache/robot_hrl``) in ``native/<digest>/``, where the digest
covers the header, the source, the compiler, its flags and the CPU (the build uses
``-march=native``); a build takes ~1 s, a cached one is only loaded.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from robot_hrl.contract.error_integral import MIN_HEADING_NORM
from robot_hrl.errors import ConfigError
from sim.envs.native.codegen import c_double, c_float, step_tables_header
from sim.envs.step_constants import FusedConstants

SOURCE = Path(__file__).with_name("control_step.c")
VECTOR_MATH = Path(__file__).with_name("vector_math.h")
COUNTER_RANDOM = Path(__file__).with_name("counter_random.h")

FLAGS = ("-O3", "-march=native", "-std=gnu11", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off")
"""No -ffast-math: NaN actions and non-finite states must keep torch's semantics (see control_step.c).
No FMA contraction: the results stay within float rounding of torch's, which has none either."""
OPENMP_FLAGS = ("-fopenmp",)

TERM_SIZES = {"subgoal_error_w": 3, "rotation_matrix_wb": 9, "linear_velocity_w": 3, "angular_velocity_b": 3, "last_action": 4,
              "position_error_integral": 3}
"""The contract's observation terms control_step.c implements, and their columns."""


class NativeBuildError(ConfigError):
    """The native step could not be built (no C compiler, or the compile failed)."""


def _array(declarator: str, values) -> str:
    """A C float array of ``values``: ``static const float <declarator> = {...};``."""
    return f"static const float {declarator} = {{{', '.join(map(c_float, values))}}};"


def config_header(f: FusedConstants) -> str:
    """The ``step_config.h`` of a configuration: its constants as C literals (the generated functions of
    ``codegen.step_tables_header`` carry the chain's and the parameter distributions' own)."""
    unknown = [t for t in f.term_names if t not in TERM_SIZES]
    if unknown:
        raise ConfigError(f"the native step has no C twin of observation term(s) {unknown}; add them to "
                          f"sim/envs/native/control_step.c (observation_block) or leave physics.native off")
    c, r = f.step, f.reset
    offsets, k = {}, 0
    for name in f.term_names:
        offsets[name] = k
        k += TERM_SIZES[name] if name != "last_action" else f.layout.num_actions
    if k != len(f.obs_low):
        raise ConfigError(f"the observation terms {f.term_names} have {k} columns, the clip bounds {len(f.obs_low)}")
    noisy = [i for i, s in enumerate(f.noise_std) if s > 0.0]
    pairs = (len(noisy) + 1) // 2
    noisy_cols = noisy + [-1] * (2 * pairs - len(noisy)) if pairs else [-1, -1]
    # float constants (float literals, as torch's float32 constants)
    floats = {
        "PHYSICS_DT": c.physics_dt, "GRAVITY": c.gravity, "FLOOR_Z": c.floor_z, "GROUND_FRICTION": c.ground_friction,
        "CONTACT_HEIGHT": c.contact_height, "OUT_OF_BOUNDS_DISTANCE_M": c.out_of_bounds_distance_m, "CEILING_M": c.ceiling_m,
        "POSITION_TOLERANCE_M": c.position_tolerance_m, "SPEED_TOLERANCE_MPS": c.speed_tolerance_mps,
        "POSITION_COARSE_WEIGHT": c.position_coarse_weight, "POSITION_COARSE_SCALE_M": c.position_coarse_scale_m,
        "POSITION_FINE_WEIGHT": c.position_fine_weight, "POSITION_FINE_SCALE_M": c.position_fine_scale_m,
        "VELOCITY_WEIGHT": c.velocity_weight, "ANGULAR_VELOCITY_WEIGHT": c.angular_velocity_weight,
        "TILT_WEIGHT": c.tilt_weight, "TERMINATION_WEIGHT": c.termination_weight,
        # the rigid body
        "MASS_KG": f.mass_kg, **{f"INERTIA_{axis}": v for axis, v in zip("XYZ", f.inertia_kgm2)},
        # resets
        "MAX_INITIAL_TILT_RAD": r.max_initial_tilt_rad, "MAX_INITIAL_SPEED_MPS": r.max_initial_speed_mps,
        "MAX_INITIAL_BODY_RATE_RADPS": r.max_initial_body_rate_radps, "SUBGOAL_RADIUS_M": r.subgoal_radius_m,
        "MIN_GOAL_HEIGHT_M": r.min_goal_height_m,
        # the position error's integral (robot_hrl.contract.error_integral)
        "INTEGRAL_DECAY": c.integral_decay, "INTEGRAL_DT_S": c.integral_dt_s, "INTEGRAL_LIMIT_M_S": c.integral_limit_m_s,
        "MIN_HEADING_NORM": MIN_HEADING_NORM,
        "INTEGRAL_ACTIVE_RADIUS_SQ_M2": c.integral_active_radius_sq_m2 or 0.0,
    }
    ints = {
        "DECIMATION": c.decimation, "INTEGRAL_YAW_FRAME": bool(c.integral_yaw_frame),
        "INTEGRAL_GATED": c.integral_active_radius_sq_m2 is not None, "TERMINATE_ON_GROUND_CONTACT": bool(c.terminate_on_ground_contact),
        "MAX_EPISODE_LENGTH": f.max_episode_length, "LATENCY_SLOTS": f.layout.latency_slots, "RANDOMIZE": bool(r.randomize),
        "LATENCY_LO": r.action_latency_steps_range[0], "LATENCY_HI": r.action_latency_steps_range[1],
        "OBS_POLICY": len(f.obs_low), "OBS_CRITIC": len(f.obs_low) + f.layout.privileged_size, "NOISE_PAIRS": pairs,
        **{f"TERM_{name.upper()}": offsets.get(name, -1) for name in TERM_SIZES},
    }
    na = f.layout.num_actions
    lines = [
        "/* generated by sim/envs/native/build.py from the environment's FusedConstants; do not edit */",
        "#pragma once",
        *(f"#define {name} {c_float(v)}" for name, v in floats.items()),
        # the ends of the start-state draws, as doubles: control_step.c's BETWEEN takes the span in double, as torch
        f"#define SPAWN_HEIGHT_LO {c_double(r.spawn_height_range_m[0])}",
        f"#define SPAWN_HEIGHT_HI {c_double(r.spawn_height_range_m[1])}",
        f"#define SPAWN_XY_HALF_EXTENT_M {c_double(r.spawn_xy_half_extent_m)}",
        *(f"#define {name} {int(v)}" for name, v in ints.items()),
        _array(f"ACTION_LOW[{na}]", f.action_low),
        _array(f"ACTION_HIGH[{na}]", f.action_high),
        _array("OBS_LOW[OBS_POLICY]", f.obs_low),
        _array("OBS_HIGH[OBS_POLICY]", f.obs_high),
        _array("NOISE_STD[OBS_POLICY]", f.noise_std),
        "static const int NOISY_COLUMNS[] = {" + ", ".join(map(str, noisy_cols)) + "};",
    ]
    return "\n".join(lines) + "\n"


def default_constants() -> FusedConstants:
    """The ``FusedConstants`` of the default ``GotoEnvCfg`` (what ``sim/envs/native/generated/`` shows)."""
    from robot_hrl.robots import get_robot
    from sim.envs.goto_env_cfg import GotoEnvCfg
    from sim.envs.step_constants import fused_constants

    cfg = GotoEnvCfg().validate()
    robot = get_robot(cfg.robot)
    return fused_constants(cfg, robot, cfg.contract(robot))


def step_sources(f: FusedConstants) -> dict[str, str]:
    """The C files of the step of configuration ``f``: the hand-written source and shared header, the generated headers."""
    return {"control_step.c": SOURCE.read_text(), "step_config.h": config_header(f), "step_tables.h": step_tables_header(f),
            **shared_headers()}


def compiler_missing() -> str | None:
    """Why the native code cannot be built here (no C compiler), or None when it can."""
    try:
        find_compiler("--eager")
    except NativeBuildError as exc:
        return str(exc)
    return None


def find_compiler(fallback: str = "physics.native off") -> str:
    """The C compiler: ``$CC``, else cc, gcc or clang on the PATH; a clear error without one."""
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return candidate
    raise NativeBuildError(
        "no C compiler was found ($CC, cc, gcc, clang) to build the native code; install one "
        f"(Debian/Ubuntu: sudo apt install gcc) or use {fallback} (the torch code runs without it)"
    )


def _cpu_identity() -> str:
    """What -march=native depends on: the CPU model and its feature flags."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    keep = [line for line in text.splitlines() if line.startswith(("model name", "flags", "Features", "CPU part"))]
    return "\n".join(sorted(set(keep)))


def cache_root() -> Path:
    return Path(os.environ.get("ROBOT_HRL_CACHE", Path.home() / ".cache" / "robot_hrl")) / "native"


def load_library(f: FusedConstants) -> tuple[ctypes.CDLL, Path]:
    """Build (or find in the cache) and load the control-step library of ``f``."""
    return load_cached(lambda: build_library(f), "physics.native off")


def build_library(f: FusedConstants) -> Path:
    """The shared library of ``control_step.c`` for the configuration ``f`` (built once, then cached)."""
    return compile_library(step_sources(f), "control_step.c", "physics.native off")


def shared_headers() -> dict[str, str]:
    """The headers the native C files share (``vector_math.h``, ``counter_random.h``), as ``compile_library`` files."""
    return {VECTOR_MATH.name: VECTOR_MATH.read_text(), COUNTER_RANDOM.name: COUNTER_RANDOM.read_text()}


def load_cached(build, fallback: str) -> tuple[ctypes.CDLL, Path]:
    """Load the library ``build()`` returns; a cached file that does not load (truncated, or built for
    another machine) is rebuilt once. ``fallback`` names what to do instead, for the error."""
    path = build()
    try:
        return ctypes.CDLL(str(path)), path
    except OSError:
        path.unlink(missing_ok=True)
        path = build()
        try:
            return ctypes.CDLL(str(path)), path
        except OSError as exc:
            raise NativeBuildError(f"the native library built at {path} does not load ({exc}); delete {cache_root()} "
                                   f"and retry, or use {fallback}") from None


def compile_library(files: dict[str, str], main: str, fallback: str) -> Path:
    """Compile ``main`` of ``files`` (name -> C text, headers included) into a shared library, cached by a
    digest of the files, the compiler, its flags and the CPU. ``fallback`` names what to do instead, for
    the errors."""
    cc = find_compiler(fallback)
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    texts = [f"{name}\0{text}" for name, text in sorted(files.items())]
    digest = hashlib.sha256("\0".join((*texts, cc, version, " ".join(FLAGS + OPENMP_FLAGS), _cpu_identity())).encode()).hexdigest()[:20]
    target = cache_root() / digest / f"lib{Path(main).stem}.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text)
        out = Path(tmp) / target.name
        errors = []
        for extra in (OPENMP_FLAGS, ()):  # without OpenMP (e.g. clang without libomp): one thread
            cmd = [cc, *FLAGS, *extra, "-I", tmp, str(Path(tmp) / main), "-o", str(out), "-lm"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode == 0:
                break
            errors.append(f"$ {' '.join(cmd)}\n{proc.stderr.strip()}")
        else:
            raise NativeBuildError(f"building {main} failed; fix the compiler setup or use {fallback}:\n" + "\n\n".join(errors))
        os.replace(out, target)  # atomic: a concurrent build of the same digest is harmless
    return target
