"""A submission's `--exclude` with the user's blocked nodes added (pure).

What the user excluded stays as written; blocked nodes it does not already name are
appended. A node the request asks for by name (`--nodelist`/`-w`) is never added: the
user chose it, and Slurm refuses a job that both names and excludes a node. Where the
user's own list cannot be read as a hostlist, it is kept and the blocked nodes appended
all the same (Slurm reads the result; the judge judges it).
"""

from __future__ import annotations

from collections.abc import Sequence

from jobsmith.adapters.hostlist import expand_hostlist, join_hostlist


def with_blocked(
    exclude: str | None, blocked: Sequence[str], nodelist: str | None = None
) -> str | None:
    """exclude plus the blocked nodes it lacks (module docstring); exclude itself if none."""
    named = set(_names(exclude)) | set(_names(nodelist))
    added = [node for node in dict.fromkeys(blocked) if node not in named]
    if not added:
        return exclude
    return ",".join(part for part in (exclude, join_hostlist(added)) if part)


def _names(hostlist: str | None) -> tuple[str, ...]:
    try:
        return expand_hostlist(hostlist)
    except ValueError:
        return ()
