"""The skill node's loop timing without wall-clock assertions: a fake clock drives the hybrid wait,
the fixed-rate schedule and the parameters; the garbage collector is put back as it was found."""

from __future__ import annotations

import gc

import pytest

from robot_hrl.errors import ConfigError
from robot_hrl.nodes.deadline import FixedRateSchedule, LoopGc, LoopTiming, wait_until


class FakeClock:
    """A clock that moves only when the code under test sleeps or polls."""

    def __init__(self, t: float = 0.0, poll_cost_s: float = 10e-6):
        self.t = t
        self.poll_cost_s = poll_cost_s
        self.sleeps: list[float] = []
        self.polls = 0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s

    def poll(self) -> None:
        self.polls += 1
        self.t += self.poll_cost_s


# ---- the hybrid wait ------------------------------------------------------------------------------
def test_wait_sleeps_to_the_margin_then_spins_to_the_deadline():
    c = FakeClock()
    now = wait_until(0.01, 300e-6, c.sleep, c.poll, clock=c)
    assert now >= 0.01
    assert c.sleeps == [pytest.approx(0.01 - 300e-6)]  # one sleep, up to the margin, never past it
    assert c.polls >= 25  # the last 300 us spent polling (10 us per poll here)


def test_wait_stops_polling_when_a_poll_would_overshoot_the_deadline():
    """rclpy's spin_once(0) costs a few hundred microseconds: the wait learns a poll's cost and spins on
    the clock alone when less than that is left, instead of overshooting the deadline by a poll."""
    from robot_hrl.nodes.deadline import poll_cost_s

    class MovingClock(FakeClock):
        def __call__(self) -> float:
            self.t += 1e-6  # a real clock moves while it is read
            return self.t

    c = MovingClock(poll_cost_s=230e-6)
    poll = c.poll  # one callable: its cost is remembered across waits
    for k in range(1, 4):
        deadline = 0.01 * k
        now = wait_until(deadline, 1e-3, c.sleep, poll, clock=c)
        assert deadline <= now < deadline + 5e-6  # not up to 230 us late
    assert poll_cost_s(poll) == pytest.approx(230e-6, rel=0.05)
    assert c.polls >= 9


def test_wait_polls_once_per_wait_even_after_a_slow_poll():
    """A margin as long as the period never sleeps; one slow poll (a stall) must not stop the polls,
    which are then the only way messages come in."""
    from robot_hrl.nodes.deadline import poll_cost_s

    class MovingClock(FakeClock):
        def __call__(self) -> float:
            self.t += 1e-6
            return self.t

    c = MovingClock(poll_cost_s=5e-3)  # one stalled poll: 5 ms
    poll = c.poll
    wait_until(0.002, 0.002, c.sleep, poll, clock=c)
    assert poll_cost_s(poll) >= 5e-3
    c.poll_cost_s = 20e-6
    for k in range(2, 6):
        before = c.polls
        wait_until(0.002 * k + 0.004, 0.002, c.sleep, poll, clock=c)
        assert c.polls > before  # never zero polls in a wait
    assert poll_cost_s(poll) < 5e-3  # ...and the cost is learned anew


def test_wait_without_margin_only_sleeps():
    c = FakeClock()
    assert wait_until(0.01, 0.0, c.sleep, c.poll, clock=c) >= 0.01
    assert c.polls == 0


def test_wait_resleeps_when_woken_early_and_caps_each_sleep():
    c = FakeClock()
    woken = iter([0.001, 0.002])  # two messages wake it early

    def sleep(s: float) -> None:
        c.sleeps.append(s)
        c.t += min(s, next(woken, s))

    assert wait_until(0.2, 0.0, sleep, clock=c, max_sleep_s=0.05) >= 0.2
    assert max(c.sleeps) <= 0.05 and len(c.sleeps) >= 5


def test_wait_returns_at_once_when_late_or_stopped():
    c = FakeClock(t=1.0)
    assert wait_until(0.5, 300e-6, c.sleep, c.poll, clock=c) == 1.0 and not c.sleeps and not c.polls
    c = FakeClock()
    assert wait_until(1.0, 0.0, c.sleep, clock=c, stop=lambda: True) == 0.0 and not c.sleeps


def test_wait_spins_without_a_poll_function():
    ticks = iter(range(1000))
    assert wait_until(5, 10, lambda s: None, clock=lambda: next(ticks)) >= 5


# ---- the schedule ---------------------------------------------------------------------------------
def test_schedule_keeps_absolute_deadlines_and_skips_missed_periods():
    s = FixedRateSchedule(0.01, start_s=100.0)
    assert s.next_s == pytest.approx(100.01)
    assert s.start_tick(100.0102) == (pytest.approx(0.0002), 0)
    assert s.next_s == pytest.approx(100.02)  # no drift from the late start
    late, skipped = s.start_tick(100.0455)  # 25.5 ms late: two whole periods missed
    assert skipped == 2 and late == pytest.approx(0.01)  # lateness capped at one period, as before
    assert s.next_s == pytest.approx(100.05)  # the phase is kept
    assert s.start_tick(100.05) == (0.0, 0)
    with pytest.raises(ValueError):
        FixedRateSchedule(0.0, 0.0)


# ---- parameters -----------------------------------------------------------------------------------
def test_loop_timing_from_params():
    t = LoopTiming.from_params(250, False, 1)
    assert t.spin_margin_s == pytest.approx(250e-6) and t.gc_after_tick is False and t.cpu == 1
    assert LoopTiming.from_params(0, True, -1).spin_margin_s == 0.0


@pytest.mark.parametrize("margin, gc_flag, cpu, words", [
    (-5, True, -1, "spin_margin_us"),
    (float("nan"), True, -1, "spin_margin_us"),
    (2e5, True, -1, "spin_margin_us"),
    ("300", True, -1, "spin_margin_us"),
    (True, True, -1, "spin_margin_us"),
    (300, "yes", -1, "gc_after_tick"),
    (300, True, -2, "cpu_affinity"),
    (300, True, 1.5, "cpu_affinity"),
])
def test_loop_timing_rejects_bad_params_with_a_clear_error(margin, gc_flag, cpu, words):
    with pytest.raises(ConfigError, match=words):
        LoopTiming.from_params(margin, gc_flag, cpu)


# ---- the garbage collector --------------------------------------------------------------------------
@pytest.fixture
def gc_state():
    enabled, threshold = gc.isenabled(), gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


def test_loop_gc_disables_collects_after_ticks_and_restores(gc_state):
    gc.enable()
    g = LoopGc(after_tick=True)
    g.start()
    assert not gc.isenabled() and gc.get_freeze_count() > 0
    gc.set_threshold(1, 10, 10)
    junk = [[] for _ in range(50)]  # allocations past the young generation's threshold
    assert g.after_tick() >= 0 and g.collections == 1
    del junk
    g.close()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    g.close()  # idempotent
    assert gc.isenabled()


def test_loop_gc_keeps_a_disabled_collector_disabled(gc_state):
    gc.disable()
    g = LoopGc(after_tick=True)
    g.start()
    g.close()
    assert not gc.isenabled()


def test_loop_gc_automatic_mode_leaves_the_collector_on(gc_state):
    gc.enable()
    g = LoopGc(after_tick=False)
    g.start()
    assert gc.isenabled() and g.after_tick() == -1
    g.close()
    assert gc.isenabled() and gc.get_freeze_count() == 0


# ---- the pre-encoded motor command ------------------------------------------------------------------
@pytest.mark.parametrize("wrench, stamp_s", [
    ((0.3, 0.01, -0.02, 0.03), 12.345),
    ((0.0, 0.0, 0.0, 0.0), 0.0),
    ((1e-300, -1e300, 5.0, -0.0), 1_700_000_000.123456789),
    ((0.27, 1e-4, 2e-4, -3e-4), -1.5),
])
def test_wrench_encoder_matches_the_generic_serializer(wrench, stamp_s):
    import numpy as np

    from robot_hrl.nodes.skill_node import WrenchEncoder, wrench_msg

    w = np.array(wrench, dtype=np.float64)
    assert WrenchEncoder().encode(w, stamp_s) == wrench_msg(w, stamp_s).serialize()


@pytest.mark.parametrize("frame", ["", "b", "base_link", "a_longer_frame_name"])
def test_wrench_encoder_pads_any_frame_id(frame):
    import numpy as np

    from robot_hrl.msgs import WrenchStamped, header
    from robot_hrl.nodes.skill_node import WrenchEncoder

    msg = WrenchStamped(header=header(3.25, frame))
    msg.wrench.force.z, msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z = 0.3, 0.1, 0.2, 0.4
    assert WrenchEncoder(frame).encode(np.array([0.3, 0.1, 0.2, 0.4]), 3.25) == msg.serialize()
    assert WrenchStamped.deserialize(WrenchEncoder(frame).encode([0.3, 0.1, 0.2, 0.4], 3.25)) == msg


@pytest.mark.parametrize("frame", ["base_link", "", "a_longer_frame_name"])
@pytest.mark.parametrize("command, stamp_s", [((0.2, -1.5), 12.5), ((0.0, 0.0), 0.0), ((-1e300, 5e-324), 1_700_000_000.123456789)])
def test_twist_encoder_matches_the_generic_serializer_and_rosbags(frame, command, stamp_s):
    """The differential drive's command: geometry_msgs/TwistStamped, linear.x and angular.z, the same bytes
    as our serializer and as rosbags' ROS 2 one."""
    from rosbags.typesys import Stores, get_typestore
    from test_msgs_cdr import to_rosbags

    from robot_hrl.nodes.skill_codecs import StampedCommandEncoder, command_message

    fields = ("twist.linear.x", "twist.angular.z")
    data = StampedCommandEncoder("geometry_msgs/msg/TwistStamped", fields, frame).encode(list(command), stamp_s)
    msg = command_message("geometry_msgs/msg/TwistStamped", fields, command, stamp_s, frame)
    assert (msg.twist.linear.x, msg.twist.angular.z, msg.twist.linear.y, msg.twist.angular.x) == (command[0], command[1], 0.0, 0.0)
    assert data == msg.serialize()
    store = get_typestore(Stores.ROS2_HUMBLE)
    assert data == bytes(store.serialize_cdr(to_rosbags(msg, store), "geometry_msgs/msg/TwistStamped"))


def test_a_message_that_is_not_header_and_float64s_has_no_fast_encoder():
    from robot_hrl.nodes.skill_codecs import StampedCommandEncoder, float64_body

    assert float64_body("geometry_msgs/msg/PoseStamped") is not None  # position and orientation: 7 float64
    assert float64_body("nav_msgs/msg/Odometry") is None  # child_frame_id, covariances
    with pytest.raises(ValueError, match="no float64 field"):
        StampedCommandEncoder("geometry_msgs/msg/TwistStamped", ("twist.linear.w",))


def test_wrench_encoder_rejects_a_non_finite_stamp():
    from robot_hrl.nodes.skill_node import WrenchEncoder

    with pytest.raises(ValueError):
        WrenchEncoder().encode([0.0, 0.0, 0.0, 0.0], float("nan"))


def test_command_publisher_sends_raw_bytes_through_the_publisher_interface():
    import numpy as np

    from robot_hrl.msgs import WrenchStamped, header
    from robot_hrl.nodes.skill_node import CommandChannel, CommandPublisher
    from robot_hrl.robots import get_robot

    channel = CommandChannel.of(get_robot("crazyflie_2x"), "collective_thrust_body_torque")

    class Raw:
        def __init__(self):
            self.sent = []

        def publish_raw(self, data):
            self.sent.append(data)

    w = np.array([0.3, 0.0, 0.0, 0.0])
    raw = Raw()
    CommandPublisher(raw, channel).publish(w, 1.0)
    expected = WrenchStamped(header=header(1.0, "base_link"))
    expected.wrench.force.z = 0.3
    assert WrenchStamped.deserialize(raw.sent[0]) == expected


# ---- the node's loop, on a stand-in transport ---------------------------------------------------------
class _Publisher:
    def __init__(self, on_publish=None):
        self.sent: list = []
        self._on_publish = on_publish

    def publish(self, msg) -> None:
        self.sent.append(msg)
        if self._on_publish is not None:
            self._on_publish()

    def publish_raw(self, data: bytes) -> None:
        from robot_hrl.msgs import WrenchStamped

        self.publish(WrenchStamped.deserialize(data))  # the node sends /cmd_wrench as CDR bytes


class _StandInNode:
    """What SkillNode uses of a node: parameters, publishers, subscriptions, a clock and spin_once
    (which sleeps at most 1 ms: the loop's own wait decides how long it sleeps in all)."""

    def __init__(self, params: dict, stop_after_commands: int = 20):
        import logging
        import threading

        self.params = dict(params)
        self.stop = threading.Event()
        self.commands = _Publisher(self._count)
        self.stop_after = stop_after_commands
        self.spins: list[float] = []
        self.subscriptions: dict = {}
        self.log = logging.getLogger("test_skill_node_timing")

    def _count(self) -> None:
        if len(self.commands.sent) >= self.stop_after:
            self.stop.set()

    def declare_parameter(self, name, default):
        return self.params.setdefault(name, default)

    def create_publisher(self, msg_type, topic, qos=None):
        return self.commands if topic == "/cmd_wrench" else _Publisher()

    def create_subscription(self, msg_type, topic, callback, qos=None, *, raw=False):
        self.subscriptions[topic] = (callback, raw)
        return object()

    def get_logger(self):
        return self.log

    def now(self) -> float:
        import time

        return time.time()

    def spin_once(self, timeout_s: float = 0.0) -> None:
        import time

        self.spins.append(timeout_s)
        if timeout_s > 0:
            time.sleep(min(timeout_s, 0.001))

    def spin(self, until=None) -> None:
        while until is None or not until():
            self.spin_once(0.01)


class _Contract:
    control_rate_hz = 500.0
    subgoal_radius_m = 1.5
    action_size = 4

    @property
    def action(self):
        from robot_hrl.robots import get_robot

        return get_robot("crazyflie_2x").action_spec()


class _Policy:
    contract = _Contract()

    def step(self, state, subgoal):
        import numpy as np

        return np.zeros(4)


class _Shield:
    estopped = False

    def diagnostics(self):
        return []


def _skill_node(params: dict, stop_after: int = 20):
    from robot_hrl.nodes.skill_node import SkillNode

    node = _StandInNode({"world": "models/worlds/demo.yaml", **params}, stop_after)
    return node, SkillNode(node, policy=_Policy(), shield=_Shield())


@pytest.mark.parametrize("params, words", [
    ({"spin_margin_us": -1.0}, "spin_margin_us"),
    ({"spin_margin_us": "fast"}, "spin_margin_us"),
    ({"gc_after_tick": "no"}, "gc_after_tick"),
    ({"cpu_affinity": -3}, "cpu_affinity"),
])
def test_skill_node_rejects_bad_loop_params(params, words):
    with pytest.raises(ConfigError, match=words):
        _skill_node(params)


@pytest.mark.parametrize("margin_us", [300.0, 0.0])
def test_skill_node_loop_ticks_publishes_and_restores_the_gc(gc_state, margin_us):
    from robot_hrl.msgs import WrenchStamped

    gc.enable()
    node, skill = _skill_node({"spin_margin_us": margin_us})
    assert skill.timing.spin_margin_s == pytest.approx(margin_us * 1e-6)
    skill.run(node.stop)  # ends after 20 commands
    assert skill.ticks == skill.deadline.ticks == len(node.commands.sent) == 20
    assert all(isinstance(m, WrenchStamped) for m in node.commands.sent)
    stamps = [m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in node.commands.sent]
    assert stamps == sorted(stamps)
    assert gc.isenabled() and gc.get_freeze_count() == 0  # the collector as it was found
    if margin_us == 0:
        assert 0.0 not in node.spins  # slept only, never polled (the polling itself: FakeClock tests above)
    skill.close()
    assert gc.isenabled()


def test_skill_node_params_file_matches_the_node_defaults_but_the_spin_margin(repo_root):
    import dataclasses

    from robot_hrl.nodes.args import load_params_file

    p = load_params_file(repo_root / "launch" / "params" / "navigation.yaml", "skill_node")
    shipped = LoopTiming.from_params(p["spin_margin_us"], p["gc_after_tick"], p["cpu_affinity"], p["realtime_dds_threads"])
    assert dataclasses.replace(shipped, spin_margin_s=LoopTiming.spin_margin_s) == LoopTiming()
    # the launch's margin is tuned for the contract's 100 Hz: a fifth of the period, leaving it mostly asleep
    assert LoopTiming.spin_margin_s < shipped.spin_margin_s <= 0.2 * 0.01


def test_cpu_affinity_out_of_range_warns_and_runs_unpinned(gc_state):
    node, skill = _skill_node({"cpu_affinity": 4096})
    assert skill.set_cpu_affinity() is False


# ---- the odometry fast path ------------------------------------------------------------------------
def _odometry_bytes(seed: int, frame: str = "odom", child: str = "base_link") -> bytes:
    import numpy as np

    from robot_hrl.msgs import odometry_from_state
    from robot_hrl.state import RobotState

    rng = np.random.default_rng(seed)
    q = rng.normal(size=4)
    state = RobotState(position_w=rng.normal(size=3) * 3, quat_wxyz=q / np.linalg.norm(q),
                       linear_velocity_w=rng.normal(size=3), angular_velocity_b=rng.normal(size=3),
                       stamp_s=float(rng.uniform(0, 2e6)))
    msg = odometry_from_state(state, frame_id=frame, child_frame_id=child)
    msg.pose.pose.orientation.w *= 1.0 + 0.1 * rng.random()  # not quite unit: the decoder normalizes
    msg.pose.covariance = list(rng.normal(size=36))
    msg.twist.covariance = list(rng.normal(size=36))
    return msg.serialize()


def _same_state(a, b) -> bool:
    import numpy as np

    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in
               ("position_w", "quat_wxyz", "linear_velocity_w", "angular_velocity_b")) and a.stamp_s == b.stamp_s


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("frame, child", [("odom", "base_link"), ("", ""), ("map", "cf1/base_link_long_name"), ("w", "b")])
def test_odometry_decoder_equals_the_generic_conversion(seed, frame, child):
    from robot_hrl.msgs import Odometry, state_from_odometry
    from robot_hrl.nodes.skill_node import OdometryDecoder

    data = _odometry_bytes(seed, frame, child)
    fast = OdometryDecoder.fast(data)
    assert fast is not None  # on the fast path
    assert _same_state(fast, state_from_odometry(Odometry.deserialize(data)))  # bit for bit


def test_odometry_decoder_sends_bad_samples_the_generic_way():
    import math

    from robot_hrl.errors import ObservationError
    from robot_hrl.msgs import Odometry
    from robot_hrl.nodes.skill_node import OdometryDecoder

    decode = OdometryDecoder()
    zero_quaternion = Odometry()
    zero_quaternion.pose.pose.orientation.w = 0.0
    nan_position = Odometry()
    nan_position.pose.pose.position.x = math.nan
    for msg in (zero_quaternion, nan_position):
        data = msg.serialize()
        assert OdometryDecoder.fast(data) is None
        with pytest.raises(ObservationError):  # the generic conversion's own error
            decode(data)
    good = _odometry_bytes(1)
    for bad in (good[:100], b"\x00\x00" + good[2:], b"", good[:4]):  # truncated, big-endian, empty
        assert OdometryDecoder.fast(bad) is None
        with pytest.raises(Exception):
            decode(bad)


def test_skill_node_takes_raw_odometry(gc_state):
    node, skill = _skill_node({})
    callback, raw = node.subscriptions["/odom"]
    assert raw is True
    callback(_odometry_bytes(3))
    assert skill.core.state is not None and skill.core.odom_errors == 0
    callback(b"\x00\x01\x00\x00garbage")
    assert skill.core.odom_errors == 1  # counted, reported on /diagnostics; the node goes on


def test_loop_thread_affinity_is_restored(gc_state):
    import os

    before = os.sched_getaffinity(0)
    node, skill = _skill_node({"cpu_affinity": min(before)})
    skill.run(node.stop)
    assert os.sched_getaffinity(0) == before


# ---- real-time priority: the loop and the DDS threads it depends on -------------------------------------
def test_threads_named_reads_the_task_folder(tmp_path):
    from robot_hrl.nodes.deadline import DDS_THREAD_PREFIXES, threads_named

    for tid, name in ((11, "python"), (12, "recv"), (13, "dq.user"), (14, "tev"), (15, "gc"), (16, "recvUC"),
                      (18, "dds.udp.7411"), (19, "dds.shm.7411"), (20, "dds.ev.0"), (21, "dds.asyn.0.0")):
        (tmp_path / str(tid)).mkdir()
        (tmp_path / str(tid) / "comm").write_text(name + "\n")
    (tmp_path / "17").mkdir()  # a thread that ended while listing: no comm
    # Cyclone DDS's and Fast DDS's (rclpy) receive, delivery and event threads
    assert threads_named(DDS_THREAD_PREFIXES, str(tmp_path)) == [(12, "recv"), (13, "dq.user"), (14, "tev"),
                                                                 (16, "recvUC"), (18, "dds.udp.7411"),
                                                                 (19, "dds.shm.7411"), (20, "dds.ev.0"),
                                                                 (21, "dds.asyn.0.0")]
    assert threads_named(DDS_THREAD_PREFIXES, str(tmp_path / "missing")) == []


def test_realtime_dds_threads_must_be_a_bool():
    with pytest.raises(ConfigError, match="realtime_dds_threads"):
        LoopTiming.from_params(300, True, -1, "yes")


def test_fifo_loop_and_dds_threads_are_restored(gc_state, monkeypatch):
    """Where SCHED_FIFO is allowed (root, CAP_SYS_NICE) the loop and the named threads get it and give
    it back; where not, a warning and the loop runs all the same."""
    import os
    import threading

    from robot_hrl.nodes import skill_loop

    ready, done = threading.Event(), threading.Event()

    def dds_like() -> None:
        ready.set()
        done.wait(10)

    helper = threading.Thread(target=dds_like, name="helper")
    helper.start()
    ready.wait(5)
    tid = helper.native_id
    monkeypatch.setattr(skill_loop, "threads_named", lambda prefixes: [(tid, "recv")])
    try:
        node, skill = _skill_node({"realtime_priority": 10})
        seen = []
        count = node.commands._on_publish
        node.commands._on_publish = lambda: (seen.append((os.sched_getscheduler(0), os.sched_getscheduler(tid))),
                                             count())
        skill.run(node.stop)
        assert skill.ticks == 20
        if skill.node.log and os.geteuid() == 0:  # allowed here: both were SCHED_FIFO while the loop ran
            assert seen[0] == (os.SCHED_FIFO, os.SCHED_FIFO)
        assert os.sched_getscheduler(0) == os.SCHED_OTHER and os.sched_getscheduler(tid) == os.SCHED_OTHER
    finally:
        done.set()
        helper.join(5)
