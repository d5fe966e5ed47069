"""The root of jobsmith's exception tree.

Every error a user can cause or meet derives from JobsmithError and carries a message
that names the bad input (file, field, parameter, job) and what to do about it. The CLI
translates these into one line on stderr and a non-zero exit; anything else is a bug.
"""

from __future__ import annotations


class JobsmithError(Exception):
    """Base of every expected error; `str(err)` is the one line shown to the user."""

    #: exit status the CLI uses for this class of error
    exit_code: int = 1

    def to_json(self) -> dict[str, object]:
        """Stable JSON shape for `--json` error output."""
        return {"error": type(self).__name__, "message": str(self)}


class InputError(JobsmithError):
    """A value given on the command line (or in a step) is malformed: a job id, a window,
    a size. Nothing was read, written or asked of Slurm."""

    exit_code = 2


class NotFound(JobsmithError):
    """The user named something that is not there: a session, a step, a job."""

    exit_code = 6


class ConfigError(JobsmithError):
    """The site configuration is missing, unreadable or invalid."""

    exit_code = 2


class TemplateError(JobsmithError):
    """A job template is unknown, malformed, or was given invalid parameters."""

    exit_code = 2


class PolicyError(JobsmithError):
    """A request breaks the site's policy (partition, limits, allowed roots)."""

    exit_code = 3


class SchedulerError(JobsmithError):
    """Slurm refused a request or answered with something we could not read."""

    exit_code = 4


class SchedulerUnavailable(SchedulerError):
    """Slurm did not answer in time or could not be reached; the request may be retried."""

    exit_code = 5
    retryable = True


class JobNotFound(SchedulerError):
    """Slurm does not know the job id (neither the controller nor accounting)."""

    exit_code = 6


class MissingExtra(JobsmithError):
    """An optional part of jobsmith (a pip extra: ssh, agent, mcp) is not installed; the
    message names the pip command (jobsmith/extras.py)."""

    exit_code = 2
