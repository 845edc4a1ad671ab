"""How often the shield's range source lets a hostile planner reach a box nobody mapped (issue #19, issue #16).

The drill of ``sim/range_drill.py`` (the one ``tests/test_shield_range_obstacles.py`` flies): in PyBullet with its
ray-tested rangers, a hostile planner drives the shipped goto skill at a box the shield's world file does not hold,
from a random bearing at a random point of the box with a random yaw (``--along-axis``: along a ranger's axis).
Each flight is judged from PyBullet's contacts. The same flights are flown unshielded and through the range source,
optionally with the backup's debounce overridden (``--recover-s``) or longer flights (``--time-s``), and the script
prints the hits of each. ``--at-start``: each flight starts 0.3-0.6 m from the box with the way to it between two
rangers' cones (nothing seen of it yet: the ``unseen`` rule's case); ``--unseen-travel-m off`` flies without that rule.
``--hold-turn-max-rate-dps DPS|off`` overrides how a hold keeps the heading loop's yaw
torque (off: it damps the yaw). ``--unknown-creep-m M|off`` overrides the ``unknown`` rule's creep (off: the rule is
off); ``--unknown-blind-creep-m M|off`` its creep while no cone looks the way the robot goes. ``--past-corner``:
the planner flies an arc through a corner of the box; under the level's heading loop the robot turns along it, and the
corner can stay between the front cone and a side cone all the way in (the case the ``unknown`` rule was written for;
the drill's contacts are the same with and without it: benchmarks/README.md, "Issue #19: the hold's ratchet, and
stall escapes").

    python benchmarks/bench_range_drill.py --first-seed 300 --last-seed 460
    python benchmarks/bench_range_drill.py --first-seed 300 --last-seed 460 --along-axis --time-s 15 --no-bare
    python benchmarks/bench_range_drill.py --first-seed 300 --last-seed 460 --recover-s 0.1
    python benchmarks/bench_range_drill.py --first-seed 300 --last-seed 400 --at-start --heading-from models/crazyflie_navigate.onnx
    python benchmarks/bench_range_drill.py --first-seed 300 --last-seed 400 --past-corner --heading-from models/crazyflie_navigate.onnx \
        --unknown-creep-m off
    python benchmarks/bench_range_drill.py --first-seed 300 --last-seed 700 --at-start --heading-from models/crazyflie_navigate.onnx \
        --hold-turn-max-rate-dps off
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--first-seed", type=int, default=300, help="the first drill seed (seeds without a free run-up are skipped)")
    ap.add_argument("--last-seed", type=int, default=460, help="one past the last drill seed")
    ap.add_argument("--recover-s", type=float, default=None,
                    help="override backup.recover_s (the hold's debounce) in the shield; default: the range source's "
                         "(sim.navigate_shield.RANGE_SHIELD_BACKUP)")
    ap.add_argument("--hold-turn-max-rate-dps", default=None, metavar="DPS|off",
                    help="override backup.hold_turn_max_rate_dps (a hold keeps the refused command's yaw torque while the "
                         "yaw rate is at most this); off: the hold damps the yaw (the range source before 2026-11-30, "
                         "'Issue #19: the hold turns the cone'); default: the range source's")
    ap.add_argument("--time-s", type=float, default=5.0,
                    help="how long each flight lasts, s (the test's 5; longer: a slow walk toward the box has time to arrive)")
    mode = ap.add_mutually_exclusive_group()  # how the hostile planner flies at the box (default: from any bearing)
    mode.add_argument("--along-axis", action="store_true", help="fly along a ranger's axis instead of from any bearing")
    mode.add_argument("--at-start", action="store_true",
                      help="start 0.3-0.6 m from the box, the way to it between two rangers' cones (nothing seen of it yet)")
    mode.add_argument("--past-corner", action="store_true",
                      help="fly an arc (radius 0.4-2 m) through a corner of the box instead of a line; with --heading-from the "
                           "robot turns along it, so the corner can stay between two cones")
    ap.add_argument("--unseen-travel-m", default=None, metavar="M|off",
                    help="override range_obstacles.unseen_travel_m (the stopping travel allowed toward a bearing no cone "
                         "has swept); off: the rule is off; default: the range source's (RANGE_SHIELD_SECTION)")
    ap.add_argument("--unknown-creep-m", default=None, metavar="M|off",
                    help="override range_obstacles.unknown_creep_m (toward a cell no cone has seen empty, the stopping "
                         "travel stops min_clearance_m short of it or is at most this); off: the rule is off; default: "
                         "the range source's (RANGE_SHIELD_SECTION)")
    ap.add_argument("--unknown-blind-creep-m", default=None, metavar="M|off",
                    help="override range_obstacles.unknown_blind_creep_m (while no cone looks the way the robot goes, "
                         "toward the unknown cells in its path the stopping travel ends short of the cell or at most "
                         "this beyond it); off: the creep holds whatever the yaw; default: the range source's (off)")
    ap.add_argument("--unseen-within-m", type=float, default=None, metavar="M",
                    help="override range_obstacles.unseen_within_m: the rule acts only within this distance of the "
                         "start; default: the range source's")
    ap.add_argument("--no-bare", action="store_true", help="skip the unshielded flights")
    ap.add_argument("--heading-from", default=None, metavar="LEVEL.onnx",
                    help="run the heading loop a navigate level was trained with (its contract's heading section; "
                         "robot_hrl.runtime.heading) under the skill, as the skill node does under that level")
    args = ap.parse_args(argv)
    if args.last_seed <= args.first_seed:
        ap.error(f"--last-seed ({args.last_seed}) must be larger than --first-seed ({args.first_seed})")
    if args.recover_s is not None and not args.recover_s >= 0.0:
        ap.error(f"--recover-s must be a number of seconds >= 0, got {args.recover_s}")
    from sim.navigate_shield import number_or_off

    section = {}  # the range section's keys these options override
    for key, given in (("unseen_travel_m", args.unseen_travel_m), ("unknown_creep_m", args.unknown_creep_m),
                       ("unknown_blind_creep_m", args.unknown_blind_creep_m)):
        if given is None:
            continue
        try:
            section[key] = number_or_off(given)
        except ValueError:
            section[key] = math.nan
        if not (section[key] is None or section[key] >= 0.0):
            ap.error(f"--{key.replace('_', '-')} must be a distance in metres >= 0 or 'off', got {given!r}")
    if args.unseen_within_m is not None:
        if not args.unseen_within_m > 0.0:
            ap.error(f"--unseen-within-m must be a distance in metres > 0, got {args.unseen_within_m}")
        section["unseen_within_m"] = args.unseen_within_m
    if not 0.0 < args.time_s <= 120.0:
        ap.error(f"--time-s must be a flight length in seconds, 0 < s <= 120, got {args.time_s}")

    from tqdm import tqdm

    from robot_hrl.runtime import OnnxPolicy
    from sim.navigate_shield import RANGE_SHIELD_BACKUP, RANGE_SHIELD_SECTION
    from sim.range_drill import fly_at_a_box

    policy = OnnxPolicy(REPO / "models" / "crazyflie_goto.onnx", provider="cpu")
    heading = None
    if args.heading_from is not None:
        from robot_hrl.errors import RobotHrlError
        from robot_hrl.runtime.heading import heading_of_level

        try:
            heading = heading_of_level(args.heading_from, policy, required=True).spec
        except RobotHrlError as exc:
            ap.error(f"--heading-from {args.heading_from}: {exc}")
    backup = {} if args.recover_s is None else {"recover_s": args.recover_s}  # the backup's keys these options override
    if args.hold_turn_max_rate_dps is not None:
        try:
            rate = number_or_off(args.hold_turn_max_rate_dps)
        except ValueError:
            rate = math.nan
        if not (rate is None or rate > 0.0):
            ap.error(f"--hold-turn-max-rate-dps must be a yaw rate in deg/s > 0 or 'off', got {args.hold_turn_max_rate_dps!r}")
        backup["hold_turn_max_rate_dps"] = rate
    backup = backup or None
    settings = [("through range_obstacles", ("range_obstacles",))] + ([] if args.no_bare else [("unshielded", ())])
    t0 = time.perf_counter()
    for label, units in settings:
        flights, hits = 0, []
        for seed in tqdm(range(args.first_seed, args.last_seed), desc=label, unit="seed"):
            r = fly_at_a_box(policy, seed, units, any_bearing=not (args.along_axis or args.at_start or args.past_corner),
                             past_corner=args.past_corner, backup=backup if units else None,
                             time_s=args.time_s, heading=heading, at_start=args.at_start, section=section or None)
            if r is None:
                continue
            flights += 1
            if r["collided"]:
                hits.append((seed, r["room"], r["counts"].get("stop", 0)))
        print(f"{label:26s} flights {flights:4d}  reached the box {len(hits):4d}"
              + (f"  (seed, room, stop rejections): {hits}" if units and hits else ""))
    debounce = RANGE_SHIELD_BACKUP["recover_s"] if args.recover_s is None else args.recover_s
    turn = {**RANGE_SHIELD_BACKUP, **(backup or {})}["hold_turn_max_rate_dps"]
    flown = {**RANGE_SHIELD_SECTION, **section}  # what the shield flew (fly_at_a_box merges the same way)
    unseen, within = flown.get("unseen_travel_m"), flown.get("unseen_within_m")
    where = "from the start, between two cones" if args.at_start else "along an arc past a corner" if args.past_corner else "along an axis" if args.along_axis else "any bearing"
    print(f"seeds {args.first_seed}-{args.last_seed - 1}, {where}, unseen_travel_m {unseen}"
          + (f" within {within:g} m of the start" if unseen is not None and within is not None else "")
          + f", unknown_creep_m {flown.get('unknown_creep_m')}, unknown_blind_creep_m {flown.get('unknown_blind_creep_m')}, "
          f"flights of {args.time_s:g} s, debounce {debounce:g} s, a hold turns as commanded "
          + ("never" if turn is None else f"within {turn:g} deg/s")
          + (f", heading loop {heading.mode} (lead {heading.lead_s:g} s, yaw rate command within {heading.max_yaw_rate_radps:g} rad/s; 0: no limit)" if heading is not None else "") + f"; {time.perf_counter() - t0:.0f} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
