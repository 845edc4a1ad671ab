"""Where the rangers have looked: horizontal cells of the world that some cone has seen empty (numpy; the runtime side).

A single-zone time-of-flight ranger reports the nearest target in its cone, so a reading ``r`` says the cone is empty
nearer than ``r`` (less a margin: the shield's ``clear_margin_m``). The hits' memory
(:class:`robot_hrl.sensing.memory.RangeMemory`) keeps what the cones hit; this keeps what they saw through, as an
occupancy grid keeps its free cells (ROS's ``costmap_2d`` clears the cells along a ray up to its hit: the obstacle
layer's ``raytraceFreespace``), and nothing else: a cell no cone has covered is *unknown*, which the shield's
``unknown`` rule treats as a place an obstacle may stand (Multi-ranger cones are 27 degrees wide with 63-degree
gaps between them; a corner met inside a gap is seen at arm's length).

**Storage: a torus of cells.** Cell ``(i, j) = floor((x, y) / cell_m)``, kept in slot ``(i mod n, j mod n)``
with its own ``(i, j)`` so that a slot reused by a cell one period away is not mistaken for it. Memory is
``n * n`` pairs of int32 whatever the room (``n`` 128 at 0.05 m: a 6.4 m period, more than twice the farthest
look; cells seen a period ago are overwritten, so they become unknown again: a look is forgotten only by being
overwritten by one a period away).

**What is seen.** :meth:`SeenCells.see_cone` marks the cells of a horizontal fan: the directions across the
cone's full width at ``angle_step_rad`` (the hits' arc spacing) and along each, from the sensor to ``reach_m``
at half a cell. :meth:`SeenCells.see_disk` marks a disk (where the robot itself is, nothing else can be).
Cells are marked, never cleared: a hit does not unmark a cell (the hits' memory has the hit).
"""

from __future__ import annotations

import math

import numpy as np

from robot_hrl.errors import ConfigError

EMPTY = np.iinfo(np.int32).min
"""A slot no cell has been written to (no cell index reaches it: rooms are far smaller than 2**31 cells)."""


class SeenCells:
    """The horizontal cells some cone has seen empty, on a torus of ``slots`` x ``slots`` (world frame)."""

    def __init__(self, cell_m: float, slots: int = 128):
        if not (math.isfinite(cell_m) and cell_m > 0.0):
            raise ConfigError(f"seen cells: cell_m must be a positive length, got {cell_m!r}")
        if not isinstance(slots, int) or slots < 4:
            raise ConfigError(f"seen cells: slots must be an integer >= 4, got {slots!r}")
        self.cell_m = float(cell_m)
        """Cell side, m."""
        self.slots = slots
        """Cells along each side of the torus (its period is ``slots * cell_m``)."""
        self.ij = np.full((slots, slots, 2), EMPTY, dtype=np.int32)
        """The cell each slot holds, ``(i, j)``, or :data:`EMPTY`."""
        self._k = -1
        self._off = self._off_r = None

    @property
    def period_m(self) -> float:
        return self.slots * self.cell_m

    def reset(self) -> None:
        self.ij[:] = EMPTY

    def cells_of(self, xy_w: np.ndarray) -> np.ndarray:
        """The cells ``(i, j)`` (int64, (..., 2)) of world points (..., 2), m."""
        return np.floor(np.asarray(xy_w, dtype=np.float64) / self.cell_m).astype(np.int64)

    def mark(self, xy_w: np.ndarray) -> None:
        """Mark the cells of these world points (K, 2) seen."""
        self._write(self.cells_of(xy_w).reshape(-1, 2))

    def _write(self, cells: np.ndarray) -> None:
        if len(cells):
            s = cells % self.slots
            self.ij[s[:, 0], s[:, 1]] = cells.astype(np.int32)

    def seen(self, cells: np.ndarray) -> np.ndarray:
        """Whether each cell ``(i, j)`` (..., 2) has been seen (bool, (...))."""
        c = np.asarray(cells, dtype=np.int64)
        s = c % self.slots
        held = self.ij[s[..., 0], s[..., 1]]
        return (held[..., 0] == c[..., 0]) & (held[..., 1] == c[..., 1])

    def see_cone(self, origin_xy_w, axis_xy_w, half_angle_rad: float, reach_m: float, angle_step_rad: float) -> None:
        """Mark a horizontal fan seen: from ``origin_xy_w`` along ``axis_xy_w`` (a horizontal direction, any length),
        ``half_angle_rad`` either side, out to ``reach_m``; directions ``angle_step_rad`` apart (the edges
        included), points half a cell apart along each."""
        if not reach_m > 0.0:
            return
        ax = math.atan2(float(axis_xy_w[1]), float(axis_xy_w[0]))
        n = max(int(math.ceil(2.0 * half_angle_rad / angle_step_rad)), 1)
        angles = ax + np.linspace(-half_angle_rad, half_angle_rad, n + 1)
        radii = np.arange(0.0, reach_m, 0.5 * self.cell_m)
        dirs = np.stack([np.cos(angles), np.sin(angles)], axis=1)
        self.mark(np.asarray(origin_xy_w, dtype=np.float64)[:2] + radii[:, None, None] * dirs[None])

    def _window(self, centre_xy_w, radius_m: float) -> tuple[np.ndarray, np.ndarray]:
        """The cells (K, 2) whose centre lies within ``radius_m`` of ``centre_xy_w``, and those centres (K, 2), m."""
        c = self.cells_of(centre_xy_w)
        k = int(math.ceil(radius_m / self.cell_m)) + 1
        if k > self._k:  # the offsets of a square window, nearest first, kept for the widest asked so far
            di = np.arange(-k, k + 1)
            off = np.stack(np.meshgrid(di, di, indexing="ij"), axis=-1).reshape(-1, 2)
            r = np.sqrt((off * off).sum(-1))
            order = np.argsort(r, kind="stable")
            self._off, self._off_r, self._k = off[order], r[order], k
        n = int(np.searchsorted(self._off_r, radius_m / self.cell_m + 1.5, side="right"))
        cells = c + self._off[:n]
        centres = (cells + 0.5) * self.cell_m
        d = centres - np.asarray(centre_xy_w, dtype=np.float64)[:2]
        near = (d * d).sum(-1) <= radius_m * radius_m
        return cells[near], centres[near]

    def see_disk(self, centre_xy_w, radius_m: float) -> None:
        """Mark the cells whose centre lies within ``radius_m`` of ``centre_xy_w`` seen."""
        self._write(self._window(centre_xy_w, radius_m)[0])

    def unknown_near(self, centre_xy_w, radius_m: float) -> np.ndarray:
        """Centres (K, 2) of the cells within ``radius_m`` of ``centre_xy_w`` (their centres) that no cone has seen."""
        if 2.0 * radius_m >= self.period_m:
            raise ConfigError(f"seen cells: a look {radius_m} m around the robot needs a torus wider than "
                              f"{2.0 * radius_m} m (slots * cell_m is {self.period_m} m); raise slots")
        cells, centres = self._window(centre_xy_w, radius_m)
        return centres[~self.seen(cells)]
