"""The backup's vertical flow (robot_hrl/robots/quadrotor/shield/vertical_flow.py) against the real backup on PyBullet.

The altitude unit passes a command whose stopping box breaks the floor (the ceiling) when the flow after it (the
command for one tick, then the backup's hold, simulated forward on the weakest (strongest) airframe the model allows,
the slowest and the fastest motor) keeps the band (docs/safety.md, "The backup's vertical flow"). The flow claims a
lower (an upper) bound on the height. This flies exactly that on PyBullet: random starts 0.05-0.5 m up (a third near
the band's top, 1.2-1.8 m), -0.6 to 1 m/s vertically, half of them moving up to 0.5 m/s horizontally and tilted up to
14 deg, a random first thrust (a quarter of them a cut to 0), each on an airframe drawn from the training's
randomization (mass 27-36 g, rotors 0.9-1.1, motors 0.02-0.15 s, 0-1 tick of latency, the steady disturbance, the
battery), then the real ``BackupController`` holding the target the shield sets; and compares the lowest and the
highest height reached with the flows' from the same state, through the shield's own path
(``DynamicsModel.backup_flow_lowest`` / ``backup_flow_highest``, a fresh shield: nothing identified).

    python benchmarks/bench_vertical_flow.py --cases 200 --seed 0

Prints: the cases, how many the flow bounded (its lowest at or below PyBullet's, 1 mm for the integration), the worst
and the median margin (PyBullet's lowest less the flow's: what the flow gives away); the same from above (the ceiling's
flow, ``DynamicsModel.backup_flow_highest`` on the strongest airframe: its highest at or above PyBullet's); and the
flow's cost per call.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TOLERANCE_M = 1e-3
"""The flow integrates at the control period, PyBullet at 500 Hz: a lowest height this much above PyBullet's still counts as
bounded."""


def compare(cases: int, seed: int, seconds: float = 2.5, progress: bool = False) -> list[dict]:
    """``cases`` random starts flown on PyBullet and judged by the flow; one row per case."""
    from robot_hrl.geometry import quat_from_euler_rpy
    from robot_hrl.robots import CRAZYFLIE_2X
    from robot_hrl.robots.quadrotor.params import STANDARD_GRAVITY_MPS2
    from robot_hrl.robots.quadrotor.shield.backup import BackupController
    from robot_hrl.safety import Shield, load_shield_config
    from robot_hrl.safety.frames import rotation_from_quat
    from robot_hrl.safety.units.base import Tick
    from robot_hrl.world import load_world
    from sim.pybullet import PyBulletQuadrotorSim, RandomizationCfg

    world = load_world(REPO / "models" / "worlds" / "demo.yaml")
    cfg = load_shield_config()
    shield = Shield(cfg, CRAZYFLIE_2X, world, 1.0)
    m, b, a = shield.model, cfg.backup, shield.unit("altitude")
    lo_t, hi_t = a.z_lo + b.hold_inset_m, a.z_hi - b.hold_inset_m
    rnd = RandomizationCfg.from_training()
    rng = np.random.default_rng(seed)
    rows = []
    it = range(cases)
    if progress:
        from tqdm import tqdm

        it = tqdm(it, desc="flows", unit="case")
    for i in it:
        z0 = float(rng.uniform(1.2, 1.8) if i % 3 == 2 else rng.uniform(0.05, 0.5))  # a third near the band's top
        vz0 = float(rng.uniform(-0.6, 1.0))
        vh = rng.uniform(-0.5, 0.5, 2) if i % 2 else np.zeros(2)  # half of them moving and tilted
        rpy = (rng.uniform(-0.25, 0.25, 2) if i % 2 else np.zeros(2)).tolist() + [0.0]
        first = 0.0 if rng.random() < 0.25 else float(rng.uniform(0.0, 0.55))  # a thrust cut, or any thrust
        sim = PyBulletQuadrotorSim(CRAZYFLIE_2X, world, control_hz=1.0 / m.dt, seed=int(rng.integers(1 << 30)),
                                   randomization=rnd)
        try:
            st = sim.reset(np.array([2.0, 2.3, z0]), np.array(quat_from_euler_rpy(*rpy)),
                           linear_velocity_w=np.array([vh[0], vh[1], vz0]))
            motor = float(sim.dynamics.mass_kg) * STANDARD_GRAVITY_MPS2  # the rotors start at the airframe's hover speed
            t = Tick()
            t.dt = m.dt
            t.has_state = True
            t.p, t.v, t.w = st.position_w.tolist(), st.linear_velocity_w.tolist(), st.angular_velocity_b.tolist()
            t.r = rotation_from_quat(*st.quat_wxyz.tolist())
            t.cmd = [first, 0.0, 0.0, 0.0]
            t.prev = [motor, 0.0, 0.0, 0.0]  # the motors have followed the hover command the start settled on
            t.est = [motor, 0.0, 0.0, 0.0]
            t0 = time.perf_counter()
            predicted = m.backup_flow_lowest(t, first, lo_t, hi_t, math.inf)
            flow_s = time.perf_counter() - t0
            predicted_high = m.backup_flow_highest(t, first, lo_t, hi_t, -math.inf)
            bc = BackupController(m, cfg)
            lowest, highest, target = z0, z0, None
            for k in range(int(round(seconds / m.dt))):
                if k == 0:
                    w = [first, 0.0, 0.0, 0.0]
                else:
                    if target is None:  # the shield's safe_position: the point at the takeover, inside the band
                        p = st.position_w
                        target = [float(p[0]), float(p[1]), min(max(float(p[2]), lo_t), hi_t)]
                    w = bc.command(st.position_w.tolist(), st.linear_velocity_w.tolist(),
                                   rotation_from_quat(*st.quat_wxyz.tolist()), st.angular_velocity_b.tolist(), target)
                st = sim.step(np.array(w))
                lowest = min(lowest, float(st.position_w[2]))
                highest = max(highest, float(st.position_w[2]))
            rows.append({"case": i, "z0": z0, "vz0": vz0, "vh": float(np.hypot(*vh)), "first_n": first, "flow_m": predicted,
                         "pybullet_m": lowest, "margin_m": lowest - predicted, "flow_s": flow_s,
                         "flow_high_m": predicted_high, "pybullet_high_m": highest, "margin_high_m": predicted_high - highest,
                         "airframe": {"mass_kg": float(sim.dynamics.mass_kg), **{k_: float(v) for k_, v in sim.dynamics.chain_parameters.items()}}})
        finally:
            sim.close()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=200, help="random starts, each on its own airframe (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the starts and the airframes")
    args = ap.parse_args(argv)
    if args.cases < 1:
        ap.error(f"--cases must be at least 1, got {args.cases}")
    rows = compare(args.cases, args.seed, progress=True)
    margins = np.array([r["margin_m"] for r in rows])
    bounded = int(np.sum(margins >= -TOLERANCE_M))
    print(f"== the backup's vertical flow against the real backup on PyBullet, seed {args.seed}: {len(rows)} starts")
    print(f"bounded              {bounded} of {len(rows)} (the flow's lowest at or below PyBullet's, {TOLERANCE_M * 1e3:.0f} mm for the integration)")
    print(f"margin               worst {margins.min() * 100:.2f} cm, median {np.median(margins) * 100:.2f} cm, "
          f"p90 {np.percentile(margins, 90) * 100:.2f} cm (PyBullet's lowest less the flow's)")
    worst = rows[int(np.argmin(margins))]
    print(f"  tightest: z0 {worst['z0']:.3f} m, vz0 {worst['vz0']:.3f} m/s, first {worst['first_n']:.3f} N, airframe "
          f"{ {k: round(v, 4) for k, v in worst['airframe'].items()} }")
    high = np.array([r["margin_high_m"] for r in rows])
    bounded_high = int(np.sum(high >= -TOLERANCE_M))
    print(f"bounded above        {bounded_high} of {len(rows)} (the flow's highest, on the strongest airframe, at or above PyBullet's)")
    print(f"margin above         worst {high.min() * 100:.2f} cm, median {np.median(high) * 100:.2f} cm (the flow's highest less PyBullet's)")
    cost = np.array([r["flow_s"] for r in rows]) * 1e6
    print(f"flow cost            median {np.median(cost):.0f} us per call (both motors), p90 {np.percentile(cost, 90):.0f} us")
    return 0 if bounded == len(rows) and bounded_high == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
