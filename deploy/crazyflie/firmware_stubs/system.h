/* robot_hrl test stub of the firmware's system.h: systemWaitStart blocks a task until the system has started. */
#ifndef ROBOT_HRL_STUB_SYSTEM_H
#define ROBOT_HRL_STUB_SYSTEM_H

void systemWaitStart(void);

#endif
