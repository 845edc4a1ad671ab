/* robot_hrl stub of crazyflie-firmware's parameter-table macros (src/modules/interface/param.h).
 * The real ones put {type, name, address} into a linker section that the parameter service reads and
 * writes over the radio (cfclient, cflib). Here each PARAM_ADD keeps only the address, as a pointer named
 * stubParam_<NAME>, so the host tests write a parameter the way the parameter service does: through its
 * address, between two stabilizer ticks. */
#ifndef ROBOT_HRL_STUB_PARAM_H
#define ROBOT_HRL_STUB_PARAM_H

#define PARAM_GROUP_START(NAME)
#define PARAM_GROUP_STOP(NAME)
#define PARAM_ADD(TYPE, NAME, ADDRESS) void *const stubParam_##NAME = (void *)(ADDRESS);

#endif
