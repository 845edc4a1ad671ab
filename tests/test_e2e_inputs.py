"""End to end, bad inputs: a rogue publisher on /subgoal (NaN, outside the fence); a malformed task.
Real processes, real DDS (loopback, a domain of their own), sim time."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from robot_hrl.nodes.common import pose_stamped
from test_e2e_support import HOVER_TASK, GraphRun

pytestmark = pytest.mark.slow

ROGUE = [(math.nan, 1.0, 1.0), (50.0, 0.5, 1.0), (0.5, -30.0, 1.0), (1.0, 1.0, 40.0), (math.inf, -math.inf, math.nan),
         (1.5, 1.5, 1.0)]  # the last one inside pillar_a


def _position(run: GraphRun) -> np.ndarray:
    return np.asarray(run.last_skill()["position"], dtype=np.float64)


def test_rogue_subgoals_are_shielded_and_reported_and_a_malformed_task_changes_nothing(tmp_path):
    with GraphRun(tmp_path) as run:
        run.send_task(HOVER_TASK)
        run.wait_for("the robot hovering at 1 m", run.hovering)
        hover = _position(run)

        # ---- a rogue publisher floods /subgoal with non-finite and out-of-bounds subgoals
        sent = 0
        for _ in range(8):
            for p in ROGUE:
                run.subgoal_pub.publish(pose_stamped(p, 0.0))
                sent += 1
            run.spin_sim_seconds(0.2)
        run.spin_sim_seconds(1.0)
        values = run.seen.diags("skill_node: shield/subgoal")
        assert values, "no diagnostics from the subgoal shield unit"
        counts = values[-1][4]
        for constraint in ("non_finite", "fence", "altitude", "obstacle"):
            assert int(counts.get(f"count.{constraint}", "0")) > 0, (constraint, counts)
        summary = run.seen.diags("skill_node: interventions")[-1][4]
        assert int(summary["interventions.subgoal"]) > 0 and int(summary["subgoals_received"]) >= sent
        assert int(summary["subgoals_shielded"]) >= sent
        # The flight stayed safe: inside the fence, out of the boxes, no collision (ground truth).
        assert run.launcher.monitor.violations == []
        assert int(float(run.sim_truth().get("collisions", "0"))) == 0
        # The planner's heartbeat brings the robot back to its hover point.
        run.wait_for("the robot back at its hover point", run.hovering)

        # ---- a malformed task: a clear error on /diagnostics, the robot keeps hovering where it was
        for bad in ("fly to the moon and back", '{"steps": [{"action": "goto"}]}', "goto 1 2 3 4 5"):
            before = len(run.seen.diags("planner_node: task"))
            run.send_task(bad)
            run.wait_for(f"the planner's error for {bad!r}",
                         lambda: len(run.seen.diags("planner_node: task")) > before)
            t, name, level, message, values = run.seen.diags("planner_node: task")[-1]
            assert level == 2 and message.startswith("task rejected:"), message
            assert values["action"] == "kept the current subgoal"
            assert values["task"] == bad
        run.wait_for("the planner reporting the error", lambda: run.seen.planner[-1].get("state") == "error")
        assert run.seen.planner[-1]["error"]
        run.spin_sim_seconds(3.0)
        assert run.last_skill()["state"] in ("reached", "tracking")
        assert np.linalg.norm(_position(run) - hover) < 0.3
        assert run.launcher.monitor.violations == []

        # ---- garbage on /odom and /cmd_wrench: refused, counted, reported; the flight goes on
        from robot_hrl.msgs import Odometry, WrenchStamped
        from robot_hrl.transport.interface import COMMAND_QOS, SENSOR_QOS

        bad_odom = run.node.create_publisher(Odometry, "/odom", SENSOR_QOS)
        bad_cmd = run.node.create_publisher(WrenchStamped, "/cmd_wrench", COMMAND_QOS)
        for _ in range(5):
            odom = Odometry()
            odom.pose.pose.orientation.w = 0.0  # a zero quaternion
            bad_odom.publish(odom)
            odom = Odometry()
            odom.pose.pose.position.x = math.nan
            bad_odom.publish(odom)
            cmd = WrenchStamped()
            cmd.wrench.force.z = math.inf
            bad_cmd.publish(cmd)
            run.spin_sim_seconds(0.1)
        run.spin_sim_seconds(1.0)
        assert int(run.seen.diags("skill_node: interventions")[-1][4]["odometry_errors"]) >= 5
        assert int(float(run.sim_truth()["non_finite_commands"])) >= 5
        run.wait_for("the robot at its subgoal", run.skill_state_is("reached"))
        assert run.launcher.monitor.violations == []

        # ---- the emergency stop, from its command line tool: latched, motors off, reported
        estop = [sys.executable, "-m", "robot_hrl.nodes.estop", "--domain-id", str(run.domain_id), "--wait", "20"]
        done = subprocess.run(estop, env=os.environ.copy(), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "LATCHED" in done.stdout, done.stdout + done.stderr
        run.wait_for("the skill node in estop", run.skill_state_is("estop"))
        assert run.last_skill()["mode"] == "motors_off"
        run.wait_for("the estop on /diagnostics", lambda: any(
            d[2] == 2 and "latched" in d[3] for d in run.seen.diags("shield/estop")))
        done = subprocess.run(estop + ["--release"], env=os.environ.copy(), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "released" in done.stdout, done.stdout + done.stderr
