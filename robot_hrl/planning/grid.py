"""The flight grid: a 2.5-D occupancy grid derived from a world (and its map), inflated.

For an altitude band ``[z_lo, z_hi]`` a cell is blocked when, seen from above, its centre
lies within ``inflation_m`` (robot radius + margin) of

- a box of the world whose height range, grown by ``inflation_m``, meets the band;
- an occupied cell of the world's map (maps are 2-D: their obstacles are full height);
- the fence (the world's bounds);
- an obstacle added at run time (:meth:`FlightGrid.add_box`).

Box footprints are computed exactly (distance from cell centre to rectangle), so the disc
inflation is exact for boxes. Grids are cached per band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from robot_hrl.planning.maps import OccupancyMap, check_map_matches_world
from robot_hrl.world import Box, World


@dataclass(frozen=True)
class _Footprint:
    box: Box
    rows: slice
    cols: slice
    mask: np.ndarray
    label: str


class FlightGrid:
    """Cells of ``resolution`` m over the world's bounds; ``blocked(band)[iy, ix]``, iy = 0 at min y."""

    def __init__(self, world: World, resolution: float = 0.05, inflation_m: float = 0.165,
                 occupancy_map: OccupancyMap | None = None, map_boxes: tuple[Box, ...] = ()):
        """``map_boxes``: the map's occupied cells merged into boxes; when given, they are inflated
        exactly like the world's boxes instead of rasterizing the map."""
        if not (math.isfinite(resolution) and resolution > 0):
            raise ValueError(f"grid resolution must be positive, got {resolution}")
        if not (math.isfinite(inflation_m) and inflation_m >= 0):
            raise ValueError(f"inflation must be >= 0 m, got {inflation_m}")
        self.world = world
        self.resolution = float(resolution)
        self.inflation_m = float(inflation_m)
        (x0, y0, _), (x1, y1, _) = world.bounds.min, world.bounds.max
        self.origin = np.array([x0, y0])
        self.nx = int(math.ceil((x1 - x0) / resolution - 1e-9))
        self.ny = int(math.ceil((y1 - y0) / resolution - 1e-9))
        self._xc = x0 + (np.arange(self.nx) + 0.5) * resolution
        self._yc = y0 + (np.arange(self.ny) + 0.5) * resolution
        # The fence: cells whose centre is within the inflation of the bounds.
        fx = (self._xc < x0 + inflation_m) | (self._xc > x1 - inflation_m)
        fy = (self._yc < y0 + inflation_m) | (self._yc > y1 - inflation_m)
        self._static = fy[:, None] | fx[None, :]
        self._fence = self._static.copy()
        self.occupancy_map = occupancy_map
        self._map_mask = np.zeros_like(self._static)
        if occupancy_map is not None:
            check_map_matches_world(occupancy_map, world)
            if not map_boxes:
                self._map_mask = self._inflate_map(occupancy_map)
                self._static |= self._map_mask
        self._footprints = [self._footprint(b, getattr(b, "name", None) or getattr(b, "id"))
                            for b in world.solid_boxes()]
        self._footprints += [self._footprint(b, "an occupied map cell") for b in map_boxes]
        self._extra: list[_Footprint] = []
        self._cache: dict[tuple[float, float], np.ndarray] = {}

    # -- geometry --------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return self.ny, self.nx

    def to_cell(self, xy) -> np.ndarray:
        """Continuous cell coordinates of world points (N, 2): cell (ix, iy) covers [ix, ix+1)."""
        return (np.atleast_2d(np.asarray(xy, dtype=np.float64))[:, :2] - self.origin) / self.resolution

    def to_world(self, cell_xy) -> np.ndarray:
        return np.atleast_2d(np.asarray(cell_xy, dtype=np.float64)) * self.resolution + self.origin

    def cell_index(self, xy) -> tuple[int, int]:
        c = np.floor(self.to_cell(xy)[0]).astype(int)
        return int(np.clip(c[0], 0, self.nx - 1)), int(np.clip(c[1], 0, self.ny - 1))

    # -- obstacles -------------------------------------------------------------------------
    def _footprint(self, box: Box, label: str) -> _Footprint:
        r, res = self.inflation_m, self.resolution
        lo, hi = box.lower[:2] - r, box.upper[:2] + r
        c0 = max(int(math.floor((lo[0] - self.origin[0]) / res)), 0)
        c1 = min(int(math.ceil((hi[0] - self.origin[0]) / res)) + 1, self.nx)
        r0 = max(int(math.floor((lo[1] - self.origin[1]) / res)), 0)
        r1 = min(int(math.ceil((hi[1] - self.origin[1]) / res)) + 1, self.ny)
        c0, r0 = min(c0, c1), min(r0, r1)
        xs, ys = self._xc[c0:c1], self._yc[r0:r1]
        dx = np.maximum(np.maximum(box.lower[0] - xs, xs - box.upper[0]), 0.0)
        dy = np.maximum(np.maximum(box.lower[1] - ys, ys - box.upper[1]), 0.0)
        mask = (dy[:, None] ** 2 + dx[None, :] ** 2) <= r * r + 1e-12
        return _Footprint(box, slice(r0, r1), slice(c0, c1), mask, label)

    def _inflate_map(self, grid: OccupancyMap) -> np.ndarray:
        xx, yy = np.meshgrid(self._xc, self._yc)
        occ = grid.occupied_at(np.stack([xx.ravel(), yy.ravel()], axis=1)).reshape(self.ny, self.nx)
        if not occ.any():
            return occ
        free = (~occ).astype(np.uint8)
        dist_cells = cv2.distanceTransform(free, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
        # Distance between centres; the occupied cell reaches half a cell (up to a half diagonal) closer.
        return dist_cells * self.resolution <= self.inflation_m + self.resolution * (math.sqrt(2.0) / 2.0)

    def add_box(self, box: Box) -> None:
        """An obstacle seen at run time; it blocks every band it meets from now on."""
        self._extra.append(self._footprint(box, "added obstacle"))
        self._cache.clear()

    @property
    def added_boxes(self) -> list[Box]:
        return [f.box for f in self._extra]

    def blocked(self, z_lo: float, z_hi: float) -> np.ndarray:
        """The inflated grid for flight between altitudes z_lo and z_hi (read-only)."""
        key = (round(min(z_lo, z_hi), 3), round(max(z_lo, z_hi), 3))
        grid = self._cache.get(key)
        if grid is None:
            grid = self._static.copy()
            r = self.inflation_m
            for fp in (*self._footprints, *self._extra):
                if fp.box.lower[2] - r <= key[1] and fp.box.upper[2] + r >= key[0]:
                    grid[fp.rows, fp.cols] |= fp.mask
            grid.setflags(write=False)
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = grid
        return grid

    def blocking_boxes(self, xy, z_lo: float, z_hi: float) -> list[str]:
        """What blocks the point's cell in the band: box names, "the fence", "an occupied map cell"."""
        ix, iy = self.cell_index(xy)
        names = []
        if self._fence[iy, ix]:
            names.append("the fence")
        if self._map_mask[iy, ix]:
            names.append("an occupied map cell")
        r = self.inflation_m
        for fp in (*self._footprints, *self._extra):
            box = fp.box
            if not (box.lower[2] - r <= z_hi and box.upper[2] + r >= z_lo):
                continue
            if fp.rows.start <= iy < fp.rows.stop and fp.cols.start <= ix < fp.cols.stop:
                if fp.mask[iy - fp.rows.start, ix - fp.cols.start] and fp.label not in names:
                    names.append(fp.label)
        return names
