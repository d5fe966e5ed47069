"""A record of each submission jobsmith made: what, when, and where its logs go.

One JSON file per job id, written to a temporary name and renamed into place: rename is
atomic on local disks and on NFS, so a reader on another login node never sees half a
record. (The session store of the agent will carry the same facts as events.)
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobsmith.adapters.options import JobOptions
from jobsmith.files import replace_file


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
    """Submission records in a directory (one file per job id)."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory

    def record(self, rec: SubmissionRecord) -> Path:
        """Store rec atomically; returns its path."""
        target = self._dir / f"{rec.job_id}.json"
        replace_file(target, rec.model_dump_json(indent=2).encode())
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
        floor = datetime.now() - timedelta(days=days)
        return [r for r in self.all() if r.submitted_at >= floor]

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
