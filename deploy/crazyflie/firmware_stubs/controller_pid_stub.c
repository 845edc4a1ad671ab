/* robot_hrl test stand-in for crazyflie-firmware's PID controller: it flies nothing, it records
 * that it was called and writes a recognizable legacy-mode command. Host tests only. */
#include "controller_pid.h"

int stubPidCalls = 0;
int stubPidInits = 0;

void controllerPidInit(void) { stubPidInits++; }

bool controllerPidTest(void) { return true; }

void controllerPid(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                   const state_t *state, const stabilizerStep_t stabilizerStep)
{
  (void)setpoint; (void)sensors; (void)state; (void)stabilizerStep;
  stubPidCalls++;
  control->controlMode = controlModeLegacy;
  control->roll = 0;
  control->pitch = 0;
  control->yaw = 0;
  control->thrust = 12345.0f;
}
