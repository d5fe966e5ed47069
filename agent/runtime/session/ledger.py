"""A record of each submission jobsmith made: what, when, and where its logs go.

One JSON file per job id, written to a temporary name and renamed into place: rename is
atomic on local disks and on NFS, so a reader on another login node never sees half a
record. (The session store of the agent will carry the same facts as events.)

Beside them, an index (`index.jsonl`: one line per record, its job id, template, session
and submission time) lets the advice and `status` read the newest records of a template
or of the last days without parsing every record (`newest`, `since`), and the watcher
see every job of every session without reading their records (`entries`). The records
stay the truth and their format is unchanged: the index is a hint, checked against the
directory's file names at every read. A record without a line (written by an older
jobsmith, or a line lost to a write on another host) is read once and indexed; a line
without a record is dropped; a damaged line, or one without a session (written before
the index had them), is ignored, so its record is read once and indexed again; a missing
index is rebuilt.
Older jobsmith versions read only `*.json` and never see it.
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobsmith.adapters.options import JobOptions
from jobsmith.files import replace_file

#: the index's file name beside the records (not *.json: never read as a record)
INDEX = "index.jsonl"


class SubmissionRecord(BaseModel):
    """What jobsmith submitted and Slurm accepted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: str = Field(description="Slurm's job id (the array's id for arrays)")
    cluster: str = Field(description="site cluster name")
    template: str = Field(description="template name")
    params: dict[str, object] = Field(description="validated template parameters")
    options: JobOptions = Field(description="the sbatch options submitted")
    script_sha256: str = Field(description="hash of the exact script submitted")
    submitted_at: datetime = Field(description="when Slurm accepted it")
    recovered: bool = Field(False, description="found by its tag after an unclear answer")
    warnings: list[str] = Field(default_factory=list, description="what sbatch said on stderr")
    session_id: str | None = Field(None, description="the session that submitted it")


class JobLedger:
    """Submission records in a directory (one file per job id), with an index (module
    docstring)."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory

    @property
    def directory(self) -> Path:
        """Where the records are (the feeder's index of workloads lives beside them)."""
        return self._dir

    def record(self, rec: SubmissionRecord) -> Path:
        """Store rec atomically, and its line in the index; returns its path."""
        target = self._dir / f"{rec.job_id}.json"
        replace_file(target, rec.model_dump_json(indent=2).encode())
        self._append([IndexEntry.of(rec)])
        return target

    def get(self, job_id: str) -> SubmissionRecord | None:
        """The record of a job jobsmith submitted (array task ids map to their array)."""
        path = self._dir / f"{job_id.partition('_')[0]}.json"
        try:
            return SubmissionRecord.model_validate(json.loads(path.read_text("utf-8")))
        except FileNotFoundError:
            return None
        except (ValueError, ValidationError):
            return None  # a damaged record must not stop status/logs for other jobs

    def recent(self, days: int = 7) -> list[SubmissionRecord]:
        """What jobsmith submitted for this user in the last days, oldest first."""
        return self.since(datetime.now() - timedelta(days=days))

    def since(self, floor: datetime) -> list[SubmissionRecord]:
        """The records submitted at floor or later, oldest first (through the index)."""
        chosen = [e for e in self._entries() if e.submitted_at >= floor]
        return self._read(sorted(chosen, key=IndexEntry.order))

    def newest(self, template: str, limit: int) -> list[SubmissionRecord]:
        """The template's newest records, newest first, at most limit (through the
        index: only those records are read)."""
        if limit <= 0:
            return []
        chosen = sorted(
            (e for e in self._entries() if e.template == template),
            key=IndexEntry.order,
            reverse=True,
        )
        found: list[SubmissionRecord] = []
        for entry in chosen:  # in order, until limit are read (a damaged one is skipped)
            rec = self.get(entry.job_id)
            if rec is not None and rec.template == template:
                found.append(rec)
                if len(found) == limit:
                    break
        return found

    def entries(self) -> list[IndexEntry]:
        """Every record's index entry (job id, template, session, submission time), in
        submission order: what the watcher needs of every job without reading records."""
        return sorted(self._entries(), key=IndexEntry.order)

    def recent_job_ids(self) -> list[str]:
        """The job ids of the last 7 days' submissions (`status` without ids, for ask's
        tools and the MCP server's)."""
        return [r.job_id for r in self.recent()]

    def all(self) -> list[SubmissionRecord]:
        """Every readable record, oldest first."""
        if not self._dir.is_dir():
            return []
        recs = [self.get(p.stem) for p in self._dir.glob("*.json")]
        return sorted((r for r in recs if r is not None), key=lambda r: r.submitted_at)

    # --- the index --------------------------------------------------------------------

    def _read(self, entries: list[IndexEntry]) -> list[SubmissionRecord]:
        recs = (self.get(e.job_id) for e in entries)
        return sorted((r for r in recs if r is not None), key=lambda r: r.submitted_at)

    def _entries(self) -> list[IndexEntry]:
        """One entry per record in the directory now: the index's, the missing ones read
        from their records (and added to the index); the index rewritten if it holds many
        lines no record has."""
        try:
            names = [n[:-5] for n in os.listdir(self._dir) if n.endswith(".json")]
        except (FileNotFoundError, NotADirectoryError):
            return []
        indexed, lines = self._load_index()
        entries: list[IndexEntry] = []
        missing: list[IndexEntry] = []
        for job_id in names:
            entry = indexed.get(job_id)
            if entry is None:
                rec = self.get(job_id)
                if rec is None:
                    continue  # damaged, or not a record: all() skips it too
                entry = IndexEntry.of(rec)
                missing.append(entry)
            entries.append(entry)
        if lines > 2 * len(entries) + 64:
            self._rewrite(entries)  # mostly lines of records gone, or the same job again
        elif missing:
            self._append(missing)
        return entries

    def _load_index(self) -> tuple[dict[str, IndexEntry], int]:
        """The index's entries by job id (the last line of a job wins) and its line count."""
        try:
            text = (self._dir / INDEX).read_text("utf-8", errors="replace")
        except OSError:
            return {}, 0
        found: dict[str, IndexEntry] = {}
        lines = 0
        for line in text.splitlines():
            lines += 1
            entry = IndexEntry.parse(line)
            if entry is not None:
                found[entry.job_id] = entry
        return found, lines

    def _append(self, entries: list[IndexEntry]) -> None:
        """Add lines to the index, in one write (O_APPEND); an index that cannot be
        written is no index: the records still say everything."""
        data = "".join(e.line() for e in entries).encode()
        with contextlib.suppress(OSError):
            fd = os.open(self._dir / INDEX, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    def _rewrite(self, entries: list[IndexEntry]) -> None:
        with contextlib.suppress(OSError):
            replace_file(self._dir / INDEX, "".join(e.line() for e in entries).encode())


class IndexEntry:
    """One line of the index: a record's job id, template, session and submission time."""

    __slots__ = ("job_id", "session_id", "submitted_at", "template")

    def __init__(
        self, job_id: str, template: str, session_id: str | None, submitted_at: datetime
    ) -> None:
        self.job_id = job_id
        self.template = template
        self.session_id = session_id
        self.submitted_at = submitted_at

    @classmethod
    def of(cls, rec: SubmissionRecord) -> IndexEntry:
        return cls(rec.job_id, rec.template, rec.session_id, rec.submitted_at)

    @classmethod
    def parse(cls, line: str) -> IndexEntry | None:
        """The entry a line holds, or None for a damaged one or one of the format before
        sessions were indexed (no "s")."""
        try:
            data = json.loads(line)
            entry = cls(data["j"], data["t"], data["s"], datetime.fromisoformat(data["at"]))
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(entry.job_id, str) or not isinstance(entry.template, str):
            return None
        if entry.session_id is not None and not isinstance(entry.session_id, str):
            return None
        return entry

    def line(self) -> str:
        at = self.submitted_at.isoformat()
        data = {"j": self.job_id, "t": self.template, "s": self.session_id, "at": at}
        return json.dumps(data) + "\n"

    def order(self) -> tuple[datetime, str]:
        return (self.submitted_at, self.job_id)
