"""The generated navigate level on an emulated STM32F405 (QEMU netduinoplus2): ``nav_io.c`` and ``nav_model.c``
cross-compiled with the firmware's flags and newlib's libm (atan2f, sqrtf, floorf, expf), fed a sequence
(deploy/crazyflie/navigate_parity.py's rows) through semihosting files. Needs qemu-system-arm."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from deploy.crazyflie.c_navigate import NAV_SOURCES
from deploy.crazyflie.codegen import GeneratedProject
from deploy.crazyflie.errors import CodegenError
from deploy.crazyflie.qemu import _MAIN_C, build_qemu_image, run_qemu_image

_NAV_MAIN_C = _MAIN_C[:_MAIN_C.index("int main(void)")].replace('#include "policy_io.h"\n#include "policy_model.h"\n',
                                                                 '#include "nav_io.h"\n#include "nav_model.h"\n') + r"""
/* rows: op (0 reset, 1 sense, 2 decide), position (3), quaternion w x y z (4), ranges (NAV_NUM_RANGERS), velocity (3),
 * goal (3); out per row: ok, subgoal (3), observation (NAV_OBS_SIZE) */
#define ROW (1 + 3 + 4 + NAV_NUM_RANGERS + 3 + 3)
#define OUT (4 + NAV_OBS_SIZE)

int main(void)
{
  FILE *in = fopen("nav_in.bin", "rb"), *out = fopen("nav_out.bin", "wb");
  if (!in || !out) { printf("robot_hrl-qemu: cannot open nav_in.bin/nav_out.bin\n"); return 1; }
  float row[ROW], o[OUT];
  while (fread(row, sizeof(float), ROW, in) == ROW) {
    const float *p = &row[1], *q = &row[4], *r = &row[8], *v = &row[8 + NAV_NUM_RANGERS], *g = &row[11 + NAV_NUM_RANGERS];
    for (int i = 0; i < OUT; ++i) o[i] = __builtin_nanf("");
    const int op = (int)row[0];
    if (op == 0) {
      navReset();
      o[0] = 1.0f;
    } else if (op == 1) {
      o[0] = navSense(p, q, r) ? 1.0f : 0.0f;
    } else {
      float obs[NAV_OBS_SIZE], sg[3];
      const bool ok = navBuildObservation(p, q, v, g, obs) && navDecide(p, q, v, g, sg);
      o[0] = ok ? 1.0f : 0.0f;
      if (ok) {
        for (int i = 0; i < 3; ++i) o[1 + i] = sg[i];
        for (int i = 0; i < NAV_OBS_SIZE; ++i) o[4 + i] = obs[i];
      }
    }
    fwrite(o, sizeof(float), OUT, out);
  }
  fclose(in); fclose(out);
  printf("robot_hrl-qemu: done\n");
  return 0;
}
"""


def run_navigate_on_qemu(project: GeneratedProject, sequence: np.ndarray, build_dir: str | Path,
                         timeout_s: float = 300.0) -> np.ndarray:
    """The Cortex-M4 build of the level through ``sequence``: rows as navigate_parity.run_python gives them."""
    level = project.navigate
    if level is None:
        raise CodegenError("the project has no navigate level: generate it with --navigate")
    build = Path(build_dir).resolve()
    elf = build_qemu_image(project, build, _NAV_MAIN_C, NAV_SOURCES, name="nav_qemu")
    np.ascontiguousarray(sequence, dtype=np.float32).tofile(build / "nav_in.bin")
    run_qemu_image(elf, build, timeout_s)
    out = np.fromfile(build / "nav_out.bin", dtype=np.float32).reshape(len(sequence), -1)
    return out.astype(np.float64)


def worst_case_sequence(level, decisions: int) -> np.ndarray:
    """A sequence whose last ``decisions`` decisions do the most work: the robot turns on the spot while its memory
    sensors read targets within the memory's range until the ring is full of points that every sector check bins
    (one atan2f each), then senses and decides (one navSense, one navDecide) ``decisions`` times."""
    from deploy.crazyflie.navigate_parity import OP_DECIDE, OP_RESET, OP_SENSE, row_size

    contract, s = level.contract, len(level.sensors)
    mem = contract.memory
    far = min(x.max_range_m for x in level.sensors) * 0.95
    reach = min(far, mem.range_m * 0.95) if mem is not None else far
    rng = np.random.default_rng(0)
    rows = [np.r_[OP_RESET, np.zeros(row_size(s) - 1)]]
    pos, goal, vel = np.array([0.0, 0.0, 1.0]), np.array([6.0, 2.0, 1.0]), np.array([0.3, 0.1, 0.0])
    fills = 2 * (mem.capacity // max(len(mem.sensors), 1) if mem is not None else 1)  # twice what fills the ring
    for k in range(fills + decisions):
        yaw = 2.0 * np.pi * k / 37.0
        q = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
        ranges = rng.uniform(0.5, reach, s)
        rows.append(np.r_[OP_SENSE, pos, q, ranges, vel, goal])
        if k >= fills:
            rows.append(np.r_[OP_DECIDE, pos, q, ranges, vel, goal])
    return np.asarray(rows, dtype=np.float32)


def count_instructions(project: GeneratedProject, sequence: np.ndarray, build_dir: str | Path,
                       timeout_s: float = 600.0) -> int:
    """Instructions the Cortex-M4 build executes through ``sequence`` (QEMU, one instruction per translation block,
    every block's execution logged: ``-singlestep -d exec,nochain``), start-up and file I/O included. An
    instruction count, independent of the cycle model: each instruction takes at least one cycle."""
    import shutil
    import subprocess

    from deploy.crazyflie.errors import ToolchainError
    from deploy.crazyflie.qemu import MACHINE, QEMU

    qemu = shutil.which(QEMU)
    if qemu is None:
        raise ToolchainError(f"{QEMU} is not installed (Debian/Ubuntu: apt-get install qemu-system-arm)")
    build = Path(build_dir).resolve()
    elf = build_qemu_image(project, build, _NAV_MAIN_C, NAV_SOURCES, name="nav_qemu")
    np.ascontiguousarray(sequence, dtype=np.float32).tofile(build / "nav_in.bin")
    log = build / "exec.log"
    res = subprocess.run([qemu, "-M", MACHINE, "-nographic", "-monitor", "none", "-serial", "none", "-semihosting-config",
                          "enable=on,target=native", "-kernel", str(elf), "-singlestep", "-d", "exec,nochain", "-D", str(log)],
                         cwd=build, capture_output=True, text=True, timeout=timeout_s)
    if "robot_hrl-qemu: done" not in res.stdout:
        raise ToolchainError(f"the QEMU run did not finish: {res.stdout[-1000:]} {res.stderr[-1000:]}")
    n = 0
    with open(log, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 24), b""):
            n += chunk.count(b"Trace ")
    log.unlink()
    return n
