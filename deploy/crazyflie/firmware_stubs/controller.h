/* robot_hrl stub: the out-of-tree controller entry points of crazyflie-firmware's controller.h
 * (src/modules/interface/controller/controller.h). As there, the prototypes exist only when the
 * kbuild configuration sets CONFIG_CONTROLLER_OOT, and the header does not include autoconf.h
 * itself: a source that defines controllerOutOfTree* must include autoconf.h first, or a wrong
 * signature would compile against no prototype at all. */
#ifndef ROBOT_HRL_STUB_CONTROLLER_H
#define ROBOT_HRL_STUB_CONTROLLER_H

#include "stabilizer_types.h"

#ifdef CONFIG_CONTROLLER_OOT
void controllerOutOfTreeInit(void);
bool controllerOutOfTreeTest(void);
void controllerOutOfTree(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                         const state_t *state, const stabilizerStep_t stabilizerStep);
#endif

#endif
