"""put and get: files copied between this machine and the cluster a site reaches over SSH
(issue 29 item 3), with the remote paths checked against the site's allowed roots there.

The copying and the checks are adapters/ssh/staging.py's; this picks the copier for the
site's transport, the remote default (the site's scratch) and the local one (the current
directory), and returns the document the faces show.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from jobsmith.agent.runtime.documents import StagedFile, StagingResult
from jobsmith.errors import InputError, JobsmithError
from jobsmith.job_templates.params import ColumnType, ParamSpec, ParamType

if TYPE_CHECKING:
    from jobsmith.adapters.files_there import JobFiles
    from jobsmith.adapters.ssh.staging import Copied, Progress, Stager
    from jobsmith.adapters.transport import Transport
    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.session.store import SessionStore
    from jobsmith.job_templates import TemplateLibrary
    from jobsmith.job_templates.tables import Table
    from jobsmith.site_config import LoadedSite
    from jobsmith.site_config.model import SchedulerAccess

#: what a face gives to follow one file's copy: called with its name, answers a Progress
Following = Callable[[str], "Progress"]


class StagingParts(Protocol):
    """What put and get use of the application."""

    @property
    def scheduler_access(self) -> SchedulerAccess: ...

    @property
    def transport(self) -> Transport: ...

    @property
    def job_files(self) -> JobFiles: ...

    @property
    def site(self) -> LoadedSite: ...

    @property
    def ledger(self) -> JobLedger: ...

    @property
    def library(self) -> TemplateLibrary: ...

    @property
    def store(self) -> SessionStore: ...


def stager(parts: StagingParts, bwlimit_kbps: int = 0) -> Stager:
    """The site's stager; NothingToStage for a site whose Slurm runs here."""
    from jobsmith.adapters.files_there import FilesThere
    from jobsmith.adapters.ssh.staging import Stager, copier_for

    copier = copier_for(parts.scheduler_access.kind, parts.transport, bwlimit_kbps)
    files = parts.job_files
    assert isinstance(files, FilesThere)  # a remote site's (App.job_files)
    return Stager(copier, files, list(parts.site.config.paths.allowed_roots))


def put_files(
    parts: StagingParts,
    files: Sequence[Path],
    to: Path | None,
    follow: Following,
    bwlimit_kbps: int = 0,
) -> StagingResult:
    """Each of files copied into `to` on the cluster (default: the site's scratch; a
    relative one is below it)."""
    staging = stager(parts, bwlimit_kbps)
    remote_dir = parts.site.config.paths.scratch / (to or "")
    done = [staging.put(f, remote_dir, follow(f.name)) for f in files]
    return _result("put", parts, done)


def get_files(
    parts: StagingParts,
    items: Sequence[str],
    to: Path | None,
    follow: Following,
    bwlimit_kbps: int = 0,
) -> StagingResult:
    """Each of items copied into `to` here (default: the current directory): a path of
    the cluster's (a relative one is below the site's scratch), or a session (its id, or
    the short one `status` shows), meaning the outputs its jobs declared: a file, or a
    directory's files (below `to`/NAME, their paths below it kept; at most
    MAX_TREE_FILES, else it is listed as not got naming the limit). Every directory is
    listed and checked before the first file is copied."""
    from jobsmith.adapters.ssh.staging import TooManyFiles

    staging = stager(parts, bwlimit_kbps)
    scratch, local_dir = parts.site.config.paths.scratch, to or Path.cwd()
    paths: list[Path] = []
    dirs: list[Path] = []
    skipped: list[str] = []
    for item in items:
        session = _session(parts, item)
        if session is None:
            paths.append(scratch / item)
            continue
        found, found_dirs = _outputs_there(parts, declared_outputs(parts, session), skipped)
        if not found and not found_dirs:
            skipped.append(f"session {session}: no declared output is there")
        paths += found
        dirs += found_dirs
    trees = []
    for directory in dict.fromkeys(dirs):
        try:
            tree = staging.tree(directory)
        except TooManyFiles as exc:
            skipped.append(str(exc))
            continue
        if not tree.files:
            skipped.append(f"{directory}: a directory with no file below it{parts.job_files.where}")
        skipped += tree.skipped
        trees.append(tree)
    done = [staging.get(p, local_dir, follow(p.name)) for p in dict.fromkeys(paths)]
    done += [c for tree in trees for c in staging.get_tree(tree, local_dir, follow)]
    return _result("get", parts, done, skipped)


def get_outputs_of(
    parts: StagingParts, job_ids: Sequence[str], to: Path | None, follow: Following
) -> StagingResult:
    """`wait --get`: the outputs declared by the sessions that submitted job_ids, copied
    into `to` as `get SESSION` copies them (once their jobs have ended: the caller
    waited); a job jobsmith did not submit here is listed as not got."""
    sessions: list[str] = []
    unknown: list[str] = []
    for job in job_ids:
        rec = parts.ledger.get(job)
        if rec is None or rec.session_id is None:
            unknown.append(f"job {job}: not submitted by jobsmith here, so no declared outputs")
        else:
            sessions.append(rec.session_id)
    if not sessions:
        return _result("get", parts, [], unknown)
    got = get_files(parts, list(dict.fromkeys(sessions)), to, follow)
    return got.model_copy(update={"not_got": [*unknown, *got.not_got]})


def declared_outputs(parts: StagingParts, session_id: str) -> list[Path]:
    """The paths a session's jobs declared as outputs (`role: output` path and paths
    parameters of their templates), as their submissions recorded them, in order."""
    from jobsmith.job_templates.params import ParamType, PathRole

    found: list[Path] = []
    for rec in parts.ledger.all():
        if rec.session_id != session_id:
            continue
        try:
            specs = parts.library.get(rec.template).spec.params
        except JobsmithError:  # a user's own script (sbatch:NAME), a template gone since
            continue
        for name, spec in specs.items():
            if spec.role is not PathRole.OUTPUT or spec.type not in (
                ParamType.PATH,
                ParamType.PATHS,
            ):
                continue
            value = rec.params.get(name)
            values = value if isinstance(value, list) else [value]
            found += [Path(str(v)) for v in values if v]
    return list(dict.fromkeys(found))


def _session(parts: StagingParts, item: str) -> str | None:
    """The session item names, or None for a path (one with a /, or naming no session)."""
    if "/" in item:
        return None
    try:
        session = parts.store.resolve(item)
        parts.store.info(session)
    except JobsmithError:
        return None
    return session


def _outputs_there(
    parts: StagingParts, paths: Sequence[Path], skipped: list[str]
) -> tuple[list[Path], list[Path]]:
    """Those of paths that are regular files on the cluster, and those that are
    directories; why the others are not got (not there yet, something else) added to
    skipped."""
    facts = parts.job_files.look(paths)
    files: list[Path] = []
    dirs: list[Path] = []
    for path in paths:
        fact = facts[path]
        if fact.found == "file":
            files.append(path)
        elif fact.found == "dir":
            dirs.append(path)
        else:
            why = fact.problem or (
                "not there (not written yet, or its job failed)"
                if fact.found == "missing"
                else "neither a file nor a directory"
            )
            skipped.append(f"{path}: {why}{parts.job_files.where}")
    return files, dirs


def _result(
    action: str, parts: StagingParts, done: Sequence[Copied], skipped: Sequence[str] = ()
) -> StagingResult:
    where = str(getattr(parts.transport, "where", ""))
    files = [StagedFile(**vars(c)) for c in done]
    return StagingResult(action=action, where=where, files=files, not_got=list(skipped))


#: a template parameter's value naming a file on this machine, to be staged first
LOCAL = "@local:"
#: where staged files go below the site's scratch, one directory per laptop directory
STAGED_DIR = "jobsmith-staged"
#: what a face is told of each file staged (the line on stderr)
Told = Callable[[StagedFile], None]


def is_local(value: object) -> bool:
    """Whether a parameter's value names a file on this machine (`@local:PATH`)."""
    return isinstance(value, str) and value.startswith(LOCAL)


def has_local(params: Mapping[str, object]) -> bool:
    """Whether any of params is `@local:`, whole or as a list's item (a comma separated
    one from the command line, or a params file's list), so a submit without one does no
    more (imports nothing more: warm.py)."""
    for value in params.values():
        items = value.split(",") if isinstance(value, str) else value
        if isinstance(items, list | tuple) and any(is_local(v) for v in items):
            return True
    return False


class LocalStaging:
    """The `@local:` files of one command: put on the cluster before the job is checked
    (in SCRATCH/jobsmith-staged/KEY/NAME, KEY from the file's directory here, so the same
    file goes to the same place and is not sent again, and two files of one name from two
    directories do not meet), the job given where they are there, and what went where
    noted in the session the command submits into (`record`). The request then holds the
    cluster's paths, and the session's intent records them: a rerun or a resumed step
    reuses them, copying nothing. On a site whose Slurm runs here the files are already
    where the job runs: the prefix is dropped.

    What `@local:` may name follows the template's parameter:
    - a `path`: the file, and its `companions` beside it (bwa_align's reference and its
      index), each of which must be here;
    - a `paths` list: each item that is `@local:PATH` (`-P files=@local:a,@local:b`, or a
      params file's list), the others left as the cluster's;
    - a `table` (a sample sheet): the sheet is read and checked here, as the job would
      read it (its header, ids, rows), every file its path cells name (relative to the
      sheet, as on the cluster) is staged, and the sheet is staged with those cells
      rewritten to where the files now are on the cluster (the rest of it as written), so
      the job reads the files the sheet named. A sheet on the cluster names the
      cluster's files; its cells are never `@local:`.
    Every file is checked here before the first is sent, so bad input copies nothing.
    """

    def __init__(self, parts: StagingParts, follow: Following, told: Told | None = None):
        self._parts = parts
        self._follow = follow
        self._told = told
        self._staging: Stager | None = None
        self._local_site: bool | None = None
        self._there: dict[Path, str] = {}  # each laptop file staged, and where it went
        self.staged: list[StagedFile] = []

    def params(self, template: str | None, params: Mapping[str, object]) -> dict[str, object]:
        """params with every `@local:` value (whole, or a list's item) staged and the
        cluster's path in its place; template: whose parameter specs say what each is
        (None, or one not found: each value staged whole). Every value is checked here
        before the first file is sent."""
        if not has_local(params):
            return dict(params)
        specs = self._specs(template)
        copies: dict[str, Callable[[], object]] = {}
        for name, value in params.items():
            spec = specs.get(name)
            kind = spec.type if spec is not None else None
            if kind is ParamType.TABLE and is_local(value):
                assert spec is not None and spec.columns is not None
                copies[name] = self._sheet(name, _local_path(value), spec.columns)
            elif kind is ParamType.PATHS and has_local({name: value}):
                copies[name] = self._items(name, value)
            elif is_local(value):
                companions = spec.companions if spec is not None else ()
                copies[name] = self._file(name, _local_path(value), companions)
        return {**params, **{name: copy() for name, copy in copies.items()}}

    def file(self, path: Path, name: str) -> Path:
        """path, or for `@local:PATH` where PATH now is on the cluster; name: what the
        command calls it (transcode's SOURCE), for a message."""
        return Path(str(self.params(None, {name: str(path)})[name]))

    def record(self, session_id: str) -> None:
        """A note in the session of what was staged where for it (nothing when nothing
        was): `sessions show` lists it, and the laptop file each cluster path came from is
        kept."""
        from jobsmith.agent.runtime.session.events import EventKind
        from jobsmith.agent.runtime.session.session_log import SessionLog

        if self.staged:
            data = {"staged": [f.model_dump() for f in self.staged]}
            SessionLog(self._parts.store, session_id).append(EventKind.NOTE, data, None)

    # --- what each kind of value stages: checked now, copied when called ------------------

    def _specs(self, template: str | None) -> Mapping[str, ParamSpec]:
        if template is None:
            return {}
        try:
            return self._parts.library.get(template).spec.params
        except JobsmithError:  # not a template of the library: each value staged whole
            return {}

    def _file(self, name: str, local: Path, companions: Sequence[str]) -> Callable[[], object]:
        """local (and its companions beside it) checked; what stages them, answering
        where local is there."""
        if self._local():
            return lambda: str(local)
        beside = [local.with_name(local.name + suffix) for suffix in companions]
        for path in (local, *beside):
            whose = f"'{local}' needs it beside it" if path != local else "it is @local:"
            _require_file(name, path, whose)

        def copy() -> object:
            for path in beside:
                self._put(path)
            return self._put(local)

        return copy

    def _items(self, name: str, value: object) -> Callable[[], object]:
        """A `paths` value's `@local:` items checked (a comma separated text is split as
        values.py splits it); what stages them, answering the list with the cluster's
        paths in their place and the cluster's own items as they are."""
        items: list[object] = []
        if isinstance(value, str):
            items += [p for p in value.split(",") if p]
        elif isinstance(value, list | tuple):
            items += value
        if self._local():
            return lambda: [str(_local_path(v)) if is_local(v) else v for v in items]
        for item in items:
            if is_local(item):
                _require_file(name, _local_path(item), "it is @local:")
        return lambda: [self._put(_local_path(v)) if is_local(v) else v for v in items]

    def _sheet(
        self, name: str, sheet: Path, columns: Mapping[str, ColumnType]
    ) -> Callable[[], object]:
        """A sample sheet here read and checked as the job would read it, and every file
        it names; what stages them and the sheet rewritten (class docstring)."""
        from jobsmith.files import read_bounded
        from jobsmith.job_templates.tables import read_table

        if self._local():
            return lambda: str(sheet)  # it and the files it names are this host's already
        try:
            data = read_bounded(sheet)
            table = read_table(sheet, columns, _file_here, read=lambda _: data)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise InputError(
                f"{_called(name)}: the sample sheet '{sheet}' on this machine: {why}"
            ) from None

        def copy() -> object:
            there = {path: self._put(path) for path in dict.fromkeys(table.paths())}
            rewritten = rewrite_cells(data.decode("utf-8"), table, columns, there)
            with tempfile.TemporaryDirectory(prefix="jobsmith-sheet-") as tmp:
                copied = Path(tmp) / sheet.name
                copied.write_text(rewritten, encoding="utf-8")
                return self._put(copied, key_of=sheet)

        return copy

    # --- the copies -----------------------------------------------------------------------

    def _local(self) -> bool:
        """Whether this site's Slurm runs here (nothing to stage), asked once."""
        if self._local_site is None:
            from jobsmith.adapters.ssh.staging import NothingToStage

            try:
                self._staging = stager(self._parts)
                self._local_site = False
            except NothingToStage:
                self._local_site = True
        return self._local_site

    def _put(self, local: Path, key_of: Path | None = None) -> str:
        """local put in SCRATCH/jobsmith-staged/KEY/NAME, KEY from the directory of key_of
        (default: local) here; the cluster's path. Each file once per command."""
        source = key_of or local
        if source in self._there:
            return self._there[source]
        assert self._staging is not None  # _local() made it
        key = hashlib.sha256(os.fsencode(source.parent)).hexdigest()[:12]
        remote_dir = self._parts.site.config.paths.scratch / STAGED_DIR / key
        copied = StagedFile(**vars(self._staging.put(local, remote_dir, self._follow(local.name))))
        copied = copied.model_copy(update={"source": str(source)})
        self._there[source] = copied.target
        self.staged.append(copied)
        if self._told is not None:
            self._told(copied)
        return copied.target


def _local_path(value: object) -> Path:
    """The laptop's path `@local:PATH` names, absolute (relative to the current directory)."""
    return Path(os.path.abspath(Path(str(value).removeprefix(LOCAL)).expanduser()))


def _called(name: str) -> str:
    """How a message names a value: a template's parameter, or a command's argument."""
    return name if name.isupper() else f"parameter '{name}'"


def _require_file(name: str, path: Path, why: str) -> None:
    """InputError naming the parameter unless path is a regular file here."""
    if not path.is_file():
        raise InputError(
            f"{_called(name)}: '{path}' is not a regular file on this machine ({why}); "
            "give a file here, or the cluster's path without @local:"
        )


def _file_here(path: Path, where: str) -> Path:
    """A sheet's path cell on this machine: a regular file here, its absolute path."""
    if not path.is_file():
        raise ValueError(f"'{path}' is not a regular file on this machine")
    return Path(os.path.abspath(path))


def rewrite_cells(
    text: str, table: Table, columns: Mapping[str, ColumnType], there: Mapping[Path, str]
) -> str:
    """A sheet's text with each path cell replaced by where its file is on the cluster
    (there: the cell's path here -> its path there); comments, blank lines, the header,
    the other cells and the rows' order as written (read_table read the same lines)."""
    out: list[str] = []
    header: list[str] | None = None
    rows = iter(table.rows)
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if not line.strip() or line.startswith("#"):
            out.append(line)
        elif header is None:
            header = line.split("\t")
            out.append(line)
        else:
            row, fields = next(rows), line.split("\t")
            for i, column in enumerate(header):
                if columns[column] is ColumnType.PATH:
                    fields[i] = there[Path(str(row[column]))]
            out.append("\t".join(fields))
    return "\n".join(out)
