/* robot_hrl test stand-in for crazyflie-firmware's PID controller (src/modules/src/controller/controller_pid.c,
 * attitude_pid_controller.c, position_controller_pid.c). Host tests only; written from the real controller's
 * behaviour, not copied.
 *
 * What the out-of-tree controller depends on is WHEN the real controllerPid writes WHICH field of the
 * stabilizer's control_t (a static that lives across ticks), and this stand-in keeps exactly that:
 *   - controlMode = controlModeLegacy on every call;
 *   - roll, pitch, yaw (int16, legacy view of the control_t union) only on ATTITUDE_RATE ticks (500 Hz: even
 *     ticks). On odd ticks they keep whatever control_t held: after controlModeForceTorque, the bytes of the
 *     float thrustSi and torqueX;
 *   - thrust (float) on every call, from actuatorThrust, which the position loop updates only on POSITION_RATE
 *     ticks (100 Hz), or setpoint->thrust on attitude ticks when mode.z is modeDisable;
 *   - thrust == 0: roll, pitch, yaw are zeroed as well;
 *   - controllerPidInit: the attitude controller's init runs once (attitudeControllerInit returns at once when
 *     already initialized), the position controller's init runs on every call.
 * Its control laws are simple proportional stand-ins of the cascaded PIDs; they give the tests outputs that depend
 * on the state, so a field written on the wrong tick shows. */
#include <stdint.h>

#include "controller_pid.h"

#define STUB_THRUST_BASE 36000.0f  /* platform_defaults_cf2.h PID_VEL_THRUST_BASE */
#define STUB_THRUST_MIN 20000.0f   /* platform_defaults_cf2.h PID_VEL_THRUST_MIN */
#define STUB_KZ 20000.0f           /* thrust per m of height error (stand-in gain) */
#define STUB_KVZ 10000.0f          /* thrust per m/s of vertical speed (stand-in gain) */
#define STUB_KRATE 250.0f          /* int16 output per deg/s (platform_defaults_cf2.h PID_ROLL_RATE_KP) */

int stubPidCalls = 0;
int stubPidInits = 0;           /* controllerPidInit calls */
int stubPidAttitudeInits = 0;   /* attitude controller inits actually done: one per boot */
int stubPidPositionInits = 0;   /* position controller inits: one per controllerPidInit */
int16_t stubPidRollOut = 0;     /* the attitude controller's last outputs (attitudeControllerGetActuatorOutput) */
int16_t stubPidPitchOut = 0;
int16_t stubPidYawOut = 0;
float stubPidActuatorThrust = 0.0f;

static int stubAttitudeIsInit = 0;

static int16_t stubSaturateInt16(float value)
{
  if (value > 32767.0f) {
    return 32767;
  }
  if (value < -32767.0f) {
    return -32767;
  }
  return (int16_t)value;
}

void controllerPidInit(void)
{
  stubPidInits++;
  if (!stubAttitudeIsInit) {
    stubAttitudeIsInit = 1;
    stubPidAttitudeInits++;
  }
  stubPidPositionInits++;
}

bool controllerPidTest(void) { return stubAttitudeIsInit != 0; }

void controllerPid(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                   const state_t *state, const stabilizerStep_t stabilizerStep)
{
  stubPidCalls++;
  control->controlMode = controlModeLegacy;

  if (RATE_DO_EXECUTE(POSITION_RATE, stabilizerStep) && setpoint->mode.z != modeDisable) {
    float thrust = STUB_THRUST_BASE + STUB_KZ * (setpoint->position.z - state->position.z)
                   - STUB_KVZ * state->velocity.z;
    if (thrust < STUB_THRUST_MIN) {
      thrust = STUB_THRUST_MIN;
    }
    if (thrust > 65535.0f) {
      thrust = 65535.0f;
    }
    stubPidActuatorThrust = thrust;
  }

  if (RATE_DO_EXECUTE(ATTITUDE_RATE, stabilizerStep)) {
    if (setpoint->mode.z == modeDisable) {
      stubPidActuatorThrust = setpoint->thrust;
    }
    /* rate loop stand-in: damp the body rates (gyro in deg/s); pitch and yaw signs as the real one's output */
    stubPidRollOut = stubSaturateInt16(-STUB_KRATE * sensors->gyro.x);
    stubPidPitchOut = stubSaturateInt16(STUB_KRATE * sensors->gyro.y);
    stubPidYawOut = stubSaturateInt16(-STUB_KRATE * sensors->gyro.z);
    control->roll = stubPidRollOut;
    control->pitch = stubPidPitchOut;
    control->yaw = (int16_t)(-stubPidYawOut);
  }

  control->thrust = stubPidActuatorThrust;
  if (control->thrust == 0.0f) {
    control->roll = 0;
    control->pitch = 0;
    control->yaw = 0;
  }
}
