"""The out-of-tree controller for crazyflie-firmware, and its build files.

``controllerOutOfTree`` runs the policy at the contract's rate (``RATE_DO_EXECUTE`` on the
1 kHz stabilizer loop) and holds its command in between. The onboard part of the safety
shield lives here: actions are clamped to [-1, 1] and the wrench to the contract's ranges
(``policy_io.c``), and a non-finite observation or output hands control to the firmware's
PID controller (``controllerPid``), latched until ``controllerOutOfTreeInit`` runs again
(reboot). The PID also flies whenever there is no absolute position setpoint (take-off from
the ground by manual/velocity setpoints, landing by the supervisor) and when the parameter
``rlPolicy.enable`` is 0.
"""

from __future__ import annotations

CONTROLLER_C = r"""{banner}
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "stabilizer_types.h"
#include "controller.h"
#include "controller_pid.h"
#include "log.h"
#include "param.h"

#include "policy_io.h"
#include "policy_model.h"

#if POLICY_MODEL_INPUT_SIZE != POLICY_OBS_SIZE || POLICY_MODEL_OUTPUT_SIZE != POLICY_ACTION_SIZE
#error "policy_model.h and policy_io.h disagree: regenerate both with robot-hrl export-c"
#endif

/* Who flies (log rlPolicy.mode). */
#define POLICY_MODE_POLICY 0u           /* the policy, at POLICY_RATE_HZ */
#define POLICY_MODE_PID_NO_SETPOINT 1u  /* PID: no absolute position setpoint to go to */
#define POLICY_MODE_PID_DISABLED 2u     /* PID: parameter rlPolicy.enable is 0 */
#define POLICY_MODE_PID_NONFINITE 3u    /* PID: latched after a NaN/inf observation or output */

static float policyLastAction[POLICY_ACTION_SIZE];
static float policyObs[POLICY_OBS_SIZE];
static float policyAct[POLICY_ACTION_SIZE];
static control_t policyCommand;  /* held between policy ticks */
static uint8_t policyEnable = 1;
static uint8_t policyMode = POLICY_MODE_PID_NO_SETPOINT;
static uint8_t policyLatched = 0;
static uint32_t policyInferences = 0;
static uint32_t policyNonFinite = 0;

static void policyResetEpisode(void)
{{
  /* As the training environment and the Python runtime: the previous action starts at zero. */
  memset(policyLastAction, 0, sizeof(policyLastAction));
}}

void controllerOutOfTreeInit(void)
{{
  controllerPidInit();
  policyResetEpisode();
  memset(&policyCommand, 0, sizeof(policyCommand));
  policyCommand.controlMode = controlModeForceTorque;
  policyMode = POLICY_MODE_PID_NO_SETPOINT;
  policyLatched = 0;
}}

bool controllerOutOfTreeTest(void)
{{
  return controllerPidTest();
}}

static bool policyHasPositionSetpoint(const setpoint_t *setpoint)
{{
  return setpoint->mode.x == modeAbs && setpoint->mode.y == modeAbs && setpoint->mode.z == modeAbs;
}}

static void policyFlyPid(uint8_t reason, control_t *control, const setpoint_t *setpoint,
                         const sensorData_t *sensors, const state_t *state, const stabilizerStep_t tick)
{{
  if (policyMode == POLICY_MODE_POLICY) {{
    policyResetEpisode();  /* the next policy episode starts afresh */
  }}
  policyMode = reason;
  controllerPid(control, setpoint, sensors, state, tick);
}}

void controllerOutOfTree(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                         const state_t *state, const stabilizerStep_t tick)
{{
  if (policyLatched) {{
    policyFlyPid(POLICY_MODE_PID_NONFINITE, control, setpoint, sensors, state, tick);
    return;
  }}
  if (!policyEnable) {{
    policyFlyPid(POLICY_MODE_PID_DISABLED, control, setpoint, sensors, state, tick);
    return;
  }}
  if (!policyHasPositionSetpoint(setpoint)) {{
    policyFlyPid(POLICY_MODE_PID_NO_SETPOINT, control, setpoint, sensors, state, tick);
    return;
  }}
  if (!RATE_DO_EXECUTE(POLICY_RATE_HZ, tick)) {{
    if (policyMode == POLICY_MODE_POLICY) {{
      *control = policyCommand;  /* hold the latest command between policy ticks */
    }} else {{
      controllerPid(control, setpoint, sensors, state, tick);  /* the PID flies until the next policy tick */
    }}
    return;
  }}

  if (!policyBuildObservation(state, sensors, setpoint, policyLastAction, policyObs)) {{
    policyNonFinite++;
    policyLatched = 1;
    policyFlyPid(POLICY_MODE_PID_NONFINITE, control, setpoint, sensors, state, tick);
    return;
  }}
  policy_forward(policyObs, policyAct);
  policyInferences++;
  if (!policyAllFinite(policyAct, POLICY_ACTION_SIZE)) {{
    policyNonFinite++;
    policyLatched = 1;
    policyFlyPid(POLICY_MODE_PID_NONFINITE, control, setpoint, sensors, state, tick);
    return;
  }}
  policyActionsToControl(policyAct, &policyCommand);
  memcpy(policyLastAction, policyAct, sizeof(policyLastAction));
  policyMode = POLICY_MODE_POLICY;
  *control = policyCommand;
}}

/* Who flies now (POLICY_MODE_*), for tests and debugging. */
uint8_t policyControllerMode(void)
{{
  return policyMode;
}}

PARAM_GROUP_START(rlPolicy)
PARAM_ADD(PARAM_UINT8, enable, &policyEnable)
PARAM_GROUP_STOP(rlPolicy)

LOG_GROUP_START(rlPolicy)
LOG_ADD(LOG_UINT8, mode, &policyMode)
LOG_ADD(LOG_UINT32, inferences, &policyInferences)
LOG_ADD(LOG_UINT32, nonFinite, &policyNonFinite)
LOG_ADD(LOG_FLOAT, thrust, &policyCommand.thrustSi)
LOG_ADD(LOG_FLOAT, torqueX, &policyCommand.torqueX)
LOG_ADD(LOG_FLOAT, torqueY, &policyCommand.torqueY)
LOG_ADD(LOG_FLOAT, torqueZ, &policyCommand.torqueZ)
LOG_GROUP_STOP(rlPolicy)
"""

SOURCES = ("policy_model.c", "policy_io.c", "controller_policy.c")
"""The generated C files of the controller (in ``src/``)."""

MAKEFILE = """# Generated by robot-hrl export-c: out-of-tree build of the policy controller against crazyflie-firmware.
#
#   make CRAZYFLIE_BASE=/path/to/crazyflie-firmware      # -> build/cf2.bin
#   robot-hrl flash --uri radio://0/80/2M --image build/cf2.bin
#
# See docs/deploy_hardware.md in robot_hrl. The firmware's tools/make/oot.mk reads Kbuild in this
# folder, merges OOT_CONFIG into the firmware's default configuration and builds into $(OOT)/build.
# CURDIR rather than PWD, so that `make -C <this folder>` works too.
CRAZYFLIE_BASE ?= $(HOME)/crazyflie-firmware
OOT := $(CURDIR)
OOT_CONFIG := $(CURDIR)/app-config
EXTRA_CFLAGS += -I$(CURDIR)/src

ifeq ($(wildcard $(CRAZYFLIE_BASE)/tools/make/oot.mk),)
$(error CRAZYFLIE_BASE=$(CRAZYFLIE_BASE) is not a crazyflie-firmware checkout (no tools/make/oot.mk). \\
  git clone --recursive https://github.com/bitcraze/crazyflie-firmware.git and pass CRAZYFLIE_BASE=<path>)
endif

include $(CRAZYFLIE_BASE)/tools/make/oot.mk
"""

KBUILD_TOP = "obj-y += src/\n"
KBUILD_SRC = "".join(f"obj-y += {s[:-2]}.o\n" for s in SOURCES)

APP_CONFIG = """# Generated by robot-hrl export-c: merged into crazyflie-firmware's default configuration.
# The out-of-tree controller becomes the default controller (controllerOutOfTree*).
CONFIG_CONTROLLER_OOT=y
# The policy needs a full state estimate (position and velocity in the world frame).
CONFIG_ESTIMATOR_KALMAN_ENABLE=y
"""
