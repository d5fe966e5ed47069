"""The `jobsmith` command's entry point: a one-shot command runs warm where it can.

`submit`, `sbatch`, `render`, `status`, `wait` and `plan` are handed to the user's warm
process if one is listening (warm.py says how and why); anything else, or where none is,
runs here as it always has (cli.main), and after a one-shot command that ran here a warm
process is started for the next one. JOBSMITH_WARM=0 turns it off (docs/warm.md).

This module and warm.py import only the standard library: the warm path must not pay
for the imports it exists to avoid.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from jobsmith import __version__
from jobsmith.agent.faces import warm


def main() -> None:
    """Console entry point (pyproject.toml's `jobsmith`)."""
    argv = sys.argv[1:]
    where = None
    if warm.command_of(argv) in warm.WARM_COMMANDS and warm.wanted(os.environ):
        where = _socket()
        if where is not None:
            code = warm.run_warm(argv, where)
            if code is not None:
                sys.exit(code)
    from jobsmith.agent.faces.cli import main as cli_main

    try:
        cli_main()
    finally:
        if where is not None:
            _start_warm(where)


def _socket() -> Path | None:
    directory = warm.directory(os.environ)
    if directory is None:
        return None
    return warm.socket_path(directory, warm.identity(warm.package_dir(), __version__))


def _start_warm(path: Path) -> None:
    """Leave a warm process for the next command (detached; one per key, its lock says)."""
    import subprocess

    with contextlib.suppress(OSError):  # none: the next command runs cold, as this one did
        subprocess.Popen(
            [
                sys.executable,
                # this process's UTF-8 mode, which it may have from the C locale that
                # Python's start-up then coerced in the environment the child inherits
                *("-X", f"utf8={sys.flags.utf8_mode}"),
                *("-m", "jobsmith.agent.faces.warmserver", path.stem, str(path)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )
