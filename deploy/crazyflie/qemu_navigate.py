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
