"""Draw a plan over its map (matplotlib, Agg backend: works headless)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robot_hrl.planning.plan import Plan
from robot_hrl.planning.symbolic import SymbolicPlanner


def plot_plan(planner: SymbolicPlanner, plan: Plan, out_path: str | Path) -> Path:
    """Top view: inflated grid (grey), obstacles and landmarks, path, subgoals and goals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    world = planner.world
    zs = [p[2] for s in plan.steps if s.path is not None for p in s.path if p[2] > planner.min_flight_z - 1e-6]
    lo, hi = (min(zs), max(zs)) if zs else (planner.min_flight_z, planner.min_flight_z)
    blocked = planner.grid.blocked(lo, hi)
    (x0, y0, _), (x1, y1, _) = world.bounds.min, world.bounds.max
    fig, ax = plt.subplots(figsize=(7, 7))
    ax.imshow(blocked, origin="lower", cmap="Greys", alpha=0.35, vmin=0, vmax=1.5,
              extent=(planner.grid.origin[0], planner.grid.origin[0] + planner.grid.nx * planner.grid.resolution,
                      planner.grid.origin[1], planner.grid.origin[1] + planner.grid.ny * planner.grid.resolution))
    for o in (*world.obstacles, *planner.grid.added_boxes):
        ax.add_patch(Rectangle(o.lower[:2], o.size[0], o.size[1], color=getattr(o, "color", (0.3, 0.3, 0.3)),
                               ec="k", lw=0.8))
    for lm in world.landmarks:
        ax.add_patch(Rectangle(lm.lower[:2], lm.size[0], lm.size[1], color=lm.rgb, ec="k", lw=0.8))
        ax.annotate(lm.id, lm.center[:2], textcoords="offset points", xytext=(6, -12), fontsize=8)
    for s in plan.steps:
        if s.path is not None and len(s.path) > 1:
            ax.plot(s.path[:, 0], s.path[:, 1], "-", color="tab:blue", lw=1.5)
    if plan.subgoals:
        sg = np.asarray(plan.subgoals)
        ax.plot(sg[:, 0], sg[:, 1], ".", color="tab:orange", ms=7, label=f"subgoals ({len(sg)})")
    for i, (label, g) in enumerate(zip(plan.goal_labels, plan.goals), 1):
        ax.plot(g[0], g[1], "*", color="tab:red", ms=12)
        ax.annotate(f"{i}. {label}", g[:2], textcoords="offset points", xytext=(6, 6), fontsize=8, color="tab:red")
    ax.plot(plan.start[0], plan.start[1], "o", color="tab:green", ms=9, label="start")
    ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, ec="tab:red", ls="--", lw=1.0))
    title = f"{world.name}: {plan.planner} plan, {plan.path_length_m:.2f} m"
    if plan.fallback_reason:
        title += " (fallback)"
    ax.set_title(title)
    ax.set_xlabel("x (m, east)")
    ax.set_ylabel("y (m, north)")
    ax.set_aspect("equal")
    ax.set_xlim(x0 - 0.1, x1 + 0.1)
    ax.set_ylim(y0 - 0.1, y1 + 0.1)
    ax.legend(loc="upper left", fontsize=8)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out_path
