#!/usr/bin/env python
"""Export a trained policy to ONNX with its contract embedded.

    python deploy/export.py runs/crazyflie_goto --out models/crazyflie_goto.onnx

Run from the repository root (or anywhere with robot_hrl installed). See --help.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # `python deploy/export.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DESCRIPTION = """\
Export the actor of a training run to one ONNX file that a robot can run on its own.

The graph holds the actor's deterministic path: observation normalization, the network and
the clip to the normalized action range [-1, 1]. Input 'obs' [batch, n_obs] (dynamic batch),
output 'actions' [batch, n_actions].

The policy contract (robot, control rate, observation terms, action mapping) is written into
the model's metadata under 'robot_hrl.contract', and the provenance under
'robot_hrl.provenance.*': the training and export commands, git commit, seed, configuration,
checkpoint and the eval.json summary. The runtime (robot_hrl.runtime.OnnxPolicy) reads the
contract back and refuses a model that does not match the robot.

Before the file is moved into place, torch and onnxruntime are run on --num-check
observations and the export fails if they differ by more than 1e-5. A SHA-256 sidecar
<out>.sha256 (sha256sum format) is written beside the model; check it with
`sha256sum -c <out>.sha256` from the model's folder.
"""

EPILOG = """\
examples:
  python deploy/export.py runs/crazyflie_goto --out models/crazyflie_goto.onnx
  python deploy/export.py runs/crazyflie_goto/model_300.pt --out /tmp/policy_it300.onnx

exit status: 0 exported and checked; 2 the run cannot be exported or the self-check failed.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deploy/export.py",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "source",
        type=Path,
        help="training run directory (its latest model_<it>.pt is exported) or a model_<it>.pt checkpoint in one",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output .onnx file (default: models/<run directory name>.onnx); its folder is created",
    )
    parser.add_argument(
        "--num-check",
        type=int,
        default=1000,
        metavar="N",
        help="observations for the torch/onnxruntime self-check (at least 1000; default 1000)",
    )
    parser.add_argument("--check-seed", type=int, default=0, metavar="S", help="seed of the self-check observations (default 0)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only errors and the output path")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.num_check < 1000:
        parser.error(f"--num-check must be at least 1000 (got {args.num_check}): the self-check needs a broad sample")
    if args.out is not None and args.out.suffix != ".onnx":
        parser.error(f"--out must name an .onnx file (got {args.out}), e.g. --out models/crazyflie_goto.onnx")
    command = shlex.join(["python", "deploy/export.py", *(sys.argv[1:] if argv is None else argv)])

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.markup import escape
    from rich.table import Table

    console = Console(stderr=True, quiet=args.quiet)
    from deploy.onnx_export import ExportError, export_policy, load_source, provenance_from_source
    from robot_hrl.errors import RobotHrlError

    steps = 5
    started = time.perf_counter()
    try:
        with Progress(
            TextColumn("[bold]export[/]"), BarColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
            console=console, transient=True,
        ) as progress:
            task = progress.add_task(f"loading {args.source}", total=steps)
            source = load_source(args.source)
            progress.advance(task)
            out = args.out or Path("models") / f"{source.run_dir.name}.onnx"

            def say(message: str) -> None:
                progress.update(task, description=message)
                progress.advance(task)
                console.log(message)

            report = export_policy(
                source.actor,
                source.contract,
                out,
                provenance=provenance_from_source(source, command),
                num_check=args.num_check,
                seed=args.check_seed,
                progress=say,
            )
            progress.advance(task)
    except (ExportError, RobotHrlError) as exc:
        Console(stderr=True, soft_wrap=True).print(f"[bold red]export failed:[/] {escape(str(exc))}")
        return 2

    contract = source.contract
    table = Table(title=escape(f"exported {report.path}"), show_header=False)
    table.add_row("source", escape(f"{source.checkpoint} (iteration {source.iteration})"))
    table.add_row("policy", f"{contract.skill} for {contract.robot.name} at {contract.control_rate_hz:g} Hz")
    table.add_row("graph", escape(f"obs[batch, {report.n_obs}] -> actions[batch, {report.n_actions}]; {' '.join(report.ops)}"))
    table.add_row("size", f"{report.size_bytes / 1024:.1f} KiB")
    table.add_row("self-check", f"max |torch - onnxruntime| = {report.max_abs_diff:.2e} on {report.num_checked} obs (tol {report.tolerance:g})")
    table.add_row("sha256", f"{report.sha256}  ({report.sha256_path.name})")
    table.add_row("metadata", ", ".join(report.metadata_keys))
    table.add_row("time", f"{time.perf_counter() - started:.1f} s")
    console.print(table)
    print(report.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
