/* robot_hrl stub of the crazyflie-firmware stabilizer types used by the generated controller.
 * Written from the documented layout (stabilizer_types.h in bitcraze/crazyflie-firmware);
 * see README.md. Units as documented there. */
#ifndef ROBOT_HRL_STUB_STABILIZER_TYPES_H
#define ROBOT_HRL_STUB_STABILIZER_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "imu_types.h"

/* Number of stabilizer loop iterations (the loop runs at 1000 Hz). */
typedef uint32_t stabilizerStep_t;

typedef struct attitude_s {
  uint32_t timestamp;
  float roll;   /* deg */
  float pitch;  /* deg, legacy CF2 sign convention (inverted) */
  float yaw;    /* deg */
} attitude_t;

struct vec3_s {
  uint32_t timestamp;
  float x;
  float y;
  float z;
};
typedef struct vec3_s point_t;     /* m */
typedef struct vec3_s velocity_t;  /* m/s */
typedef struct vec3_s acc_t;

/* q0..q3 alias x, y, z, w (q0 is x). */
typedef struct quaternion_s {
  union {
    struct { float q0; float q1; float q2; float q3; };
    struct { float x; float y; float z; float w; };
  };
} quaternion_t;

typedef struct baro_s {
  float pressure;     /* mbar */
  float temperature;  /* degC */
  float asl;          /* m */
} baro_t;

typedef struct sensorData_s {
  Axis3f acc;   /* Gs */
  Axis3f gyro;  /* deg/s, body frame */
  Axis3f mag;   /* gauss */
  baro_t baro;
  uint64_t interruptTimestamp;
} sensorData_t;

typedef struct state_s {
  attitude_t attitude;              /* deg, legacy pitch sign */
  quaternion_t attitudeQuaternion;  /* body to world */
  point_t position;                 /* m, world */
  velocity_t velocity;              /* m/s, world */
  acc_t acc;                        /* Gs */
} state_t;

#define STABILIZER_NR_OF_MOTORS 4

typedef enum control_mode_e {
  controlModeLegacy = 0,
  controlModeForceTorque = 1,
  controlModeForce = 2,
} control_mode_t;

typedef struct control_s {
  union {
    struct { int16_t roll; int16_t pitch; int16_t yaw; float thrust; };  /* controlModeLegacy */
    struct {                                                             /* controlModeForceTorque */
      float thrustSi;  /* N */
      union {
        float torque[3];  /* N m */
        struct { float torqueX; float torqueY; float torqueZ; };
      };
    };
    float normalizedForces[STABILIZER_NR_OF_MOTORS];                     /* controlModeForce */
  };
  control_mode_t controlMode;
} control_t;

/* Per-motor commands between the power distribution, the battery compensation and the cap. */
typedef union {
  int32_t list[STABILIZER_NR_OF_MOTORS];
  struct { int32_t m1; int32_t m2; int32_t m3; int32_t m4; } motors;
} motors_thrust_uncapped_t;

typedef union {
  uint16_t list[STABILIZER_NR_OF_MOTORS];
  struct { uint16_t m1; uint16_t m2; uint16_t m3; uint16_t m4; } motors;  /* PWM ratio, 0..65535 */
} motors_thrust_pwm_t;

typedef enum mode_e { modeDisable = 0, modeAbs, modeVelocity } stab_mode_t;

typedef struct setpoint_s {
  uint32_t timestamp;
  attitude_t attitude;       /* deg */
  attitude_t attitudeRate;   /* deg/s */
  quaternion_t attitudeQuaternion;
  float thrust;
  point_t position;          /* m, world */
  velocity_t velocity;       /* m/s */
  acc_t acceleration;        /* m/s^2 */
  bool velocity_body;
  struct {
    stab_mode_t x, y, z, roll, pitch, yaw, quat;
  } mode;
} setpoint_t;

#define RATE_1000_HZ 1000
#define RATE_500_HZ 500
#define RATE_250_HZ 250
#define RATE_100_HZ 100
#define RATE_50_HZ 50
#define RATE_25_HZ 25
#define RATE_MAIN_LOOP RATE_1000_HZ
#define ATTITUDE_RATE RATE_500_HZ   /* the PID's attitude and rate loops: even ticks */
#define POSITION_RATE RATE_100_HZ   /* the PID's position loop: every 10th tick */

/* True on the ticks where a task running at RATE_HZ executes. */
#define RATE_DO_EXECUTE(RATE_HZ, TICK) (((TICK) % (RATE_MAIN_LOOP / (RATE_HZ))) == 0)

#endif
