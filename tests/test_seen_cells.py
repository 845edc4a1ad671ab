"""Where the rangers have looked (robot_hrl/sensing/seen_cells.py): a cone's fan is marked seen and nothing outside it,
the robot's own disk is seen, a cell one period of the torus away is not mistaken for a seen one, and bad sizes are
refused with the key named (hypothesis, derandomized)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_hrl.errors import ConfigError
from robot_hrl.sensing.seen_cells import SeenCells

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True)
HALF_RAD = math.radians(13.5)
"""The VL53L1x's half field of view (robot_hrl/robots/crazyflie_2x/rangers.py: 27 degrees)."""


@SETTINGS
@given(x=st.floats(-20.0, 20.0), y=st.floats(-20.0, 20.0), heading=st.floats(-math.pi, math.pi),
       reach=st.floats(0.1, 2.0), cell=st.sampled_from((0.03, 0.05, 0.1)))
def test_a_cone_marks_the_cells_of_its_fan_and_nothing_beyond_a_cell_of_it(x, y, heading, reach, cell):
    cells = SeenCells(cell)
    origin = np.array([x, y])
    cells.see_cone(origin, (math.cos(heading), math.sin(heading)), HALF_RAD, reach, 0.7 * cell / reach)
    rng = np.random.default_rng(0)
    diag = math.sqrt(2) * cell
    # every cell that lies wholly inside the fan is seen (a point a cell's diagonal inside its edges and reach)
    a = heading + rng.uniform(-HALF_RAD, HALF_RAD, 2000)
    r = rng.uniform(0.0, reach, 2000)
    off = np.abs(a - heading)
    deep = (reach - r > diag) & (r * np.sin(HALF_RAD - off) > diag)
    inside = origin + r[deep, None] * np.stack([np.cos(a[deep]), np.sin(a[deep])], axis=1)
    assert cells.seen(cells.cells_of(inside)).all()
    # a point more than a cell's diagonal outside the fan (beyond its reach or its edges) is not
    b = heading + rng.uniform(-math.pi, math.pi, 2000)
    s = rng.uniform(0.0, reach + 1.0, 2000)
    pts = origin + s[:, None] * np.stack([np.cos(b), np.sin(b)], axis=1)
    off = np.abs((b - heading + math.pi) % (2 * math.pi) - math.pi)
    lateral = np.where(off > HALF_RAD, s * np.sin(np.minimum(off - HALF_RAD, math.pi / 2)), 0.0)
    outside = (s > reach + diag) | (lateral > diag) | (off > math.pi / 2)
    outside &= s > diag  # the apex's cell holds points on every side
    assert not cells.seen(cells.cells_of(pts[outside])).any()


@SETTINGS
@given(x=st.floats(-5.0, 5.0), y=st.floats(-5.0, 5.0), radius=st.floats(0.02, 0.3))
def test_the_robots_disk_is_seen_and_unknown_near_lists_the_rest(x, y, radius):
    cells = SeenCells(0.05)
    cells.see_disk((x, y), radius)
    unknown = cells.unknown_near((x, y), radius + 0.3)
    d = np.hypot(unknown[:, 0] - x, unknown[:, 1] - y)
    assert np.all(d > radius) and np.all(d <= radius + 0.3 + 1e-9)
    # every cell centre in the ring that was not marked is listed: the count is the window's less the disk's
    k = int(math.ceil((radius + 0.3) / 0.05)) + 2
    i, j = np.meshgrid(np.arange(-k, k + 1), np.arange(-k, k + 1), indexing="ij")
    c = cells.cells_of((x, y))
    centres = (np.stack([i.ravel() + c[0], j.ravel() + c[1]], axis=1) + 0.5) * 0.05
    dc = np.hypot(centres[:, 0] - x, centres[:, 1] - y)
    assert len(unknown) == int(((dc > radius) & (dc <= radius + 0.3)).sum())


def test_a_cell_one_period_away_is_not_taken_for_a_seen_one():
    cells = SeenCells(0.05, slots=16)  # a 0.8 m period
    cells.see_disk((0.0, 0.0), 0.1)
    assert cells.seen(cells.cells_of([[0.01, 0.01]])).all()
    assert not cells.seen(cells.cells_of([[0.81, 0.01], [0.01, -0.79], [1.61, 1.61]])).any()
    cells.see_disk((0.8, 0.0), 0.1)  # the same slots, one period on: the first look is overwritten, not merged
    assert not cells.seen(cells.cells_of([[0.01, 0.01]])).any()
    with pytest.raises(ConfigError, match="raise slots"):
        cells.unknown_near((0.0, 0.0), 0.5)
    cells.reset()
    assert not cells.seen(cells.cells_of([[0.81, 0.01]])).any()


@pytest.mark.parametrize("cell, slots, match", [(0.0, 128, "cell_m"), (-0.05, 128, "cell_m"), (math.nan, 128, "cell_m"),
                                                (0.05, 2, "slots"), (0.05, 12.5, "slots")])
def test_bad_sizes_are_refused_with_the_key_named(cell, slots, match):
    with pytest.raises(ConfigError, match=match):
        SeenCells(cell, slots)
