"""How far the backup's hold brings the robot back past the point where it took over (a gap in the stopping box).

The stopping box counts the motion toward each side of the box: for a robot moving away from a side, its extent on
that side is the command's push alone (``DynamicsModel.stopping_distance``: ``linear_s max(v, 0) + linear_s2
max(a, 0)``, 0 for a pure motion away). The backup holds the point where it took over, so a robot moving away
overshoots and comes back, and can come back past that point. This prints, per motor time constant, 0-1 tick of
latency and direction:

* the backup's linear-loop model (``backup_linear_stop_s`` from a speed of -1 m/s: the farthest it comes back past the
  takeover point, per m/s);
* the real backup (``BackupController``) flying PyBullet's nominal airframe with that motor, from 1 m/s away: how
  far it comes back past the takeover point.

    python benchmarks/bench_backup_undershoot.py

Found 2026-11-28 (benchmarks/README.md, "Issue #16: whole missions"); not yet counted by the stopping box.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speed", type=float, default=1.0, help="the speed away from the takeover point, m/s")
    ap.add_argument("--seconds", type=float, default=4.0, help="how long the hold is flown")
    args = ap.parse_args(argv)
    if not args.speed > 0:
        ap.error(f"--speed must be a speed > 0 m/s, got {args.speed}")
    if not args.seconds > 0:
        ap.error(f"--seconds must be > 0, got {args.seconds}")
    from robot_hrl.robots import CRAZYFLIE_2X
    from robot_hrl.robots.quadrotor.shield.backup import BackupController
    from robot_hrl.robots.quadrotor.shield.model import backup_linear_stop_s
    from robot_hrl.safety import Shield, load_shield_config
    from robot_hrl.safety.frames import rotation_from_quat
    from robot_hrl.world import load_world
    from sim.pybullet import PyBulletQuadrotorSim, RandomizationCfg

    world = load_world(REPO / "models" / "worlds" / "demo.yaml")
    cfg = load_shield_config()
    shield = Shield(cfg, CRAZYFLIE_2X, world, 1.0)
    b = cfg.backup
    delay = shield.model.dt + shield.model.latency
    print(f"== the backup's hold, taking over at {args.speed} m/s away from a side: how far it comes back past the takeover point")
    for tau in (0.02, 0.05, 0.1, 0.15):
        lags_h = (tau, b.rate_gain_per_s / b.attitude_gain_per_s2)
        model_h = backup_linear_stop_s(b.position_gain_per_s, b.velocity_gain_per_s, lags_h, delay, -args.speed, 0.0)
        model_v = backup_linear_stop_s(b.position_gain_per_s, b.velocity_gain_per_s, (tau,), delay, -args.speed, 0.0)
        for lat in (0, 1):
            rnd = RandomizationCfg.from_training(
                mass_scale=(1, 1), inertia_scale=(1, 1), thrust_coefficient_scale=(1, 1), torque_coefficient_scale=(1, 1),
                motor_time_constant_s=(tau, tau), battery_open_circuit_v=(4.0, 4.0), battery_resistance_ohm=(0.03, 0.03),
                max_disturbance_force_n=0.0, max_disturbance_torque_nm=0.0, action_latency_steps=(lat, lat))
            back = []
            for axis in (0, 2):
                sim = PyBulletQuadrotorSim(CRAZYFLIE_2X, world, control_hz=100.0, seed=0, randomization=rnd)
                try:
                    p0 = np.array([2.0, 2.3, 1.0])
                    v0 = np.zeros(3)
                    v0[axis] = args.speed
                    st = sim.reset(p0, np.array([1.0, 0, 0, 0]), linear_velocity_w=v0)
                    bc = BackupController(shield.model, cfg)
                    lo = 0.0
                    for _ in range(int(round(args.seconds * 100))):
                        w = bc.command(st.position_w.tolist(), st.linear_velocity_w.tolist(),
                                       rotation_from_quat(*st.quat_wxyz.tolist()), st.angular_velocity_b.tolist(), p0.tolist())
                        st = sim.step(np.array(w))
                        lo = min(lo, float(st.position_w[axis] - p0[axis]))
                    back.append(-lo)
                finally:
                    sim.close()
            print(f"motor {tau:.2f} s, latency {lat}: horizontal {back[0]:.3f} m (linear model {model_h:.3f}), "
                  f"vertical {back[1]:.3f} m (linear model {model_v:.3f}); the stopping box counts 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
