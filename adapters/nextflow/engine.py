"""NextflowEngine: Nextflow behind jobsmith's WorkflowEngine protocol, as pure functions."""

from __future__ import annotations

from collections.abc import Sequence

from jobsmith.adapters.nextflow.command import ENVIRONMENT, command_line
from jobsmith.adapters.nextflow.config import render_config
from jobsmith.adapters.nextflow.files import AttemptFiles
from jobsmith.adapters.nextflow.log import parse_log
from jobsmith.adapters.nextflow.trace import parse_trace
from jobsmith.adapters.workflow import (
    EngineKind,
    EngineSite,
    HeadJob,
    LaunchRequest,
    Parsed,
    RecordFile,
)

TRACE = "trace"
LOG = "log"


class NextflowEngine:
    """Launches `nextflow run` as a Slurm head job and reads its trace and log.

    The head job writes the generated config (config.py) and runs the command line
    (command.py); the trace and log it follows are named per attempt (files.py).
    """

    @property
    def kind(self) -> EngineKind:
        """Nextflow."""
        return EngineKind.NEXTFLOW

    def launch(self, site: EngineSite, request: LaunchRequest, *, attempt: int) -> HeadJob:
        """The config file and command of this attempt; ValueError for unusable names."""
        files = AttemptFiles(attempt)
        return HeadJob(
            files={files.config: render_config(site, files)},
            argv=command_line(request, files),
            environment=dict(ENVIRONMENT),
        )

    def records(self, request: LaunchRequest, *, attempt: int) -> tuple[RecordFile, ...]:
        """This attempt's trace and log."""
        files = AttemptFiles(attempt)
        return (RecordFile(path=files.trace, kind=TRACE), RecordFile(path=files.log, kind=LOG))

    def parse(self, record: RecordFile, lines: Sequence[str], context: tuple[str, ...]) -> Parsed:
        """New lines of the trace or the log; nothing for a record kind it does not write."""
        if record.kind == TRACE:
            return parse_trace(lines, context)
        if record.kind == LOG:
            return parse_log(lines, context)
        return Parsed(context=context)
