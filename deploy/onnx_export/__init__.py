"""ONNX export of a trained actor with its policy contract (``python deploy/export.py --help``).

- :mod:`.actor`: the exported graph (normalization, network, clip to [-1, 1]) as a torch module;
- :mod:`.source`: finding the checkpoint, run config and evaluation of a training run;
- :mod:`.exporter`: export, metadata, self-check against torch, SHA-256 sidecar.
"""

from deploy.onnx_export.actor import ExportableActor, actor_dims
from deploy.onnx_export.errors import ExportError
from deploy.onnx_export.exporter import ExportReport, export_policy, self_check_observations
from deploy.onnx_export.source import RunSource, find_checkpoint, load_source, provenance_from_source

__all__ = [
    "ExportError", "ExportReport", "ExportableActor", "RunSource", "actor_dims", "export_policy", "find_checkpoint",
    "load_source", "provenance_from_source", "self_check_observations",
]
