"""End to end, faults: the planner dies mid-flight; the odometry stops. The skill node must hold,
then land, and say so. Real processes, real DDS (loopback, a domain of their own), sim time."""

from __future__ import annotations

import pytest

from robot_hrl.msgs import String
from robot_hrl.transport.interface import COMMAND_QOS
from test_e2e_support import HOVER_TASK, GraphRun

pytestmark = pytest.mark.slow


def _landed_on_floor(run: GraphRun) -> bool:
    truth = run.sim_truth()
    if "true_position" not in truth:
        return False
    z = float(truth["true_position"].strip("[]").split(",")[2])
    return z < 0.1


def test_planner_killed_mid_flight_skill_holds_then_lands_and_reports(tmp_path):
    with GraphRun(tmp_path) as run:
        run.send_task(HOVER_TASK)
        run.wait_for("the robot hovering at 1 m", run.hovering)
        run.kill("planner_node")
        run.wait_for("the skill node holding", run.skill_state_is("holding", "landing", "landed"))
        run.wait_for("the skill node landed", run.skill_state_is("landed"))
        states = run.seen.skill_states()
        i = states.index("reached")
        assert "holding" in states[i:] and "landing" in states[i:], states
        assert states.index("holding", i) < states.index("landing", i) < states.index("landed", i)
        reasons = {s.get("reason") for s in run.seen.skill if s.get("state") in ("holding", "landing")}
        assert "watchdog.stale_subgoal" in reasons, reasons
        # Reported on /diagnostics by the shield's watchdog unit, with its constraint.
        run.spin_sim_seconds(1.0)
        watchdog = [d for d in run.seen.diags("watchdog") if d[4].get("count.stale_subgoal", "0") != "0"]
        assert watchdog, "the watchdog did not report the stale subgoal on /diagnostics"
        run.wait_for("ground truth on the floor", lambda: _landed_on_floor(run))
        assert run.launcher.monitor.violations == []


def test_odometry_stops_skill_holds_then_lands_and_reports(tmp_path):
    # The sim's fault injection stops /odom once the robot hovers; physics and /clock go on.
    with GraphRun(tmp_path) as run:
        run.send_task(HOVER_TASK)
        run.wait_for("the robot hovering at 1 m", run.hovering)
        fault = run.node.create_publisher(String, "/sim/inject_fault", COMMAND_QOS)
        run.wait_for("the sim listening for faults", lambda: fault.get_subscription_count() > 0)
        fault.publish(String(data="odom_stop"))
        run.wait_for("the skill node landed", run.skill_state_is("landed"))
        states = run.seen.skill_states()
        i = states.index("reached")
        assert "holding" in states[i:] and "landing" in states[i:], states
        reasons = {s.get("reason") for s in run.seen.skill if s.get("state") in ("holding", "landing", "landed")}
        assert "watchdog.stale_state" in reasons, reasons
        stale = [d for d in run.seen.diags("watchdog") if d[4].get("count.stale_state", "0") != "0"]
        assert stale, "the watchdog did not report the stale odometry on /diagnostics"
        sim = run.sim_truth()
        assert sim.get("odom") == "stopped (fault injection)"
        run.wait_for("ground truth on the floor", lambda: _landed_on_floor(run))
        assert int(float(run.sim_truth().get("collisions", "0"))) == 0


def test_a_rogue_cmd_wrench_writer_is_reported_and_not_applied_in_lockstep(tmp_path):
    """Issue #16: a second writer on /cmd_wrench at full thrust took the robot through the ceiling, and each
    of its samples stepped the physics. The sim node applies only the command stamped for the current period;
    both nodes name the second writer on /diagnostics (graph introspection)."""
    import time

    from robot_hrl.msgs import WrenchStamped
    from robot_hrl.nodes.skill_codecs import wrench_msg
    from robot_hrl.transport.interface import COMMAND_QOS as QOS

    with GraphRun(tmp_path) as run:
        run.send_task(HOVER_TASK)
        run.wait_for("the robot hovering at 1 m", run.hovering)
        rogue = run.node.create_publisher(WrenchStamped, "/cmd_wrench", QOS)
        run.wait_for("the rogue writer matched", lambda: rogue.get_subscription_count() > 0)
        full = wrench_msg([0.595, 0.0, 0.0, 0.0], 0.0)
        start = run.launcher.monitor.sim_time_s
        end = time.monotonic() + 6.0
        while time.monotonic() < end and run.launcher.monitor.sim_time_s < start + 3.0:
            rogue.publish(full)  # full thrust, as fast as it can, stamped 0
            time.sleep(0.002)
        run.spin_sim_seconds(1.0)
        z = float(run.sim_truth()["true_position"].strip("[]").split(",")[2])
        assert 0.7 < z < 1.3, f"the rogue commands moved the robot to z={z}"
        assert int(float(run.sim_truth().get("foreign_commands", "0"))) > 100
        for node in ("sim_node: graph", "skill_node: graph"):
            alerts = [d for d in run.seen.diags(node) if d[2] == 2 and "another" in d[3]]
            assert alerts, f"{node} did not report the second /cmd_wrench writer"
        assert run.launcher.monitor.violations == []
