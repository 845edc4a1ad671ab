"""Fault drill of the demo mission: odometry lost, future-stamped, teleporting or frozen from a random moment,
violations judged from PyBullet's ground truth (sim/fault_drill.py). Target: 0 flights with a violation.

    python benchmarks/bench_fault_drill.py                   # 60 flights (15 per fault), seed 0
    python benchmarks/bench_fault_drill.py --flights 150 --seed 3
    python benchmarks/bench_fault_drill.py --heading-from models/crazyflie_navigate.onnx   # under the level's yaw loop

Prints the nominal flight, each flight with a violation, and per fault: flights, flights with a
violation, the time from the fault to motors off (median, max), and how far the shield's dead reckoning
was from the true position when the motors went off (median, max). Also the shield's interventions on
the nominal mission (ticks changed / ticks). With the 1-min load average: wall times on the shared
machine are noisy, the figures judged here are not timings.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sim.fault_drill import DEMO_TASK, FAULTS, drill, heading_rig  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flights", type=int, default=60, help="flights with a fault, spread over the faults (default 60)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, from {','.join(FAULTS)}")
    ap.add_argument("--heading-from", metavar="LEVEL.onnx", default=None,
                    help="run the heading loop a navigate level names under the skill (as the skill node does under "
                         "planner:=learned), e.g. models/crazyflie_navigate.onnx")
    args = ap.parse_args(argv)
    faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
    if any(f not in FAULTS for f in faults):
        ap.error(f"faults must come from {list(FAULTS)}")
    load = open("/proc/loadavg").read().split()[0] if Path("/proc/loadavg").exists() else "?"
    t0 = time.perf_counter()
    rig = heading_rig(ap, args.heading_from)
    nominal, flights = drill(rig, args.flights, args.seed, faults, DEMO_TASK)
    wall = time.perf_counter() - t0
    ticks = sum(nominal.mode_ticks.values())
    print(f"task: {DEMO_TASK!r}; seed {args.seed}; {len(flights)} flights with a fault; wall {wall:.0f} s; "
          f"load average (1 min) at start {load}"
          + (f"; heading loop of {args.heading_from}" if args.heading_from else ""))
    print(f"nominal: {nominal.duration_s:.1f} s, planner {nominal.planner_state}, violations {nominal.violations}; "
          f"shield changed {nominal.ticks_intervened} of {ticks} ticks ({100 * nominal.ticks_intervened / max(ticks, 1):.2f} %), "
          f"modes {nominal.mode_ticks}")
    for f in flights:
        if not f.ok:
            print(f"  VIOLATION {f.fault} at {f.fault_at_s:.2f} s (seed {f.seed}): {f.violations}, ended at {f.final_position_w}")
    for name in faults:
        fs = [f for f in flights if f.fault == name]
        stops = [f.motors_off_s - f.fault_at_s for f in fs if f.motors_off_s is not None and f.motors_off_s >= f.fault_at_s]
        errs = [f.reckoning_error_m for f in fs if f.reckoning_error_m is not None]
        refused = sum(sum(f.odometry_refusals.values()) for f in fs)
        print(f"{name:13s} flights {len(fs):3d}  with a violation {sum(not f.ok for f in fs):3d}  "
              f"fault -> motors off median {np.median(stops):.2f} s max {max(stops):.2f} s  "
              f"dead reckoning off at motors off median {np.median(errs) if errs else float('nan'):.3f} m "
              f"max {max(errs) if errs else float('nan'):.3f} m  samples refused {refused}")
    bad = sum(not f.ok for f in flights)
    print(f"total: {len(flights)} flights, {bad} with a violation (target 0)")
    return 0 if bad == 0 and nominal.ok else 1


if __name__ == "__main__":
    sys.exit(main())
