"""C99 for the ``navigate`` level onboard: the range memory, the level's observation and its action mapping.

The twin of :class:`robot_hrl.planning.learned.LearnedNavigator` (the planner node's and the PyBullet
evaluation's code) for the Crazyflie's STM32F405, generated from the level's contract and the robot's
ranger descriptions, never written by hand:

==============================================  ===========================================================
Python (the reference)                          generated C (``nav_io.c``)
==============================================  ===========================================================
``LearnedNavigator.reset``                      ``navReset``: forget the memory, the ranges, the last subgoal
``LearnedNavigator.sense`` ->                   ``navSense``: keep the readings; remember the memory sensors'
``RangeMemory.add`` (robot_hrl.sensing.memory)  hits in a ring of ``capacity`` world points (``min_spacing_m``)
``LearnedNavigator.observation`` ->             ``navBuildObservation``: the contract's terms in its order,
``compute_navigate_observation``,               each clipped; the sectors of the memory; false (no subgoal)
``RangeMemory.sectors``                         when any input is NaN or inf
``subgoal_from_action``                         ``navActionToSubgoal``: nan_to_num, [-1, 1], the terms' [-R, R],
                                                the disc of R, the yaw rotation, the flight height
``LearnedNavigator.decide``                     ``navDecide``: observation, ``nav_forward`` (nav_model.c, the
                                                goto codegen's network code), mapping; keeps the last subgoal
``LearnedNavigator.state``, ``state_goal_w``    a recurrent level's (contract ``recurrent``) ``navState`` and
(a recurrent level)                             ``navStateGoal``: zeros at the first decision after ``navReset``
                                                and whenever the goal differs from the one the state was built
                                                toward (a float32 ``!=``, as ``np.array_equal``); ``nav_forward``
                                                updates the state in place
==============================================  ===========================================================

Arithmetic is float32 (the Cortex-M4F's FPU; the Python runtime is float64): every comparison of an input
with a contract threshold (a ranger's ``min_range_m`` / ``max_range_m``, the memory's ``min_spacing_m``)
uses the float32 constant that decides exactly as the float64 one does for float32 inputs
(:func:`c_float_at_least`). What can still differ is a computed distance or bearing within float32
rounding (~1e-7 relative) of the spacing or a sector boundary; tests/test_crazyflie_navigate.py checks the
decisions on random sequences against the Python level.

The memory is kept as the Python one keeps it (every slot scanned, empty slots far away), so the C and the
numpy memory hold the same points in the same slots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from robot_hrl.contract.action_modes import SUBGOAL_OFFSET, get_action_mode
from robot_hrl.contract.navigate import NavigateContract
from robot_hrl.sensing.memory import FAR_M, MemoryGeometry
from robot_hrl.sensing.range import RangeSensorSpec

from deploy.crazyflie.c_model import c_float
from deploy.crazyflie.errors import CodegenError

NAV_SOURCES: tuple[str, ...] = ("nav_model.c", "nav_io.c")
"""The generated C files of the navigate level itself (in ``src/``): plain C, math.h only."""
NAV_TASK_SOURCES: tuple[str, ...] = NAV_SOURCES + ("nav_task.c",)
"""With its firmware task (deploy/crazyflie/c_navigate_task.py): what a --navigate project builds."""
NAV_PREFIX = "nav"
"""Symbol prefix of the level's network (``nav_forward``), beside the goto skill's ``policy_forward``."""

RECURRENT_SUPPORTED: tuple[str, str] = ("gru", "new_goal")
"""(kind, reset) of the recurrent state (robot_hrl.contract.navigate.RecurrentSpec) the generated C keeps."""

NAV_TERMS: tuple[str, ...] = ("goal_yaw", "ranges_m", "velocity_yaw", "last_subgoal_yaw", "range_memory_yaw", "trail_yaw")
"""Observation terms of a navigate contract the C generator builds (robot_hrl.contract.navigate)."""


def c_float_at_least(value: float) -> str:
    """The smallest float32 >= ``value``, as a C literal: for a float32 x, ``x >= it`` and ``x < it`` decide
    exactly as ``x >= value`` and ``x < value`` do in float64."""
    f = np.float32(value)
    if float(f) < value:
        f = np.nextafter(f, np.float32(np.inf))
    return c_float(float(f))


@dataclass(frozen=True)
class NavSizes:
    """Sizes of the level's state, from its contract."""

    rangers: int
    memory_sensors: int
    capacity: int
    sectors: int
    observations: int


def check_navigate_contract(contract: NavigateContract, sensors: Sequence[RangeSensorSpec]) -> None:
    """Refuse, with the reason and the fix, a navigate contract the generated C cannot honour."""
    rec = contract.recurrent
    if rec is not None and (rec.kind, rec.reset) != RECURRENT_SUPPORTED:
        raise CodegenError(f"the level is recurrent with a {rec.kind!r} state reset at {rec.reset!r}; the C generator keeps "
                           f"a {RECURRENT_SUPPORTED[0]!r} state reset at every {RECURRENT_SUPPORTED[1]!r}: train it with "
                           "sim/train_navigate.py --memory-gru, or fly it on a companion computer (the planner node)")
    names = [t.name for t in contract.observations]
    unknown = [n for n in names if n not in NAV_TERMS]
    if unknown:
        raise CodegenError(f"navigate observation terms {unknown} have no onboard (C) implementation; the generator knows "
                           f"{list(NAV_TERMS)}: add them to deploy/crazyflie/c_navigate.py")
    sizes = {"goal_yaw": 2, "ranges_m": len(sensors), "velocity_yaw": 3, "last_subgoal_yaw": 2,
             "range_memory_yaw": contract.memory.sectors if contract.memory is not None else -1,
             "trail_yaw": contract.trail.sectors if contract.trail is not None else -1}
    for t in contract.observations:
        if t.size != sizes[t.name]:
            raise CodegenError(f"navigate term {t.name!r} has size {t.size} in the contract, the onboard code gives "
                               f"{sizes[t.name]}; re-export the level")
    if tuple(s.name for s in sensors) != contract.sensors.names:
        raise CodegenError(f"the level observes rangers {list(contract.sensors.names)}, the robot describes "
                           f"{[s.name for s in sensors]}; retrain the level for this robot")
    if contract.action.mode != SUBGOAL_OFFSET.name or contract.action_size != 2:
        raise CodegenError(f"the level's action mode is {contract.action.mode!r} with {contract.action_size} terms; the C "
                           f"generator implements {SUBGOAL_OFFSET.name!r} (2 terms)")
    if contract.subgoal.frame != "yaw" or contract.subgoal.projection != "disc":
        raise CodegenError(f"subgoal frame {contract.subgoal.frame!r} / projection {contract.subgoal.projection!r}: the C "
                           "generator implements the yaw frame and the disc projection")
    if len(sensors) > 255 or (contract.memory is not None and contract.memory.sectors > 255):
        raise CodegenError("more than 255 rangers or memory sectors: the onboard index types are uint8_t")
    if contract.trail is not None and "trail_yaw" not in names:
        raise CodegenError("the contract keeps a trail but observes no trail_yaw term; re-export the level")


def _sectors_c(name: str, ring: str, capacity: str, sectors: str, n_sectors: int, range_m: float, what: str) -> str:
    """C of a ring's reading (RangeMemory.sectors): the nearest point per sector around the robot, sector k centred on
    the bearing 2 pi k / sectors in the yaw frame (0 ahead, counter-clockwise), ``range_m`` when it holds none nearer.
    One generator for the range memory and the trail (both are RangeMemory rings in Python)."""
    return f"""
/* {what}: the nearest point of {ring} per sector around the robot (RangeMemory.sectors), sector k centred on the
 * bearing 2 pi k / {sectors} in the yaw frame (0 ahead, counter-clockwise), {range_m:g} m when it holds none nearer. */
static void {name}(const float position_w[3], float yc, float ys, float out[{sectors}])
{{
  for (int k = 0; k < {sectors}; ++k) {{
    out[k] = {c_float(range_m)};
  }}
  for (int m = 0; m < {capacity}; ++m) {{
    const float rx = {ring}[m][0] - position_w[0], ry = {ring}[m][1] - position_w[1];
    const float x = yc * rx + ys * ry, y = -ys * rx + yc * ry;
    const float d = sqrtf(x * x + y * y);
    if (!(d < {c_float(range_m)})) {{
      continue;  /* reads range_m: lowers no sector */
    }}
    int k = (int)floorf(atan2f(y, x) / {c_float(2.0 * math.pi / n_sectors)} + 0.5f) % {sectors};
    k = k < 0 ? k + {sectors} : k;
    out[k] = d < out[k] ? d : out[k];
  }}
}}
"""


def _ring_write_c(ring: str, count: str, capacity: str, spacing_m: float, indent: str) -> str:
    """C that writes the point ``(px, py)`` into a ring unless a kept point lies within ``spacing_m`` (RangeMemory's
    ``_write``: every slot scanned, the next slot ``count % capacity``)."""
    return f"""{indent}/* not added when a kept point lies within {spacing_m:g} m */
{indent}float nearest = INFINITY;
{indent}for (int m = 0; m < {capacity}; ++m) {{
{indent}  const float dx = {ring}[m][0] - px, dy = {ring}[m][1] - py;
{indent}  const float d = sqrtf(dx * dx + dy * dy);
{indent}  nearest = d < nearest ? d : nearest;
{indent}}}
{indent}if (nearest >= {c_float_at_least(spacing_m)}) {{
{indent}  const uint32_t slot = {count} % {capacity};
{indent}  {ring}[slot][0] = px;
{indent}  {ring}[slot][1] = py;
{indent}  {count} += 1u;
{indent}}}"""


def _yaw_c(q: str) -> str:
    """C that sets ``yc, ys`` = cos and sin of robot_hrl's ``yaw_from_quat`` (atan2(2(wz + xy), 1 - 2(y^2 + z^2)),
    the quaternion w x y z as given, not normalized, as in the Python)."""
    return f"""  float yc = 1.0f, ys = 0.0f;
  {{
    const float ya = 1.0f - 2.0f * ({q}[2] * {q}[2] + {q}[3] * {q}[3]);
    const float yb = 2.0f * ({q}[0] * {q}[3] + {q}[1] * {q}[2]);
    const float yh = sqrtf(ya * ya + yb * yb);
    if (yh > 0.0f) {{  /* atan2(0, 0) = 0: the identity */
      yc = ya / yh;
      ys = yb / yh;
    }}
  }}"""


@dataclass(frozen=True)
class _StateC:
    """The C of a recurrent level's state in nav_io.c (empty strings, and the feed-forward call, without one)."""

    check: str
    state: str
    reset: str
    decide: str


def _recurrent_state_c(rec) -> _StateC:
    """``navState`` (the network's state between decisions) and ``navStateGoal`` (the goal it was built toward), as
    LearnedNavigator keeps ``state`` and ``state_goal_w``: zeros after navReset and whenever goal_w differs."""
    if rec is None:
        return _StateC(check="#ifdef NAV_MODEL_STATE_SIZE\n#error \"nav_model.h is recurrent, the level's contract is "
                             "not: regenerate both with robot-hrl export-c --navigate\"\n#endif\n",
                       state="", reset="", decide="  nav_forward(obs, action);")
    return _StateC(
        check=(f"#if !defined(NAV_MODEL_STATE_SIZE) || NAV_MODEL_STATE_SIZE != {rec.hidden_size}\n"
               f"#error \"the level's contract keeps a {rec.hidden_size}-float state, nav_model.h does not: regenerate both "
               "with robot-hrl export-c --navigate\"\n#endif\n"),
        state=(f"static float navState[NAV_MODEL_STATE_SIZE];       /* the {rec.kind.upper()}'s state after the last decision */\n"
               "static float navStateGoal[3];                     /* m, world: the goal the state was built toward */\n"
               "static bool navHasState;                          /* false: zeros at the next decision */\n"),
        reset="  navHasState = false;\n",
        decide="""  /* the recurrent state (LearnedNavigator.decide): zeros at the first decision toward a goal, then carried */
  if (!navHasState || goal_w[0] != navStateGoal[0] || goal_w[1] != navStateGoal[1] || goal_w[2] != navStateGoal[2]) {
    for (int i = 0; i < NAV_MODEL_STATE_SIZE; ++i) {
      navState[i] = 0.0f;
    }
    for (int i = 0; i < 3; ++i) {
      navStateGoal[i] = goal_w[i];
    }
    navHasState = true;
  }
  nav_forward(obs, navState, action);""")


def generate_navigate_c(contract: NavigateContract, sensors: Sequence[RangeSensorSpec], banner: str) -> tuple[str, str]:
    """(nav_io.h, nav_io.c) for ``contract`` on a robot with ``sensors`` (the contract's order)."""
    check_navigate_contract(contract, sensors)
    n_obs, n_rangers = contract.observation_size, len(sensors)
    mem = contract.memory
    if mem is not None:
        geometry = MemoryGeometry.of(mem.sensors, sensors)
        j, capacity, sectors = len(geometry.indices), mem.capacity, mem.sectors
    else:  # a level without the memory: a one-slot ring nobody writes
        geometry, j, capacity, sectors = None, 0, 1, 1
    trail = contract.trail
    trail_h = ("" if trail is None else
               f"/* The trail: the robot's position at each decision (after its observation), {trail.min_spacing_m:g} m apart. */\n"
               f"#define NAV_TRAIL_CAPACITY {trail.capacity}\n#define NAV_TRAIL_SECTORS {trail.sectors}\n")
    rate = contract.decision_rate_hz
    rec = contract.recurrent
    state_doc = ("" if rec is None else
                 f"\n * The level is recurrent: its {rec.kind.upper()} state ({rec.hidden_size} floats) is carried from one "
                 "decision to the next,\n * and starts from zeros after navReset and at the first decision toward a new "
                 "goal_w (any component differs).")
    state_c = _recurrent_state_c(rec)
    spec = contract.action
    mode = get_action_mode(spec.mode)
    r_offset = contract.max_offset_m

    h = f"""{banner}
#ifndef NAV_IO_H
#define NAV_IO_H

#include <stdbool.h>
#include <stdint.h>

#define NAV_OBS_SIZE {n_obs}
#define NAV_ACTION_SIZE {contract.action_size}
/* Rangers in the contract's order: {", ".join(contract.sensors.names)} (m; the firmware's rangeGet order may differ). */
#define NAV_NUM_RANGERS {n_rangers}
#define NAV_MEMORY_CAPACITY {capacity}
#define NAV_MEMORY_SECTORS {sectors}
{trail_h}/* The level decides at {rate:g} Hz (the contract's decision_rate_hz); the memory takes readings at
 * {mem.update_rate_hz if mem else rate:g} Hz. Not a stabilizer-loop rate: run it in its own task. */
#define NAV_DECISION_PERIOD_MS {int(round(1000.0 / rate))}

/* Forget the range memory, the readings, the last subgoal{", the recurrent state" if rec else ""} and the trail if the level keeps one (a new task or goal). */
void navReset(void);

/* The latest reading of every ranger (m, contract order) with the pose it was taken at: position (m, world
 * ENU), attitude quaternion (w, x, y, z, body to world). The memory sensors' hits are remembered. Returns
 * false, remembering nothing (the readings are kept), when the pose is NaN or inf. */
bool navSense(const float position_w[3], const float quat_wxyz[4], const float ranges_m[NAV_NUM_RANGERS]);

/* The level's observation (the contract's terms, each clipped). False when any input (pose, velocity in m/s
 * world, goal in m world, the last readings) is NaN or inf: no subgoal then. */
bool navBuildObservation(const float position_w[3], const float quat_wxyz[4], const float velocity_w[3],
                         const float goal_w[3], float obs[NAV_OBS_SIZE]);

/* The network's normalized output -> the subgoal (m, world ENU) at the contract's flight height. */
void navActionToSubgoal(const float action[NAV_ACTION_SIZE], const float position_w[3], const float quat_wxyz[4],
                        float subgoal_w[3]);

/* One decision: observation, network, mapping; the subgoal is kept as the next observation's last subgoal.{state_doc}
 * False (subgoal_w untouched) when navBuildObservation refuses. */
bool navDecide(const float position_w[3], const float quat_wxyz[4], const float velocity_w[3], const float goal_w[3],
               float subgoal_w[3]);

/* Decisions taken since boot. */
uint32_t navDecisions(void);

#endif /* NAV_IO_H */
"""

    def farr(values) -> str:
        return ", ".join(c_float(float(v)) for v in np.asarray(values, dtype=np.float64).reshape(-1))

    consts = []
    if geometry is not None:
        consts.append(f"""/* The memory sensors ({", ".join(mem.sensors)}): index in the readings, optical axis and position (body FLU),
 * and the reading that counts as a hit: min_range_m <= r < max_range_m (robot_hrl.sensing.memory). */
static const uint8_t navMemoryIndex[{j}] = {{{", ".join(str(i) for i in geometry.indices)}}};
static const float navMemoryAxis[{j}][3] = {{{", ".join("{" + farr(d) + "}" for d in geometry.directions_b)}}};
static const float navMemoryOffset[{j}][3] = {{{", ".join("{" + farr(o) + "}" for o in geometry.offsets_b)}}};
static const float navMemoryMin[{j}] = {{{", ".join(c_float_at_least(v) for v in geometry.min_range_m)}}};
static const float navMemoryMax[{j}] = {{{", ".join(c_float_at_least(v) for v in geometry.max_range_m)}}};
""")

    sense_body = "  (void)position_w;\n  (void)quat_wxyz;\n  return true;"
    sectors_fn = trail_state = trail_reset = trail_add = ""
    if trail is not None:
        sectors_fn = _sectors_c("nav_trail_sectors", "navTrail", "NAV_TRAIL_CAPACITY", "NAV_TRAIL_SECTORS", trail.sectors,
                                trail.range_m, "The trail")
        trail_state = ("static float navTrail[NAV_TRAIL_CAPACITY][2];     /* the robot's earlier positions, world x y (m) */\n"
                       "static uint32_t navTrailCount;                     /* positions written */\n")
        trail_reset = f"""  for (int m = 0; m < NAV_TRAIL_CAPACITY; ++m) {{
    navTrail[m][0] = {c_float(FAR_M)};
    navTrail[m][1] = {c_float(FAR_M)};
  }}
  navTrailCount = 0u;
"""
        trail_add = f"""  {{ /* the trail after the observation: it holds where the robot was (LearnedNavigator.decide's order) */
    const float px = position_w[0], py = position_w[1];
{_ring_write_c("navTrail", "navTrailCount", "NAV_TRAIL_CAPACITY", trail.min_spacing_m, "    ")}
  }}
"""
    if geometry is not None:
        sense_body = f"""  if (!nav_finite(position_w, 3) || !nav_finite(quat_wxyz, 4)) {{
    return false;
  }}
  /* R(q), body to world, of the quaternion as given (robot_hrl.geometry.rotation_matrix_from_quat): rows 0 and 1 */
  const float w = quat_wxyz[0], x = quat_wxyz[1], y = quat_wxyz[2], z = quat_wxyz[3];
  const float r00 = 1.0f - 2.0f * (y * y + z * z), r01 = 2.0f * (x * y - w * z), r02 = 2.0f * (x * z + w * y);
  const float r10 = 2.0f * (x * y + w * z), r11 = 1.0f - 2.0f * (x * x + z * z), r12 = 2.0f * (y * z - w * x);
  for (int j = 0; j < {j}; ++j) {{
    const float r = ranges_m[navMemoryIndex[j]];
    const bool hit = isfinite(r) && r >= navMemoryMin[j] && r < navMemoryMax[j];
    if (!hit) {{
      continue;
    }}
    const float lx = navMemoryOffset[j][0] + r * navMemoryAxis[j][0];
    const float ly = navMemoryOffset[j][1] + r * navMemoryAxis[j][1];
    const float lz = navMemoryOffset[j][2] + r * navMemoryAxis[j][2];
    const float px = position_w[0] + (r00 * lx + r01 * ly + r02 * lz);
    const float py = position_w[1] + (r10 * lx + r11 * ly + r12 * lz);
    /* (this reading's earlier sensors' points included) */
{_ring_write_c("navMemory", "navMemoryCount", "NAV_MEMORY_CAPACITY", mem.min_spacing_m, "    ")}
  }}
  return true;"""
        sectors_fn = _sectors_c("nav_sectors", "navMemory", "NAV_MEMORY_CAPACITY", "NAV_MEMORY_SECTORS", sectors,
                                mem.range_m, "The range memory") + sectors_fn

    term_c = {  # C per term; {o}, {o1}, {o2}: the term's first, second, third index in obs
        "goal_yaw": ("  {\n    const float dx = goal_w[0] - position_w[0], dy = goal_w[1] - position_w[1];\n"
                     "    obs[{o}] = yc * dx + ys * dy;\n    obs[{o1}] = -ys * dx + yc * dy;\n  }",
                     "goal minus position, horizontal, yaw frame"),
        "ranges_m": ("  for (int i = 0; i < NAV_NUM_RANGERS; ++i) {\n    obs[{o} + i] = navRanges[i];\n  }",
                     "the last readings, contract order"),
        "velocity_yaw": ("  obs[{o}] = yc * velocity_w[0] + ys * velocity_w[1];\n  obs[{o1}] = -ys * velocity_w[0] + yc * velocity_w[1];\n"
                         "  obs[{o2}] = velocity_w[2];", "velocity, yaw frame (x, y) and world z"),
        "last_subgoal_yaw": ("  {\n    const float *sg = navHasSubgoal ? navLastSubgoal : position_w;\n"
                             "    const float dx = sg[0] - position_w[0], dy = sg[1] - position_w[1];\n"
                             "    obs[{o}] = yc * dx + ys * dy;\n    obs[{o1}] = -ys * dx + yc * dy;\n  }",
                             "the last subgoal minus position, yaw frame (zero before the first decision)"),
        "range_memory_yaw": ("  nav_sectors(position_w, yc, ys, &obs[{o}]);", "the range memory's sectors"),
        "trail_yaw": ("  nav_trail_sectors(position_w, yc, ys, &obs[{o}]);", "the trail's sectors"),
    }
    body, clips, offset = [], [], 0
    for t in contract.observations:
        code, what = term_c[t.name]
        code = code.replace("{o}", str(offset)).replace("{o1}", str(offset + 1)).replace("{o2}", str(offset + 2))
        body.append(f"  /* [{offset}:{offset + t.size}] {t.name} ({t.units}, {t.frame}): {what} */\n{code}")
        clips.append(f"  for (int i = {offset}; i < {offset + t.size}; ++i) {{\n"
                     f"    obs[i] = nav_clip(obs[i], {c_float(t.clip[0])}, {c_float(t.clip[1])});  /* {t.name} */\n  }}")
        offset += t.size

    lows = [float(t.low) for t in spec.terms]
    halves = [(float(t.high) - float(t.low)) / 2.0 for t in spec.terms]
    clip_a = "    a = a < -1.0f ? -1.0f : (a > 1.0f ? 1.0f : a);\n" if mode.clip else ""
    c = f"""{banner}
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "nav_io.h"
#include "nav_model.h"

#if NAV_MODEL_INPUT_SIZE != NAV_OBS_SIZE || NAV_MODEL_OUTPUT_SIZE != NAV_ACTION_SIZE
#error "nav_model.h and nav_io.h disagree: regenerate both with robot-hrl export-c --navigate"
#endif
{state_c.check}
/* ---- the level's state (.bss) ---- */
static float navMemory[NAV_MEMORY_CAPACITY][2];   /* remembered hits, world x y (m); empty: {FAR_M:g} m away */
static uint32_t navMemoryCount;                    /* points written; the next goes to count % capacity */
static float navRanges[NAV_NUM_RANGERS];           /* the last readings (m); inf until the first navSense */
static float navLastSubgoal[3];                    /* m, world */
static bool navHasSubgoal;
static uint32_t navDecisionCount;
static bool navReady;                              /* navReset has run */
{state_c.state}{trail_state}
{"".join(consts)}
/* Clamp to [lo, hi]; a NaN passes through (both comparisons are false). */
static inline float nav_clip(float v, float lo, float hi)
{{
  return v < lo ? lo : (v > hi ? hi : v);
}}

static bool nav_finite(const float *v, int n)
{{
  for (int i = 0; i < n; ++i) {{
    if (!isfinite(v[i])) {{
      return false;
    }}
  }}
  return true;
}}

void navReset(void)
{{
  for (int m = 0; m < NAV_MEMORY_CAPACITY; ++m) {{
    navMemory[m][0] = {c_float(FAR_M)};
    navMemory[m][1] = {c_float(FAR_M)};
  }}
  navMemoryCount = 0u;
  for (int i = 0; i < NAV_NUM_RANGERS; ++i) {{
    navRanges[i] = INFINITY;
  }}
{trail_reset}  navHasSubgoal = false;
{state_c.reset}  navReady = true;
}}

bool navSense(const float position_w[3], const float quat_wxyz[4], const float ranges_m[NAV_NUM_RANGERS])
{{
  if (!navReady) {{
    navReset();  /* first use after boot: the empty slots must lie far away */
  }}
  for (int i = 0; i < NAV_NUM_RANGERS; ++i) {{
    navRanges[i] = ranges_m[i];
  }}
{sense_body}
}}
{sectors_fn}
bool navBuildObservation(const float position_w[3], const float quat_wxyz[4], const float velocity_w[3],
                         const float goal_w[3], float obs[NAV_OBS_SIZE])
{{
  if (!nav_finite(position_w, 3) || !nav_finite(quat_wxyz, 4) || !nav_finite(velocity_w, 3) || !nav_finite(goal_w, 3)
      || !navReady || !nav_finite(navRanges, NAV_NUM_RANGERS) || (navHasSubgoal && !nav_finite(navLastSubgoal, 3))) {{
    return false;  /* (before the first navSense every reading is unknown) */
  }}
{_yaw_c("quat_wxyz")}
{chr(10).join(body)}
  /* Each term clipped to the contract's range; then (as the Python checks the clipped observation) finite. */
{chr(10).join(clips)}
  return nav_finite(obs, NAV_OBS_SIZE);
}}

void navActionToSubgoal(const float action[NAV_ACTION_SIZE], const float position_w[3], const float quat_wxyz[4],
                        float subgoal_w[3])
{{
  /* robot_hrl.contract.navigate.offset_from_action: NaN -> 0, +-inf -> +-1, [-1, 1], each term onto its
   * [low, high], then the disc of radius R = {r_offset:g} m (the adjacency constraint) */
  static const float low[NAV_ACTION_SIZE] = {{{", ".join(c_float(v) for v in lows)}}};
  static const float half[NAV_ACTION_SIZE] = {{{", ".join(c_float(v) for v in halves)}}};
  float o[NAV_ACTION_SIZE];
  for (int i = 0; i < NAV_ACTION_SIZE; ++i) {{
    float a = action[i];
    a = a != a ? 0.0f : (a == INFINITY ? 1.0f : (a == -INFINITY ? -1.0f : a));
{clip_a}    o[i] = low[i] + (a + 1.0f) * half[i];
  }}
  float norm = sqrtf(o[0] * o[0] + o[1] * o[1]);
  norm = norm > 1e-12f ? norm : 1e-12f;
  const float scale = {c_float(r_offset)} / norm < 1.0f ? {c_float(r_offset)} / norm : 1.0f;
{_yaw_c("quat_wxyz")}
  const float ox = o[0] * scale, oy = o[1] * scale;
  subgoal_w[0] = position_w[0] + (yc * ox - ys * oy);
  subgoal_w[1] = position_w[1] + (ys * ox + yc * oy);
  subgoal_w[2] = {c_float(contract.subgoal.flight_height_m)};  /* the contract's flight height */
}}

bool navDecide(const float position_w[3], const float quat_wxyz[4], const float velocity_w[3], const float goal_w[3],
               float subgoal_w[3])
{{
  float obs[NAV_OBS_SIZE], action[NAV_ACTION_SIZE], sg[3];
  if (!navBuildObservation(position_w, quat_wxyz, velocity_w, goal_w, obs)) {{
    return false;
  }}
{trail_add}{state_c.decide}
  navActionToSubgoal(action, position_w, quat_wxyz, sg);
  for (int i = 0; i < 3; ++i) {{
    navLastSubgoal[i] = sg[i];
    subgoal_w[i] = sg[i];
  }}
  navHasSubgoal = true;
  navDecisionCount += 1u;
  return true;
}}

uint32_t navDecisions(void)
{{
  return navDecisionCount;
}}
"""
    return h, c
