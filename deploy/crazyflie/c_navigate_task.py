"""The navigate level's task onboard (``src/nav_task.c``): the firmware's app task that feeds the level and hands
its subgoals to the goto controller.

A decision takes about 1.5 ms at 168 MHz (benchmarks/README.md), more than one 1 kHz stabilizer tick, so the level
cannot run inside ``controllerOutOfTree`` as the goto does: it runs in the app task (``appMain``,
``CONFIG_APP_ENABLE``), every ``NAV_TASK_PERIOD_MS`` (100 ms). What one step (``navTaskStep``) does, as the planner
node's learned mode does it (robot_hrl/nodes/planner_learned.py, robot_hrl.planning.learned):

- reads the state estimate by name from the log service (``stateEstimate.x y z vx vy vz qw qx qy qz``: m, m/s,
  body-to-world quaternion; crazyflie-firmware ``src/modules/src/stabilizer.c``'s log group) and every ranger with
  ``rangeGet`` (``src/modules/interface/range.h``: metres, set by multiranger.c and the Flow deck's zranger2.c);
  a reading is taken as the level observes a ROS ``Range`` (``range_for_observation``: clamped to the sensor's
  limits; NaN or negative dropped, the sensor's previous reading kept);
- at the memory's rate ``navSense``, at the decision rate ``navDecide`` toward the goal (parameters
  ``rlNav.goalX`` / ``rlNav.goalY``, m, world; the contract's flight height); within ``rlNav.tolerance`` (0.3 m,
  the planner's ``goal_tolerance_m``) of the goal the goal itself is the subgoal;
- sends the current subgoal every step as an absolute position setpoint (``commanderSetSetpoint``, priority
  ``COMMANDER_PRIORITY_EXTRX``, by name): the goto controller flies ``setpoint->position``, and the commander's 500 ms
  watchdog never fires. A refused decision (a NaN or inf state) keeps the last subgoal (the goto holds it); before
  the first decision nothing is sent. ``rlNav.navEnable`` = 0 (the default) stops it all; enabling it again starts a
  new memory.

Log group ``rlNav``: ``navState`` (0 off, 1 deciding, 2 refused: holding the last subgoal, 3 at the goal),
``decisions``, ``refused``, ``subgoalX/Y/Z``.
"""

from __future__ import annotations

from typing import Sequence

from robot_hrl.contract.navigate import NavigateContract
from robot_hrl.sensing.range import RangeSensorSpec

from deploy.crazyflie.c_model import c_float
from deploy.crazyflie.errors import CodegenError

NAV_TASK_PERIOD_MS = 100
"""The task's period: the rangers' own 10 Hz (multiranger.c reads every 100 ms), and setpoints well inside the
commander's 500 ms watchdog (commander.h COMMANDER_WDT_TIMEOUT_STABILIZE)."""
GOAL_TOLERANCE_M = 0.3
"""robot_hrl.planning.learned.LearnedPlanner's default goal_tolerance_m: a goto step ends within it."""

RANGE_DIRECTIONS: dict[str, str] = {"front": "rangeFront", "back": "rangeBack", "left": "rangeLeft",
                                    "right": "rangeRight", "up": "rangeUp", "down": "rangeDown"}
"""Ranger name -> crazyflie-firmware's rangeDirection_t (src/modules/interface/range.h)."""

APP_CONFIG_SYMBOLS: tuple[tuple[str, str, str], ...] = (
    ("CONFIG_APP_ENABLE", "y", "the navigate level runs as the app task (appMain in src/nav_task.c)"),
    ("CONFIG_APP_STACKSIZE", "800", "app task stack in words (3.2 KB): navDecide's frames are < 0.5 KB, libm's atan2f "
                                    "and expf a little more"),
    ("CONFIG_APP_PRIORITY", "1", "below the stabilizer: a decision (~1.5 ms) never delays a control tick"),
)


def navigate_app_config() -> str:
    """The app-config lines a --navigate project adds (the level's task)."""
    lines = ["# The navigate level (robot-hrl export-c --navigate): its app task"]
    for symbol, value, comment in APP_CONFIG_SYMBOLS:
        lines += [f"# {comment}", f"{symbol}={value}"]
    return "\n".join(lines) + "\n"


def _steps(rate_hz: float, what: str) -> int:
    steps = 1000.0 / rate_hz / NAV_TASK_PERIOD_MS
    if abs(steps - round(steps)) > 1e-9 or round(steps) < 1:
        raise CodegenError(f"the level's {what} ({rate_hz:g} Hz) is not a whole number of the task's "
                           f"{NAV_TASK_PERIOD_MS} ms steps (10, 5, 2, 1 Hz ... are)")
    return int(round(steps))


def generate_navigate_task_c(contract: NavigateContract, sensors: Sequence[RangeSensorSpec], banner: str) -> str:
    """``nav_task.c`` for ``contract`` on a robot with ``sensors``."""
    unknown = [s.name for s in sensors if s.name not in RANGE_DIRECTIONS]
    if unknown:
        raise CodegenError(f"rangers {unknown} have no crazyflie-firmware range direction (range.h knows "
                           f"{list(RANGE_DIRECTIONS)}); the onboard task cannot read them")
    decide_steps = _steps(contract.decision_rate_hz, "decision rate")
    sense_steps = _steps(contract.memory.update_rate_hz, "memory rate") if contract.memory is not None else decide_steps
    directions = ", ".join(RANGE_DIRECTIONS[s.name] for s in sensors)
    lows = ", ".join(c_float(s.min_range_m) for s in sensors)
    highs = ", ".join(c_float(s.max_range_m) for s in sensors)
    height = c_float(contract.subgoal.flight_height_m)
    return f"""{banner}
/* The navigate level's app task: see deploy/crazyflie/c_navigate_task.py in robot_hrl. */
#include "autoconf.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "FreeRTOS.h"
#include "task.h"
#include "app.h"
#include "commander.h"
#include "log.h"
#include "param.h"
#include "range.h"
#include "stabilizer_types.h"
#include "system.h"

#include "nav_io.h"

#ifndef CONFIG_APP_ENABLE
#error "CONFIG_APP_ENABLE is not set: build with the generated app-config (the navigate level runs as the app task)"
#endif

#define NAV_TASK_PERIOD_MS {NAV_TASK_PERIOD_MS}
#define NAV_SENSE_STEPS {sense_steps}     /* the memory's rate */
#define NAV_DECIDE_STEPS {decide_steps}    /* the decision rate */

void navTaskStep(void);

/* The rangers in the contract's order, and their limits (m). */
static const rangeDirection_t navRangeDirection[NAV_NUM_RANGERS] = {{{directions}}};
static const float navRangeMin[NAV_NUM_RANGERS] = {{{lows}}};
static const float navRangeMax[NAV_NUM_RANGERS] = {{{highs}}};
static const char *const navStateNames[10] = {{"x", "y", "z", "vx", "vy", "vz", "qw", "qx", "qy", "qz"}};

static uint8_t navEnable;                           /* parameter rlNav.navEnable: 0 off (default) */
static float navGoalX, navGoalY;                    /* parameters rlNav.goalX, rlNav.goalY: the goal, m, world */
static float navTolerance = {c_float(GOAL_TOLERANCE_M)};              /* parameter rlNav.tolerance, m */
static uint8_t navState;                            /* log rlNav.navState */
static uint32_t navDecided, navRefusals;            /* log rlNav.decisions, rlNav.refused */
static float navSubgoal[3];                         /* log rlNav.subgoalX/Y/Z: m, world */
static bool navHaveSubgoal, navRunning;
static uint32_t navStep;
static float navReadings[NAV_NUM_RANGERS];
static logVarId_t navIds[10];
static setpoint_t navSetpoint;

void navTaskStep(void)
{{
  if (!navEnable) {{
    navRunning = false;
    navState = 0u;
    return;
  }}
  if (!navRunning) {{  /* (re)enabled: a new memory, no subgoal until the first decision */
    navReset();
    for (int i = 0; i < 10; ++i) {{
      navIds[i] = logGetVarId("stateEstimate", navStateNames[i]);
    }}
    for (int i = 0; i < NAV_NUM_RANGERS; ++i) {{
      navReadings[i] = navRangeMax[i];
    }}
    navHaveSubgoal = false;
    navStep = 0u;
    navRunning = true;
  }}
  float s[10];
  for (int i = 0; i < 10; ++i) {{
    s[i] = logGetFloat(navIds[i]);
  }}
  const float p[3] = {{s[0], s[1], s[2]}}, v[3] = {{s[3], s[4], s[5]}}, q[4] = {{s[6], s[7], s[8], s[9]}};
  /* A reading as the level observes it (range_for_observation): clamped to the limits; NaN or negative dropped. */
  for (int i = 0; i < NAV_NUM_RANGERS; ++i) {{
    const float r = rangeGet(navRangeDirection[i]);
    if (r == r && (r >= 0.0f || r == -INFINITY)) {{
      navReadings[i] = r < navRangeMin[i] ? navRangeMin[i] : (r > navRangeMax[i] ? navRangeMax[i] : r);
    }}
  }}
  if (navStep % NAV_SENSE_STEPS == 0u) {{
    (void)navSense(p, q, navReadings);
  }}
  if (navStep % NAV_DECIDE_STEPS == 0u) {{
    const float goal[3] = {{navGoalX, navGoalY, {height}}};
    const float dx = goal[0] - p[0], dy = goal[1] - p[1];
    float sg[3];
    if (dx * dx + dy * dy <= navTolerance * navTolerance) {{  /* at the goal: hold it */
      memcpy(navSubgoal, goal, sizeof(navSubgoal));
      navHaveSubgoal = true;
      navState = 3u;
    }} else if (navDecide(p, q, v, goal, sg)) {{
      memcpy(navSubgoal, sg, sizeof(navSubgoal));
      navHaveSubgoal = true;
      navDecided += 1u;
      navState = 1u;
    }} else {{  /* a NaN or inf input: no new subgoal, the last one is held */
      navRefusals += 1u;
      navState = 2u;
    }}
  }}
  navStep += 1u;
  if (navHaveSubgoal) {{
    memset(&navSetpoint, 0, sizeof(navSetpoint));
    navSetpoint.mode.x = modeAbs;
    navSetpoint.mode.y = modeAbs;
    navSetpoint.mode.z = modeAbs;
    navSetpoint.position.x = navSubgoal[0];
    navSetpoint.position.y = navSubgoal[1];
    navSetpoint.position.z = navSubgoal[2];
    commanderSetSetpoint(&navSetpoint, COMMANDER_PRIORITY_EXTRX);
  }}
}}

void appMain(void)
{{
  systemWaitStart();
  TickType_t wake = xTaskGetTickCount();
  for (;;) {{
    vTaskDelayUntil(&wake, M2T(NAV_TASK_PERIOD_MS));
    navTaskStep();
  }}
}}

PARAM_GROUP_START(rlNav)
PARAM_ADD(PARAM_UINT8, navEnable, &navEnable)
PARAM_ADD(PARAM_FLOAT, goalX, &navGoalX)
PARAM_ADD(PARAM_FLOAT, goalY, &navGoalY)
PARAM_ADD(PARAM_FLOAT, tolerance, &navTolerance)
PARAM_GROUP_STOP(rlNav)

LOG_GROUP_START(rlNav)
LOG_ADD(LOG_UINT8, navState, &navState)
LOG_ADD(LOG_UINT32, decisions, &navDecided)
LOG_ADD(LOG_UINT32, refused, &navRefusals)
LOG_ADD(LOG_FLOAT, subgoalX, &navSubgoal[0])
LOG_ADD(LOG_FLOAT, subgoalY, &navSubgoal[1])
LOG_ADD(LOG_FLOAT, subgoalZ, &navSubgoal[2])
LOG_GROUP_STOP(rlNav)
"""
