"""A hostile planner drives the goto skill at a box the shield's world file does not hold, in PyBullet with its
ray-tested rangers: the drill of the shield's range source (``range_obstacles``), judged from PyBullet's contacts.

Used by ``tests/test_shield_range_obstacles.py`` and ``benchmarks/bench_range_drill.py`` (one drill, two users)."""

from __future__ import annotations

import copy
import math

import numpy as np
import yaml

from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.robots.crazyflie_2x.rangers import CRAZYFLIE_RANGERS
from robot_hrl.safety import Shield, ShieldInput
from robot_hrl.safety.config import parse_shield_config
from robot_hrl.world.rooms import generate_room
from sim.navigate_shield import RANGE_SHIELD_BACKUP as RANGE_BACKUP  # the evaluation's backup keys
from sim.navigate_shield import RANGE_SHIELD_SECTION as RANGE_SECTION  # the evaluation's zones


def range_shield_config(robot, units=("obstacles", "range_obstacles"), backup: dict | None = None, **section):
    """The robot's shield with ``units`` listed before ``subgoal`` (``obstacles`` dropped unless listed), the evaluation's
    range section (``section`` overrides its keys) and, with it, the backup keys it changes (``RANGE_SHIELD_BACKUP``);
    ``backup`` overrides keys of the backup section after those."""
    data = yaml.safe_load(robot.shield_config_path.read_text())
    listed = [u for u in data["units"] if u != "obstacles"]
    at = listed.index("subgoal")
    data["units"] = listed[:at] + list(units) + listed[at:]
    if "obstacles" not in units:
        data.pop("obstacles")
    if "range_obstacles" in units:
        data["range_obstacles"] = {**RANGE_SECTION, **section}
        data["backup"] = {**data["backup"], **RANGE_BACKUP}
    if backup:
        data["backup"] = {**data["backup"], **backup}
    return parse_shield_config(copy.deepcopy(data), "range drill")


def _aim_and_bearing(rng, centre, half):
    """A random point of the box's footprint (a corner region half the time) and a random bearing, rad."""
    corner = rng.uniform() < 0.5
    spread = rng.uniform(0.0, 1.0, size=2) ** 0.2 * rng.choice([-1.0, 1.0], size=2) if corner else rng.uniform(-1.0, 1.0, size=2)
    return centre + half * spread, rng.uniform(-math.pi, math.pi)


def fly_at_a_box(policy, seed: int, shield_units, drop_sensor_at_s: float | None = None, time_s: float = 5.0,
                 any_bearing: bool = False, backup: dict | None = None, section: dict | None = None, heading=None,
                 at_start: bool = False, past_corner: bool = False):
    """A hostile planner drives the goto skill straight at a box the shield's world file does not hold
    (the room is unmapped: the shield gets the fence only); one horizontal ranger faces the way it flies.
    ``any_bearing``: from a random direction at a random point of the box (a corner, an edge, a face) with a random
    yaw, so the box often lies between two rangers' cones all the way in. ``backup``: keys of the shield's backup
    section to override (``recover_s``, ``hold_turn_max_rate_dps``); ``section``: keys of the range section to override. ``heading``: a level's
    HeadingSpec: the heading loop runs under the skill (robot_hrl.runtime.heading), as the skill node runs it under a
    level trained with one. ``at_start``: the flight starts near the box (0.3-0.6 m of clearance, beyond the collision
    radius, from where the line from the aimed point leaves the box) with a yaw that puts the way to it between two rangers' cones (the diagonal, within 15 degrees): nothing has been
    seen of it when the robot sets off (the learned level's one contact, benchmarks/README.md). None when the seed
    gives no free run-up (draw again). ``past_corner``: the planner flies an arc (radius 0.4-2 m, either way round)
    that runs through a corner of the box, 1.2-2 m of arc from the start; with the heading loop the robot turns along
    the arc, so the corner, on the inside of the turn, can stay off its yaw, between the front cone and a side cone,
    until it is there (the geometry of the contact the ``unknown`` rule was written for, benchmarks/README.md "Issue
    #19: where no cone has looked"; what gets through is the walk of "Issue #19: the hold's ratchet, and stall
    escapes")."""
    if any_bearing + at_start + past_corner > 1:
        raise ValueError("fly_at_a_box: any_bearing, at_start and past_corner are different flights; ask for one at most")
    from robot_hrl.runtime.heading import heading_loop
    from sim.pybullet import PyBulletQuadrotorSim
    from sim.pybullet.ranging import PyBulletRangers, build_enclosure

    rng = np.random.default_rng(seed)
    room = generate_room(("sparse", "medium", "dense")[seed % 3], int(rng.integers(0, 50)))
    unmapped = room.world.model_copy(update={"obstacles": ()})
    robot = policy.robot
    shield = Shield(range_shield_config(robot, shield_units, backup, **(section or {})), robot, unmapped, policy.contract.subgoal_radius_m,
                    action=policy.contract.action) if shield_units else None
    # a box, a direction toward it along which the start is free, and the ranger that faces that way
    box = room.world.obstacles[int(rng.integers(len(room.world.obstacles)))]
    centre = np.array(box.center[:2])
    half = np.array(box.size[:2]) / 2.0
    axis = int(rng.integers(2))
    sign = float(rng.choice([-1.0, 1.0]))
    toward = np.zeros(2)
    toward[axis] = -sign                                            # from the start toward the box
    start = centre.copy()
    start[axis] += sign * (half[axis] + float(rng.uniform(1.2, 1.8)))
    start[1 - axis] += float(rng.uniform(-0.3, 0.3)) * min(half[1 - axis], 0.2) / 0.3
    facing = int(rng.integers(4))                                   # front, back, left, right faces the travel
    yaw = math.atan2(toward[1], toward[0]) - (0.0, math.pi, math.pi / 2, -math.pi / 2)[facing]
    if any_bearing:
        aim, bearing = _aim_and_bearing(rng, centre, half)
        start = aim + (float(np.max(half)) + float(rng.uniform(1.2, 1.8))) * np.array([math.cos(bearing), math.sin(bearing)])
        toward = (aim - start) / np.linalg.norm(aim - start)
        yaw = float(rng.uniform(-math.pi, math.pi))
    if at_start:
        aim, bearing = _aim_and_bearing(rng, centre, half)
        out = np.array([math.cos(bearing), math.sin(bearing)])
        step = 0.02  # out of the box along the bearing, then the clearance
        gap = 0.0
        while box.distance(np.array([*(aim + gap * out), box.center[2]])) <= 0.0:
            gap += step
        start = aim + (gap + robot.collision_radius_m + float(rng.uniform(0.3, 0.6))) * out
        toward = -out
        yaw = math.atan2(toward[1], toward[0]) + math.pi / 4 + int(rng.integers(4)) * math.pi / 2 \
            + math.radians(float(rng.uniform(-15.0, 15.0)))
    arc = None
    if past_corner:
        corner = centre + half * rng.choice([-1.0, 1.0], size=2)
        aim = corner - 0.03 * np.sign(corner - centre)                 # just inside the box, at the corner
        turn = float(rng.choice([-1.0, 1.0]))                          # +1: counter-clockwise (a left turn)
        outward = math.atan2(*(corner - centre)[::-1])                  # the corner's diagonal, out of the box
        # the tangent at the corner runs across the diagonal, the turn toward the box: the box is on the inside of the
        # turn, the corner ahead of the robot 15-35 degrees off its yaw for the last metre
        tangent = outward + turn * math.pi / 2 + math.radians(float(rng.uniform(-30.0, 30.0)))
        radius = float(rng.uniform(0.4, 2.0))
        centre_arc = aim + turn * radius * np.array([-math.sin(tangent), math.cos(tangent)])
        phi_aim = math.atan2(*(aim - centre_arc)[::-1])
        phi_start = phi_aim - turn * float(rng.uniform(1.2, 2.0)) / radius
        start = centre_arc + radius * np.array([math.cos(phi_start), math.sin(phi_start)])
        arc = (centre_arc, radius, turn)
        yaw = phi_start + turn * math.pi / 2                           # facing along the arc
    z = 1.0
    start_w = np.array([start[0], start[1], z])
    lo, hi = np.array(unmapped.bounds.min), np.array(unmapped.bounds.max)
    if np.any(start_w[:2] < lo[:2] + 0.4) or np.any(start_w[:2] > hi[:2] - 0.4) or any(
            o.distance(start_w) < 0.3 for o in room.world.obstacles):
        return None                                                 # no free run-up here: the caller draws again
    with PyBulletQuadrotorSim(robot=robot, world=room.world, control_hz=policy.control_rate_hz, seed=seed) as sim:
        build_enclosure(sim.bullet, room.world)
        rangers = PyBulletRangers(sim.bullet, CRAZYFLIE_RANGERS, seed=seed)
        state = sim.reset(start_w, quat_from_euler_rpy(0.0, 0.0, yaw))
        policy.reset()
        yaw_loop = heading_loop(heading, policy)
        unit = shield.unit("range_obstacles") if shield is not None else None
        every = int(round(policy.control_rate_hz / CRAZYFLIE_RANGERS[0].update_rate_hz))
        dropped = CRAZYFLIE_RANGERS[facing].name
        collided, modes, subgoal = False, set(), start_w
        for k in range(int(time_s * policy.control_rate_hz)):
            now = sim.time_s
            if k % every == 0 and unit is not None:
                for spec, r in zip(CRAZYFLIE_RANGERS, rangers.readings(state.position_w, state.quat_wxyz)):
                    if drop_sensor_at_s is not None and now >= drop_sensor_at_s and spec.name == dropped:
                        continue                                    # the facing ranger goes silent
                    unit.update(spec.name, float(r), now)
            if k % 50 == 0:                                         # the hostile planner: 1 m further toward the box
                if arc is None:
                    subgoal = np.array([*(state.position_w[:2] + toward * 1.0), z])
                else:                                               # or 1 m further along the arc
                    c, radius, turn = arc
                    phi = math.atan2(*(state.position_w[:2] - c)[::-1]) + turn * 1.0 / radius
                    subgoal = np.array([*(c + radius * np.array([math.cos(phi), math.sin(phi)])), z])
                if shield is not None:
                    subgoal, _ = shield.filter_subgoal(subgoal, state.position_w, now)
            actions = policy.step(state, subgoal) if yaw_loop is None else yaw_loop.step(policy, state, subgoal)
            if shield is not None:
                out = shield.step(ShieldInput(now_s=now, state=state, actions=actions, subgoal_w=subgoal,  # measured battery
                                              battery_v=float(sim.chain_state["battery_voltage_v"])))
                modes.add(out.mode)
                wrench = out.wrench
            else:
                wrench = policy.to_wrench(actions)
            state = sim.step(wrench)
            if any(c.body != "ground" for c in sim.collisions()) or sim.collided():
                collided = True
                break
        counts = dict(unit.counters.by_constraint) if unit is not None else {}
        return {"collided": collided, "modes": modes, "counts": counts, "start": start_w, "room": room.name}


def drill_runs(policy, units, n, first_seed, **kw):
    """The first ``n`` flights from ``first_seed`` on that have a free run-up (:func:`fly_at_a_box` draws again)."""
    out, seed = [], first_seed
    while len(out) < n:
        r = fly_at_a_box(policy, seed, units, **kw)
        seed += 1
        if r is not None:
            out.append(r)
    return out
