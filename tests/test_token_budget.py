"""Model token budgets (issue 9, section 1): what a model brain's calls cost is folded per
session, and the policy's per-session and per-day budgets are checked from the folds
before the model is asked; over budget the rules still decide what they can, and the
rest is held for a person with the budget named.

No Slurm: the real executor, store and ledger run on the scheduler double
(tests/scheduler_double.py), and the Claude brain talks through the real anthropic SDK
to the loopback Messages API server (tests/messages_server.py), which records every
request it receives.
"""

from __future__ import annotations

import secrets
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from messages_server import MessagesServer, message, tool_use, usage
from pydantic import ValidationError
from scheduler_double import MIB, AgentHarness

from jobsmith.adapters.states import JobState
from jobsmith.agent.brains.claude import ClaudeBrain
from jobsmith.agent.brains.deciding import decide_failure
from jobsmith.agent.brains.protocol import ModelBrain, TokenUsage
from jobsmith.agent.brains.rules import RuleBrain
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.jobstate import StateChange
from jobsmith.agent.runtime.session.payloads import UsagePayload
from jobsmith.agent.runtime.session.readmodel import (
    SessionFold,
    SessionFolds,
    TokenTotals,
    fold_events,
)
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.site_config.model import Budgets, ModelSettings

KEY = "sk-ant-test-" + secrets.token_hex(16)
FIXTURE = Path(__file__).parent / "fixtures" / "sessions"
FIXTURE_SESSION = "20261130T153454.647Z-ff20b4307244"


def harness(tmp_path: Path, **budgets: int) -> AgentHarness:
    """The harness, with model token budgets (and room for the submissions)."""
    return AgentHarness.build(tmp_path, {"budgets": {"submissions_per_hour": 100, **budgets}})


def claude(server: MessagesServer, tmp_path: Path) -> ClaudeBrain:
    settings = ModelSettings(base_url=server.url, max_retries=0)
    return ClaudeBrain(settings, environ={"ANTHROPIC_API_KEY": KEY}, key_file=tmp_path / "no-key")


def hold_costing(input_tokens: int, output_tokens: int, read: int = 0, write: int = 0) -> Any:
    """A reply that holds the job, with the usage the API reports for it."""
    spent = usage(input_tokens, output_tokens, cache_read=read, cache_creation=write)
    return message(tool_use("hold", {"reason": "a person should look"}), tokens=spent)


def submit(h: AgentHarness, session: str, mem_mb: int = 500) -> str:
    job = JobRequest(template="command", params={"command": "make"}, mem_mb=mem_mb)
    return str(h.executor.run(session, st.Submit(job=job)).summary["job_id"])


def fail(h: AgentHarness, brain: ClaudeBrain, session: str, *, oom: bool = False) -> dict[str, Any]:
    """A new job of session fails (a non-zero exit the rules cannot fix, or out of memory);
    what the runner decided about it."""
    job = submit(h, session)
    if oom:
        rss = 500 * MIB
        state = JobState.OUT_OF_MEMORY
        status = h.slurm.set_state(job, state, req_mem_bytes=rss, max_rss_bytes=rss)
    else:
        state = JobState.FAILED
        status = h.slurm.set_state(job, state, exit_code=3)
    change = StateChange(session_id=session, job_id=job, state=state, previous=JobState.RUNNING)
    decided = decide_failure(brain, h.executor, lambda j: [], change, status)
    assert decided is not None
    return decided


def decision_events(h: AgentHarness, session: str) -> list[Event]:
    return [e for e in h.store.read(session) if e.kind is EventKind.DECISION]


# --- the fold counts what the model cost --------------------------------------------------


def test_usage_accumulates_in_the_fold_across_decisions(
    server: MessagesServer, tmp_path: Path
) -> None:
    h = harness(tmp_path)
    brain = claude(server, tmp_path)
    session = h.store.create()
    server.script(hold_costing(100, 20, read=1000, write=30), hold_costing(200, 40, read=1500))
    first, second = fail(h, brain, session), fail(h, brain, session)
    assert (first["action"], second["action"]) == ("hold", "hold")
    assert len(server.requests) == 2
    fold = SessionFolds(h.store).of(session)
    assert fold.tokens == TokenTotals(
        calls=2,
        input_tokens=300,
        output_tokens=60,
        cache_read_input_tokens=2500,
        cache_creation_input_tokens=30,
        charged=150 + 240,  # cache reads are not counted
    )
    assert [t.tokens for t in fold.token_spending] == [150, 240]
    assert [t.at for t in fold.token_spending] == [e.at for e in decision_events(h, session)]


# --- over budget the model is not asked -------------------------------------------------------


def test_over_the_session_budget_no_request_is_made_and_the_job_is_held(
    server: MessagesServer, tmp_path: Path
) -> None:
    h = harness(tmp_path, model_tokens_per_session=300)
    brain = claude(server, tmp_path)
    session, other = h.store.create(), h.store.create()
    server.script(hold_costing(240, 60), hold_costing(10, 5))
    assert fail(h, brain, session)["usage"]["input_tokens"] == 240  # 0 used: asked
    assert len(server.requests) == 1
    held = fail(h, brain, session)
    assert len(server.requests) == 1  # the server received nothing more
    # reached at its limit: the next call's cost is unknown, so none is made
    reason = "model token budget per session (300) reached: 300 used in this session"
    assert held["reason"] == reason + "; left to a person"
    assert (held["brain"], held["action"], held["verdicts"]) == ("claude", "hold", ["nonzero_exit"])
    assert "usage" not in held and "new_job_id" not in held
    recorded = decision_events(h, session)[-1].data
    assert (recorded["action"], recorded["steps"]) == ("hold", [])
    assert recorded["reason"] == held["reason"]
    # the budget is the session's: another session's failure is still asked about
    assert fail(h, brain, other)["usage"]["input_tokens"] == 10
    assert len(server.requests) == 2


def test_the_day_budget_counts_every_session_active_in_the_last_day(
    server: MessagesServer, tmp_path: Path
) -> None:
    h = harness(tmp_path, model_tokens_per_day=500)
    brain = claude(server, tmp_path)
    first, second, third = h.store.create(), h.store.create(), h.store.create()
    server.script(hold_costing(200, 100), hold_costing(200, 50), hold_costing(1, 1))
    fail(h, brain, first)
    fail(h, brain, second)
    h.clock.advance(hours=23)
    held = fail(h, brain, third)  # the third session has spent nothing itself
    assert len(server.requests) == 2
    assert held["action"] == "hold"
    assert held["reason"] == (
        "model token budget per day (500) reached: 550 used in the last 24 h; left to a person"
    )
    # a day after those calls they no longer count, and the model is asked again
    h.clock.advance(hours=2)
    assert fail(h, brain, third)["reason"] == "a person should look"
    assert len(server.requests) == 3


def test_a_session_quiet_for_days_still_counts_its_own_tokens(
    server: MessagesServer, tmp_path: Path
) -> None:
    # the day's window holds only other sessions: the failed job's own session, quiet since
    # its model call two days ago, is read for its session budget all the same
    h = harness(tmp_path, model_tokens_per_session=300)
    brain = claude(server, tmp_path)
    session = h.store.create()
    server.script(hold_costing(250, 50), hold_costing(1, 1))
    fail(h, brain, session)
    job = submit(h, session)  # a long job: nothing recorded while it runs
    h.clock.advance(days=2)
    h.store.create()  # another session active today
    status = h.slurm.set_state(job, JobState.FAILED, exit_code=3)
    change = StateChange(
        session_id=session, job_id=job, state=JobState.FAILED, previous=JobState.RUNNING
    )
    held = decide_failure(brain, h.executor, lambda j: [], change, status)
    assert held is not None and len(server.requests) == 1
    assert held["reason"] == (
        "model token budget per session (300) reached: 300 used in this session; left to a person"
    )


def test_an_out_of_memory_failure_over_budget_is_still_rerun_by_the_rules(
    server: MessagesServer, tmp_path: Path
) -> None:
    h = harness(tmp_path, model_tokens_per_session=0)  # 0: the model is never asked
    brain = claude(server, tmp_path)
    session = h.store.create()
    rerun = fail(h, brain, session, oom=True)
    assert (rerun["brain"], rerun["action"], rerun["outcome"]) == ("rules", "rerun", "done")
    assert h.slurm.options[rerun["new_job_id"]].mem_mb == 1000  # twice the memory, submitted
    # what the rules cannot fix is held, so the budget was in force all along
    held = fail(h, brain, session)
    assert held["reason"].startswith("model token budget per session (0) reached: 0 used")
    assert server.requests == []


def test_the_fold_kept_on_disk_equals_a_rebuild(server: MessagesServer, tmp_path: Path) -> None:
    h = harness(tmp_path, model_tokens_per_day=10_000)
    kept = tmp_path / "folds"
    h.executor.judge.folds = SessionFolds(h.store, kept)  # as the app wires it: folds on disk
    brain = claude(server, tmp_path)
    session, other = h.store.create(), h.store.create()
    server.script(hold_costing(100, 10, write=5), hold_costing(70, 7, read=900), hold_costing(3, 3))
    fail(h, brain, session)
    fail(h, brain, other)
    h.clock.advance(hours=5)
    fail(h, brain, session)
    assert (kept / f"{session}.json").is_file()
    for sid in (session, other):
        # a later process: the kept fold, brought up to date, is what the whole log says
        later = SessionFolds(h.store, kept).of(sid)
        rebuilt = fold_events(h.store.read(sid))
        assert later.model_dump() == rebuilt.model_dump()
    assert SessionFolds(h.store, kept).of(session).tokens.charged == 115 + 6


# --- old logs, damaged usage, and the protocol -----------------------------------------------

_T0 = datetime(2026, 6, 1, tzinfo=UTC)

_usage = hs.fixed_dictionaries(
    {
        "model": hs.just("claude-x"),
        "input_tokens": hs.integers(0, 10_000),
        "output_tokens": hs.integers(0, 10_000),
        "cache_read_input_tokens": hs.integers(0, 10_000),
        "cache_creation_input_tokens": hs.integers(0, 10_000),
    }
)


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.one_of(hs.none(), _usage), max_size=30), hs.integers(0, 30))
def test_decisions_fold_their_usage_and_old_ones_without_it_fold_to_zero(
    usages: list[dict[str, Any] | None], cut: int
) -> None:
    events = []
    for seq, spent in enumerate(usages):
        data: dict[str, Any] = {"brain": "rules", "job_id": str(seq), "action": "report"}
        if spent is not None:
            data |= {"brain": "claude", "usage": spent}
        at = _T0 + timedelta(minutes=seq)
        events.append(Event(session_id="s", seq=seq, kind=EventKind.DECISION, at=at, data=data))
    # folded in two steps (one watcher cycle, then the next), as SessionFolds does
    fold = SessionFold(session_id="s")
    fold.fold(events[: cut % (len(events) + 1)])
    fold.fold(events[cut % (len(events) + 1) :])
    spent_only = [u for u in usages if u is not None]
    charged = [
        u["input_tokens"] + u["output_tokens"] + u["cache_creation_input_tokens"]
        for u in spent_only
    ]
    assert fold.decided == {str(n) for n in range(len(usages))}  # every decision counts
    assert fold.tokens.calls == len(spent_only)
    assert fold.tokens.charged == sum(charged)
    assert fold.tokens.cache_read_input_tokens == sum(
        u["cache_read_input_tokens"] for u in spent_only
    )
    assert [t.tokens for t in fold.token_spending] == [c for c in charged if c]
    if not spent_only:  # a log from before usage existed: no tokens at all
        assert fold.tokens == TokenTotals() and fold.token_spending == []
    assert fold.tokens_since(_T0 + timedelta(minutes=len(usages))) == 0


def test_the_log_this_release_writes_folds_to_zero_tokens(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE / FIXTURE_SESSION, tmp_path / "sessions" / FIXTURE_SESSION)
    fold = SessionFolds(FileSessionStore(tmp_path / "sessions")).of(FIXTURE_SESSION)
    assert fold.decided == {"1001"}  # its rule decision, without usage
    assert fold.tokens == TokenTotals() and fold.token_spending == []


@pytest.mark.parametrize("damaged", [{"input_tokens": -5}, "lots", {"output_tokens": [1]}])
def test_a_damaged_usage_spends_nothing_but_the_decision_still_counts(damaged: Any) -> None:
    data = {"brain": "claude", "job_id": "7", "action": "hold", "usage": damaged}
    event = Event(session_id="s", seq=0, kind=EventKind.DECISION, at=_T0, data=data)
    fold = fold_events([event])
    assert fold.decided == {"7"}  # not decided again by the next watcher
    assert fold.tokens == TokenTotals()


def test_the_folded_usage_reads_every_field_a_decision_records() -> None:
    # the lenient payload mirrors the brain's strict TokenUsage: a field added to one only
    # would be recorded and never counted
    assert set(UsagePayload.model_fields) == set(TokenUsage.model_fields)


def test_only_a_brain_that_calls_a_model_is_held_to_the_token_budgets() -> None:
    from hold_brain import HoldBrain

    assert isinstance(ClaudeBrain(environ={}), ModelBrain)
    assert not isinstance(RuleBrain(), ModelBrain)
    assert not isinstance(HoldBrain(), ModelBrain)


def test_the_budgets_are_unlimited_unless_set_and_never_negative() -> None:
    assert (Budgets().model_tokens_per_session, Budgets().model_tokens_per_day) == (None, None)
    with pytest.raises(ValidationError, match="model_tokens_per_day"):
        Budgets.model_validate({"model_tokens_per_day": -1})
    assert "cache reads" in (Budgets.model_fields["model_tokens_per_session"].description or "")
