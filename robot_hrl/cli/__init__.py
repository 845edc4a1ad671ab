"""`robot-hrl`: one command line, with verbs contributed by entry points.

As in ros2cli, every verb is a plug-in registered under the ``robot_hrl.commands`` entry
point group (see setup.py). The runtime package thus never imports the training or
deployment side: ``deploy`` registers ``export-c`` and ``flash`` itself.

A verb is an object with ``name``, ``help``, ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points

from robot_hrl.errors import RobotHrlError

ENTRY_POINT_GROUP = "robot_hrl.commands"


def _load_commands(parser: argparse.ArgumentParser):
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            command = ep.load()
        except ImportError as exc:
            # A verb whose extras are not installed stays listed, with the fix in its help.
            stub = sub.add_parser(ep.name, help=f"(unavailable: {exc.name or exc} is not installed)")
            stub.set_defaults(_unavailable=(ep.name, exc))
            continue
        p = sub.add_parser(command.name, help=command.help, description=command.help,
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        command.add_arguments(p)
        commands[command.name] = command
    return commands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="robot-hrl",
        description="Hierarchical robot control: plan, fly, export and flash skill policies. "
        "Run `robot-hrl COMMAND --help` for each command.",
    )
    commands = _load_commands(parser)
    if not commands and not any(True for _ in entry_points(group=ENTRY_POINT_GROUP)):
        parser.epilog = "No commands are registered: install the package with `pip install -e .`"
    args = parser.parse_args(argv)
    if getattr(args, "_unavailable", None):
        name, exc = args._unavailable
        print(f"robot-hrl {name}: unavailable because {exc}. Install the extras: pip install -e '.[dev]'",
              file=sys.stderr)
        return 2
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(commands[args.command].run(args) or 0)
    except RobotHrlError as exc:
        print(f"robot-hrl {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
