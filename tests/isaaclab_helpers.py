"""Shared by the Isaac Lab tests (tests/test_isaaclab_*.py): skip without Isaac Lab, stand-in assets with it.

The Isaac Lab tests run in the Python 3.12 venv that ``.ci/isaaclab`` builds (``pytest -m isaaclab``);
in the main venv they are skipped. Isaac Lab reads ``ISAACSIM_ASSET_ROOT`` when ``isaaclab.utils.assets``
is first imported, so :func:`use_stand_in_assets` runs at the test module's import, before any Isaac Lab
import; it keeps a root that is already set (``.ci/isaaclab`` sets one).
"""

from __future__ import annotations

import os

import pytest

from sim.isaaclab_adapter import isaaclab_available

HAVE_ISAACLAB = isaaclab_available()
requires_isaaclab = pytest.mark.skipif(not HAVE_ISAACLAB, reason="Isaac Lab is not installed (the .ci/isaaclab venv runs these)")
TASK = "Isaac-Cartpole-Direct"


def use_stand_in_assets() -> str | None:
    """Point ISAACSIM_ASSET_ROOT at the stand-in assets (written if missing) unless it is set; return it."""
    if not HAVE_ISAACLAB:
        return None
    from sim.isaaclab_adapter.assets import ASSET_ROOT_ENV, default_asset_root, ensure_assets

    if not os.environ.get(ASSET_ROOT_ENV):
        os.environ[ASSET_ROOT_ENV] = str(ensure_assets(default_asset_root()))
    return os.environ[ASSET_ROOT_ENV]
