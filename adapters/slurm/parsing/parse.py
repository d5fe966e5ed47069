"""Parsing what Slurm prints into records: pure functions from text to JobRecord/QueueRecord.

Covers sacct's parsable (-P) and JSON output and squeue's --Format and JSON output, for
Slurm 22.05 (OpenAPI data v0.0.38) and 24.11 (data_parser v0.0.42) alike. The two JSON
shapes are told apart by their values (a state is a string or a list, a number is bare or
wrapped as {set, infinite, number}), never by a version argument. Nothing here runs a
command; states are mapped only by states.parse_state().

Damaged input: a row or JSON record that cannot be read is skipped (and, if the caller
passes a `skipped` list, its text is appended there) so that one garbled line never fails
a whole poll; a job Slurm forgot to print reads as NOT_VISIBLE upstream, never as a
failure. Output that is not what the parser expects at all (sacct text without its header,
JSON without a 'jobs' list) raises ValueError: that is a wrong call, not a damaged row.

Times: sacct and squeue print local wall-clock time without a zone; those parse to naive
datetimes unless the caller passes the cluster's `tz`. Epoch seconds (the JSON, or text
printed with SLURM_TIME_FORMAT=%s) parse to UTC-aware datetimes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any, NamedTuple, TypeVar

from jobsmith.adapters.records import JobRecord, QueueRecord, StepRecord
from jobsmith.adapters.slurm.commands.argv import DELIMITER
from jobsmith.adapters.slurm.commands.logpaths import expand_log_pattern
from jobsmith.adapters.slurm.parsing.states import parse_state
from jobsmith.adapters.states import JobState
from jobsmith.units import parse_printed_duration, parse_printed_memory, parse_printed_seconds

# --- small values -----------------------------------------------------------------------

_EXIT = re.compile(r"(?P<code>\d+):(?P<signal>\d+)")
#: what Slurm prints for "nothing here", across fields and versions
_ABSENT = frozenset({"", "None", "Unknown", "N/A", "(null)", "None assigned"})
#: Slurm's NO_VAL: an unset 32-bit value
_NO_VAL = 0xFFFFFFFE
#: NO_VAL and INFINITE mark an unset time in the JSON (24.11: 4294967294)
_UNSET_EPOCH = _NO_VAL
_MIB = 1024**2
R = TypeVar("R", JobRecord, QueueRecord)


def parse_exit_code(text: str | None) -> tuple[int | None, int | None]:
    """(exit status, signal) from sacct's 'CODE:SIGNAL', e.g. '0:9' -> (0, 9); else (None, None)."""
    match = _EXIT.fullmatch((text or "").strip())
    if match is None:
        return None, None
    return int(match["code"]), int(match["signal"])


def parse_time(text: str | None, tz: tzinfo | None = None) -> datetime | None:
    """A timestamp as sacct/squeue print it: '2026-11-29T08:19:49'; None for None/Unknown/''.

    The text carries no zone: the result is naive unless `tz` (the cluster's zone) is given.
    All digits are epoch seconds (SLURM_TIME_FORMAT=%s) and give an aware UTC datetime.
    """
    value = (text or "").strip()
    if value.isdigit():
        return _epoch(int(value))
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:  # None, Unknown, N/A, or a site's SLURM_TIME_FORMAT=relative
        return None
    return parsed.replace(tzinfo=tz) if parsed.tzinfo is None and tz is not None else parsed


def _text(value: object) -> str | None:
    """A string field, None where Slurm printed a placeholder for 'nothing'."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    return None if value in _ABSENT else value


def _int(text: str | None) -> int | None:
    value = (text or "").strip()
    return int(value) if value.isdigit() else None


# --- the records, each kind built in one place ----------------------------------------------
#
# Text and JSON say the same things in different places and units: each reader below finds
# the values in its format, and one builder per kind (_job_record, _queue_record) makes the
# record from them, so a new field, or a rule such as "a stand-in row's name is unknown",
# is written once for both formats.


class _Ids(NamedTuple):
    """Which job or array task a record is about: the five id fields both kinds share."""

    job_id: str  # as Slurm displays it: '331', '333_2', '333_[4-9%2]'
    job_id_raw: str
    array_job_id: str | None
    array_task_id: int | None
    array_task_range: str | None


#: A JobRecord's plain text fields (None where Slurm printed a placeholder): the sacct -P
#: column that has it, and where sacct --json has it.
_JOB_TEXT: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "reason": ("Reason", ("state", "reason")),
    "node_list": ("NodeList", ("nodes",)),
    "partition": ("Partition", ("partition",)),
    "account": ("Account", ("account",)),
    "qos": ("QOS", ("qos",)),
    "user": ("User", ("user",)),
    "work_dir": ("WorkDir", ("working_directory",)),
    "comment": ("Comment", ("comment", "job")),
}
#: A QueueRecord's plain text fields: the squeue -O column, and the squeue --json key.
_QUEUE_TEXT: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "user": ("UserName", ("user_name",)),
    "reason": ("Reason", ("state_reason",)),
    "dependency": ("Dependency", ("dependency",)),
    "partition": ("Partition", ("partition",)),
    "comment": ("Comment", ("comment",)),
}
#: a plain text field by its record field name
_Text = Callable[[str], str | None]


def _row_text(row: Mapping[str, str], table: Mapping[str, tuple[str, tuple[str, ...]]]) -> _Text:
    """The plain text fields of a row of delimited text, found by their columns."""
    return lambda field: _text(row.get(table[field][0]))


def _json_text(job: Mapping[str, Any], table: Mapping[str, tuple[str, tuple[str, ...]]]) -> _Text:
    """The plain text fields of a JSON record, found by their paths."""
    return lambda field: _text(_dig(job, *table[field][1]))


def _row_ids(ids: re.Match[str], raw: str | None, array_job_id: str | None = None) -> _Ids:
    """The ids of a row of text, from its JobID (matched by _JOB_ID) and the raw id's cell;
    the array's id is its own cell where the output has one, else read from the JobID."""
    task = int(ids["task"]) if ids["task"] is not None else None
    in_array = task is not None or ids["range"] is not None
    return _Ids(
        job_id=ids["job"],
        job_id_raw=_text(raw) or ids["job"],
        array_job_id=(_text(array_job_id) or ids["base"]) if in_array else None,
        array_task_id=task,
        array_task_range=ids["range"],
    )


def _job_record(
    ids: _Ids,
    text: _Text,
    *,
    name: str,
    stand_in: bool,
    state: JobState,
    exit: tuple[int | None, int | None],
    derived_exit_code: int | None,
    cancelled_by: str | None = None,
    cancelled_by_user: str | None = None,
    elapsed_s: int | None,
    timelimit_s: int | None,
    max_rss_bytes: int | None,
    req_mem_bytes: int | None,
    alloc_cpus: int | None,
    total_cpu_s: float | None,
    alloc_tres: str | None,
    req_tres: str | None,
    times: tuple[datetime | None, datetime | None, datetime | None],
    steps: Sequence[StepRecord] = (),
) -> JobRecord:
    """A JobRecord from what sacct said in either format, its steps folded in. `times`
    are submit, start, end; the job's peak RSS is the largest of its own and its steps'
    (sacct fills MaxRSS on step rows only); a stand-in row's name and time limit are not
    the job's, so they are left unknown. Built once, steps and all: a 1,000-task array's
    parse makes one record per task, not one and a copy."""
    exit_code, signal = exit
    submit_time, start_time, end_time = times
    return JobRecord(
        **ids._asdict(),
        name="" if stand_in else name,
        state=state,
        cancelled_by=cancelled_by,
        cancelled_by_user=cancelled_by_user,
        exit_code=exit_code,
        signal=signal,
        derived_exit_code=derived_exit_code,
        reason=text("reason"),
        elapsed_s=elapsed_s,
        timelimit_s=None if stand_in else timelimit_s,
        max_rss_bytes=_max([max_rss_bytes, *(s.max_rss_bytes for s in steps)]),
        req_mem_bytes=req_mem_bytes,
        alloc_cpus=alloc_cpus,
        total_cpu_s=total_cpu_s,
        node_list=text("node_list"),
        partition=text("partition"),
        account=text("account"),
        qos=text("qos"),
        user=text("user"),
        work_dir=text("work_dir"),
        comment=text("comment"),
        alloc_tres=alloc_tres,
        req_tres=req_tres,
        submit_time=submit_time,
        start_time=start_time,
        end_time=end_time,
        steps=tuple(steps),
        stand_in=stand_in,
    )


def _queue_record(
    ids: _Ids,
    text: _Text,
    *,
    name: str,
    state: JobState,
    exit: tuple[int | None, int | None],
    estimated_start: datetime | None,
    stdout: Any,
    stderr: Any,
    node: str | None = None,
) -> QueueRecord:
    """A QueueRecord from what squeue said in either format. `stdout` and `stderr` are the
    output-file patterns as printed, expanded where the job or task is known (`node` for
    %N); without -e, stderr goes to the stdout file, so an empty stderr reads as stdout's."""
    user = text("user")
    exit_code, signal = exit

    def path(pattern: Any) -> str | None:
        return _output_path(
            pattern, ids.job_id_raw, ids.array_job_id, ids.array_task_id, name, user, node
        )

    stdout_path = path(stdout)
    return QueueRecord(
        **ids._asdict(),
        name=name,
        user=user,
        state=state,
        exit_code=exit_code,
        signal=signal,
        reason=text("reason"),
        dependency=text("dependency"),
        partition=text("partition"),
        estimated_start=estimated_start,
        comment=text("comment"),
        stdout_path=stdout_path,
        stderr_path=path(stderr) or stdout_path,
    )


# --- rows of delimited text ---------------------------------------------------------------

# JobID as sacct and squeue print it: '331', '331.batch', '333_2', '333_[4-9%2]', '40+1.0'
_JOB_ID = re.compile(
    r"(?P<job>(?P<base>\d+)(?:_(?:(?P<task>\d+)|\[(?P<range>[^\]]+)\]))?(?:\+\d+)?)"
    r"(?:\.(?P<step>.+))?"
)


def _split_row(line: str, delimiter: str, ncols: int, absorb: int | None) -> list[str] | None:
    """The row's ncols cells, or None if they cannot be placed safely.

    Extra delimiters (typed inside a free-text value) all go to column `absorb`: cells
    left of it are split from the left, cells right of it from the right, so no other
    column shifts. A short row is refused: its columns cannot be lined up with the header.
    """
    parts = line.split(delimiter)
    if len(parts) == ncols:
        return parts
    if len(parts) < ncols or absorb is None:
        return None
    extra = len(parts) - ncols
    merged = delimiter.join(parts[absorb : absorb + extra + 1])
    return [*parts[:absorb], merged, *parts[absorb + extra + 1 :]]


def _skip(skipped: list[str] | None, what: str) -> None:
    if skipped is not None:
        skipped.append(what)


# --- sacct -P --------------------------------------------------------------------------------

#: The sacct --format fields jobsmith requests, in this order. Free text (JobName, WorkDir,
#: Comment) comes last, as one block, with Comment (anything a user or tool typed) as the
#: final column: a stray delimiter inside any of the three can then only blur those three
#: (the extras go to Comment, see _split_row); ids, states, exit codes, times and memory
#: are split off from the left and never shift.
SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobIDRaw",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Elapsed",
    "Timelimit",
    "MaxRSS",
    "ReqMem",
    "AllocCPUS",
    "TotalCPU",
    "NodeList",
    "Partition",
    "Account",
    "User",
    "Reason",
    "AllocTRES",
    "QOS",
    "ReqTRES",
    "Submit",
    "Start",
    "End",
    "JobName",
    "WorkDir",
    "Comment",
)
_FREE_TEXT = frozenset({"JobName", "WorkDir", "Comment"})
#: what Slurm granted a job beyond its limits: QoS and TRES. Each costs sacct a lookup of
#: its own in slurmdbd (about 0.09 s each on the lab, a 0.09 s sacct becomes 0.27 s)
TERMS_FIELDS: frozenset[str] = frozenset({"QOS", "AllocTRES", "ReqTRES"})
#: SACCT_FIELDS without the terms: what the advice's history (sizing.py) and a poll that
#: follows states (`wait`) read
USAGE_FIELDS: tuple[str, ...] = tuple(f for f in SACCT_FIELDS if f not in TERMS_FIELDS)
#: what a job's earlier runs are read for (Scheduler.runs): where and how each ended
RUN_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobIDRaw",
    "JobName",
    "State",
    "ExitCode",
    "NodeList",
    "Submit",
    "Start",
    "End",
)
_CANONICAL = {name.lower(): name for name in SACCT_FIELDS}


def parse_sacct_parsable(
    text: str,
    delimiter: str = "|",
    *,
    tz: tzinfo | None = None,
    skipped: list[str] | None = None,
) -> list[JobRecord]:
    """Records from `sacct -P --delimiter=D --format=...` output, header line included.

    Columns are found by the header, so any field list parses (unknown ones are ignored).
    Step rows ('331.batch', '346.extern', '331.0') are folded into their job's `steps`,
    and the job's max_rss_bytes is the largest over its steps (sacct fills MaxRSS on step
    rows only). Array tasks ('333_2') are records of their own; a pending remainder
    ('333_[4-9%2]') carries array_task_range. Unreadable rows are skipped (see module doc);
    steps whose job row is missing are dropped with it.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [_CANONICAL.get(h.strip().lower(), h.strip()) for h in lines[0].split(delimiter)]
    if "JobID" not in header:
        raise ValueError("sacct output without its header line (no JobID column)")
    free = [i for i, name in enumerate(header) if name in _FREE_TEXT]
    absorb = free[-1] if free else None
    cells = _Cells(tz)
    # one pass: a job's row is kept as read (its cells, plain text), its steps' records
    # gather under it, and each job's record is built once at the end, steps folded in
    jobs: dict[str, tuple[str, dict[str, str], re.Match[str]]] = {}
    steps: dict[str, list[StepRecord]] = {}
    earlier: dict[str, list[str | None]] = {}  # sacct -D: the states of earlier runs
    for line in lines[1:]:
        split = _split_row(line, delimiter, len(header), absorb)
        row = dict(zip(header, split, strict=True)) if split is not None else {}
        ids = _JOB_ID.fullmatch(row.get("JobID", "").strip())
        if ids is None:
            _skip(skipped, line)
            continue
        try:
            if ids["step"] is None:
                _rerun(jobs, steps, earlier, ids["job"], row)
                jobs[ids["job"]] = (line, row, ids)
            else:
                step = _step_from_row(row, ids["step"], cells)
                steps.setdefault(ids["job"], []).append(step)
        except ValueError:  # pydantic refused a value: this row only
            _skip(skipped, line)
    records = []
    for key, (line, row, ids) in jobs.items():
        try:
            record = _job_from_row(row, ids, cells, steps.get(key, ()))
            if key in earlier:
                runs = tuple(cells.state(state)[0] for state in earlier[key])
                record = record.model_copy(update={"requeues": runs})
            records.append(record)
        except ValueError:  # pydantic refused a value: this job only (its steps go with it)
            _skip(skipped, line)
    return records


def _rerun(
    jobs: Mapping[str, tuple[str, dict[str, str], re.Match[str]]],
    steps: dict[str, list[StepRecord]],
    earlier: dict[str, list[str | None]],
    key: str,
    row: Mapping[str, str],
) -> None:
    """A job row for a job already read (sacct -D lists every run of a requeued job,
    oldest first, each with its steps): the run read before is an earlier one, its state
    kept in earlier and its steps dropped, so the record and its steps are the latest
    run's. A row of another name is another job that once had the same id (Slurm's ids
    restart when its state is lost): it is dropped, not counted as a run."""
    if key not in jobs:
        return
    steps.pop(key, None)
    before = jobs[key][1]
    if before.get("JobName") == row.get("JobName"):
        earlier.setdefault(key, []).append(before.get("State"))
    else:
        earlier.pop(key, None)


class _Cells:
    """The values of one sacct -P answer's cells, each distinct text converted once.

    A 1,000-task array repeats its time limit, memory, state, exit code and most of its
    times on every row: converting each distinct cell once per answer, not once per row,
    is most of what a large array's parse saved. The memory lives as long as the one
    parse (nothing is kept between polls).
    """

    def __init__(self, tz: tzinfo | None) -> None:
        self._tz = tz
        self._states: dict[str | None, tuple[JobState, str | None]] = {}
        self._exits: dict[str | None, tuple[int | None, int | None]] = {}
        self._durations: dict[str | None, int | None] = {}
        self._seconds: dict[str | None, float | None] = {}
        self._memory: dict[str | None, int | None] = {}
        self._times: dict[str | None, datetime | None] = {}
        #: step records by what their row says (_step_from_row)
        self.steps: dict[tuple[str | None, ...], StepRecord] = {}

    def state(self, cell: str | None) -> tuple[JobState, str | None]:
        """parse_state of the cell."""
        return _once(self._states, parse_state, cell)

    def exit(self, cell: str | None) -> tuple[int | None, int | None]:
        """parse_exit_code of the cell."""
        return _once(self._exits, parse_exit_code, cell)

    def duration(self, cell: str | None) -> int | None:
        """parse_printed_duration of the cell."""
        return _once(self._durations, parse_printed_duration, cell)

    def seconds(self, cell: str | None) -> float | None:
        """parse_printed_seconds of the cell."""
        return _once(self._seconds, parse_printed_seconds, cell)

    def memory(self, cell: str | None) -> int | None:
        """parse_printed_memory of the cell."""
        return _once(self._memory, parse_printed_memory, cell)

    def time(self, cell: str | None) -> datetime | None:
        """parse_time of the cell, in the answer's zone."""
        seen = self._times
        if cell not in seen:
            seen[cell] = parse_time(cell, self._tz)
        return seen[cell]


V = TypeVar("V")


def _once(seen: dict[str | None, V], convert: Callable[[str | None], V], cell: str | None) -> V:
    if cell not in seen:
        seen[cell] = convert(cell)
    return seen[cell]


def _job_from_row(
    row: Mapping[str, str], ids: re.Match[str], cells: _Cells, steps: Sequence[StepRecord]
) -> JobRecord:
    state, cancelled_by = cells.state(row.get("State"))
    derived, _ = cells.exit(row.get("DerivedExitCode"))
    alloc_cpus = _int(row.get("AllocCPUS"))
    # slurmdbd's stand-in row for a just-ended job (see _is_placeholder): no partition,
    # no time limit, and a name that is not the job's
    stand_in = row.get("JobName") == "allocation" and not row.get("Partition")
    stand_in = stand_in and not _text(row.get("Timelimit"))
    return _job_record(
        _row_ids(ids, row.get("JobIDRaw")),
        _row_text(row, _JOB_TEXT),
        name=row.get("JobName", ""),
        stand_in=stand_in,
        state=state,
        cancelled_by=cancelled_by,
        exit=cells.exit(row.get("ExitCode")),
        derived_exit_code=derived,
        elapsed_s=cells.duration(row.get("Elapsed")),
        timelimit_s=cells.duration(row.get("Timelimit")),
        max_rss_bytes=cells.memory(row.get("MaxRSS")),
        req_mem_bytes=_req_mem(row.get("ReqMem"), alloc_cpus, cells),
        alloc_cpus=alloc_cpus,
        total_cpu_s=cells.seconds(row.get("TotalCPU")),
        alloc_tres=_text(row.get("AllocTRES")),
        req_tres=_text(row.get("ReqTRES")),
        times=(
            cells.time(row.get("Submit")),
            cells.time(row.get("Start")),
            cells.time(row.get("End")),
        ),
        steps=steps,
    )


def _step_from_row(row: Mapping[str, str], step: str, cells: _Cells) -> StepRecord:
    """The step's record; steps that read alike share one (records are frozen): a
    1,000-task array's `.batch` steps that all ended the same way are one record."""
    said = (step, row.get("State"), row.get("ExitCode"), row.get("MaxRSS"), row.get("Elapsed"))
    record = cells.steps.get(said)
    if record is None:
        record = cells.steps[said] = _new_step(row, step, cells)
    return record


def _new_step(row: Mapping[str, str], step: str, cells: _Cells) -> StepRecord:
    state, cancelled_by = cells.state(row.get("State"))
    exit_code, signal = cells.exit(row.get("ExitCode"))
    return StepRecord(
        step=step,
        state=state,
        cancelled_by=cancelled_by,
        exit_code=exit_code,
        signal=signal,
        max_rss_bytes=cells.memory(row.get("MaxRSS")),
        elapsed_s=cells.duration(row.get("Elapsed")),
    )


def _req_mem(text: str | None, alloc_cpus: int | None, cells: _Cells) -> int | None:
    value = cells.memory(text)
    # before 21.08 sacct printed ReqMem per CPU ('500Mc'): the job asked for CPUs times that
    if value is not None and alloc_cpus and (text or "").strip().lower().endswith("c"):
        return value * alloc_cpus
    return value


def _max(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


# --- JSON, both shapes -------------------------------------------------------------------------


def parse_sacct_json(text: str, *, skipped: list[str] | None = None) -> list[JobRecord]:
    """Records from `sacct --json`, Slurm 22.05 (v0.0.38) or 24.11 (v0.0.42) shape.

    Gives what parse_sacct_parsable gives for the same jobs, with two differences Slurm
    makes: who cancelled comes as a user name (cancelled_by_user), not a uid; and 22.05's
    JSON reports every normal exit as SUCCESS with code 0, so there a non-zero exit code
    reads None (unknown), never a false 0. Times are UTC-aware.
    """
    return _each_json_job(text, _job_from_json, skipped)


def _each_json_job(
    text: str, build: Callable[[Mapping[str, Any]], R], skipped: list[str] | None
) -> list[R]:
    """build() applied to each record of Slurm's JSON; a record it cannot read is skipped."""
    records: list[R] = []
    for job in _json_jobs(text):
        try:
            records.append(build(job))
        except (LookupError, TypeError, ValueError, AttributeError):  # this record only
            _skip(skipped, repr(job)[:300])
    return records


def _job_from_json(job: Mapping[str, Any]) -> JobRecord:
    state, _ = parse_state(_dig(job, "state", "current"))
    derived, _ = _exit_from_json(job.get("derived_exit_code"), state)
    limit_min = _num(_dig(job, "time", "limit"))
    mem_mib = _tres_count(_dig(job, "tres", "requested"), "mem")
    return _job_record(
        _array_ids(
            job["job_id"],
            _dig(job, "array", "job_id"),
            _dig(job, "array", "task_id"),
            _task_range(
                _dig(job, "array", "task"),
                _dig(job, "array", "limits", "max", "running", "tasks"),
            ),
        ),
        _json_text(job, _JOB_TEXT),
        name=str(job.get("name") or ""),
        stand_in=_is_placeholder(job),
        state=state,
        cancelled_by_user=_killer(job, state),
        exit=_exit_from_json(job.get("exit_code"), state),
        derived_exit_code=derived,
        elapsed_s=_num(_dig(job, "time", "elapsed")),
        timelimit_s=None if limit_min is None else limit_min * 60,  # the JSON gives minutes
        max_rss_bytes=None,  # the JSON has it per step only
        req_mem_bytes=None if mem_mib is None else mem_mib * _MIB,  # TRES mem is in MiB
        alloc_cpus=_tres_count(_dig(job, "tres", "allocated"), "cpu"),
        total_cpu_s=_total_cpu(job),
        alloc_tres=_tres_string(_dig(job, "tres", "allocated")),
        req_tres=_tres_string(_dig(job, "tres", "requested")),
        times=(
            _epoch(_dig(job, "time", "submission")),
            _epoch(_dig(job, "time", "start")),
            _epoch(_dig(job, "time", "end")),
        ),
        steps=tuple(_step_from_json(s) for s in job.get("steps") or ()),
    )


def _is_placeholder(job: Mapping[str, Any]) -> bool:
    """slurmdbd's stand-in row for a job whose start it has not recorded yet.

    Right after a short job ends, 22.05's `sacct --json` can show for a second or two a
    row made from the step records alone: named "allocation", no partition, no
    eligible time, no time limit. Its state and exit are the job's; its name and
    limits are not, so they are left unknown rather than shown.
    """
    return (
        job.get("name") == "allocation"
        and not job.get("partition")
        and not _num(_dig(job, "time", "eligible"))
    )


def _step_from_json(step: Mapping[str, Any]) -> StepRecord:
    state, _ = parse_state(step.get("state"))
    exit_code, signal = _exit_from_json(step.get("exit_code"), state)
    step_id = _dig(step, "step", "id")
    # 22.05 gives the step alone ('batch'), 24.11 with its job ('5.batch')
    name = "" if step_id is None else str(step_id).partition(".")[2] or str(step_id)
    return StepRecord(
        step=name or str(_dig(step, "step", "name") or ""),
        state=state,
        cancelled_by_user=_killer(step, state),
        exit_code=exit_code,
        signal=signal,
        max_rss_bytes=_tres_count(_dig(step, "tres", "requested", "max"), "mem"),
        elapsed_s=_num(_dig(step, "time", "elapsed")),
    )


def _exit_from_json(value: Any, state: JobState) -> tuple[int | None, int | None]:
    """(exit status, signal) as sacct -P would print them, from either JSON shape."""
    if not isinstance(value, Mapping):
        return None, None
    status = _first(value.get("status"))
    signal = _num(_dig(value, "signal", "signal_id"))  # 22.05
    if signal is None:
        signal = _num(_dig(value, "signal", "id"))  # 24.11
    if status is None or status == "PENDING":
        return None, None
    if isinstance(value.get("status"), str):
        # 22.05 (v0.0.38) tests WIFEXITED before looking at the code, so every normal
        # exit, 127 included, reads SUCCESS with return_code 0. Only COMPLETED proves 0.
        if status == "SIGNALED":
            return 0, signal
        return (0 if state is JobState.COMPLETED else None), 0
    code = _num(value.get("return_code"))
    if code is None and signal:
        code = 0  # sacct -P prints a job killed by a signal as 0:SIGNAL
    return code, signal or 0


def _killer(record: Mapping[str, Any], state: JobState) -> str | None:
    # sacct -P adds 'by UID' only to CANCELLED states; kill_request_user can be set otherwise
    return _text(record.get("kill_request_user")) if state is JobState.CANCELLED else None


def _tres_count(items: Any, kind: str) -> int | None:
    """The count of one plain TRES ('cpu', 'mem') in a JSON TRES list; None if absent."""
    for item in items if isinstance(items, list) else ():
        if isinstance(item, Mapping) and item.get("type") == kind and not item.get("name"):
            count = _num(item.get("count"))
            return count if count is not None and count >= 0 else None
    return None


def _tres_string(items: Any) -> str | None:
    """'billing=1,cpu=1,mem=500M,node=1' from a JSON TRES list, as sacct's AllocTRES reads."""
    parts = []
    for item in items if isinstance(items, list) else ():
        count = _num(item.get("count")) if isinstance(item, Mapping) else None
        if count is None or count < 0:  # energy is -2 or null when not gathered
            continue
        kind = f"{item['type']}/{item['name']}" if item.get("name") else str(item["type"])
        parts.append(f"{kind}={count}M" if kind == "mem" else f"{kind}={count}")
    return ",".join(sorted(parts)) or None  # sacct -P lists them by name


def _total_cpu(job: Mapping[str, Any]) -> float | None:
    """TotalCPU as sacct -P reports it: the sum over the steps (22.05's JSON leaves the
    job's own total at 0), or the job's total where it has no steps."""
    steps = [_cpu_time(_dig(s, "time", "total")) for s in job.get("steps") or ()]
    if any(v is not None for v in steps):
        return sum(v for v in steps if v is not None)
    return _cpu_time(_dig(job, "time", "total"))


def _cpu_time(value: Any) -> float | None:
    seconds = _num(_dig(value, "seconds"))
    if seconds is None:
        return None
    return seconds + (_num(_dig(value, "microseconds")) or 0) / 1e6


def _array_ids(job_id: Any, array_job_id: Any, task_id: Any, task_range: str | None) -> _Ids:
    """The ids from Slurm's JSON, the way sacct -P and squeue show them."""
    raw = str(job_id)
    base = _num(array_job_id)
    task = _num(task_id)
    if not base:  # 0 means "not an array"
        return _Ids(raw, raw, None, None, None)
    if task is not None:
        return _Ids(f"{base}_{task}", raw, str(base), task, None)
    if task_range is not None:
        return _Ids(f"{base}_[{task_range}]", raw, str(base), None, task_range)
    return _Ids(raw, raw, str(base), None, None)


def _task_range(text: Any, max_running: Any) -> str | None:
    """A pending array's remaining tasks, '4-9%2', from the JSON's task string and limit."""
    value = _text(text)
    if value is None:
        return None
    if value.lower().startswith("0x"):
        # slurmdbd keeps the remainder as a hex bitmap; sacct -P translates it, 22.05's
        # JSON does not (seen on the lab cluster: '0xC' where sacct -P shows '2-3%1')
        value = _ranges(i for i, bit in enumerate(reversed(bin(int(value, 16))[2:])) if bit == "1")
    limit = _num(max_running)
    return f"{value}%{limit}" if limit and "%" not in value else value


def _ranges(indices: Iterable[int]) -> str:
    """'0-3,7' from 0, 1, 2, 3, 7 (ascending)."""
    spans: list[list[int]] = []
    for i in indices:
        if spans and spans[-1][1] == i - 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _json_jobs(text: str) -> list[Mapping[str, Any]]:
    data = json.loads(text)
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        raise ValueError("JSON without a 'jobs' list: not sacct/squeue --json output")
    return [job if isinstance(job, Mapping) else {} for job in jobs]


def _dig(value: Any, *keys: str) -> Any:
    """value[k1][k2]…, or None as soon as a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _num(value: Any) -> int | None:
    """An integer from either shape: 22.05's bare number (or null), 24.11's {set, infinite,
    number}; None when unset or infinite."""
    if isinstance(value, Mapping):
        if not value.get("set") or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _first(value: Any) -> str | None:
    """A string, or the first of 24.11's lists (['FAILED'], ['SIGNALED'])."""
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, str) else None


def _epoch(value: Any) -> datetime | None:
    seconds = _num(value)
    if seconds is None or seconds <= 0 or seconds >= _UNSET_EPOCH:
        return None
    return datetime.fromtimestamp(seconds, tz=UTC)


# --- squeue ---------------------------------------------------------------------------------------

#: squeue --Format (-O) fields, in this order. -O rather than -o: in 22.05 the %-codes have
#: no output-file paths (%o is the command), only -O has STDOUT/STDERR; these names exist in
#: both 22.05 and 24.11. Free text (Name, STDOUT, STDERR, Comment) comes last, Comment
#: last of all, for the same reason as in SACCT_FIELDS.
SQUEUE_FIELDS: tuple[str, ...] = (
    "JobArrayID",  # display id, %i: '331', '333_2', '333_[4-9%2]'
    "JobID",  # raw id, %A
    "ArrayJobID",  # %F
    "ArrayTaskID",  # %K: 'N/A' outside arrays
    "State",  # long form, %T
    "exit_code",  # 22.05: raw wait status (exit << 8 | signal), 24.11: 'CODE:SIGNAL'
    "Reason",  # %r
    "UserName",  # %u
    "Partition",  # %P
    "StartTime",  # actual or expected start, %S
    "Dependency",  # %E: 'afterok:336(failed)' explains DependencyNeverSatisfied
    "Name",  # %j
    "STDOUT",
    "STDERR",
    "Comment",  # %k
)


def squeue_format(delimiter: str) -> str:
    """The --Format value for SQUEUE_FIELDS, each field full width with `delimiter` after it.

    -O pads or cuts every field to 20 characters unless given a size; ':0' means "as long
    as the value". The text after the size is printed after the field, which is how the
    delimiter gets in; ',' separates -O fields, and a leading digit or '.' would be read as
    part of the size, so those cannot be used.
    """
    if not delimiter or "," in delimiter or "\n" in delimiter or delimiter[0] in "0123456789.":
        raise ValueError(f"unusable squeue delimiter {delimiter!r}")
    return ",".join(f"{field}:0{delimiter}" for field in SQUEUE_FIELDS)


#: For `squeue --noheader --me -t all --Format=<SQUEUE_FORMAT>` (capital F: -O, not -o)
SQUEUE_FORMAT = squeue_format(DELIMITER)


def parse_squeue(
    text: str,
    delimiter: str,
    *,
    tz: tzinfo | None = None,
    skipped: list[str] | None = None,
) -> list[QueueRecord]:
    """Records from `squeue --noheader --Format=squeue_format(delimiter)` output.

    Output-file patterns (22.05 prints them as submitted, '%j' and all) are expanded where
    the job or task is known; a pending array's remainder keeps its pattern. Unreadable
    rows (including a header line) are skipped, see the module doc.
    """
    records: list[QueueRecord] = []
    last = len(SQUEUE_FIELDS) - 1
    for line in text.splitlines():
        if not line.strip():
            continue
        # -O prints the delimiter after the last field too
        body = line[: -len(delimiter)] if line.endswith(delimiter) else line
        cells = _split_row(body, delimiter, len(SQUEUE_FIELDS), last)
        row = dict(zip(SQUEUE_FIELDS, cells, strict=True)) if cells is not None else {}
        ids = _JOB_ID.fullmatch(row.get("JobArrayID", "").strip())
        if ids is None or ids["step"] is not None:
            _skip(skipped, line)
            continue
        try:
            records.append(_queue_from_row(row, ids, tz))
        except ValueError:
            _skip(skipped, line)
    return records


def _queue_from_row(row: Mapping[str, str], ids: re.Match[str], tz: tzinfo | None) -> QueueRecord:
    state, _ = parse_state(row["State"])
    return _queue_record(
        _row_ids(ids, row["JobID"], row["ArrayJobID"]),
        _row_text(row, _QUEUE_TEXT),
        name=row["Name"],
        state=state,
        exit=_exit_from_cell(row["exit_code"], state),
        estimated_start=parse_time(row["StartTime"], tz),
        stdout=row["STDOUT"],
        stderr=row["STDERR"],
    )


def parse_job_states(
    text: str, delimiter: str, *, skipped: list[str] | None = None
) -> list[QueueRecord]:
    """Records from `squeue --only-job-state --format=%i<delimiter>%T` (argv.squeue_states):
    '331<d>RUNNING', '333_2<d>COMPLETED', '333_[4-9%2]<d>PENDING', nothing more.

    Only the id and state are known: a task's own numeric id is not printed, so its
    job_id_raw is its display id; no name, reason, start estimate or exit code.
    """
    records: list[QueueRecord] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        job, _, state_text = line.strip().partition(delimiter)
        ids = _JOB_ID.fullmatch(job.strip())
        state, _ = parse_state(state_text)
        if ids is None or ids["step"] is not None or not state_text.strip():
            _skip(skipped, line)
            continue
        base, task, task_range = ids["base"], ids["task"], ids["range"]
        array = base if task is not None or task_range is not None else None
        raw = base if task is None else ids["job"]
        records.append(
            QueueRecord(
                job_id=ids["job"],
                job_id_raw=raw,
                array_job_id=array,
                array_task_id=int(task) if task is not None else None,
                array_task_range=task_range,
                name="",
                state=state,
            )
        )
    return records


def parse_squeue_json(text: str, *, skipped: list[str] | None = None) -> list[QueueRecord]:
    """Records from `squeue --json`, 22.05 or 24.11 shape (22.05 ignores filters: expect all)."""
    return _each_json_job(text, _queue_from_json, skipped)


def _queue_from_json(job: Mapping[str, Any]) -> QueueRecord:
    state, _ = parse_state(job.get("job_state"))
    ids = _array_ids(
        job["job_id"],
        job.get("array_job_id"),
        job.get("array_task_id"),
        _task_range(job.get("array_task_string"), job.get("array_max_tasks")),
    )
    stdout = _text(job.get("standard_output"))
    if stdout is None and job.get("batch_flag"):
        # sbatch's default; 22.05 leaves it empty, 24.11 fills it in
        default = "slurm-%A_%a.out" if ids.array_job_id is not None else "slurm-%j.out"
        stdout = f"{job.get('current_working_directory') or '.'}/{default}"
    return _queue_record(
        ids,
        _json_text(job, _QUEUE_TEXT),
        name=str(job.get("name") or ""),
        state=state,
        exit=_queue_exit_from_json(job.get("exit_code"), state),
        estimated_start=_epoch(job.get("start_time")),
        stdout=stdout,
        # without -e, Slurm writes stderr into the stdout file (22.05 leaves it empty here)
        stderr=job.get("standard_error"),
        node=_text(job.get("batch_host")),
    )


def _exit_from_cell(text: str, state: JobState) -> tuple[int | None, int | None]:
    """(exit status, signal) from squeue -O exit_code: 22.05 prints the raw wait status
    ('768'), 24.11 decodes it as sacct does ('3:0'). None before the job ends."""
    if ":" in text:
        return parse_exit_code(text) if state.is_terminal else (None, None)
    return _exit_from_status(_int(text), state)


def _exit_from_status(status: int | None, state: JobState) -> tuple[int | None, int | None]:
    """(exit status, signal) from the raw wait status the controller keeps for a job.

    22.05's squeue -O exit_code and squeue --json print it undecoded: 768 for `exit 3`,
    9 for a job killed by SIGKILL. Decoded as sacct decodes ExitCode (WEXITSTATUS,
    WTERMSIG). Before the job ends the controller holds 0, which is no exit status:
    (None, None) unless the state is terminal.
    """
    if status is None or not state.is_terminal or status >= _NO_VAL:
        return None, None
    return (status >> 8) & 0xFF, status & 0x7F


def _queue_exit_from_json(value: Any, state: JobState) -> tuple[int | None, int | None]:
    """(exit status, signal) from squeue --json's exit_code: 22.05 gives the raw wait
    status as a bare number, 24.11 the decoded {status, return_code, signal} that its
    sacct --json gives too; a pending job's 'SUCCESS'/0 in 24.11 is no exit status either.
    """
    if isinstance(value, Mapping):
        return _exit_from_json(value, state) if state.is_terminal else (None, None)
    if isinstance(value, bool) or not isinstance(value, int):
        return None, None
    return _exit_from_status(value, state)


_NODE_PATTERN = re.compile(r"%[0-9]*N")


def _output_path(
    pattern: Any,
    raw: str,
    array_id: str | None,
    task: int | None,
    name: str,
    user: str | None,
    node: str | None = None,
) -> str | None:
    """The file Slurm writes, or the pattern itself where it names what is not known yet."""
    value = _text(pattern)
    if value is None or (array_id is not None and task is None):
        return value  # a pending array remainder has no single file yet
    if user is None or (node is None and _NODE_PATTERN.search(value)):
        return value  # %N is the first node: unknown before the job runs
    return expand_log_pattern(
        value,
        job_id_raw=raw,
        array_job_id=array_id,
        array_task_id=task,
        job_name=name,
        user=user,
        node=node or "",
    )


# --- scontrol ---------------------------------------------------------------------------

#: a key starts a line or follows whitespace; values may contain spaces and '='
_SCONTROL_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_]*)=")


def parse_key_values(line: str) -> dict[str, str]:
    """The Key=Value pairs of one `scontrol show … -o` line."""
    matches = list(_SCONTROL_KEY.finditer(line))
    pairs = {}
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(line)
        pairs[match[1]] = line[match.end() : end].strip()
    return pairs
