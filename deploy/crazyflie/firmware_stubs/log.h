/* robot_hrl stub: the log-table macros of crazyflie-firmware expand to nothing here. */
#ifndef ROBOT_HRL_STUB_LOG_H
#define ROBOT_HRL_STUB_LOG_H

#define LOG_GROUP_START(NAME)
#define LOG_GROUP_STOP(NAME)
#define LOG_ADD(TYPE, NAME, ADDRESS)

#endif
