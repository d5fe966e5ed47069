"""Files in and out: replacing a small file atomically, and reading a file a person named
with bounds.

Replacing is for jobsmith's own records and caches (submission records, session folds,
the last poll, what a cluster is known to keep). The new content is written to a
temporary file in the same directory, flushed to disk, and renamed over the old one
(rename(2) within a directory is atomic, on NFS too); a write that fails leaves no
temporary file behind.

Reading (read_bounded) is for every file a person names (site files, --params-file, plan
files, template specs and bodies, sample sheets): `--params-file /dev/zero` grew to 12.8
GB, a FIFO blocked, and a 50 MB YAML list passed 4 GB. Such a file must be a regular
file of at most a given size, judged on what was opened (no swap between check and
read), opened without blocking and read with a bound.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

#: the most a file a person names may hold (a site file, a plan, a params file, a
#: template): far above any real one, far below what parsing could grow to gigabytes
MAX_INPUT_BYTES = 4 * 1024 * 1024


def read_bounded(path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of path: a regular file of at most limit bytes; OSError otherwise, with
    a strerror that says why (not a regular file, too large)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
            raise OSError(errno.EINVAL, f"it is {kind}, not a regular file", str(path))
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"it is larger than {limit} bytes", str(path))
    return data


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
