"""The run report (issue 14, part 3), without Slurm: the pure document builder on records
made here and on the session fixture, the pure HTML renderer (its task table read back
with an HTML parser, and nothing from a job turned into markup), and the `report`
command's errors, default path, summary and `--open`. The lab test is
tests/test_report_lab.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from lab_cli import js

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.diagnosis.table import Diagnosis, diagnose
from jobsmith.agent.runtime.session.events import Event, EventKind, SessionInfo
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.views.report import (
    MAX_DIAGNOSED,
    RunReport,
    build_report,
    failed_records,
    gpus_of,
    session_job_ids,
)
from jobsmith.agent.views.report_html import render_html

FIXTURE = Path(__file__).parent / "fixtures" / "sessions" / "20261130T153454.647Z-ff20b4307244"
SID = "20261201T100000.000Z-0123456789ab"
T0 = datetime(2026, 12, 1, 10, 0, 0)
NOW = T0 + timedelta(minutes=30)
MIB = 1024**2
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def info(title: str | None = "a test session", sid: str = SID) -> SessionInfo:
    at = datetime(2026, 12, 1, 9, 59, tzinfo=UTC)
    return SessionInfo(
        id=sid, created=at, last_seq=0, last_event_at=at, closed=False, size_bytes=0, title=title
    )


def event(seq: int, kind: EventKind, data: dict[str, object], step: str | None = None) -> Event:
    at = datetime(2026, 12, 1, 10, seq % 60, tzinfo=UTC)
    return Event(session_id=SID, seq=seq, kind=kind, at=at, step_id=step, data=data)  # type: ignore[arg-type]


def submitted(seq: int, job_id: str) -> Event:
    return event(seq, EventKind.RESULT, {"outcome": "done", "submitted": True, "job_id": job_id})


def record(job_id: str, state: JobState, **kw: object) -> JobRecord:
    array, _, task = job_id.partition("_")
    fields: dict[str, object] = {
        "job_id": job_id,
        "job_id_raw": job_id.replace("_", "0"),
        "array_job_id": array if task else None,
        "array_task_id": int(task) if task.isdigit() else None,
        "name": "work.js-0123456789ab",
        "state": state,
        "submit_time": T0,
        "alloc_cpus": 2,
        "req_mem_bytes": 500 * MIB,
        **kw,
    }
    return JobRecord.model_validate(fields)


def ran(job_id: str, state: JobState, minutes: int, rss_mib: int | None, **kw: object) -> JobRecord:
    start = T0 + timedelta(minutes=1)
    return record(
        job_id,
        state,
        start_time=start,
        end_time=start + timedelta(minutes=minutes),
        elapsed_s=minutes * 60,
        total_cpu_s=minutes * 60.0,  # one of its two CPUs busy: 50 %
        max_rss_bytes=None if rss_mib is None else rss_mib * MIB,
        exit_code=0 if state is JobState.COMPLETED else 1,
        signal=0,
        **kw,
    )


def array_status() -> dict[str, JobStatus]:
    """Array 200: task 0 completed, 1 failed, 2 ended with no MaxRSS, 3 running (no end,
    no elapsed: the controller's record), 4-9 pending; job 201 a GPU job."""
    tasks = (
        ran("200_0", JobState.COMPLETED, 10, 120),
        ran("200_1", JobState.FAILED, 2, 80, name=HOSTILE),
        ran("200_2", JobState.COMPLETED, 4, None),
        record("200_3", JobState.RUNNING, start_time=NOW - timedelta(minutes=6)),
        record("200_[4-9]", JobState.PENDING, array_task_range="4-9"),
    )
    gpu = ran("201", JobState.COMPLETED, 30, 300, alloc_tres="cpu=2,mem=1G,gres/gpu=2")
    return {
        "200": JobStatus(job_id="200", state=JobState.RUNNING, tasks=tasks),
        "201": JobStatus(job_id="201", state=JobState.COMPLETED, record=gpu),
    }


def array_report(diagnoses: list[Diagnosis] | None = None) -> RunReport:
    events = [
        event(0, EventKind.SESSION_OPENED, {"title": "arrays"}),
        submitted(1, "200"),
        submitted(2, "201"),
    ]
    statuses = array_status()
    if diagnoses is None:
        diagnoses = [diagnose(r, ["boom"]) for r, _ in failed_records(statuses)]
    return build_report(info(), events, statuses, diagnoses, NOW)


# --- the document ----------------------------------------------------------------------------


def test_a_session_without_jobs_reports_nothing_used() -> None:
    report = build_report(info(), [event(0, EventKind.SESSION_OPENED, {})], {}, [], NOW)
    assert (report.jobs, report.tasks, report.failures, report.reruns) == ((), (), (), ())
    assert (report.core_hours, report.gpu_hours, report.task_counts) == (0.0, 0.0, {})
    summary = report.summary("/tmp/r.html")
    assert (summary.jobs, summary.tasks, summary.path) == (0, 0, "/tmp/r.html")


def test_each_task_has_its_times_its_use_and_its_hours() -> None:
    report = array_report()
    rows = {t.job_id: t for t in report.tasks}
    assert list(rows) == ["200_0", "200_1", "200_2", "200_3", "200_[4-9]", "201"]
    done = rows["200_0"]
    assert (done.submit_time, done.start_time) == (T0, T0 + timedelta(minutes=1))
    assert done.core_hours == pytest.approx(2 * 10 / 60)  # 2 CPUs for 10 minutes
    assert (done.cpu_efficiency, done.mem_efficiency) == (0.5, pytest.approx(120 / 500))
    assert (done.max_rss_bytes, done.req_mem_bytes) == (120 * MIB, 500 * MIB)
    # a running task without accounting's elapsed counts from its start until now
    running = rows["200_3"]
    assert (running.end_time, running.elapsed_s) == (None, 360)
    assert running.core_hours == pytest.approx(2 * 6 / 60)
    assert rows["200_2"].max_rss_bytes is None and rows["200_2"].mem_efficiency is None
    pending = rows["200_[4-9]"]
    assert (pending.tasks, pending.start_time, pending.core_hours) == (6, None, 0.0)
    gpu = rows["201"]
    assert (gpu.gpus, gpu.gpu_hours, gpu.core_hours) == (2, 1.0, 1.0)
    assert report.task_counts == {"COMPLETED": 3, "FAILED": 1, "RUNNING": 1, "PENDING": 6}
    expected_core = (2 * 10 + 2 * 2 + 2 * 4 + 2 * 6) / 60 + 1.0
    assert report.core_hours == pytest.approx(expected_core)
    assert report.gpu_hours == 1.0


def test_a_failed_task_carries_its_diagnosis_and_the_summary_its_remedy() -> None:
    report = array_report()
    (failure,) = report.failures
    assert failure.job_id == "200_1"
    assert {t.job_id: t.verdict for t in report.tasks}["200_1"] == failure.verdict.value
    summary = report.summary("x.html")
    assert [(f.job_id, f.remedy) for f in summary.failures] == [("200_1", failure.remedy)]
    assert summary.tasks == 11 and summary.jobs == 2


def test_failed_tasks_beyond_the_diagnosis_bound_are_counted_in_a_note() -> None:
    many = tuple(ran(f"300_{i}", JobState.FAILED, 1, 10) for i in range(MAX_DIAGNOSED + 3))
    statuses = {"300": JobStatus(job_id="300", state=JobState.FAILED, tasks=many)}
    failed = failed_records(statuses)
    assert len(failed) == MAX_DIAGNOSED
    diagnoses = [diagnose(r, []) for r, _ in failed]
    events = [event(0, EventKind.SESSION_OPENED, {}), submitted(1, "300")]
    report = build_report(info(), events, statuses, diagnoses, NOW)
    assert any(n.startswith("3 failed task(s) not diagnosed") for n in report.notes)


def test_the_fixture_session_shows_its_decision_and_rerun() -> None:
    """A log written by an earlier release: two submissions, one out of memory and re-run
    by the rule brain with twice the memory."""
    events = [Event.model_validate_json(p.read_text()) for p in sorted(FIXTURE.glob("*.json"))]
    assert session_job_ids(events) == ["1000", "1001", "1002"]
    oom = ran("1001", JobState.OUT_OF_MEMORY, 1, 500)
    statuses = {
        "1000": JobStatus(
            job_id="1000", state=JobState.COMPLETED, record=ran("1000", JobState.COMPLETED, 1, 5)
        ),
        "1001": JobStatus(job_id="1001", state=JobState.OUT_OF_MEMORY, record=oom),
        # 1002: neither accounting nor the controller has it (any more)
    }
    sid = events[0].session_id
    report = build_report(info(sid=sid), events, statuses, [diagnose(oom, [])], NOW)
    assert [(j.job_id, j.origin, j.rerun_of) for j in report.jobs] == [
        ("1000", "submitted", None),
        ("1001", "submitted", None),
        ("1002", "rerun", "1001"),
    ]
    (rerun,) = report.reruns
    assert (rerun.rerun_of, rerun.job_id, rerun.mem_mb, rerun.outcome) == (
        "1001",
        "1002",
        1000,
        "done",
    )
    (decision,) = report.decisions
    assert (decision.job_id, decision.brain, decision.action) == ("1001", "rules", "rerun")
    assert any("1002" in n and "not in Slurm" in n for n in report.notes)


def test_gpus_come_from_alloc_tres() -> None:
    assert gpus_of(None) == 0
    assert gpus_of("cpu=2,mem=1G") == 0
    assert gpus_of("cpu=2,mem=1G,gres/gpu=1") == 1
    assert gpus_of("cpu=2,gres/gpu=2,gres/gpu:a100=2") == 2  # the typed entry repeats it
    assert gpus_of("cpu=2,gres/gpu:a100=1,gres/gpu:v100=1") == 2


def test_times_in_utc_are_shown_on_the_local_clock() -> None:
    utc = T0.astimezone().astimezone(UTC)  # T0, local, as an aware UTC time
    rec = ran("7", JobState.COMPLETED, 1, 1).model_copy(update={"submit_time": utc})
    statuses = {"7": JobStatus(job_id="7", state=JobState.COMPLETED, record=rec)}
    events = [event(0, EventKind.SESSION_OPENED, {}), submitted(1, "7")]
    (task,) = build_report(info(), events, statuses, [], NOW).tasks
    assert task.submit_time == T0


# --- the page --------------------------------------------------------------------------------


class Page(HTMLParser):
    """What a browser would make of the page: its elements, the task rows' data, the
    scripts' text and the visible text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.rows: list[dict[str, str | None]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self.ids: set[str] = set()
        self.links: list[str] = []  # what a browser would fetch: src and href attributes
        self._in_tasks = self._in_script = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        self.links += [v or "" for k, v in attrs if k in ("src", "href")]
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if tag == "table":
            self._in_tasks = found.get("id") == "task-rows"
        if tag == "tr" and self._in_tasks and "data-job-id" in found:
            self.rows.append({k[5:]: v for k, v in attrs if k.startswith("data-")})
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)


def test_the_page_holds_every_task_row_with_its_figures() -> None:
    report = array_report()
    page = Page(render_html(report))
    rows = {r["job-id"]: r for r in page.rows}
    assert list(rows) == [t.job_id for t in report.tasks]
    for task in report.tasks:
        row = rows[task.job_id]
        assert row["state"] == task.state
        assert row["max-rss-bytes"] == (
            "" if task.max_rss_bytes is None else str(task.max_rss_bytes)
        )
        assert row["req-mem-bytes"] == str(task.req_mem_bytes)
        assert float(row["core-hours"] or 0) == pytest.approx(task.core_hours)
        assert float(row["gpu-hours"] or 0) == pytest.approx(task.gpu_hours)
    assert rows["200_3"]["end-time"] == "" and rows["200_3"]["start-time"]
    assert {"overview", "task-rows", "failures"} <= page.ids
    assert "unknown" in page.text  # 200_2's MaxRSS


def test_the_page_is_self_contained() -> None:
    text = render_html(array_report())
    page = Page(text)
    assert "Plotly.newPlot" in "".join(page.scripts)  # plotly.js inlined, then the figures
    assert not any(t in page.tags for t in ("link", "iframe", "img", "object", "embed"))
    assert page.links == []  # (plotly.js names CDNs in its code, for map tiles only)
    assert "default-src 'none'" in text  # and the browser may fetch nothing


def test_nothing_from_a_job_becomes_markup_or_script() -> None:
    evil = Diagnosis(
        job_id="200_1",
        verdict="nonzero_exit",  # type: ignore[arg-type]
        evidence=(f"stderr: {HOSTILE}",),
        efficiency={"cpu_efficiency": None, "mem_efficiency": None},  # type: ignore[arg-type]
        remedy=f"fix {HOSTILE}",
        retryable=False,
        notes=("</td></tr></table><script>alert(3)</script>",),
    )
    report = array_report([evil])
    report = report.model_copy(update={"title": HOSTILE})
    text = render_html(report)
    page = Page(text)
    assert "img" not in page.tags
    assert not any("alert(" in s for s in page.scripts)
    visible = "".join(page.text)
    assert HOSTILE in visible  # shown as the text it is
    assert visible.count(HOSTILE) >= 4  # title (twice), the task's name, evidence, remedy
    assert "</td></tr></table><script>alert(3)</script>" in visible


def test_an_empty_session_is_a_page_that_says_so() -> None:
    report = build_report(info(), [event(0, EventKind.SESSION_OPENED, {})], {}, [], NOW)
    page = Page(render_html(report))
    assert "no-jobs" in page.ids and page.rows == [] and page.scripts == []


def test_plotly_is_not_loaded_by_the_cli_or_the_document() -> None:
    code = (
        "import sys, jobsmith.agent.faces.cli, jobsmith.agent.app, jobsmith.agent.views.report, "
        "jobsmith.agent.views.report_html; print('plotly' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- the command (no Slurm: sessions without jobs) -----------------------------------------------


@pytest.fixture
def empty_session(jobsmith_home: Path) -> Iterator[str]:
    store = FileSessionStore(jobsmith_home / "state" / "sessions")
    yield store.create({"title": "nothing yet", "origin": "cli"})


def test_an_unknown_session_is_one_line_naming_it_and_sessions_list(jobsmith_home: Path) -> None:
    for bad in ("20261201T100000.000Z-000000000000", "../../etc"):
        result = js("report", bad)
        assert result.exit_code == 6
        (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert line.startswith("jobsmith: error: ") and bad in line
        assert "jobsmith sessions list" in line


def test_report_writes_the_page_here_by_default_and_prints_its_path(
    empty_session: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = js("report", empty_session)
    assert result.exit_code == 0, result.output
    page = tmp_path / f"report-{empty_session}.html"
    assert page.is_file()
    assert f"report written to {page}" in result.stdout
    assert "jobs: 0, tasks: 0 (none)" in result.stdout


def test_report_json_is_the_summary(empty_session: str, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "r.html"
    result = js("report", empty_session, "--output", str(out), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["path"] == str(out) and out.is_file()
    assert doc["title"] == "nothing yet"
    assert set(doc) == {
        "session_id", "title", "path", "jobs", "tasks", "task_counts", "failures",
        "reruns", "core_hours", "gpu_hours", "notes", "usage", "progress", "workloads",
        "thumbnails",
    }  # fmt: skip


def test_report_open_without_a_browser_names_the_path(
    empty_session: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import webbrowser

    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) and False)
    out = tmp_path / "r.html"
    result = js("report", empty_session, "--output", str(out), "--open")
    assert result.exit_code == 0, result.output
    assert opened == [out.as_uri()]
    assert f"no web browser found here; open {out} yourself" in result.stderr


def test_an_unwritable_output_is_one_line(empty_session: str, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = js("report", empty_session, "--output", str(tmp_path / "file" / "r.html"))
    assert result.exit_code == 2
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert line.startswith("jobsmith: error: report: cannot write ")
