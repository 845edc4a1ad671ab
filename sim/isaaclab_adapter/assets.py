"""Local stand-ins for the Nucleus USD assets that Isaac Lab's tasks load.

Every Isaac Lab asset, the ground plane included, is a USD file under the Nucleus asset root
(``isaaclab.utils.assets.NUCLEUS_ASSET_ROOT_DIR``), which a machine without access to NVIDIA's
servers cannot reach. Isaac Lab reads that root from ``ISAACSIM_ASSET_ROOT`` at import time,
so pointing the variable at a directory with files at the same relative paths makes the
registered task configs work unchanged. This module writes such files with ``pxr`` and
``UsdPhysics`` (no Isaac Sim needed):

- ``Isaac/IsaacLab/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda``:
  ``sim_utils.GroundPlaneCfg``'s default (Isaac Lab 3.0,
  ``isaaclab/sim/spawners/from_files/from_files_cfg.py``). Its spawner binds the physics
  material to the first ``Plane`` prim below the spawned prim and fails without one
  (``from_files.py: spawn_ground_plane``), so the stand-in is a ``UsdGeom.Plane`` with
  ``CollisionAPI``; it has no ``Environment`` child, so the spawner's grid-texture rescaling
  is skipped.
- ``Isaac/IsaacLab/Robots/Classic/Cartpole/cartpole.usd``: ``isaaclab_assets.robots.cartpole.CARTPOLE_CFG``.
  Isaac Lab's asset is converted from IsaacGymEnvs' ``assets/urdf/cartpole.urdf``; the stand-in
  follows that URDF (link and joint names, boxes, masses, joint axes and limits; source below).

These are stand-ins, not the assets: no visual materials, and inertias computed as solid boxes
from the URDF's collision boxes and masses (the URDF gives masses only; PhysX does the same
from a collider when a mass has no inertia). ``ensure_assets(root)`` writes whatever is missing
or was written by another version of this module (``VERSION`` in ``stand_in_version.txt``).

    python -m sim.isaaclab_adapter.assets --root ~/.cache/robot_hrl/isaaclab/assets
    export ISAACSIM_ASSET_ROOT=~/.cache/robot_hrl/isaaclab/assets
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

VERSION = "1"
"""Bump when a stand-in changes: ``ensure_assets`` then rewrites every file."""

ASSET_ROOT_ENV = "ISAACSIM_ASSET_ROOT"
"""The variable Isaac Lab 3.0 reads its asset root from (``isaaclab/utils/assets.py: _resolve_asset_root``)."""

GROUND_PLANE_PATH = "Isaac/IsaacLab/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda"
CARTPOLE_PATH = "Isaac/IsaacLab/Robots/Classic/Cartpole/cartpole.usd"
_STAMP = "stand_in_version.txt"


@dataclass(frozen=True)
class BoxLinkCfg:
    """A rigid link with one box collider (URDF ``<link>`` with a ``<box>`` collision)."""

    name: str
    """Prim and body name (the URDF link name)."""
    size_m: tuple[float, float, float]
    """Box edge lengths along the link's x, y, z (m)."""
    mass_kg: float
    """Link mass (kg)."""
    center_b_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Box centre and centre of mass in the link frame (m)."""

    def box_inertia_kg_m2(self) -> tuple[float, float, float]:
        """Principal inertia of a solid box about its centre: m/12 (b^2 + c^2), ... (kg m^2)."""
        x, y, z = self.size_m
        k = self.mass_kg / 12.0
        return (k * (y * y + z * z), k * (x * x + z * z), k * (x * x + y * y))


@dataclass(frozen=True)
class CartpoleAssetCfg:
    """IsaacGymEnvs ``assets/urdf/cartpole.urdf`` (NVIDIA-Omniverse/IsaacGymEnvs), the source of
    Isaac Lab's ``Robots/Classic/Cartpole/cartpole.usd``."""

    slider: BoxLinkCfg = BoxLinkCfg("slider", (0.03, 8.0, 0.03), 1.0)
    """The rail; the URDF gives it no inertial (it is welded to the world), 1 kg keeps the solver's
    mass matrix regular."""
    cart: BoxLinkCfg = BoxLinkCfg("cart", (0.2, 0.25, 0.2), 1.0)
    pole: BoxLinkCfg = BoxLinkCfg("pole", (0.04, 0.06, 1.0), 1.0, (0.0, 0.0, 0.47))
    slider_to_cart_axis: str = "Y"
    """Prismatic joint axis (URDF ``<axis xyz="0 1 0"/>``)."""
    slider_limits_m: tuple[float, float] = (-4.0, 4.0)
    """Prismatic joint limits (URDF ``<limit lower="-4" upper="4"/>``)."""
    cart_to_pole_axis: str = "X"
    """Revolute joint axis (URDF ``continuous``, ``<axis xyz="1 0 0"/>``)."""
    pole_pivot_in_cart_m: tuple[float, float, float] = (0.12, 0.0, 0.0)
    """Revolute joint origin in the cart frame (URDF ``<origin xyz="0.12 0 0"/>``)."""


def _stage(path: Path, default_prim: str):
    from pxr import Usd, UsdGeom, UsdPhysics

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    root = UsdGeom.Xform.Define(stage, default_prim)
    stage.SetDefaultPrim(root.GetPrim())
    return stage, root


def write_ground_plane(path: Path, size_m: float = 100.0) -> Path:
    """An infinite collision plane (z up) as the first ``Plane`` prim below the default prim."""
    from pxr import UsdGeom, UsdPhysics

    stage, _ = _stage(path, "/GroundPlane")
    plane = UsdGeom.Plane.Define(stage, "/GroundPlane/CollisionPlane")
    plane.CreateAxisAttr(UsdGeom.Tokens.z)
    plane.CreateWidthAttr(size_m)
    plane.CreateLengthAttr(size_m)
    UsdPhysics.CollisionAPI.Apply(plane.GetPrim())
    stage.GetRootLayer().Save()
    return path


def _box_link(stage, parent: str, link: BoxLinkCfg, position_m=(0.0, 0.0, 0.0)):
    from pxr import Gf, UsdGeom, UsdPhysics

    body = UsdGeom.Xform.Define(stage, f"{parent}/{link.name}")
    body.AddTranslateOp().Set(Gf.Vec3d(*position_m))
    prim = body.GetPrim()
    UsdPhysics.RigidBodyAPI.Apply(prim)
    mass = UsdPhysics.MassAPI.Apply(prim)
    mass.CreateMassAttr(link.mass_kg)
    mass.CreateCenterOfMassAttr(Gf.Vec3f(*link.center_b_m))
    mass.CreateDiagonalInertiaAttr(Gf.Vec3f(*link.box_inertia_kg_m2()))
    mass.CreatePrincipalAxesAttr(Gf.Quatf(1.0, 0.0, 0.0, 0.0))
    box = UsdGeom.Cube.Define(stage, f"{parent}/{link.name}/collision")
    box.CreateSizeAttr(1.0)
    box.AddTranslateOp().Set(Gf.Vec3d(*link.center_b_m))
    box.AddScaleOp().Set(Gf.Vec3f(*link.size_m))
    UsdPhysics.CollisionAPI.Apply(box.GetPrim())
    return prim


def write_cartpole(path: Path, cfg: CartpoleAssetCfg = CartpoleAssetCfg()) -> Path:
    """The cartpole articulation: rail welded to the world, prismatic cart, revolute pole."""
    from pxr import Gf, UsdPhysics

    stage, root = _stage(path, "/cartpole")
    UsdPhysics.ArticulationRootAPI.Apply(root.GetPrim())
    slider = _box_link(stage, "/cartpole", cfg.slider)
    cart = _box_link(stage, "/cartpole", cfg.cart)
    pole = _box_link(stage, "/cartpole", cfg.pole, cfg.pole_pivot_in_cart_m)

    fixed = UsdPhysics.FixedJoint.Define(stage, "/cartpole/root_joint")  # body0 unset: the world
    fixed.CreateBody1Rel().SetTargets([slider.GetPath()])

    prismatic = UsdPhysics.PrismaticJoint.Define(stage, "/cartpole/slider_to_cart")
    prismatic.CreateBody0Rel().SetTargets([slider.GetPath()])
    prismatic.CreateBody1Rel().SetTargets([cart.GetPath()])
    prismatic.CreateAxisAttr(cfg.slider_to_cart_axis)
    prismatic.CreateLowerLimitAttr(cfg.slider_limits_m[0])
    prismatic.CreateUpperLimitAttr(cfg.slider_limits_m[1])
    prismatic.CreateLocalPos0Attr(Gf.Vec3f(0.0, 0.0, 0.0))
    prismatic.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, 0.0))

    revolute = UsdPhysics.RevoluteJoint.Define(stage, "/cartpole/cart_to_pole")
    revolute.CreateBody0Rel().SetTargets([cart.GetPath()])
    revolute.CreateBody1Rel().SetTargets([pole.GetPath()])
    revolute.CreateAxisAttr(cfg.cart_to_pole_axis)
    revolute.CreateLocalPos0Attr(Gf.Vec3f(*cfg.pole_pivot_in_cart_m))
    revolute.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, 0.0))
    stage.GetRootLayer().Save()
    return path


WRITERS = {GROUND_PLANE_PATH: write_ground_plane, CARTPOLE_PATH: write_cartpole}
"""Relative path under the asset root -> writer(path)."""


def ensure_assets(root: str | Path) -> Path:
    """Write the stand-ins under ``root`` unless this version already did; return ``root``."""
    root = Path(root).expanduser().resolve()
    stamp = root / _STAMP
    current = stamp.is_file() and stamp.read_text().strip() == VERSION
    if current and all((root / rel).is_file() for rel in WRITERS):
        return root
    for rel, writer in WRITERS.items():
        writer(root / rel)
    stamp.write_text(VERSION + "\n")
    return root


def default_asset_root() -> Path:
    """``$ROBOT_HRL_CACHE/isaaclab/assets`` (default ``~/.cache/robot_hrl/isaaclab/assets``)."""
    cache = Path(os.environ.get("ROBOT_HRL_CACHE", Path.home() / ".cache" / "robot_hrl")).expanduser()
    return cache / "isaaclab" / "assets"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sim.isaaclab_adapter.assets",
        description="Write local stand-ins for the Nucleus USD assets that the Isaac Lab tasks used here load "
        "(ground plane, cartpole), then print the directory to export as ISAACSIM_ASSET_ROOT.",
    )
    parser.add_argument("--root", default=None, help="asset root to write (default: $ROBOT_HRL_CACHE/isaaclab/assets)")
    args = parser.parse_args(argv)
    print(ensure_assets(args.root or default_asset_root()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
