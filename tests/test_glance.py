"""The at-a-glance status (issue 14, part 4): `jobsmith status` without job ids as one
line per session, what runs or waits first, then what failed, newest first, never more
than 40 lines of 80 columns however many jobs there are.

The pure functions (agent/views/glance.py) are checked here on hundreds of sessions built
in memory; tests/test_glance_cli.py checks the command over a scheduler double.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from rich.cells import cell_len

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.adapters.workflow import EngineTask, TaskStatus
from jobsmith.agent.runtime.documents import (
    PipelineStatusDocument,
    PlanStatusDocument,
    PlanStepStatus,
)
from jobsmith.agent.runtime.glancefacts import GlanceFacts, JobFacts, SessionFacts
from jobsmith.agent.views.glance import (
    Glance,
    Group,
    Kind,
    build_glance,
    clean,
    fit,
    render_glance,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HOSTILE = "\x1b[2J\x1b]0;pwned\x07evil\r\nline\u202eright-to-left\x00\x9b31m"


def sid(n: int) -> str:
    return f"20261130T000000.000Z-{n * 2654435761 % 16**12:012x}"


def record(job_id: str, state: JobState, at: datetime, **fields: object) -> JobRecord:
    base = job_id.partition("_")[0]
    return JobRecord(
        job_id=job_id,
        job_id_raw=base,
        name=str(fields.pop("name", "command")) + ".js-0123456789ab",
        state=state,
        submit_time=at,
        **fields,  # type: ignore[arg-type]
    )


def plain(job_id: str, state: JobState, at: datetime, **fields: object) -> JobStatus:
    return JobStatus(job_id=job_id, state=state, record=record(job_id, state, at, **fields))


def array(job_id: str, states: list[JobState], at: datetime, overall: JobState) -> JobStatus:
    tasks = tuple(
        record(f"{job_id}_{i}", s, at, array_job_id=job_id, array_task_id=i, exit_code=1)
        for i, s in enumerate(states)
    )
    return JobStatus(job_id=job_id, state=overall, tasks=tasks)


class World:
    """Statuses and facts for a store of many sessions, built one session at a time."""

    def __init__(self) -> None:
        self.statuses: dict[str, JobStatus] = {}
        self.jobs: dict[str, JobFacts] = {}
        self.sessions: dict[str, SessionFacts] = {}
        self.next_job = 5000

    def session(
        self, n: int, title: str, *statuses: JobStatus, template: str = "command", **facts: object
    ) -> str:
        session_id = sid(n)
        for st in statuses:
            at = min(t for t in self._times(st))
            self.statuses[st.job_id] = st
            self.jobs[st.job_id] = JobFacts(
                session_id=session_id, template=template, submitted_at=at
            )
        self.sessions[session_id] = SessionFacts(session_id=session_id, title=title, **facts)  # type: ignore[arg-type]
        return session_id

    def job_id(self) -> str:
        self.next_job += 1
        return str(self.next_job)

    @staticmethod
    def _times(st: JobStatus) -> list[datetime]:
        recs = [st.record] if st.record else list(st.tasks)
        return [r.submit_time for r in recs if r.submit_time] or [NOW]

    def facts(self) -> GlanceFacts:
        return GlanceFacts(jobs=self.jobs, sessions=self.sessions, window="7d")

    def glance(self) -> Glance:
        return build_glance(self.statuses, self.facts(), NOW)


def big_world() -> World:
    """About 400 jobs in 300 sessions: a plan with a 1,000-task array, a pipeline,
    running, pending, failed and completed ones, hostile and very long titles."""
    w = World()
    ago = lambda minutes: NOW - timedelta(minutes=minutes)  # noqa: E731
    # a running plan: a 1,000-task array (12 done, 2 failed, 3 running, the rest pending)
    states = [JobState.COMPLETED] * 12 + [JobState.FAILED] * 2 + [JobState.RUNNING] * 3
    states += [JobState.PENDING] * (1000 - len(states))
    ids = [w.job_id() for _ in range(3)]
    plan_jobs = [
        plain(ids[0], JobState.COMPLETED, ago(30)),
        array(ids[1], states, ago(29), JobState.RUNNING),
        plain(ids[2], JobState.PENDING, ago(29), reason="Dependency"),
    ]
    steps = tuple(
        PlanStepStatus(
            name=name,
            depth=d,
            waits_for={},
            job_id=j.job_id,
            state=j.state.value,
            reason=None,
            task_counts=j.task_counts,
        )
        for name, d, j in zip(("split", "encode", "merge"), (0, 1, 2), plan_jobs, strict=True)
    )
    plan = PlanStatusDocument(session_id=sid(1), plan="transcode", outcome=None, steps=steps)
    w.session(1, "plan transcode", *plan_jobs, plan=plan)
    # a pipeline whose head job runs, one engine task failed
    head = plain(w.job_id(), JobState.RUNNING, ago(45))
    failed_task = EngineTask(
        key="7",
        process="ALIGN",
        name="ALIGN (s2)",
        status=TaskStatus.FAILED,
        native_id="777",
        exit_code=1,
    )
    pipeline = PipelineStatusDocument(
        session_id=sid(2),
        engine="snakemake",
        pipeline="Snakefile",
        launch_dir="/scratch/run",
        attempt=1,
        head_job_id=head.job_id,
        head_state="RUNNING",
        task_counts={"COMPLETED": 4, "FAILED": 1, "RUNNING": 2},
        failed=(failed_task,),
        running=(),
        messages=(),
        max_concurrent_tasks=10,
        next=None,
    )
    w.session(2, "pipeline snakemake Snakefile", head, pipeline=pipeline)
    for i in range(3, 8):  # running, a hostile job name among them
        w.session(
            i, f"submit command {i}", plain(w.job_id(), JobState.RUNNING, ago(i), name=HOSTILE)
        )
    for i in range(8, 13):  # pending, with a reason
        w.session(
            i, "submit gpu_train", plain(w.job_id(), JobState.PENDING, ago(i), reason="Priority")
        )
    # failures: one with a verdict a decision recorded, one a 1,000-task array with 3 failed
    oom = w.job_id()
    w.session(
        13,
        "submit bwa-align",
        plain(oom, JobState.OUT_OF_MEMORY, ago(60)),
        verdicts={oom: "out_of_memory"},
    )
    many = [JobState.COMPLETED] * 997 + [JobState.FAILED] * 3
    w.session(14, "submit file_array", array(w.job_id(), many, ago(70), JobState.FAILED))
    for i in range(15, 40):
        w.session(
            i,
            HOSTILE + " " + "ü" * 200,
            plain(w.job_id(), JobState.FAILED, ago(i * 10), exit_code=2),
        )
    w.session(40, "漢字のタイトル" * 20, plain(w.job_id(), JobState.TIMEOUT, ago(500)))
    # made good: a failure then a re-run of the same template that completed
    w.session(
        41,
        "submit command",
        plain(w.job_id(), JobState.FAILED, ago(900)),
        plain(w.job_id(), JobState.COMPLETED, ago(890)),
    )
    # completed ones, some with several jobs, some cancelled, down to about 400 jobs
    n = 42
    while len(w.statuses) < 400:
        k = 3 if n % 8 == 0 else 1
        state = JobState.CANCELLED if n % 50 == 0 else JobState.COMPLETED
        jobs = [plain(w.job_id(), state, ago(1000 + n * 10)) for _ in range(k)]
        w.session(n, f"submit command {'x' * (n % 120)}", *jobs)
        n += 1
    return w


def columns(line: str) -> int:
    return cell_len(line)


def heading_of(line: str) -> Group | None:
    return next((g for g in Group if line.startswith(g.value)), None)


# --- the lines ---------------------------------------------------------------------------


def test_hundreds_of_sessions_fit_40_lines_of_80_columns() -> None:
    w = big_world()
    assert len(w.statuses) >= 400 and len(w.sessions) >= 300
    out = render_glance(w.glance(), 80, 40)
    assert len(out) <= 40
    assert all(columns(line) <= 80 for line in out), [ln for ln in out if columns(ln) > 80]
    for line in out:  # nothing that moves a cursor, rings a bell or turns text around
        assert not [c for c in line if unicodedata.category(c)[0] == "C"], repr(line)


def test_running_and_waiting_come_first_then_failures_then_the_rest() -> None:
    out = render_glance(big_world().glance(), 80, 40)
    headings = [g for g in map(heading_of, out) if g is not None]
    assert headings == [Group.ACTIVE, Group.FAILED, Group.ENDED]
    assert out[0] == "Running or waiting: 12"  # the plan, the pipeline, 5 running, 5 pending
    active = out[1:13]
    # the newest first: 5 running, 5 pending, then the plan and the pipeline, cut at 80
    kinds = [("running" in ln, "pending" in ln) for ln in active[:10]]
    assert kinds == [(True, False)] * 5 + [(False, True)] * 5
    assert "plan transcode      13/1002 done, 2 failed, 3 running, 98…   29m ago" in active[-2]
    assert "pipeline snakemak…  4/7 done, 1 failed, 2 running: 777 AL…   45m ago" in active[-1]
    assert out[13].startswith("Failed (last 7d): ")


def test_each_group_is_newest_first() -> None:
    glance = big_world().glance()
    for group in Group:
        times = [ln.at for ln in glance.lines if ln.group is group]
        assert times == sorted(times, key=lambda t: t.timestamp() if t else 0, reverse=True)
    groups = [ln.group for ln in glance.lines]
    assert groups == sorted(groups, key=list(Group).index)


def test_the_ages_read_newest_first_within_the_failures() -> None:
    out = render_glance(big_world().glance(), 80, 40)
    start = next(i for i, ln in enumerate(out) if heading_of(ln) is Group.FAILED)
    end = next(i for i, ln in enumerate(out) if heading_of(ln) is Group.ENDED)
    ages = [_minutes(ln.rsplit(None, 2)[-2]) for ln in out[start + 1 : end]]
    assert ages == sorted(ages) and ages[0] == 60


def _minutes(age: str) -> float:
    n, unit = int(age[:-1]), age[-1]
    return n * {"s": 1 / 60, "m": 1, "h": 60, "d": 1440}[unit]


def test_a_failure_names_its_first_failed_job_and_verdict() -> None:
    out = "\n".join(render_glance(big_world().glance(), 80, 40))
    # the verdict a decision recorded, else what Slurm said (exit status, state)
    assert re.search(r"submit bwa-align    5\d+ out_of_memory ", out)
    assert re.search(r"submit file_array   997/1000 done, 3 failed: 5\d+_997 exi… ", out)
    assert re.search(r"pwned evil…  5\d+ exit 2  ", out)


def test_a_failure_made_good_by_a_rerun_is_no_longer_listed_as_failed() -> None:
    glance = big_world().glance()
    (line,) = [ln for ln in glance.lines if ln.session_id == sid(41)]
    assert line.group is Group.ENDED and line.progress == "1/2 done, 1 failed"


@pytest.mark.parametrize("width", [80, 132])
def test_the_last_line_counts_exactly_what_was_left_out(width: int) -> None:
    glance = big_world().glance()
    out = render_glance(glance, width, 40)
    shown_ids = {ln.split()[0] for ln in out if ln.startswith("  ")}
    left = [ln for ln in glance.lines if ln.session_id and ln.session_id[-12:][:8] not in shown_ids]
    assert len(shown_ids) + len(left) == len(glance.lines)
    kinds: Counter[Kind] = Counter()
    for ln in left:
        kinds.update(ln.jobs)
    detail = f"{kinds[Kind.DONE]} completed, {kinds[Kind.FAILED]} failed, "
    detail += f"{kinds[Kind.CANCELLED]} cancelled"
    sessions, jobs = f"{len(left)} more sessions", f"{sum(kinds.values())} jobs"
    if width == 80:  # the counts by state do not fit: only the totals
        assert out[-1] == f"… {sessions} ({jobs}) not shown: jobsmith status --all"
    else:
        assert out[-1] == f"… {sessions} ({jobs}: {detail}) not shown: jobsmith status --all"
    assert kinds[Kind.CANCELLED] and kinds[Kind.FAILED]  # the made-good failure, left out


def test_every_group_keeps_a_few_lines_when_running_jobs_alone_would_fill_the_screen() -> None:
    w = World()
    for i in range(100):
        w.session(
            i, f"running {i}", plain(w.job_id(), JobState.RUNNING, NOW - timedelta(minutes=i))
        )
    for i in range(100, 110):
        w.session(i, f"failed {i}", plain(w.job_id(), JobState.FAILED, NOW - timedelta(hours=i)))
    out = render_glance(w.glance(), 80, 40)
    assert len(out) == 40
    assert [g for g in map(heading_of, out) if g] == [Group.ACTIVE, Group.FAILED]
    assert sum(1 for ln in out if "failed " in ln and ln.startswith("  ")) == 3
    # 34 running and 3 failed shown, with two headings and this line
    assert out[-1] == "… 73 more sessions (73 jobs: 7 failed, 66 running): jobsmith status --all"


def test_a_few_sessions_are_all_shown_without_a_last_line() -> None:
    w = World()
    w.session(1, "submit command", plain(w.job_id(), JobState.COMPLETED, NOW - timedelta(hours=3)))
    w.session(2, "submit command", plain(w.job_id(), JobState.PENDING, NOW, reason="Resources"))
    out = render_glance(w.glance(), 80, 40)
    assert out[0] == "Running or waiting: 1" and "pending (Resources)" in out[1]
    assert out[2] == "Ended: 1"
    assert re.fullmatch(r"  \w{8}  submit command  completed +3h ago", out[3]), out[3]
    assert len(out) == 4


def test_nothing_to_show_says_so() -> None:
    glance = build_glance({}, GlanceFacts(window="12h"), NOW)
    assert render_glance(glance) == ["no jobs submitted with jobsmith in the last 12h"]


@pytest.mark.parametrize("width", [40, 60, 80, 132, 200])
def test_any_width_is_kept_and_a_wider_terminal_shows_more_of_each_title(width: int) -> None:
    out = render_glance(big_world().glance(), width, 40)
    assert len(out) <= 40 and all(columns(ln) <= width for ln in out)
    if width >= 132:  # nothing of the plan's line cut any more
        plan = "13/1002 done, 2 failed, 3 running, 984 pending: 5002_12 exit 1"
        assert any(re.search(f"plan transcode +{plan} +29m ago", ln) for ln in out)


def test_a_job_no_session_submitted_is_a_line_of_its_own() -> None:
    st = plain("42", JobState.RUNNING, NOW, name="hand-made")
    glance = build_glance({"42": st}, GlanceFacts(), NOW)
    (line,) = glance.lines
    assert (line.session_id, line.what, line.progress) == (None, "job 42 hand-made", "running")
    assert render_glance(glance)[1].startswith("  -  ")


# --- cleaning and cutting text ----------------------------------------------------------------


def test_clean_drops_control_and_format_characters_and_marks_undecodable_bytes() -> None:
    assert clean(HOSTILE) == "[2J ]0;pwned evil line right-to-left 31m"
    assert clean("caf\udce9") == "caf?"
    assert clean("a\u2028b\u200bc\ufe0f") == "a b c"


def test_fit_counts_wide_characters_twice_and_marks_the_cut() -> None:
    assert fit("漢字漢字", 5) == "漢字…" and cell_len(fit("漢字漢字", 5)) == 5
    assert fit("short", 10) == "short" and fit("abcdef", 4) == "abc…"
