"""The motor-lag unit's bound against the true motor (issue #16): randomized airframes on the firmware chain.

Runs ``sim/safety_eval.py``'s closed loop (the shield with the ``motor_lag`` unit listed, as shipped) and reads, every
tick of every flight, the motor the attitude limit assumes (``DynamicsModel.torque_motor_tau``) next to the
airframe's own (``motor_time_constant_s``, drawn over 0.02-0.15 s). Prints, per policy:

* ticks on which the bound was below the true motor (target 0) and the least bound / true ratio;
* the share of ticks narrowed below the design motor, the mean bound, and both at the goal step (the end of the
  warm-up) for the trained policy.

    python benchmarks/bench_motor_lag.py --episodes 1000 --seed 0
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from sim import safety_eval  # noqa: E402


def measure(policy: str, episodes: int, seed: int, warm_s: float, randomize: bool) -> dict:
    acc = {"ticks": 0, "below": 0, "narrowed": 0, "bound_sum": 0.0, "min_ratio": math.inf, "at_goal": None}

    def observe(k, env, outs, shields):
        true = env.params["motor_time_constant_s"][:, 0].double().numpy()
        bound = np.array([s.model.torque_motor_tau for s in shields])
        design = shields[0].model.design_motor_tau
        acc["ticks"] += len(bound)
        acc["below"] += int(np.sum(bound < true))
        acc["narrowed"] += int(np.sum(bound < design))
        acc["bound_sum"] += float(bound.sum())
        acc["min_ratio"] = min(acc["min_ratio"], float(np.min(bound / true)))
        if k == 0:
            acc["at_goal"] = (float(np.mean(bound < design)), float(bound.mean()), float(true.mean()))

    t0 = time.time()
    res = safety_eval.run(policy, episodes, 5.0, randomize=randomize, seed=seed, observer=observe, warm_s=warm_s,
                          progress=True)
    acc["wall_s"] = time.time() - t0
    acc["result"] = res
    return acc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=1000, help="episodes per policy (one batched env each)")
    ap.add_argument("--seed", type=int, default=0, help="the evaluation's seed (airframes, starts, goals)")
    ap.add_argument("--policies", default="trained,adversary", help="comma-separated: trained, adversary, random, pd")
    ap.add_argument("--warm-s", type=float, default=3.0, help="the trained policy's hover before its goal, s")
    ap.add_argument("--nominal", action="store_true", help="the nominal airframe (0.05 s motors) instead of randomized ones")
    args = ap.parse_args(argv)
    for policy in args.policies.split(","):
        warm = args.warm_s if policy in ("trained", "pd") else 0.0
        a = measure(policy, args.episodes, args.seed, warm, not args.nominal)
        r = a["result"]
        print(r.summary())
        line = (f"== {policy}, {'nominal' if args.nominal else 'randomized'}, seed {args.seed}, {args.episodes} episodes: "
                f"bound below the true motor on {a['below']} of {a['ticks']} ticks (least bound/true {a['min_ratio']:.3f}); "
                f"narrowed on {100.0 * a['narrowed'] / a['ticks']:.1f} % of ticks, mean bound {a['bound_sum'] / a['ticks']:.4f} s")
        if warm > 0.0 and a["at_goal"] is not None:
            share, mean, true = a["at_goal"]
            line += f"; at the goal step narrowed {100.0 * share:.1f} %, mean bound {mean:.4f} s (true mean {true:.4f} s)"
        print(line + f"; violations {r.fence_violations}/{r.altitude_violations}/{r.collisions}; {a['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
