"""Nothing in a submit waits that need not (issue 26), as behaviour on the scheduler double.

The figures are benchmarks/bench_submit_latency.py's; here: the advice's questions are
asked at once and a late one is left out (never an error); Slurm's estimates are kept for
a minute and a damaged cache is ignored; the ledger's index gives what a full read gives.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import JobStatus, TestOnlyResult
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.ledger import INDEX, JobLedger, SubmissionRecord
from jobsmith.agent.runtime.submission.advising.advice import Adviser
from jobsmith.agent.runtime.submission.advising.estimates import EstimateCache, shape_key
from jobsmith.agent.runtime.submission.request.jobs import AssembledJob, JobRequest, assemble
from jobsmith.job_templates import TemplateLibrary, shipped_library
from tests.scheduler_double import SchedulerDouble, site_config

MIB = 2**20
NOW = datetime(2026, 12, 1, 12, 0)
REQUEST = JobRequest(template="command", params={"command": "run-it"}, mem_mb=2000)


class SlowDouble(SchedulerDouble):
    """The double whose test-only and status answer only when let go (or never)."""

    def __init__(self, *, slow_test_only: bool = False, slow_status: bool = False) -> None:
        super().__init__()
        self.release = threading.Event()
        self.slow_test_only = slow_test_only
        self.slow_status = slow_status
        #: met by two test-onlys at once: proof they are asked concurrently
        self.together = threading.Barrier(2, timeout=10)

    def test_only(self, script: str) -> TestOnlyResult:
        self._call("test_only", script)
        if self.slow_test_only:
            self.release.wait(30)
        else:
            self.together.wait()
        return TestOnlyResult(ok=True, estimated_start=NOW, message="Job 1 to start")

    def status(self, job_ids: Any, since: datetime, *, terms: bool = True) -> dict[str, JobStatus]:
        if self.slow_status:
            self.release.wait(30)
        return super().status(job_ids, since, terms=terms)


def _adviser(
    tmp_path: Path,
    slurm: SchedulerDouble,
    records: list[SubmissionRecord] = (),  # type: ignore[assignment]
    *,
    deadline_s: float = 5.0,
    cache: EstimateCache | None = None,
    **policy: Any,
) -> Adviser:
    site = site_config(tmp_path, {"advice": policy} if policy else None)
    library = TemplateLibrary([shipped_library()])

    def build(request: JobRequest) -> AssembledJob:
        return assemble(
            library.get(request.template), request, site, cwd=tmp_path, header=slurm.script_header
        )

    return Adviser(
        scheduler=slurm,
        site=site,
        assemble=build,
        records=lambda: list(records),
        fixed_fields=lambda t: set(library.get(t).spec.resources.references()),
        now=lambda: NOW,
        deadline_s=deadline_s,
        estimates=cache,
        user="alice",
    )


def _record(job_id: str, template: str = "command", hours_ago: float = 1) -> SubmissionRecord:
    return SubmissionRecord(
        job_id=job_id,
        cluster="doublelab",
        template=template,
        params={"command": "run-it"},
        options=JobOptions(job_name=f"{template}.js-abc"),
        script_sha256="0" * 64,
        submitted_at=NOW - timedelta(hours=hours_ago),
    )


# --- the advice: at once, within a deadline ----------------------------------------------


def test_the_partitions_are_asked_at_once(tmp_path: Path) -> None:
    slurm = SlowDouble()  # each test-only waits for the other: one after another would hang
    advice = _adviser(tmp_path, slurm, right_size="off").advise(REQUEST)
    assert [e.partition for e in advice.partitions] == ["debug", "small"]
    assert advice.unavailable is None


def test_a_slow_test_only_gives_no_advice_not_an_error(tmp_path: Path) -> None:
    slurm = SlowDouble(slow_test_only=True)
    try:
        advice = _adviser(tmp_path, slurm, deadline_s=0.2, right_size="off").advise(REQUEST)
    finally:
        slurm.release.set()
    assert advice.partitions == () and advice.earliest is None and not advice.offers()
    assert advice.unavailable is not None and "did not answer within 0.2 s" in advice.unavailable


def test_what_answered_in_time_is_offered_and_what_did_not_is_left_out(tmp_path: Path) -> None:
    slurm = SlowDouble(slow_test_only=True)
    recs = [_record(str(i)) for i in (1, 2, 3)]
    for rec in recs:
        slurm.set_state(rec.job_id, JobState.COMPLETED, max_rss_bytes=100 * MIB, elapsed_s=30)
    try:
        advice = _adviser(tmp_path, slurm, recs, deadline_s=0.3).advise(REQUEST)
    finally:
        slurm.release.set()
    assert advice.partitions == ()  # the estimates came too late
    assert advice.sizing is not None  # the history did not
    assert advice.proposed_cost is not None and advice.proposed_start is None
    assert advice.unavailable is None


def test_a_slow_history_leaves_out_the_sizing_only(tmp_path: Path) -> None:
    slurm = SlowDouble(slow_status=True)
    recs = [_record(str(i)) for i in (1, 2, 3)]
    try:
        advice = _adviser(tmp_path, slurm, recs, deadline_s=0.3).advise(REQUEST)
    finally:
        slurm.release.set()
    assert advice.sizing is None
    assert [e.partition for e in advice.partitions] == ["debug", "small"]


class HistoryFirstDouble(SchedulerDouble):
    """The double that says when the history's accounting call was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.history_asked = threading.Event()

    def usage(self, job_ids: Any, since: datetime) -> dict[str, JobStatus]:
        self.history_asked.set()
        return super().usage(job_ids, since)


def test_the_history_is_asked_while_the_job_is_assembled_for_each_partition(
    tmp_path: Path,
) -> None:
    slurm = HistoryFirstDouble()
    recs = [_record(str(i)) for i in (1, 2, 3)]
    adviser = _adviser(tmp_path, slurm, recs)
    build, seen = adviser._assemble, []

    def assemble_for_a_partition(request: JobRequest) -> AssembledJob:
        if request.partition is not None:  # the job as it would go to one partition
            seen.append(slurm.history_asked.wait(5))
        return build(request)

    adviser._assemble = assemble_for_a_partition
    advice = adviser.advise(REQUEST)
    assert seen and all(seen)  # the accounting call was under way before each render
    assert [e.partition for e in advice.partitions] == ["debug", "small"]


def test_the_history_comes_from_the_ledgers_newest_records(tmp_path: Path) -> None:
    ledger = JobLedger(tmp_path / "jobs")
    for i in range(1, 8):
        ledger.record(_record(str(i), hours_ago=i))
    ledger.record(_record("99", template="other", hours_ago=0.5))
    slurm = SchedulerDouble()
    adviser = _adviser(tmp_path, slurm, history_jobs=3, earliest_start="off")
    adviser._newest = ledger.newest
    adviser.advise(REQUEST)
    (asked,) = [args for name, args in slurm.calls if name == "status"]
    assert asked[0] == ("1", "2", "3")  # the template's three newest, newest first


# --- the estimates, kept a minute ----------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_an_estimate_is_reused_within_its_lifetime_and_asked_again_after(tmp_path: Path) -> None:
    clock = Clock()
    cache = EstimateCache(tmp_path / "state" / "start-estimates.json", now=clock)
    slurm = SlowDouble()
    _adviser(tmp_path, slurm, cache=cache, right_size="off").advise(REQUEST)
    assert slurm.count("test_only") == 2
    clock.now += timedelta(seconds=59)
    again = _adviser(tmp_path, slurm, cache=cache, right_size="off").advise(REQUEST)
    assert slurm.count("test_only") == 2  # both partitions' estimates from the cache
    assert [e.partition for e in again.partitions] == ["debug", "small"]
    clock.now += timedelta(seconds=2)
    _adviser(tmp_path, slurm, cache=cache, right_size="off").advise(REQUEST)
    assert slurm.count("test_only") == 4


def test_another_shape_or_user_is_another_question() -> None:
    small = JobOptions(job_name="a.js-1", partition="debug", mem_mb=100)
    assert shape_key("alice", small) == shape_key(
        "alice", small.model_copy(update={"job_name": "b"})
    )
    assert shape_key("alice", small) != shape_key("alice", small.model_copy(update={"mem_mb": 200}))
    assert shape_key("alice", small) != shape_key("bob", small)


def test_a_corrupt_cache_is_ignored_and_replaced(tmp_path: Path) -> None:
    path = tmp_path / "start-estimates.json"
    cache = EstimateCache(path)
    for junk in (b"\x00not json", b"[1, 2]", b'{"version": 1, "estimates": {"k": 3}}'):
        path.write_bytes(junk)
        assert cache.get("k") is None
    slurm = SlowDouble()
    advice = _adviser(tmp_path, slurm, cache=cache, right_size="off").advise(REQUEST)
    assert slurm.count("test_only") == 2 and len(advice.partitions) == 2
    assert json.loads(path.read_text())["version"] == 1  # replaced by a sound one
    key = next(iter(json.loads(path.read_text())["estimates"]))
    assert cache.get(key) is not None


def test_a_refusal_is_not_kept(tmp_path: Path) -> None:
    cache = EstimateCache(tmp_path / "e.json")
    cache.put("k", TestOnlyResult(ok=False, message="Requested node configuration"))
    assert cache.get("k") is None and not (tmp_path / "e.json").exists()


# --- the ledger's index --------------------------------------------------------------------

records_st = st.lists(
    st.tuples(st.sampled_from(["command", "file_array", "x"]), st.integers(0, 10_000)),
    min_size=0,
    max_size=25,
    unique_by=lambda t: t[1],  # distinct times: the order of equal times is not defined
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    recs=records_st,
    unindexed=st.sets(st.integers(0, 24)),
    deleted=st.sets(st.integers(0, 24)),
    index=st.sampled_from(["kept", "missing", "corrupt", "stale", "sessionless"]),
    limit=st.integers(0, 6),
    days=st.integers(0, 8),
)
def test_the_index_answers_as_reading_every_record(
    tmp_path_factory: Any,
    recs: list[tuple[str, int]],
    unindexed: set[int],
    deleted: set[int],
    index: str,
    limit: int,
    days: int,
) -> None:
    folder = tmp_path_factory.mktemp("ledger")
    ledger = JobLedger(folder)
    now = datetime.now().replace(microsecond=0)
    made = []
    for i, (template, minutes) in enumerate(recs):
        rec = SubmissionRecord(
            job_id=str(1000 + i),
            cluster="c",
            template=template,
            params={},
            options=JobOptions(job_name=f"{template}.js-{i}"),
            script_sha256="0" * 64,
            submitted_at=now - timedelta(minutes=minutes * 2),
            session_id=None if i % 3 == 0 else f"s{i % 2}",
        )
        made.append(rec)
        if i in unindexed:  # as an older jobsmith wrote it: no line in the index
            (folder / f"{rec.job_id}.json").write_text(rec.model_dump_json())
        else:
            ledger.record(rec)
    for i in deleted & set(range(len(made))):
        (folder / f"{made[i].job_id}.json").unlink()
    (folder / "1500.json").write_text("{damaged")  # not a record: skipped by both
    if index == "missing":
        (folder / INDEX).unlink(missing_ok=True)
    elif index == "corrupt":
        (folder / INDEX).write_bytes(b'\xff{"j": 1}\nnot json\n{"j": "1000", "t": 3}\n')
    elif index == "stale":
        with (folder / INDEX).open("a") as fh:
            line = {"j": "4242", "t": "command", "s": "s1", "at": now.isoformat()}
            fh.write(json.dumps(line) + "\n")
    elif index == "sessionless":  # as the index was before it named sessions
        path = folder / INDEX
        old = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        path.write_text(
            "".join(json.dumps({"j": o["j"], "t": o["t"], "at": o["at"]}) + "\n" for o in old)
        )
    everything = ledger.all()
    sessions = [(r.job_id, r.session_id) for r in everything]
    assert [(e.job_id, e.session_id) for e in ledger.entries()] == sessions
    assert [(e.job_id, e.session_id) for e in ledger.entries()] == sessions  # repaired
    for template in ("command", "file_array", "x", "none"):
        expected = [r for r in reversed(everything) if r.template == template][:limit]
        assert ledger.newest(template, limit) == expected
    floor = now - timedelta(days=days, hours=days * 2)
    assert ledger.since(floor) == [r for r in everything if r.submitted_at >= floor]
    # and again, now that reading has repaired the index
    assert ledger.since(floor) == [r for r in everything if r.submitted_at >= floor]


def test_an_index_mostly_of_old_lines_is_rewritten(tmp_path: Path) -> None:
    ledger = JobLedger(tmp_path)
    for _ in range(100):  # the same job recorded again and again: one line each
        ledger.record(_record("7"))
    assert len((tmp_path / INDEX).read_text().splitlines()) == 100
    assert [r.job_id for r in ledger.newest("command", 5)] == ["7"]
    assert len((tmp_path / INDEX).read_text().splitlines()) == 1
