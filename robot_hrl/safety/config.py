"""Shield configuration: the units, in order, and every limit with its unit in its name, from one YAML file.

A robot keeps its shield YAML in its package (``robot_hrl/robots/<robot>/shield.yaml``,
``robot.shield_config_path``). As Nav2's collision monitor lists its polygons, the file lists the
shield's units (``units:``, run in that order within their stage) and gives each unit's limits in
the section of its name. ``model:`` names the robot family (robot_hrl.safety.families) whose
sections (a quadrotor: ``limits``, ``stopping``, ``backup``) and units it also uses.

``load_shield_config(path)`` reads and validates a file with pydantic. Unknown keys, missing keys,
wrong types, unknown or misordered units and inconsistent values raise
:class:`robot_hrl.errors.ConfigError` naming the file and the key. pydantic is used here only: the
per-tick path reads plain floats copied out of these models.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from robot_hrl.errors import ConfigError
from robot_hrl.robots import DEFAULT_ROBOT
from robot_hrl.robots.base import package_shield_config
from robot_hrl.safety.families import ShieldFamily, get_family
from robot_hrl.safety.units import NEUTRAL_UNITS, REQUIRED_UNITS, STAGES

DEFAULT_SHIELD_CONFIG = package_shield_config(DEFAULT_ROBOT)
"""The default robot's shield file (robot_hrl.robots.DEFAULT_ROBOT; every robot: ``robot.shield_config_path``)."""

_STRICT = ConfigDict(frozen=True, extra="forbid")


class BackupCommonCfg(BaseModel):
    """What the shield itself reads of a family's ``backup`` section (a family's backup config extends it)."""

    model_config = _STRICT
    land_timeout_s: float = Field(gt=0.0, description="motors off this long after a landing began, whatever the estimate says")
    recover_s: float = Field(ge=0.0, description="the policy's command must be judged safe this long before it gets control back")
    hold_inset_m: float = Field(ge=0.0, le=0.5, description="the hold target keeps this far inside the fence and altitude band")
    creep_speed_mps: float = Field(
        default=0.0, ge=0.0, le=1.0,
        description="a hold an envelope or command unit put in place moves its target toward the subgoal at this speed, "
        "never closer to an obstacle than the subgoal unit's margin or than the target already was (0: off; "
        "Shield._creep_target)")


class ShieldConfig(BaseModel):
    """The units and every limit they enforce. A family's config adds its sections and the units' sections."""

    model_config = _STRICT
    robot: str = Field(description="robot name in robot_hrl.robots, e.g. crazyflie_2x")
    model: str = Field(description="the robot family of the shield model and its own units, e.g. quadrotor")
    control_rate_hz: float = Field(gt=0.0)
    units: tuple[str, ...] = Field(description="the shield units, in the order they run within their stage")


@lru_cache(maxsize=None)
def config_model(family_name: str) -> type[ShieldConfig]:
    """The pydantic model of a shield file for ``family_name``: every unit's section optional (a listed
    unit's section is required, checked after validation), the family's sections required."""
    family = get_family(family_name)
    fields: dict = {}
    for unit in (*NEUTRAL_UNITS.values(), *family.units.values()):
        if unit.section is not None and unit.section not in family.sections:
            fields[unit.section] = (unit.config_model | None, None)
    for name, model in family.sections.items():
        fields[name] = (model, ...)
    return create_model(f"ShieldConfig_{family_name}", __base__=ShieldConfig, **fields)


def unit_types(family: ShieldFamily) -> dict[str, type]:
    """Every unit a shield of ``family`` may list, by name."""
    return {**NEUTRAL_UNITS, **family.units}


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _check_units(cfg: ShieldConfig, family: ShieldFamily) -> list[str]:
    known = unit_types(family)
    problems = []
    unknown = [u for u in cfg.units if u not in known]
    if unknown:
        problems.append(f"units: {unknown} unknown; a {family.name} shield knows {sorted(known)}")
    repeated = sorted({u for u in cfg.units if cfg.units.count(u) > 1})
    if repeated:
        problems.append(f"units: {repeated} listed twice")
    missing = [u for u in REQUIRED_UNITS if u not in cfg.units]
    if missing:
        problems.append(f"units: {missing} missing (every shield runs {list(REQUIRED_UNITS)})")
    listed = [known[u] for u in cfg.units if u in known]
    stages = [STAGES.index(u.stage) for u in listed]
    if stages != sorted(stages):
        problems.append(f"units: list them by stage ({', '.join(STAGES)}): {[u.name for u in listed]} mixes them "
                        "(input units judge the tick's inputs before any command unit runs)")
    sections = {u.section: u.name for u in known.values() if u.section is not None and u.section not in family.sections}
    for section, unit in sections.items():
        present = getattr(cfg, section, None) is not None
        if unit in cfg.units and not present:
            problems.append(f"{section}: missing (unit {unit!r} is listed)")
        elif present and unit not in cfg.units and not (section == "altitude" and "subgoal" in cfg.units):
            problems.append(f"{section}: configured, but unit {unit!r} is not in units (list it, or remove the section)")
    return problems


def parse_shield_config(data, source: str = "<dict>") -> ShieldConfig:
    """Validate an already-parsed mapping; errors name ``source`` and every bad key."""
    if not isinstance(data, dict):
        raise ConfigError(f"shield config {source} must be a mapping of sections (units, limits, ...), got {type(data).__name__}")
    hint = f"See {DEFAULT_SHIELD_CONFIG} for every key and its unit"
    family_name = data.get("model")
    if not isinstance(family_name, str):
        raise ConfigError(f"shield config {source} is invalid: model: must name the robot family of the shield "
                          f"(e.g. quadrotor), got {family_name!r}. {hint}")
    try:
        family = get_family(family_name)
    except ConfigError as exc:
        raise ConfigError(f"shield config {source} is invalid: model: {exc}") from None
    try:
        cfg = config_model(family_name).model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"shield config {source} is invalid: {_describe(exc)}. {hint}") from None
    problems = _check_units(cfg, family)
    if problems:
        raise ConfigError(f"shield config {source} is invalid: " + "; ".join(problems))
    return cfg


def load_shield_config(path: str | Path = DEFAULT_SHIELD_CONFIG) -> ShieldConfig:
    """Load and validate a shield configuration YAML file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"shield config {str(path)!r} does not exist; start from {DEFAULT_SHIELD_CONFIG}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"shield config {str(path)!r} is not valid YAML: {exc}") from None
    return parse_shield_config(data, repr(str(path)))
