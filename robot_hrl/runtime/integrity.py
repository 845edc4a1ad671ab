"""SHA-256 sidecars: ``<model>.onnx.sha256`` beside a model, in ``sha256sum`` format.

``sha256sum -c crazyflie_goto.onnx.sha256`` checks the file from a shell; the runtime checks
it on load so that a truncated copy or a file swapped after export is refused.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from robot_hrl.errors import ModelLoadError

SIDECAR_SUFFIX = ".sha256"
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


def sha256_file(path: str | Path, chunk_bytes: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(chunk_bytes), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sidecar_path(model_path: str | Path) -> Path:
    """``models/x.onnx`` -> ``models/x.onnx.sha256``."""
    model_path = Path(model_path)
    return model_path.with_name(model_path.name + SIDECAR_SUFFIX)


def write_sha256_sidecar(model_path: str | Path) -> Path:
    """Write ``<model>.sha256`` (``<hex>  <file name>``, as ``sha256sum`` prints it); return its path."""
    model_path = Path(model_path)
    path = sidecar_path(model_path)
    path.write_text(f"{sha256_file(model_path)}  {model_path.name}\n")
    return path


def read_sha256_sidecar(path: str | Path) -> str:
    """The expected hex digest recorded in a sidecar file (first field of its first line)."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"cannot read the checksum file {path} ({exc}); re-export the model or delete the stale file") from exc
    fields = text.split()
    if not fields or not _HEX64.match(fields[0]):
        raise ModelLoadError(
            f"the checksum file {path} is malformed (expected '<64 hex digits>  <file name>' as sha256sum "
            "writes it); re-export the model or regenerate it with `sha256sum <model> > <model>.sha256`"
        )
    return fields[0].lower()


def verify_sha256_sidecar(model_path: str | Path) -> str | None:
    """Check ``model_path`` against its sidecar when one exists.

    Returns the verified digest, or ``None`` when there is no sidecar. Raises
    :class:`ModelLoadError` on a mismatch.
    """
    model_path = Path(model_path)
    path = sidecar_path(model_path)
    if not path.is_file():
        return None
    expected = read_sha256_sidecar(path)
    actual = sha256_file(model_path)
    if actual != expected:
        raise ModelLoadError(
            f"integrity check failed for {model_path}: its SHA-256 is {actual[:16]}..., the checksum file "
            f"{path.name} says {expected[:16]}... The model was modified, truncated or replaced after export: "
            "copy it again, or re-export it (`python deploy/export.py <run-dir> --out <model>.onnx`), which "
            "rewrites both files"
        )
    return actual
