"""A PNG of a flight: the flown path over the world map (top view) and the altitude over time."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from robot_hrl.world import World


def plot_flight(world: World, path: Sequence[tuple[float, float, float, float]], out: str | Path,
                plan: Sequence[tuple[float, float, float]] = (), subgoals: Sequence[tuple[float, float, float]] = (),
                title: str = "") -> Path:
    """Write ``out`` (PNG). ``path`` holds (t, x, y, z) samples."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax, az) = plt.subplots(1, 2, figsize=(11, 5), gridspec_kw={"width_ratios": [1.2, 1]})
    lo, hi = world.bounds.min, world.bounds.max
    ax.add_patch(Rectangle((lo[0], lo[1]), hi[0] - lo[0], hi[1] - lo[1], fill=False, ls="--", ec="k", label="geofence"))
    for ob in world.obstacles:
        ax.add_patch(Rectangle(tuple(ob.lower[:2]), ob.size[0], ob.size[1], color=ob.color))
        ax.text(ob.center[0], ob.center[1], ob.name, ha="center", va="center", fontsize=7)
    for lm in world.landmarks:
        ax.add_patch(Rectangle(tuple(lm.lower[:2]), lm.size[0], lm.size[1], color=lm.rgb))
        ax.text(lm.center[0], lm.center[1] + lm.size[1], lm.id, ha="center", va="bottom", fontsize=7)
    if plan:
        ax.plot([p[0] for p in plan], [p[1] for p in plan], ":", color="tab:gray", label="plan")
    if subgoals:
        ax.plot([p[0] for p in subgoals], [p[1] for p in subgoals], "x", color="tab:orange", ms=4, label="subgoals")
    if path:
        ax.plot([p[1] for p in path], [p[2] for p in path], "-", color="tab:blue", lw=1.5, label="flown")
        ax.plot(path[0][1], path[0][2], "o", color="tab:green", label="start")
        ax.plot(path[-1][1], path[-1][2], "s", color="tab:red", label="end")
        az.plot([p[0] - path[0][0] for p in path], [p[3] for p in path], color="tab:blue")
    ax.set_xlim(lo[0] - 0.2, hi[0] + 0.2)
    ax.set_ylim(lo[1] - 0.2, hi[1] + 0.2)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m, east)")
    ax.set_ylabel("y (m, north)")
    ax.legend(loc="upper left", fontsize=7)
    ax.set_title(title or f"world {world.name}: flown path")
    az.axhline(hi[2], ls="--", color="k", lw=0.8)
    az.set_xlabel("time (s)")
    az.set_ylabel("altitude z (m)")
    az.set_title("altitude")
    az.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
