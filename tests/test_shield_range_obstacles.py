"""The shield without a map: the ``range_obstacles`` unit (stop and slowdown zones from the live rangers), alone
and next to the map's ``obstacles`` unit, in PyBullet with its ray-tested rangers; safety judged from
PyBullet's contacts (the ground truth), not from the unit's own view."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from robot_hrl.errors import ConfigError
from robot_hrl.safety import Shield
from robot_hrl.safety.config import parse_shield_config
from robot_hrl.world.rooms import generate_room

from sim.range_drill import drill_runs, fly_at_a_box, range_shield_config


@pytest.fixture(scope="module")
def policy(repo_root):
    from robot_hrl.runtime import OnnxPolicy

    return OnnxPolicy(repo_root / "models/crazyflie_goto.onnx", provider="cpu")


def test_config_is_checked(policy):
    robot = policy.robot
    cfg = range_shield_config(robot)
    assert "range_obstacles" in cfg.units and "obstacles" in cfg.units
    with pytest.raises(ConfigError, match="slowdown_distance_m"):
        range_shield_config(robot, slowdown_distance_m=0.1)
    with pytest.raises(ConfigError, match="range_obstacles: missing"):
        data = yaml.safe_load(robot.shield_config_path.read_text())
        data["units"].insert(data["units"].index("subgoal"), "range_obstacles")
        parse_shield_config(data, "test")
    world = generate_room("sparse", 0).world
    with pytest.raises(ConfigError, match="not the robot's rangers"):
        Shield(range_shield_config(robot, sensors=["front", "sideways"]), robot, world, 1.0, action=policy.contract.action)


def test_without_a_range_source_the_unmapped_box_is_hit(policy):
    """Not vacuous: the map's obstacle unit alone (the room unmapped) lets the hostile planner hit the box."""
    runs = drill_runs(policy, ("obstacles",), 3, 100)
    assert sum(r["collided"] for r in runs) >= 2, runs


@pytest.mark.parametrize("units", [("range_obstacles",), ("obstacles", "range_obstacles")], ids=["range-only", "both-sources"])
def test_the_range_source_stops_the_robot_before_an_unmapped_box(policy, units):
    runs = drill_runs(policy, units, 4, 100)
    assert not any(r["collided"] for r in runs), runs
    assert all(r["counts"].get("stop", 0) + r["counts"].get("slowdown", 0) > 0 for r in runs), runs


def test_a_hold_without_debounce_does_not_walk_into_a_corner_between_remembered_hits(policy):
    """The range source hands control back on the policy's first safe command (``backup.recover_s`` 0), so a hostile
    planner's chatter re-aims every hold where the robot has drifted to. Drill seed 360 (along a ranger's axis): with
    the picture at 0.05 m the walk reached a 0.2 m pillar's corner, which lay between two remembered hits and nearer
    than either (benchmarks/README.md, "Issue #19: the picture's resolution"); at the shipped 0.02 m it stops short.
    Judged from PyBullet's contacts; the coarse picture hitting it, with a hold that damps the yaw (as before the hold
    turned as commanded, ``backup.hold_turn_max_rate_dps``, which alone keeps the coarse picture off it too), keeps the
    test from being vacuous."""
    from sim.navigate_shield import RANGE_SHIELD_BACKUP, RANGE_SHIELD_SECTION

    assert RANGE_SHIELD_BACKUP["recover_s"] == 0.0 and RANGE_SHIELD_SECTION["memory_spacing_m"] < RANGE_SHIELD_SECTION["min_clearance_m"]
    shipped = fly_at_a_box(policy, 360, ("range_obstacles",))
    assert not shipped["collided"] and shipped["counts"]["stop"] > 0, shipped
    coarse = fly_at_a_box(policy, 360, ("range_obstacles",), section={"memory_spacing_m": 0.05, "memory_capacity": 1024},
                          backup={"hold_turn_max_rate_dps": None})
    assert coarse["collided"], coarse


def test_a_hostile_planner_from_any_bearing_rarely_reaches_the_box(policy):
    """The hostile planner at a random point of the box (corners half the time) from a random direction with a random
    yaw: the box is often between two rangers' cones on the way in (the direction-aware attempt that used each
    ranger's axis alone hit it). Judged from PyBullet's contacts.

    Not "never": four cones do not see a box that stays between them (docs/safety.md, "What it does not cover"). Over
    the 103 flights of seeds 300-459 the unit let 4 reach the box (no debounce and hits 0.02 m apart, as with the 0.1 s
    debounce and 0.05 m; 6 with the 0.2 s debounce) against 100 of 103 unshielded (benchmarks/README.md, "The range
    source from any bearing", "Issue #19: the picture's resolution"). This test held "none in 8" until the
    debounce changed which 8 seeds were clean: the bound below is the measured rate's, not a lucky draw's."""
    runs = drill_runs(policy, ("range_obstacles",), 16, 300, any_bearing=True)
    hits = [r for r in runs if r["collided"]]
    assert len(hits) <= 2, hits
    assert all(r["counts"].get("stop", 0) > 0 for r in runs if not r["collided"]), runs  # each one it saved, it stopped
    bare = drill_runs(policy, (), 16, 300, any_bearing=True)               # not vacuous: the same flights unshielded
    assert sum(r["collided"] for r in bare) >= 12, bare


def test_a_ranger_that_goes_silent_stops_the_robot(policy):
    """The ranger facing the travel goes silent at a random moment: the unit rejects (source_timeout, as Nav2's
    collision monitor stops on a stale source) and the backup holds; still no contact."""
    rng = np.random.default_rng(7)
    runs = [r for r in (fly_at_a_box(policy, 200 + i, ("range_obstacles",), drop_sensor_at_s=float(rng.uniform(0.2, 1.5)))
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


def test_at_the_start_the_unseen_and_unknown_rules_keep_the_robot_off_a_box_between_the_cones(policy, repo_root):
    """The learned level's one contact before the ``unseen`` rule: a pillar between the cones near the start. The
    drill's start case (a box 0.3-0.6 m away, the way to it between two cones, a hostile planner driving at it under
    the level's heading loop), judged from PyBullet's contacts: with the shipped range section the first 16 flights
    reach the box at most once (1 of 64 measured on seeds 300-399 with the ``unseen`` rule alone, benchmarks/README.md,
    "Issue #19: look before you go"); with the ``unknown`` rule alone (the cells round the start are unknown too) at
    most once; without either, and with a hold that damps the yaw (before ``backup.hold_turn_max_rate_dps``), the same
    flights reach it at least twice (9 of 64 measured), so the test is not vacuous. (With the hold's turn and neither
    rule, 1 of these 16 reaches it.)"""
    from robot_hrl.runtime.heading import heading_of_level

    heading = heading_of_level(repo_root / "models/crazyflie_navigate.onnx", policy, required=True).spec
    shipped = drill_runs(policy, ("range_obstacles",), 16, 300, at_start=True, heading=heading)
    assert sum(r["collided"] for r in shipped) <= 1, shipped
    assert sum(r["counts"].get("unseen", 0) > 0 for r in shipped) >= 8, shipped  # the rule acted (10 of 16 measured)
    unknown_only = drill_runs(policy, ("range_obstacles",), 16, 300, at_start=True, heading=heading,
                              section={"unseen_travel_m": None})
    assert sum(r["collided"] for r in unknown_only) <= 1, unknown_only
    assert sum(r["counts"].get("unknown", 0) > 0 for r in unknown_only) >= 8, unknown_only
    without = drill_runs(policy, ("range_obstacles",), 16, 300, at_start=True, heading=heading,
                         section={"unseen_travel_m": None, "unknown_creep_m": None}, backup={"hold_turn_max_rate_dps": None})
    assert sum(r["collided"] for r in without) >= 2, without


def test_an_arc_past_a_corner_under_the_heading_loop_is_stopped_short_of_the_box(policy, repo_root):
    """The drill's arc past a corner (``past_corner``): a hostile planner flies an arc of 0.4-2 m radius through a corner
    of a box nobody mapped, the box on the inside of the turn, under the level's heading loop, so the corner can stay
    between the front cone and a side cone on the way in. Judged from PyBullet's contacts: through the shipped range
    source none of the first 16 flights reaches the box (3 of 227 on seeds 300-699, all after long walks through
    holds: benchmarks/README.md, "Issue #19: the hold's ratchet, and stall escapes"); unshielded the same flights all
    do, so it is not vacuous."""
    from robot_hrl.runtime.heading import heading_of_level

    heading = heading_of_level(repo_root / "models/crazyflie_navigate.onnx", policy, required=True).spec
    shipped = drill_runs(policy, ("range_obstacles",), 16, 300, past_corner=True, heading=heading)
    assert sum(r["collided"] for r in shipped) == 0, shipped
    assert sum(sum(r["counts"].values()) > 0 for r in shipped) >= 12, shipped  # the unit acted (16 of 16 measured)
    bare = drill_runs(policy, (), 16, 300, past_corner=True, heading=heading)
    assert [r["start"].tolist() for r in bare] == [r["start"].tolist() for r in shipped]  # the same flights
    assert sum(r["collided"] for r in bare) >= 14, bare


def test_the_drill_flies_one_kind_of_flight_at_a_time(policy):
    """``fly_at_a_box``'s flights (from any bearing, at the start, past a corner) are different draws of the same seed;
    two at once is refused before anything flies, with what to do."""
    with pytest.raises(ValueError, match="ask for one at most"):
        fly_at_a_box(policy, 300, ("range_obstacles",), at_start=True, past_corner=True)
    with pytest.raises(ValueError, match="ask for one at most"):
        fly_at_a_box(policy, 300, (), any_bearing=True, past_corner=True)
