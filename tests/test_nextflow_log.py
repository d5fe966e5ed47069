"""NextflowEngine.parse over real `.nextflow.log` excerpts and a console error report
(tests/fixtures/nextflow, see SOURCES.md), parsed as captured."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

from jobsmith.adapters.nextflow import NextflowEngine
from jobsmith.adapters.workflow import EngineMessage, MessageKind, Parsed, RecordFile

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nextflow"
LOG = RecordFile(path=".jobsmith/nextflow-1.log", kind="log")
TRACE = RecordFile(path=".jobsmith/trace-1.tsv", kind="trace")


def lines(name: str) -> list[str]:
    path = FIXTURES / name
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode().splitlines()


def parse(name: str) -> Parsed:
    return NextflowEngine().parse(LOG, lines(name), ())


def line_by_line(name: str) -> tuple[EngineMessage, ...]:
    """The same file read one line per call, as a watcher reading a growing file would."""
    context: tuple[str, ...] = ()
    messages: list[EngineMessage] = []
    for line in lines(name):
        parsed = NextflowEngine().parse(LOG, [line], context)
        messages += parsed.messages
        context = parsed.context
    return tuple(messages)


def kinds(messages: tuple[EngineMessage, ...]) -> Counter[str]:
    return Counter(message.kind.value for message in messages)


def test_tasks_killed_for_memory_are_retried_and_the_run_completes() -> None:
    parsed = parse("log-slurm-oom-137-retry-completed.txt")
    assert kinds(parsed.messages) == {"RETRY": 17, "COMPLETED": 1}
    retries = [m for m in parsed.messages if m.kind is MessageKind.RETRY]
    assert {m.exit_code for m in retries} == {137}
    first = retries[0]
    assert first.process == "EDNA:MAPSEQ_ASV_KRONA:MAPSEQ (ERR8441366)"
    # the Slurm job of the attempt that was killed, from the `Task completed` line before
    assert first.native_id == "63761321"
    assert "Execution is retried (1)" in first.text
    assert all(m.native_id for m in retries)
    (done,) = [m for m in parsed.messages if m.kind is MessageKind.COMPLETED]
    assert "failed 17" in done.text and "retries 17" in done.text and "cached 13396" in done.text


def test_a_task_error_report_fails_the_run() -> None:
    parsed = parse("log-slurm-error-executing-process-full.txt.gz")
    assert kinds(parsed.messages) == {"WARNING": 1, "TASK_FAILED": 1, "ABORTED": 1, "FAILED": 1}
    (failed,) = [m for m in parsed.messages if m.kind is MessageKind.TASK_FAILED]
    assert failed.process == "BUILD_GBK (244)"
    assert failed.exit_code == 1
    assert failed.native_id == "30493004"
    assert "terminated with an error exit status (1)" in failed.text
    (aborted,) = [m for m in parsed.messages if m.kind is MessageKind.ABORTED]
    assert aborted.text == "Execution cancelled -- Finishing pending tasks before exit"
    (run,) = [m for m in parsed.messages if m.kind is MessageKind.FAILED]
    assert "failed 1" in run.text and "pending 3" in run.text
    (warning,) = [m for m in parsed.messages if m.kind is MessageKind.WARNING]
    assert "CUSTOM_DUMPSOFTWAREVERSIONS" in warning.text


def test_ignored_errors_match_the_failed_rows_of_the_same_runs_trace() -> None:
    parsed = parse("log-slurm-failed-exit1-ignored-paired-with-trace.txt.gz")
    assert kinds(parsed.messages) == {"TASK_FAILED": 2, "COMPLETED": 1}
    failed = [m for m in parsed.messages if m.kind is MessageKind.TASK_FAILED]
    assert [(m.process, m.exit_code, m.native_id) for m in failed] == [
        ("BUILD_GBK (2414)", 1, "31043770"),
        ("BUILD_GBK (2434)", 1, "31043772"),
    ]
    assert all(m.text.endswith("-- Error is ignored") for m in failed)
    trace = NextflowEngine().parse(TRACE, lines("trace-slurm-failed-exit1-paired-with-log.tsv"), ())
    failed_rows = {(t.name, t.native_id) for t in trace.tasks if t.status.value == "FAILED"}
    assert failed_rows == {(m.process, m.native_id) for m in failed}


def test_sbatch_refusing_a_task_is_a_submit_error_with_sbatchs_words() -> None:
    parsed = parse("log-slurm-sbatch-submit-error-console.txt")
    (error,) = parsed.messages
    assert error.kind is MessageKind.SUBMIT_ERROR
    assert error.text == "sbatch: error: Batch job submission failed: Invalid feature specification"
    assert error.process == "get_gzipped_vcfs:bgzip (bgzip test)"
    assert error.exit_code == 1


def test_an_exit_status_never_read_is_a_warning_naming_the_slurm_job() -> None:
    (warning,) = parse("log-slurm-exit-status-read-timeout.txt.gz").messages
    assert warning.kind is MessageKind.WARNING
    assert (warning.process, warning.native_id) == ("TASK2", "2998128")
    assert "exitStatusReadTimeoutMillis: 270000" in warning.text


def test_a_resumed_runs_start_and_its_submissions_say_nothing_alarming() -> None:
    startup = parse("log-slurm-resume-startup.txt")
    assert kinds(startup.messages) == {"WARNING": 1}
    assert "prov.formats" in startup.messages[0].text
    assert parse("log-slurm-submitted-and-cached.txt").messages == ()


def test_reading_line_by_line_with_the_context_says_the_same() -> None:
    for name in (
        "log-slurm-sbatch-submit-error-console.txt",
        "log-slurm-error-executing-process-full.txt.gz",
        "log-slurm-oom-137-retry-completed.txt",
    ):
        assert line_by_line(name) == parse(name).messages, name


def test_messages_are_one_bounded_line() -> None:
    huge = "Oct-30 12:30:48.636 [main] WARN  nextflow.Session - " + "x\ty " * 5000
    report = [
        "Error executing process > 'ALIGN (s1)'",
        "Caused by:",
        "  Process `ALIGN (s1)` terminated for an unknown reason -- " + "z" * 1000,
    ]
    parsed = NextflowEngine().parse(LOG, [huge, *report], ())
    assert [m.kind for m in parsed.messages] == [MessageKind.WARNING, MessageKind.TASK_FAILED]
    for message in parsed.messages:
        assert len(message.text) <= 300 and "\n" not in message.text and "\t" not in message.text
        assert message.text.endswith("…")
