"""Path policy: every path a template touches must resolve inside an allowed root.

Paths are resolved (symlinks followed, `..` collapsed) before the check, and the resolved
path is what the template renders, so the job uses exactly the path that was checked.
The roots and the base directory for relative paths are passed in; nothing is global.

Resolving and looking at a path is asked of where the job runs (a `PathLookup`): this
host, whose files are the cluster's (`LocalLookup`), or the login node over SSH
(adapters/files_there.py), where a symlink is resolved by the cluster's file system and
the laptop's own files are never looked at (issue 29). A lookup answers a batch of paths
at once, so the policy gathers what it will ask (`expect`) and asks once: one SSH round
trip for a whole submission, not one per path. The rule itself (inside a root or not,
there or not) is the same pure comparison whichever host answered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from jobsmith.errors import PolicyError, TemplateError
from jobsmith.files import MAX_INPUT_BYTES, read_bounded
from jobsmith.job_templates.params import PathKind

#: what a resolved path is where the job runs: a regular file (or what `test -f` takes
#: for one), a directory, something else that exists, or nothing
Found = Literal["file", "dir", "other", "missing"]


@dataclass(frozen=True)
class PathFact:
    """What the job's host says of one path: where it resolves and what is there."""

    #: the resolved absolute path; None when it cannot be resolved (a symlink loop)
    real: Path | None
    found: Found = "missing"
    #: why it cannot be resolved (real is None)
    problem: str = ""


class PathLookup(Protocol):
    """Where the job's files are: resolves and looks at paths, a batch at a time."""

    #: for messages: "" on this host, " on alice@login1:22" over SSH
    @property
    def where(self) -> str: ...

    def look(self, paths: Sequence[Path]) -> Mapping[Path, PathFact]:
        """A fact for each of paths (absolute), all asked at once."""
        ...

    def read(self, path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
        """The bytes of path, a regular file of at most limit bytes (a sample sheet);
        OSError saying why not (files.read_bounded)."""
        ...


class LocalLookup:
    """This host's files, as Path.resolve() and stat see them."""

    where = ""

    def look(self, paths: Sequence[Path]) -> dict[Path, PathFact]:
        return {path: local_fact(path) for path in paths}

    def read(self, path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
        return read_bounded(path, limit)


def local_fact(path: Path) -> PathFact:
    """path resolved and looked at on this host."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, or an unreadable directory
        return PathFact(None, problem=str(exc))
    try:
        found: Found = (
            "file"
            if real.is_file()
            else "dir"
            if real.is_dir()
            else "other"
            if real.exists()
            else "missing"
        )
    except OSError as exc:  # a name too long to look at (an output's: nothing reads it)
        return PathFact(real, "missing", str(exc))
    return PathFact(real, found)


class PathPolicy:
    """Resolves paths against a base directory and checks them against allowed roots."""

    def __init__(
        self, allowed_roots: Sequence[Path], base_dir: Path, lookup: PathLookup | None = None
    ) -> None:
        """Roots are resolved too, where the job runs: a root reached through a symlink
        still contains its files."""
        self.lookup: PathLookup = lookup or LocalLookup()
        self._raw_roots = tuple(Path(root) for root in allowed_roots)
        self.base_dir = Path(base_dir)
        self._facts: dict[Path, PathFact] = {}
        self._expected: set[Path] = set(self._raw_roots)

    def expect(self, paths: Iterable[Path]) -> None:
        """paths (relative ones to the base directory) will be asked: the next question
        to the lookup includes them."""
        self._expected.update(
            self.base_dir / p for p in paths if self.base_dir / p not in self._facts
        )

    @property
    def roots(self) -> tuple[Path, ...]:
        """The allowed roots, resolved."""
        self._ask(())
        return tuple(self._facts[r].real or r for r in self._raw_roots)

    def fact(self, path: Path) -> PathFact:
        """What the job's host says of path (relative: to the base directory)."""
        full = self.base_dir / path
        if full not in self._facts:
            self._ask((full,))
        return self._facts[full]

    def resolve(self, path: Path, where: str) -> Path:
        """The resolved absolute path; PolicyError naming `where` if outside every root."""
        fact = self.fact(path)
        there = self.lookup.where
        if fact.real is None:
            raise TemplateError(f"{where}: cannot resolve '{path}'{there}: {fact.problem}")
        resolved = fact.real
        roots = self.roots
        if not inside(resolved, roots):
            shown_roots = ", ".join(str(root) for root in roots) or "(none configured)"
            shown = f"'{path}'" if resolved == path else f"'{path}' (resolves to '{resolved}')"
            raise PolicyError(
                f"{where}: path {shown}{there} is outside the allowed roots: {shown_roots}"
            )
        return resolved

    def require_existing(self, path: Path, kind: PathKind, where: str) -> None:
        """TemplateError naming `where` and the path unless it exists (as a file or dir)."""
        found, there = self.fact(path).found, self.lookup.where
        if found == "missing":
            raise TemplateError(f"{where}: input '{path}' does not exist{there}")
        if kind is PathKind.FILE and found != "file":
            raise TemplateError(f"{where}: input '{path}' is not a file{there}")
        if kind is PathKind.DIR and found != "dir":
            raise TemplateError(f"{where}: input '{path}' is not a directory{there}")

    def read(self, path: Path) -> bytes:
        """The bytes of the resolved path, read where the job runs (a sample sheet)."""
        return self.lookup.read(path)

    def _ask(self, paths: Iterable[Path]) -> None:
        wanted = [p for p in {*self._expected, *paths} if p not in self._facts]
        self._expected.clear()
        if not wanted:
            return
        for path, fact in self.lookup.look(sorted(wanted)).items():
            self._facts[path] = fact
            if fact.real is not None:  # a resolved path resolves to itself
                self._facts.setdefault(fact.real, PathFact(fact.real, fact.found))


def inside(path: Path, roots: Iterable[Path]) -> bool:
    """Whether the resolved path lies within one of the resolved roots: the one rule."""
    return any(path.is_relative_to(root) for root in roots)
