"""Where one launch attempt keeps its files, relative to the launch directory.

Every record is named per attempt: Nextflow renames `.nextflow.log` on each run and a trace
with a fixed name would be overwritten by the resumed run, so a watcher following attempt 2
must never read attempt 1's bytes from a stale offset.
"""

from __future__ import annotations

from dataclasses import dataclass

#: jobsmith's own folder inside the launch directory, next to Nextflow's `.nextflow/`
FOLDER = ".jobsmith"


@dataclass(frozen=True)
class AttemptFiles:
    """The paths (relative to the launch directory) one attempt writes or reads."""

    attempt: int

    def __post_init__(self) -> None:
        if self.attempt < 1:
            raise ValueError(f"attempts count from 1, not {self.attempt}")

    @property
    def config(self) -> str:
        """The generated config, passed with -c."""
        return f"{FOLDER}/nextflow-{self.attempt}.config"

    @property
    def log(self) -> str:
        """Nextflow's own log (-log), instead of `.nextflow.log`."""
        return f"{FOLDER}/nextflow-{self.attempt}.log"

    @property
    def trace(self) -> str:
        """The trace file (one row per task attempt)."""
        return f"{FOLDER}/trace-{self.attempt}.tsv"

    @property
    def report(self) -> str:
        """Nextflow's HTML execution report."""
        return f"{FOLDER}/report-{self.attempt}.html"

    @property
    def timeline(self) -> str:
        """Nextflow's HTML timeline."""
        return f"{FOLDER}/timeline-{self.attempt}.html"
