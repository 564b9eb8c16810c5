"""Content digests used across the suite (a leaf: imports nothing of the package).

Why one place: datasets, sdists, model weights, patches and bundles are identified by sha256 in every
record and manifest; two spellings of "the digest of this" would make records disagree.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, read in 1 MiB chunks (datasets, sdists and model weights are large)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def text_sha256(text: str | None) -> str:
    """sha256 of a text's UTF-8 bytes; "" for no text (an absent patch has no identity)."""
    return hashlib.sha256(text.encode()).hexdigest() if text else ""


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")


def weights_sha256(path: str | Path) -> str:
    """The identity of a model's weights: a weights file's sha256, or for a checkpoint directory the sha256 over
    its weight files' names and digests (a record names the exact weights it was made with, not only a name)."""
    path = Path(path)
    if path.is_file():
        return file_sha256(path)
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES):
        h.update(f"{f.relative_to(path)}\0{file_sha256(f)}\0".encode())
    return h.hexdigest()
