"""C99 for the policy contract onboard: the observation from the firmware's own structures, and
the mapping from normalized actions to the firmware's control output.

Units and frames of the crazyflie-firmware structures (src/modules/interface/stabilizer_types.h,
bitcraze/crazyflie-firmware; the comments there give the units):

=====================================  ==========================================================
firmware field                          contract quantity
=====================================  ==========================================================
``state->position`` (m, world)          position_w. The estimator's world frame is right-handed,
                                        z up (ENU-compatible; x/y are set by the positioning system).
``state->velocity`` (m/s, world)        linear_velocity_w (the Kalman estimator publishes it rotated
                                        to the world frame).
``state->attitudeQuaternion``           quat_wxyz, body-to-world. Read through the named fields
                                        ``.w .x .y .z``: the union aliases q0..q3 to x, y, z, w, so
                                        q0 is *x*, not w.
``state->attitude`` (DEGREES)           not used: Euler angles in the legacy CF2 convention with the
                                        pitch sign inverted. The quaternion has neither trap.
``sensors->gyro`` (deg/s, body)         angular_velocity_b in rad/s: multiplied by pi/180.
``setpoint->position`` (m, world)       the subgoal, used when ``setpoint->mode.x/y/z == modeAbs``
                                        (the high-level commander and position setpoints).
``control->thrustSi`` (N)               collective thrust, ``controlModeForceTorque``.
``control->torqueX/Y/Z`` (N m)          body torques (FLU), ``controlModeForceTorque``.
=====================================  ==========================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from robot_hrl.contract import PolicyContract
from robot_hrl.contract.error_integral import MIN_HEADING_NORM, TERM_NAME as ERROR_INTEGRAL_TERM
from robot_hrl.contract.error_integral import decay as integral_decay

from deploy.crazyflie.c_model import c_float
from deploy.crazyflie.errors import CodegenError

DEG_TO_RAD = math.pi / 180.0


@dataclass(frozen=True)
class CTerm:
    """How one observation term is read from the firmware structures."""

    expressions: tuple[str, ...]
    source: str
    """Comment placed above the term: where each value comes from, in which unit."""
    needs_rotation: bool = False


def _c_terms(action_size: int) -> dict[str, CTerm]:
    return {
        "subgoal_error_w": CTerm(
            ("setpoint->position.x - state->position.x", "setpoint->position.y - state->position.y",
             "setpoint->position.z - state->position.z"),
            "setpoint_t.position (m, world) - state_t.position (m, world)"),
        "rotation_matrix_wb": CTerm(
            tuple(f"r[{k}]" for k in range(9)),
            "body-to-world rotation matrix, row-major, from state_t.attitudeQuaternion (.w .x .y .z), normalized",
            needs_rotation=True),
        "linear_velocity_w": CTerm(
            ("state->velocity.x", "state->velocity.y", "state->velocity.z"),
            "state_t.velocity (m/s, world)"),
        "angular_velocity_b": CTerm(
            ("sensors->gyro.x * POLICY_DEG_TO_RAD", "sensors->gyro.y * POLICY_DEG_TO_RAD",
             "sensors->gyro.z * POLICY_DEG_TO_RAD"),
            "sensorData_t.gyro (deg/s, body) * pi/180 -> rad/s"),
        "last_action": CTerm(
            tuple(f"last_action[{k}]" for k in range(action_size)),
            "the policy's previous normalized output, kept by the controller"),
        ERROR_INTEGRAL_TERM: CTerm(
            ("policyIntegral[0]", "policyIntegral[1]", "policyIntegral[2]"),
            "the leaky integral of the yaw-frame position error (m s), kept here between ticks (robot_hrl.contract.error_integral)",
            needs_rotation=True),
    }


C_OBSERVATION_TERMS: tuple[str, ...] = tuple(_c_terms(4))
"""Observation terms the C code generator can build onboard."""

ACTION_FIELDS: dict[str, tuple[str, str]] = {
    "collective_thrust": ("thrustSi", "N"),
    "torque_x": ("torqueX", "N m"),
    "torque_y": ("torqueY", "N m"),
    "torque_z": ("torqueZ", "N m"),
}
"""Contract action term -> (control_t field in controlModeForceTorque, unit it must be in)."""

_ROTATION = """  /* Body-to-world rotation from the estimator's quaternion. Named fields only: the firmware's
   * union aliases q0..q3 to x, y, z, w. Normalized here; a zero or NaN quaternion stays non-finite. */
  const float qw0 = state->attitudeQuaternion.w, qx0 = state->attitudeQuaternion.x;
  const float qy0 = state->attitudeQuaternion.y, qz0 = state->attitudeQuaternion.z;
  const float qn = 1.0f / sqrtf(qw0 * qw0 + qx0 * qx0 + qy0 * qy0 + qz0 * qz0);
  const float qw = qw0 * qn, qx = qx0 * qn, qy = qy0 * qn, qz = qz0 * qn;
  const float r[9] = {
    1.0f - 2.0f * (qy * qy + qz * qz), 2.0f * (qx * qy - qw * qz), 2.0f * (qx * qz + qw * qy),
    2.0f * (qx * qy + qw * qz), 1.0f - 2.0f * (qx * qx + qz * qz), 2.0f * (qy * qz - qw * qx),
    2.0f * (qx * qz - qw * qy), 2.0f * (qy * qz + qw * qx), 1.0f - 2.0f * (qx * qx + qy * qy),
  };
"""


def check_contract(contract: PolicyContract) -> None:
    """Refuse, with a clear error, a contract the onboard code cannot honour."""
    terms = _c_terms(contract.action_size)
    for term in contract.observations:
        if term.name not in terms:
            raise CodegenError(
                f"observation term {term.name!r} has no onboard (C) implementation; the C code generator knows "
                f"{sorted(terms)}. Add it to deploy/crazyflie/c_contract.py")
        if len(terms[term.name].expressions) != term.size:
            raise CodegenError(f"observation term {term.name!r} has size {term.size} in the contract, the onboard "
                               f"implementation gives {len(terms[term.name].expressions)}")
    from deploy.crazyflie.firmware import firmware_ref

    expected = firmware_ref()
    if contract.firmware is None:
        raise CodegenError(f"the contract names no firmware actuator chain; this generator builds into {expected['name']} "
                           f"{expected['release']} ({expected['platform']}, {expected['propellers']} propellers): re-export a model "
                           "trained on robot_hrl's chain of that firmware (robot_hrl/robots/crazyflie_2x/actuators.py)")
    got = contract.firmware.model_dump()
    for key, value in expected.items():
        if got[key] != value:
            raise CodegenError(f"the model was trained on firmware {key} {got[key]!r}; this generator builds into {value!r} "
                               f"(deploy/crazyflie/firmware.py): retrain on the chain of {expected['name']} {expected['release']}")
    spec = contract.action
    if spec.firmware_control_mode != "controlModeForceTorque":
        raise CodegenError(f"the contract's firmware control mode is {spec.firmware_control_mode!r}; the C code "
                           "generator implements controlModeForceTorque only")
    names = [t.name for t in spec.terms]
    if sorted(names) != sorted(ACTION_FIELDS):
        raise CodegenError(f"action terms {names} do not map onto controlModeForceTorque; expected "
                           f"{list(ACTION_FIELDS)} (thrustSi, torqueX, torqueY, torqueZ)")
    for t in spec.terms:
        unit = ACTION_FIELDS[t.name][1]
        if t.units != unit:
            raise CodegenError(f"action term {t.name!r} is in {t.units!r}; control_t.{ACTION_FIELDS[t.name][0]} "
                               f"takes {unit!r}")
        if not (math.isfinite(t.low) and math.isfinite(t.high) and t.low < t.high):
            raise CodegenError(f"action term {t.name!r} has range [{t.low}, {t.high}]; it needs finite low < high")
    rate = contract.control_rate_hz
    if not (rate > 0 and abs(1000.0 / rate - round(1000.0 / rate)) < 1e-9 and round(1000.0 / rate) >= 1):
        raise CodegenError(f"control rate {rate} Hz does not divide the firmware's 1000 Hz stabilizer loop "
                           "(RATE_DO_EXECUTE needs 1000 / rate to be an integer: 1000, 500, 250, 100, 50 ... Hz)")


def generate_contract_c(contract: PolicyContract, banner: str) -> tuple[str, str]:
    """(policy_io.h, policy_io.c): observation construction and action mapping."""
    check_contract(contract)
    terms = _c_terms(contract.action_size)
    n_obs, n_act = contract.observation_size, contract.action_size
    rate = int(round(contract.control_rate_hz))
    spec = contract.action

    h = f"""{banner}
#ifndef POLICY_IO_H
#define POLICY_IO_H

#include <stdbool.h>
#include <stdint.h>

#include "stabilizer_types.h"

#define POLICY_OBS_SIZE {n_obs}
#define POLICY_ACTION_SIZE {n_act}
/* The contract's control rate; RATE_DO_EXECUTE(POLICY_RATE_HZ, tick) on the 1 kHz stabilizer loop. */
#define POLICY_RATE_HZ {rate}
#define POLICY_DEG_TO_RAD {c_float(DEG_TO_RAD)}

/* The contract's observation (skill '{contract.skill}', robot '{contract.robot.name}') from the firmware's
 * structures, each term clipped to its range. Returns false when any raw value is NaN or inf. */
bool policyBuildObservation(const state_t *state, const sensorData_t *sensors, const setpoint_t *setpoint,
                            const float last_action[POLICY_ACTION_SIZE], float obs[POLICY_OBS_SIZE]);

/* Normalized actions (clamped to [-1, 1]) -> control_t in controlModeForceTorque: thrustSi (N),
 * torqueX/Y/Z (N m), each clamped to the contract's [low, high]. */
void policyActionsToControl(const float actions[POLICY_ACTION_SIZE], control_t *control);

/* True when every value is finite. */
bool policyAllFinite(const float *values, int n);

/* Forget the observation's state between ticks (the position error's integral, where the contract has it):
 * the next policyBuildObservation starts a new episode. */
void policyResetObservation(void);

/* Who flies now, from controller_policy.c: 0 the policy, 1 PID (no absolute position setpoint),
 * 2 PID (parameter rlPolicy.enable = 0), 3 PID (latched after a NaN/inf observation or output). */
uint8_t policyControllerMode(void);

#endif /* POLICY_IO_H */
"""
    body: list[str] = []
    if any(terms[t.name].needs_rotation for t in contract.observations):
        body.append(_ROTATION)
    integral = next((t for t in contract.observations if t.integral is not None), None)
    if integral is not None:
        body.append(_integral_update(integral, contract.control_rate_hz))
    offset = 0
    clips: list[str] = []
    for term in contract.observations:
        ct = terms[term.name]
        lo, hi = c_float(term.clip[0]), c_float(term.clip[1])
        body.append(f"  /* [{offset}:{offset + term.size}] {term.name} ({term.units}, {term.frame}): {ct.source} */")
        for k, expr in enumerate(ct.expressions):
            body.append(f"  obs[{offset + k}] = {expr};")
        clips.append(f"  for (int i = {offset}; i < {offset + term.size}; ++i) obs[i] = policy_clip(obs[i], {lo}, {hi});"
                     f"  /* {term.name} */")
        offset += term.size
    body.append("  /* A NaN or inf anywhere in the raw state is a fault (checked before clipping, which would\n"
                "   * turn an inf into a plausible value): the controller hands over to the PID. */")
    body.append("  if (!policyAllFinite(obs, POLICY_OBS_SIZE)) {\n    return false;\n  }")
    body.append("  /* Each term clipped to the contract's range. */")
    body.extend(clips)
    map_lines = []
    for k, t in enumerate(spec.terms):
        field, unit = ACTION_FIELDS[t.name]
        low, high = c_float(t.low), c_float(t.high)
        map_lines.append(f"  /* {t.name}: a in [-1, 1] -> [{t.low:.6g}, {t.high:.6g}] {unit} */")
        half = c_float((t.high - t.low) / 2.0)
        map_lines.append(f"  control->{field} = policy_clip({low} + (policy_clip(actions[{k}], -1.0f, 1.0f) + 1.0f) * {half}, "
                         f"{low}, {high});")
    c = f"""{banner}
#include <math.h>
#include <stdbool.h>

#include "policy_io.h"

/* Clamp to [lo, hi]; a NaN passes through (both comparisons are false). */
static inline float policy_clip(float v, float lo, float hi)
{{
  return v < lo ? lo : (v > hi ? hi : v);
}}

bool policyAllFinite(const float *values, int n)
{{
  for (int i = 0; i < n; ++i) {{
    if (!isfinite(values[i])) {{
      return false;
    }}
  }}
  return true;
}}

{_integral_state(integral)}
bool policyBuildObservation(const state_t *state, const sensorData_t *sensors, const setpoint_t *setpoint,
                            const float last_action[POLICY_ACTION_SIZE], float obs[POLICY_OBS_SIZE])
{{
  (void)sensors;
  (void)setpoint;
  (void)last_action;
{chr(10).join(body)}
  return true;
}}

void policyActionsToControl(const float actions[POLICY_ACTION_SIZE], control_t *control)
{{
  control->controlMode = controlModeForceTorque;
{chr(10).join(map_lines)}
}}
"""
    return h, c


def _integral_state(term) -> str:
    """The statics of the position error's integral and ``policyResetObservation`` (empty without the term)."""
    if term is None:
        return "void policyResetObservation(void)\n{\n}\n"
    return """/* The position error's integral between ticks (robot_hrl.contract.error_integral): its value (m s, yaw
 * frame), the previous tick's error (m, yaw frame) and subgoal (m, world); policyIntegralValid false after a reset. */
static float policyIntegral[3];
static float policyIntegralError[3];
static float policyIntegralSubgoal[3];
static bool policyIntegralValid = false;

void policyResetObservation(void)
{
  policyIntegralValid = false;
}
"""


def _integral_update(term, control_rate_hz: float) -> str:
    """C of one tick of the integral (the numpy ``ErrorIntegrator.update``), after the rotation block."""
    spec = term.integral
    decay = c_float(integral_decay(spec, control_rate_hz))
    dt = c_float(1.0 / control_rate_hz)
    limit, change = c_float(spec.limit_m_s), c_float(spec.subgoal_change_m)
    return f"""  /* {term.name}: I = clip({decay} I + {dt} e_previous, +-{limit}) (time constant {spec.time_constant_s:g} s,
   * {control_rate_hz:g} Hz); zero on the first tick after policyResetObservation or a subgoal move > {spec.subgoal_change_m:g} m */
  {{
    const float sg[3] = {{setpoint->position.x, setpoint->position.y, setpoint->position.z}};
    bool moved = !policyIntegralValid;
    for (int i = 0; i < 3; ++i) {{
      moved = moved || !(fabsf(sg[i] - policyIntegralSubgoal[i]) <= {change});
    }}
    for (int i = 0; i < 3; ++i) {{
      const float v = {decay} * policyIntegral[i] + {dt} * policyIntegralError[i];
      policyIntegral[i] = moved ? 0.0f : policy_clip(v, -{limit}, {limit});
      policyIntegralSubgoal[i] = sg[i];
    }}
{_error_in_frame(spec.frame)}{_gate(spec)}
    policyIntegralValid = true;
  }}"""


def _gate(spec) -> str:
    """C of the conditional integration (the contract's ``active_radius_m``): the error counts only within it."""
    if spec.active_radius_m is None:
        return ""
    r2 = c_float(spec.active_radius_m * spec.active_radius_m)
    return f"""
    /* conditional integration: the error counts only within {spec.active_radius_m:g} m of the subgoal (world distance) */
    if (!(ex * ex + ey * ey + ez * ez <= {r2})) {{
      policyIntegralError[0] = 0.0f;
      policyIntegralError[1] = 0.0f;
      policyIntegralError[2] = 0.0f;
    }}"""


def _error_in_frame(frame: str) -> str:
    """C of this tick's error (ex, ey, ez: subgoal minus position, world) in the integral's frame."""
    head = "    const float ex = sg[0] - state->position.x, ey = sg[1] - state->position.y, ez = sg[2] - state->position.z;\n"
    if frame == "world_enu":
        return head + """    /* this tick's error, world ENU */
    policyIntegralError[0] = ex;
    policyIntegralError[1] = ey;
    policyIntegralError[2] = ez;"""
    return head + f"""    /* this tick's error in the yaw frame: the body x axis's horizontal direction from r (column 0) */
    float hn = sqrtf(r[0] * r[0] + r[3] * r[3]);
    hn = hn < {c_float(MIN_HEADING_NORM)} ? {c_float(MIN_HEADING_NORM)} : hn;
    const float yc = r[0] / hn, ys = r[3] / hn;
    policyIntegralError[0] = yc * ex + ys * ey;
    policyIntegralError[1] = -ys * ex + yc * ey;
    policyIntegralError[2] = ez;"""
