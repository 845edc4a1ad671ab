"""No node dies from its inputs: the planner node and the skill node, as processes over real Cyclone DDS,
fed extreme values and random raw CDR bytes on every topic they subscribe to (hypothesis picks the
topic, the value and the order). They stay alive, say on /diagnostics what they dropped, and the
planner still plans and keeps its heartbeat."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostile_wire import HOVER_TASK, START_POSITION, WireRig, battery, odometry, pose, quiet_domain_id, wire_inputs
from robot_hrl.msgs import String
from test_e2e_support import E2E_DOMAIN_BLOCK

pytestmark = pytest.mark.slow


def test_the_nodes_survive_hostile_inputs_on_every_topic_and_say_what_they_dropped(tmp_path):
    with WireRig(quiet_domain_id(E2E_DOMAIN_BLOCK), tmp_path / "logs") as rig:
        rig.ready()

        @settings(max_examples=40, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(batch=st.lists(wire_inputs(), min_size=1, max_size=6))
        def feed(batch):
            for topic, msg, mutations in batch:
                rig.send(topic, msg, mutations)
            rig.spin(0.03)
            assert not rig.dead(), f"node(s) died: {rig.dead()}\n" + "\n".join(rig.log(n)[-3000:] for n in rig.dead())

        feed()

        # What every run must contain, whatever hypothesis drew: one input of each kind.
        rig.send("/odom", odometry((math.nan, 1.0, 1.0)))  # planner: refused; skill: an odometry error
        rig.send("/skill/status", String(data='{"state": "reached", "requested": ["a", "b", "c"]}'))
        bad_utf8 = pose((1.0, 1.0, 1.0), frame="ab")  # then its frame_id made non-UTF-8: the transport drops it
        rig.pubs["/subgoal"].publish_raw(bad_utf8.serialize().replace(b"ab\x00", b"\xc3\x28\x00"))
        status = String(data="ab")
        rig.pubs["/skill/status"].publish_raw(status.serialize().replace(b"ab\x00", b"\xff\xfe\x00"))
        rig.send("/odom", odometry(START_POSITION))

        def planner_inputs():
            d = rig.diag("planner_node: inputs")
            return d[2] if d else {}

        rig.wait_for("the planner's report of what it dropped", lambda: all(
            int(planner_inputs().get(k, "0")) > 0 for k in ("/odom.rejected", "/skill/status.rejected",
                                                            "/skill/status.undecodable")))
        level, message, values = rig.diag("planner_node: inputs")
        assert level == 1 and "dropped" in message, message
        assert values["/skill/status.last_reason"], values

        def skill_inputs():
            d = rig.diag("skill_node: inputs")
            return d[2] if d else {}

        # a battery reading the shield must not believe: refused by name, the shield brakes on the worst case
        for volts in (math.nan, -3.7, 1e308):
            rig.send("/battery", battery(volts))

        def battery_refused() -> int:
            d = rig.diag("skill_node: battery")
            return int(d[2].get("battery_refused.implausible_voltage", "0")) if d else 0

        rig.wait_for("the skill node's report of the implausible battery readings", lambda: battery_refused() >= 3)
        level, message, values = rig.diag("skill_node: battery")
        assert level == 1 and "worst-case battery" in message, (message, values)
        rig.wait_for("the skill node's report of an undecodable subgoal",
                     lambda: int(skill_inputs().get("/subgoal.undecodable", "0")) > 0)
        rig.wait_for("the skill node's odometry errors", lambda: int(
            (rig.diag("skill_node: interventions") or (0, "", {}))[2].get("odometry_errors", "0")) > 0)

        # An odometry of 1e308 m/s: finite, but its speed overflows; the skill node used to die building its
        # status. Now the shield's odometry unit refuses it by name (its speed is not finite), or, where the
        # sample got through (no earlier sample to judge it against), the status says which numbers it could not send.
        def overflow_reported() -> bool:
            rig.send("/odom", odometry(START_POSITION, twist=(1e308, 1e308, 0.0, 0.0, 0.0, 0.0)))
            rig.spin(0.05)
            refused = rig.diag("skill_node: shield/odometry")
            if refused and "1e+308" in refused[2].get("last.rejection", "") or refused and any(
                    int(refused[2].get(f"count.{c}", "0")) > 0 for c in ("malformed", "velocity_jump")):
                return True
            return any("speed" in s.get("non_finite", []) for s in list(rig.seen.skill))

        rig.wait_for("the 1e308 m/s odometry refused by name, or a skill status naming the numbers it could not send",
                     overflow_reported)

        # Still a working planner: a new task is planned, and the heartbeat flows.
        version = rig.last("planner").get("plan_version", 0)
        rig.send("/odom", odometry(START_POSITION))
        rig.send("/task", String(data=HOVER_TASK.replace("1.0", "1.2")))
        rig.wait_for("the new plan", lambda: rig.last("planner").get("plan_version", 0) > version
                     and rig.last("planner").get("state") == "executing")
        with rig.seen.lock:  # planned off the executor: the status said so meanwhile
            assert any(s.get("state") == "planning" and s.get("planning") == "task" for s in rig.seen.planner)
        beats = rig.seen.subgoals
        rig.wait_for("the subgoal heartbeat", lambda: rig.seen.subgoals >= beats + 3)
        assert not rig.dead()
        codes = rig.stop()
        assert all(code in (0, -15) for code in codes.values()), codes
        for name in ("planner_node", "skill_node"):
            log = rig.log(name)
            assert "Traceback" not in log, f"{name} logged a traceback:\n{log[-4000:]}"
