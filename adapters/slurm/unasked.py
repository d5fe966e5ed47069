"""Slurm as jobsmith knows it without asking it, for `jobsmith render --no-slurm`.

A script is rendered and judged as `submit` would judge it (the #SBATCH directives, the
SBATCH_* variables sbatch would read, the site's limits and policy), but no Slurm command
runs: the transport refuses every one (adapters/transport.py, NoCommands). What only the
cluster knows is taken as absent: the queue as empty (a concurrency limit is not reached)
and no MaxSubmit limit as set. `submit` asks Slurm both.
"""

from __future__ import annotations

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import SubmitLimits
from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.adapters.transport import NoCommands


class UnaskedSlurm(SlurmScheduler):
    """SlurmScheduler over NoCommands, with the queue's answers taken as empty."""

    def __init__(self) -> None:
        super().__init__(NoCommands())

    def active_tasks(self) -> int:
        """Not asked: taken as none queued or running."""
        return 0

    def submit_limits(self, user: str, options: JobOptions) -> SubmitLimits:
        """Not asked: taken as no MaxSubmit limit set."""
        return SubmitLimits()
