"""The at-a-glance status (`jobsmith status` without job ids): one line per session.

What runs or waits comes first, then what failed, then what ended well, newest first in
each group, bounded to a screen (40 lines of 80 columns by default) however many jobs
there are, with a last line counting what was left out. A plan or a pipeline is one
line too, its jobs (or its engine's tasks) summarised as `12/40 done, 2 failed`; a
workload fed in parts counts every task, `7950/12000 done, 50 running, 4000 not yet
submitted` (`status --json`'s counts), and waits while parts are still to be fed.

Two pure steps: `build_glance` turns one poll's statuses and what the ledger and the
session store say (`GlanceFacts`, read without asking Slurm: status stays one sacct
call) into typed lines; `render_glance` lays them out for a width and a height. Every
text that came from outside (titles, job names, pending reasons) is cleaned of control
characters here, so none reaches the terminal.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.adapters.workflow import TaskStatus
from jobsmith.agent.runtime.documents import PipelineStatusDocument, PlanStatusDocument
from jobsmith.agent.runtime.glancefacts import GlanceFacts, JobFacts, SessionFacts
from jobsmith.agent.runtime.requeues import record_phrase

#: the glance's size when nothing says otherwise: an 80x40 terminal (or a pipe)
WIDTH, HEIGHT = 80, 40
#: while lines are short, each group gets at least this many before the first gets more
_FLOOR = 3
#: columns of a session line besides its two texts: indent, id, three gaps and the age
_SID, _AGE = 8, 8
_FIXED = 2 + _SID + 2 + 2 + 2 + _AGE


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Group(StrEnum):
    """Where a session's line goes, in this order."""

    ACTIVE = "Running or waiting"
    FAILED = "Failed"
    ENDED = "Ended"


class Kind(StrEnum):
    """A job, array task or engine task, in the words of the glance."""

    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RUNNING = "running"
    PENDING = "pending"
    UNKNOWN = "unknown"
    UNSUBMITTED = "not yet submitted"  # a workload's tasks whose part is not fed yet


_RUNNING_STATES = frozenset({JobState.RUNNING, JobState.COMPLETING, JobState.CONFIGURING})
_ENGINE_KINDS: dict[str, Kind] = {
    TaskStatus.SUBMITTED: Kind.PENDING,
    TaskStatus.RUNNING: Kind.RUNNING,
    TaskStatus.COMPLETED: Kind.DONE,
    TaskStatus.CACHED: Kind.DONE,
    TaskStatus.FAILED: Kind.FAILED,
    TaskStatus.ABORTED: Kind.CANCELLED,
}


def kind_of(state: JobState) -> Kind:
    """The glance's word for a Slurm state (a cancellation is no failure here: someone
    chose it; a preemption or a time-out is)."""
    if state.is_active:
        return Kind.RUNNING if state in _RUNNING_STATES else Kind.PENDING
    if state is JobState.COMPLETED:
        return Kind.DONE
    if state is JobState.CANCELLED:
        return Kind.CANCELLED
    return Kind.FAILED if state.is_failure else Kind.UNKNOWN


class GlanceLine(_Model):
    """One session (or one job no session submitted), ready to lay out."""

    session_id: str | None
    group: Group
    what: str = Field(description="title, plan or pipeline; cleaned")
    progress: str = Field(description="its jobs' states summarised; cleaned")
    failure: str | None = Field(None, description="first failed job and why; cleaned")
    at: datetime | None = Field(None, description="its newest activity")
    units: int = Field(1, description="jobs and array (or engine) tasks counted in progress")
    jobs: dict[Kind, int] = Field(description="its Slurm jobs (not tasks) by kind")


class Glance(_Model):
    """Every session's line, in the order shown (before the screen bounds them)."""

    lines: tuple[GlanceLine, ...]
    now: datetime
    window: str


# --- building the lines ------------------------------------------------------------------


def build_glance(statuses: Mapping[str, JobStatus], facts: GlanceFacts, now: datetime) -> Glance:
    """One line per session of the polled jobs (a job without a session is its own), and
    per session whose fed workload has no job yet."""
    by_session: dict[tuple[str | None, str | None], list[str]] = {}
    for job_id in statuses:
        sid = (facts.jobs.get(job_id) or JobFacts()).session_id
        by_session.setdefault((sid, None) if sid else (None, job_id), []).append(job_id)
    lines = [
        _line(_session(sid, facts), ids, statuses, facts) for (sid, _), ids in by_session.items()
    ]
    shown = {sid for sid, _ in by_session}
    lines += [  # a workload none of whose parts fitted yet: a session without a job
        _line(s, [], statuses, facts)
        for sid, s in facts.sessions.items()
        if sid not in shown and s.workloads
    ]
    order = list(Group)
    lines.sort(key=lambda ln: _stamp(ln.at), reverse=True)
    lines.sort(key=lambda ln: order.index(ln.group))
    return Glance(lines=tuple(lines), now=now, window=facts.window)


def _session(session_id: str | None, facts: GlanceFacts) -> SessionFacts | None:
    if session_id is None:
        return None
    return facts.sessions.get(session_id) or SessionFacts(session_id=session_id)


def _line(
    session: SessionFacts | None,
    job_ids: list[str],
    statuses: Mapping[str, JobStatus],
    facts: GlanceFacts,
) -> GlanceLine:
    submitted = {j: (facts.jobs.get(j) or JobFacts()).submitted_at for j in job_ids}
    job_ids = sorted(job_ids, key=lambda j: _stamp(submitted[j]))
    jobs = [statuses[j] for j in job_ids]
    job_kinds = Counter(kind_of(st.state) for st in jobs)
    if session is not None and session.pipeline is not None:
        summary = _pipeline(session.pipeline)
    elif session is not None and session.plan is not None:
        summary = _plan(session.plan, statuses, session.verdicts)
    else:
        summary = _jobs(jobs, facts, session)
    if session is not None and session.workloads:  # fed in parts: the workload, whole
        summary = _workloads(session, summary)
    said = [facts.progress[j].line() for j in job_ids if j in facts.progress]
    if session is not None:  # a plan's steps waiting for a fed workload's parts
        said += [line for w in session.workloads if (line := w.followers_glance())]
    if said:  # a render's frames, a transcode's chunks, as their output says
        summary = summary._replace(progress=f"{summary.progress}; {', '.join(said)}")
    times = [t for st in jobs for t in _times(st)] + [t for t in submitted.values() if t]
    active = job_kinds[Kind.RUNNING] + job_kinds[Kind.PENDING] > 0
    feeding = any(w.feeding for w in session.workloads) if session else False
    active = active or feeding  # parts still to be fed: not over
    return GlanceLine(
        session_id=session.session_id if session else None,
        group=Group.ACTIVE if active else Group.FAILED if summary.failure else Group.ENDED,
        what=_what(session, jobs, facts),
        progress=clean(summary.progress),
        failure=clean(summary.failure) if summary.failure else None,
        at=max(times, key=_stamp) if times else _created(session),
        jobs=dict(job_kinds),
        units=summary.units,
    )


class _Summary(NamedTuple):
    """A session's jobs summarised: progress, the first failure (None: none that
    stands), and how many jobs and tasks the progress counts."""

    progress: str
    failure: str | None
    units: int


def _jobs(jobs: list[JobStatus], facts: GlanceFacts, session: SessionFacts | None) -> _Summary:
    """Plain jobs: their tasks counted; the first failure not made good by a later job
    of the same template (a re-run) completing."""
    kinds: Counter[Kind] = Counter()
    for st in jobs:
        kinds.update(_task_kinds(st))
    failed = [
        st for i, st in enumerate(jobs) if _failed(st) and not _redone(st, jobs[i + 1 :], facts)
    ]
    failure = _failure(failed[0], session.verdicts if session else {}) if failed else None
    single = jobs[0] if len(jobs) == 1 and not jobs[0].tasks else None
    progress = _state_word(single) if single is not None else tally(kinds)
    return _Summary(progress, failure, sum(kinds.values()))


def _plan(
    plan: PlanStatusDocument, statuses: Mapping[str, JobStatus], verdicts: Mapping[str, str]
) -> _Summary:
    """A plan: its steps' current jobs (a re-run replaces the job it re-ran)."""
    kinds: Counter[Kind] = Counter()
    failed: list[JobStatus] = []
    for step in plan.steps:
        status = statuses.get(step.job_id) if step.job_id else None
        if status is None:
            state = JobState.known(step.state) if step.state else JobState.PENDING
            kinds[kind_of(state or JobState.UNKNOWN)] += 1
            continue
        kinds.update(_task_kinds(status))
        if _failed(status):
            failed.append(status)
    failure = _failure(failed[0], verdicts) if failed else None
    return _Summary(tally(kinds), failure, sum(kinds.values()))


def _workloads(session: SessionFacts, jobs: _Summary) -> _Summary:
    """A session with workloads fed in parts: every task of them counted, those not yet
    submitted too (cancelled ones: never to be), as `status --json` counts them, with
    its parts' first failure; a plan's steps that wait for a workload's parts count as
    not yet submitted too (followers.py)."""
    kinds: Counter[Kind] = Counter()
    for w in session.workloads:
        unfed = Kind.CANCELLED if w.cancelled else Kind.UNSUBMITTED
        kinds.update({Kind.DONE: w.done, Kind.FAILED: w.failed, Kind.RUNNING: w.running})
        kinds.update({Kind.PENDING: w.queued, unfed: w.not_submitted + len(w.followers)})
    return _Summary(tally(+kinds), jobs.failure, max(sum(kinds.values()), jobs.units))


def _pipeline(doc: PipelineStatusDocument) -> _Summary:
    """A pipeline: its head job and its engine's tasks (as its session last recorded them)."""
    kinds: Counter[Kind] = Counter()
    for status, n in doc.task_counts.items():
        kinds[_ENGINE_KINDS.get(status, Kind.UNKNOWN)] += n  # a StrEnum: its str values key it
    head = JobState.known(doc.head_state)
    head_word = head.value.lower() if head else "not submitted"
    progress = tally(kinds) if kinds else "no tasks yet"
    if head is not JobState.RUNNING:  # a running head job is the usual case: not said
        progress += f", head job {head_word}"
    failure = None
    if doc.failed:
        task = doc.failed[0]
        code = f" exit {task.exit_code}" if task.exit_code is not None else ""
        failure = f"{task.native_id or '-'} {task.name}{code}"
    elif head is not None and kind_of(head) is Kind.FAILED:
        failure = f"head job {doc.head_job_id} {head_word}"
    return _Summary(progress, failure, sum(kinds.values()))


def _task_kinds(status: JobStatus) -> Counter[Kind]:
    if not status.tasks:
        return Counter({kind_of(status.state): 1})
    counts: Counter[Kind] = Counter()
    for state, n in status.task_counts.items():
        counts[kind_of(JobState.known(state) or JobState.UNKNOWN)] += n
    return counts


def _failed(status: JobStatus) -> bool:
    return kind_of(status.state) is Kind.FAILED or any(
        kind_of(t.state) is Kind.FAILED for t in status.tasks
    )


def _redone(status: JobStatus, later: list[JobStatus], facts: GlanceFacts) -> bool:
    template = (facts.jobs.get(status.job_id) or JobFacts()).template
    return any(
        kind_of(st.state) is Kind.DONE
        and (facts.jobs.get(st.job_id) or JobFacts()).template == template
        for st in later
    )


def _failure(status: JobStatus, verdicts: Mapping[str, str]) -> str:
    """The first failed job (or task) and its verdict, if a decision recorded one, or
    what Slurm said of it."""
    record = next((t for t in status.tasks if kind_of(t.state) is Kind.FAILED), None)
    record = record or status.record
    job_id = record.job_id if record is not None else status.job_id
    verdict = verdicts.get(job_id) or verdicts.get(status.job_id)
    return f"{job_id} {verdict or _ended_word(record, status.state)}"


def _ended_word(record: JobRecord | None, state: JobState) -> str:
    if record is not None and record.state is JobState.FAILED:
        if record.signal:
            return f"signal {record.signal}"
        if record.exit_code is not None:
            return f"exit {record.exit_code}"
    return (record.state if record is not None else state).value.lower()


def _state_word(status: JobStatus) -> str:
    word = status.state.value.lower()
    requeued = record_phrase(status.record)
    if requeued:
        word = f"{word}, {requeued}"
    reason = status.reason or (status.record.reason if status.record else None)
    if kind_of(status.state) is Kind.PENDING and reason:
        return f"{word} ({reason})"
    return word


def tally(kinds: Mapping[Kind, int]) -> str:
    """`12/40 done, 2 failed, 3 running`: the kinds that occur, done first."""
    total = sum(kinds.values())
    rest = [f"{kinds[k]} {k.value}" for k in Kind if k is not Kind.DONE and kinds.get(k)]
    return ", ".join([f"{kinds.get(Kind.DONE, 0)}/{total} done", *rest])


def _what(session: SessionFacts | None, jobs: list[JobStatus], facts: GlanceFacts) -> str:
    """The session's title (with the job's own name, for one job named otherwise)."""
    title = session.title if session else None
    if session is not None and session.plan is not None:
        return clean(title or f"plan {session.plan.plan}")
    if session is not None and session.pipeline is not None:
        doc = session.pipeline
        return clean(title or f"pipeline {doc.engine} {doc.pipeline}")
    if not jobs:  # a workload none of whose parts was submitted yet
        return clean(title or "(untitled)")
    first = jobs[0]
    record = first.record or (first.tasks[0] if first.tasks else None)
    name = record.name.split(".js-")[0] if record is not None else ""
    template = (facts.jobs.get(first.job_id) or JobFacts()).template or ""
    if session is None:
        return clean(f"job {first.job_id} {name or template}")
    fed = bool(session.workloads)  # a part's name is the workload's, with `.pN`
    if len(jobs) == 1 and name and name not in (title or "") and name != template and not fed:
        return clean(f"{title or template} ({name})")
    return clean(title or template or "(untitled)")


def _times(status: JobStatus) -> Iterable[datetime]:
    records = [status.record] if status.record else []
    for rec in [*records, *status.tasks]:
        yield from (t for t in (rec.end_time, rec.start_time, rec.submit_time) if t)


def _created(session: SessionFacts | None) -> datetime | None:
    return session.created if session else None


def _stamp(at: datetime | None) -> float:
    """A time to sort by (none: the oldest)."""
    return _aware(at).timestamp() if at is not None else 0.0


def _aware(at: datetime) -> datetime:
    """A naive time (sacct -P, the ledger) is local time."""
    return at if at.tzinfo is not None else at.astimezone()


# --- cleaning and measuring text ----------------------------------------------------------

#: variation selectors: a terminal may draw the character before them wider than counted
_DROPPED = frozenset({"\ufe0e", "\ufe0f"})


def clean(text: str) -> str:
    """text on one line without control or format characters (an escape sequence, a
    right-to-left override, a newline) and with undecodable bytes as '?'."""
    out = []
    for char in text:
        category = unicodedata.category(char)
        if category == "Cs":
            out.append("?")
        elif category[0] == "C" or category in ("Zl", "Zp") or char in _DROPPED:
            out.append(" ")
        else:
            out.append(char)
    return " ".join("".join(out).split())


def width_of(text: str) -> int:
    """Columns text takes in a terminal (wide characters count two)."""
    from rich.cells import cell_len

    return cell_len(text)


def fit(text: str, width: int) -> str:
    """text cut to width columns, with '…' where it was cut."""
    from rich.cells import get_character_cell_size

    if width_of(text) <= width:
        return text
    out, used = [], 0
    for char in text:
        size = get_character_cell_size(char)
        if used + size > width - 1:
            break
        out.append(char)
        used += size
    return "".join(out) + "…" if width > 0 else ""


def _pad(text: str, width: int) -> str:
    cut = fit(text, width)
    return cut + " " * (width - width_of(cut))


# --- laying out ---------------------------------------------------------------------------


def render_glance(glance: Glance, width: int = WIDTH, height: int = HEIGHT) -> list[str]:
    """The glance as at most `height` lines of at most `width` columns."""
    if not glance.lines:
        return [fit(f"no jobs submitted with jobsmith in the last {glance.window}", width)]
    lines = glance.lines
    shown = _choose(lines, max(height, 2))
    what_w, progress_w = _columns([lines[i] for i in sorted(shown)], width)
    out: list[str] = []
    for group in Group:
        members = [i for i, ln in enumerate(lines) if ln.group is group]
        visible = [lines[i] for i in members if i in shown]
        if not visible:
            continue
        heading = f"{group.value} (last {glance.window})" if group is Group.FAILED else group.value
        out.append(fit(f"{heading}: {len(members)}", width))
        out += [_session_line(ln, glance.now, what_w, progress_w) for ln in visible]
    left_out = [ln for i, ln in enumerate(lines) if i not in shown]
    if left_out:
        out.append(_left_out(left_out, width))
    return out


def _choose(lines: Sequence[GlanceLine], height: int) -> set[int]:
    """The lines shown (their indices): all if they fit with their headings; otherwise
    every group a few (newest first), then the rest in group order, one row kept for what
    was left out."""
    groups = [[i for i, ln in enumerate(lines) if ln.group is g] for g in Group]
    groups = [g for g in groups if g]
    if len(lines) + len(groups) <= height:
        return set(range(len(lines)))
    room = height - 1
    quota = [0] * len(groups)
    for floor in (_FLOOR, height):
        for i, members in enumerate(groups):
            heading = 0 if quota[i] else 1
            take = min(len(members) - quota[i], floor - quota[i], room - heading)
            if take > 0:
                quota[i] += take
                room -= take + heading
    return {i for members, n in zip(groups, quota, strict=True) for i in members[:n]}


def _columns(lines: Sequence[GlanceLine], width: int) -> tuple[int, int]:
    """The widths of the title and progress columns: each as wide as its longest text
    needs, the title giving way first but keeping a third of the room."""
    room = max(width - _FIXED, 2)
    want_what = max((width_of(ln.what) for ln in lines), default=0)
    want_progress = max((width_of(_summary(ln)) for ln in lines), default=0)
    what_w = min(want_what, max(room - want_progress, room // 3))
    return what_w, room - what_w


def _session_line(line: GlanceLine, now: datetime, what_w: int, progress_w: int) -> str:
    # the id's random part, cut: the full id is in `status --all` and `--json`
    sid = line.session_id.rpartition("-")[2][:_SID] if line.session_id else "-"
    age = _age(line.at, now) if line.at else ""
    cells = [_pad(sid, _SID), _pad(line.what, what_w), _pad(_summary(line), progress_w)]
    return ("  " + "  ".join(cells) + "  " + age.rjust(_AGE)).rstrip()


def _summary(line: GlanceLine) -> str:
    """The progress and the first failure; for one job its failure says it all."""
    if line.failure is None:
        return line.progress
    return f"{line.progress}: {line.failure}" if line.units > 1 else line.failure


def _age(at: datetime, now: datetime) -> str:
    seconds = max(int((_aware(now) - _aware(at)).total_seconds()), 0)
    for unit, size, below in (("s", 1, 60), ("m", 60, 3600), ("h", 3600, 48 * 3600)):
        if seconds < below:
            return f"{seconds // size}{unit} ago"
    return f"{seconds // 86400}d ago"


def _left_out(lines: Sequence[GlanceLine], width: int) -> str:
    """`… 312 older sessions (980 jobs, all completed) not shown: jobsmith status --all`,
    shorter if the terminal is narrow."""
    kinds: Counter[Kind] = Counter()
    for line in lines:
        kinds.update(line.jobs)
    jobs = sum(kinds.values())
    older = all(ln.group is Group.ENDED for ln in lines)
    sessions = _count(len(lines), f"{'older' if older else 'more'} session")
    if kinds[Kind.DONE] == jobs:
        detail = f"{_count(jobs, 'job')}, all completed"
    else:
        words = {Kind.DONE: "completed"}
        parts = [f"{kinds[k]} {words.get(k, k.value)}" for k in Kind if kinds[k]]
        detail = f"{_count(jobs, 'job')}: {', '.join(parts)}"
    hint = "jobsmith status --all"
    for text in (
        f"… {sessions} ({detail}) not shown: {hint}",
        f"… {sessions} ({detail}): {hint}",
        f"… {sessions} ({_count(jobs, 'job')}) not shown: {hint}",
        f"… {sessions} not shown: {hint}",
    ):
        if width_of(text) <= width:
            return text
    return fit(f"… {sessions} not shown: {hint}", width)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
