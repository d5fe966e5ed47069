"""Result models of CLI actions whose JSON shape is part of jobsmith's interface."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ControlResult(_Result):
    """What cancel / hold / release did."""

    action: str = Field(description="cancel, hold or release")
    job_ids: list[str] = Field(description="Slurm job ids it applied to")


class LogView(_Result):
    """The end of one job's output file."""

    job_id: str = Field(description="the job or array task asked about")
    stream: str = Field(description="stdout or stderr")
    path: str = Field(description="the file Slurm writes")
    lines: list[str] = Field(description="the last lines of the file, oldest first")
    truncated: bool = Field(description="true if earlier lines were left out")
