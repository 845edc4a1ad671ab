/* robot_hrl stub: the parameter-table macros of crazyflie-firmware expand to nothing here. */
#ifndef ROBOT_HRL_STUB_PARAM_H
#define ROBOT_HRL_STUB_PARAM_H

#define PARAM_GROUP_START(NAME)
#define PARAM_GROUP_STOP(NAME)
#define PARAM_ADD(TYPE, NAME, ADDRESS)

#endif
