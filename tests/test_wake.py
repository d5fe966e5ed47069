"""Waking a conversation's brain when its jobs end (issue 9, section 2): the real anthropic
SDK over HTTP against the loopback Messages-API server (tests/messages_server.py), and for
the scenario at the end, real ffmpeg jobs on the lab cluster followed by the real watcher.

What is proved: an ask session whose job ended is taken up once, with the session and the
ended jobs shown as data; without a key the session's brain is recorded as waiting (once)
and the next waker with a key takes it up; a session of plain commands is never woken;
two wakers racing for the same jobs wake the brain once; and "transcode this clip in 3
chunks, then join them" runs while nobody watches: the ask submits the chunks, the
watcher wakes the brain when they end, the brain submits the join, and the joined file
lasts as long as the source.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from lab_cli import LAB_SITE, js
from messages_server import MessagesServer, content_text, message, text, tool_use, usage
from test_ask import KEY, events

from jobsmith.agent.app import App, build_app
from jobsmith.agent.brains.waking import Waker
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.readmodel import SessionFold, SessionFolds
from jobsmith.agent.runtime.session.session_log import SessionLog

lab = pytest.mark.usefixtures("lab_cluster")


@pytest.fixture
def site_yaml(server: MessagesServer, jobsmith_home: Path) -> Path:
    site = jobsmith_home / "config" / "site.yaml"
    site.write_text(f"model:\n  base_url: '{server.url}'\n  max_retries: 0\n")
    return site


def app_with(key: str | None) -> App:
    import os

    environ = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    if key is not None:
        environ["ANTHROPIC_API_KEY"] = key
    return build_app(LAB_SITE, environ)


def ended_session(app: App, origin: str | None = "ask", job: str = "101") -> str:
    """A session (of `origin`) that submitted `job`, which then COMPLETED."""
    session = app.store.create({"title": "t", **({"origin": origin} if origin else {})})
    log = SessionLog(app.store, session)
    log.append(EventKind.USER_INPUT, {"text": "run it, then tell me", "origin": origin}, None)
    log.append(EventKind.JOB_STATE, {"job_id": job, "state": "RUNNING"}, None)
    log.append(EventKind.JOB_STATE, {"job_id": job, "state": "COMPLETED"}, None)
    return session


def waker(app: App) -> Waker:
    return Waker(app.conversation, app.store, app.folds, app.news.add)


def kinds(app: App, session: str) -> list[str]:
    return [e.kind.value for e in app.store.read(session)]


def unwrap(block: str) -> Any:
    return json.loads(block.split("<tool_data>\n", 1)[1].split("\n</tool_data>", 1)[0])


def test_an_ask_session_whose_job_ended_is_taken_up_once_with_the_jobs_as_data(
    server: MessagesServer, site_yaml: Path
) -> None:
    app = app_with(KEY)
    session = ended_session(app)
    server.script(message(text("Job 101 completed; nothing else to do."), tokens=usage(80, 12)))
    (outcome,) = waker(app).wake([session])
    assert (outcome.outcome, outcome.job_ids, outcome.submitted) == ("answered", ["101"], [])
    assert outcome.detail == "Job 101 completed; nothing else to do."

    (request,) = server.requests
    (shown,) = request.body["messages"]
    content = content_text(shown)
    assert content.startswith("The session so far:\n<tool_data>")
    ended = unwrap(content.split("The jobs that ended:\n", 1)[1])
    assert ended == [{"job_id": "101", "state": "COMPLETED"}]
    assert "no person is watching" in content
    assert kinds(app, session)[-2:] == ["brain_woken", "model_output"]
    fold = app.folds.of(session)
    assert fold.unwoken == set() and fold.tokens.calls == 1

    # told once: the next wake asks nothing
    assert waker(app_with(KEY)).wake([session]) == []
    assert len(server.requests) == 1


def test_without_a_key_the_brain_waits_once_and_the_next_waker_with_a_key_goes_on(
    server: MessagesServer, site_yaml: Path
) -> None:
    keyless = app_with(None)
    session = ended_session(keyless)
    (first,) = waker(keyless).wake([session])
    (again,) = waker(app_with(None)).wake([session])
    assert first.outcome == again.outcome == "waiting"
    assert f"jobsmith chat --session {session}" in first.detail
    assert kinds(keyless, session).count("brain_waiting") == 1  # said once, not per cycle
    assert "1 conversation waits for a model key" in (keyless.news.take() or "")
    assert server.requests == []

    server.script(message(text("Done.")))
    (taken,) = waker(app_with(KEY)).wake([session])
    assert taken.outcome == "answered" and len(server.requests) == 1
    assert app_with(None).folds.of(session).waiting == set()


def test_a_session_of_plain_commands_is_never_woken(
    server: MessagesServer, site_yaml: Path
) -> None:
    app = app_with(KEY)
    session = ended_session(app, origin=None)
    assert waker(app).wake([session]) == []
    assert server.requests == [] and "brain_woken" not in kinds(app, session)


def test_two_wakers_racing_for_the_same_jobs_wake_the_brain_once(
    server: MessagesServer, site_yaml: Path
) -> None:
    first, second = app_with(KEY), app_with(KEY)
    session = ended_session(first)
    # the second waker read the session before the first took it up: its fold still
    # lists job 101 as unwoken, so only the conditional append can stop it
    stale = SessionFolds(second.store).of(session)
    assert stale.unwoken == {"101"}
    server.script(message(text("Done.")), message(text("never asked")))
    assert [o.outcome for o in waker(first).wake([session])] == ["answered"]
    late = Waker(second.conversation, second.store, _Frozen(stale), second.news.add)  # type: ignore[arg-type]
    assert late.wake([session]) == []
    assert len(server.requests) == 1
    assert kinds(first, session).count("brain_woken") == 1


class _Frozen:
    """Folds read before another waker appended: what a racing waker has in hand."""

    def __init__(self, fold: SessionFold) -> None:
        self.fold = fold

    def of(self, session_id: str) -> SessionFold:
        return self.fold


class _Clock:
    """The waker's now, moved by the test (the backoff is minutes long)."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def after(self, delay: timedelta) -> None:
        self.now += delay


def clocked(app: App, clock: _Clock) -> Waker:
    return Waker(app.conversation, app.store, app.folds, app.news.add, clock=clock)


def test_a_failed_wake_is_tried_again_after_each_backoff_then_given_up(
    server: MessagesServer, site_yaml: Path
) -> None:
    """Issue 23: a wake that failed was never tried again (brain_woken had taken its jobs
    for good). Now it is tried after 1, 5 and 30 minutes, not sooner, then given up; the
    session and the news say so, and no waker asks again."""
    from messages_server import error

    from jobsmith.agent.brains.waking import MAX_WAKE_TRIES, RETRY_BACKOFF

    app, clock = app_with(KEY), _Clock()
    session = ended_session(app)
    server.script(*[error(529, "overloaded_error", "Overloaded") for _ in range(MAX_WAKE_TRIES)])
    outcomes = []
    for attempt, backoff in enumerate((*RETRY_BACKOFF, None), start=1):
        (outcome,) = clocked(app_with(KEY), clock).wake([session])
        assert (outcome.outcome, outcome.attempt) == ("failed", attempt)
        assert KEY not in outcome.detail and "529" in outcome.detail
        assert len(server.requests) == attempt
        outcomes.append(outcome)
        if backoff is None:
            break
        assert outcome.retry_at == clock.now + backoff
        clock.after(backoff - timedelta(seconds=1))  # not yet: nobody asks
        assert clocked(app_with(KEY), clock).wake([session]) == []
        assert len(server.requests) == attempt
        clock.after(timedelta(seconds=1))

    last = outcomes[-1]
    assert last.retry_at is None and f"given up after {MAX_WAKE_TRIES} tries" in last.detail
    failures = [e for e in app.store.read(session) if e.kind is EventKind.BRAIN_FAILED]
    assert [e.data["attempt"] for e in failures] == list(range(1, MAX_WAKE_TRIES + 1))
    assert failures[-1].data["retry_at"] is None and "529" in str(failures[-1].data["reason"])
    assert kinds(app, session).count("brain_woken") == MAX_WAKE_TRIES
    assert "could not be asked in 1 conversation after every retry" in (app.news.take() or "")
    clock.after(timedelta(days=1))
    assert clocked(app_with(KEY), clock).wake([session]) == []
    assert len(server.requests) == MAX_WAKE_TRIES


def test_a_retry_that_answers_ends_the_retries(server: MessagesServer, site_yaml: Path) -> None:
    from messages_server import error

    app, clock = app_with(KEY), _Clock()
    session = ended_session(app)
    server.script(error(500, "api_error", "Internal error"), message(text("Done at last.")))
    (failed,) = clocked(app, clock).wake([session])
    assert failed.outcome == "failed" and failed.retry_at is not None
    assert app_with(KEY).folds.of(session).unwoken == {"101"}
    clock.after(timedelta(minutes=1))
    (retried,) = clocked(app_with(KEY), clock).wake([session])
    assert (retried.outcome, retried.attempt, retried.detail) == ("answered", 2, "Done at last.")
    assert app_with(KEY).folds.of(session).unwoken == set()
    clock.after(timedelta(hours=1))
    assert clocked(app_with(KEY), clock).wake([session]) == []
    assert len(server.requests) == 2


def test_two_wakers_racing_for_a_retry_take_it_up_once(
    server: MessagesServer, site_yaml: Path
) -> None:
    from messages_server import error

    first, clock = app_with(KEY), _Clock()
    session = ended_session(first)
    before_failure = SessionFolds(first.store).of(session)
    server.script(error(500, "api_error", "Internal error"), message(text("Done.")))
    (failed,) = clocked(first, clock).wake([session])
    assert failed.outcome == "failed"
    second = app_with(KEY)
    stale = SessionFolds(second.store).of(session)  # read before the first retries
    clock.after(timedelta(minutes=1))
    assert [o.outcome for o in clocked(first, clock).wake([session])] == ["answered"]
    late = Waker(second.conversation, second.store, _Frozen(stale), second.news.add, clock=clock)  # type: ignore[arg-type]
    assert late.wake([session]) == []
    # a waker whose fold is from before the first failure is one try behind: refused too
    older = Waker(
        second.conversation, second.store, _Frozen(before_failure), second.news.add, clock=clock
    )  # type: ignore[arg-type]
    assert older.wake([session]) == []
    assert len(server.requests) == 2 and kinds(first, session).count("brain_woken") == 2


def test_a_wake_whose_failure_cannot_be_recorded_is_still_an_outcome(
    server: MessagesServer, site_yaml: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cycle never crashes on a wake: not even when its failure cannot be written (the
    jobs then stay taken, as after a crash, and the outcome says so)."""
    from messages_server import error

    real_append = SessionLog.append

    def full_disk(self: SessionLog, kind: EventKind, data: Any, step_id: str | None) -> Any:
        if kind is EventKind.BRAIN_FAILED:
            raise OSError(28, "No space left on device")
        return real_append(self, kind, data, step_id)

    app = app_with(KEY)
    session = ended_session(app)
    server.script(error(500, "api_error", "Internal error"))
    monkeypatch.setattr(SessionLog, "append", full_disk)
    (outcome,) = waker(app).wake([session])
    assert outcome.outcome == "failed" and "not tried again" in outcome.detail
    assert outcome.retry_at is None


# --- on the lab cluster: transcode in chunks, joined while nobody watches ---------------------


def _probe(path: Path) -> float:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout)


@lab
def test_transcode_in_chunks_then_the_woken_brain_joins_them(
    server: MessagesServer,
    user_site: Callable[[str], None],
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    user_site(f"model:\n  base_url: '{server.url}'\n  max_retries: 0\n")
    subprocess.run(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i",
         "testsrc=duration=6:size=160x120:rate=25", "-c:v", "libx264", "clip.mp4"],
        check=True, cwd=workdir,
    )  # fmt: skip
    source = _probe(workdir / "clip.mp4")
    chunks = {
        "template": "ffmpeg_chunks",
        "params": {
            "input": "clip.mp4",
            "output_dir": "chunks",
            "duration_s": source,
            "chunk_seconds": 2,
            "preset": "ultrafast",
            "audio": "none",
        },
        "log_dir": str(workdir),
    }
    join = {
        "template": "ffmpeg_concat",
        "params": {"chunk_dir": "chunks", "chunks": 3, "output": "clip-joined.mkv"},
        "log_dir": str(workdir),
    }
    server.script(
        message(text("Submitting 3 chunks."), tool_use("submit", {"job": chunks})),
        message(text("The chunks are running; I will join them when they end.")),
        # woken when the chunks' array ends: the join
        message(text("All chunks done; joining."), tool_use("submit", {"job": join})),
        message(text("The join is submitted.")),
        # woken when the join ends
        message(text("clip-joined.mkv is ready.")),
    )
    asked = js("ask", "transcode clip.mp4 in 3 chunks and join them", "--json")
    assert asked.exit_code == 0, asked.output
    doc = json.loads(asked.stdout)
    session, (array,) = doc["session_id"], [s["summary"]["job_id"] for s in doc["steps"]]

    waited = js("wait", array, "--timeout", "300", "--json")
    assert waited.exit_code == 0, waited.output
    (woken,) = watch_until_woken()
    assert (woken["session_id"], woken["job_ids"], woken["outcome"]) == (
        session,
        [array],
        "answered",
    )
    (concat,) = woken["submitted"]
    assert js("wait", concat, "--timeout", "300").exit_code == 0
    assert abs(_probe(workdir / "clip-joined.mkv") - source) < 0.5

    (last,) = watch_until_woken()
    assert (last["job_ids"], last["detail"]) == ([concat], "clip-joined.mkv is ready.")
    assert json.loads(js("watch", "--once", "--json").stdout)["woken"] == []
    assert len(server.requests) == 5
    # the woken turn saw the array's end as data; the session tells the whole story
    woke = content_text(server.requests[2].body["messages"][0])
    assert unwrap(woke.split("The jobs that ended:\n", 1)[1]) == [
        {"job_id": array, "state": "COMPLETED"}
    ]
    story = [e["kind"] for e in events(session)]
    assert story.count("brain_woken") == 2 and story.count("result") == 2


def watch_until_woken() -> list[dict[str, Any]]:
    """Watcher cycles until one wakes a brain (the job's end may need one more poll)."""
    import time

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        cycle = json.loads(js("watch", "--once", "--json").stdout)
        if cycle["woken"]:
            return list(cycle["woken"])
        time.sleep(1)
    raise AssertionError("no watcher cycle woke the brain within 120 s")


def test_a_waker_takes_up_a_few_conversations_at_a_time_oldest_first(
    server: MessagesServer, site_yaml: Path
) -> None:
    """An open chat woke 11 older ask sessions at once on opening (issue 23): a call takes
    up at most MAX_WAKES_PER_CALL, oldest first, and the next calls the rest."""
    from jobsmith.agent.brains.waking import MAX_WAKES_PER_CALL

    app = app_with(KEY)
    sessions = [ended_session(app, job=str(200 + i)) for i in range(MAX_WAKES_PER_CALL + 2)]
    server.script(*[message(text(f"answer {i}")) for i in range(len(sessions))])
    first = waker(app).wake(sessions)
    assert [o.session_id for o in first] == sorted(sessions)[:MAX_WAKES_PER_CALL]
    assert len(server.requests) == MAX_WAKES_PER_CALL
    rest = waker(app_with(KEY)).wake(sessions)
    assert [o.session_id for o in rest] == sorted(sessions)[MAX_WAKES_PER_CALL:]
    assert waker(app_with(KEY)).wake(sessions) == []


@lab
def test_a_watcher_cycle_whose_wake_fails_ends_well_and_asks_again_only_after_the_backoff(
    server: MessagesServer,
    model_yaml: str,
    user_site: Callable[[str], None],
    workdir: Path,
) -> None:
    """Issue 23: a failed wake is an outcome of the cycle (exit 0, `woken` says when it is
    tried again), and the next cycle, within the backoff, does not call the model."""
    from messages_server import error
    from test_ask import _submit_call

    user_site(model_yaml)
    server.script(
        message(text("Submitting."), tool_use("submit", _submit_call(workdir, "true"))),
        message(text("Submitted; I will look when it ends.")),
        error(529, "overloaded_error", "Overloaded"),
    )
    asked = js("ask", "run true, then tell me", "--json")
    assert asked.exit_code == 0, asked.output
    doc = json.loads(asked.stdout)
    session, (job,) = doc["session_id"], [s["summary"]["job_id"] for s in doc["steps"]]
    assert js("wait", job, "--timeout", "120").exit_code == 0
    (woken,) = watch_until_woken()
    assert (woken["session_id"], woken["outcome"], woken["attempt"]) == (session, "failed", 1)
    assert woken["retry_at"] is not None and "529" in woken["detail"]
    again = js("watch", "--once", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["woken"] == []  # not before a minute has passed
    assert len(server.requests) == 3
    assert [e["kind"] for e in events(session)][-2:] == ["brain_woken", "brain_failed"]
