"""Visiting order of several goals: the shortest open path from the start through all of them.

- Up to ``exact_limit`` goals (default 8): exact, by Held-Karp dynamic programming
  (numpy over subsets). True leg costs are path searches, so they are computed lazily:
  straight-line distances are lower bounds; the DP is solved, the legs of the best order that
  are still bounds are replaced by their true costs, and this repeats until the best order
  uses only true costs. That order is optimal for the true costs, and usually needs only a
  few more searches than the legs it flies.
- Beyond: all true costs, nearest-neighbour construction, then 2-opt until no move improves.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

EXACT_ORDER_LIMIT = 8


def held_karp_open(cost: np.ndarray) -> tuple[list[int], float]:
    """Exact shortest open path from node 0 through all other nodes; returns (order of nodes 1..n, cost)."""
    n = cost.shape[0] - 1
    if n == 0:
        return [], 0.0
    c = cost[1:, 1:].tolist()
    inf = math.inf
    full = (1 << n) - 1
    dp = [[inf] * n for _ in range(1 << n)]
    parent = [[-1] * n for _ in range(1 << n)]
    for j in range(n):
        dp[1 << j][j] = float(cost[0, j + 1])
    for mask in range(1, full + 1):
        members = [j for j in range(n) if mask >> j & 1]
        if len(members) < 2:
            continue
        row, prow = dp[mask], parent[mask]
        for j in members:
            prev = dp[mask ^ (1 << j)]
            best, arg = inf, -1
            for k in members:
                if k != j:
                    v = prev[k] + c[k][j]
                    if v < best:
                        best, arg = v, k
            row[j], prow[j] = best, arg
    end = min(range(n), key=lambda j: dp[full][j])
    best = dp[full][end]
    if not math.isfinite(best):
        # No order visits every node (some are unreachable): return one anyway, in order of
        # cost from the start, so that the caller meets the unreachable leg and reports it.
        return sorted(range(1, n + 1), key=lambda j: cost[0, j]), math.inf
    order, mask, j = [], full, end
    while j >= 0:
        order.append(j + 1)
        pj = parent[mask][j]
        mask ^= 1 << j
        j = pj
    order.reverse()
    return order, float(best)


def two_opt_open(cost: np.ndarray, order: list[int]) -> list[int]:
    """Improve an open path 0 -> order by reversing segments while that shortens it."""
    route = [0, *order]
    improved = True
    while improved:
        improved = False
        for i in range(1, len(route) - 1):
            for k in range(i + 1, len(route)):
                a, b = route[i - 1], route[i]
                c = route[k]
                d = route[k + 1] if k + 1 < len(route) else None
                before = cost[a, b] + (cost[c, d] if d is not None else 0.0)
                after = cost[a, c] + (cost[b, d] if d is not None else 0.0)
                if after < before - 1e-9:
                    route[i:k + 1] = reversed(route[i:k + 1])
                    improved = True
    return route[1:]


def nearest_neighbour(cost: np.ndarray) -> list[int]:
    left = set(range(1, cost.shape[0]))
    order, at = [], 0
    while left:
        nxt = min(left, key=lambda j: cost[at, j])
        order.append(nxt)
        left.remove(nxt)
        at = nxt
    return order


def path_cost(cost: np.ndarray, order: list[int]) -> float:
    route = [0, *order]
    return float(sum(cost[a, b] for a, b in zip(route[:-1], route[1:])))


def order_goals(points: np.ndarray, true_cost: Callable[[int, int], float],
                exact_limit: int = EXACT_ORDER_LIMIT) -> list[int]:
    """Order of goals 1..n (points[0] is the start) minimising the sum of ``true_cost(i, j)``.

    ``true_cost`` must be symmetric, at least the straight-line distance, and may be inf.
    Returns goal indices in points (1-based).
    """
    points = np.asarray(points, dtype=np.float64)
    m = len(points)
    if m <= 2:
        return list(range(1, m))
    lower = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=2)
    if m - 1 <= exact_limit:
        cost = lower.copy()
        known = np.eye(m, dtype=bool)
        while True:
            order, _ = held_karp_open(cost)
            route = [0, *order]
            todo = [(a, b) for a, b in zip(route[:-1], route[1:]) if not known[a, b]]
            if not todo:
                return order
            for a, b in todo:
                cost[a, b] = cost[b, a] = max(true_cost(a, b), lower[a, b])
                known[a, b] = known[b, a] = True
    cost = np.zeros((m, m))
    for a in range(m):
        for b in range(a + 1, m):
            cost[a, b] = cost[b, a] = true_cost(a, b)
    return two_opt_open(cost, nearest_neighbour(cost))
