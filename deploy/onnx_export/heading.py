"""Change the heading loop an exported navigate level is flown with, its weights unchanged.

A level's contract names the yaw loop every runtime flies under the goto skill (its ``heading`` section:
robot_hrl.contract.navigate.HeadingSpec, robot_hrl.runtime.heading). The loop is not part of the level's graph, so a
loop setting can be changed after training, e.g. the lead into turns (``lead_s``), when an evaluation shows the level
flies as well or better with it. This writes a new file with the new section and a provenance record of the change
(the old file's sha256 and the fields changed), checks that the new file's contract validates and that its outputs
equal the old file's; judge the result with ``sim/evaluate_navigate.py`` before shipping it.

    python -m deploy.onnx_export.heading models/crazyflie_navigate.onnx --lead-s 0.4 --out /tmp/level_lead.onnx
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

from deploy.onnx_export.errors import ExportError
from deploy.onnx_export.exporter import _write_metadata
from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, HeadingSpec, NavigateContract

RETUNE_KEY = "robot_hrl.provenance.heading_retune"
"""The metadata entry that records each change of the heading section (a JSON list, oldest first)."""


def retune_heading(level: str | Path, out: str | Path, **changes) -> Path:
    """``level`` with its contract's heading fields ``changes`` set (HeadingSpec's names), written to ``out``."""
    import onnx
    import onnxruntime as ort

    from robot_hrl.errors import RobotHrlError
    from robot_hrl.runtime import read_model_metadata
    from robot_hrl.runtime.integrity import sha256_file, write_sha256_sidecar

    level, out = Path(level), Path(out)
    try:
        meta = read_model_metadata(level)
        contract = NavigateContract.from_json(meta.get(NAVIGATE_METADATA_KEY))
    except RobotHrlError as exc:
        raise ExportError(f"{level}: {exc}") from None
    if contract.heading is None:
        raise ExportError(f"{level} names no heading loop (its contract has no heading section); a level trained "
                          "without one is flown without one: train it with `sim/train_navigate.py --heading`")
    unknown = sorted(set(changes) - set(HeadingSpec.model_fields))
    if unknown:
        raise ExportError(f"heading has no field(s) {unknown}; its fields are {sorted(HeadingSpec.model_fields)}")
    try:
        heading = HeadingSpec.model_validate({**contract.heading.model_dump(), **changes})
    except ValueError as exc:
        raise ExportError(f"the new heading section is invalid: {exc}") from None
    new = contract.model_copy(update={"heading": heading})
    model = onnx.load(str(level))
    entries = {p.key: p.value for p in model.metadata_props}
    history = json.loads(entries.get(RETUNE_KEY, "[]"))
    history.append({"from_sha256": sha256_file(level), "from_file": level.name,
                    "from": {k: getattr(contract.heading, k) for k in changes}, "to": dict(changes)})
    entries[NAVIGATE_METADATA_KEY] = new.to_json()
    entries[RETUNE_KEY] = json.dumps(history)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(level, out)
    _write_metadata(out, entries, model.doc_string)  # (the exporter's one writer of a model's metadata)
    check = NavigateContract.from_json(read_model_metadata(out)[NAVIGATE_METADATA_KEY])
    if check.heading != heading:
        raise ExportError(f"{out}: the written heading section does not read back; the file is broken")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, contract.observation_size)).astype(np.float32)
    feed = {"obs": x}
    if contract.recurrent is not None:  # a recurrent level: its state too (its actions and its next state)
        feed[contract.recurrent.input_name] = rng.normal(size=(1, 256, contract.recurrent.hidden_size)).astype(np.float32)
    old = ort.InferenceSession(str(level), providers=["CPUExecutionProvider"]).run(None, feed)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, feed)
    if not all(np.array_equal(a, b) for a, b in zip(old, got)):
        raise ExportError(f"{out}: its outputs differ from {level}'s; only the metadata may change")
    write_sha256_sidecar(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.onnx_export.heading", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("level", help="an exported navigate level (.onnx) whose contract has a heading section")
    parser.add_argument("--out", required=True, help="the new file (the level is not changed in place)")
    parser.add_argument("--lead-s", type=float, default=None,
                        help="heading.lead_s: the target leads the direction of motion into a turn by this much of the "
                             "velocity's turn, s (0: face the velocity)")
    parser.add_argument("--lead-filter-s", type=float, default=None, help="heading.lead_filter_s, s")
    parser.add_argument("--max-rate-radps", type=float, default=None, help="heading.max_rate_radps, rad/s")
    parser.add_argument("--max-yaw-rate-radps", type=float, default=None,
                        help="heading.max_yaw_rate_radps: the loop's yaw rate command is clipped to this, rad/s (0: no "
                             "limit)")
    args = parser.parse_args(argv)
    changes = {k: v for k, v in (("lead_s", args.lead_s), ("lead_filter_s", args.lead_filter_s),
                                 ("max_rate_radps", args.max_rate_radps),
                                 ("max_yaw_rate_radps", args.max_yaw_rate_radps)) if v is not None}
    if not changes:
        parser.error("nothing to change: give --lead-s, --lead-filter-s, --max-rate-radps or --max-yaw-rate-radps")
    try:
        out = retune_heading(args.level, args.out, **changes)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}: heading {changes}; judge it with sim/evaluate_navigate.py --model {out} before shipping it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
