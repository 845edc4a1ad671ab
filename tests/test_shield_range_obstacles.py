"""The shield without a map: the ``range_obstacles`` unit (stop and slowdown zones from the live rangers), alone
and next to the map's ``obstacles`` unit, in PyBullet with its ray-tested rangers; safety judged from
PyBullet's contacts (the ground truth), not from the unit's own view."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import yaml

from robot_hrl.errors import ConfigError
from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.robots.crazyflie_2x.rangers import CRAZYFLIE_RANGERS
from robot_hrl.safety import Shield, ShieldInput
from robot_hrl.safety.config import parse_shield_config
from robot_hrl.world.rooms import generate_room

from sim.evaluate_navigate import RANGE_SHIELD_SECTION as RANGE_SECTION  # noqa: E402  (the evaluation's zones)


def _config(robot, units=("obstacles", "range_obstacles"), **section):
    data = yaml.safe_load(robot.shield_config_path.read_text())
    listed = [u for u in data["units"] if u != "obstacles"]
    at = listed.index("subgoal")
    data["units"] = listed[:at] + list(units) + listed[at:]
    if "obstacles" not in units:
        data.pop("obstacles")
    if "range_obstacles" in units:
        data["range_obstacles"] = {**RANGE_SECTION, **section}
    return parse_shield_config(copy.deepcopy(data), "test")


@pytest.fixture(scope="module")
def policy(repo_root):
    from robot_hrl.runtime import OnnxPolicy

    return OnnxPolicy(repo_root / "models/crazyflie_goto.onnx", provider="cpu")


def test_config_is_checked(policy):
    robot = policy.robot
    cfg = _config(robot)
    assert "range_obstacles" in cfg.units and "obstacles" in cfg.units
    with pytest.raises(ConfigError, match="slowdown_distance_m"):
        _config(robot, slowdown_distance_m=0.1)
    with pytest.raises(ConfigError, match="range_obstacles: missing"):
        data = yaml.safe_load(robot.shield_config_path.read_text())
        data["units"].insert(data["units"].index("subgoal"), "range_obstacles")
        parse_shield_config(data, "test")
    world = generate_room("sparse", 0).world
    with pytest.raises(ConfigError, match="not the robot's rangers"):
        Shield(_config(robot, sensors=["front", "sideways"]), robot, world, 1.0, action=policy.contract.action)


def _fly_at_a_box(policy, seed: int, shield_units, drop_sensor_at_s: float | None = None, time_s: float = 5.0,
                  any_bearing: bool = False):
    """A hostile planner drives the goto skill straight at a box the shield's world file does not hold
    (the room is unmapped: the shield gets the fence only); one horizontal ranger faces the way it flies.
    ``any_bearing``: from a random direction at a random point of the box (a corner, an edge, a face) with a random
    yaw, so the box often lies between two rangers' cones all the way in."""
    from sim.pybullet import PyBulletQuadrotorSim
    from sim.pybullet.ranging import PyBulletRangers, build_enclosure

    rng = np.random.default_rng(seed)
    room = generate_room(("sparse", "medium", "dense")[seed % 3], int(rng.integers(0, 50)))
    unmapped = room.world.model_copy(update={"obstacles": ()})
    robot = policy.robot
    shield = Shield(_config(robot, shield_units), robot, unmapped, policy.contract.subgoal_radius_m,
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
        corner = rng.uniform() < 0.5                                # a corner region half the time
        spread = rng.uniform(0.0, 1.0, size=2) ** 0.2 * rng.choice([-1.0, 1.0], size=2) if corner else rng.uniform(-1.0, 1.0, size=2)
        aim = centre + half * spread
        bearing = rng.uniform(-math.pi, math.pi)
        start = aim + (float(np.max(half)) + float(rng.uniform(1.2, 1.8))) * np.array([math.cos(bearing), math.sin(bearing)])
        toward = (aim - start) / np.linalg.norm(aim - start)
        yaw = float(rng.uniform(-math.pi, math.pi))
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
                subgoal = np.array([*(state.position_w[:2] + toward * 1.0), z])
                if shield is not None:
                    subgoal, _ = shield.filter_subgoal(subgoal, state.position_w, now)
            actions = policy.step(state, subgoal)
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


def _runs(policy, units, n, first_seed, **kw):
    out, seed = [], first_seed
    while len(out) < n:
        r = _fly_at_a_box(policy, seed, units, **kw)
        seed += 1
        if r is not None:
            out.append(r)
    return out


def test_without_a_range_source_the_unmapped_box_is_hit(policy):
    """Not vacuous: the map's obstacle unit alone (the room unmapped) lets the hostile planner hit the box."""
    runs = _runs(policy, ("obstacles",), 3, 100)
    assert sum(r["collided"] for r in runs) >= 2, runs


@pytest.mark.parametrize("units", [("range_obstacles",), ("obstacles", "range_obstacles")], ids=["range-only", "both-sources"])
def test_the_range_source_stops_the_robot_before_an_unmapped_box(policy, units):
    runs = _runs(policy, units, 4, 100)
    assert not any(r["collided"] for r in runs), runs
    assert all(r["counts"].get("stop", 0) + r["counts"].get("slowdown", 0) > 0 for r in runs), runs


def test_a_hostile_planner_from_any_bearing_never_reaches_the_box(policy):
    """The hostile planner at a random point of the box (corners half the time) from a random direction with a random
    yaw: the box is often between two rangers' cones on the way in (the direction-aware attempt that used each
    ranger's axis alone hit it). Judged from PyBullet's contacts."""
    runs = _runs(policy, ("range_obstacles",), 8, 300, any_bearing=True)
    assert not any(r["collided"] for r in runs), [r for r in runs if r["collided"]]
    assert all(r["counts"].get("stop", 0) > 0 for r in runs), runs
    bare = _runs(policy, (), 8, 300, any_bearing=True)                # not vacuous: the same flights unshielded
    assert sum(r["collided"] for r in bare) >= 4, bare


def test_a_ranger_that_goes_silent_stops_the_robot(policy):
    """The ranger facing the travel goes silent at a random moment: the unit rejects (source_timeout, as Nav2's
    collision monitor stops on a stale source) and the backup holds; still no contact."""
    rng = np.random.default_rng(7)
    runs = [r for r in (_fly_at_a_box(policy, 200 + i, ("range_obstacles",), drop_sensor_at_s=float(rng.uniform(0.2, 1.5)))
                        for i in range(6)) if r is not None][:3]
    assert runs and not any(r["collided"] for r in runs), runs
    assert all(r["counts"].get("source_timeout", 0) > 0 and "backup_hold" in r["modes"] for r in runs), runs


def test_the_evaluation_flies_a_level_through_the_range_shield(policy, repo_root):
    """sim/evaluate_navigate.py's shielded PyBullet flight: the rangers feed the shield at their own rate (no
    stale-source rejections), the room is unmapped for the shield, and it acts near the obstacles."""
    import torch

    from sim.evaluate_navigate import fly_pybullet
    from sim.navigate_baselines import reactive_potential_field

    room = generate_room("dense", 1_000_000_000, "eval")
    r = fly_pybullet(room, lambda obs: reactive_potential_field(torch.from_numpy(obs)).numpy(),
                     repo_root / "models/crazyflie_goto.onnx", seed=0, time_limit_s=6.0, shielded=True)
    assert r["shielded"] and r["success"] + r["collided"] + r["time_out"] == 1
    assert not any(k.endswith("source_timeout") for k in r["interventions"]), r["interventions"]
