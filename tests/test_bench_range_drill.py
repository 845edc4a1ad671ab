"""benchmarks/bench_range_drill.py (issue #19's range source against a hostile planner): a short real run in PyBullet,
and its refusals of bad arguments with a message that names the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "bench_range_drill.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_a_short_drill_prints_its_counts():
    proc = _run("--first-seed", "300", "--last-seed", "304", "--along-axis")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if "reached the box" in ln]
    assert len(lines) == 2 and lines[0].startswith("through range_obstacles") and lines[1].startswith("unshielded")
    shielded, bare = (int(ln.split("reached the box")[1].split()[0]) for ln in lines)
    flights = int(lines[0].split("flights")[1].split()[0])
    assert flights >= 1 and shielded == 0 and bare >= 1  # along an axis the unit stops it; unshielded it hits


@pytest.mark.parametrize("args, message", [
    (("--first-seed", "10", "--last-seed", "10"), "--last-seed (10) must be larger than --first-seed (10)"),
    (("--recover-s", "-0.1"), "--recover-s must be a number of seconds >= 0"),
    (("--recover-s", "nan"), "--recover-s must be a number of seconds >= 0"),
    (("--time-s", "0"), "--time-s must be a flight length in seconds"),
    (("--time-s", "nan"), "--time-s must be a flight length in seconds"),
    (("--heading-from", "models/crazyflie_goto.onnx"), "not of a navigate level"),
    (("--heading-from", "models/missing.onnx"), "does not exist"),
    (("--unseen-travel-m", "-0.1"), "--unseen-travel-m must be a distance in metres >= 0 or 'off'"),
    (("--unseen-travel-m", "fast"), "--unseen-travel-m must be a distance in metres >= 0 or 'off'"),
    (("--unseen-within-m", "0"), "--unseen-within-m must be a distance in metres > 0"),
    (("--unknown-creep-m", "-0.1"), "--unknown-creep-m must be a distance in metres >= 0 or 'off'"),
    (("--unknown-creep-m", "slow"), "--unknown-creep-m must be a distance in metres >= 0 or 'off'"),
    (("--unknown-blind-creep-m", "-0.06"), "--unknown-blind-creep-m must be a distance in metres >= 0 or 'off'"),
    (("--unknown-blind-creep-m", "wide"), "--unknown-blind-creep-m must be a distance in metres >= 0 or 'off'"),
    (("--hold-turn-max-rate-dps", "0"), "--hold-turn-max-rate-dps must be a yaw rate in deg/s > 0 or 'off'"),
    (("--hold-turn-max-rate-dps", "spin"), "--hold-turn-max-rate-dps must be a yaw rate in deg/s > 0 or 'off'"),
    (("--past-corner", "--at-start"), "not allowed with argument"),
    (("--along-axis", "--past-corner"), "not allowed with argument"),
])
def test_bad_arguments_are_refused_with_the_fix(args, message):
    proc = _run(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_a_level_without_a_heading_is_refused(level_with_heading):
    """``--heading-from`` a level whose contract names no heading loop (the shipped one does): refused with the fix."""
    proc = _run("--heading-from", str(level_with_heading(None, "plain.onnx")))
    assert proc.returncode == 2 and "has no heading section" in proc.stderr, proc.stderr


def test_help_explains_itself():
    proc = _run("--help")
    assert proc.returncode == 0 and "--recover-s" in proc.stdout and "--time-s" in proc.stdout and "PyBullet" in proc.stdout
