/* robot_hrl stand-ins of the firmware services the navigate level's task uses (host and probe builds only):
 * the range module (rangeGet), the log service's getters for stateEstimate (the estimator's state, by name),
 * the commander (the last setpoint and its priority are kept), FreeRTOS's tick and systemWaitStart. */
#include <math.h>
#include <string.h>

#include "FreeRTOS.h"
#include "commander.h"
#include "log.h"
#include "range.h"
#include "system.h"
#include "task.h"

void stubNavSetRanges(const float *ranges);
void stubNavSetState(const float *state);
int stubNavSetpoint(float *out);

static float stubRanges[RANGE_T_END];
/* stateEstimate x, y, z, vx, vy, vz, qw, qx, qy, qz (the log's names; m, m/s, quaternion) */
static const char *const stubStateNames[10] = {"x", "y", "z", "vx", "vy", "vz", "qw", "qx", "qy", "qz"};
static float stubState[10];
static setpoint_t stubSetpoint;
static int stubSetpoints, stubPriority;
static TickType_t stubTick;

float rangeGet(rangeDirection_t direction) { return stubRanges[direction]; }

logVarId_t logGetVarId(const char *group, const char *name)
{
  if (strcmp(group, "stateEstimate") == 0) {
    for (int i = 0; i < 10; ++i) {
      if (strcmp(name, stubStateNames[i]) == 0) return (logVarId_t)(i + 1);
    }
  }
  return 0;  /* the firmware's invalid id */
}

float logGetFloat(logVarId_t varid) { return varid >= 1 && varid <= 10 ? stubState[varid - 1] : NAN; }

void commanderSetSetpoint(setpoint_t *setpoint, int priority)
{
  stubSetpoint = *setpoint;
  stubPriority = priority;
  stubSetpoints += 1;
}

TickType_t xTaskGetTickCount(void) { return stubTick; }
void vTaskDelayUntil(TickType_t *previousWakeTime, TickType_t timeIncrement) { *previousWakeTime += timeIncrement; stubTick = *previousWakeTime; }
void systemWaitStart(void) {}

void stubNavSetRanges(const float *ranges) { memcpy(stubRanges, ranges, sizeof(stubRanges)); }
void stubNavSetState(const float *state) { memcpy(stubState, state, sizeof(stubState)); }

/* out: position x y z, mode x y z (as ints), priority; returns the number of setpoints sent so far */
int stubNavSetpoint(float *out)
{
  out[0] = stubSetpoint.position.x; out[1] = stubSetpoint.position.y; out[2] = stubSetpoint.position.z;
  out[3] = (float)stubSetpoint.mode.x; out[4] = (float)stubSetpoint.mode.y; out[5] = (float)stubSetpoint.mode.z;
  out[6] = (float)stubPriority;
  return stubSetpoints;
}
