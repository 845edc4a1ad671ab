"""The planner node validates /odom with the skill's validator (one home: robot_hrl/safety/units/odometry.py,
built from the robot's shield YAML by OdometryUnit.for_robot): a future stamp, a wrong frame, a frozen pose
replayed with fresh stamps and a teleport are dropped, the last good position is kept, and the node says what it
dropped on /planner/status (odom_refused, odom_last_refusal) and on /diagnostics (planner_node: inputs). Real
processes over real Cyclone DDS (tests/hostile_wire.py)."""

from __future__ import annotations

import time

import pytest

from hostile_wire import START_POSITION, WireRig, odometry, quiet_domain_id
from test_e2e_support import E2E_DOMAIN_BLOCK

pytestmark = pytest.mark.slow


def test_bad_odometry_into_the_planner_node_is_refused_by_name_and_reported(tmp_path):
    with WireRig(quiet_domain_id(E2E_DOMAIN_BLOCK), tmp_path / "logs") as rig:  # planner vlm, no endpoint: the symbolic fallback
        rig.ready()

        def status():
            return rig.last("planner")

        def refused_with(constraint: str, count: int):
            def ok():
                s = status()
                return s.get("odom_refused", 0) >= count and str(s.get("odom_last_refusal", "")).startswith(constraint)
            return ok

        assert status().get("odom_refused") == 0, status()
        cases = [
            ("future_stamp", odometry(START_POSITION, stamp_s=time.time() + 1000.0)),
            ("frame_id", odometry(START_POSITION, frame="map", stamp_s=1.0)),
            ("child_frame_id", odometry(START_POSITION, child="imu_link", stamp_s=1.0)),
        ]
        for n, (constraint, msg) in enumerate(cases, start=1):
            rig.send("/odom", msg)
            rig.wait_for(f"the planner naming {constraint}", refused_with(constraint, n))
        # in the air, then the same pose again a second later: a frozen (replayed) pose; it latches
        rig.send("/odom", odometry((1.0, 0.6, 1.0), stamp_s=2.0))
        rig.send("/odom", odometry((1.0, 0.6, 1.0), stamp_s=3.0))
        rig.wait_for("the planner naming frozen_state", refused_with("frozen_state", 4))
        rig.send("/odom", odometry((4.0, 4.0, 1.0), stamp_s=4.0))  # and a teleport: refused while latched
        rig.wait_for("the planner refusing the teleport", refused_with("frozen_state", 5))

        def inputs():
            d = rig.diag("planner_node: inputs")
            return d[2] if d else {}

        rig.wait_for("the planner's /diagnostics report", lambda: int(inputs().get("/odom.rejected", "0")) >= 5)
        assert "odometry refused (frozen_state" in inputs()["/odom.last_reason"], inputs()
        assert not rig.dead(), rig.dead()
