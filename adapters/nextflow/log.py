"""Reading `.nextflow.log` (and Nextflow's console error report) into EngineMessages.

What a person or the brain acts on, line by line:

- a task Nextflow could not submit (`Failed to submit process to grid scheduler`, with
  sbatch's own words from the report's `Command output`): SUBMIT_ERROR;
- a task that failed for good (`Error executing process > 'X'` and its `Caused by`), or
  whose error is ignored (`NOTE: … -- Error is ignored`): TASK_FAILED with the exit status;
- a task retried (`NOTE: Process … terminated with an error exit status (137) -- Execution
  is retried (1)`): RETRY. The `Re-submitted process >` line that follows is the same
  retry and says nothing more, so it is not reported twice;
- the run cancelled or aborted: ABORTED; its end (`Workflow completed > WorkflowStats[…]`):
  COMPLETED, or FAILED when more tasks failed than were retried or ignored, or some were
  aborted; the launcher's own ERROR (a bad option, a config error): FAILED;
- Nextflow's WARN lines, a task whose exit status could not be read, other ERROR lines:
  WARNING.

The Slurm job id (native_id) of a failed task comes from the `Task completed >
TaskHandler[jobId: …]` line Nextflow logs just before; the parser remembers the latest few
in its context, with the error report it is in the middle of, so the next call carries on.
Lines it does not know are ignored; nothing here raises on any text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from types import MappingProxyType

from jobsmith.adapters.nextflow.text import MAX_TEXT, one_line
from jobsmith.adapters.nextflow.units import read_integer
from jobsmith.adapters.workflow import EngineMessage, MessageKind, Parsed

#: `Oct-30 12:30:48.636 [TaskFinalizer-1] INFO  nextflow.processor.TaskProcessor - …`
_LOG_LINE = re.compile(
    r"[A-Z][a-z]{2}-[0-9]{2} [0-9:.]{12} \[(?P<thread>[^\]]*)\] "
    r"(?P<level>[A-Z]+) +(?P<logger>\S+) - (?P<message>.*)",
    re.ASCII | re.DOTALL,
)
_ERROR_REPORT = re.compile(r"Error executing process > '(?P<task>.*)'")
_EXIT_STATUS = re.compile(r"exit status \((?P<exit>-?[0-9]+)\)")
_NOTE = re.compile(
    r"(?:\[[0-9a-f]{2}/[0-9a-f]{6}\] )?NOTE: Process `(?P<task>.*)` (?P<why>.*?) -- "
    r"(?:Execution is retried \((?P<retry>[0-9]+)\)|Error is ignored)"
)
_HANDLER = re.compile(
    r"TaskHandler\[jobId: (?P<job>[^;\]]*); id: [^;\]]*; name: (?P<task>.*?); "
    r"status: [^;\]]*; exit: (?P<exit>[^;\]]*);"
)
_STATS = re.compile(r"Workflow completed > WorkflowStats\[(?P<stats>[^\]]*)\]")
_STAT = re.compile(r"(?P<key>[A-Za-z]+)=(?P<value>[^;]*)")
_ABORTED = ("Execution cancelled", "Execution aborted", "Session aborted")
_SUBMIT_FAILED = "Failed to submit process to grid scheduler"
_SECTIONS = MappingProxyType(
    {
        "Caused by:": "cause",
        "Command exit status:": "exit",
        "Command output:": "output",
        "Command error:": "output",
        "Command executed:": "other",
        "Command wrapper:": "other",
        "Work dir:": "other",
    }
)
#: how many failed tasks' Slurm job ids the context remembers
_REMEMBERED_JOBS = 64
_STATE_TAG = "jobsmith.nextflow.log/1"
#: what of a line is read: what Nextflow says comes first, and a bounded line keeps every
#: pattern's matching time bounded whatever the line holds
_READ_CHARS = 4096


def _job_key(task: str) -> str:
    """Task names as keys of the remembered jobs, bounded so the context stays small."""
    return task[:MAX_TEXT]


@dataclass
class _Report:
    """The `Error executing process > 'X'` report being read."""

    task: str
    section: str = ""
    submit: bool = False
    exit_code: int | None = None
    reported: bool = False


@dataclass
class _State:
    report: _Report | None = None
    #: task name -> Slurm job id of its latest attempt that ended with a non-zero exit
    jobs: dict[str, str] = field(default_factory=dict)
    messages: list[EngineMessage] = field(default_factory=list)

    def say(
        self, kind: MessageKind, text: str, task: str | None = None, exit_code: int | None = None
    ) -> None:
        # a task sbatch refused has no job of its own: a remembered one is an earlier attempt's
        known = task is not None and kind is not MessageKind.SUBMIT_ERROR
        native_id = self.jobs.get(_job_key(task)) if task is not None and known else None
        self.messages.append(
            EngineMessage(
                kind=kind,
                text=one_line(text),
                process=one_line(task) if task else None,
                exit_code=exit_code,
                native_id=native_id,
            )
        )


def _report_from(saved: object) -> _Report | None:
    if not isinstance(saved, dict) or not isinstance(saved.get("task"), str):
        return None
    exit_code = saved.get("exit_code")
    return _Report(
        task=saved["task"],
        section=str(saved.get("section", "")),
        submit=saved.get("submit") is True,
        exit_code=exit_code if type(exit_code) is int else None,
        reported=saved.get("reported") is True,
    )


def _load(context: tuple[str, ...]) -> _State:
    """The state `_save` left; a fresh one for any other context (never an error)."""
    if len(context) != 2 or context[0] != _STATE_TAG:
        return _State()
    try:
        saved = json.loads(context[1])
    except (ValueError, RecursionError):
        return _State()
    if not isinstance(saved, dict):
        return _State()
    jobs = saved.get("jobs")
    known = jobs.items() if isinstance(jobs, dict) else ()
    return _State(
        report=_report_from(saved.get("report")),
        jobs={k: v for k, v in known if isinstance(k, str) and isinstance(v, str)},
    )


def _save(state: _State) -> tuple[str, ...]:
    report = asdict(state.report) if state.report else None
    return (_STATE_TAG, json.dumps({"report": report, "jobs": state.jobs}))


def _exit_in(text: str) -> int | None:
    match = _EXIT_STATUS.search(text)
    return read_integer(match["exit"]) if match else None


def _end_report(state: _State) -> None:
    report = state.report
    if report and report.submit and not report.reported:
        text = f"{report.task}: {_SUBMIT_FAILED} for execution"
        state.say(MessageKind.SUBMIT_ERROR, text, report.task, report.exit_code)
    state.report = None


def _cause(state: _State, report: _Report, cause: str) -> None:
    report.section = "other"
    if _SUBMIT_FAILED in cause:
        report.submit = True
    elif not report.reported:
        report.reported = True
        text = f"{report.task}: {cause}"
        state.say(MessageKind.TASK_FAILED, text, report.task, _exit_in(cause))


def _submit_error(state: _State, report: _Report, output: str) -> None:
    """sbatch's words: the first line of the report's command output."""
    if output != "(empty)":
        report.reported = True
        state.say(MessageKind.SUBMIT_ERROR, output, report.task, report.exit_code)


def _report_line(state: _State, report: _Report, line: str) -> None:
    """One line of an error report (Caused by / Command exit status / Command output)."""
    stripped = line.strip()
    if stripped in _SECTIONS:
        report.section = _SECTIONS[stripped]
    elif not stripped or stripped.startswith("Tip:"):
        return
    elif report.section == "cause":
        _cause(state, report, stripped)
    elif report.section == "exit":
        report.section = "other"
        report.exit_code = read_integer(stripped)
    elif report.section == "output" and report.submit and not report.reported:
        _submit_error(state, report, stripped)


def _remember_job(state: _State, message: str) -> None:
    match = _HANDLER.search(message)
    if match is None or match["exit"].strip() in ("0", "-"):
        return
    key = _job_key(match["task"])
    state.jobs.pop(key, None)  # re-inserted last: the oldest are forgotten first
    state.jobs[key] = match["job"].strip()[:MAX_TEXT]
    while len(state.jobs) > _REMEMBERED_JOBS:
        del state.jobs[next(iter(state.jobs))]


def _stats(state: _State, stats: str) -> None:
    counts = {m["key"]: read_integer(m["value"]) or 0 for m in _STAT.finditer(stats)}
    failed, aborted = counts.get("failedCount", 0), counts.get("abortedCount", 0)
    forgiven = counts.get("ignoredCount", 0) + counts.get("retriesCount", 0)
    kind = MessageKind.FAILED if failed > forgiven or aborted else MessageKind.COMPLETED
    names = ("succeeded", "failed", "ignored", "retries", "cached", "aborted", "pending")
    summary = ", ".join(f"{name} {counts.get(name + 'Count', 0)}" for name in names)
    state.say(kind, f"run {'failed' if kind is MessageKind.FAILED else 'completed'}: {summary}")


def _note(state: _State, match: re.Match[str]) -> None:
    task = match["task"]
    kind = MessageKind.RETRY if match["retry"] else MessageKind.TASK_FAILED
    state.say(kind, match.group(0), task, _exit_in(match["why"]))


def _exit_unread(state: _State, message: str) -> None:
    handler = _HANDLER.search(message)
    task = handler["task"] if handler else None
    text = message
    if handler:
        tail = message.split("] -- ", 1)[-1] if "] -- " in message else ""
        text = f"Failed to get exit status for process {task} (job {handler['job']}) -- {tail}"
    state.messages.append(
        EngineMessage(
            kind=MessageKind.WARNING,
            text=one_line(text),
            process=one_line(task) if task else None,
            native_id=one_line(handler["job"]) if handler else None,
        )
    )


def _log_message(state: _State, level: str, logger: str, message: str) -> None:
    """One timestamped log line's message."""
    note = _NOTE.search(message)
    stats = _STATS.search(message)
    if message.startswith("Task completed > TaskHandler["):
        _remember_job(state, message)
    elif note:
        _note(state, note)
    elif stats:
        _stats(state, stats["stats"])
    elif message.startswith("Failed to get exit status for process"):
        _exit_unread(state, message)
    elif message.startswith(_ABORTED):
        state.say(MessageKind.ABORTED, message)
    elif level == "ERROR" and logger.endswith("cli.Launcher"):
        state.say(MessageKind.FAILED, message)
    elif level in ("WARN", "ERROR"):
        state.say(MessageKind.WARNING, message)


def _line(state: _State, line: str) -> None:
    line = line[:_READ_CHARS]
    logged = _LOG_LINE.match(line)
    started = _ERROR_REPORT.search(line)
    if logged or started:
        _end_report(state)
    if started:
        state.report = _Report(task=started["task"])
    elif logged:
        _log_message(state, logged["level"], logged["logger"], logged["message"])
    elif state.report:
        _report_line(state, state.report, line)


def parse_log(lines: Sequence[str], context: tuple[str, ...]) -> Parsed:
    """Messages from new lines of the log; `context` carries an unfinished error report."""
    state = _load(context)
    for line in lines:
        _line(state, line)
    return Parsed(messages=tuple(state.messages), context=_save(state))
