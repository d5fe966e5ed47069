"""Replacing a small file atomically: a reader sees the old content or the new, never half.

Used for jobsmith's own records and caches (submission records, session folds, the last
poll, what a cluster is known to keep). The new content is written to a temporary file
in the same directory, flushed to disk, and renamed over the old one (rename(2) within a
directory is atomic, on NFS too); a write that fails leaves no temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def replace_file(path: Path, data: bytes) -> None:
    """Make path hold data, atomically; OSError if it cannot (nothing half-written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
