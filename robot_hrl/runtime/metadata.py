"""Keys of the metadata an exported model carries (ONNX ``metadata_props``).

The contract sits under :data:`robot_hrl.contract.CONTRACT_METADATA_KEY`. Provenance (how the
model was made) sits under the keys below, one JSON value each. The
exporter (``deploy/export.py``) writes them; :attr:`robot_hrl.runtime.OnnxPolicy.provenance`
reads them back.
"""

from __future__ import annotations

import json
from typing import Any

PROVENANCE_PREFIX = "robot_hrl.provenance."
PROVENANCE_COMMAND_KEY = PROVENANCE_PREFIX + "command"
"""The export command line, then the training command line (JSON object)."""
PROVENANCE_GIT_COMMIT_KEY = PROVENANCE_PREFIX + "git_commit"
"""Git commit the policy was trained at (JSON string)."""
PROVENANCE_SEED_KEY = PROVENANCE_PREFIX + "seed"
"""Training seed (JSON integer or null)."""
PROVENANCE_CONFIG_KEY = PROVENANCE_PREFIX + "config"
"""Training configuration: task, env_cfg, agent_cfg, ... (JSON object)."""
PROVENANCE_EVAL_KEY = PROVENANCE_PREFIX + "eval"
"""Summary of the run's eval.json (JSON object or null)."""
PROVENANCE_CHECKPOINT_KEY = PROVENANCE_PREFIX + "checkpoint"
"""Checkpoint file name and training iteration (JSON object)."""
PROVENANCE_EXPORT_KEY = PROVENANCE_PREFIX + "export"
"""Export details: date, tool versions, self-check result (JSON object)."""
PROVENANCE_LINEAGE_KEY = PROVENANCE_PREFIX + "lineage"
"""Every training stage, oldest first (fine-tuned runs): command, git commit, seed, resumed_from (JSON list)."""

PROVENANCE_KEYS = (
    PROVENANCE_COMMAND_KEY,
    PROVENANCE_GIT_COMMIT_KEY,
    PROVENANCE_SEED_KEY,
    PROVENANCE_CONFIG_KEY,
    PROVENANCE_EVAL_KEY,
    PROVENANCE_CHECKPOINT_KEY,
    PROVENANCE_EXPORT_KEY,
    PROVENANCE_LINEAGE_KEY,
)


def decode_provenance(metadata: dict[str, str]) -> dict[str, Any]:
    """``{"command": ..., "git_commit": ..., ...}`` from a model's metadata map (JSON decoded; raw text if a value is not JSON)."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if not key.startswith(PROVENANCE_PREFIX):
            continue
        try:
            decoded: Any = json.loads(value)
        except (json.JSONDecodeError, TypeError):
            decoded = value
        out[key[len(PROVENANCE_PREFIX):]] = decoded
    return out
