/* robot_hrl stub: the out-of-tree controller entry points of crazyflie-firmware's controller.h. */
#ifndef ROBOT_HRL_STUB_CONTROLLER_H
#define ROBOT_HRL_STUB_CONTROLLER_H

#include "stabilizer_types.h"

void controllerOutOfTreeInit(void);
bool controllerOutOfTreeTest(void);
void controllerOutOfTree(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                         const state_t *state, const stabilizerStep_t stabilizerStep);

#endif
