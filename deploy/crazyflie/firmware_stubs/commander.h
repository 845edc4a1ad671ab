/* robot_hrl test stub of the firmware's src/modules/interface/commander.h: setpoints from a source with a priority;
 * a source must resend within COMMANDER_WDT_TIMEOUT_STABILIZE (500 ms) or the commander levels the drone out.
 * The generated code uses the priority by name only (its value differs between releases). Not the firmware's file. */
#ifndef ROBOT_HRL_STUB_COMMANDER_H
#define ROBOT_HRL_STUB_COMMANDER_H

#include "stabilizer_types.h"

#define COMMANDER_PRIORITY_DISABLE 0
#define COMMANDER_PRIORITY_LOWEST 1
#define COMMANDER_PRIORITY_HIGHLEVEL 1
#define COMMANDER_PRIORITY_CRTP 2
#define COMMANDER_PRIORITY_EXTRX 3

void commanderSetSetpoint(setpoint_t *setpoint, int priority);

#endif
