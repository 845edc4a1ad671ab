/* robot_hrl stub: the 3-axis float vector of crazyflie-firmware's imu_types.h (see README.md). */
#ifndef ROBOT_HRL_STUB_IMU_TYPES_H
#define ROBOT_HRL_STUB_IMU_TYPES_H

typedef union {
  struct { float x; float y; float z; };
  float axis[3];
} Axis3f;

#endif
