"""Exact any-angle shortest paths among inflated boxes: a visibility graph over octagons.

Seen from above, a box inflated by ``r`` (the robot radius plus margin) is a rounded
rectangle. Its circumscribed octagon (the rectangle grown by ``r`` with its corners cut at
45 degrees, tangent to the corner arcs) contains it and is convex, so a segment that enters
no octagon keeps at least ``r`` from every box. Shortest paths among convex polygons bend only
at their vertices, so Dijkstra on the graph of mutually visible vertices gives the exact
shortest path for these octagons: no grid, no discretization error.

The octagon is the intersection of four slabs (x, y, x + y, x - y), so a segment test is
Liang-Barsky clipping against four slabs, vectorized over all segments and boxes. The graph
among vertices is built once per set of boxes (the planner caches it per altitude band);
a query adds the two end points.
"""

from __future__ import annotations

import math

import numpy as np

_K = math.sqrt(2.0) - 1.0
_EPS_H = 1e-7
"""Octagons are shrunk by this for the segment test, so a path may touch their boundary."""
_EPS_V = 1e-6
"""Vertices are pushed out by this, so they are outside every octagon."""


class OctagonVisibilityGraph:
    def __init__(self, boxes_xy: np.ndarray, inflation_m: float, fence: tuple[float, float, float, float]):
        """``boxes_xy`` (M, 4): centre x, y and half extents x, y; ``fence``: x_min, y_min, x_max, y_max
        of the region the robot's centre must stay in (the bounds shrunk by the inflation)."""
        b = np.asarray(boxes_xy, dtype=np.float64).reshape(-1, 4)
        r = float(inflation_m)
        self.fence = tuple(float(v) for v in fence)
        self.centers = b[:, :2]
        hx, hy = b[:, 2] + r, b[:, 3] + r
        hd = b[:, 2] + b[:, 3] + r * math.sqrt(2.0)
        self.half = np.stack([hx, hy, hd, hd], axis=1) - _EPS_H  # (M, 4) slab half widths
        # Vertices in counter-clockwise order around each octagon, with their neighbours (for tangency).
        ax, ay = b[:, 2] + r, b[:, 3] + r
        kx, ky = b[:, 2] + _K * r, b[:, 3] + _K * r
        rel = np.stack([np.stack(p, axis=1) for p in (
            (ax, ky), (kx, ay), (-kx, ay), (-ax, ky), (-ax, -ky), (-kx, -ay), (kx, -ay), (ax, -ky))], axis=1)
        rel = rel + np.sign(rel) * _EPS_V  # (M, 8, 2)
        pts = b[:, None, :2] + rel
        prev = np.roll(pts, 1, axis=1).reshape(-1, 2)
        nxt = np.roll(pts, -1, axis=1).reshape(-1, 2)
        v = pts.reshape(-1, 2)
        keep = self.free(v) if len(v) else np.zeros(0, bool)
        self.vertices, self._prev, self._next = v[keep], prev[keep], nxt[keep]
        n = len(self.vertices)
        self.weights = np.full((n, n), np.inf)
        if n > 1:
            i, j = np.triu_indices(n, 1)
            d = self.vertices[j] - self.vertices[i]
            useful = self._tangent(i, d) & self._tangent(j, d)
            i, j = i[useful], j[useful]
            ok = self.clear(self.vertices[i], self.vertices[j])
            length = np.linalg.norm(self.vertices[i] - self.vertices[j], axis=1)
            self.weights[i[ok], j[ok]] = length[ok]
            self.weights[j[ok], i[ok]] = length[ok]

    def _tangent(self, idx: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Whether the line through vertex idx along d leaves its octagon on one side (a shortest
        path can only bend at a vertex along such lines)."""
        v = self.vertices[idx]
        a, c = self._prev[idx] - v, self._next[idx] - v
        c1 = d[:, 0] * a[:, 1] - d[:, 1] * a[:, 0]
        c2 = d[:, 0] * c[:, 1] - d[:, 1] * c[:, 0]
        return c1 * c2 >= -1e-12

    def _slab_coords(self, p: np.ndarray) -> np.ndarray:
        """(K, M, 4) coordinates of points relative to every box along the four slab normals."""
        d = p[:, None, :] - self.centers[None, :, :]
        return np.stack([d[..., 0], d[..., 1], d[..., 0] + d[..., 1], d[..., 0] - d[..., 1]], axis=-1)

    def inside_fence(self, p: np.ndarray) -> np.ndarray:
        x0, y0, x1, y1 = self.fence
        return (p[:, 0] >= x0) & (p[:, 0] <= x1) & (p[:, 1] >= y0) & (p[:, 1] <= y1)

    def free(self, p) -> np.ndarray:
        """Points (K, 2) inside the fence and outside every octagon."""
        p = np.atleast_2d(np.asarray(p, dtype=np.float64))
        ok = self.inside_fence(p)
        if len(self.centers):
            inside = np.all(np.abs(self._slab_coords(p)) < self.half[None], axis=-1).any(axis=1)
            ok &= ~inside
        return ok

    def clear(self, a: np.ndarray, b: np.ndarray, chunk: int = 4096) -> np.ndarray:
        """Whether segments a[k] -> b[k] (K, 2) enter no octagon's interior.

        Only the boxes whose bounding square meets the segment's bounding box are clipped.
        """
        a = np.atleast_2d(np.asarray(a, dtype=np.float64))
        b = np.atleast_2d(np.asarray(b, dtype=np.float64))
        out = np.ones(len(a), dtype=bool)
        if len(self.centers) == 0 or len(a) == 0:
            return out
        box_lo = self.centers - self.half[:, :2]
        box_hi = self.centers + self.half[:, :2]
        for k in range(0, len(a), chunk):
            pa, pb = a[k:k + chunk], b[k:k + chunk]
            lo, hi = np.minimum(pa, pb), np.maximum(pa, pb)
            near = ((lo[:, None, 0] < box_hi[None, :, 0]) & (hi[:, None, 0] > box_lo[None, :, 0])
                    & (lo[:, None, 1] < box_hi[None, :, 1]) & (hi[:, None, 1] > box_lo[None, :, 1]))
            si, bi = np.nonzero(near)
            if len(si) == 0:
                continue
            d = pa[si] - self.centers[bi]
            p0 = np.stack([d[:, 0], d[:, 1], d[:, 0] + d[:, 1], d[:, 0] - d[:, 1]], axis=-1)
            dv = (pb - pa)[si]
            dp = np.stack([dv[:, 0], dv[:, 1], dv[:, 0] + dv[:, 1], dv[:, 0] - dv[:, 1]], axis=-1)
            h = self.half[bi]
            with np.errstate(divide="ignore", invalid="ignore"):
                t1 = (-h - p0) / dp
                t2 = (h - p0) / dp
            flat = np.abs(dp) < 1e-15
            inside = np.abs(p0) < h
            lo_t = np.where(flat, np.where(inside, -np.inf, np.inf), np.minimum(t1, t2))
            hi_t = np.where(flat, np.where(inside, np.inf, -np.inf), np.maximum(t1, t2))
            tlo = np.maximum(lo_t.max(axis=-1), 0.0)
            thi = np.minimum(hi_t.min(axis=-1), 1.0)
            hit = tlo < thi
            blocked = np.zeros(len(pa), dtype=bool)
            blocked[si[hit]] = True
            out[k:k + chunk] = ~blocked
        return out

    def shortest_path(self, a, b) -> np.ndarray | None:
        """The shortest collision-free polyline (k, 2) from a to b, or None when there is none
        (or when a or b is not free: then the caller falls back to the grid)."""
        a = np.asarray(a, dtype=np.float64)[:2]
        b = np.asarray(b, dtype=np.float64)[:2]
        if not self.free(np.stack([a, b])).all():
            return None
        if self.clear(a[None], b[None])[0]:
            return np.stack([a, b])
        v = self.vertices
        n = len(v)
        if n == 0:
            return None
        idx = np.arange(n)
        da, db = np.full(n, np.inf), np.full(n, np.inf)
        for end, out in ((a, da), (b, db)):
            cand = np.nonzero(self._tangent(idx, v - end))[0]
            ok = cand[self.clear(np.repeat(end[None], len(cand), 0), v[cand])]
            out[ok] = np.linalg.norm(v[ok] - end, axis=1)
        dist = da.copy()
        parent = np.full(n, -1)
        done = np.zeros(n, dtype=bool)
        best, last = math.inf, -1
        w = self.weights
        while True:
            masked = np.where(done, np.inf, dist)
            i = int(np.argmin(masked))
            di = masked[i]
            if not di < best:
                break
            done[i] = True
            if di + db[i] < best:
                best, last = di + db[i], i
            nd = di + w[i]
            upd = (nd < dist) & ~done
            dist[upd] = nd[upd]
            parent[upd] = i
        if last < 0:
            return None
        chain = [last]
        while parent[chain[-1]] >= 0:
            chain.append(int(parent[chain[-1]]))
        return np.vstack([a[None], v[chain[::-1]], b[None]])
