"""Command-line arguments of every node executable, in the ROS 2 form.

``ros2 launch`` starts a node as ``<exe> --ros-args -r __node:=NAME -r __ns:=/NS
--params-file FILE -p key:=value``. The ROS-free launcher (``robot-hrl launch``) uses the very
same form, so a node parses one syntax whichever launcher started it. Two more flags are the
stack's own: ``--backend {auto,cyclonedds,rclpy}`` and ``--domain-id N`` (default
``$ROS_DOMAIN_ID`` or 0).

Parameters files are ROS 2 YAML: ``<node name>: {ros__parameters: {...}}``; the wildcard
``/**`` applies to every node and a namespaced key (``/ns/node``) to that node only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from robot_hrl.errors import ConfigError

USAGE = (
    "usage: {prog} [--backend auto|cyclonedds|rclpy] [--domain-id N] "
    "[--ros-args [-r __node:=NAME] [-r __ns:=/NS] [--params-file FILE] [-p NAME:=VALUE]...]"
)


@dataclass
class NodeArgs:
    name: str
    namespace: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    backend: str = "auto"
    domain_id: int | None = None


def parse_value(text: str) -> Any:
    """A ``-p name:=value`` value, typed the way ROS 2 does it (YAML scalars)."""
    try:
        return yaml.safe_load(text) if text != "" else ""
    except yaml.YAMLError:
        return text


def load_params_file(path: str | Path, node_name: str, namespace: str = "") -> dict[str, Any]:
    """The parameters a ROS 2 params file gives node ``node_name`` (wildcards first, then its own)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"parameters file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"parameters file {str(path)!r} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"parameters file {str(path)!r} must map node names to {{ros__parameters: ...}}")
    full = f"{namespace.rstrip('/')}/{node_name}" if namespace else f"/{node_name}"
    keys = ["/**", "**", node_name, full, full.lstrip("/")]
    params: dict[str, Any] = {}
    for key in keys:
        entry = data.get(key)
        if entry is None:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("ros__parameters", {}), dict):
            raise ConfigError(f"parameters file {str(path)!r}: {key!r} must hold a mapping 'ros__parameters'")
        params.update(entry.get("ros__parameters") or {})
    return params


def parse_node_args(argv: list[str], default_name: str, prog: str | None = None) -> NodeArgs:
    """Parse a node's argv (ROS 2 ``--ros-args`` syntax plus ``--backend`` and ``--domain-id``)."""
    prog = prog or default_name
    out = NodeArgs(name=default_name)
    params_files: list[str] = []
    overrides: dict[str, Any] = {}
    remaps: dict[str, str] = {}
    env_domain = os.environ.get("ROS_DOMAIN_ID", "").strip()
    if env_domain:
        if not env_domain.isdigit():
            raise ConfigError(f"ROS_DOMAIN_ID={env_domain!r} must be an integer 0..232")
        out.domain_id = int(env_domain)

    def need(i: int, flag: str) -> str:
        if i >= len(argv):
            raise ConfigError(f"{flag} needs a value; " + USAGE.format(prog=prog))
        return argv[i]

    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            raise SystemExit(print(USAGE.format(prog=prog)) or 0)
        if arg in ("--ros-args", "--"):
            i += 1
            continue
        if arg == "--backend":
            out.backend = need(i + 1, arg)
            if out.backend not in ("auto", "cyclonedds", "rclpy"):
                raise ConfigError(f"--backend {out.backend!r}: choose auto, cyclonedds or rclpy")
            i += 2
        elif arg == "--domain-id":
            value = need(i + 1, arg)
            if not value.isdigit() or int(value) > 232:
                raise ConfigError(f"--domain-id {value!r}: give an integer 0..232")
            out.domain_id = int(value)
            i += 2
        elif arg == "--params-file":
            params_files.append(need(i + 1, arg))
            i += 2
        elif arg in ("-p", "--param"):
            text = need(i + 1, arg)
            if ":=" not in text:
                raise ConfigError(f"-p {text!r}: write parameters as NAME:=VALUE")
            key, value = text.split(":=", 1)
            overrides[key.strip()] = parse_value(value)
            i += 2
        elif arg in ("-r", "--remap"):
            text = need(i + 1, arg)
            if ":=" not in text:
                raise ConfigError(f"-r {text!r}: write remappings as FROM:=TO")
            key, value = text.split(":=", 1)
            remaps[key.strip()] = value.strip()
            i += 2
        elif arg.startswith("__node:=") or arg.startswith("__ns:="):  # ROS 1 style, still accepted by ROS 2
            key, value = arg.split(":=", 1)
            remaps[key] = value
            i += 1
        elif arg in ("--log-level", "--enclave"):
            i += 2
        else:
            raise ConfigError(f"unknown argument {arg!r}; " + USAGE.format(prog=prog))
    out.name = remaps.get("__node", remaps.get("__name", out.name))
    ns = remaps.get("__ns", "")
    out.namespace = ("/" + ns.strip("/")) if ns.strip("/") else ""
    for path in params_files:
        out.parameters.update(load_params_file(path, out.name, out.namespace))
    out.parameters.update(overrides)
    return out
