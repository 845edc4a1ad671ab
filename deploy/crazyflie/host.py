"""Compile the generated controller for the host with gcc and call it through ctypes.

The host build uses the same generated sources as the firmware build, with our firmware header
stubs and a stand-in PID (``firmware_stubs/``). It is what the parity checks run:

    lib = HostController.build(project, tmp_dir)
    actions = lib.forward(observations)            # (n, n_obs) -> (n, n_act), float32
    obs, ok = lib.observation(state_row, last_action)
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np

from deploy.crazyflie.codegen import STUB_DIR, GeneratedProject
from deploy.crazyflie.errors import ToolchainError

HOST_CFLAGS: tuple[str, ...] = ("-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared")

STATE_ROW_SIZE = 16
"""Host harness state row: position (3, m), quaternion w x y z (4), velocity (3, m/s),
gyro (3, deg/s: the firmware's unit), setpoint position (3, m)."""

_HARNESS_C = r"""
/* robot_hrl host test harness for the generated Crazyflie controller (not part of the firmware). */
#include <stdint.h>
#include <string.h>

#include "stabilizer_types.h"
#include "controller.h"
#include "policy_io.h"
#include "policy_model.h"

extern int stubPidCalls;
uint8_t policyControllerMode(void);

void h_forward_batch(const float *in, float *out, int n)
{
  for (int k = 0; k < n; ++k) {
    policy_forward(in + (long)k * POLICY_MODEL_INPUT_SIZE, out + (long)k * POLICY_MODEL_OUTPUT_SIZE);
  }
}

static void h_fill(const float *st, int position_mode, state_t *state, sensorData_t *sensors, setpoint_t *setpoint)
{
  memset(state, 0, sizeof(*state));
  memset(sensors, 0, sizeof(*sensors));
  memset(setpoint, 0, sizeof(*setpoint));
  /* The legacy Euler attitude (degrees, inverted pitch) must not be read: poison it. */
  state->attitude.roll = 1e30f;
  state->attitude.pitch = -1e30f;
  state->attitude.yaw = 1e30f;
  state->position.x = st[0]; state->position.y = st[1]; state->position.z = st[2];
  state->attitudeQuaternion.w = st[3]; state->attitudeQuaternion.x = st[4];
  state->attitudeQuaternion.y = st[5]; state->attitudeQuaternion.z = st[6];
  state->velocity.x = st[7]; state->velocity.y = st[8]; state->velocity.z = st[9];
  sensors->gyro.x = st[10]; sensors->gyro.y = st[11]; sensors->gyro.z = st[12];
  setpoint->position.x = st[13]; setpoint->position.y = st[14]; setpoint->position.z = st[15];
  setpoint->mode.x = setpoint->mode.y = setpoint->mode.z = (stab_mode_t)position_mode;
}

int h_observation(const float *st, const float *last_action, float *obs)
{
  state_t state; sensorData_t sensors; setpoint_t setpoint;
  h_fill(st, modeAbs, &state, &sensors, &setpoint);
  return policyBuildObservation(&state, &sensors, &setpoint, last_action, obs) ? 1 : 0;
}

void h_actions_to_control(const float *actions, float *out)
{
  control_t control;
  memset(&control, 0, sizeof(control));
  policyActionsToControl(actions, &control);
  out[0] = control.thrustSi; out[1] = control.torqueX; out[2] = control.torqueY; out[3] = control.torqueZ;
  out[4] = (float)control.controlMode;
}

void h_init(void) { controllerOutOfTreeInit(); }

int h_test(void) { return controllerOutOfTreeTest() ? 1 : 0; }

/* One stabilizer tick; out: thrustSi, torqueX..Z, controlMode, legacy thrust. Returns the policy mode. */
int h_step(const float *st, int position_mode, uint32_t tick, float *out)
{
  state_t state; sensorData_t sensors; setpoint_t setpoint; control_t control;
  h_fill(st, position_mode, &state, &sensors, &setpoint);
  memset(&control, 0, sizeof(control));
  controllerOutOfTree(&control, &setpoint, &sensors, &state, (stabilizerStep_t)tick);
  out[4] = (float)control.controlMode;
  if (control.controlMode == controlModeForceTorque) {
    out[0] = control.thrustSi; out[1] = control.torqueX; out[2] = control.torqueY; out[3] = control.torqueZ;
    out[5] = 0.0f;
  } else {
    out[0] = out[1] = out[2] = out[3] = 0.0f;
    out[5] = control.thrust;
  }
  return policyControllerMode();
}

int h_pid_calls(void) { return stubPidCalls; }
"""

_F32P = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")


class HostController:
    """The generated controller compiled as a host shared library."""

    def __init__(self, lib_path: Path, project: GeneratedProject):
        self.path = lib_path
        self.project = project
        self.n_obs = project.model.input_size
        self.n_act = project.model.output_size
        lib = ctypes.CDLL(str(lib_path))
        lib.h_forward_batch.argtypes = [_F32P, _F32P, ctypes.c_int]
        lib.h_observation.argtypes = [_F32P, _F32P, _F32P]
        lib.h_observation.restype = ctypes.c_int
        lib.h_actions_to_control.argtypes = [_F32P, _F32P]
        lib.h_step.argtypes = [_F32P, ctypes.c_int, ctypes.c_uint32, _F32P]
        lib.h_step.restype = ctypes.c_int
        lib.h_pid_calls.restype = ctypes.c_int
        lib.h_test.restype = ctypes.c_int
        self.lib = lib

    @classmethod
    def build(cls, project: GeneratedProject, build_dir: str | Path) -> "HostController":
        gcc = shutil.which("gcc") or shutil.which("cc")
        if gcc is None:
            raise ToolchainError("no host C compiler (gcc) found; install gcc to run the parity checks")
        build = Path(build_dir)
        build.mkdir(parents=True, exist_ok=True)
        harness = build / "host_harness.c"
        harness.write_text(_HARNESS_C)
        lib = build / "libpolicy_host.so"
        cmd = [gcc, *HOST_CFLAGS, f"-I{project.src_dir}", f"-I{STUB_DIR}", *map(str, project.sources),
               str(STUB_DIR / "controller_pid_stub.c"), str(harness), "-o", str(lib), "-lm"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise ToolchainError(f"host gcc failed on the generated controller:\n{res.stderr.strip()[-3000:]}")
        return cls(lib, project)

    def forward(self, obs: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(obs, dtype=np.float32).reshape(-1, self.n_obs)
        out = np.zeros((x.shape[0], self.n_act), dtype=np.float32)
        self.lib.h_forward_batch(x, out, x.shape[0])
        return out

    def observation(self, state_row: np.ndarray, last_action: np.ndarray) -> tuple[np.ndarray, bool]:
        st = np.ascontiguousarray(state_row, dtype=np.float32).reshape(STATE_ROW_SIZE)
        la = np.ascontiguousarray(last_action, dtype=np.float32).reshape(self.n_act)
        obs = np.zeros(self.n_obs, dtype=np.float32)
        ok = self.lib.h_observation(st, la, obs)
        return obs, bool(ok)

    def actions_to_control(self, actions: np.ndarray) -> tuple[np.ndarray, int]:
        out = np.zeros(5, dtype=np.float32)
        self.lib.h_actions_to_control(np.ascontiguousarray(actions, dtype=np.float32).reshape(self.n_act), out)
        return out[:4].astype(np.float64), int(out[4])

    def init(self) -> None:
        self.lib.h_init()

    def self_test(self) -> bool:
        return bool(self.lib.h_test())

    def step(self, state_row: np.ndarray, tick: int, position_mode: int = 1) -> tuple[int, np.ndarray]:
        """One stabilizer tick; returns (policy mode, [thrustSi, tX, tY, tZ, controlMode, legacy thrust])."""
        out = np.zeros(6, dtype=np.float32)
        st = np.ascontiguousarray(state_row, dtype=np.float32).reshape(STATE_ROW_SIZE)
        mode = self.lib.h_step(st, int(position_mode), int(tick), out)
        return mode, out

    @property
    def pid_calls(self) -> int:
        return int(self.lib.h_pid_calls())
