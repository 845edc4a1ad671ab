"""``planner:=learned`` in the node graph: the sim node's sensor_msgs/Range topics (REP 117), the planner node's
learned mode (robot_hrl/nodes/planner_learned.py), the skill node's range source, a generated room from the CLI;
their bad inputs; and one flight of a held-out room through the whole graph on Cyclone DDS, recorded to MCAP and
read back with rosbags (ROS 2's own serialisation), safety judged from the simulator's ground truth."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from rosbags.typesys import Stores, get_typestore

from robot_hrl.errors import ConfigError, ContractError, ObservationError
from robot_hrl.msgs import Range, RangeJazzy
from robot_hrl.planning.learned import range_for_observation
from robot_hrl.robots.crazyflie_2x.rangers import CRAZYFLIE_RANGERS
from robot_hrl.sensing import range_message

FRONT = CRAZYFLIE_RANGERS[0]


@pytest.mark.parametrize("distro,cls,store", [("jazzy", RangeJazzy, Stores.ROS2_JAZZY), ("humble", Range, Stores.ROS2_HUMBLE)])
@pytest.mark.parametrize("value,expected", [(1.234, 1.234), (math.inf, math.inf), (9.0, math.inf), (0.01, -math.inf),
                                            (-math.inf, -math.inf), (math.nan, math.inf)])
def test_range_codec_is_ros2s_with_rep117_limits(distro, cls, store, value, expected):
    """Our CDR of a Range is the bytes ROS 2's serializer (rosbags) makes of the same message, in each layout; no
    target is +inf, a target below min_range -inf (REP 117), and they survive the round trip."""
    msg = range_message(FRONT, value, 12.5, distro=distro)
    assert type(msg) is cls and msg.header.frame_id == "range_front"
    ts = get_typestore(store)
    decoded = ts.deserialize_cdr(msg.serialize(), "sensor_msgs/msg/Range")
    assert decoded.range == pytest.approx(expected, rel=1e-6) if math.isfinite(expected) else decoded.range == expected
    assert decoded.header.frame_id == "range_front" and decoded.radiation_type == 1
    assert decoded.min_range == pytest.approx(0.04) and decoded.max_range == pytest.approx(4.0)
    assert decoded.field_of_view == pytest.approx(math.radians(27.0))
    assert bytes(ts.serialize_cdr(decoded, "sensor_msgs/msg/Range")) == msg.serialize()
    assert cls.deserialize(msg.serialize()).range == decoded.range or math.isnan(decoded.range)


def test_the_level_reads_rep117_ranges_and_refuses_non_distances():
    assert range_for_observation(FRONT, math.inf) == FRONT.max_range_m
    assert range_for_observation(FRONT, 7.0) == FRONT.max_range_m
    assert range_for_observation(FRONT, -math.inf) == FRONT.min_range_m
    assert range_for_observation(FRONT, 0.0) == FRONT.min_range_m
    assert range_for_observation(FRONT, 2.5) == 2.5
    for bad in (math.nan, -0.3, -1e-9):
        with pytest.raises(ObservationError, match="not a distance"):
            range_for_observation(FRONT, bad)


@pytest.fixture(scope="module")
def shield_parts(repo_root):
    from robot_hrl.nodes.skill_node import range_shield
    from robot_hrl.runtime import OnnxPolicy
    from robot_hrl.world.rooms import generate_room

    policy = OnnxPolicy(repo_root / "models/crazyflie_goto.onnx", provider="cpu")
    room = generate_room("sparse", 1_000_000_000, "eval")
    shield = range_shield(None, policy.robot, room.world, policy.contract.subgoal_radius_m, policy.contract.action)
    return policy, room, shield


def test_the_skill_nodes_range_shield_has_both_sources_and_the_evaluations_zones(shield_parts):
    from robot_hrl.safety.config import load_shield_config
    from sim.navigate_shield import RANGE_SHIELD_BACKUP, RANGE_SHIELD_SECTION, range_shield_config

    policy, _, shield = shield_parts
    units = shield.config.units
    assert units.index("obstacles") < units.index("range_obstacles") < units.index("subgoal")
    section = shield.config.range_obstacles.model_dump()
    assert {**section, "sensors": list(section["sensors"])} == \
        {**shield.config.range_obstacles.model_validate(RANGE_SHIELD_SECTION).model_dump(), "sensors": RANGE_SHIELD_SECTION["sensors"]}
    assert set(RANGE_SHIELD_SECTION) == set(section)  # every key spelled out
    # the backup keys the range source changes: the overlay's, the evaluation's, and nothing else of the backup
    backup = shield.config.backup.model_dump()
    assert {k: backup[k] for k in RANGE_SHIELD_BACKUP} == RANGE_SHIELD_BACKUP
    assert backup == range_shield_config(policy.robot).backup.model_dump()
    mapped = load_shield_config(policy.robot.shield_config_path).backup.model_dump()
    assert {k: v for k, v in backup.items() if k not in RANGE_SHIELD_BACKUP} == \
        {k: v for k, v in mapped.items() if k not in RANGE_SHIELD_BACKUP}


def test_the_range_unit_refuses_bad_readings_and_takes_minus_inf_as_too_close(shield_parts):
    from robot_hrl.geometry import quat_from_euler_rpy
    from robot_hrl.safety import ShieldInput
    from robot_hrl.state import RobotState

    policy, room, shield = shield_parts
    unit = shield.unit("range_obstacles")
    for bad, match in ((math.nan, "not a distance"), (-0.5, "not a distance")):
        with pytest.raises(ObservationError, match=match):
            unit.update("front", bad, 1.0)
    with pytest.raises(ObservationError, match="stamp"):
        unit.update("front", 1.0, math.nan)
    assert unit.update("sideways", 1.0, 1.0) is False
    # -inf on the front ranger (REP 117: a target too close to measure) while flying toward it: the stop zone acts
    p = np.array([5.0, 5.0, 1.0])
    state = RobotState(position_w=p, quat_wxyz=np.asarray(quat_from_euler_rpy(0.0, 0.0, 0.0)),
                       linear_velocity_w=np.array([0.5, 0.0, 0.0]), angular_velocity_b=np.zeros(3), stamp_s=2.0)
    shield.reset_faults()
    for spec in CRAZYFLIE_RANGERS[:4]:
        unit.update(spec.name, -math.inf if spec.name == "front" else math.inf, 2.0)
    out = shield.step(ShieldInput(now_s=2.0, state=state, actions=np.zeros(4), subgoal_w=p + [1.0, 0.0, 0.0]))
    assert out.mode == "backup_hold" and shield.reason == "range_obstacles.stop", (out.mode, shield.reason)


def test_a_level_that_does_not_fit_the_goto_skill_is_refused_by_the_planner_node(repo_root, tmp_path):
    import onnx

    from robot_hrl.nodes.planner_learned import LearnedDriver
    from robot_hrl.world import load_world

    skill = repo_root / "models/crazyflie_goto.onnx"
    model = onnx.load(skill)
    init = model.graph.initializer[1]
    init.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(init) + 0.01, init.name))
    onnx.save(model, tmp_path / "other_goto.onnx")
    p = {"robot": "crazyflie_2x", "navigate_model": str(repo_root / "models/crazyflie_navigate.onnx"),
         "model": str(tmp_path / "other_goto.onnx"), "safety_margin_m": 0.2, "goal_tolerance_m": 0.3}
    world = load_world(repo_root / "models/worlds/demo.yaml")
    with pytest.raises(ContractError, match="another goto model") as info:
        LearnedDriver.make_planner(p, world, 1.0, 0.065)
    assert "train" in str(info.value)  # the message says what to do
    p["model"] = str(skill)
    planner = LearnedDriver.make_planner(p, world, 1.0, 0.065)
    plan = planner.plan("takeoff 1; goto 2 3 1; land", np.array([0.5, 0.5, 0.0]))
    assert plan.planner == "learned" and [s.action for s in plan.steps] == ["takeoff", "goto", "land"]


def test_a_generated_room_from_the_cli_and_its_bad_forms(tmp_path):
    from robot_hrl.launch.launcher import write_room

    path, task = write_room("room:dense:1000000003", tmp_path)
    assert path.endswith("room_dense_1000000003.yaml") and task["split"] == "eval"
    assert task["task"].startswith("takeoff") and "goto" in task["task"]
    for bad in ("room:crowded:1", "room:dense", "room:dense:-4", "room:dense:x"):
        with pytest.raises(ConfigError, match="room:<density>:<seed>"):
            write_room(bad, tmp_path)


def _bag_messages(bag_dir, topics):
    """The messages of ``topics`` in a rosbag2 (MCAP) folder, deserialized by rosbags (Range: Jazzy's layout)."""
    from rosbags.rosbag2 import Reader

    stores = {"jazzy": get_typestore(Stores.ROS2_JAZZY), "humble": get_typestore(Stores.ROS2_HUMBLE)}
    out: dict[str, list] = {}
    with Reader(bag_dir) as reader:
        conns = [c for c in reader.connections if c.topic in topics]
        for conn, _, raw in reader.messages(connections=conns):
            store = stores["jazzy" if conn.msgtype == "sensor_msgs/msg/Range" else "humble"]
            out.setdefault(conn.topic, []).append(store.deserialize_cdr(raw, conn.msgtype))
    return out


def test_the_learned_planner_flies_a_held_out_room_in_the_node_graph(tmp_path, monkeypatch):
    """`robot-hrl launch navigation --planner learned --world room:sparse:1000000003` on Cyclone DDS: the level gives
    the subgoals (not the plan's), the rangers are on the graph and in the MCAP recording (decoded by rosbags), the
    run is recorded with the planner used; it reaches the goal or says why not; no ground-truth violation."""
    from dds_helpers import use_domain

    from robot_hrl.launch.launcher import Launcher, LaunchOptions

    from test_e2e_support import E2E_DOMAIN_BLOCK
    from dds_helpers import unique_domain_id

    domain = unique_domain_id(block=E2E_DOMAIN_BLOCK)
    use_domain(monkeypatch, domain)
    out = tmp_path / "run"
    result = Launcher(LaunchOptions(arguments={"planner": "learned", "world": "room:sparse:1000000003"}, out=out,
                                    timeout_s=60.0, domain_id=domain, live=False)).run()
    saved = json.loads((out / "result.json").read_text())
    assert saved["planner"] == "learned" and saved["world"].endswith("room_sparse_1000000003.yaml")
    assert result.violations == 0 and result.collisions == 0, result.violation_events
    assert result.success or result.reason, result
    assert result.goals_reached >= 1, result  # at least the takeoff; the goto is the level's
    bag = _bag_messages(out / "recording", {s.topic for s in CRAZYFLIE_RANGERS} | {"/plan", "/subgoal"})
    for spec in CRAZYFLIE_RANGERS:
        msgs = bag.get(spec.topic, [])
        assert len(msgs) >= 10, (spec.topic, len(msgs))
        assert all(m.header.frame_id == spec.frame_id for m in msgs)
        assert all(m.range == math.inf or m.range == -math.inf or spec.min_range_m <= m.range <= spec.max_range_m
                   for m in msgs)
    ups = [m.range for m in bag["/range/up"] if math.isfinite(m.range)]
    # the room's ceiling (2.5 m): about 2.5 m from the ground before take-off, 1-2 m in flight at 1 m (not the median:
    # how much of the recording is on the ground depends on the machine's speed; CI once had 2.07 m)
    assert ups and max(ups) < 2.6 and 0.5 < min(ups), (min(ups) if ups else None, max(ups) if ups else None)
    assert sum(1.0 < u < 2.0 for u in ups) >= 5, sorted(ups)[:10]
    plan = [np.array([p.pose.position.x, p.pose.position.y, p.pose.position.z]) for p in bag["/plan"][-1].poses]
    subgoals = [np.array([s.pose.position.x, s.pose.position.y, s.pose.position.z]) for s in bag["/subgoal"]]
    level = [s for s in subgoals if min(np.abs(s - q).max() for q in plan) > 1e-3]
    assert len(level) >= 3, "no subgoal of the level's own on /subgoal"
    world = yaml.safe_load((out / "world" / "room_sparse_1000000003.yaml").read_text())
    assert world["obstacles"], "the generated room's world file holds its obstacles (the map's unit judges them too)"


def test_hostile_range_streams_never_blind_the_unit(shield_parts):
    """Readings at random (NaN, negative, +-inf, out of limits, good ones) in a random order: a refused reading
    never replaces the last good one, and the unit's picture is always a distance in the sensor's limits or no
    target; the level's conversion agrees on what it accepts."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    _, _, shield = shield_parts
    unit = shield.unit("range_obstacles")
    value = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32), st.sampled_from([math.nan, -math.inf, math.inf, -0.2, 0.0]))

    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(st.lists(st.tuples(st.sampled_from(["front", "back", "left", "right"]), value), min_size=1, max_size=30))
    def run(stream):
        unit.reset()
        last = {}
        for t, (name, r) in enumerate(stream):
            spec = next(s for s in CRAZYFLIE_RANGERS if s.name == name)
            bad = math.isnan(r) or (math.isfinite(r) and r < 0.0)
            if bad:
                with pytest.raises(ObservationError):
                    unit.update(name, r, float(t))
                with pytest.raises(ObservationError):
                    range_for_observation(spec, r)
            else:
                assert unit.update(name, r, float(t)) is True
                last[name] = r
                assert spec.min_range_m <= range_for_observation(spec, r) <= spec.max_range_m
            for i, s in enumerate(unit.specs):
                got = unit.range_m[i]
                if s.name not in last:
                    assert math.isnan(got)
                else:
                    assert got == math.inf or s.min_range_m <= got < s.max_range_m
                    if last[s.name] < s.min_range_m:
                        assert got == s.min_range_m  # too close (-inf included) stays an obstacle

    run()


def test_the_skill_nodes_range_overlay_is_checked_with_the_fix(shield_parts, tmp_path, monkeypatch):
    """A robot without the overlay, an overlay that is not a mapping, and one whose backup keys are not the backup's:
    each refused with what is wrong and where to look; a good overlay's backup keys replace the shield.yaml's."""
    import shutil

    from robot_hrl.nodes.skill_node import RANGE_SHIELD_FILE, range_shield

    policy, room, _ = shield_parts
    robot = policy.robot
    shipped = robot.shield_config_path
    shutil.copy(shipped, tmp_path / "shield.yaml")
    monkeypatch.setattr(type(robot), "shield_config_path", property(lambda self: tmp_path / "shield.yaml"))

    def build():
        return range_shield(None, robot, room.world, policy.contract.subgoal_radius_m, policy.contract.action)

    with pytest.raises(ConfigError, match="range_shield=true needs the range source's zones"):
        build()
    overlay = tmp_path / RANGE_SHIELD_FILE
    overlay.write_text("- range_obstacles\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping with range_obstacles"):
        build()
    good = yaml.safe_load((shipped.parent / RANGE_SHIELD_FILE).read_text())
    overlay.write_text(yaml.safe_dump({**good, "backup": {"recover_seconds": 0.0}}))
    with pytest.raises(ConfigError, match="recover_seconds"):
        build()
    overlay.write_text(yaml.safe_dump({**good, "backup": {"recover_s": 0.05}}))
    assert build().config.backup.recover_s == 0.05
