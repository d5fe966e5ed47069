"""Snakemake's console lines folded into rule jobs (`EngineTask`) and `EngineMessage`s.

One `EngineTask` per change of a rule job: SUBMITTED when the plugin reports its Slurm
job id, COMPLETED at "Finished jobid", FAILED when its "Error in rule" block ends (the
block's fields come first, so the task is told whole), ABORTED when Snakemake cancels it.
The key is Snakemake's jobid, which a new head-job attempt numbers afresh: tasks belong
to the record (the attempt's console log) they were read from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from jobsmith.adapters.snakemake import console as c
from jobsmith.adapters.snakemake.context import Block, Job, State, decode, encode
from jobsmith.adapters.snakemake.states import JobEvent, in_flight, task_status
from jobsmith.adapters.workflow import (
    EngineMessage,
    EngineTask,
    MessageKind,
    Parsed,
)

#: the kind for "3 of 6 steps (50%) done" once the seam has one (proposed: PROGRESS);
#: until then progress is not reported, only its 100% as the run's completion
PROGRESS_KIND: MessageKind | None = MessageKind.__members__.get("PROGRESS")

MAX_TEXT = 400
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
# the plugin's advice appended to every failure message; it says nothing about this one
_BOILERPLATE = "For further error details see the cluster/cloud log"
_MEM_MB = re.compile(r"(?:^|, )mem_mb=(\d+(?:\.\d+)?)(?:,|$)")
_CPUS = re.compile(r"(?:^|, )cpus_per_task=(\d+)(?:,|$)")


class _Out:
    """What one call found, in order."""

    def __init__(self) -> None:
        self.tasks: list[EngineTask] = []
        self.messages: list[EngineMessage] = []

    def task(self, key: str, job: Job) -> None:
        self.tasks.append(
            EngineTask(
                key=key,
                process=job.rule,
                name=job.name,
                status=job.status,
                native_id=job.native_id,
                attempt=job.attempt,
                mem_mb=job.mem_mb,
                cpus=job.cpus,
                log=job.log,
            )
        )

    def say(self, kind: MessageKind, text: str, job: Job | None = None) -> None:
        self.messages.append(
            EngineMessage(
                kind=kind,
                text=one_line(text),
                process=job.rule if job else None,
                native_id=job.native_id if job else None,
            )
        )


def one_line(text: str, limit: int = MAX_TEXT) -> str:
    """The engine's words on one line, control characters out, at most `limit` long."""
    flat = _CONTROL.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def parse_console(lines: Sequence[str], context: tuple[str, ...]) -> Parsed:
    """New complete console lines, with the state kept from earlier ones."""
    state = decode(context)
    out = _Out()
    for line in lines:
        try:
            _step(state, line, out)
        except (ValueError, TypeError):
            # a line the grammar half-matched with values the types refuse (a huge
            # number, a negative attempt from a damaged context): skip it, keep the rest
            continue
    return Parsed(tasks=tuple(out.tasks), messages=tuple(out.messages), context=encode(state))


def _step(state: State, raw: str, out: _Out) -> None:
    text = raw.rstrip("\r\n")
    if state.pending_exception and text.strip():
        header, state.pending_exception = state.pending_exception, None
        _end_run(state, out, MessageKind.FAILED, f"{header} {text.strip()}")
        return
    line = c.classify(text)
    if isinstance(line, c.Field | c.Indented):
        if isinstance(line, c.Field) and state.block:
            _field(state, state.block, line)
        return
    _close_block(state, out)
    _margin(state, line, out)


def _margin(state: State, line: c.Line, out: _Out) -> None:
    match line:
        case c.JobHeader(rule=rule, local=local):
            state.block = Block("local" if local else "rule", rule)
        case c.ErrorHeader(rule=rule):
            state.block = Block("error", rule)
        case c.Submitted(jobid=jobid, native_id=native, log=log):
            _submitted(state, jobid, native, log, out)
        case c.ArraySubmitted(pairs=pairs):
            for jobid, native in pairs:
                _submitted(state, jobid, native, None, out)
        case c.Finished(jobid=jobid, rule=rule):
            _finished(state, jobid, rule, out)
        case c.Restart(jobid=jobid):
            _restart(state, jobid, out)
        case c.Progress():
            _progress(state, line, out)
        case c.Said():
            _said(state, line, out)
        case c.ExceptionHeader(text=text) if not state.ended:
            state.pending_exception = text


def _field(state: State, block: Block, field: c.Field) -> None:
    if field.key == "jobid" and block.jobid is None:
        block.jobid = field.value
        if block.kind != "error":
            earlier = state.jobs.get(field.value)
            state.jobs[field.value] = Job(
                block.rule, block.rule, attempt=earlier.attempt if earlier else 1
            )
        return
    if field.key == "message" and block.message is None:
        block.message = field.value
    elif field.key == "external_jobid":
        block.native_id = field.value
    job = state.jobs.get(block.jobid or "")
    if job is None or block.kind == "error":
        return
    if field.key == "wildcards":
        job.name = f"{block.rule} ({field.value})"
    elif field.key == "threads":
        job.cpus = int(field.value)
    elif field.key == "resources":
        _resources(job, field.value)


def _resources(job: Job, text: str) -> None:
    if m := _MEM_MB.search(text):
        job.mem_mb = float(m[1])
    if m := _CPUS.search(text):
        job.cpus = int(m[1])
    elif job.cpus is None:
        # Snakemake prints `threads` only when it is not 1
        job.cpus = 1


def _close_block(state: State, out: _Out) -> None:
    block, state.block = state.block, None
    if block is None or block.jobid is None:
        return
    job = state.jobs.get(block.jobid)
    if block.kind == "local" and job:
        job.status = task_status(JobEvent.STARTED_LOCALLY)
        out.task(block.jobid, job)
    elif block.kind == "error":
        _failed(state, block, block.jobid, out)


def _failed(state: State, block: Block, jobid: str, out: _Out) -> None:
    job = state.jobs.setdefault(jobid, Job(block.rule, block.rule))
    job.native_id = block.native_id or job.native_id
    job.status = task_status(JobEvent.ERROR)
    out.task(jobid, job)
    said = (block.message or "").split(_BOILERPLATE)[0].strip()
    kind = MessageKind.TASK_FAILED
    if said.startswith(("SLURM sbatch failed", "Job submission failed")):
        kind = MessageKind.SUBMIT_ERROR
    detail = f": {said}" if said and said != "None" else ""
    out.say(kind, f"Error in rule {job.name} (jobid {jobid}){detail}", job)


def _submitted(state: State, jobid: str, native: str, log: str | None, out: _Out) -> None:
    job = state.jobs.setdefault(jobid, Job("?", "?"))
    job.native_id = native
    job.log = log
    job.status = task_status(JobEvent.SUBMITTED)
    out.task(jobid, job)


def _finished(state: State, jobid: str, rule: str | None, out: _Out) -> None:
    job = state.jobs.pop(jobid, None) or Job(rule or "?", rule or "?")
    job.status = task_status(JobEvent.FINISHED)
    out.task(jobid, job)


def _restart(state: State, jobid: str, out: _Out) -> None:
    job = state.jobs.get(jobid)
    out.say(MessageKind.RETRY, f"Trying to restart job {jobid}.", job)
    if job:
        job.attempt += 1
        job.native_id = job.log = None


def _progress(state: State, line: c.Progress, out: _Out) -> None:
    if line.total > 0 and line.done == line.total:
        _end_run(state, out, MessageKind.COMPLETED, line.text)
    elif PROGRESS_KIND is not None:
        out.say(PROGRESS_KIND, line.text)


def _said(state: State, line: c.Said, out: _Out) -> None:
    if line.what == c.SAID_SUBMIT_ERROR:
        out.say(MessageKind.SUBMIT_ERROR, line.text, Job(line.rule or "?", line.rule or "?"))
    elif line.what == c.SAID_WARNING:
        out.say(MessageKind.WARNING, line.text)
    elif line.what == c.SAID_RUN_FAILED:
        _end_run(state, out, MessageKind.FAILED, line.text)
    elif line.what == c.SAID_NOTHING_TO_DO:
        _end_run(state, out, MessageKind.COMPLETED, line.text)
    elif line.what == c.SAID_ABORTED:
        out.say(MessageKind.ABORTED, line.text)
    elif line.what == c.SAID_USER_TERMINATED:
        out.say(MessageKind.ABORTED, line.text)
        _abort_in_flight(state, out)


def _abort_in_flight(state: State, out: _Out) -> None:
    # the executor cancels (scancel) every job it still follows
    for key, job in list(state.jobs.items()):
        if in_flight(job.status):
            job.status = task_status(JobEvent.CANCELLED)
            out.task(key, job)
            del state.jobs[key]


def _end_run(state: State, out: _Out, kind: MessageKind, text: str) -> None:
    if not state.ended:
        state.ended = True
        out.say(kind, text)
