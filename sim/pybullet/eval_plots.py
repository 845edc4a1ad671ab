"""PNG plots of an evaluation: 3-D trajectories and the distance to the goal over time."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_plots(trajectories: list[dict], out_dir: str | Path, title: str, position_tolerance_m: float,
                control_hz: float, max_trajectories: int = 12) -> list[Path]:
    """``trajectories``: dicts with positions_w (T, 3), goal_w (3,), errors_m (T,), success (bool).

    Writes ``trajectories_3d.png`` (the first ``max_trajectories`` episodes: start, path, goal)
    and ``position_error.png`` (every episode's distance to the goal, log scale, with the
    success tolerance). Returns the paths.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []

    fig = plt.figure(figsize=(7, 6))
    ax = fig.add_subplot(projection="3d")
    cmap = plt.get_cmap("tab10")
    for i, tr in enumerate(trajectories[:max_trajectories]):
        p = np.asarray(tr["positions_w"])
        color = cmap(i % 10)
        ax.plot(p[:, 0], p[:, 1], p[:, 2], color=color, lw=1.2, ls="-" if tr["success"] else "--")
        ax.scatter(*p[0], color=color, marker="o", s=18)
        ax.scatter(*np.asarray(tr["goal_w"]), color=color, marker="*", s=80)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_zlabel("z (m)")
    ax.set_title(f"{title}\n(o start, * goal; dashed: not a success)", fontsize=9)
    fig.tight_layout()
    paths.append(out / "trajectories_3d.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    for tr in trajectories:
        e = np.asarray(tr["errors_m"])
        t = np.arange(e.size) / control_hz
        ax.plot(t, np.maximum(e, 1e-4), color="tab:blue" if tr["success"] else "tab:red", lw=0.7, alpha=0.6)
    ax.axhline(position_tolerance_m, color="k", ls=":", lw=1, label=f"success tolerance {position_tolerance_m} m")
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("distance to goal (m)")
    ax.set_title(f"{title}: position error (blue success, red failure)", fontsize=9)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    paths.append(out / "position_error.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths
