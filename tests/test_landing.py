"""A land step never ends on top of or against an obstacle (issue #16: `takeoff 1.0; goto red_box; land`
landed on the box). Every landmark of the demo world followed by `land`, flown by the planner's and the
skill's cores on the PyBullet robot (sim/fault_drill.py's rig, no fault), judged from PyBullet's contacts;
and Shield.landing_spot moves a spot under any stop zone clear of it, inside the fence."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pybullet")

from robot_hrl.robots import CRAZYFLIE_2X  # noqa: E402
from robot_hrl.safety import Shield  # noqa: E402
from sim.fault_drill import MissionRig  # noqa: E402

pytestmark = pytest.mark.xdist_group("fault_drill")


@pytest.fixture(scope="module")
def rig():
    return MissionRig()


def test_every_landmark_followed_by_land_lands_on_the_floor_clear_of_it(rig):
    for lm in rig.world.landmarks:
        f = rig.fly(f"takeoff 1.0; goto {lm.id}; land", max_time_s=60.0)
        assert f.ok, (lm.id, f.violations, f.final_position_w)
        assert f.planner_state == "done" and f.skill_states[-1] == "landed", (lm.id, f.planner_state, f.skill_states[-3:])
        assert f.final_position_w[2] < 0.05  # on the floor, not on the box


@settings(max_examples=200, deadline=None)
@given(x=st.floats(-0.5, 4.5), y=st.floats(-0.5, 4.5), blind=st.booleans())
def test_a_landing_spot_is_never_under_a_stop_zone_and_always_inside_the_fence(x, y, blind):
    s = _shield()
    extra = s.BLIND_CLEARANCE_M if blind else 0.0
    sx, sy = s.landing_spot([x, y], extra)
    g = s.geofence
    d = s.config.backup.hold_inset_m
    if [sx, sy] != [x, y]:  # moved: to a spot inside the fence
        assert g.x_lo + d - 1e-9 <= sx <= g.x_hi - d + 1e-9 and g.y_lo + d - 1e-9 <= sy <= g.y_hi - d + 1e-9
    for b in s.obstacles.stop_boxes:
        assert not (b[0] - d < sx < b[3] + d and b[1] - d < sy < b[4] + d), ((x, y), (sx, sy), b)
    # never further than needed: no clear spot on a ring closer in
    assert np.hypot(sx - x, sy - y) <= 6.0


_CACHE: list = []


def _shield() -> Shield:
    if not _CACHE:
        from sim.fault_drill import DEMO_WORLD
        from robot_hrl.world import load_world

        _CACHE.append(Shield.from_yaml(None, CRAZYFLIE_2X, load_world(DEMO_WORLD), 1.0))
    return _CACHE[0]


def test_a_spot_clear_of_every_zone_is_kept():
    s = _shield()
    assert s.landing_spot([2.0, 2.2]) == [2.0, 2.2]
    # between pillar_a and the wall: a spot clear of both (the clearance for dead reckoning where there is room)
    sx, sy = s.landing_spot([1.88, 1.27], s.BLIND_CLEARANCE_M)
    for b in s.obstacles.stop_boxes:
        assert not (b[0] - 0.1 < sx < b[3] + 0.1 and b[1] - 0.1 < sy < b[4] + 0.1)
    assert np.allclose(s.landing_spot([3.8, 0.6]), s.landing_spot([3.8, 0.6]))  # deterministic
