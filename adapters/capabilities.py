"""What only some batch schedulers offer: each part a small Protocol of its own.

The Scheduler protocol (adapters/scheduler.py) keeps what any batch scheduler offers. A
part that only some have, or that only Slurm has in this shape, is a capability: the
adapter names the ones it has in a Capabilities record (Scheduler.capabilities), and the
agent asks for one by its field, getting None where the scheduler lacks it. A scheduler
without a capability then needs no stub that pretends, and a wrapper (the dry run in
agent/runtime/recovery/replay.py) passes the whole record on in one line.

Each caller says what it does where a capability is missing; where every caller would
do the same (a script without directives), the stand-in lives below (OptionsComment).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from jobsmith.adapters.options import JobOptions


class ScriptDirectives(Protocol):
    """Options written into the script itself (Slurm's `#SBATCH` lines; PBS and LSF have
    their own shapes). The script then says what it asks for, so the hash an approval
    binds to covers the resources too (adapters/options.py); without them, OptionsComment
    keeps that true."""

    def script_header(self, options: JobOptions) -> list[str]:
        """The script lines, after the shebang, that carry options (pure: no I/O)."""
        ...

    def is_header_line(self, line: str) -> bool:
        """True for a script line script_header makes (an adopted script's own ones too):
        a re-run replaces them all, since a stray one would override the new options."""
        ...


class ControllerFacts(Protocol):
    """How Slurm's controller and its accounting daemon hold jobs: a finished job stays
    in the controller for MinJobAge, and accounting (slurmdbd) lags the controller by its
    agent queue. Crash recovery and `wait` need both to tell "gone" from "not yet seen"."""

    def dbd_backlog(self) -> int:
        """How far accounting is behind the controller (messages not yet sent to it); while
        above zero, a job the controller already forgot may not be in accounting yet."""
        ...

    def min_job_age_s(self) -> int | None:
        """How long the controller keeps a finished job (MinJobAge), None if unknown."""
        ...


class SubmissionProbe(Protocol):
    """Where the submit command runs and whether one is still running there: an sbatch
    runs in its own session and may still submit after the process that started it died,
    so crash recovery looks for it before it calls a submission lost."""

    def submission_host(self) -> str:
        """Where this scheduler's submit commands run: this machine's host name, or the
        login node's (`ssh:user@host:port`) when they run there. A submission's intent
        records it: crash recovery elsewhere waits out an orphan's life before deciding."""
        ...

    def submission_in_flight(self, job_name: str) -> bool:
        """True while a submission of job_name may still reach the scheduler (its submit
        command still running, where submission_host says, after its caller died); True
        also when it cannot look, so that recovery never submits twice on a guess."""
        ...


class BatchScripts(Protocol):
    """The script of a job someone else submitted, handed back by the scheduler: what
    lets an adopted job be re-run. Slurm keeps it while the controller holds the job."""

    def batch_script(self, job_id: str) -> str:
        """The batch script of a job the controller still holds."""
        ...


@dataclass(frozen=True)
class ScriptOption:
    """One option of a user's batch script or submit command line, as the scheduler's
    submit command would take it: its long name, its value, and where it was."""

    name: str  # the long name, without '--'
    value: str | None
    where: str  # 'line 3' or 'the command line'

    def spelled(self) -> str:
        """The option as one word: --name or --name=value."""
        return f"--{self.name}" if self.value is None else f"--{self.name}={self.value}"


@dataclass(frozen=True)
class ScriptParts:
    """A user's batch script taken apart: the shebang, its directives, and the rest as
    written (every line after the shebang but the directive lines, in order)."""

    shebang: str
    options: tuple[ScriptOption, ...]
    rest: str
    #: line numbers of directive lines the submit command ignores (after the first command)
    ignored: tuple[int, ...]


class OwnScripts(Protocol):
    """A user's own batch script read as the scheduler's submit command reads it (for
    Slurm, its `#SBATCH` lines and sbatch's option syntax): what `jobsmith sbatch` needs."""

    def parse_script(self, text: str, name: str) -> ScriptParts:
        """text, the script called name, taken apart; InputError naming the line."""
        ...

    def split_command_line(
        self, words: list[str], own: Collection[str] = (), own_valued: Collection[str] = ()
    ) -> tuple[list[ScriptOption], str, list[str]]:
        """`[OPTIONS] SCRIPT [ARGS]`: the options, the script, its arguments; own: the
        calling tool's flags, own_valued its options that take a value, given back among
        the options with where 'own'."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """The capabilities a scheduler has; None where it lacks one. What the agent does
    then is said where it asks (e.g. resume leaves a lost submission undecided without a
    SubmissionProbe); a new capability is a new field, None for adapters that predate it."""

    directives: ScriptDirectives | None = None
    controller: ControllerFacts | None = None
    submissions: SubmissionProbe | None = None
    scripts: BatchScripts | None = None
    own_scripts: OwnScripts | None = None


class OptionsComment:
    """ScriptDirectives for a scheduler without directives: one comment line holding the
    options as JSON, which no scheduler reads (they reach it through submit(script,
    options)) but which keeps the script saying what it asks for, so an approval's hash
    still binds the resources, and a re-run still replaces it."""

    PREFIX = "# jobsmith-options: "

    def script_header(self, options: JobOptions) -> list[str]:
        """The options, every value set, as one line (field order: stable to hash)."""
        return [self.PREFIX + options.model_dump_json(exclude_defaults=True)]

    def is_header_line(self, line: str) -> bool:
        """True for a line script_header made."""
        return line.startswith(self.PREFIX)


def directives_of(capabilities: Capabilities) -> ScriptDirectives:
    """The scheduler's directives, else OptionsComment: every script jobsmith writes says
    what it asks for (the one fallback for the judge, `render` and a re-run alike)."""
    return capabilities.directives or OptionsComment()
