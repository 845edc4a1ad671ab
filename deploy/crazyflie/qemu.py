"""Run the generated inference and observation code on an emulated STM32F405 (QEMU netduinoplus2).

The Crazyflie's MCU is an STM32F405 (Cortex-M4F, 168 MHz); QEMU's ``netduinoplus2`` machine
emulates the same chip. The generated ``policy_model.c`` and ``policy_io.c`` are cross-compiled
with the firmware's flags, linked with newlib (its expf/sqrtf, as in the firmware) and
semihosting, and run under ``qemu-system-arm``: observations and states go in through host
files, actions and observations come back. This checks the numbers the Cortex-M4's FPU and
newlib's libm actually produce, which the host-gcc parity check cannot. (QEMU does not model
cycle timing: it says nothing about speed.)

Optional: needs ``qemu-system-arm`` (Debian/Ubuntu: ``apt-get install qemu-system-arm``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

from deploy.crazyflie.codegen import STUB_DIR, GeneratedProject
from deploy.crazyflie.errors import ToolchainError
from deploy.crazyflie.host import STATE_ROW_SIZE
from deploy.crazyflie.size import ARM_CFLAGS, find_tool

QEMU = "qemu-system-arm"
MACHINE = "netduinoplus2"
"""QEMU board with an STM32F405 (Cortex-M4F), the Crazyflie 2.x's MCU."""

_LINKER_SCRIPT = """/* robot_hrl QEMU test image for the STM32F405: flash at 0x08000000, 128 KiB SRAM. */
MEMORY
{
  FLASH (rx) : ORIGIN = 0x08000000, LENGTH = 1024K
  RAM (rwx)  : ORIGIN = 0x20000000, LENGTH = 128K
}
ENTRY(qemu_reset)
SECTIONS
{
  .isr_vector : { KEEP(*(.isr_vector)) } > FLASH
  .text : { *(.text*) *(.rodata*) KEEP(*(.init)) KEEP(*(.fini)) . = ALIGN(4); } > FLASH
  .ARM.exidx : { *(.ARM.exidx*) } > FLASH
  .preinit_array : { PROVIDE_HIDDEN(__preinit_array_start = .); KEEP(*(.preinit_array*));
                     PROVIDE_HIDDEN(__preinit_array_end = .); } > FLASH
  .init_array : { PROVIDE_HIDDEN(__init_array_start = .); KEEP(*(.init_array*)); PROVIDE_HIDDEN(__init_array_end = .); } > FLASH
  .fini_array : { PROVIDE_HIDDEN(__fini_array_start = .); KEEP(*(.fini_array*)); PROVIDE_HIDDEN(__fini_array_end = .); } > FLASH
  _sidata = LOADADDR(.data);
  .data : { _sdata = .; *(.data*) . = ALIGN(4); _edata = .; } > RAM AT > FLASH
  .bss : { _sbss = .; __bss_start__ = .; *(.bss*) *(COMMON) . = ALIGN(4); _ebss = .; __bss_end__ = .; } > RAM
  end = .;
  _end = .;
  __end__ = .;
  _estack = ORIGIN(RAM) + LENGTH(RAM);
  __stack = _estack;
}
"""

_MAIN_C = r"""/* robot_hrl QEMU test program: streams host files through the generated code (semihosting). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "policy_io.h"
#include "policy_model.h"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern void _start(void);

void qemu_reset(void)
{
  *(volatile uint32_t *)0xE000ED88 |= (0xFu << 20);  /* CPACR: enable the FPU (CP10, CP11) */
  __asm volatile("dsb\n isb");
  uint32_t *src = &_sidata, *dst = &_sdata;
  while (dst < &_edata) *dst++ = *src++;
  for (dst = &_sbss; dst < &_ebss;) *dst++ = 0;
  _start();  /* newlib (rdimon): semihosting init, then main */
  for (;;) {}
}

__attribute__((section(".isr_vector"), used)) const void *const qemuVectors[2] = {&_estack, qemu_reset};

int main(void)
{
  FILE *in = fopen("obs.bin", "rb"), *out = fopen("act.bin", "wb");
  if (!in || !out) { printf("robot_hrl-qemu: cannot open obs.bin/act.bin\n"); return 1; }
  float obs[POLICY_MODEL_INPUT_SIZE], act[POLICY_MODEL_OUTPUT_SIZE];
  while (fread(obs, sizeof(float), POLICY_MODEL_INPUT_SIZE, in) == POLICY_MODEL_INPUT_SIZE) {
    policy_forward(obs, act);
    fwrite(act, sizeof(float), POLICY_MODEL_OUTPUT_SIZE, out);
  }
  fclose(in); fclose(out);

  in = fopen("states.bin", "rb"); out = fopen("obs_out.bin", "wb");
  if (!in || !out) { printf("robot_hrl-qemu: cannot open states.bin/obs_out.bin\n"); return 1; }
  float row[STATE_ROW + POLICY_ACTION_SIZE];
  while (fread(row, sizeof(float), STATE_ROW + POLICY_ACTION_SIZE, in) == STATE_ROW + POLICY_ACTION_SIZE) {
    state_t state; sensorData_t sensors; setpoint_t setpoint;
    memset(&state, 0, sizeof(state)); memset(&sensors, 0, sizeof(sensors)); memset(&setpoint, 0, sizeof(setpoint));
    state.position.x = row[0]; state.position.y = row[1]; state.position.z = row[2];
    state.attitudeQuaternion.w = row[3]; state.attitudeQuaternion.x = row[4];
    state.attitudeQuaternion.y = row[5]; state.attitudeQuaternion.z = row[6];
    state.velocity.x = row[7]; state.velocity.y = row[8]; state.velocity.z = row[9];
    sensors.gyro.x = row[10]; sensors.gyro.y = row[11]; sensors.gyro.z = row[12];
    setpoint.position.x = row[13]; setpoint.position.y = row[14]; setpoint.position.z = row[15];
    float o[POLICY_OBS_SIZE + 1];
    o[POLICY_OBS_SIZE] = policyBuildObservation(&state, &sensors, &setpoint, &row[STATE_ROW], o) ? 1.0f : 0.0f;
    fwrite(o, sizeof(float), POLICY_OBS_SIZE + 1, out);
  }
  fclose(in); fclose(out);
  printf("robot_hrl-qemu: done\n");
  return 0;
}
"""


def build_qemu_image(project: GeneratedProject, build_dir: str | Path, main_c: str = _MAIN_C,
                     sources: tuple[str, ...] = ("policy_model.c", "policy_io.c"), name: str = "policy_qemu") -> Path:
    """Cross-compile the generated model and contract code (``sources`` of ``src/``) with a test program
    (``main_c``) into a semihosting ELF for QEMU."""
    gcc = find_tool("arm-none-eabi-gcc")
    build = Path(build_dir)
    build.mkdir(parents=True, exist_ok=True)
    (build / "qemu.ld").write_text(_LINKER_SCRIPT)
    (build / f"{name}_main.c").write_text(main_c)
    elf = build / f"{name}.elf"
    cmd = [gcc, *ARM_CFLAGS, f"-DSTATE_ROW={STATE_ROW_SIZE}", f"-I{project.src_dir}", f"-I{STUB_DIR}",
           str(build / f"{name}_main.c"), *(str(project.src_dir / s) for s in sources),
           "--specs=rdimon.specs", f"-Wl,-T,{build / 'qemu.ld'}", "-Wl,--gc-sections", "-o", str(elf), "-lm"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise ToolchainError(f"building the QEMU image failed (needs newlib's rdimon specs):\n{res.stderr.strip()[-3000:]}")
    return elf


def run_qemu_image(elf: Path, build: Path, timeout_s: float = 300.0) -> None:
    """Run a semihosting test image on the emulated STM32F405 in ``build`` (its files are read and written there)."""
    qemu = shutil.which(QEMU)
    if qemu is None:
        raise ToolchainError(f"{QEMU} is not installed (Debian/Ubuntu: apt-get install qemu-system-arm)")
    res = subprocess.run([qemu, "-M", MACHINE, "-nographic", "-monitor", "none", "-serial", "none",
                          "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
                         cwd=build, capture_output=True, text=True, timeout=timeout_s)
    if "robot_hrl-qemu: done" not in res.stdout:
        raise ToolchainError(f"the QEMU run did not finish: {res.stdout[-1000:]} {res.stderr[-1000:]}")


def run_on_qemu(project: GeneratedProject, observations: np.ndarray, state_rows: np.ndarray,
                last_actions: np.ndarray, build_dir: str | Path, timeout_s: float = 300.0):
    """(actions, observations, ok) computed by the Cortex-M4 build under QEMU."""
    build = Path(build_dir).resolve()  # QEMU runs in it: -kernel and the files must not be relative to it
    elf = build_qemu_image(project, build)
    n_obs, n_act = project.model.input_size, project.model.output_size
    np.ascontiguousarray(observations, dtype=np.float32).reshape(-1, n_obs).tofile(build / "obs.bin")
    rows = np.concatenate([np.asarray(state_rows, dtype=np.float32).reshape(-1, STATE_ROW_SIZE),
                           np.asarray(last_actions, dtype=np.float32).reshape(-1, n_act)], axis=1)
    np.ascontiguousarray(rows).tofile(build / "states.bin")
    run_qemu_image(elf, build, timeout_s)
    actions = np.fromfile(build / "act.bin", dtype=np.float32).reshape(-1, n_act)
    out = np.fromfile(build / "obs_out.bin", dtype=np.float32).reshape(-1, project.contract.observation_size + 1)
    return actions, out[:, :-1], out[:, -1] == 1.0
