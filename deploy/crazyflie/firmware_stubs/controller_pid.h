/* robot_hrl stub: the PID controller API of crazyflie-firmware's controller_pid.h. */
#ifndef ROBOT_HRL_STUB_CONTROLLER_PID_H
#define ROBOT_HRL_STUB_CONTROLLER_PID_H

#include "stabilizer_types.h"

void controllerPidInit(void);
bool controllerPidTest(void);
void controllerPid(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                   const state_t *state, const stabilizerStep_t stabilizerStep);

#endif
