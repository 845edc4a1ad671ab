"""Rogue /cmd_wrench writer drill (issue #16's figures): the demo mission on the real node graph while a second
process writes full thrust from a random moment, stamped 0, with its wall clock, or with the current /clock;
violations judged from PyBullet's ground truth (sim/rogue_drill.py does the flying). Target: 0 flights with a
violation, every mission completed.

    python benchmarks/bench_rogue_drill.py                                   # sim/rogue_drill.py's defaults
    python benchmarks/bench_rogue_drill.py --flights 12 --stamp zero,wall,clock --seed 1

Every option is sim/rogue_drill.py's (``--help``); this script prints the 1-min load average around the run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sim.rogue_drill import main as drill_main  # noqa: E402


def main(argv=None) -> int:
    if {"-h", "--help"} & set(sys.argv[1:] if argv is None else argv):
        return drill_main(argv)
    print(f"load1 before: {os.getloadavg()[0]:.2f}", flush=True)
    rc = drill_main(argv)
    print(f"load1 after: {os.getloadavg()[0]:.2f}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
