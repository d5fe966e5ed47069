"""The optional parts of jobsmith (pip extras), and the one message for a missing one.

An optional module is imported only where it is used; when it is not installed, the
import is wrapped in `needs_extra`, which turns the ImportError into MissingExtra: one
line naming what needed it and the pip command that installs it (exit 2).
"""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Iterator

from jobsmith.errors import MissingExtra

#: each extra of pyproject.toml's [project.optional-dependencies] that code imports, with
#: the top-level modules it brings (tests/test_extras.py checks these against pyproject)
EXTRAS: dict[str, tuple[str, ...]] = {
    "ssh": ("paramiko",),
    "agent": ("anthropic", "prompt_toolkit"),
    "mcp": ("mcp", "mcp_types"),
}


def install_hint(extra: str) -> str:
    """The pip command that installs extra: the pip of the Python running jobsmith, so
    it goes into jobsmith's own venv (pip then adds the extra's packages to the jobsmith
    already installed there, however it was installed)."""
    python = shlex.quote(sys.executable) if sys.executable else "python3"
    return f"{python} -m pip install 'jobsmith[{extra}]'"


@contextlib.contextmanager
def needs_extra(extra: str, what: str) -> Iterator[None]:
    """Within, an ImportError of one of extra's modules is MissingExtra naming `what`
    (e.g. "scheduler.kind: ssh") and the pip command; any other ImportError is a bug of
    jobsmith's own and goes on as it is."""
    try:
        yield
    except ImportError as exc:
        module = (exc.name or "").partition(".")[0]
        if module not in EXTRAS[extra]:
            raise
        raise MissingExtra(
            f"{what} needs the [{extra}] extra ({module} is not installed): "
            f"install it with: {install_hint(extra)}"
        ) from None
