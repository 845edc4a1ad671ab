"""Compile the generated controller for the host with gcc and call it through ctypes.

The host build uses the same generated sources as the firmware build, with our firmware header
stubs, an ``autoconf.h`` made from the project's app-config, and stand-ins of the firmware's PID,
estimator selection and output stage (``firmware_stubs/``). It is what the parity checks run:

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
from deploy.crazyflie.firmware import write_test_autoconf

HOST_CFLAGS: tuple[str, ...] = ("-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared")

STATE_ROW_SIZE = 16
"""Host harness state row: position (3, m), quaternion w x y z (4), velocity (3, m/s),
gyro (3, deg/s: the firmware's unit), setpoint position (3, m)."""

_HARNESS_C = r"""
/* robot_hrl host test harness for the generated Crazyflie controller (not part of the firmware). */
#include <stdint.h>
#include <string.h>

#include "autoconf.h"
#include "stabilizer_types.h"
#include "controller.h"
#include "controller_pid.h"
#include "power_distribution.h"
#include "policy_io.h"
#include "policy_model.h"

extern int stubPidCalls, stubPidInits, stubPidAttitudeInits, stubPidPositionInits;
extern int16_t stubPidRollOut, stubPidPitchOut, stubPidYawOut;
extern float stubPidActuatorThrust;
extern void *const stubParam_enable;
extern const void *const stubLog_mode, *const stubLog_handOvers;
void stubEstimatorSwitchTo(int type);

void h_forward_batch(const float *in, float *out, int n)
{
  for (int k = 0; k < n; ++k) {
    policy_forward(in + (long)k * POLICY_MODEL_INPUT_SIZE, out + (long)k * POLICY_MODEL_OUTPUT_SIZE);
  }
}

static void h_fill(const float *st, int position_mode, state_t *state, sensorData_t *sensors, setpoint_t *setpoint);
int h_observation(const float *st, const float *last_action, float *obs);
void h_actions_to_control(const float *actions, float *out);
void h_init(void);
void h_reset_observation(void);
int h_test(void);
int h_step(const float *st, int position_mode, uint32_t tick, float *out);
int h_pid_calls(void);
int h_tick(const float *st, int position_mode, uint32_t tick, float vbat, float *out, uint16_t *pwm);
void h_pid_tick(const float *st, int position_mode, uint32_t tick, float *control_in_out);
void h_set_enable(int enable);
void h_set_estimator(int type);
void h_pid_counters(int *out);
void h_pid_outputs(float *out);
int h_log_mode(void);
void h_motors(const float *control_fields, int mode, float vbat, uint16_t *pwm, int32_t *uncapped);

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

void h_reset_observation(void) { policyResetObservation(); }

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

/* As stabilizer.c: one static control_t that lives across ticks. */
static control_t hControl;

static void h_control_out(const control_t *control, float *out)
{
  /* controlMode, then both views of the union: legacy roll, pitch, yaw, thrust; thrustSi, torqueX, Y, Z */
  out[0] = (float)control->controlMode;
  out[1] = (float)control->roll; out[2] = (float)control->pitch; out[3] = (float)control->yaw;
  out[4] = control->thrust;
  out[5] = control->thrustSi; out[6] = control->torqueX; out[7] = control->torqueY; out[8] = control->torqueZ;
}

/* One stabilizer tick through the controller and the firmware's output stage at battery voltage vbat:
 * out[9] as h_control_out, pwm[4] the motor ratios. Returns rlPolicy.mode. */
int h_tick(const float *st, int position_mode, uint32_t tick, float vbat, float *out, uint16_t *pwm)
{
  state_t state; sensorData_t sensors; setpoint_t setpoint; motors_thrust_pwm_t motors;
  h_fill(st, position_mode, &state, &sensors, &setpoint);
  controllerOutOfTree(&hControl, &setpoint, &sensors, &state, (stabilizerStep_t)tick);
  h_control_out(&hControl, out);
  stubControlMotors(&hControl, vbat, &motors);
  for (int i = 0; i < 4; ++i) pwm[i] = motors.list[i];
  return h_log_mode();
}

/* The stand-in PID alone on a given control_t: control_in_out[9] as h_control_out (the union's legacy view is
 * written from [1..4] first, then the force-torque view from [5..8] when [0] says controlModeForceTorque). */
void h_pid_tick(const float *st, int position_mode, uint32_t tick, float *control_in_out)
{
  state_t state; sensorData_t sensors; setpoint_t setpoint; control_t control;
  h_fill(st, position_mode, &state, &sensors, &setpoint);
  memset(&control, 0, sizeof(control));
  control.controlMode = (control_mode_t)(int)control_in_out[0];
  if (control.controlMode == controlModeForceTorque) {
    control.thrustSi = control_in_out[5]; control.torqueX = control_in_out[6];
    control.torqueY = control_in_out[7]; control.torqueZ = control_in_out[8];
  } else {
    control.roll = (int16_t)control_in_out[1]; control.pitch = (int16_t)control_in_out[2];
    control.yaw = (int16_t)control_in_out[3]; control.thrust = control_in_out[4];
  }
  controllerPid(&control, &setpoint, &sensors, &state, (stabilizerStep_t)tick);
  h_control_out(&control, control_in_out);
}

/* The firmware's output stage alone: control fields as h_control_out[1..8] in the given mode. */
void h_motors(const float *control_fields, int mode, float vbat, uint16_t *pwm, int32_t *uncapped)
{
  control_t control; motors_thrust_uncapped_t raw; motors_thrust_pwm_t motors;
  memset(&control, 0, sizeof(control));
  control.controlMode = (control_mode_t)mode;
  if (control.controlMode == controlModeLegacy) {
    control.roll = (int16_t)control_fields[0]; control.pitch = (int16_t)control_fields[1];
    control.yaw = (int16_t)control_fields[2]; control.thrust = control_fields[3];
  } else if (control.controlMode == controlModeForceTorque) {
    control.thrustSi = control_fields[4]; control.torqueX = control_fields[5];
    control.torqueY = control_fields[6]; control.torqueZ = control_fields[7];
  } else {
    for (int i = 0; i < 4; ++i) control.normalizedForces[i] = control_fields[4 + i];
  }
  powerDistribution(&control, &raw);
  for (int i = 0; i < 4; ++i) uncapped[i] = raw.list[i];
  stubControlMotors(&control, vbat, &motors);
  for (int i = 0; i < 4; ++i) pwm[i] = motors.list[i];
}

/* The parameter service writes rlPolicy.enable through its address, between two ticks. */
void h_set_enable(int enable) { *(uint8_t *)stubParam_enable = (uint8_t)enable; }

/* What writing the parameter stabilizer.estimator does. */
void h_set_estimator(int type) { stubEstimatorSwitchTo(type); }

/* The log service reads rlPolicy.mode through its address. */
int h_log_mode(void) { return *(const uint8_t *)stubLog_mode; }

void h_pid_counters(int *out)
{
  out[0] = stubPidCalls; out[1] = stubPidInits; out[2] = stubPidAttitudeInits; out[3] = stubPidPositionInits;
  out[4] = (int)*(const uint32_t *)stubLog_handOvers;
}

void h_pid_outputs(float *out)
{
  out[0] = stubPidRollOut; out[1] = stubPidPitchOut; out[2] = stubPidYawOut; out[3] = stubPidActuatorThrust;
}
"""

_F32P = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
_U16P = np.ctypeslib.ndpointer(dtype=np.uint16, flags="C_CONTIGUOUS")
_I32P = np.ctypeslib.ndpointer(dtype=np.int32, flags="C_CONTIGUOUS")

HOST_STUB_SOURCES: tuple[str, ...] = ("controller_pid_stub.c", "estimator_stub.c", "power_distribution_stub.c",
                                      "nav_task_stub.c")
"""Stand-ins of the firmware linked into the host library (firmware_stubs/)."""

CONTROL_FIELDS = ("controlMode", "roll", "pitch", "yaw", "thrust", "thrustSi", "torqueX", "torqueY", "torqueZ")
"""The control_t view returned by :meth:`HostController.tick`: the mode and both views of its union."""


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
        lib.h_tick.argtypes = [_F32P, ctypes.c_int, ctypes.c_uint32, ctypes.c_float, _F32P, _U16P]
        lib.h_tick.restype = ctypes.c_int
        lib.h_pid_tick.argtypes = [_F32P, ctypes.c_int, ctypes.c_uint32, _F32P]
        lib.h_motors.argtypes = [_F32P, ctypes.c_int, ctypes.c_float, _U16P, _I32P]
        lib.h_set_enable.argtypes = [ctypes.c_int]
        lib.h_set_estimator.argtypes = [ctypes.c_int]
        lib.h_log_mode.restype = ctypes.c_int
        lib.h_pid_counters.argtypes = [np.ctypeslib.ndpointer(dtype=np.intc, flags="C_CONTIGUOUS")]
        lib.h_pid_outputs.argtypes = [_F32P]
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
        config_dir = write_test_autoconf(build, project.app_config)
        lib = build / "libpolicy_host.so"
        cmd = [gcc, *HOST_CFLAGS, f"-I{project.src_dir}", f"-I{config_dir}", f"-I{STUB_DIR}", *map(str, project.sources),
               *(str(STUB_DIR / s) for s in HOST_STUB_SOURCES), str(harness), "-o", str(lib), "-lm"]
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

    def reset_observation(self) -> None:
        """``policyResetObservation``: the next :meth:`observation` starts a new episode (the error integral at zero)."""
        self.lib.h_reset_observation()

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

    def tick(self, state_row: np.ndarray, tick: int, position_mode: int = 1,
             battery_v: float = 3.8) -> tuple[int, dict[str, float], np.ndarray]:
        """One stabilizer tick with a control_t that persists across ticks, as in stabilizer.c, and the motors.

        Returns (rlPolicy.mode from the log table, control_t fields (:data:`CONTROL_FIELDS`), motor PWM uint16[4]).
        """
        out = np.zeros(len(CONTROL_FIELDS), dtype=np.float32)
        pwm = np.zeros(4, dtype=np.uint16)
        st = np.ascontiguousarray(state_row, dtype=np.float32).reshape(STATE_ROW_SIZE)
        mode = self.lib.h_tick(st, int(position_mode), int(tick), float(battery_v), out, pwm)
        return mode, dict(zip(CONTROL_FIELDS, map(float, out))), pwm

    def pid_tick(self, state_row: np.ndarray, tick: int, control: dict[str, float],
                 position_mode: int = 1) -> dict[str, float]:
        """The stand-in PID alone on a control_t holding ``control``; returns the control_t it leaves."""
        buf = np.array([control.get(k, 0.0) for k in CONTROL_FIELDS], dtype=np.float32)
        st = np.ascontiguousarray(state_row, dtype=np.float32).reshape(STATE_ROW_SIZE)
        self.lib.h_pid_tick(st, int(position_mode), int(tick), buf)
        return dict(zip(CONTROL_FIELDS, map(float, buf)))

    def motors(self, control: dict[str, float], mode: int, battery_v: float) -> tuple[np.ndarray, np.ndarray]:
        """The firmware output stage alone: (PWM uint16[4], uncapped int32[4] before the battery compensation).

        ``control`` holds roll/pitch/yaw/thrust (legacy), thrustSi/torqueX..Z (force-torque) or
        forces (a list of 4, controlModeForce)."""
        fields = [control.get(k, 0.0) for k in CONTROL_FIELDS[1:5]]
        fields += list(control["forces"]) if "forces" in control else [control.get(k, 0.0) for k in CONTROL_FIELDS[5:]]
        pwm = np.zeros(4, dtype=np.uint16)
        uncapped = np.zeros(4, dtype=np.int32)
        self.lib.h_motors(np.asarray(fields, dtype=np.float32), int(mode), float(battery_v), pwm, uncapped)
        return pwm, uncapped

    def set_enable(self, enable: bool) -> None:
        """Write the parameter rlPolicy.enable (through its address, as the parameter service does)."""
        self.lib.h_set_enable(int(enable))

    def set_estimator(self, estimator_type: int) -> None:
        """Switch the running estimator (0 auto, 1 complementary, 2 Kalman), as stabilizer.estimator does."""
        self.lib.h_set_estimator(int(estimator_type))

    @property
    def log_mode(self) -> int:
        """rlPolicy.mode read through the log table."""
        return int(self.lib.h_log_mode())

    def pid_counters(self) -> dict[str, int]:
        out = np.zeros(5, dtype=np.intc)
        self.lib.h_pid_counters(out)
        return dict(zip(("calls", "inits", "attitude_inits", "position_inits", "hand_overs"), map(int, out)))

    def pid_outputs(self) -> dict[str, float]:
        """The stand-in PID's last attitude outputs (int16) and actuator thrust."""
        out = np.zeros(4, dtype=np.float32)
        self.lib.h_pid_outputs(out)
        return dict(zip(("roll", "pitch", "yaw", "thrust"), map(float, out)))
