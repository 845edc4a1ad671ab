"""What the shield costs the shipped goto policy, and where (issue #16).

Runs ``sim/safety_eval.py``'s trained-policy evaluation twice on the same episodes (same seed: same starts, goals and,
with ``--randomize``, the same airframes): with the shield, recording every tick of every episode (which unit and
constraint intervened, the time since the start, the true height, vertical speed and tilt, whether the hover-thrust
estimate had converged), and without it (the unshielded twin). Prints:

* interventions per ``unit.constraint``, and each one's share of the ticks;
* when in the episode (per 0.5 s of time since the start), and with the hover-thrust estimate converged or not;
* at which height / vertical speed / tilt the floor holds (histograms);
* per airframe (``--randomize``: the mass x rotor-force draws), the rate and the success;
* the episodes that fail under the shield but succeed without it: the unit that held them (the most ticks and the
  last), and what the unshielded twin did.

and writes a PNG (``--png``) and the per-tick summary as JSON (``--json``).

    python benchmarks/bench_shield_cost.py --episodes 1000 --seed 0 --png benchmarks/figures/shield_cost_seed0.png
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from sim import safety_eval  # noqa: E402

TIME_BIN_S = 0.5


class Recorder:
    """Per tick and episode: the first intervention's 'unit.constraint' (code; -1 none), the true height, vertical
    speed and tilt (before the step the shield judged), the hover-thrust estimate's convergence, the mode."""

    def __init__(self, steps: int, episodes: int):
        self.keys: list[str] = []
        self.key_code: dict[str, int] = {}
        self.first = np.full((steps, episodes), -1, dtype=np.int16)
        self.any_floor = np.zeros((steps, episodes), dtype=bool)
        self.z = np.zeros((steps, episodes), dtype=np.float32)
        self.vz = np.zeros((steps, episodes), dtype=np.float32)
        self.tilt_deg = np.zeros((steps, episodes), dtype=np.float32)
        self.converged = np.zeros((steps, episodes), dtype=bool)
        self.backup = np.zeros((steps, episodes), dtype=bool)
        self.floor_cmd_n = np.full((steps, episodes), np.nan, dtype=np.float32)
        """The policy's collective thrust command (N) on the ticks altitude.floor acted on."""
        self.floor_clamped = np.zeros((steps, episodes), dtype=bool)
        """altitude.floor changed the command (a thrust clamp) rather than handing the tick to the backup."""
        self.records: dict[str, int] = {}
        self.dt = 0.0

    def code(self, key: str) -> int:
        c = self.key_code.get(key)
        if c is None:
            c = self.key_code[key] = len(self.keys)
            self.keys.append(key)
        return c

    def is_first(self, key: str) -> np.ndarray:
        """(steps, episodes): the ticks whose first record is ``key`` (none where ``key`` was never first on a tick:
        a constraint recorded only after another one on the same tick)."""
        c = self.key_code.get(key)
        return self.first == c if c is not None else np.zeros(self.first.shape, dtype=bool)

    def __call__(self, k: int, env, outputs, shields) -> None:
        self.dt = env.step_dt
        pos = env.position_w.double().numpy()
        vel = env.linear_velocity_w.double().numpy()
        q = env.quat_wxyz.double().numpy()
        r22 = 1.0 - 2.0 * (q[:, 1] ** 2 + q[:, 2] ** 2)
        self.z[k] = pos[:, 2]
        self.vz[k] = vel[:, 2]
        self.tilt_deg[k] = np.degrees(np.arccos(np.clip(r22, -1.0, 1.0)))
        if outputs is None:
            return
        for i, o in enumerate(outputs):
            ht = shields[i]._by_name.get("hover_thrust")
            self.converged[k, i] = bool(ht is not None and ht.converged)
            self.backup[k, i] = o.mode != "policy"
            if o.interventions:
                keys = [f"{rec.unit}.{rec.constraint}" for rec in o.interventions]
                self.first[k, i] = self.code(keys[0])
                for key in keys:
                    self.records[key] = self.records.get(key, 0) + 1
                for rec in o.interventions:
                    if rec.unit == "altitude" and rec.constraint == "floor":
                        self.any_floor[k, i] = True
                        self.floor_cmd_n[k, i] = float(rec.before[0]) if isinstance(rec.before, tuple) else np.nan
                        self.floor_clamped[k, i] = rec.action == "clamp"


def airframe_draws(env) -> dict[str, np.ndarray]:
    """The randomized parameters per episode (mass scale, rotor-force scale, motor time constant, latency)."""
    out = {}
    for name in ("mass_scale", "thrust_coefficient_scale", "motor_time_constant_s", "action_latency_steps"):
        v = env.params.get(name) if hasattr(env, "params") else None
        if v is not None:
            out[name] = v.reshape(len(v), -1)[:, 0].double().numpy()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=1000, help="batched episodes (one env each)")
    ap.add_argument("--episode-s", type=float, default=5.0, help="episode length, s (safety_eval's default)")
    ap.add_argument("--seed", type=int, default=0, help="safety_eval's seed: starts, goals, airframes")
    ap.add_argument("--randomize", action="store_true", help="the training's domain randomization (airframes drawn per episode)")
    ap.add_argument("--config", default=None, help="shield YAML (default: the robot's own)")
    ap.add_argument("--png", default=None, help="write the figure here")
    ap.add_argument("--json", default=None, help="write the breakdown here")
    ap.add_argument("--no-twin", action="store_true", help="skip the unshielded twin run")
    ap.add_argument("--warm-s", type=float, default=0.0, metavar="S",
                    help="hold the start S seconds with the shield before each timed episode (sim/safety_eval.py --warm-s: "
                    "the cost in flight, the hover-thrust estimate converged); 0: a fresh shield at the spawn")
    args = ap.parse_args(argv)

    steps = int(round(args.episode_s / 0.01))
    rec = Recorder(steps, args.episodes)
    draws: dict = {}

    def observe(k, env, outputs, shields):
        if k == 0:
            draws.update(airframe_draws(env))
        rec(k, env, outputs, shields)

    t0 = time.time()
    res = safety_eval.run("trained", args.episodes, args.episode_s, shield_config=args.config, seed=args.seed,
                          randomize=args.randomize, progress=True, observer=observe, warm_s=args.warm_s)
    t_shield = time.time() - t0
    print(res.summary())
    twin = None
    if not args.no_twin:
        twin = safety_eval.run("trained", args.episodes, args.episode_s, shielded=False, seed=args.seed,
                               randomize=args.randomize, progress=True, warm_s=args.warm_s)
        print(twin.summary())
    report = analyse(rec, res, twin, draws, args)
    report["wall_s_shielded"] = round(t_shield, 1)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1))
    if args.png:
        plot(rec, res, twin, args.png, args)
    return 0


def _pct(a, b) -> float:
    return 100.0 * a / b if b else 0.0


def analyse(rec: Recorder, res, twin, draws, args) -> dict:
    steps, n = rec.first.shape
    ticks = steps * n
    inter = rec.first >= 0
    out: dict = {"seed": args.seed, "episodes": n, "ticks": ticks, "randomize": bool(args.randomize),
                 "intervened_ticks": int(inter.sum()), "intervention_rate": float(inter.sum() / ticks),
                 "success_shielded": float(np.mean(res.episode_success)), "violations_shielded": res.episodes_with_violation}
    print(f"\n== seed {args.seed}, {n} episodes x {steps} ticks, randomize={args.randomize}, warm-up {args.warm_s:g} s: "
          f"{_pct(inter.sum(), ticks):.2f} % of ticks intervened, success {_pct(sum(res.episode_success), n):.1f} %"
          + (f" (unshielded {_pct(sum(twin.episode_success), n):.1f} %, {twin.episodes_with_violation} episodes violate)" if twin else ""))
    print("\n-- records per unit.constraint (a tick may hold several; 'first' = the tick's first record)")
    firsts = {key: int((rec.first == c).sum()) for key, c in rec.key_code.items()}
    out["records"] = dict(sorted(rec.records.items(), key=lambda kv: -kv[1]))
    out["first_records"] = dict(sorted(firsts.items(), key=lambda kv: -kv[1]))
    for key, cnt in out["records"].items():
        print(f"  {key:32s} {cnt:8d} records  first on {firsts.get(key, 0):8d} ticks ({_pct(firsts.get(key, 0), ticks):5.2f} % of all ticks)")

    # when: per time bin since the start
    t = np.arange(steps) * rec.dt
    bins = np.floor(t / TIME_BIN_S).astype(int)
    nb = bins.max() + 1
    top = [k for k in list(out["records"])[:5]]
    print(f"\n-- when (time since the episode's start, {TIME_BIN_S} s bins): % of the bin's ticks intervened")
    print("  bin_s      all   " + "  ".join(f"{k[:18]:>18s}" for k in top) + "   floor: est. converged")
    by_time = []
    for b in range(nb):
        sel = bins == b
        tt = inter[sel].size
        row = {"t0_s": b * TIME_BIN_S, "all": _pct(inter[sel].sum(), tt)}
        for key in top:
            row[key] = _pct(rec.is_first(key)[sel].sum(), tt)
        fl = rec.any_floor[sel]
        row["floor_converged_share"] = _pct((fl & rec.converged[sel]).sum(), fl.sum())
        row["converged_share"] = _pct(rec.converged[sel].sum(), tt)
        by_time.append(row)
        print(f"  {b * TIME_BIN_S:4.1f}  {row['all']:7.2f}   " + "  ".join(f"{row[k]:18.2f}" for k in top)
              + f"   {row['floor_converged_share']:6.1f} % of floor ticks; estimate converged on {row['converged_share']:5.1f} % of ticks")
    out["by_time"] = by_time

    # the estimate's convergence time per episode
    conv_any = rec.converged.any(0)
    first_conv = np.where(conv_any, rec.converged.argmax(0) * rec.dt, np.nan)
    fl = rec.any_floor
    out["converged_by_s"] = {"median": float(np.nanmedian(first_conv)) if conv_any.any() else None,
                             "p90": float(np.nanpercentile(first_conv, 90)) if conv_any.any() else None,
                             "never": int((~conv_any).sum())}
    print(f"\n-- the hover-thrust estimate: converged first at {out['converged_by_s']['median']} s median, "
          f"{out['converged_by_s']['p90']} s p90, never in {out['converged_by_s']['never']} episodes")
    pre = fl & ~rec.converged
    post = fl & rec.converged
    out["floor_ticks_before_convergence"] = int(pre.sum())
    out["floor_ticks_after_convergence"] = int(post.sum())
    print(f"   altitude.floor ticks before convergence {pre.sum()} ({_pct(pre.sum(), fl.sum()):.1f} %), after {post.sum()}")

    from robot_hrl.robots import CRAZYFLIE_2X

    weight_n = CRAZYFLIE_2X.weight_n  # the robot model's weight: the scale of the command's thrust
    cmd = rec.floor_cmd_n[fl]
    out["floor_clamped_ticks"] = int(rec.floor_clamped.sum())
    out["floor_cmd_below_half_weight_share"] = _pct(np.sum(cmd < 0.5 * weight_n), np.sum(np.isfinite(cmd)))
    print(f"   altitude.floor: the policy's thrust command below half its weight on {out['floor_cmd_below_half_weight_share']:.1f} % "
          f"of the floor ticks (median {np.nanmedian(cmd) / weight_n if cmd.size else float('nan'):.2f} weights); "
          f"clamped (not handed over) on {out['floor_clamped_ticks']} ticks")

    # where: height / vertical speed / tilt of the floor holds, against all ticks
    def hist(name, values_all, values_floor, edges):
        h_all = np.histogram(values_all, edges)[0]
        h_fl = np.histogram(values_floor, edges)[0]
        print(f"\n-- {name}: bin, ticks, floor-held ticks (% of the bin)")
        rows = []
        for j in range(len(edges) - 1):
            rows.append({"lo": float(edges[j]), "hi": float(edges[j + 1]), "ticks": int(h_all[j]), "floor": int(h_fl[j])})
            if h_all[j]:
                print(f"  [{edges[j]:+6.2f}, {edges[j + 1]:+6.2f})  {h_all[j]:8d}  {h_fl[j]:7d}  ({_pct(h_fl[j], h_all[j]):5.1f} %)")
        return rows

    out["floor_by_height"] = hist("true height, m", rec.z.ravel(), rec.z[fl], np.array([0, .3, .45, .6, .75, .9, 1.2, 1.5, 2.0, 3.0]))
    out["floor_by_vz"] = hist("vertical speed, m/s", rec.vz.ravel(), rec.vz[fl], np.array([-3, -1.5, -1, -.6, -.3, -.1, .1, .3, .6, 3]))
    out["floor_by_tilt"] = hist("tilt, deg", rec.tilt_deg.ravel(), rec.tilt_deg[fl], np.array([0, 5, 10, 15, 20, 25, 30, 35, 45, 90]))
    # the same for obstacles.approach
    if "obstacles.approach" in rec.key_code:
        oa = rec.is_first("obstacles.approach")
        out["approach_by_time"] = [_pct(oa[bins == b].sum(), oa.sum()) for b in range(nb)]

    # airframes
    if draws and args.randomize:
        ratio = draws["mass_scale"] / draws["thrust_coefficient_scale"]  # hover thrust over the nominal one
        edges = np.array([0.75, 0.85, 0.92, 0.97, 1.03, 1.08, 1.15, 1.4])
        print("\n-- per airframe: hover thrust over nominal (mass scale / rotor scale): episodes, % ticks intervened, "
              "% floor, success shielded / unshielded")
        rows = []
        per_ep = inter.mean(0)
        per_ep_fl = fl.mean(0)
        for j in range(len(edges) - 1):
            sel = (ratio >= edges[j]) & (ratio < edges[j + 1])
            if not sel.any():
                continue
            row = {"lo": float(edges[j]), "hi": float(edges[j + 1]), "episodes": int(sel.sum()),
                   "intervened_pct": float(100 * per_ep[sel].mean()), "floor_pct": float(100 * per_ep_fl[sel].mean()),
                   "success": float(np.mean(np.asarray(res.episode_success)[sel]))}
            if twin:
                row["success_unshielded"] = float(np.mean(np.asarray(twin.episode_success)[sel]))
            rows.append(row)
            print(f"  [{edges[j]:.2f}, {edges[j + 1]:.2f})  {row['episodes']:5d}  {row['intervened_pct']:6.2f}  "
                  f"{row['floor_pct']:6.2f}  {100 * row['success']:5.1f} / {100 * row.get('success_unshielded', float('nan')):5.1f}")
        out["by_airframe"] = rows

    # the failures
    if twin:
        s_on = np.asarray(res.episode_success)
        s_off = np.asarray(twin.episode_success)
        v_off = np.asarray(twin.episode_violated)
        lost = np.nonzero(~s_on & s_off)[0]
        both = np.nonzero(~s_on & ~s_off)[0]
        gained = np.nonzero(s_on & ~s_off)[0]
        print(f"\n-- outcomes: fail shielded only {len(lost)}, both fail {len(both)}, fail unshielded only {len(gained)} "
              f"(unshielded violating episodes: {np.nonzero(v_off)[0].tolist()})")
        held_most: dict[str, int] = {}
        held_last: dict[str, int] = {}
        late_hold = 0
        for i in lost:
            col = rec.first[:, i]
            if (col >= 0).any():
                codes, counts = np.unique(col[col >= 0], return_counts=True)
                key = rec.keys[codes[counts.argmax()]]
                held_most[key] = held_most.get(key, 0) + 1
                last_k = np.nonzero(col >= 0)[0][-1]
                lk = rec.keys[col[last_k]]
                held_last[lk] = held_last.get(lk, 0) + 1
                if last_k * rec.dt > args.episode_s - 1.0:
                    late_hold += 1
            else:
                held_most["(none)"] = held_most.get("(none)", 0) + 1
        out["lost_episodes"] = len(lost)
        out["lost_held_most"] = held_most
        out["lost_held_last"] = held_last
        out["lost_held_in_last_1s"] = late_hold
        out["both_fail"] = len(both)
        out["unshielded_violating"] = np.nonzero(v_off)[0].tolist()
        out["unshielded_violating_shielded_success"] = [bool(s_on[i]) for i in np.nonzero(v_off)[0]]
        print(f"   lost to the shield, by the unit that held them most: {held_most}")
        print(f"   ... by the unit of their last intervention: {held_last}; still held in the last 1 s: {late_hold}")
        frac_held = [float(rec.backup[:, i].mean()) for i in lost]
        if frac_held:
            print(f"   share of their ticks under the backup: median {np.median(frac_held):.2f}")
        out["success_unshielded"] = float(np.mean(s_off))
    return out


def plot(rec: Recorder, res, twin, path: str, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, n = rec.first.shape
    t = np.arange(steps) * rec.dt
    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    a = ax[0, 0]
    top = sorted(rec.records, key=lambda k: -rec.records[k])[:5]
    for key in top:
        a.plot(t, 100 * rec.is_first(key).mean(1), label=key)
    a.plot(t, 100 * (rec.first >= 0).mean(1), "k", lw=1.5, label="any")
    a.plot(t, 100 * rec.converged.mean(1), "k--", lw=1, label="hover-thrust estimate converged")
    a.set_xlabel("time since the episode's start, s")
    a.set_ylabel("% of episodes")
    a.set_title("interventions (first record of the tick) by time")
    a.legend(fontsize=7)
    fl = rec.any_floor
    a = ax[0, 1]
    a.hist2d(rec.vz[fl], rec.z[fl], bins=[40, 40], range=[[-2, 1], [0, 2]], cmap="viridis")
    a.set_xlabel("true vertical speed, m/s")
    a.set_ylabel("true height, m")
    a.set_title(f"altitude.floor holds ({fl.sum()} ticks)")
    a = ax[1, 0]
    edges = np.linspace(0, 60, 31)
    a.hist(rec.tilt_deg.ravel(), edges, alpha=0.5, label="all ticks", density=True)
    a.hist(rec.tilt_deg[fl], edges, alpha=0.5, label="floor-held ticks", density=True)
    a.set_xlabel("true tilt, deg")
    a.set_title("tilt")
    a.legend(fontsize=7)
    a = ax[1, 1]
    per_ep = 100 * (rec.first >= 0).mean(0)
    ok = np.asarray(res.episode_success)
    a.hist([per_ep[ok], per_ep[~ok]], bins=np.linspace(0, 100, 26), stacked=True, label=["success", "failed (shielded)"])
    a.set_xlabel("% of the episode's ticks intervened")
    a.set_ylabel("episodes")
    title = f"per episode: success {100 * ok.mean():.1f} %"
    if twin:
        title += f" (unshielded {100 * np.mean(twin.episode_success):.1f} %)"
    a.set_title(title)
    a.legend(fontsize=7)
    fig.suptitle(f"shield cost on the shipped goto, seed {args.seed}{', randomized' if args.randomize else ''}: "
                 f"{100 * (rec.first >= 0).mean():.2f} % of ticks intervened")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
