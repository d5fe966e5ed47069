"""A fed workload none of whose parts fits when it is submitted (the user's own jobs fill
the QoS), against the scheduler double: it has no job, so the feeding index
(agent/runtime/workflows/feeding/index.py) is how the watcher, `status` and `status
--json` find it; `submit` says nothing was submitted yet, without an empty id line; the
watcher feeds it every cycle, room coming from jobs jobsmith never submitted; it leaves
the index when its last part is claimed or it is cancelled. The lab test
(tests/test_feeder_later_lab.py) runs it on the real Slurm."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from scheduler_double import AgentHarness

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.states import JobState
from jobsmith.agent.app import App, UserDirs
from jobsmith.agent.faces.cli import cli
from jobsmith.agent.runtime.submission import orders
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows.feeding import feeder
from jobsmith.agent.runtime.workflows.feeding.index import Feeding, FeedingIndex

POLICY: dict[str, Any] = {
    "max_concurrent_jobs": 100,
    "budgets": {"submissions_per_hour": 100, "max_failures_in_a_row": 5},
}
#: the user's own sbatch jobs in QoS tiny (not jobsmith's: in no ledger)
OWN = ("900", "901", "902", "903")


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    return full_queue(tmp_path)


def full_queue(tmp_path: Path) -> AgentHarness:
    """A harness whose QoS tiny the user's own jobs fill (4 of 4)."""
    harness = AgentHarness.build(tmp_path, POLICY)
    harness.slurm.submit_limit = {"tiny": 4}
    for job_id in OWN:  # the queue is full: no part of 4 fits
        harness.slurm.set_state(job_id, JobState.RUNNING)
        harness.slurm.options[job_id] = JobOptions(job_name="sleep", qos="tiny")
    return harness


def app_on(h: AgentHarness) -> App:
    """The CLI's App over the harness's store, ledger, double and executor."""
    from jobsmith.site_config.loader import LoadedSite

    app = App(paths=UserDirs(h.root / "config", h.root / "state"), environ={"USER": "alice"})
    site = LoadedSite(h.executor.site, (), None, {})  # type: ignore[arg-type]
    for name, part in (
        ("store", h.store),
        ("ledger", h.ledger),
        ("scheduler", h.slurm),
        ("executor", h.executor),
        ("site", site),
    ):
        app.__dict__[name] = part  # cached_property: a preset value is used as is
    return app


def js(app: App, *argv: str) -> Result:
    result = CliRunner().invoke(cli, list(argv), obj=app, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def submit_workload(h: AgentHarness, tasks: int = 10) -> tuple[str, st.StepResult]:
    session = h.store.create({"title": "gzip everything"})
    job = JobRequest(
        template="command", params={"command": "true"}, array=f"0-{tasks - 1}", qos="tiny"
    )
    return session, h.executor.submit(session, orders.NewJob(st.Submit(job=job)))


def end(h: AgentHarness, job_ids: tuple[str, ...] | list[str]) -> None:
    for job_id in job_ids:
        h.slurm.set_state(job_id, JobState.COMPLETED)


def test_a_workload_with_nothing_submitted_is_indexed_and_says_why(h: AgentHarness) -> None:
    session, result = submit_workload(h)
    assert h.slurm.count("submit") == 0
    summary = result.summary
    assert (summary["fed_parts"], summary["not_yet_submitted"]) == (0, 10)
    assert summary["job_id"] is None and summary["submitted"] is False
    assert "QoS tiny" in summary["waiting"] and "4" in summary["waiting"]
    index = FeedingIndex.beside(h.ledger)
    assert index.entries() == [Feeding(session, result.step_id)]
    assert feeder.feed_session(h.executor, session) == []  # still full: stays listed
    assert index.sessions() == {session}


def test_the_watcher_feeds_it_every_cycle_from_room_jobsmith_never_made(
    h: AgentHarness,
) -> None:
    submit_workload(h)
    app = app_on(h)
    cycle = json.loads(js(app, "watch", "--once", "--json").stdout)
    assert cycle["watched"] == 0 and h.slurm.count("submit") == 0  # no job of its own yet
    end(h, OWN)  # the user's own jobs end: no jobsmith job ended, yet there is room
    js(app, "watch", "--once")
    assert [o.array for o in h.slurm.options.values() if o.qos == "tiny"][len(OWN) :] == ["0-3"]
    index = FeedingIndex.beside(h.ledger)
    for fed in (1, 2):  # each part as the one before it ends
        end(h, list(h.slurm.jobs))
        js(app, "watch", "--once")
        assert h.slurm.count("submit") == 1 + fed
    assert index.entries() == []  # every part claimed: out of the index
    parts = [o.array for o in h.slurm.options.values()][len(OWN) :]
    assert parts == ["0-3", "0-3", "0-1"]
    before = h.slurm.count("submit_limits")
    js(app, "watch", "--once")  # nothing left to feed: nothing asked of the queue for it
    assert h.slurm.count("submit") == 3 and h.slurm.count("submit_limits") == before


def test_status_shows_it_before_it_has_a_job(h: AgentHarness) -> None:
    session, result = submit_workload(h)
    app = app_on(h)
    out = js(app, "status").stdout.splitlines()
    assert out[0] == "Running or waiting: 1", out
    assert re.fullmatch(r"  \w{8}  gzip everything  0/10 done, 10 not yet submitted +.*", out[1])
    [shown] = json.loads(js(app, "status", "--json").stdout)["workloads"]
    assert shown["line"] == "10 tasks: 0 done, 0 running, 10 not yet submitted"
    assert (shown["session_id"], shown["step_id"]) == (session, result.step_id)
    every = js(app, "status", "--all").stdout
    assert f"workload {result.step_id}: 10 tasks: 0 done, 0 running, 10 not yet" in every
    assert "workloads" not in json.loads(js(app, "status", "--json", "77").stdout)  # named ids


def test_submit_prints_no_job_id_line_and_json_says_nothing_was_submitted(
    h: AgentHarness,
) -> None:
    app = app_on(h)
    argv = ["submit", "command", "-a", "0-9", "--qos", "tiny", "-P", "command=true"]
    text = js(app, *argv, "--no-advice")
    assert text.stdout == ""  # no empty line for `id=$(…)` to take as an id
    assert "nothing submitted yet: 10 tasks in 3 parts" in text.stderr
    assert "`jobsmith watch` submits its parts" in text.stderr
    doc = json.loads(js(app, *argv, "--no-advice", "--json").stdout)
    assert (doc["submitted"], doc["job_id"], doc["fed_parts"]) == (False, None, 0)
    assert (doc["workload_tasks"], doc["not_yet_submitted"]) == (10, 10)
    assert "MaxSubmitPU" in doc["waiting"]
    end(h, OWN)
    fitted = json.loads(js(app, *argv, "--no-advice", "--json").stdout)
    assert fitted["submitted"] is True and fitted["job_id"] == "1000"
    assert (fitted["fed_parts"], fitted["fed_tasks"], fitted["not_yet_submitted"]) == (1, 4, 6)


def test_cancel_takes_it_out_and_a_pruned_session_s_entry_is_dropped(
    h: AgentHarness,
) -> None:
    session, result = submit_workload(h)
    other, later = submit_workload(h)
    index = FeedingIndex.beside(h.ledger)
    assert feeder.cancel(h.executor, session, result.step_id) == []  # no part to cancel
    assert index.entries() == [Feeding(other, later.step_id)]
    import shutil

    shutil.rmtree(h.root / "sessions" / other)  # pruned meanwhile
    assert feeder.feed_sessions(h.executor, index.sessions()) == {}  # no error
    assert index.entries() == []


def test_an_entry_left_after_the_last_part_was_fed_is_taken_out_by_the_next_feeding(
    h: AgentHarness,
) -> None:
    end(h, OWN)
    session, result = submit_workload(h, tasks=5)  # parts of 4 and 1: the first fits
    end(h, list(h.slurm.jobs))
    assert len(feeder.feed_session(h.executor, session)) == 1  # the last part
    index = FeedingIndex.beside(h.ledger)
    assert index.entries() == [] and h.slurm.count("submit") == 2
    # the process that fed it died before taking it out (or a resume entered it again)
    index.add(session, result.step_id)
    assert feeder.feed_sessions(h.executor, index.sessions()) == {}  # nothing fed twice
    assert index.entries() == [] and h.slurm.count("submit") == 2


def test_a_last_part_of_one_task_waits_for_room_like_the_others(h: AgentHarness) -> None:
    end(h, OWN)
    session, result = submit_workload(h, tasks=5)  # parts of 4 and 1
    # its one task would pass MaxSubmitPU: judged as an array, it waits (sbatch would
    # refuse it, and the workload would lose it)
    assert result.summary["fed_parts"] == 1 and h.slurm.count("submit") == 1
    assert FeedingIndex.beside(h.ledger).sessions() == {session}
    end(h, list(h.slurm.jobs))
    [last] = feeder.feed_session(h.executor, session)
    assert last.step_id == f"{result.step_id}.p1" and h.slurm.options["1001"].array == "0"


def test_actors_adding_and_removing_at_once_never_lose_an_entry(tmp_path: Path) -> None:
    index = FeedingIndex(tmp_path / "feeding")
    gone = [("s-gone", f"st-{n}") for n in range(40)]
    for session, step in gone:
        index.add(session, step)

    def add(worker: int) -> None:
        for n in range(40):
            index.add(f"s-{worker}", f"st-{n}")

    def remove() -> None:
        for session, step in gone:
            index.remove(session, step)

    threads = [threading.Thread(target=add, args=(w,)) for w in range(3)]
    threads.append(threading.Thread(target=remove))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept = {(e.session_id, e.step_id) for e in index.entries()}
    assert kept == {(f"s-{w}", f"st-{n}") for w in range(3) for n in range(40)}
    (tmp_path / "feeding" / "stray").write_text("not an entry")  # skipped, not an error
    (tmp_path / "feeding" / ("0" * 32)).write_text('{"session_id": "a", "step_id": "b"}')
    assert len(index.entries()) == 120


def test_a_dry_run_says_how_submit_would_feed_it_instead_of_refusing_it(
    h: AgentHarness,
) -> None:
    app = app_on(h)
    argv = ["submit", "command", "-a", "0-9", "--qos", "tiny", "-P", "command=true"]
    text = js(app, *argv, "--no-advice", "--dry-run")
    assert text.stdout.startswith("#!")  # the workload's script, as for any dry run
    assert "fed in 3 parts of at most 4 tasks, %4 at once" in text.stderr
    assert "submit limit" in text.stderr and "refuse" in text.stderr  # "would not refuse"
    doc = json.loads(js(app, *argv, "--no-advice", "--dry-run", "--json").stdout)
    assert doc["policy"]["verdict"] == "allow"  # the workload, judged as submit judges it
    feeding = doc["feeding"]
    assert (feeding["tasks"], feeding["parts"], feeding["part_size"]) == (10, 3, 4)
    assert feeding["throttle"] == 4 and feeding["over"]["rule"] == "submit limit"
    assert h.slurm.count("submit") == 0 and FeedingIndex.beside(h.ledger).entries() == []
    # the whole workload is what a person approves, as submit would ask (exit 8)
    h.executor = h.with_policy({**POLICY, "approval": {"core_hours": 1}})
    held = CliRunner().invoke(cli, [*argv, "--no-advice", "--dry-run"], obj=app_on(h))
    assert held.exit_code == 8 and "fed in 3 parts" in held.stderr, held.output
    # an array of several ranges is not fed: refused as before (exit 3)
    steps = [a if a != "0-9" else "0-9:2" for a in argv]
    refused = CliRunner().invoke(cli, [*steps, "--no-advice", "--dry-run"], obj=app)
    assert refused.exit_code == 3 and "submit limit" in refused.output


def test_a_dry_run_over_max_array_size_names_the_parts(h: AgentHarness) -> None:
    h.slurm.max_array_size = 5  # indices 0..4: 0-11 is refused whole by Slurm
    app = app_on(h)
    argv = ["submit", "command", "-a", "0-11", "-P", "command=true", "--no-advice"]
    doc = json.loads(js(app, *argv, "--dry-run", "--json").stdout)
    assert doc["feeding"]["over"]["rule"] == "max array size"
    assert (doc["feeding"]["parts"], doc["feeding"]["part_size"]) == (3, 5)


def test_status_reads_the_workloads_session_once(
    h: AgentHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`status` of a part reads the session's log whole once: the parts it polls besides
    and the workload's line come from the same read (the session's fold, kept on disk,
    adds only the events after it)."""
    submit_workload(h)
    app = app_on(h)
    end(h, OWN)
    js(app, "watch", "--once")
    part = next(j for j in h.slurm.jobs if j not in OWN)
    whole: list[str] = []
    real = h.store.read

    def read(session_id: str, from_seq: int = 0, to_seq: int | None = None) -> list[Any]:
        if from_seq == 0:
            whole.append(session_id)
        return real(session_id, from_seq, to_seq)

    monkeypatch.setattr(h.store, "read", read)
    js(app, "status", part)  # the first one folds the session too
    for argv in (("status", part), ("status", "--json", part)):
        whole.clear()
        shown = js(app, *argv).stdout
        assert "10 tasks: 0 done" in shown, shown
        assert len(whole) == 1, (argv, whole)
