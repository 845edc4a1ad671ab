"""The heading loop onboard (``src/policy_heading.[ch]``): the C twin of robot_hrl.runtime.heading.HeadingLoop.

A navigate level trained with the heading loop (its contract's ``heading``) is flown with the loop under the goto
skill. Onboard the goto runs in ``controllerOutOfTree`` (deploy/crazyflie/c_controller.py), so the loop runs there
too: after each policy inference the skill's normalized ``torque_z`` is replaced by the loop's, before the contract's
mapping (``policyActionsToControl``); the policy still observes its own last action, as in Python. Before each
inference the skill's observation is turned into its own frame (``policyHeadingTurnState``: the robot's yaw reads as
the contract's ``skill_yaw_rad``; robot_hrl.runtime.heading.turn_observation).

Its inputs from the firmware's structures: the yaw from ``state->attitudeQuaternion`` (body to world, the same
formula as robot_hrl.contract.navigate.yaw_from_quat), the body z rate from ``sensors->gyro.z`` (deg/s, times
pi/180) and the horizontal velocity ``state->velocity.x/y`` (m/s, world). Every constant comes from the level's
HeadingSpec, the robot's yaw inertia and the goto contract's torque_z range. Without a heading section the file
still exists and does nothing (``POLICY_HEADING_ENABLED`` 0), so one controller source serves both.

tests/test_heading.py compiles it with gcc and checks it step by step against the numpy loop.
"""

from __future__ import annotations

from types import SimpleNamespace

from robot_hrl.contract.schema import PolicyContract

from deploy.crazyflie.c_model import c_float
from deploy.crazyflie.errors import CodegenError

HEADING_SOURCES: tuple[str, ...] = ("policy_heading.c",)


def generate_heading_c(contract: PolicyContract, heading, robot, banner: str) -> tuple[str, str]:
    """(policy_heading.h, policy_heading.c) for the goto ``contract`` on ``robot`` under a level's ``heading`` (None: a
    no-op). The loop's own checks (robot_hrl.runtime.heading.heading_loop: the action mode, torque_z, the robot's yaw
    inertia) refuse what the C cannot run."""
    from robot_hrl.errors import ConfigError
    from robot_hrl.runtime.heading import heading_loop

    enabled = heading is not None
    if enabled:
        try:  # (heading_loop reads a policy's contract and robot)
            loop = heading_loop(heading, SimpleNamespace(contract=contract, robot=robot))
        except ConfigError as exc:
            raise CodegenError(str(exc)) from None
        index, inertia_zz_kgm2, turned = loop.index, loop.inertia_zz_kgm2, loop.turned
        term = contract.action.terms[index]
        dt = 1.0 / float(contract.control_rate_hz)
        wn = heading.natural_frequency_radps
        constants = {
            "POLICY_HEADING_INDEX": str(index),
            "POLICY_HEADING_DT_S": c_float(dt),
            "POLICY_HEADING_MAX_STEP_RAD": c_float(heading.max_rate_radps * dt),
            "POLICY_HEADING_MAX_ERROR_RAD": c_float(heading.max_error_rad),
            "POLICY_HEADING_MIN_SPEED2": c_float(heading.min_speed_mps ** 2),
            "POLICY_HEADING_KP": c_float(wn * wn),
            "POLICY_HEADING_KD": c_float(2.0 * heading.damping_ratio * wn),
            "POLICY_HEADING_IZZ": c_float(inertia_zz_kgm2),
            "POLICY_HEADING_LOW_NM": c_float(term.low),
            "POLICY_HEADING_HIGH_NM": c_float(term.high),
            "POLICY_HEADING_SKILL_YAW_RAD": c_float(heading.skill_yaw_rad),
            "POLICY_HEADING_PAIRS": str(len(turned.x_index)),
            "POLICY_HEADING_LEAD_S": c_float(heading.lead_s),
            "POLICY_HEADING_LEAD_ALPHA": c_float(dt / (heading.lead_filter_s + dt)),
            "POLICY_HEADING_MAX_YAW_RATE_RADPS": c_float(heading.max_yaw_rate_radps),
            "POLICY_HEADING_KP_OVER_KD": c_float(wn / (2.0 * heading.damping_ratio)),
        }
        pairs = ",\n".join(f"  {{{i}, {j}, {c_float(lo)}, {c_float(hi)}}}"
                           for i, j, lo, hi in zip(turned.x_index, turned.y_index, turned.low, turned.high))
        what = (f"heading {heading.mode}: setpoint at most {heading.max_rate_radps:g} rad/s, w_n {wn:g} rad/s, zeta "
                f"{heading.damping_ratio:g}, below {heading.min_speed_mps:g} m/s the target holds, setpoint within "
                f"{heading.max_error_rad:g} rad of the yaw, the target leads into a turn by {heading.lead_s:g} s of "
                f"the velocity's turn, yaw rate command within {heading.max_yaw_rate_radps:g} rad/s (0: no limit); "
                f"the skill observes the world turned so that its yaw reads "
                f"{heading.skill_yaw_rad:.4f} rad")
    else:
        constants, what = {}, "no heading loop: the level names none (the goto skill's own yaw torque flies)"
    defines = "\n".join(f"#define {k} {v}" for k, v in constants.items())
    h = f"""{banner}
#ifndef POLICY_HEADING_H
#define POLICY_HEADING_H

#include "stabilizer_types.h"

/* {what} (robot_hrl.runtime.heading). */
#define POLICY_HEADING_ENABLED {1 if enabled else 0}

/* Forget the setpoint: the next call starts from the robot's yaw (a new policy episode). */
void policyHeadingReset(void);

/* One control period: replace the normalized torque_z of ``actions`` by the loop's (yaw rad, yaw rate rad/s,
 * velocity m/s world). A no-op without a heading loop. */
void policyHeadingApply(float yaw_rad, float yaw_rate_radps, float vx_mps, float vy_mps, float *actions);

/* policyHeadingApply from the firmware's state estimate and gyro. */
void policyHeadingApplyState(const state_t *state, const sensorData_t *sensors, float *actions);

/* The skill's observation seen from a world frame turned by offset_rad about z: its world-frame columns turn and are
 * clipped again to their terms' ranges (robot_hrl.runtime.heading.turn_observation). A no-op without a heading loop. */
void policyHeadingTurn(float offset_rad, float *obs);

/* policyHeadingTurn by the skill's frame: the robot's yaw (from the state estimate) reads as the skill's own yaw. */
void policyHeadingTurnState(const state_t *state, float *obs);

#endif /* POLICY_HEADING_H */
"""
    if not enabled:
        c = f"""{banner}
#include "policy_heading.h"

void policyHeadingReset(void) {{}}

void policyHeadingApply(float yaw_rad, float yaw_rate_radps, float vx_mps, float vy_mps, float *actions)
{{
  (void)yaw_rad; (void)yaw_rate_radps; (void)vx_mps; (void)vy_mps; (void)actions;
}}

void policyHeadingApplyState(const state_t *state, const sensorData_t *sensors, float *actions)
{{
  (void)state; (void)sensors; (void)actions;
}}

void policyHeadingTurn(float offset_rad, float *obs)
{{
  (void)offset_rad; (void)obs;
}}

void policyHeadingTurnState(const state_t *state, float *obs)
{{
  (void)state; (void)obs;
}}
"""
        return h, c
    c = f"""{banner}
#include <math.h>

#include "policy_heading.h"

{defines}
#define POLICY_HEADING_PI 3.14159265358979f
#define POLICY_HEADING_DEG_TO_RAD 0.0174532925f

static float headingSetpoint = NAN;  /* the yaw the loop steers to, rad (NaN: not started) */
static float headingTarget = NAN;    /* the last direction of motion (with the lead), rad */
static float headingVxPrev = 0.0f;   /* the last period's horizontal velocity, m/s (the lead's difference) */
static float headingVyPrev = 0.0f;
static float headingAx = 0.0f;       /* the velocity's rate of change, low-passed, m/s^2 */
static float headingAy = 0.0f;

/* numpy's remainder(a + pi, 2 pi) - pi: in [-pi, pi) */
static float headingWrap(float a)
{{
  float r = fmodf(a + POLICY_HEADING_PI, 2.0f * POLICY_HEADING_PI);
  if (r < 0.0f) {{
    r += 2.0f * POLICY_HEADING_PI;
  }}
  return r - POLICY_HEADING_PI;
}}

static float headingClamp(float x, float lo, float hi)
{{
  return x < lo ? lo : (x > hi ? hi : x);
}}

void policyHeadingReset(void)
{{
  headingSetpoint = NAN;
  headingTarget = NAN;
}}

void policyHeadingApply(float yaw_rad, float yaw_rate_radps, float vx_mps, float vy_mps, float *actions)
{{
  const int fresh = isnan(headingSetpoint);
  if (fresh) {{
    headingSetpoint = yaw_rad;
  }}
  if (isnan(headingTarget)) {{
    headingTarget = yaw_rad;
  }}
  const float speed2 = vx_mps * vx_mps + vy_mps * vy_mps;
  float dx = vx_mps, dy = vy_mps;
  if (POLICY_HEADING_LEAD_S > 0.0f) {{
    /* the lead: v + lead_s a_turn, a_turn the low-passed rate of change of v, its part across v */
    if (fresh) {{
      headingAx = 0.0f;
      headingAy = 0.0f;
    }} else {{
      headingAx += POLICY_HEADING_LEAD_ALPHA * ((vx_mps - headingVxPrev) / POLICY_HEADING_DT_S - headingAx);
      headingAy += POLICY_HEADING_LEAD_ALPHA * ((vy_mps - headingVyPrev) / POLICY_HEADING_DT_S - headingAy);
    }}
    headingVxPrev = vx_mps;
    headingVyPrev = vy_mps;
    const float along = (headingAx * vx_mps + headingAy * vy_mps) / (speed2 + 1e-12f);
    dx = vx_mps + POLICY_HEADING_LEAD_S * (headingAx - along * vx_mps);
    dy = vy_mps + POLICY_HEADING_LEAD_S * (headingAy - along * vy_mps);
  }}
  if (speed2 >= POLICY_HEADING_MIN_SPEED2) {{
    headingTarget = atan2f(dy, dx);
  }}
  const float step = headingClamp(headingWrap(headingTarget - headingSetpoint), -POLICY_HEADING_MAX_STEP_RAD,
                                  POLICY_HEADING_MAX_STEP_RAD);
  const float setpoint = yaw_rad + headingClamp(headingWrap(headingSetpoint + step - yaw_rad),
                                                -POLICY_HEADING_MAX_ERROR_RAD, POLICY_HEADING_MAX_ERROR_RAD);
  headingSetpoint = headingWrap(setpoint);
  const float rate_sp = step / POLICY_HEADING_DT_S;
  const float error = headingWrap(headingSetpoint - yaw_rad);
  float torque;
  if (POLICY_HEADING_MAX_YAW_RATE_RADPS > 0.0f) {{
    /* the same PD as a rate command, the command clipped */
    const float rate_cmd = headingClamp(rate_sp + POLICY_HEADING_KP_OVER_KD * error, -POLICY_HEADING_MAX_YAW_RATE_RADPS,
                                        POLICY_HEADING_MAX_YAW_RATE_RADPS);
    torque = POLICY_HEADING_IZZ * POLICY_HEADING_KD * (rate_cmd - yaw_rate_radps);
  }} else {{
    torque = POLICY_HEADING_IZZ * (POLICY_HEADING_KP * error + POLICY_HEADING_KD * (rate_sp - yaw_rate_radps));
  }}
  torque = headingClamp(torque, POLICY_HEADING_LOW_NM, POLICY_HEADING_HIGH_NM);
  /* the contract's one mapping, inverted for this term */
  actions[POLICY_HEADING_INDEX] = 2.0f * (torque - POLICY_HEADING_LOW_NM) / (POLICY_HEADING_HIGH_NM - POLICY_HEADING_LOW_NM) - 1.0f;
}}

/* the yaw of the body-to-world attitude (robot_hrl.contract.navigate.yaw_from_quat) */
static float headingYaw(const state_t *state)
{{
  const float w = state->attitudeQuaternion.w, x = state->attitudeQuaternion.x;
  const float y = state->attitudeQuaternion.y, z = state->attitudeQuaternion.z;
  return atan2f(2.0f * (w * z + x * y), 1.0f - 2.0f * (y * y + z * z));
}}

void policyHeadingApplyState(const state_t *state, const sensorData_t *sensors, float *actions)
{{
  policyHeadingApply(headingYaw(state), sensors->gyro.z * POLICY_HEADING_DEG_TO_RAD, state->velocity.x, state->velocity.y,
                     actions);
}}

/* the observation's world-frame (x, y) column pairs and their clip ranges */
static const struct {{
  int x, y;
  float low, high;
}} headingPairs[POLICY_HEADING_PAIRS] = {{
{pairs}
}};

void policyHeadingTurn(float offset_rad, float *obs)
{{
  const float c = cosf(offset_rad), s = sinf(offset_rad);
  for (int k = 0; k < POLICY_HEADING_PAIRS; ++k) {{
    const float x = obs[headingPairs[k].x], y = obs[headingPairs[k].y];
    obs[headingPairs[k].x] = headingClamp(c * x - s * y, headingPairs[k].low, headingPairs[k].high);
    obs[headingPairs[k].y] = headingClamp(s * x + c * y, headingPairs[k].low, headingPairs[k].high);
  }}
}}

void policyHeadingTurnState(const state_t *state, float *obs)
{{
  policyHeadingTurn(headingWrap(POLICY_HEADING_SKILL_YAW_RAD - headingYaw(state)), obs);
}}
"""
    return h, c
