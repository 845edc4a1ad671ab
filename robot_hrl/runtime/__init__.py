"""The onboard policy runtime: exported ONNX policies run with onnxruntime (no torch).

``OnnxPolicy`` loads a model written by ``deploy/export.py``, checks its SHA-256 sidecar and
its embedded contract against the robot, picks an execution provider (TensorRT, CUDA, CPU),
builds observations from a ``RobotState`` and maps actions to the robot's command (the contract's mapping).
"""

from robot_hrl.runtime.integrity import (
    read_sha256_sidecar,
    sha256_file,
    sidecar_path,
    verify_sha256_sidecar,
    write_sha256_sidecar,
)
from robot_hrl.runtime.metadata import (
    PROVENANCE_CHECKPOINT_KEY,
    PROVENANCE_COMMAND_KEY,
    PROVENANCE_CONFIG_KEY,
    PROVENANCE_EVAL_KEY,
    PROVENANCE_EXPORT_KEY,
    PROVENANCE_GIT_COMMIT_KEY,
    PROVENANCE_KEYS,
    PROVENANCE_LINEAGE_KEY,
    PROVENANCE_SEED_KEY,
    decode_provenance,
)
from robot_hrl.runtime.policy import OnnxPolicy, read_model_metadata, session_options
from robot_hrl.runtime.providers import (
    ORT_PROVIDER_NAMES,
    PROVIDER_CHOICES,
    ProviderUnavailableError,
    available_providers,
    plan_providers,
)

__all__ = [
    "ORT_PROVIDER_NAMES", "OnnxPolicy", "PROVENANCE_CHECKPOINT_KEY", "PROVENANCE_COMMAND_KEY", "PROVENANCE_CONFIG_KEY",
    "PROVENANCE_EVAL_KEY", "PROVENANCE_EXPORT_KEY", "PROVENANCE_GIT_COMMIT_KEY", "PROVENANCE_KEYS", "PROVENANCE_LINEAGE_KEY", "PROVENANCE_SEED_KEY",
    "PROVIDER_CHOICES", "ProviderUnavailableError", "available_providers", "decode_provenance",
    "plan_providers", "read_model_metadata", "read_sha256_sidecar", "session_options", "sha256_file", "sidecar_path",
    "verify_sha256_sidecar", "write_sha256_sidecar",
]
