"""Occupancy maps in the ROS map_server format (a YAML file plus a PGM or PNG image).

```yaml
image: demo.pgm          # relative to this file
resolution: 0.05         # m per pixel
origin: [-0.5, -0.5, 0.0]  # x, y, yaw of the LOWER-LEFT pixel, m and rad
negate: 0
occupied_thresh: 0.65
free_thresh: 0.196
mode: trinary            # trinary | scale | raw
```

As in map_server, image row 0 is the TOP of the map (maximum y). In memory
:class:`OccupancyMap` keeps ``occupied[iy, ix]`` with ``iy = 0`` at the BOTTOM (minimum y), so
cell ``(ix, iy)`` covers ``x in origin_x + [ix, ix+1) * resolution``. Unknown cells count as
occupied for planning.

``python -m robot_hrl.planning.make_map --world models/worlds/demo.yaml --out models/maps/demo.yaml --z-band 0.5 2.0``
rasterizes a world file into a map (what models/maps/demo.yaml was made with: the obstacles that
reach flight altitudes, without the 0.3 m landmark boxes, which a 2-D map would make full height).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import yaml

from robot_hrl.errors import WorldError
from robot_hrl.world import World, load_world

MAP_MODES = ("trinary", "scale", "raw")
_REQUIRED = ("image", "resolution", "origin")


@dataclass(frozen=True)
class OccupancyMap:
    """A 2-D occupancy grid; ``occupied[iy, ix]``, row 0 at the minimum y."""

    occupied: np.ndarray
    """(ny, nx) bool; unknown cells are True."""
    resolution: float
    """m per cell."""
    origin: tuple[float, float]
    """World x, y of the lower-left corner of cell (0, 0)."""

    @property
    def shape(self) -> tuple[int, int]:
        return self.occupied.shape

    @property
    def extent(self) -> tuple[float, float, float, float]:
        """(x_min, x_max, y_min, y_max) of the area the map covers."""
        ny, nx = self.occupied.shape
        x0, y0 = self.origin
        return x0, x0 + nx * self.resolution, y0, y0 + ny * self.resolution

    def covers(self, x_min: float, x_max: float, y_min: float, y_max: float, tol: float = 1e-6) -> bool:
        ex = self.extent
        return ex[0] <= x_min + tol and ex[1] >= x_max - tol and ex[2] <= y_min + tol and ex[3] >= y_max - tol

    def occupied_at(self, xy: np.ndarray) -> np.ndarray:
        """Occupancy at world points (N, 2); points outside the map count as occupied."""
        xy = np.atleast_2d(np.asarray(xy, dtype=np.float64))
        ix = np.floor((xy[:, 0] - self.origin[0]) / self.resolution).astype(np.int64)
        iy = np.floor((xy[:, 1] - self.origin[1]) / self.resolution).astype(np.int64)
        ny, nx = self.occupied.shape
        inside = (ix >= 0) & (ix < nx) & (iy >= 0) & (iy < ny)
        out = np.ones(len(xy), dtype=bool)
        out[inside] = self.occupied[iy[inside], ix[inside]]
        return out


def _err(path: Path, msg: str) -> WorldError:
    return WorldError(f"map file {str(path)!r}: {msg}")


def load_map(path: str | Path) -> OccupancyMap:
    """Read a map_server YAML and its image; every malformed field gets a clear WorldError."""
    path = Path(path)
    if not path.is_file():
        raise WorldError(f"map file {str(path)!r} does not exist; generate one with "
                         "`python -m robot_hrl.planning.make_map --world WORLD --out MAP.yaml`")
    try:
        meta = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise _err(path, f"not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise _err(path, "must hold a mapping with image, resolution, origin, negate, occupied_thresh, free_thresh")
    missing = [k for k in _REQUIRED if k not in meta]
    if missing:
        raise _err(path, f"missing field(s) {missing}")
    unknown = sorted(set(meta) - {"image", "resolution", "origin", "negate", "occupied_thresh", "free_thresh", "mode"})
    if unknown:
        raise _err(path, f"unknown field(s) {unknown}")
    try:
        resolution = float(meta["resolution"])
        origin = [float(v) for v in meta["origin"]]
        occ_t = float(meta.get("occupied_thresh", 0.65))
        free_t = float(meta.get("free_thresh", 0.196))
    except (TypeError, ValueError):
        raise _err(path, "resolution, origin, occupied_thresh and free_thresh must be numbers") from None
    if not (math.isfinite(resolution) and resolution > 0):
        raise _err(path, f"resolution must be a positive number of metres per pixel, got {meta['resolution']!r}")
    if len(origin) != 3 or not all(math.isfinite(v) for v in origin):
        raise _err(path, f"origin must be [x, y, yaw], got {meta['origin']!r}")
    if abs(origin[2]) > 1e-9:
        raise _err(path, f"origin yaw {origin[2]} is not supported; rotate the image so that yaw is 0")
    if not (0.0 <= free_t < occ_t <= 1.0):
        raise _err(path, f"need 0 <= free_thresh < occupied_thresh <= 1, got free {free_t}, occupied {occ_t}")
    negate = meta.get("negate", 0)
    if negate not in (0, 1, True, False):
        raise _err(path, f"negate must be 0 or 1, got {negate!r}")
    mode = meta.get("mode", "trinary")
    if mode not in MAP_MODES:
        raise _err(path, f"mode must be one of {MAP_MODES}, got {mode!r}")
    image_path = path.parent / str(meta["image"])
    if not image_path.is_file():
        raise _err(path, f"its image {str(meta['image'])!r} does not exist next to it")
    image = cv2.imread(str(image_path), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise _err(path, f"its image {str(image_path)!r} cannot be read (use PGM or PNG)")
    if image.ndim == 3:
        image = image[..., :3].mean(axis=2)  # map_server averages the colour channels
    if image.dtype != np.uint8:
        raise _err(path, f"its image must be 8-bit, got {image.dtype}")
    if image.size == 0:
        raise _err(path, "its image is empty")
    value = image.astype(np.float64)
    if mode == "raw":
        occupied = value >= occ_t * 100.0
        occupied |= value > 100  # 255 = unknown
    else:
        p = value / 255.0 if negate else (255.0 - value) / 255.0
        occupied = ~(p < free_t)  # occupied and unknown both block
    return OccupancyMap(occupied=np.ascontiguousarray(occupied[::-1]), resolution=resolution,
                        origin=(origin[0], origin[1]))


def save_map(grid: OccupancyMap, yaml_path: str | Path, image_name: str | None = None) -> Path:
    """Write a map_server YAML and a PGM image (occupied 0, free 254) next to it."""
    yaml_path = Path(yaml_path)
    image_name = image_name or yaml_path.with_suffix(".pgm").name
    image = np.where(grid.occupied[::-1], 0, 254).astype(np.uint8)
    yaml_path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(yaml_path.parent / image_name), image):
        raise WorldError(f"cannot write the map image {str(yaml_path.parent / image_name)!r}")
    meta = {"image": image_name, "resolution": float(grid.resolution),
            "origin": [float(grid.origin[0]), float(grid.origin[1]), 0.0],
            "negate": 0, "occupied_thresh": 0.65, "free_thresh": 0.196, "mode": "trinary"}
    yaml_path.write_text(yaml.safe_dump(meta, sort_keys=False))
    return yaml_path


def rasterize_world(world: World, resolution: float = 0.05, z_band: tuple[float, float] | None = None,
                    include_landmarks: bool = True) -> OccupancyMap:
    """The world's boxes seen from above, as a map covering its bounds.

    A cell is occupied when any part of it overlaps a box whose height range meets ``z_band``
    (all boxes when None).
    """
    if not (math.isfinite(resolution) and resolution > 0):
        raise WorldError(f"map resolution must be positive, got {resolution}")
    (x0, y0, _), (x1, y1, _) = world.bounds.min, world.bounds.max
    nx, ny = int(math.ceil((x1 - x0) / resolution - 1e-9)), int(math.ceil((y1 - y0) / resolution - 1e-9))
    occupied = np.zeros((ny, nx), dtype=bool)
    boxes = world.solid_boxes() if include_landmarks else world.obstacles
    for box in boxes:
        lo, hi = box.lower, box.upper
        if z_band is not None and (hi[2] < z_band[0] or lo[2] > z_band[1]):
            continue
        i0 = max(int(math.floor((lo[0] - x0) / resolution + 1e-9)), 0)
        i1 = min(int(math.ceil((hi[0] - x0) / resolution - 1e-9)), nx)
        j0 = max(int(math.floor((lo[1] - y0) / resolution + 1e-9)), 0)
        j1 = min(int(math.ceil((hi[1] - y0) / resolution - 1e-9)), ny)
        occupied[j0:j1, i0:i1] = True
    return OccupancyMap(occupied=occupied, resolution=resolution, origin=(x0, y0))


def occupied_rectangles(grid: OccupancyMap, max_count: int | None = None) -> list[tuple[int, int, int, int]] | None:
    """Cover the occupied cells with axis-aligned rectangles ``(row0, row1, col0, col1)`` (greedy:
    a run along a row, extended down while the rows below are occupied there too).

    Returns None when more than ``max_count`` rectangles would be needed (a noisy map).
    """
    occ = grid.occupied.copy()
    rows, cols = occ.shape
    rects: list[tuple[int, int, int, int]] = []
    for r in range(rows):
        row = occ[r]
        c = 0
        while c < cols:
            nz = np.flatnonzero(row[c:])
            if len(nz) == 0:
                break
            c0 = c + int(nz[0])
            gap = np.flatnonzero(~row[c0:])
            c1 = c0 + (int(gap[0]) if len(gap) else cols - c0)
            r1 = r + 1
            while r1 < rows and occ[r1, c0:c1].all():
                r1 += 1
            occ[r:r1, c0:c1] = False
            rects.append((r, r1, c0, c1))
            if max_count is not None and len(rects) > max_count:
                return None
            c = c1
    return rects


def check_map_matches_world(grid: OccupancyMap, world: World, source: str = "map") -> None:
    """A map used with a world must cover the world's fence; raise WorldError otherwise."""
    (x0, y0, _), (x1, y1, _) = world.bounds.min, world.bounds.max
    if not grid.covers(x0, x1, y0, y1):
        ex = grid.extent
        raise WorldError(
            f"{source} covers x {ex[0]:g}..{ex[1]:g}, y {ex[2]:g}..{ex[3]:g} but world {world.name!r} has bounds "
            f"x {x0:g}..{x1:g}, y {y0:g}..{y1:g}; the map must cover the world's bounds (check its origin and resolution)")
    start_occ = grid.occupied_at(np.asarray(world.start[:2])[None])[0]
    if start_occ:
        raise WorldError(f"{source} marks the world's start {list(world.start)} as occupied; the map and the world disagree")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robot_hrl.planning.make_map",
                                     description="Rasterize a world file into a ROS map_server map (YAML + PGM).")
    parser.add_argument("--world", required=True, help="world YAML file")
    parser.add_argument("--out", required=True, help="map YAML to write; the PGM goes next to it")
    parser.add_argument("--resolution", type=float, default=0.05, help="m per pixel")
    parser.add_argument("--z-band", type=float, nargs=2, metavar=("LO", "HI"), default=None,
                        help="only boxes that reach altitudes LO..HI m (e.g. 0.5 2.0 leaves out low landmarks, "
                             "which a 2-D map would make full height); default: every box")
    args = parser.parse_args(argv)
    try:
        if args.z_band is not None and not args.z_band[0] <= args.z_band[1]:
            raise WorldError(f"--z-band {args.z_band[0]} {args.z_band[1]}: LO must not exceed HI")
        grid = rasterize_world(load_world(args.world), args.resolution,
                               z_band=tuple(args.z_band) if args.z_band else None)
        out = save_map(grid, args.out)
    except WorldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {out} ({grid.shape[1]} x {grid.shape[0]} cells at {grid.resolution} m)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
