"""A rogue /cmd_wrench writer (a separate process at full thrust, stamped 0, with its wall clock, or with the current
/clock like the skill node, from a seeded random moment of the demo mission) on the real node graph: not applied in
lockstep (the stamp rule, and for ``clock`` the writer's identity: robot_hrl/nodes/command_writer.py), no violation
judged from the simulator's ground truth, the mission completes (sim/rogue_drill.py; docs/safety.md, "Rogue writer
drill"); benchmarks/README.md has its figures."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("pybullet")

from sim.rogue_drill import NOMINAL_MISSION_S, fly  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("rogue_drill")]


@pytest.mark.parametrize("stamp", ["zero", "wall", "clock"])
def test_a_rogue_writer_at_full_thrust_is_not_applied_and_the_mission_completes(tmp_path, stamp):
    rng = random.Random(16 + len(stamp))
    at = rng.uniform(1.0, NOMINAL_MISSION_S - 6.0)  # while the robot flies the mission
    f = fly(stamp, at, seed=rng.randrange(1 << 16), out=tmp_path / "flight")
    assert f.ok, (stamp, at, f.violations, f.collisions, f.reason)
    assert f.success and f.goals == "6/6", (f.reason, f.goals)
    assert "full-thrust commands sent" in f.rogue_log_tail, f.rogue_log_tail  # the writer really wrote
