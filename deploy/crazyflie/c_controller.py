"""The out-of-tree controller for crazyflie-firmware, and its build files.

``controllerOutOfTree`` runs the policy at the contract's rate (``RATE_DO_EXECUTE`` on the
1 kHz stabilizer loop) and holds its command in between. The onboard part of the safety
shield lives here: actions are clamped to [-1, 1] and the wrench to the contract's ranges
(``policy_io.c``), and a non-finite observation or output hands control to the firmware's
PID controller (``controllerPid``), latched until ``controllerOutOfTreeInit`` runs again
(reboot). The PID also flies whenever there is no absolute position setpoint (take-off from
the ground by manual/velocity setpoints, landing by the supervisor), when the parameter
``rlPolicy.enable`` is 0, and when the running estimator is not the Kalman estimator (the
complementary one estimates no x/y: the policy would fly on a position that never updates).

The hand-over to the PID: the stabilizer's ``control_t`` is a static union that lives across
ticks, and the real ``controllerPid`` writes its int16 roll/pitch/yaw only on the attitude
ticks (500 Hz, even ticks) while it sets ``controlModeLegacy`` and the thrust on every tick.
Handing over on an odd tick would let the power distribution read the policy's float
``thrustSi``/``torqueX`` as roll/pitch/yaw. So whenever ``control_t`` may hold anything but the
PID's own output (after the policy, and after ``controllerOutOfTreeInit``: another controller may
have flown), it is cleared and the PID re-initialized before the PID runs.
"""

from __future__ import annotations

from deploy.crazyflie.firmware import FIRMWARE_MIN_RELEASE, FIRMWARE_RELEASE, FIRMWARE_REPOSITORY, app_config_text

CONTROLLER_C = r"""{banner}
/* The firmware's kbuild configuration first (build/include/generated/autoconf.h, on the include path of
 * every firmware build, included by no header we use): controller.h declares the controllerOutOfTree*
 * prototypes only under CONFIG_CONTROLLER_OOT, so without it a wrong signature would compile silently. */
#include "autoconf.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "stabilizer_types.h"
#include "controller.h"
#include "controller_pid.h"
#include "estimator.h"
#include "log.h"
#include "param.h"

#include "policy_heading.h"
#include "policy_io.h"
#include "policy_model.h"

#ifndef CONFIG_CONTROLLER_OOT
#error "CONFIG_CONTROLLER_OOT is not set: build with the generated app-config (make in the export-c folder sets OOT_CONFIG)"
#endif
#ifndef CONFIG_ESTIMATOR_KALMAN_ENABLE
#error "CONFIG_ESTIMATOR_KALMAN_ENABLE is not set: the policy needs the Kalman estimator (see app-config)"
#endif
#if POLICY_MODEL_INPUT_SIZE != POLICY_OBS_SIZE || POLICY_MODEL_OUTPUT_SIZE != POLICY_ACTION_SIZE
#error "policy_model.h and policy_io.h disagree: regenerate both with robot-hrl export-c"
#endif

/* Who flies (log rlPolicy.mode). */
#define POLICY_MODE_POLICY 0u           /* the policy, at POLICY_RATE_HZ */
#define POLICY_MODE_PID_NO_SETPOINT 1u  /* PID: no absolute position setpoint to go to */
#define POLICY_MODE_PID_DISABLED 2u     /* PID: parameter rlPolicy.enable is 0 */
#define POLICY_MODE_PID_NONFINITE 3u    /* PID: latched after a NaN/inf observation or output */
#define POLICY_MODE_PID_NO_KALMAN 4u    /* PID: the running estimator is not the Kalman estimator */

static float policyLastAction[POLICY_ACTION_SIZE];
static float policyObs[POLICY_OBS_SIZE];
static float policyAct[POLICY_ACTION_SIZE];
static control_t policyCommand;  /* held between policy ticks */
static uint8_t policyEnable = 1;
static uint8_t policyMode = POLICY_MODE_PID_NO_SETPOINT;
static uint8_t policyLatched = 0;
static bool policyControlForeign = true;  /* control_t may hold other than the PID's own legacy output */
static uint32_t policyInferences = 0;
static uint32_t policyNonFinite = 0;
static uint32_t policyHandOvers = 0;

static void policyResetEpisode(void)
{{
  /* As the training environment and the Python runtime: the previous action starts at zero, and so does the
   * observation's state (the position error's integral, where the contract has it). */
  memset(policyLastAction, 0, sizeof(policyLastAction));
  policyResetObservation();
  policyHeadingReset();  /* the heading loop's setpoint starts again from the yaw (policy_heading.c) */
}}

void controllerOutOfTreeInit(void)
{{
  controllerPidInit();
  policyResetEpisode();
  memset(&policyCommand, 0, sizeof(policyCommand));
  policyCommand.controlMode = controlModeForceTorque;
  policyMode = POLICY_MODE_PID_NO_SETPOINT;
  policyLatched = 0;
  policyControlForeign = true;  /* the controller may be switched in flight (stabilizer.controller) */
}}

bool controllerOutOfTreeTest(void)
{{
  return controllerPidTest();
}}

static bool policyHasPositionSetpoint(const setpoint_t *setpoint)
{{
  return setpoint->mode.x == modeAbs && setpoint->mode.y == modeAbs && setpoint->mode.z == modeAbs;
}}

/* Why the PID must fly now (POLICY_MODE_PID_*), or POLICY_MODE_POLICY when the policy may. */
static uint8_t policyPidReason(const setpoint_t *setpoint)
{{
  if (policyLatched) {{
    return POLICY_MODE_PID_NONFINITE;
  }}
  if (!policyEnable) {{
    return POLICY_MODE_PID_DISABLED;
  }}
  if (stateEstimatorGetType() != StateEstimatorTypeKalman) {{
    return POLICY_MODE_PID_NO_KALMAN;
  }}
  if (!policyHasPositionSetpoint(setpoint)) {{
    return POLICY_MODE_PID_NO_SETPOINT;
  }}
  return POLICY_MODE_POLICY;
}}

/* The PID writes control_t. When control_t may hold the policy's (or another controller's) output, it is
 * cleared and the PID re-initialized first: the PID writes roll/pitch/yaw only on attitude ticks, and the
 * union would otherwise show the float thrustSi/torqueX as int16 roll/pitch/yaw on an odd tick. */
static void policyRunPid(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                         const state_t *state, const stabilizerStep_t tick)
{{
  if (policyControlForeign) {{
    memset(control, 0, sizeof(*control));
    controllerPidInit();
    policyControlForeign = false;
    policyHandOvers++;
  }}
  controllerPid(control, setpoint, sensors, state, tick);
}}

static void policyFlyPid(uint8_t reason, control_t *control, const setpoint_t *setpoint,
                         const sensorData_t *sensors, const state_t *state, const stabilizerStep_t tick)
{{
  if (policyMode == POLICY_MODE_POLICY) {{
    policyResetEpisode();  /* the next policy episode starts afresh */
  }}
  policyMode = reason;
  policyRunPid(control, setpoint, sensors, state, tick);
}}

static void policyFly(control_t *control)
{{
  policyMode = POLICY_MODE_POLICY;
  *control = policyCommand;
  policyControlForeign = true;
}}

void controllerOutOfTree(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                         const state_t *state, const stabilizerStep_t tick)
{{
  const uint8_t reason = policyPidReason(setpoint);
  if (reason != POLICY_MODE_POLICY) {{
    policyFlyPid(reason, control, setpoint, sensors, state, tick);
    return;
  }}
  if (!RATE_DO_EXECUTE(POLICY_RATE_HZ, tick)) {{
    if (policyMode == POLICY_MODE_POLICY) {{
      policyFly(control);  /* hold the latest command between policy ticks */
    }} else {{
      policyRunPid(control, setpoint, sensors, state, tick);  /* the PID flies until the next policy tick */
    }}
    return;
  }}

  if (!policyBuildObservation(state, sensors, setpoint, policyLastAction, policyObs)) {{
    policyNonFinite++;
    policyLatched = 1;
    policyFlyPid(POLICY_MODE_PID_NONFINITE, control, setpoint, sensors, state, tick);
    return;
  }}
  /* under a heading loop the skill observes its own frame (policy_heading.c; else a no-op) */
  policyHeadingTurnState(state, policyObs);
  policy_forward(policyObs, policyAct);
  policyInferences++;
  if (!policyAllFinite(policyAct, POLICY_ACTION_SIZE)) {{
    policyNonFinite++;
    policyLatched = 1;
    policyFlyPid(POLICY_MODE_PID_NONFINITE, control, setpoint, sensors, state, tick);
    return;
  }}
  /* the heading loop owns the yaw torque when the level names one (policy_heading.c; else a no-op); the policy
   * observes its own action next tick, as robot_hrl's runtime keeps it */
  float policyApplied[POLICY_ACTION_SIZE];
  memcpy(policyApplied, policyAct, sizeof(policyApplied));
  policyHeadingApplyState(state, sensors, policyApplied);
  policyActionsToControl(policyApplied, &policyCommand);
  memcpy(policyLastAction, policyAct, sizeof(policyLastAction));
  policyFly(control);
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
LOG_ADD(LOG_UINT32, handOvers, &policyHandOvers)
LOG_ADD(LOG_FLOAT, thrust, &policyCommand.thrustSi)
LOG_ADD(LOG_FLOAT, torqueX, &policyCommand.torqueX)
LOG_ADD(LOG_FLOAT, torqueY, &policyCommand.torqueY)
LOG_ADD(LOG_FLOAT, torqueZ, &policyCommand.torqueZ)
LOG_GROUP_STOP(rlPolicy)
"""

SOURCES = ("policy_model.c", "policy_io.c", "policy_heading.c", "controller_policy.c")
"""The generated C files of the controller (in ``src/``)."""

MAKEFILE = f"""# Generated by robot-hrl export-c: out-of-tree build of the policy controller against crazyflie-firmware
# {FIRMWARE_RELEASE} (the tested release; {FIRMWARE_MIN_RELEASE} or later is required).
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
  git clone --recursive --branch {FIRMWARE_RELEASE} {FIRMWARE_REPOSITORY}.git and pass CRAZYFLIE_BASE=<path>)
endif

include $(CRAZYFLIE_BASE)/tools/make/oot.mk
"""

KBUILD_TOP = "obj-y += src/\n"
KBUILD_SRC = "".join(f"obj-y += {s[:-2]}.o\n" for s in SOURCES)

APP_CONFIG = app_config_text()
"""The generated app-config (see :mod:`deploy.crazyflie.firmware`)."""
