"""NextflowEngine.parse over real trace files (tests/fixtures/nextflow, see SOURCES.md).

Each fixture is parsed as captured; the assertions are facts read off the files by hand.
"""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest

from jobsmith.adapters.nextflow import NextflowEngine
from jobsmith.adapters.nextflow.config import TRACE_FIELDS
from jobsmith.adapters.workflow import EngineTask, MessageKind, Parsed, RecordFile, TaskStatus

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nextflow"
TRACE = RecordFile(path=".jobsmith/trace-1.tsv", kind="trace")


def lines(name: str) -> list[str]:
    path = FIXTURES / name
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode().splitlines()


def parse(name: str) -> Parsed:
    return NextflowEngine().parse(TRACE, lines(name), ())


def statuses(parsed: Parsed) -> Counter[str]:
    return Counter(task.status.value for task in parsed.tasks)


def by_key(parsed: Parsed, key: str) -> EngineTask:
    (task,) = [task for task in parsed.tasks if task.key == key]
    return task


def test_a_completed_slurm_run_with_the_default_fields_and_human_units() -> None:
    parsed = parse("trace-slurm-completed-default-fields.tsv")
    assert statuses(parsed) == {"COMPLETED": 46}
    assert not parsed.messages
    task = by_key(parsed, "2")
    assert task.name == "QC (Quality control on ERR377591)"
    assert task.process == "QC"
    assert task.native_id == "8445977"
    assert task.exit_code == 0
    assert task.peak_rss_mb == pytest.approx(244.3)
    assert task.realtime_s == pytest.approx(33.0)
    assert task.cpu_percent == pytest.approx(88.0)
    ids = sorted(int(t.native_id or 0) for t in parsed.tasks)
    assert (ids[0], ids[-1]) == (8445976, 8446027)
    # the one row with a raw 0 for peak_rss reads as zero, not as missing
    assert by_key(parsed, "31").peak_rss_mb == 0.0


def test_cached_rows_then_a_failed_task_retried_under_a_new_id_and_slurm_job() -> None:
    parsed = parse("trace-slurm-cached-failed-retry.tsv")
    assert statuses(parsed) == {"CACHED": 167, "COMPLETED": 448, "FAILED": 4}
    runs = [t for t in parsed.tasks if t.name == "FASTERQ_DUMP (SRR13973925)"]
    assert [(t.key, t.status, t.native_id, t.exit_code) for t in runs] == [
        ("95", TaskStatus.FAILED, "23853920", 1),
        ("510", TaskStatus.COMPLETED, "23854356", 0),
    ]
    failed, completed = runs
    assert failed.peak_rss_mb is None and failed.cpu_percent is None  # `-` in the file
    assert failed.realtime_s == 10 * 60 + 30
    assert completed.peak_rss_mb == pytest.approx(2.5 * 1024)
    assert completed.realtime_s == 2 * 60 + 25
    # no attempt column in this trace: each row is read as a first attempt
    assert {t.attempt for t in parsed.tasks} == {1}


def test_long_durations_and_cpu_over_a_hundred_percent() -> None:
    parsed = parse("trace-slurm-sherlock-cached-failed.tsv")
    assert statuses(parsed) == {"CACHED": 6, "COMPLETED": 1, "FAILED": 1}
    demux = by_key(parsed, "2")
    assert demux.realtime_s == 4 * 3600 + 4 * 60 + 23
    assert demux.cpu_percent == pytest.approx(1577.7)
    assert demux.process == "demux"
    assert by_key(parsed, "4").peak_rss_mb == pytest.approx(22.4 * 1024)
    (failed,) = [t for t in parsed.tasks if t.status is TaskStatus.FAILED]
    assert failed.exit_code == 1 and failed.peak_rss_mb is None


def test_an_interrupted_run_aborted_tasks_and_one_never_submitted() -> None:
    parsed = parse("trace-slurm-aborted-failed130.tsv")
    assert statuses(parsed) == {"ABORTED": 55, "FAILED": 1}
    aborted = by_key(parsed, "2")
    assert (aborted.status, aborted.native_id, aborted.exit_code) == (
        TaskStatus.ABORTED,
        "30992771",
        None,
    )
    never_submitted = by_key(parsed, "55")
    assert never_submitted.exit_code == 130 and never_submitted.native_id is None


def test_a_running_row_and_a_failed_row_whose_exit_is_zero() -> None:
    parsed = parse("trace-slurm-running-and-failed-exit0.tsv")
    running = by_key(parsed, "1")
    assert (running.status, running.native_id, running.exit_code) == (
        TaskStatus.RUNNING,
        "31000702",
        None,
    )
    failed = by_key(parsed, "2")
    assert (failed.status, failed.exit_code) == (TaskStatus.FAILED, 0)


def test_the_older_rss_column_and_an_aborted_row_without_metrics() -> None:
    parsed = parse("trace-local-cached-failed-aborted-rss-vmem.tsv")
    assert statuses(parsed) == {"CACHED": 6, "FAILED": 1, "ABORTED": 1}
    assert by_key(parsed, "1").peak_rss_mb == pytest.approx(55.5)
    assert by_key(parsed, "8").peak_rss_mb == pytest.approx(3.1)
    aborted = by_key(parsed, "7")
    assert aborted.exit_code is None and aborted.realtime_s is None


def test_exit_137_rows_and_a_native_id_that_is_not_a_number() -> None:
    parsed = parse("trace-awsbatch-failed-137-uuid-native-id.tsv")
    assert statuses(parsed) == {"COMPLETED": 209, "FAILED": 8}
    assert {t.exit_code for t in parsed.tasks if t.status is TaskStatus.FAILED} == {137}
    assert by_key(parsed, "90").native_id == "4ebb52b4-dddd-4efc-aed9-5606459a667e"
    assert by_key(parsed, "1").name == "get_software_versions"


def test_the_header_travels_in_the_context_for_rows_read_later() -> None:
    rows = lines("trace-slurm-failed-exit1-paired-with-log.tsv")
    whole = NextflowEngine().parse(TRACE, rows, ())
    first = NextflowEngine().parse(TRACE, rows[:3], ())
    rest = NextflowEngine().parse(TRACE, rows[3:], first.context)
    assert first.context == tuple(rows[0].split("\t"))
    assert first.tasks + rest.tasks == whole.tasks
    assert statuses(whole) == {"COMPLETED": 15, "FAILED": 2}
    # without the header, rows cannot be read: they are counted, never guessed
    blind = NextflowEngine().parse(TRACE, rows[3:], ())
    assert not blind.tasks
    assert [m.kind for m in blind.messages] == [MessageKind.WARNING]
    assert "skipped 15 trace line(s)" in blind.messages[0].text


def test_the_fields_jobsmith_asks_for_in_raw_units() -> None:
    """A row as the generated config makes Nextflow write it (trace.raw = true)."""
    values = {
        "task_id": "12",
        "hash": "3f/717936",
        "native_id": "63763889",
        "process": "EDNA:MAPSEQ_ASV_KRONA:MAPSEQ",
        "tag": "ERR8441363",
        "name": "EDNA:MAPSEQ_ASV_KRONA:MAPSEQ (ERR8441363)",
        "status": "COMPLETED",
        "exit": "0",
        "attempt": "2",
        "error_action": "-",
        "queue": "short",
        "cpus": "4",
        "memory": str(16 * 1024**3),
        "time": str(2 * 3600 * 1000),
        "realtime": "83250",
        "%cpu": "96.2",
        "peak_rss": str(9 * 1024**3 + 512 * 1024**2),
        "workdir": "/scratch/work/3f/717936417dbffd3fb915de9af34f6a",
    }
    row = "\t".join(values.get(field, "-") for field in TRACE_FIELDS)
    parsed = NextflowEngine().parse(TRACE, ["\t".join(TRACE_FIELDS), row], ())
    (task,) = parsed.tasks
    assert task.process == "EDNA:MAPSEQ_ASV_KRONA:MAPSEQ"
    assert (task.attempt, task.cpus, task.native_id) == (2, 4, "63763889")
    assert task.mem_mb == 16 * 1024
    assert task.peak_rss_mb == 9 * 1024 + 512
    assert task.realtime_s == pytest.approx(83.25)
    assert task.cpu_percent == pytest.approx(96.2)
    assert task.workdir == values["workdir"]
