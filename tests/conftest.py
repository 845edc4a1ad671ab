"""Shared fixtures, and the hypothesis profiles.

``HYPOTHESIS_PROFILE=ci`` (exported by ``.ci/run``): every property test draws the same examples on every run
(``derandomize``: seeded from the test's name), so a CI run is reproducible and a new falsifying example is found by a
developer's run, not by the merge gate. The default profile draws new examples on every run (``make test`` here).
The fault drills and hostile-input tests still pick the moment, the value and the order at random; only the seed is
fixed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def demo_world_path(repo_root) -> Path:
    return repo_root / "models" / "worlds" / "demo.yaml"


@pytest.fixture
def level_with_heading(tmp_path):
    """``make(heading, name)``: a copy of the shipped navigate level under ``tmp_path`` whose contract's ``heading``
    section is ``heading`` (a HeadingSpec's fields as a dict, or None: no heading loop); the weights are the shipped ones."""

    def make(heading, name: str = "level.onnx") -> Path:
        import json

        import onnx

        from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY

        model = onnx.load(REPO_ROOT / "models/crazyflie_navigate.onnx")
        entry = next(p for p in model.metadata_props if p.key == NAVIGATE_METADATA_KEY)
        data = json.loads(entry.value)
        data["heading"] = heading
        entry.value = json.dumps(data)
        onnx.save(model, tmp_path / name)
        return tmp_path / name

    return make


@pytest.fixture(scope="session")
def recurrent_run(tmp_path_factory, repo_root):
    """The run directory of a small recurrent navigate level (tests/recurrent_level.py), its export at ``nav.onnx``:
    built once for every test file that flies it."""
    from recurrent_level import build_recurrent_level

    return build_recurrent_level(tmp_path_factory.mktemp("nav_gru"), repo_root)
