"""put and get: files copied between this machine and the cluster a site reaches over SSH
(issue 29 item 3), with the remote paths checked against the site's allowed roots there.

The copying and the checks are adapters/ssh/staging.py's; this picks the copier for the
site's transport, the remote default (the site's scratch) and the local one (the current
directory), and returns the document the faces show.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from jobsmith.agent.runtime.documents import StagedFile, StagingResult
from jobsmith.errors import JobsmithError

if TYPE_CHECKING:
    from jobsmith.adapters.files_there import JobFiles
    from jobsmith.adapters.ssh.staging import Copied, Progress, Stager
    from jobsmith.adapters.transport import Transport
    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.session.store import FileSessionStore
    from jobsmith.job_templates import TemplateLibrary
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
    def store(self) -> FileSessionStore: ...


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
    the short one `status` shows), meaning the files its jobs declared as outputs."""
    staging = stager(parts, bwlimit_kbps)
    scratch, local_dir = parts.site.config.paths.scratch, to or Path.cwd()
    paths: list[Path] = []
    skipped: list[str] = []
    for item in items:
        session = _session(parts, item)
        if session is None:
            paths.append(scratch / item)
            continue
        found = _files_there(parts, declared_outputs(parts, session), skipped)
        if not found:
            skipped.append(f"session {session}: no declared output is a file there")
        paths += found
    done = [staging.get(p, local_dir, follow(p.name)) for p in dict.fromkeys(paths)]
    return _result("get", parts, done, skipped)


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


def _files_there(parts: StagingParts, paths: Sequence[Path], skipped: list[str]) -> list[Path]:
    """Those of paths that are regular files on the cluster; why the others are not got
    (a directory, not there) added to skipped."""
    facts = parts.job_files.look(paths)
    files = []
    for path in paths:
        fact = facts[path]
        if fact.found == "file":
            files.append(path)
        else:
            why = "a directory" if fact.found == "dir" else fact.problem or "not there"
            skipped.append(f"{path}: {why}{parts.job_files.where}")
    return files


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


def stage_local_params(
    parts: StagingParts, params: Mapping[str, object], follow: Following
) -> tuple[dict[str, object], list[StagedFile]]:
    """params with each value `@local:PATH` replaced by where PATH now is on the cluster:
    put into SCRATCH/jobsmith-staged/KEY/NAME (KEY from PATH's directory here, so the same
    file goes to the same place and is not sent again, and two files of one name from two
    directories do not meet). On a site whose Slurm runs here the file is already where
    the job runs: the prefix is dropped. The request then holds the cluster's path, and
    the session's intent records it: a rerun or a resumed step reuses it, copying nothing.
    """
    wanted = {
        k: v.removeprefix(LOCAL)
        for k, v in params.items()
        if isinstance(v, str) and v.startswith(LOCAL)
    }
    if not wanted:
        return dict(params), []
    from jobsmith.adapters.ssh.staging import NothingToStage

    try:
        staging: Stager | None = stager(parts)
    except NothingToStage:
        staging = None
    out, done = dict(params), []
    for name, text in wanted.items():
        local = Path(text).expanduser().absolute()
        if staging is None:
            out[name] = str(local)
            continue
        key = hashlib.sha256(os.fsencode(local.parent)).hexdigest()[:12]
        remote_dir = parts.site.config.paths.scratch / STAGED_DIR / key
        copied = staging.put(local, remote_dir, follow(local.name))
        out[name] = copied.target
        done.append(StagedFile(**vars(copied)))
    return out, done


def record_staged(store: FileSessionStore, session_id: str, staged: Sequence[StagedFile]) -> None:
    """A note in the session of what was staged where for it (nothing when nothing was):
    `sessions show` lists it, and the laptop file each cluster path came from is kept."""
    from jobsmith.agent.runtime.session.events import EventKind
    from jobsmith.agent.runtime.session.session_log import SessionLog

    if staged:
        data = {"staged": [f.model_dump() for f in staged]}
        SessionLog(store, session_id).append(EventKind.NOTE, data, None)
