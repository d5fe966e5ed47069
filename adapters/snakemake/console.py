"""The grammar of Snakemake's console output (9.x, with the Slurm executor plugin 2.x).

One line in, one typed `Line` out; what a line means in its block (a field after
"rule align:" or after "Error in rule align:") is the parser's business. The patterns
follow the texts in snakemake/logging.py, snakemake/scheduling/job_scheduler.py and the
plugin's __init__.py, as seen in tests/fixtures/snakemake/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class JobHeader:
    """ "rule align:", "localrule all:", "checkpoint x:": a job's description follows."""

    rule: str
    local: bool


@dataclass(frozen=True)
class ErrorHeader:
    """ "Error in rule align:": the failed job's description follows."""

    rule: str


@dataclass(frozen=True)
class Field:
    """ "    jobid: 4": one field of the block above (4 spaces, a lower-case key)."""

    key: str
    value: str


@dataclass(frozen=True)
class Submitted:
    """The plugin handed a rule job to sbatch."""

    jobid: str
    native_id: str
    log: str | None  # the plugin's Slurm output file for the job


@dataclass(frozen=True)
class ArraySubmitted:
    """The plugin submitted rule jobs as one Slurm array (`--slurm-array-jobs`).

    Its line lists the Snakemake jobids in task order: the i-th is task start + i.
    """

    pairs: tuple[tuple[str, str], ...]  # (jobid, "<array id>_<task>")


@dataclass(frozen=True)
class Finished:
    """A rule job ended well."""

    jobid: str
    rule: str | None


@dataclass(frozen=True)
class Progress:
    """ "3 of 6 steps (50%) done"."""

    done: int
    total: int
    text: str


@dataclass(frozen=True)
class Restart:
    """ "Trying to restart job 4.": a retry (`--retries`) of a failed job."""

    jobid: str


@dataclass(frozen=True)
class Said:
    """A line that is a message by itself: what it is, and the words."""

    what: str  # one of the SAID_* names below
    text: str
    rule: str | None = None


@dataclass(frozen=True)
class ExceptionHeader:
    """ "LockException:" or "SyntaxError in file …, line 3:": the next line says more."""

    name: str
    text: str


@dataclass(frozen=True)
class Indented:
    """Any other indented or empty line: part of whatever block is open."""


@dataclass(frozen=True)
class Other:
    """Any other line at the left margin: it ends an open block."""


Line = (
    JobHeader
    | ErrorHeader
    | Field
    | Submitted
    | ArraySubmitted
    | Finished
    | Progress
    | Restart
    | Said
    | ExceptionHeader
    | Indented
    | Other
)

SAID_RUN_FAILED = "run_failed"
SAID_NOTHING_TO_DO = "nothing_to_do"
SAID_ABORTED = "aborted"
SAID_USER_TERMINATED = "user_terminated"
SAID_SUBMIT_ERROR = "submit_error"
SAID_WARNING = "warning"

_JOB_HEADER = re.compile(r"(local)?(?:rule|checkpoint) (\S+):")
_ERROR_HEADER = re.compile(r"Error in rule (\S+):")
_FIELD = re.compile(r" {4}([a-z_]+):(?: (.*))?")
_SUBMITTED = re.compile(
    r"Job (\d+) has been submitted with SLURM jobid (\d+(?:_\d+)?)(?: \(log: (.*)\)\.|\b.*)"
)
_ARRAY = re.compile(
    r"Submitted array job with Snakemake IDs ([\d,]+) and SLURM job ID (\d+)\. "
    r"The individual task IDs are (\d+)-\d+\."
)
# Snakemake 8/9 print "Finished jobid: N (Rule: R)"; 7 printed "Finished job N."
_FINISHED = re.compile(r"Finished job(?:id:)? (\d+)(?: \(Rule: (\S+)\)|\.)")
_PROGRESS = re.compile(r"(\d+) of (\d+) steps \([\d.]+%\) done")
_RESTART = re.compile(r"Trying to restart job (\d+)\.")
_SUBMIT_EXCEPTION = re.compile(r"Exception in run_(?:array_)?jobs? for rule (\S+): .*")
_EXCEPTION = re.compile(r"([A-Z][A-Za-z]*(?:Error|Exception))(?::| in .*:)")
# a local rule job's own failure, told again by the "Error in rule" block that follows
_JOB_EXCEPTIONS = frozenset({"RuleException", "CalledProcessError"})

# (prefix, what): lines recognised by how they start
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("Exiting because a job execution failed", SAID_RUN_FAILED),
    ("Nothing to be done", SAID_NOTHING_TO_DO),
    ("Will exit after finishing currently running jobs", SAID_ABORTED),
    ("Cancelling snakemake on user request", SAID_ABORTED),
    ("Terminating processes on user request", SAID_USER_TERMINATED),
    ("Error: Directory cannot be locked", SAID_RUN_FAILED),
)
# what the plugin warns about that a person may act on; its note that Snakemake runs
# inside a Slurm job is left out on purpose: jobsmith runs it there by design
_WARNINGS: tuple[str, ...] = (
    "has low CPU efficiency",
    "Unable to get the status of all active jobs",
    "A Job preemption",
    "No job memory information",
    "No SLURM account given",
    "Guessed SLURM account",
    "Failed to retrieve jobstep reason",
)


def classify(line: str) -> Line:
    """What one console line is (trailing newline and carriage return ignored)."""
    line = line.rstrip("\r\n")
    if not line or line[0].isspace():
        field = _FIELD.fullmatch(line)
        return Field(field[1], field[2] or "") if field else Indented()
    return _margin_line(line)


def _margin_line(line: str) -> Line:
    if m := _SUBMITTED.fullmatch(line):
        return Submitted(m[1], m[2], m[3])
    if m := _ARRAY.fullmatch(line):
        ids, start = m[1].split(","), int(m[3])
        return ArraySubmitted(tuple((j, f"{m[2]}_{start + i}") for i, j in enumerate(ids) if j))
    if m := _FINISHED.fullmatch(line):
        return Finished(m[1], m[2])
    if m := _PROGRESS.fullmatch(line):
        return Progress(int(m[1]), int(m[2]), line)
    if m := _JOB_HEADER.fullmatch(line):
        return JobHeader(m[2], bool(m[1]))
    if m := _ERROR_HEADER.fullmatch(line):
        return ErrorHeader(m[1])
    if m := _RESTART.fullmatch(line):
        return Restart(m[1])
    if m := _SUBMIT_EXCEPTION.fullmatch(line):
        return Said(SAID_SUBMIT_ERROR, line, rule=m[1])
    for prefix, what in _PREFIXES:
        if line.startswith(prefix):
            return Said(what, line)
    if any(w in line for w in _WARNINGS):
        return Said(SAID_WARNING, line)
    if (m := _EXCEPTION.fullmatch(line)) and m[1] not in _JOB_EXCEPTIONS:
        return ExceptionHeader(m[1], line)
    return Other()
