"""Parsing Slurm's output, tested on real captured output of Slurm 22.05.8 and 24.11.5.

fixtures/slurm-22.05 and fixtures/slurm-24.11 are the shared captures (see
fixtures/README.md): the same seven jobs on both versions, as sacct -P, sacct --json,
squeue --json and default squeue text.

fixtures/lab-22.05/sacct-fields* were captured for this module on the project's lab
cluster (Slurm 22.05.8, TZ=UTC), as root, with jobsmith's own command lines:
  sacct -P --delimiter=<\\x1f> --noconvert -S .. -E now -j 18,19,20,21
        --format=<SACCT_FIELDS>      sacct-fields.txt, sacct-fields-running.txt
  (the same with '|': sacct-fields-pipe.txt)   sacct --json -j ..: sacct-fields*.json
for jobs: 18 'psq-held' (held, --comment 'jobsmith:tag=p1|x y', -o %x_%j.out),
19 'psq|pipe name' (held, default output file, then scancel'ed), 20 'psq-arr'
(--array=0-3%1, held then released, -o/-e %x_%A_%a) and 21 'psq-dep'
(--dependency=afterok:18). '*-running' was taken while the array ran.

fixtures/lab-22.05/squeue-format* were captured again when exit_code joined SQUEUE_FIELDS
(same cluster, see that folder's README.md), as alice from /tmp/psq, with
SLURM_TIME_FORMAT=standard SLURM_BITSTR_LEN=0 as jobsmith sets them:
  squeue --noheader --me -t all --Format=<SQUEUE_FORMAT>     squeue-format.txt (\\x1f),
                                                              squeue-format-running.txt
  squeue --noheader --me -t all --Format=<squeue_format('|')> squeue-format-pipe.txt
  squeue --me -t all --json          squeue-format-held.json, squeue-format-running.json
for the same kinds of jobs: 202 'psq-held', 203 'psq|pipe name', 204 'psq-arr' and 205
'psq-dep' (--dependency=afterok:202), plus 206 'psq-exit3' (`exit 3`: FAILED, sacct 3:0)
and 207 'psq-kill' (`kill -KILL $$`: FAILED, sacct 0:9), captured under 1 s (held) and
8 s ('-running', while task 2 ran) after those two ended. alice's jobs from other sessions
(64, 155, 156, 192_*, 209-213) were queued too and are in the captures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from json import dumps, loads
from pathlib import Path

import pytest

from jobsmith.adapters.records import JobRecord, QueueRecord
from jobsmith.adapters.slurm.commands.argv import DELIMITER
from jobsmith.adapters.slurm.parsing.parse import (
    SACCT_FIELDS,
    SQUEUE_FIELDS,
    SQUEUE_FORMAT,
    parse_exit_code,
    parse_sacct_json,
    parse_sacct_parsable,
    parse_squeue,
    parse_squeue_json,
    parse_time,
    squeue_format,
)
from jobsmith.adapters.states import JobState
from jobsmith.units import parse_printed_duration, parse_printed_memory

FIXTURES = Path(__file__).parent / "fixtures"
LAB = FIXTURES / "lab-22.05"
MIB = 1024**2


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Capture:
    """The shared captures of one Slurm version and the job ids they hold."""

    version: str
    ok: str
    oom: str
    arr: str
    timeout: str
    nocmd: str
    cancelled: str
    dep: str
    arr_raw: tuple[str, str, str, str]  # raw id of tasks 0..3
    oom_rss: int  # MaxRSS of the oom batch step, bytes
    timeout_rss: int
    timeout_elapsed: int
    work_dir: str
    first_start: datetime  # start of 'ok'

    @property
    def dir(self) -> Path:
        return FIXTURES / f"slurm-{self.version}"

    def parsable(self, tz: timezone | None = None) -> dict[str, JobRecord]:
        records = parse_sacct_parsable(read(self.dir / "sacct-parsable.txt"), tz=tz)
        return {r.job_id: r for r in records}

    def json(self) -> dict[str, JobRecord]:
        return {r.job_id: r for r in parse_sacct_json(read(self.dir / "sacct.json"))}

    def task(self, i: int) -> str:
        return f"{self.arr}_{i}"


V2205 = Capture(
    version="22.05",
    ok="331",
    oom="332",
    arr="333",
    timeout="334",
    nocmd="335",
    cancelled="336",
    dep="337",
    arr_raw=("346", "347", "348", "333"),
    oom_rss=424416 * 1024,  # '424416K' on the batch step
    timeout_rss=3136 * 1024,
    timeout_elapsed=64,
    work_dir="/home/alice/project",
    first_start=datetime(2026, 11, 29, 8, 19, 49),
)
V2411 = Capture(
    version="24.11",
    ok="4",
    oom="5",
    arr="6",
    timeout="7",
    nocmd="8",
    cancelled="9",
    dep="10",
    arr_raw=("11", "12", "13", "6"),
    oom_rss=419824 * 1024,
    timeout_rss=3488 * 1024,
    timeout_elapsed=76,
    work_dir="/",
    first_start=datetime(2026, 11, 29, 8, 19, 39),
)
CAPTURES = [pytest.param(V2205, id="22.05"), pytest.param(V2411, id="24.11")]


# --- small values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("424416K", 434601984),
        ("500M", 500 * MIB),
        ("4G", 4 * 1024**3),
        ("1.50G", 1536 * MIB),
        ("500Mn", 500 * MIB),  # pre-21.08 ReqMem per node
        ("500Mc", 500 * MIB),  # ... and per CPU: the per-CPU amount
        ("3342336", 3342336),  # MaxRSS under --noconvert: bytes
        ("0", 0),
        ("", None),
        (None, None),
        ("16?", None),
        ("K", None),
    ],
)
def test_parse_mem(text: str | None, expected: int | None) -> None:
    assert parse_printed_memory(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("00:01:04", 64),
        ("00:01:16", 76),
        ("1-02:03:04", 93784),
        ("2-00:00:00", 172800),
        ("05:00", 300),  # minutes:seconds
        ("30:00", 1800),
        ("4:00:00", 14400),
        ("1-00", 86400),  # days-hours
        ("1-02:30", 95400),  # days-hours:minutes
        ("10", 600),  # a bare number is minutes, as in Slurm's time syntax
        ("00:00.003", 0),  # TotalCPU 'MM:SS.mmm'
        ("01:02.600", 63),
        ("UNLIMITED", None),
        ("Partition_Limit", None),
        ("INVALID", None),
        ("NOT_SET", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_duration(text: str | None, expected: int | None) -> None:
    assert parse_printed_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0:9", (0, 9)),
        ("127:0", (127, 0)),
        ("1:0", (1, 0)),
        ("0:15", (0, 15)),
        ("0:0", (0, 0)),
        ("", (None, None)),
        (None, (None, None)),
        ("9", (None, None)),
    ],
)
def test_parse_exit_code(text: str | None, expected: tuple[int | None, int | None]) -> None:
    assert parse_exit_code(text) == expected


def test_parse_time() -> None:
    assert parse_time("2026-11-29T08:19:49") == datetime(2026, 11, 29, 8, 19, 49)
    assert parse_time("2026-11-29T08:19:49").tzinfo is None  # type: ignore[union-attr]
    cet = timezone(timedelta(hours=1))
    assert parse_time("2026-11-29T08:19:49", cet) == datetime(2026, 11, 29, 7, 19, 49, tzinfo=UTC)
    # SLURM_TIME_FORMAT=%s: epoch seconds, unambiguous
    assert parse_time("1795940389") == datetime(2026, 11, 29, 8, 19, 49, tzinfo=UTC)
    for absent in ("None", "Unknown", "N/A", "", None, "Ystday 12:00", "0"):
        assert parse_time(absent) is None, absent


# --- sacct -P, the shared captures ------------------------------------------------------------


@pytest.mark.parametrize("cap", CAPTURES)
def test_sacct_parsable_every_job_and_task_once(cap: Capture) -> None:
    jobs = cap.parsable()
    expected = {cap.ok, cap.oom, cap.timeout, cap.nocmd, cap.cancelled, cap.dep}
    expected |= {cap.task(i) for i in range(4)}
    assert set(jobs) == expected  # no step row became a job of its own
    assert all(r.name != "batch" for r in jobs.values())


@pytest.mark.parametrize("cap", CAPTURES)
def test_sacct_parsable_completed(cap: Capture) -> None:
    ok = cap.parsable()[cap.ok]
    assert ok.name == "ok"
    assert ok.job_id_raw == cap.ok
    assert ok.array_job_id is None and ok.array_task_id is None
    assert (ok.state, ok.exit_code, ok.signal, ok.derived_exit_code) == (
        JobState.COMPLETED,
        0,
        0,
        0,
    )
    assert ok.cancelled_by is None
    assert ok.timelimit_s is None  # UNLIMITED
    assert ok.elapsed_s == 0
    assert ok.req_mem_bytes == 500 * MIB
    assert ok.alloc_cpus == 1
    assert ok.node_list == "vm"
    assert ok.reason is None  # sacct prints 'None'
    assert ok.comment is None  # not stored without AccountingStoreFlags=job_comment
    assert ok.work_dir == cap.work_dir
    assert ok.start_time == cap.first_start
    assert ok.end_time == cap.first_start
    assert [(s.step, s.state, s.exit_code) for s in ok.steps] == [("batch", JobState.COMPLETED, 0)]
    assert ok.max_rss_bytes is None  # the batch step of a 0 s job has no sample


@pytest.mark.parametrize("cap", CAPTURES)
def test_sacct_parsable_killed_for_memory(cap: Capture) -> None:
    oom = cap.parsable()[cap.oom]
    assert oom.state is JobState.FAILED
    assert (oom.exit_code, oom.signal) == (0, 9)
    assert oom.cancelled_by is None  # the job FAILED; its batch step was cancelled
    assert oom.req_mem_bytes == 50 * MIB
    assert oom.elapsed_s == 2
    (batch,) = oom.steps
    assert batch.step == "batch"
    assert batch.state is JobState.CANCELLED
    assert batch.cancelled_by == "0"
    assert (batch.exit_code, batch.signal) == (0, 9)
    assert batch.max_rss_bytes == cap.oom_rss
    # MaxRSS is only on the step row: the job's is folded up from it
    assert oom.max_rss_bytes == cap.oom_rss
    assert oom.max_rss_bytes > oom.req_mem_bytes


def test_sacct_parsable_oom_rss_bytes_22_05() -> None:
    assert V2205.parsable()["332"].max_rss_bytes == 434601984


@pytest.mark.parametrize("cap", CAPTURES)
def test_sacct_parsable_array(cap: Capture) -> None:
    jobs = cap.parsable()
    for i in range(4):
        task = jobs[cap.task(i)]
        assert task.array_job_id == cap.arr
        assert task.array_task_id == i
        assert task.array_task_range is None
        assert task.job_id_raw == cap.arr_raw[i]
        assert task.name == "arr"
        assert [s.step for s in task.steps] == ["batch"]
        if i == 2:
            assert (task.state, task.exit_code, task.signal) == (JobState.FAILED, 1, 0)
            assert task.steps[0].state is JobState.FAILED
        else:
            assert (task.state, task.exit_code, task.signal) == (JobState.COMPLETED, 0, 0)


@pytest.mark.parametrize("cap", CAPTURES)
def test_sacct_parsable_timeout(cap: Capture) -> None:
    job = cap.parsable()[cap.timeout]
    assert job.state is JobState.TIMEOUT
    assert job.timelimit_s == 60
    assert job.elapsed_s == cap.timeout_elapsed
    assert job.elapsed_s > job.timelimit_s
    assert (job.exit_code, job.signal) == (0, 0)
    (batch,) = job.steps
    assert (batch.state, batch.cancelled_by) == (JobState.CANCELLED, None)
    assert (batch.exit_code, batch.signal) == (0, 15)
    assert job.max_rss_bytes == batch.max_rss_bytes == cap.timeout_rss


@pytest.mark.parametrize("cap", CAPTURES)
def test_sacct_parsable_command_not_found(cap: Capture) -> None:
    job = cap.parsable()[cap.nocmd]
    assert (job.state, job.exit_code, job.signal) == (JobState.FAILED, 127, 0)
    assert job.steps[0].exit_code == 127


@pytest.mark.parametrize("cap", CAPTURES)
def test_sacct_parsable_cancelled_before_start(cap: Capture) -> None:
    job = cap.parsable()[cap.cancelled]
    assert job.state is JobState.CANCELLED
    assert job.cancelled_by == "0"
    assert job.steps == ()
    assert job.node_list is None  # 'None assigned'
    assert job.timelimit_s is None  # 'Partition_Limit'
    assert job.start_time is None  # 'None'
    assert job.end_time is not None


@pytest.mark.parametrize("cap", CAPTURES)
def test_sacct_parsable_dependency_pending(cap: Capture) -> None:
    job = cap.parsable()[cap.dep]
    assert job.state is JobState.PENDING
    assert job.state.is_active
    assert job.reason is None  # only squeue says DependencyNeverSatisfied
    assert job.start_time is None and job.end_time is None  # 'Unknown'
    assert job.node_list is None
    assert job.steps == ()


# --- sacct --json, both shapes ----------------------------------------------------------------


@pytest.mark.parametrize("cap", CAPTURES)
def test_sacct_json_outcomes(cap: Capture) -> None:
    jobs = cap.json()
    assert len(jobs) == 10
    oom = jobs[cap.oom]
    assert (oom.state, oom.exit_code, oom.signal) == (JobState.FAILED, 0, 9)
    assert oom.max_rss_bytes == cap.oom_rss
    assert oom.steps[0].state is JobState.CANCELLED
    assert oom.steps[0].cancelled_by_user == "root"  # the JSON names the user, not the uid
    assert oom.steps[0].signal == 9
    assert jobs[cap.timeout].timelimit_s == 60  # the JSON gives minutes
    assert jobs[cap.timeout].steps[0].signal == 15
    assert jobs[cap.timeout].steps[0].cancelled_by_user is None
    assert jobs[cap.cancelled].state is JobState.CANCELLED
    assert jobs[cap.cancelled].cancelled_by_user == "root"
    assert jobs[cap.cancelled].start_time is None  # 22.05: null, 24.11: 4294967294
    assert jobs[cap.dep].state is JobState.PENDING
    assert jobs[cap.dep].start_time is None  # 0
    task2 = jobs[cap.task(2)]
    assert (task2.state, task2.array_job_id, task2.array_task_id) == (JobState.FAILED, cap.arr, 2)
    assert task2.job_id_raw == cap.arr_raw[2]
    assert jobs[cap.ok].start_time == cap.first_start.replace(tzinfo=UTC)


def test_sacct_json_24_11_exit_codes() -> None:
    jobs = V2411.json()
    assert (jobs["8"].exit_code, jobs["8"].signal) == (127, 0)
    assert (jobs["6_2"].exit_code, jobs["6_2"].signal) == (1, 0)
    assert jobs["8"].steps[0].exit_code == 127


def test_sacct_json_22_05_hides_nonzero_exit_codes() -> None:
    """v0.0.38 prints every normal exit as SUCCESS/0: unknown is said, never a false 0."""
    jobs = V2205.json()
    assert (jobs["335"].state, jobs["335"].exit_code, jobs["335"].signal) == (
        JobState.FAILED,
        None,
        0,
    )
    assert jobs["333_2"].exit_code is None
    assert jobs["335"].steps[0].exit_code is None
    assert jobs["331"].exit_code == 0  # COMPLETED proves 0
    assert (jobs["332"].exit_code, jobs["332"].signal) == (0, 9)  # SIGNALED is reported


@pytest.mark.parametrize("cap", CAPTURES)
def test_sacct_both_formats_agree(cap: Capture) -> None:
    """The same jobs through sacct -P and sacct --json give the same important fields."""
    parsable = cap.parsable(tz=UTC)  # the lab clusters ran in UTC
    json = cap.json()
    assert set(parsable) == set(json)
    unknown_exit = set()
    for job_id, p in parsable.items():
        j = json[job_id]
        assert (j.job_id_raw, j.array_job_id, j.array_task_id) == (
            p.job_id_raw,
            p.array_job_id,
            p.array_task_id,
        ), job_id
        assert (j.name, j.state, j.signal) == (p.name, p.state, p.signal), job_id
        assert (j.cancelled_by_user is not None) == (p.cancelled_by is not None), job_id
        assert (j.max_rss_bytes, j.elapsed_s, j.timelimit_s) == (
            p.max_rss_bytes,
            p.elapsed_s,
            p.timelimit_s,
        ), job_id
        assert (j.req_mem_bytes, j.node_list, j.reason, j.work_dir, j.comment) == (
            p.req_mem_bytes,
            p.node_list,
            p.reason,
            p.work_dir,
            p.comment,
        ), job_id
        assert (j.submit_time, j.start_time, j.end_time) == (
            p.submit_time,
            p.start_time,
            p.end_time,
        ), job_id
        if j.exit_code is None:
            unknown_exit.add(job_id)
        else:
            assert j.exit_code == p.exit_code, job_id
        steps = [(s.step, s.state, s.signal, s.max_rss_bytes, s.elapsed_s) for s in p.steps]
        assert [(s.step, s.state, s.signal, s.max_rss_bytes, s.elapsed_s) for s in j.steps] == steps
        assert [s.cancelled_by_user is not None for s in j.steps] == [
            s.cancelled_by is not None for s in p.steps
        ]
    if cap is V2205:  # every job not COMPLETED and not killed by a signal
        assert unknown_exit == {"333_2", "334", "335", "336", "337"}
        assert {parsable[i].exit_code for i in unknown_exit} == {0, 1, 127}
    else:
        assert unknown_exit == set()


def test_sacct_json_lab_22_05_agrees_with_sacct_fields() -> None:
    """jobsmith's own SACCT_FIELDS capture (\\x1f, --noconvert) against sacct --json."""
    parsable = parse_sacct_parsable(read(LAB / "sacct-fields.txt"), DELIMITER, tz=UTC)
    json = {r.job_id: r for r in parse_sacct_json(read(LAB / "sacct-fields.json"))}
    assert [r.job_id for r in parsable] == ["18", "19", "20_0", "20_1", "20_2", "20_3", "21"]
    for p in parsable:
        j = json[p.job_id]
        assert (j.state, j.max_rss_bytes, j.alloc_tres, j.partition) == (
            p.state,
            p.max_rss_bytes,
            p.alloc_tres,
            p.partition,
        ), p.job_id
        # a job that never ran: 22.05's sacct -P prints AllocCPUS 1, its JSON allocates none
        assert j.alloc_cpus == (p.alloc_cpus if p.start_time else None), p.job_id
        assert (j.account, j.user, j.timelimit_s, j.start_time) == (
            p.account,
            p.user,
            p.timelimit_s,
            p.start_time,
        ), p.job_id
        if p.total_cpu_s:  # sacct -P rounds to milliseconds
            assert j.total_cpu_s == pytest.approx(p.total_cpu_s, abs=0.001), p.job_id


# --- sacct -P, jobsmith's own field list (lab capture) ----------------------------------------


def test_sacct_fields_lab_capture() -> None:
    jobs = {r.job_id: r for r in parse_sacct_parsable(read(LAB / "sacct-fields.txt"), DELIMITER)}
    held = jobs["18"]
    assert (held.state, held.name, held.reason) == (JobState.COMPLETED, "psq-held", "JobHeldUser")
    assert held.total_cpu_s == pytest.approx(0.003)
    assert held.alloc_tres == "billing=1,cpu=1,mem=500M,node=1"
    assert (held.partition, held.account, held.user) == ("debug", "root", "root")
    assert held.timelimit_s == 600
    assert held.work_dir == "/tmp/psq"
    assert held.comment is None  # given with --comment, not kept by accounting
    # a '|' in the name is harmless with jobsmith's delimiter
    pipe = jobs["19"]
    assert (pipe.name, pipe.state, pipe.cancelled_by) == ("psq|pipe name", JobState.CANCELLED, "0")
    assert pipe.work_dir == "/tmp/psq"
    # --noconvert prints MaxRSS in bytes
    assert [jobs[f"20_{i}"].max_rss_bytes for i in range(4)] == [3342336, 3264512, 3330048, 3219456]
    assert jobs["20_3"].job_id_raw == "20"
    assert jobs["21"].reason == "Dependency"


def test_sacct_fields_lab_capture_qos_and_requested_tres() -> None:
    """QOS and ReqTRES (fixtures/lab-22.05/README.md, sacct-accepted*): what the job
    asked for, as Slurm recorded it, from submission on."""
    jobs = {r.job_id: r for r in parse_sacct_parsable(read(LAB / "sacct-accepted.txt"), DELIMITER)}
    gpu = jobs["14432"]
    assert (gpu.qos, gpu.req_tres) == ("high", "billing=5,cpu=1,gres/gpu=1,mem=500M,node=1")
    assert gpu.alloc_tres is None  # pending: nothing allocated yet
    dep = jobs["14434"]
    assert (dep.qos, dep.req_tres) == ("normal", "billing=1,cpu=1,mem=500M,node=1")
    rest = jobs["14433_[0,5,10,15,20%2]"]
    assert (rest.array_task_range, rest.qos) == ("0,5,10,15,20%2", "normal")
    # older captures without the two columns still parse: the fields are unknown
    old = parse_sacct_parsable(read(LAB / "sacct-fields.txt"), DELIMITER)
    assert {(r.qos, r.req_tres) for r in old} == {(None, None)}


def test_sacct_fields_lab_capture_pending_array_remainder() -> None:
    """Taken while task 2 ran: the remainder row, '20_[2-3%1]', in both formats."""
    text = parse_sacct_parsable(read(LAB / "sacct-fields-running.txt"), DELIMITER)
    json = parse_sacct_json(read(LAB / "sacct-fields-running.json"))  # its task field: '0xC'
    for jobs in ({r.job_id: r for r in text}, {r.job_id: r for r in json}):
        rest = jobs["20_[2-3%1]"]
        assert (rest.array_job_id, rest.array_task_id, rest.array_task_range) == (
            "20",
            None,
            "2-3%1",
        )
        assert (rest.job_id_raw, rest.state, rest.reason) == (
            "20",
            JobState.PENDING,
            "JobArrayTaskLimit",
        )
        assert jobs["20_2"].state is JobState.RUNNING
        assert jobs["20_2"].end_time is None  # 'Unknown'
        assert jobs["20_0"].state is JobState.COMPLETED


def test_sacct_stray_delimiter_in_free_text_shifts_no_fixed_column() -> None:
    """With '|', a name containing '|' blurs only the free-text block (JobName, WorkDir,
    Comment, last in SACCT_FIELDS); ids, state, exit code and times stay right."""
    jobs = {r.job_id: r for r in parse_sacct_parsable(read(LAB / "sacct-fields-pipe.txt"))}
    pipe = jobs["19"]
    assert (pipe.job_id_raw, pipe.state, pipe.cancelled_by) == ("19", JobState.CANCELLED, "0")
    assert (pipe.exit_code, pipe.timelimit_s, pipe.reason) == (0, 600, "JobHeldUser")
    assert pipe.end_time == datetime(2026, 11, 29, 9, 4, 40)
    assert pipe.name == "psq"  # the blur: the name's tail went on into WorkDir ...
    assert pipe.work_dir == "pipe name"
    assert pipe.comment == "/tmp/psq|"  # ... and WorkDir plus the empty comment into Comment
    assert jobs["18"].name == "psq-held" and jobs["18"].work_dir == "/tmp/psq"


def test_sacct_extra_delimiter_in_comment_is_kept_in_the_comment() -> None:
    # the capture's own header: its field list is older than SACCT_FIELDS' QOS and ReqTRES
    header, row = read(LAB / "sacct-fields-pipe.txt").splitlines()[:2]  # job 18, no comment
    assert header.split("|")[-1] == SACCT_FIELDS[-1]
    assert row.endswith("|")
    (job,) = parse_sacct_parsable(f"{header}\n{row}jobsmith:tag=x|y|z\n")
    assert job.comment == "jobsmith:tag=x|y|z"
    assert (job.name, job.work_dir, job.state) == ("psq-held", "/tmp/psq", JobState.COMPLETED)


def test_sacct_garbled_rows_are_skipped_not_fatal() -> None:
    lines = read(V2205.dir / "sacct-parsable.txt").splitlines()
    short = lines[3][:30]  # '332|332|oom|FAILED|0:9|0:0|00:' : a cut-off line
    text = "\n".join([lines[0], lines[1], lines[2], short, "garbage", lines[5], lines[6], ""])
    skipped: list[str] = []
    jobs = {r.job_id: r for r in parse_sacct_parsable(text, skipped=skipped)}
    assert skipped == [short, "garbage"]
    assert set(jobs) == {"331", "334"}  # 332's step row went with its job row
    assert jobs["334"].steps[0].signal == 15


def test_sacct_needs_its_header() -> None:
    lines = read(V2205.dir / "sacct-parsable.txt").splitlines()
    with pytest.raises(ValueError, match="header"):
        parse_sacct_parsable("\n".join(lines[1:]))
    assert parse_sacct_parsable("") == []
    assert parse_sacct_parsable(lines[0] + "\n") == []


def test_sacct_trailing_delimiter_of_lowercase_p() -> None:
    """sacct -p (not -P) ends every line, header included, with the delimiter."""
    lines = read(V2411.dir / "sacct-parsable.txt").splitlines()
    jobs = parse_sacct_parsable("\n".join(line + "|" for line in lines))
    assert len(jobs) == 10
    assert {j.job_id: j.steps[0].max_rss_bytes for j in jobs if j.steps}["5"] == 419824 * 1024


def test_sacct_json_broken_record_skipped() -> None:
    text = read(V2411.dir / "sacct.json").replace('"job_id": 8,', '"job_idx": 8,', 1)
    skipped: list[str] = []
    jobs = parse_sacct_json(text, skipped=skipped)
    assert len(jobs) == 9 and len(skipped) == 1
    assert "8" not in {j.job_id for j in jobs}
    with pytest.raises(ValueError, match="jobs"):
        parse_sacct_json('{"meta": {}}')


def test_sacct_fields_are_the_requested_ones() -> None:
    assert set(SACCT_FIELDS) == {
        "JobID", "JobIDRaw", "JobName", "State", "ExitCode", "DerivedExitCode", "Elapsed",
        "Timelimit", "MaxRSS", "ReqMem", "AllocCPUS", "TotalCPU", "NodeList", "Partition",
        "Account", "User", "Reason", "AllocTRES", "Comment", "WorkDir", "Submit", "Start", "End",
        "QOS", "ReqTRES",
    }  # fmt: skip
    assert len(SACCT_FIELDS) == 25
    assert SACCT_FIELDS[0] == "JobID"
    assert SACCT_FIELDS[-3:] == ("JobName", "WorkDir", "Comment")  # free text last


# --- squeue --json ----------------------------------------------------------------------------


def queue_json(cap: Capture) -> dict[str, QueueRecord]:
    return {q.job_id: q for q in parse_squeue_json(read(cap.dir / "squeue-pending.json"))}


@pytest.mark.parametrize("cap", CAPTURES)
def test_squeue_json_dependency_never_satisfied(cap: Capture) -> None:
    dep = queue_json(cap)[cap.dep]
    assert (dep.state, dep.reason) == (JobState.PENDING, "DependencyNeverSatisfied")
    assert dep.dependency == f"afterok:{cap.cancelled}(failed)"
    assert dep.name == "dep" and dep.user == "root" and dep.partition == "debug"
    assert dep.stdout_path == f"/scratch/alice/capjobs/dep_{cap.dep}.out"
    assert dep.stderr_path == dep.stdout_path  # no -e: stderr goes to the stdout file


@pytest.mark.parametrize("cap", CAPTURES)
def test_squeue_json_agrees_with_default_squeue_text(cap: Capture) -> None:
    """Ids and reasons against the plain `squeue` captured at the same moment."""
    text: dict[str, str] = {}
    for line in read(cap.dir / "squeue-pending.txt").splitlines()[1:]:
        cells = line.split()
        text[cells[0]] = cells[-1].strip("()")
    queue = queue_json(cap)
    pending = {k: q.reason for k, q in queue.items() if q.state is JobState.PENDING}
    assert pending == text


@pytest.mark.parametrize("cap", CAPTURES)
def test_squeue_json_pending_job_has_no_exit_code(cap: Capture) -> None:
    """Both shapes carry an exit code for a pending job (22.05: 0, 24.11: SUCCESS/0): not one."""
    for job_id, q in queue_json(cap).items():
        if q.state is JobState.PENDING:
            assert (q.exit_code, q.signal) == (None, None), job_id


def test_squeue_json_22_05_whole_queue() -> None:
    queue = queue_json(V2205)
    assert len(queue) == 39  # 22.05's --json ignores filters: finished tasks too
    ok = queue["331"]
    assert ok.comment == "jobsmith:tag=abc123"  # the controller keeps --comment
    assert ok.stdout_path == "/scratch/alice/capjobs/ok_331.out"  # '%j' expanded
    rest = queue["333_[0-3]"]
    assert (rest.array_job_id, rest.array_task_id, rest.array_task_range) == ("333", None, "0-3")
    assert rest.stdout_path == "/scratch/alice/capjobs/arr_%A_%a.out"  # no single file yet
    done = queue["9_91"]
    assert (done.state, done.job_id_raw, done.array_task_id) == (JobState.COMPLETED, "309", 91)
    assert (done.exit_code, done.signal) == (0, 0)
    assert queue["336"].state is JobState.CANCELLED
    assert (queue["336"].exit_code, queue["336"].signal) == (0, 0)  # cancelled before it ran
    assert queue["10_[0-199]"].estimated_start == datetime(2027, 11, 29, 8, 19, 31, tzinfo=UTC)


def test_squeue_json_24_11() -> None:
    queue = queue_json(V2411)
    assert set(queue) == {"7", "8", "10"}
    assert queue["7"].reason == "Resources"
    assert queue["8"].reason == "Priority"
    assert queue["7"].array_job_id is None  # array_job_id {set: true, number: 0}
    assert queue["7"].estimated_start is None
    assert queue["8"].stderr_path == "/scratch/alice/capjobs/nocmd_8.out"


def test_squeue_json_24_11_ended_job_exit_code() -> None:
    """24.11 has no ended job in its squeue capture; its squeue and sacct --json print the
    same exit code object, so the real ones of sacct.json's jobs 8 (127) and 5 (SIGKILL)
    are put into squeue's record of job 8 (a transplant, not a capture)."""
    queue = loads(read(V2411.dir / "squeue-pending.json"))
    (job,) = (j for j in queue["jobs"] if j["job_id"] == 8)
    sacct = {j["job_id"]: j for j in loads(read(V2411.dir / "sacct.json"))["jobs"]}
    for source, expected in ((8, (127, 0)), (5, (0, 9))):
        job.update(job_state=["FAILED"], exit_code=sacct[source]["exit_code"])
        (record,) = (q for q in parse_squeue_json(dumps(queue)) if q.job_id == "8")
        assert (record.exit_code, record.signal) == expected, source
    job.update(job_state=["PENDING"])  # the same code on a job not yet ended: none
    (record,) = (q for q in parse_squeue_json(dumps(queue)) if q.job_id == "8")
    assert (record.exit_code, record.signal) == (None, None)


# --- squeue --Format (lab capture) ------------------------------------------------------------


def lab_queue(name: str, delimiter: str = DELIMITER) -> dict[str, QueueRecord]:
    skipped: list[str] = []
    records = parse_squeue(read(LAB / name), delimiter, skipped=skipped)
    assert skipped == []
    return {q.job_id: q for q in records}


def capture_jobs(queue: dict[str, QueueRecord]) -> dict[str, QueueRecord]:
    """The capture's own jobs ('psq*'), without alice's jobs from other sessions."""
    return {k: q for k, q in queue.items() if q.name.startswith("psq")}


def test_squeue_format_is_long_format_full_width() -> None:
    assert squeue_format(DELIMITER) == SQUEUE_FORMAT
    fields = SQUEUE_FORMAT.split(",")
    assert [f.split(":")[0] for f in fields] == list(SQUEUE_FIELDS)
    assert all(f.endswith(":0" + DELIMITER) for f in fields)
    assert SQUEUE_FIELDS[-4:] == ("Name", "STDOUT", "STDERR", "Comment")  # free text last
    assert "exit_code" in SQUEUE_FIELDS[:-4]
    for bad in (",", "", "1|", ".x"):
        with pytest.raises(ValueError):
            squeue_format(bad)


def test_squeue_format_held_jobs() -> None:
    queue = lab_queue("squeue-format.txt")
    assert {q.user for q in queue.values()} == {"alice"}  # --me
    mine = capture_jobs(queue)
    assert set(mine) == {"202", "203", "204_[0-3%1]", "205", "206", "207"}
    held = queue["202"]
    assert (held.state, held.reason, held.user) == (JobState.PENDING, "JobHeldUser", "alice")
    assert (held.exit_code, held.signal) == (None, None)  # squeue prints 0: not an exit code
    assert held.comment == "jobsmith:tag=p1|x y"
    assert held.stdout_path == held.stderr_path == "/tmp/psq/psq-held_202.out"  # from %x_%j
    assert held.estimated_start is None  # 'N/A'
    assert held.dependency is None  # '(null)'
    pipe = queue["203"]
    assert pipe.name == "psq|pipe name"
    assert pipe.stdout_path == "/tmp/psq/slurm-203.out"  # Slurm's default file
    arr = queue["204_[0-3%1]"]
    assert (arr.job_id_raw, arr.array_job_id, arr.array_task_id) == ("204", "204", None)
    assert arr.array_task_range == "0-3%1"
    assert arr.stdout_path == "/tmp/psq/%x_%A_%a.out"
    assert arr.stderr_path == "/tmp/psq/%x_%A_%a.err"
    assert (arr.exit_code, arr.signal) == (None, None)
    dep = queue["205"]
    assert (dep.reason, dep.dependency) == ("Dependency", "afterok:202(unfulfilled)")
    assert dep.array_job_id is None and dep.array_task_range is None
    assert (dep.exit_code, dep.signal) == (None, None)
    # another session's array, pending in a partition it may not use
    other = queue["155_[0-2%2]"]
    assert (other.reason, other.array_task_range) == ("PartitionConfig", "0-2%2")


@pytest.mark.parametrize("name", ["squeue-format.txt", "squeue-format-running.txt"])
def test_squeue_format_ended_jobs_exit_code_and_signal(name: str) -> None:
    """squeue -O exit_code prints the raw wait status (768 for `exit 3`, 9 for SIGKILL);
    decoded, it reads as sacct's ExitCode for the same jobs (3:0 and 0:9)."""
    queue = lab_queue(name)
    exit3 = queue["206"]
    assert (exit3.state, exit3.reason) == (JobState.FAILED, "NonZeroExitCode")
    assert (exit3.exit_code, exit3.signal) == (3, 0)
    assert exit3.stdout_path == "/tmp/psq/psq-exit3_206.out"
    killed = queue["207"]
    # a batch script killed by a signal is a FAILED job with reason JobLaunchFailure
    assert (killed.state, killed.reason) == (JobState.FAILED, "JobLaunchFailure")
    assert (killed.exit_code, killed.signal) == (0, 9)
    for job_id, q in queue.items():
        if not q.state.is_terminal:
            assert (q.exit_code, q.signal) == (None, None), job_id


@pytest.mark.parametrize(
    ("state", "status", "expected"),
    [
        ("FAILED", "768", (3, 0)),  # as captured
        ("FAILED", "139", (0, 11)),  # SIGSEGV with the core-dump bit (0x80)
        ("CANCELLED", "15", (0, 15)),
        ("COMPLETED", "0", (0, 0)),
        ("COMPLETING", "768", (None, None)),  # not ended yet
        ("FAILED", "4294967294", (None, None)),  # NO_VAL
        ("FAILED", "", (None, None)),
    ],
)
def test_squeue_format_exit_code_decoding(
    state: str, status: str, expected: tuple[int | None, int | None]
) -> None:
    """Job 206's captured row with its State and exit_code cells replaced."""
    (row,) = (line for line in read(LAB / "squeue-format.txt").splitlines() if "psq-exit3" in line)
    cells = row.split(DELIMITER)
    at = SQUEUE_FIELDS.index("exit_code")
    assert cells[SQUEUE_FIELDS.index("State")] == "FAILED" and cells[at] == "768"
    cells[SQUEUE_FIELDS.index("State")], cells[at] = state, status
    (job,) = parse_squeue(DELIMITER.join(cells), DELIMITER)
    assert (job.exit_code, job.signal) == expected


def test_squeue_format_while_array_runs() -> None:
    queue = lab_queue("squeue-format-running.txt")
    assert set(capture_jobs(queue)) == {"202", "203", "204_0", "204_1", "204_2", "204_3"} | {
        "205",
        "206",
        "207",
    }
    running = queue["204_2"]
    assert (running.state, running.job_id_raw, running.array_task_id) == (
        JobState.RUNNING,
        "215",
        2,
    )
    assert running.reason is None
    assert (running.exit_code, running.signal) == (None, None)  # 0 while it runs
    assert running.estimated_start == datetime(2026, 11, 29, 9, 21, 0)
    assert running.stdout_path == "/tmp/psq/psq-arr_204_2.out"
    assert running.stderr_path == "/tmp/psq/psq-arr_204_2.err"
    last = queue["204_3"]  # the last pending task is shown on its own
    assert (last.state, last.reason, last.job_id_raw) == (
        JobState.PENDING,
        "JobArrayTaskLimit",
        "204",
    )
    assert (last.array_task_id, last.array_task_range) == (3, None)
    done = queue["204_0"]
    assert (done.state, done.job_id_raw, done.exit_code, done.signal) == (
        JobState.COMPLETED,
        "208",
        0,
        0,
    )
    cancelled = queue["203"]  # cancelled while held: nothing ran, status 0
    assert (cancelled.state, cancelled.exit_code, cancelled.signal) == (JobState.CANCELLED, 0, 0)
    assert queue["202"].reason == "JobHeldUser"


def test_squeue_format_agrees_with_squeue_json() -> None:
    for text_name, json_name in (
        ("squeue-format.txt", "squeue-format-held.json"),
        ("squeue-format-running.txt", "squeue-format-running.json"),
    ):
        text = lab_queue(text_name)
        # 22.05's --json ignores --me; only alice had jobs in the queue at both moments
        json = {q.job_id: q for q in parse_squeue_json(read(LAB / json_name))}
        assert {q.user for q in json.values()} == {"alice"}
        assert set(json) == set(text), text_name
        for job_id, t in text.items():
            j = json[job_id]
            assert j.estimated_start == (
                t.estimated_start and t.estimated_start.replace(tzinfo=UTC)
            )
            j_plain = j.model_dump(exclude={"estimated_start"})
            assert j_plain == t.model_dump(exclude={"estimated_start"}), job_id
        # 22.05's JSON gives the same raw wait status as -O exit_code
        assert (json["206"].exit_code, json["206"].signal) == (3, 0), json_name
        assert (json["207"].exit_code, json["207"].signal) == (0, 9), json_name


def test_squeue_stray_delimiter_in_name_shifts_no_fixed_column() -> None:
    """The same moment printed with '|': the '|' typed in job 203's name blurs its free-text
    block only; the comment, last, keeps its own '|' intact."""
    queue = lab_queue("squeue-format-pipe.txt", "|")
    pipe = queue["203"]
    assert (pipe.job_id_raw, pipe.state, pipe.reason, pipe.user) == (
        "203",
        JobState.PENDING,
        "JobHeldUser",
        "alice",
    )
    assert (pipe.partition, pipe.dependency, pipe.estimated_start) == ("debug", None, None)
    assert (pipe.exit_code, pipe.signal) == (None, None)
    assert pipe.name == "psq"  # blurred
    assert queue["202"].comment == "jobsmith:tag=p1|x y"
    assert queue["204_[0-3%1]"].array_task_range == "0-3%1"
    assert (queue["206"].exit_code, queue["206"].signal) == (3, 0)
    assert (queue["207"].exit_code, queue["207"].signal) == (0, 9)


def test_squeue_garbled_rows_are_skipped() -> None:
    lines = read(LAB / "squeue-format.txt").splitlines()
    header = DELIMITER.join(SQUEUE_FIELDS).upper()
    text = "\n".join([header, lines[0][:20], *lines[1:], "", "a continuation line"])
    skipped: list[str] = []
    queue = parse_squeue(text, DELIMITER, skipped=skipped)
    assert len(queue) == len(lines) - 1
    assert [q.job_id for q in queue][-3:] == ["204_[0-3%1]", "203", "202"]
    assert skipped == [header, lines[0][:20], "a continuation line"]


# --- squeue --Format and sacct -P, Slurm 24.11 (lab capture) ----------------------------------

LAB_2411 = FIXTURES / "lab-24.11"  # the same kinds of jobs on Debian 13's Slurm: its README.md


def lab_2411_queue(name: str, delimiter: str = DELIMITER) -> dict[str, QueueRecord]:
    skipped: list[str] = []
    records = parse_squeue(read(LAB_2411 / name), delimiter, skipped=skipped)
    assert skipped == []
    return {q.job_id: q for q in records}


@pytest.mark.parametrize("name", ["squeue-format.txt", "squeue-format-running.txt"])
def test_squeue_format_24_11_exit_code_is_code_colon_signal(name: str) -> None:
    """24.11's -O exit_code prints sacct's 'CODE:SIGNAL' (3:0, 0:9, 127:0), not 22.05's raw
    wait status; its 0:0 before a job ends is no exit code."""
    queue = lab_2411_queue(name)
    exit3 = queue["42"]
    assert (exit3.state, exit3.reason, exit3.exit_code, exit3.signal) == (
        JobState.FAILED,
        "NonZeroExitCode",
        3,
        0,
    )
    killed = queue["43"]  # 22.05 says JobLaunchFailure here
    assert (killed.state, killed.reason) == (JobState.FAILED, "RaisedSignal:9(Killed)")
    assert (killed.exit_code, killed.signal) == (0, 9)
    assert (queue["44"].exit_code, queue["44"].signal) == (127, 0)  # command not found
    for job_id, q in queue.items():
        if not q.state.is_terminal:
            assert (q.exit_code, q.signal) == (None, None), job_id


def test_squeue_format_24_11_held_running_and_never_satisfied() -> None:
    held = lab_2411_queue("squeue-format.txt")
    assert set(held) == {"38", "39", "40_[0-3%1]", "41", "42", "43", "44"}
    job = held["38"]
    assert (job.state, job.reason, job.user) == (JobState.PENDING, "JobHeldUser", "alice")
    assert job.comment == "jobsmith:tag=p1|x y"
    # without -e, 24.11 prints STDERR as (null) (22.05: the stdout path); stderr goes there
    assert job.stdout_path == job.stderr_path == "/tmp/psq/psq-held_38.out"
    assert held["39"].stdout_path == held["39"].stderr_path == "/tmp/psq/slurm-39.out"
    arr = held["40_[0-3%1]"]
    assert (arr.array_task_range, arr.stdout_path, arr.stderr_path) == (
        "0-3%1",
        "/tmp/psq/%x_%A_%a.out",
        "/tmp/psq/%x_%A_%a.err",
    )
    assert held["41"].dependency == "afterok:38(unfulfilled)"
    running = lab_2411_queue("squeue-format-running.txt")
    task = running["40_1"]
    assert (task.state, task.job_id_raw, task.array_task_id) == (JobState.RUNNING, "46", 1)
    assert task.stderr_path == "/tmp/psq/psq-arr_40_1.err"
    done = running["40_0"]
    assert (done.state, done.exit_code, done.signal) == (JobState.COMPLETED, 0, 0)
    assert (running["39"].state, running["39"].exit_code) == (JobState.CANCELLED, 0)
    assert running["40_[2-3%1]"].reason == "JobArrayTaskLimit"
    never = lab_2411_queue("squeue-format-never.txt")
    assert (never["48"].state, never["48"].reason) == (JobState.PENDING, "DependencyNeverSatisfied")
    assert never["48"].dependency == "afterok:47(failed)"
    assert (never["47"].exit_code, never["47"].signal) == (1, 0)
    pipe = lab_2411_queue("squeue-format-pipe.txt", "|")["39"]  # '|' in the name: blurred
    assert (pipe.job_id_raw, pipe.state, pipe.reason) == ("39", JobState.PENDING, "JobHeldUser")


def test_squeue_format_24_11_agrees_with_squeue_json() -> None:
    for text_name, json_name in (
        ("squeue-format.txt", "squeue-format-held.json"),
        ("squeue-format-running.txt", "squeue-format-running.json"),
    ):
        text = lab_2411_queue(text_name)
        json = {q.job_id: q for q in parse_squeue_json(read(LAB_2411 / json_name))}
        assert set(json) == set(text), text_name
        for job_id, t in text.items():
            j = json[job_id]
            differ = {"estimated_start", "reason"}
            if t.array_task_range is not None:  # 24.11's JSON prints %a as 4294967294 here
                differ |= {"stdout_path", "stderr_path"}
            assert j.model_dump(exclude=differ) == t.model_dump(exclude=differ), job_id
            # the JSON's reason lacks the detail: 'RaisedSignal' for 'RaisedSignal:9(Killed)'
            assert (t.reason or "").split(":")[0] == (j.reason or ""), job_id
            assert j.estimated_start == (
                t.estimated_start and t.estimated_start.replace(tzinfo=UTC)
            )


def test_sacct_fields_24_11_lab_capture() -> None:
    text = parse_sacct_parsable(read(LAB_2411 / "sacct-fields.txt"), DELIMITER, tz=UTC)
    jobs = {r.job_id: r for r in text}
    assert list(jobs) == ["38", "39", "41", "42", "43", "44", "40_0", "40_1", "40_[2-3%1]"]
    assert (jobs["38"].state, jobs["38"].cancelled_by) == (JobState.CANCELLED, "1000")
    assert (jobs["42"].state, jobs["42"].exit_code, jobs["42"].signal) == (JobState.FAILED, 3, 0)
    killed = jobs["43"]
    assert (killed.state, killed.exit_code, killed.signal) == (JobState.FAILED, 0, 9)
    assert [(s.step, s.state, s.signal) for s in killed.steps] == [("batch", JobState.CANCELLED, 9)]
    assert (jobs["44"].exit_code, jobs["44"].signal) == (127, 0)
    assert jobs["40_0"].max_rss_bytes == 3633152  # --noconvert: bytes, from the batch step
    assert jobs["40_1"].steps[0].signal == 15
    rest = jobs["40_[2-3%1]"]
    assert (rest.job_id_raw, rest.array_task_range, rest.node_list) == ("40", "2-3%1", None)
    assert (rest.account, rest.user, rest.timelimit_s) == ("lab", "alice", 600)
    json = {r.job_id: r for r in parse_sacct_json(read(LAB_2411 / "sacct-fields.json"))}
    for p in text:
        j = json[p.job_id]
        assert (j.state, j.exit_code, j.signal, j.max_rss_bytes, j.array_task_range) == (
            p.state,
            p.exit_code,
            p.signal,
            p.max_rss_bytes,
            p.array_task_range,
        ), p.job_id
        assert (j.partition, j.account, j.user, j.timelimit_s, j.alloc_tres) == (
            p.partition,
            p.account,
            p.user,
            p.timelimit_s,
            p.alloc_tres,
        ), p.job_id
    running = {
        r.job_id: r
        for r in parse_sacct_parsable(read(LAB_2411 / "sacct-fields-running.txt"), DELIMITER)
    }
    assert running["40_1"].state is JobState.RUNNING and running["40_1"].end_time is None
    assert (running["40_[2-3%1]"].state, running["40_[2-3%1]"].reason) == (
        JobState.PENDING,
        "JobArrayTaskLimit",
    )


def test_slurm_unset_markers_are_not_memory_sizes() -> None:
    # seen in ReqMem for a moment after submission on the lab (NO_VAL64 in MiB)
    assert parse_printed_memory("18446744073709551615M") is None
    assert parse_printed_memory("16384M") == 16384 << 20


def test_sacct_json_stand_in_row_of_a_just_ended_job_names_nothing() -> None:
    """22.05's stand-in row (fixtures/lab-22.05/README.md): state and exit are the job's,
    the name "allocation" and the zero time limit are not, so they read as unknown."""
    (early,) = parse_sacct_json(read(LAB / "sacct-placeholder.json"))
    (later,) = parse_sacct_json(read(LAB / "sacct-placeholder-after.json"))
    assert (
        (early.state, early.exit_code)
        == (later.state, later.exit_code)
        == (
            JobState.COMPLETED,
            0,
        )
    )
    assert early.name == "" and early.timelimit_s is None and early.partition is None
    assert later.name == "command.js-test3" and later.timelimit_s == 600


def test_sacct_parsable_stand_in_row_names_nothing() -> None:
    """The stand-in row through sacct -P (fixtures/lab-22.05/README.md)."""
    (job,) = parse_sacct_parsable(read(LAB / "sacct-placeholder-pipe.txt"))
    assert job.name == "" and job.partition is None and job.timelimit_s is None
    (named,) = [r for r in parse_sacct_parsable(read(LAB / "sacct-fields-pipe.txt")) if r.name][:1]
    assert named.name  # a real row keeps its name
