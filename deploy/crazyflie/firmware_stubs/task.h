/* robot_hrl test stub of FreeRTOS task.h and the firmware's M2T (config/FreeRTOSConfig.h: 1 tick = 1 ms on the
 * Crazyflie, configTICK_RATE_HZ 1000). Not the firmware's file. */
#ifndef ROBOT_HRL_STUB_TASK_H
#define ROBOT_HRL_STUB_TASK_H

#include "FreeRTOS.h"

#define M2T(X) ((TickType_t)(X))

TickType_t xTaskGetTickCount(void);
void vTaskDelayUntil(TickType_t *previousWakeTime, TickType_t timeIncrement);

#endif
