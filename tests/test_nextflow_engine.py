"""NextflowEngine behind the WorkflowEngine protocol: the head job's files and command, the
records it follows per attempt, and parse never raising on any text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsmith.adapters.nextflow import NextflowEngine
from jobsmith.adapters.nextflow.config import TRACE_FIELDS
from jobsmith.adapters.workflow import (
    EngineKind,
    EngineSite,
    LaunchRequest,
    Parsed,
    RecordFile,
    WorkflowEngine,
)

SITE = EngineSite(partition="debug", head_partition="debug", account="lab", max_concurrent_tasks=8)
REQUEST = LaunchRequest(
    engine=EngineKind.NEXTFLOW,
    pipeline="nf-core/demo",
    launch_dir="/scratch/alice/demo",
    work_dir="/scratch/alice/demo/work",
    revision="1.0.1",
    profile="singularity",
    params_file="params.yaml",
    extra_args=("--outdir", "results"),
)
ENGINE: WorkflowEngine = NextflowEngine()  # mypy checks the protocol here
TRACE = RecordFile(path=".jobsmith/trace-1.tsv", kind="trace")
LOG = RecordFile(path=".jobsmith/nextflow-1.log", kind="log")


def test_the_first_attempt_runs_as_asked() -> None:
    head = ENGINE.launch(SITE, REQUEST, attempt=1)
    assert ENGINE.kind is EngineKind.NEXTFLOW
    assert head.argv == (
        "nextflow",
        "-log",
        ".jobsmith/nextflow-1.log",
        "run",
        "nf-core/demo",
        "-c",
        ".jobsmith/nextflow-1.config",
        "-work-dir",
        "/scratch/alice/demo/work",
        "-profile",
        "singularity",
        "-r",
        "1.0.1",
        "-params-file",
        "params.yaml",
        "--outdir",
        "results",
    )
    assert list(head.files) == [".jobsmith/nextflow-1.config"]
    assert "clusterOptions = '--account=lab'" in head.files[".jobsmith/nextflow-1.config"]
    assert head.environment == {"NXF_ANSI_LOG": "false", "NXF_DISABLE_CHECK_LATEST": "true"}
    assert head.console_log is None


def test_a_later_attempt_resumes_with_its_own_files() -> None:
    head = ENGINE.launch(SITE, REQUEST, attempt=3)
    assert head.argv[:7] == (
        "nextflow",
        "-log",
        ".jobsmith/nextflow-3.log",
        "run",
        "nf-core/demo",
        "-c",
        ".jobsmith/nextflow-3.config",
    )
    assert head.argv.count("-resume") == 1
    assert head.argv.index("-resume") < head.argv.index("--outdir")  # extra args stay last
    config = head.files[".jobsmith/nextflow-3.config"]
    assert "file = '.jobsmith/trace-3.tsv'" in config


def test_optional_options_are_left_out_and_a_given_resume_is_not_repeated() -> None:
    bare = LaunchRequest(engine=EngineKind.NEXTFLOW, pipeline="main.nf", launch_dir="/p")
    assert ENGINE.launch(SITE, bare, attempt=1).argv == (
        "nextflow",
        *("-log", ".jobsmith/nextflow-1.log", "run", "main.nf"),
        *("-c", ".jobsmith/nextflow-1.config"),
    )
    resuming = bare.model_copy(update={"extra_args": ("-resume", "abc-123")})
    for attempt in (1, 2):
        argv = ENGINE.launch(SITE, resuming, attempt=attempt).argv
        assert argv.count("-resume") == 1 and argv[-2:] == ("-resume", "abc-123")


def test_a_pipeline_that_reads_as_an_option_and_attempt_zero_are_refused() -> None:
    with pytest.raises(ValueError, match="option"):
        ENGINE.launch(SITE, REQUEST.model_copy(update={"pipeline": "-h"}), attempt=1)
    with pytest.raises(ValueError, match="from 1"):
        ENGINE.launch(SITE, REQUEST, attempt=0)


def test_records_are_the_trace_and_log_the_command_and_config_name() -> None:
    for attempt in (1, 2):
        head = ENGINE.launch(SITE, REQUEST, attempt=attempt)
        trace, log = ENGINE.records(REQUEST, attempt=attempt)
        assert (trace.kind, log.kind) == ("trace", "log")
        assert head.argv[head.argv.index("-log") + 1] == log.path
        (config,) = head.files.values()
        assert f"file = '{trace.path}'" in config
    assert ENGINE.records(REQUEST, attempt=1) != ENGINE.records(REQUEST, attempt=2)


def test_a_record_kind_nextflow_does_not_write_parses_to_nothing() -> None:
    other = RecordFile(path="console.txt", kind="console")
    assert ENGINE.parse(other, ["anything"], ("kept",)) == Parsed(context=("kept",))


# --- never raises ----------------------------------------------------------------------------

HEADER = "\t".join(TRACE_FIELDS)
# text as a watcher hands it over: any characters, bytes decoded with replacement, tabs,
# fields that look like values, and now and then a very long one
FIELD = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["-", "0", "1.5 GB", "2h 3m 4s", "96.2%", "137", "COMPLETED", "CACHED"]),
    st.binary(max_size=40).map(lambda b: b.decode("utf-8", errors="replace")),
    st.integers().map(str),
    st.just("9" * 5000),
)
LINE = st.one_of(
    st.text(),
    st.lists(FIELD, min_size=len(TRACE_FIELDS), max_size=len(TRACE_FIELDS)).map("\t".join),
    st.lists(FIELD, max_size=30).map("\t".join),
    st.binary(max_size=300).map(lambda b: b.decode("utf-8", errors="replace")),
    st.sampled_from(
        [
            "Error executing process > 'X (1)'",
            "Caused by:",
            "  Failed to submit process to grid scheduler for execution",
            "Command exit status:",
            "Command output:",
            "Oct-30 12:30:48.636 [main] WARN  nextflow.Session - x",
            "Oct-30 12:30:48.636 [a] DEBUG b - Task completed > TaskHandler[jobId: ; id: ; "
            "name: X (1); status: ; exit: 9;",
            "Oct-30 12:30:48.636 [a] INFO  b - NOTE: Process `X (1)` (137) -- Error is ignored",
            "Oct-30 12:30:48.636 [a] DEBUG b - Workflow completed > WorkflowStats[failedCount=x]",
        ]
    ),
)
CONTEXT = st.one_of(
    st.just(()),
    st.just(tuple(HEADER.split("\t"))),
    st.lists(st.text(max_size=20), max_size=4).map(tuple),
    st.tuples(st.just("jobsmith.nextflow.log/1"), st.text(max_size=200)),
    st.tuples(
        st.just("jobsmith.nextflow.log/1"),
        st.sampled_from(
            [
                '{"report": {"task": 3}, "jobs": []}',
                '{"report": {"task": "X", "section": "output", "submit": true}, "jobs": {"a": 1}}',
                "[]",
                "null",
            ]
        ),
    ),
)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(["trace", "log"]), lines=st.lists(LINE, max_size=12), context=CONTEXT)
def test_parse_never_raises_and_returns_valid_models(
    kind: str, lines: list[str], context: tuple[str, ...]
) -> None:
    record = TRACE if kind == "trace" else LOG
    parsed = ENGINE.parse(record, lines, context)
    assert Parsed.model_validate(parsed.model_dump()) == parsed
    for message in parsed.messages:
        assert len(message.text) <= 300 and "\n" not in message.text
    again = ENGINE.parse(record, [], parsed.context)  # the context it returns reads back
    assert not again.tasks
