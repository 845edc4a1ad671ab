"""Grid search: A* on an 8-connected occupancy grid, line of sight, shortcutting, spacing.

The grid is a bool array ``blocked[iy, ix]``. A* runs on a flat, padded byte copy of it
(``heapq`` + flat indices, no per-node objects), which keeps a 400 x 400 search in pure
Python fast enough for the planner's budget. Diagonal moves never cut a blocked corner.
"""

from __future__ import annotations

import math
from heapq import heappop, heappush

import numpy as np

SQRT2 = math.sqrt(2.0)
_OCTILE = SQRT2 - 2.0


def astar(blocked: np.ndarray, start: tuple[int, int], goal: tuple[int, int], weight: float = 1.0) -> list[tuple[int, int]] | None:
    """Shortest 8-connected path of cells (ix, iy) from start to goal, both included; None if none.

    Start and goal must be free cells.
    """
    ny, nx = blocked.shape
    w = nx + 2
    padded = np.ones((ny + 2, w), dtype=np.uint8)
    padded[1:-1, 1:-1] = blocked
    grid = padded.tobytes()
    s = (start[1] + 1) * w + start[0] + 1
    g = (goal[1] + 1) * w + goal[0] + 1
    if grid[s] or grid[g]:
        return None
    path = _astar_flat(grid, w, s, g, weight)
    if path is None:
        return None
    return [(n % w - 1, n // w - 1) for n in path]


def _astar_flat(grid: bytes, w: int, s: int, g: int, weight: float = 1.0) -> list[int] | None:
    gx, gy = g % w, g // w
    inf = math.inf
    gcost = [inf] * len(grid)
    parent: dict[int, int] = {}
    seen = bytearray(grid)  # blocked or closed
    gcost[s] = 0.0
    sx, sy = s % w, s // w
    dx, dy = abs(sx - gx), abs(sy - gy)
    h0 = dx + dy + _OCTILE * (dx if dx < dy else dy)
    heap = [(h0, h0, s)]
    straight = (1, -1, w, -w)
    diagonal = ((w + 1, 1, w), (w - 1, -1, w), (-w + 1, 1, -w), (-w - 1, -1, -w))
    push, pop = heappush, heappop
    while heap:
        _, _, n = pop(heap)
        if seen[n]:
            continue
        if n == g:
            path = [n]
            while n != s:
                n = parent[n]
                path.append(n)
            path.reverse()
            return path
        seen[n] = 1
        gn = gcost[n]
        for d in straight:
            m = n + d
            if seen[m]:
                continue
            ng = gn + 1.0
            if ng < gcost[m]:
                gcost[m] = ng
                parent[m] = n
                my, mx = divmod(m, w)
                dx = mx - gx if mx > gx else gx - mx
                dy = my - gy if my > gy else gy - my
                h = (dx + dy + _OCTILE * (dx if dx < dy else dy)) * weight
                push(heap, (ng + h, h, m))
        for d, a, b in diagonal:
            m = n + d
            if seen[m] or grid[n + a] or grid[n + b]:
                continue
            ng = gn + SQRT2
            if ng < gcost[m]:
                gcost[m] = ng
                parent[m] = n
                my, mx = divmod(m, w)
                dx = mx - gx if mx > gx else gx - mx
                dy = my - gy if my > gy else gy - my
                h = (dx + dy + _OCTILE * (dx if dx < dy else dy)) * weight
                push(heap, (ng + h, h, m))
    return None


def line_of_sight(blocked: np.ndarray, a: np.ndarray, b: np.ndarray, step: float = 0.25) -> np.ndarray:
    """Whether the straight segments a[k] -> b[k] (cell coordinates, float (N, 2)) cross only free cells.

    Cell (ix, iy) covers [ix, ix+1) x [iy, iy+1). Segments are sampled every ``step`` cells;
    the planner's inflation margin covers what falls between samples.
    """
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b = np.atleast_2d(np.asarray(b, dtype=np.float64))
    if len(a) == 0:
        return np.zeros(0, dtype=bool)
    length = np.linalg.norm(b - a, axis=1)
    k = int(math.ceil(float(length.max()) / step)) + 1
    t = np.linspace(0.0, 1.0, k)
    pts = a[:, None, :] + (b - a)[:, None, :] * t[None, :, None]
    ix = np.floor(pts[..., 0]).astype(np.int64)
    iy = np.floor(pts[..., 1]).astype(np.int64)
    ny, nx = blocked.shape
    inside = (ix >= 0) & (ix < nx) & (iy >= 0) & (iy < ny)
    hit = np.ones(ix.shape, dtype=bool)
    hit[inside] = blocked[iy[inside], ix[inside]]
    return ~hit.any(axis=1)


def turning_points(cells: list[tuple[int, int]]) -> list[int]:
    """Indices of the path's first cell, every cell where the direction changes, and the last cell."""
    if len(cells) <= 2:
        return list(range(len(cells)))
    arr = np.asarray(cells)
    d = np.diff(arr, axis=0)
    change = np.any(d[1:] != d[:-1], axis=1)
    return [0, *(np.nonzero(change)[0] + 1).tolist(), len(cells) - 1]


def shortcut(blocked: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Greedy line-of-sight shortcutting of a polyline in cell coordinates (N, 2).

    From each kept vertex, jump to the farthest later vertex in sight.
    """
    points = np.asarray(points, dtype=np.float64)
    if len(points) <= 2:
        return points
    kept = [0]
    i = 0
    n = len(points)
    while i < n - 1:
        later = points[i + 1:]
        ok = line_of_sight(blocked, np.repeat(points[i:i + 1], len(later), axis=0), later)
        visible = np.nonzero(ok)[0]
        j = i + 1 + (int(visible[-1]) if len(visible) else 0)
        kept.append(j)
        i = j
    return points[kept]


def polyline_length(points: np.ndarray) -> float:
    points = np.asarray(points, dtype=np.float64)
    if len(points) < 2:
        return 0.0
    return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())


def space_polyline(points: np.ndarray, spacing: float) -> list[np.ndarray]:
    """Points along a polyline (excluding its first vertex, including every corner and the end),
    with consecutive points at most ``spacing`` apart."""
    if not spacing > 0:
        raise ValueError(f"subgoal spacing must be positive, got {spacing}")
    points = np.asarray(points, dtype=np.float64)
    out: list[np.ndarray] = []
    for a, b in zip(points[:-1], points[1:]):
        length = float(np.linalg.norm(b - a))
        if length < 1e-9:
            continue
        k = max(1, int(math.ceil(length / spacing - 1e-9)))
        for i in range(1, k + 1):
            out.append(a + (b - a) * (i / k))
    return out
