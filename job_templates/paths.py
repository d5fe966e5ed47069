"""Path policy: every path a template touches must resolve inside an allowed root.

Paths are resolved (symlinks followed, `..` collapsed) before the check, and the resolved
path is what the template renders, so the job uses exactly the path that was checked.
The roots and the base directory for relative paths are passed in; nothing is global.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from jobsmith.errors import PolicyError, TemplateError
from jobsmith.job_templates.params import PathKind


class PathPolicy:
    """Resolves paths against a base directory and checks them against allowed roots."""

    def __init__(self, allowed_roots: Sequence[Path], base_dir: Path) -> None:
        """Roots are resolved too: a root reached through a symlink still contains its files."""
        self.roots = tuple(Path(root).resolve() for root in allowed_roots)
        self.base_dir = Path(base_dir).resolve()

    def resolve(self, path: Path, where: str) -> Path:
        """The resolved absolute path; PolicyError naming `where` if outside every root."""
        try:
            resolved = (self.base_dir / path).resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop, or an unreadable directory
            raise TemplateError(f"{where}: cannot resolve '{path}': {exc}") from None
        if not any(resolved.is_relative_to(root) for root in self.roots):
            roots = ", ".join(str(root) for root in self.roots) or "(none configured)"
            shown = f"'{path}'" if resolved == path else f"'{path}' (resolves to '{resolved}')"
            raise PolicyError(f"{where}: path {shown} is outside the allowed roots: {roots}")
        return resolved


def require_existing(path: Path, kind: PathKind, where: str) -> None:
    """TemplateError naming `where` and the path unless it exists (as a file or dir)."""
    if not path.exists():
        raise TemplateError(f"{where}: input '{path}' does not exist")
    if kind is PathKind.FILE and not path.is_file():
        raise TemplateError(f"{where}: input '{path}' is not a file")
    if kind is PathKind.DIR and not path.is_dir():
        raise TemplateError(f"{where}: input '{path}' is not a directory")
