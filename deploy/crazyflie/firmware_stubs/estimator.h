/* robot_hrl stub: the state estimator interface of crazyflie-firmware's estimator.h
 * (src/modules/interface/estimator/estimator.h), only what the generated controller uses.
 * As there, it includes autoconf.h, and the enum has a Kalman member only when the build
 * enables the Kalman estimator (CONFIG_ESTIMATOR_KALMAN_ENABLE). */
#ifndef ROBOT_HRL_STUB_ESTIMATOR_H
#define ROBOT_HRL_STUB_ESTIMATOR_H

#include "autoconf.h"
#include "stabilizer_types.h"

typedef enum {
  StateEstimatorTypeAutoSelect = 0,
  StateEstimatorTypeComplementary,
#ifdef CONFIG_ESTIMATOR_KALMAN_ENABLE
  StateEstimatorTypeKalman,
#endif
#ifdef CONFIG_ESTIMATOR_UKF_ENABLE
  StateEstimatorTypeUkf,
#endif
#ifdef CONFIG_ESTIMATOR_OOT
  StateEstimatorTypeOutOfTree,
#endif
  StateEstimatorType_COUNT,
} StateEstimatorType;

/* The estimator that runs now. It can change in flight (parameter stabilizer.estimator). */
StateEstimatorType stateEstimatorGetType(void);

#endif
