/* robot_hrl stub: the stabilizer's output stage of crazyflie-firmware, for the host tests only.
 * The real functions live in src/modules/src/power_distribution_quadrotor.c (powerDistribution,
 * powerDistributionCap), src/drivers/src/motors.c (motorsCompensateBatteryVoltage) and
 * src/modules/src/stabilizer.c (the order: distribute, compensate, cap, set the motor ratios).
 * See power_distribution_stub.c for what is kept of them. */
#ifndef ROBOT_HRL_STUB_POWER_DISTRIBUTION_H
#define ROBOT_HRL_STUB_POWER_DISTRIBUTION_H

#include <stdbool.h>
#include <stdint.h>

#include "stabilizer_types.h"

/* control_t (any of its three modes) -> per-motor thrust, 65535 = THRUST_MAX per motor. */
void powerDistribution(const control_t *control, motors_thrust_uncapped_t *motorThrustUncapped);
/* One motor's thrust command (65535 = THRUST_MAX) -> PWM ratio at the battery voltage (may exceed 65535). */
float motorsCompensateBatteryVoltage(uint32_t id, float iThrust, float supplyVoltage);
/* Shift all four down by the excess of the highest over 65535, floor at the idle thrust; true when capped. */
bool powerDistributionCap(const motors_thrust_uncapped_t *motorThrustBatCompUncapped, motors_thrust_pwm_t *motorPwm);

/* stabilizer.c's motor path for one tick: the PWM the four motors get from control_t at supplyVoltage (V). */
bool stubControlMotors(const control_t *control, float supplyVoltage, motors_thrust_pwm_t *motorPwm);

#endif
