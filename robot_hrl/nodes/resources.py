"""Find shipped files (models, worlds, parameter files) from a source checkout or an install.

A relative path is tried against the working directory, then the package's share folder
(``<prefix>/share/robot_hrl``, where setup.py's data_files and colcon install them), then the
source checkout (editable installs). Shipped files are addressed as in the repository:
``models/worlds/demo.yaml``, ``models/crazyflie_goto.onnx``, ``launch/params/navigation.yaml``
(installed as ``share/robot_hrl/params/navigation.yaml``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from robot_hrl.errors import ConfigError

PACKAGE = "robot_hrl"
SOURCE_ROOT = Path(__file__).resolve().parents[2]
"""The checkout root when robot_hrl runs from source (editable install)."""


def share_dirs() -> list[Path]:
    dirs = []
    for prefix in {sys.prefix, sys.base_prefix, *_ament_prefixes()}:
        d = Path(prefix) / "share" / PACKAGE
        if d.is_dir():
            dirs.append(d)
    return dirs


def _ament_prefixes() -> list[str]:
    import os

    return [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]


def candidates(relative: str) -> list[Path]:
    rel = Path(relative)
    out = [Path.cwd() / rel, SOURCE_ROOT / rel]
    for share in share_dirs():
        out.append(share / rel)
        if rel.parts[:2] == ("launch", "params"):
            out.append(share / "params" / Path(*rel.parts[2:]))
    return out


def resolve_resource(path: str | Path, what: str = "file") -> Path:
    """An existing file for ``path``; raises ConfigError naming every place that was tried."""
    if path is None or str(path).strip() == "":
        raise ConfigError(f"no {what} was given")
    p = Path(str(path)).expanduser()
    if p.is_absolute():
        if p.is_file():
            return p
        raise ConfigError(f"{what} {str(p)!r} does not exist")
    tried = candidates(str(p))
    for c in tried:
        if c.is_file():
            return c.resolve()
    raise ConfigError(f"{what} {str(p)!r} was not found; tried: {', '.join(str(c) for c in tried)}")
