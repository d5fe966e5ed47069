"""`jobsmith status` at a glance (issue 14, part 4), through the command line: a store of
hundreds of jobs jobsmith submitted, Slurm a double (tests/scheduler_double.py).

Without job ids the text is one line per session, at most 40 lines of 80 columns, from
one poll; `--all` prints every job as before; `--json` is the status document as before.
"""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.cells import cell_len
from scheduler_double import AgentHarness

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.states import JobState
from jobsmith.agent.app import App, UserDirs
from jobsmith.agent.faces.cli import cli
from jobsmith.agent.runtime.documents import JobStatusDocument
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.ledger import SubmissionRecord
from jobsmith.agent.runtime.submission.steps import RunPlan
from jobsmith.agent.runtime.workflows.plans import Plan

HOSTILE_TITLE = "submit \x1b[31mred\x1b[0m \u202eevil\r\nline " + "ü" * 100


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    return AgentHarness.build(tmp_path)


def app_on(h: AgentHarness) -> App:
    """The CLI's App over the harness's store, ledger and double."""
    app = App(paths=UserDirs(h.root / "config", h.root / "state"), environ={"USER": "alice"})
    for name, part in (
        ("store", h.store),
        ("ledger", h.ledger),
        ("scheduler", h.slurm),
        ("executor", h.executor),
    ):
        app.__dict__[name] = part  # cached_property: a preset value is used as is
    return app


def submitted(h: AgentHarness, session: str, job_id: str, minutes_ago: float) -> None:
    """A ledger record, as a submission in session leaves it."""
    h.ledger.record(
        SubmissionRecord(
            job_id=job_id,
            cluster="lab",
            template="command",
            params={},
            options=JobOptions(job_name="command.js-0123456789ab"),
            script_sha256="0" * 64,
            submitted_at=datetime.now() - timedelta(minutes=minutes_ago),
            session_id=session,
        )
    )


def many_jobs(h: AgentHarness) -> list[str]:
    """About 400 jobs in 300 sessions: running, pending, failed (one with a verdict a
    decision recorded), completed, a 1,000-task array, a hostile title."""
    ids: list[str] = []
    for n in range(300):  # every third session submitted two jobs
        title = HOSTILE_TITLE if n % 37 == 0 else f"submit command {n}"
        session = h.store.create({"title": title})
        for k in range(2 if n % 3 == 0 else 1):
            job_id = str(20000 + len(ids))
            ids.append(job_id)
            submitted(h, session, job_id, 60 * 24 * 6 * n / 300 + k)
            state = (
                JobState.RUNNING
                if n < 4
                else JobState.PENDING
                if n < 8
                else JobState.FAILED
                if n % 10 == 0
                else JobState.COMPLETED
            )
            if n == 15:
                tasks = {i: JobState.COMPLETED for i in range(1000)} | {7: JobState.FAILED}
                h.slurm.set_tasks(job_id, tasks, JobState.FAILED, exit_code=1)
            else:
                h.slurm.set_state(job_id, state, exit_code=1 if state is JobState.FAILED else 0)
        if n == 10:  # the watcher decided about it: its verdict is in the session's log
            h.store.append(
                session,
                h.store.last_seq(session) + 1,
                EventKind.DECISION,
                {"job_id": job_id, "verdicts": ["out_of_memory"], "action": "report"},
            )
    return ids


def status(app: App, *args: str) -> list[str]:
    res = CliRunner().invoke(cli, ["status", *args], obj=app, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout.splitlines()


def test_status_without_ids_is_at_most_40_lines_of_80_columns_from_one_poll(
    h: AgentHarness,
) -> None:
    ids = many_jobs(h)
    app = app_on(h)
    out = status(app)
    assert h.slurm.count("status") == 1  # one sacct call, nothing asked per line
    assert len(ids) >= 400 and len(out) <= 40
    assert all(cell_len(ln) <= 80 for ln in out), [ln for ln in out if cell_len(ln) > 80]
    assert not [c for ln in out for c in ln if unicodedata.category(c)[0] == "C"]
    assert out[0] == "Running or waiting: 8"
    assert [ln.split()[-3] for ln in out[1:9]] == ["running"] * 4 + ["pending"] * 4
    assert out[9].startswith("Failed (last 7d): ")
    assert re.search(r"  200\d\d out_of_memory +\d+h ago$", out[10]), out[10]
    assert re.search(r"  1998/2000 done, 2 failed: 20\d+_7 exi…  ", out[11]), out[11]
    assert re.fullmatch(r"… \d+ (older|more) sessions \(.*\).*: jobsmith status --all", out[-1])


def test_status_all_prints_every_job_and_json_is_the_status_document(h: AgentHarness) -> None:
    ids = many_jobs(h)
    app = app_on(h)
    every = "\n".join(status(app, "--all"))
    assert all(re.search(rf"\b{j}\b", every) for j in ids)
    doc = json.loads("\n".join(status(app, "--json")))
    assert list(doc) == ["jobs"] and len(doc["jobs"]) == len(ids)
    assert set(doc["jobs"][0]) == set(JobStatusDocument.model_fields)


def test_a_plan_is_one_line_with_its_steps_summarised(h: AgentHarness) -> None:
    plan = Plan.model_validate(
        {
            "name": "diamond",
            "steps": {
                "a": {"template": "command", "params": {"command": "echo a"}},
                "b": {"template": "command", "params": {"command": "echo b"}, "after_ok": ["a"]},
                "c": {"template": "command", "params": {"command": "echo c"}, "after_ok": ["a"]},
            },
        }
    )
    session = h.store.create({"title": "plan diamond", "origin": "plan"})
    result = h.executor.run(session, RunPlan(plan=plan))
    a, b, c = (result.summary["jobs"][n] for n in "abc")
    h.slurm.set_state(a, JobState.COMPLETED)
    h.slurm.set_state(b, JobState.RUNNING)
    h.slurm.set_state(c, JobState.FAILED, exit_code=3)
    out = status(app_on(h))
    assert out[0] == "Running or waiting: 1" and len(out) == 2
    assert re.fullmatch(
        rf"  \w{{8}}  plan diamond  1/3 done, 1 failed, 1 running: {c} exit 3 +\d+s ago", out[1]
    ), out[1]


def test_the_short_id_a_glance_line_shows_opens_its_session(h: AgentHarness) -> None:
    session = h.store.create({"title": "submit command"})
    submitted(h, session, "5001", minutes_ago=1)
    h.slurm.set_state("5001", JobState.COMPLETED)
    app = app_on(h)
    (line,) = [x for x in status(app) if "submit command" in x]
    short = line.split()[0]
    assert session.rpartition("-")[2].startswith(short)
    shown = CliRunner().invoke(cli, ["sessions", "show", short, "--json"], obj=app)
    assert shown.exit_code == 0, shown.output
    assert all(e["session_id"] == session for e in json.loads(shown.stdout)["events"])
    missing = CliRunner().invoke(cli, ["sessions", "show", "deadbeef"], obj=app)
    assert missing.exit_code == 6 and "no session 'deadbeef'" in missing.output


def test_a_workload_fed_in_parts_is_its_one_line_and_waits_while_parts_are_unfed(
    h: AgentHarness,
) -> None:
    from jobsmith.agent.runtime.submission import orders
    from jobsmith.agent.runtime.submission import steps as st
    from jobsmith.agent.runtime.submission.request.jobs import JobRequest

    h.executor = h.with_policy({"max_concurrent_jobs": 100})
    h.slurm.submit_limit = {"tiny": 4}
    session = h.store.create({"title": "gzip everything"})
    job = JobRequest(
        template="command", params={"command": "true"}, array="0-9", qos="tiny", time_limit_s=60
    )
    h.executor.submit(session, orders.NewJob(st.Submit(job=job)))
    [part] = h.slurm.jobs
    h.slurm.set_tasks(part, dict.fromkeys(range(4), JobState.COMPLETED), JobState.COMPLETED)
    app = app_on(h)
    app.__dict__["site"] = _lab_site()  # a poll that sees a workload's job end reads it
    out = status(app)
    line = "4/10 done, 6 not yet submitted"
    # its only job ended, yet 6 tasks wait for their part: it is not over
    assert out[0] == "Running or waiting: 1" and len(out) == 2
    assert re.fullmatch(rf"  \w{{8}}  gzip everything  {line} +\d+s ago", out[1]), out[1]
    [fed] = json.loads("\n".join(status(app, "--json")))["workloads"]  # the same counts
    assert fed["line"] == "10 tasks: 4 done, 0 running, 6 not yet submitted"
    from jobsmith.agent.runtime.workflows.feeding.feeder import stop_feeding

    stop_feeding(h.store, session, fed["step_id"])  # cancelled: the rest is never fed
    out = status(app)
    assert out[0] == "Ended: 1", out
    assert re.fullmatch(r"  \w{8}  gzip everything  4/10 done, 6 cancelled +\d+s ago", out[1])


def _lab_site() -> Any:
    from jobsmith.site_config import load_site

    lab = Path(__file__).parent.parent / "site_config" / "examples" / "lab.yaml"
    none = Path("/nonexistent")
    environ = {"HOME": "/home/alice", "USER": "alice"}
    return load_site(lab, environ=environ, system_file=none, user_file=none / "site.yaml")
