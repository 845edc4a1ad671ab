/* robot_hrl stub of crazyflie-firmware's log-table macros (src/modules/interface/log.h).
 * The real ones put {type, name, address} into a linker section that the log service reads and streams
 * (cfclient, cflib). Here each LOG_ADD keeps only the address, as a pointer named stubLog_<NAME>, so the
 * host tests read a log variable the way the log service does. */
#ifndef ROBOT_HRL_STUB_LOG_H
#define ROBOT_HRL_STUB_LOG_H

#define LOG_GROUP_START(NAME)
#define LOG_GROUP_STOP(NAME)
#define LOG_ADD(TYPE, NAME, ADDRESS) const void *const stubLog_##NAME = (const void *)(ADDRESS);

#include <stdint.h>

/* Reading another module's log variable by name, as apps do (logGetVarId("stateEstimate", "x"), logGetFloat). */
typedef uint16_t logVarId_t;
logVarId_t logGetVarId(const char *group, const char *name);
float logGetFloat(logVarId_t varid);

#endif
