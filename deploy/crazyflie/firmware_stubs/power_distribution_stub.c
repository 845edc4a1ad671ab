/* robot_hrl test stand-in for crazyflie-firmware's output stage: control_t -> motor PWM. Host tests only.
 * Written from the firmware's behaviour (docs/firmware_actuator_chain.md in robot_hrl has the formulas and
 * sources), not copied. Kept, including its awkward parts:
 *   - control_t is a union read according to controlMode: legacy int16 roll/pitch/yaw + float thrust (PWM units),
 *     controlModeForceTorque float thrustSi (N) + torques (N m), controlModeForce four normalized forces;
 *   - legacy mixing halves roll and pitch into int16 before mixing (r = roll / 2, p = pitch / 2);
 *   - force-torque mixing: per-motor force, negative forces floored at 0, scaled so that 65535 = THRUST_MAX
 *     and truncated to int32;
 *   - battery compensation on every mode (legacy thrust is read as a fraction of THRUST_MAX too): a command
 *     below THRUST_MIN is 0 (motor off), otherwise the motor voltage that gives that force (inverse of the
 *     cubic VMOTOR2THRUST fit) over the supply voltage, times 65535; no upper clamp here, so it can exceed
 *     65535; below 2 V of supply every motor gets 0;
 *   - the cap in PWM units: when the highest motor exceeds 65535, all four are lowered by the same amount
 *     (the thrust differences that steer are kept, the collective thrust is lost), then floored at the idle
 *     thrust (0 on the cf2 without CONFIG_MOTORS_REQUIRE_ARMING).
 * Constants: cf2, 2.1+ propellers (CONFIG_CRAZYFLIE_21_PLUS, the Kconfig default), battery compensation on
 * (CONFIG_ENABLE_THRUST_BAT_COMPENSATED, default y): src/platform/interface/platform_defaults_cf2.h. */
#include <math.h>

#include "power_distribution.h"

#define STUB_ARM_LENGTH_M 0.046f                       /* ARM_LENGTH */
#define STUB_THRUST_MIN_N 0.012817578393224994f        /* THRUST_MIN, per motor */
#define STUB_THRUST_MAX_N 0.12f                        /* THRUST_MAX, per motor: 65535 in the thrust command */
#define STUB_THRUST2TORQUE_M 0.0069928948992470565f    /* THRUST2TORQUE: yaw torque per N of rotor thrust */
/* VMOTOR2THRUST0..3: rotor thrust (N) = c0 + c1 v + c2 v^2 + c3 v^3, v = motor voltage (V) */
static const double stubVmotorToThrust[4] = {-0.02476537915958403, 0.06523793527519485, -0.026792504967750107,
                                             0.006776789303971145};
#define STUB_IDLE_THRUST 0u                            /* powerDistributionGetIdleThrust() without arming */
#define STUB_MIN_SUPPLY_V 2.0f                         /* below it the compensation gives 0 */

void powerDistribution(const control_t *control, motors_thrust_uncapped_t *motorThrustUncapped)
{
  if (control->controlMode == controlModeLegacy) {
    const int16_t r = (int16_t)(control->roll / 2.0f);
    const int16_t p = (int16_t)(control->pitch / 2.0f);
    const float t = control->thrust;
    const float y = (float)control->yaw;
    motorThrustUncapped->motors.m1 = (int32_t)(t - (float)r + (float)p + y);
    motorThrustUncapped->motors.m2 = (int32_t)(t - (float)r - (float)p - y);
    motorThrustUncapped->motors.m3 = (int32_t)(t + (float)r - (float)p + y);
    motorThrustUncapped->motors.m4 = (int32_t)(t + (float)r + (float)p - y);
  } else if (control->controlMode == controlModeForceTorque) {
    const float arm = 0.707106781f * STUB_ARM_LENGTH_M;  /* rotor offset along body x and y */
    const float collective = 0.25f * control->thrustSi;
    const float fromRoll = 0.25f / arm * control->torqueX;
    const float fromPitch = 0.25f / arm * control->torqueY;
    const float fromYaw = 0.25f * control->torqueZ / STUB_THRUST2TORQUE_M;
    /* M1 front-right (CW), M2 back-right (CCW), M3 back-left (CW), M4 front-left (CCW) */
    const float force[STABILIZER_NR_OF_MOTORS] = {
        collective - fromRoll - fromPitch - fromYaw, collective - fromRoll + fromPitch + fromYaw,
        collective + fromRoll + fromPitch - fromYaw, collective + fromRoll - fromPitch + fromYaw};
    for (int i = 0; i < STABILIZER_NR_OF_MOTORS; ++i) {
      const float f = force[i] < 0.0f ? 0.0f : force[i];
      motorThrustUncapped->list[i] = (int32_t)(f / STUB_THRUST_MAX_N * 65535.0f);
    }
  } else if (control->controlMode == controlModeForce) {
    for (int i = 0; i < STABILIZER_NR_OF_MOTORS; ++i) {
      float f = control->normalizedForces[i];
      f = f < 0.0f ? 0.0f : (f > 1.0f ? 1.0f : f);
      motorThrustUncapped->list[i] = (int32_t)(f * 65535.0f);
    }
  }
  /* any other mode: the firmware leaves the output as it was */
}

/* The motor voltage (V) at which one rotor gives thrust_n: the real root of the cubic fit. The fit's slope
 * c1 + 2 c2 v + 3 c3 v^2 has no real zero for the 2.1+ constants, so the root is unique: found by bisection. */
static double stubMotorVoltageForThrust(double thrust_n)
{
  double lo = -1.0, hi = 20.0;
  for (int k = 0; k < 80; ++k) {
    const double v = 0.5 * (lo + hi);
    const double f = stubVmotorToThrust[0] + v * (stubVmotorToThrust[1] + v * (stubVmotorToThrust[2] +
                                                                            v * stubVmotorToThrust[3]));
    if (f < thrust_n) {
      lo = v;
    } else {
      hi = v;
    }
  }
  return 0.5 * (lo + hi);
}

float motorsCompensateBatteryVoltage(uint32_t id, float iThrust, float supplyVoltage)
{
  (void)id;
  if (supplyVoltage < STUB_MIN_SUPPLY_V) {
    return 0.0f;
  }
  const float thrust_n = iThrust / 65535.0f * STUB_THRUST_MAX_N;
  if (thrust_n < STUB_THRUST_MIN_N) {
    return 0.0f;  /* below THRUST_MIN the motor is off */
  }
  const double motorVoltage = stubMotorVoltageForThrust((double)thrust_n);
  return (float)(65535.0 * motorVoltage / (double)supplyVoltage);
}

bool powerDistributionCap(const motors_thrust_uncapped_t *motorThrustBatCompUncapped, motors_thrust_pwm_t *motorPwm)
{
  int32_t highest = 0;
  for (int i = 0; i < STABILIZER_NR_OF_MOTORS; ++i) {
    if (motorThrustBatCompUncapped->list[i] > highest) {
      highest = motorThrustBatCompUncapped->list[i];
    }
  }
  const int32_t excess = highest > 65535 ? highest - 65535 : 0;
  for (int i = 0; i < STABILIZER_NR_OF_MOTORS; ++i) {
    const int32_t lowered = motorThrustBatCompUncapped->list[i] - excess;
    motorPwm->list[i] = (uint16_t)(lowered < (int32_t)STUB_IDLE_THRUST ? (int32_t)STUB_IDLE_THRUST : lowered);
  }
  return excess > 0;
}

bool stubControlMotors(const control_t *control, float supplyVoltage, motors_thrust_pwm_t *motorPwm)
{
  static motors_thrust_uncapped_t uncapped;  /* statics in stabilizer.c: a mode the distribution skips keeps them */
  motors_thrust_uncapped_t compensated;
  powerDistribution(control, &uncapped);
  for (int i = 0; i < STABILIZER_NR_OF_MOTORS; ++i) {
    compensated.list[i] = (int32_t)motorsCompensateBatteryVoltage((uint32_t)i, (float)uncapped.list[i], supplyVoltage);
  }
  return powerDistributionCap(&compensated, motorPwm);
}
