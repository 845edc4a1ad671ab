/* robot_hrl test stand-in for crazyflie-firmware's estimator selection (estimator.c). Host tests only.
 *
 * What it keeps of the real one: the estimator that runs after start-up is the one the kbuild
 * configuration selects in the 'Default estimator' choice; auto-select resolves to the
 * complementary estimator (no deck asks for another here); the type can be switched at run time,
 * as the parameter stabilizer.estimator does. */
#include "estimator.h"

#if defined(CONFIG_ESTIMATOR_KALMAN)
static StateEstimatorType stubEstimatorType = StateEstimatorTypeKalman;
#else
static StateEstimatorType stubEstimatorType = StateEstimatorTypeComplementary;
#endif

StateEstimatorType stateEstimatorGetType(void) { return stubEstimatorType; }

/* Test hook: what writing the parameter stabilizer.estimator does (0 auto, 1 complementary, 2 Kalman). */
void stubEstimatorSwitchTo(int type);
void stubEstimatorSwitchTo(int type)
{
  stubEstimatorType = (type <= (int)StateEstimatorTypeAutoSelect) ? StateEstimatorTypeComplementary
                                                                 : (StateEstimatorType)type;
}
