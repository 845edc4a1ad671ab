"""Figures of the learned navigation level (issue 19): success by density for the three planners, in the
batched simulator and in PyBullet, and the level's inference time per decision.

    python benchmarks/bench_navigate.py --model models/crazyflie_navigate.onnx --run-dir runs/navigate --rooms 20 --pybullet-rooms 5 --range-shield

``--range-shield`` flies every planner again through the runtime's shield with the range source (the rooms unmapped
for it), in both simulators: as the node graph flies the level (``planner:=learned`` turns ``range_shield`` on).
The shielded batched airframes draw their batteries from ``SHIELDED_BATTERY_RANGE_V`` (sim/navigate_shield.py).

Held-out rooms (evaluation seeds). Prints a table, writes --out (JSON) and PNG plots next to it: success by density,
and under paths/ every flight of the learned level over its room (one grid per simulator and density).
Training wall time is read from the run's train_summary.json when --run-dir is given.
The machine is shared: the 1-min load average is printed next to every timing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def load1() -> float:
    return os.getloadavg()[0]


def inference_time_us(session, n_obs: int, repeats: int = 2000) -> dict:
    """One decision of the level through onnxruntime (a recurrent level's state fed back, as the runtime does)."""
    x = np.random.default_rng(0).normal(size=(1, n_obs)).astype(np.float32)
    inputs = session.get_inputs()
    feed = {"obs": x}
    if len(inputs) > 1:  # (the contract's recurrent state: [1, 1, H])
        feed[inputs[1].name] = np.zeros((1, 1, int(inputs[1].shape[-1])), np.float32)

    def decide():
        out = session.run(None, feed)
        if len(out) > 1:
            feed[inputs[1].name] = out[1]

    for _ in range(50):
        decide()
    t = []
    for _ in range(repeats):
        s = time.perf_counter()
        decide()
        t.append(time.perf_counter() - s)
    t = np.array(t) * 1e6
    return {"p50_us": float(np.percentile(t, 50)), "p99_us": float(np.percentile(t, 99)), "load1": load1()}


def shield_summary(episodes: list[dict], density: str) -> str:
    """The shield's share of control ticks that it changed, and the flights it landed (batched), for one density."""
    eps = [e for e in episodes if e.get("density") == density and e.get("shielded")]
    if not eps:
        return "-"
    if "shield_ticks" in eps[0]:
        ticks = sum(e["shield_ticks"] for e in eps)
        acted = sum(e["intervention_ticks"] for e in eps)
        return f"{acted / max(ticks, 1):.1%}, {sum(bool(e['shield_landing']) for e in eps)}"
    return f"{sum(sum(e.get('interventions', {}).values()) for e in eps)} records"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_navigate.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="models/crazyflie_navigate.onnx")
    p.add_argument("--skill", default="models/crazyflie_goto.onnx")
    p.add_argument("--run-dir", default=None, help="the training run (for its wall time)")
    p.add_argument("--rooms", type=int, default=50, help="held-out rooms per density, batched simulator")
    p.add_argument("--pybullet-rooms", type=int, default=10, help="held-out rooms per density, PyBullet (0: skip)")
    p.add_argument("--out", default="runs/bench_navigate/bench_navigate.json")
    p.add_argument("--range-shield", action="store_true",
                   help="also fly every planner through the shield with the range source (rooms unmapped for it), batched and "
                        "in PyBullet")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    import torch

    from robot_hrl.world.rooms import generate_room, room_seeds
    from sim.evaluate_navigate import (
        DENSITY_NAMES, batched_planners, evaluate_batched, evaluate_pybullet, load_learned, plot_results, plot_trajectories,
    )
    from sim.navigate_baselines import reactive_potential_field

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    contract, session = load_learned(args.model, args.skill)
    out: dict = {"model": args.model, "inference": inference_time_us(session, contract.observation_size)}
    if args.run_dir and (Path(args.run_dir) / "train_summary.json").is_file():
        out["training"] = json.loads((Path(args.run_dir) / "train_summary.json").read_text())
    rooms = [generate_room(d, s, "eval") for d in DENSITY_NAMES for s in room_seeds("eval", args.rooms)]
    t = time.perf_counter()
    out["batched"] = evaluate_batched(batched_planners(session, rooms), rooms, args.skill, trail=contract.trail,
                                      heading=contract.heading)
    out["batched_wall_s"], out["batched_load1"] = time.perf_counter() - t, load1()
    out_dir = Path(args.out).parent
    plots = [str(plot_results(out["batched"], out_dir, "navigate batched: success by density"))]
    if args.range_shield:
        t = time.perf_counter()
        out["batched_range_shield"] = evaluate_batched(batched_planners(session, rooms), rooms, args.skill, shielded=True,
                                                       trail=contract.trail, heading=contract.heading)
        out["batched_range_shield_wall_s"], out["batched_range_shield_load1"] = time.perf_counter() - t, load1()
        plots.append(str(plot_results(out["batched_range_shield"], out_dir / "range_shield",
                                      "navigate batched, range shield: success by density")))
    if args.pybullet_rooms > 0:
        pb_rooms = [generate_room(d, s, "eval") for d in DENSITY_NAMES for s in room_seeds("eval", args.pybullet_rooms)]
        from robot_hrl.planning.learned import session_act

        planners = {"learned": session_act(session, contract, args.model),
                    "reactive": lambda obs: reactive_potential_field(torch.from_numpy(obs)).numpy()}
        t = time.perf_counter()
        out["pybullet"] = evaluate_pybullet(planners, pb_rooms, args.skill, contracts={"learned": contract})
        out["pybullet_wall_s"], out["pybullet_load1"] = time.perf_counter() - t, load1()
        plots.append(str(plot_results(out["pybullet"], out_dir, "navigate pybullet: success by density")))
        if args.range_shield:  # the learned level again, the range source of the shield on (the rooms unmapped for it)
            t = time.perf_counter()
            out["pybullet_range_shield"] = evaluate_pybullet(planners, pb_rooms, args.skill,
                                                             contracts={"learned": contract}, shielded=True)
            out["pybullet_range_shield_wall_s"], out["pybullet_range_shield_load1"] = time.perf_counter() - t, load1()
    sims = ("batched", "batched_range_shield", "pybullet", "pybullet_range_shield")
    for sim in sims:  # the learned level's flights, room by room (sim/evaluate_navigate.py's plot_trajectories)
        if "learned" in out.get(sim, {}):
            plots += [str(f) for f in plot_trajectories({"learned": out[sim]["learned"]},
                                                        rooms if sim.startswith("batched") else pb_rooms,
                                                        out_dir / "paths", f"navigate {sim.replace('_', ' ')}")]
    print("| simulator | planner | density | flights | success | 95 % interval | collisions | time to goal, s | path ratio | "
          "shield: ticks intervened, landings |")
    for sim in sims:
        for name, r in out.get(sim, {}).items():
            for d in DENSITY_NAMES:
                s = r["by_density"].get(d)
                if s:
                    lo, hi = s["success_ci95"]
                    print(f"| {sim} | {name} | {d} | {s['episodes']} | {s['success_rate']:.3f} | {lo:.2f}-{hi:.2f} | {s['collision_rate']:.3f} | "
                          f"{s['mean_time_to_goal_s'] if s['mean_time_to_goal_s'] is None else round(s['mean_time_to_goal_s'], 1)} | "
                          f"{s['mean_path_length_ratio'] if s['mean_path_length_ratio'] is None else round(s['mean_path_length_ratio'], 2)} | "
                          f"{shield_summary(r['episodes'], d)} |")
    inf = out["inference"]
    print(f"level inference (onnxruntime, 1 observation): p50 {inf['p50_us']:.1f} us, p99 {inf['p99_us']:.1f} us (load {inf['load1']:.1f})")
    if "pybullet" in out and "learned" in out["pybullet"]:
        print(f"level decision in PyBullet (robot_hrl.planning.learned: observation, range memory, onnxruntime, mapping): "
              f"mean {out['pybullet']['learned']['inference_s_per_decision'] * 1e6:.1f} us (load {out['pybullet_load1']:.1f})")
    if "training" in out:
        tr = out["training"]
        dg = tr.get("dagger") or {}
        if dg:
            print(f"training: DAgger {dg['iterations']} iterations, {dg['samples']} labelled decisions (init {dg.get('init')}), "
                  f"{dg.get('wall_s', 0):.0f} s wall")
        print(f"training: PPO {tr['iterations']} iterations, {tr['decisions']} decisions; {tr['training_wall_s']:.0f} s wall in all")
    for e in sims:
        for r in out.get(e, {}).values():
            r.pop("episodes", None)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print("wrote", args.out, *plots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
