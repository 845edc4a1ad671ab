/* robot_hrl test stub of FreeRTOS.h (the firmware's FreeRTOS): the tick type only. Not the firmware's file. */
#ifndef ROBOT_HRL_STUB_FREERTOS_H
#define ROBOT_HRL_STUB_FREERTOS_H

#include <stdint.h>

typedef uint32_t TickType_t;

#endif
