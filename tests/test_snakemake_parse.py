"""SnakemakeEngine.parse against real console output (tests/fixtures/snakemake/).

The captures are a failing run (sample s2's alignment exits 3, retried once), its
resume, and a head job killed with SIGKILL whose relaunch found Snakemake's lock; the
Slurm job ids asserted here are the ones sacct shows in the same directories.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from jobsmith.adapters.snakemake import SnakemakeEngine
from jobsmith.adapters.snakemake.context import decode
from jobsmith.adapters.workflow import (
    EngineTask,
    MessageKind,
    Parsed,
    RecordFile,
    TaskStatus,
    WorkflowEngine,
)

CAPTURES = Path(__file__).parent / "fixtures" / "snakemake"
CONSOLE = RecordFile(path=".jobsmith/snakemake-1.log", kind="console")
ENGINE: WorkflowEngine = SnakemakeEngine()


def lines_of(name: str) -> list[str]:
    return (CAPTURES / name).read_text().splitlines(keepends=True)


def parse_all(name: str) -> Parsed:
    return ENGINE.parse(CONSOLE, lines_of(name), ())


def parse_in_chunks(lines: list[str], size: int) -> tuple[list[EngineTask], list[str], Parsed]:
    """As the watcher reads: a few lines per cycle, the context carried between."""
    tasks: list[EngineTask] = []
    messages: list[str] = []
    parsed = Parsed()
    for start in range(0, len(lines), size):
        parsed = ENGINE.parse(CONSOLE, lines[start : start + size], parsed.context)
        tasks += parsed.tasks
        messages += [f"{m.kind}:{m.text}" for m in parsed.messages]
    return tasks, messages, parsed


def final(parsed: Parsed) -> dict[tuple[str, int], EngineTask]:
    """The last word on each (jobid, attempt)."""
    return {(t.key, t.attempt): t for t in parsed.tasks}


def test_the_failed_run_names_the_failing_rule_and_both_slurm_jobs_of_it() -> None:
    parsed = parse_all("fail/console.log")
    failed = [t for t in parsed.tasks if t.status is TaskStatus.FAILED]
    assert [(t.key, t.process, t.name, t.native_id, t.attempt) for t in failed] == [
        ("4", "align", "align (sample=s2)", "13964", 1),
        ("4", "align", "align (sample=s2)", "13967", 2),
    ]
    # the retry asked for twice the memory (the profile's attempt-doubling)
    assert [t.mem_mb for t in failed] == [600.0, 1200.0]
    # where the plugin keeps each attempt's Slurm output (kept for failed jobs)
    assert [t.log for t in failed] == [
        "/home/alice/smbwa/.snakemake/slurm_logs/rule_align/s2/13964.log",
        "/home/alice/smbwa/.snakemake/slurm_logs/rule_align/s2/13967.log",
    ]
    task_failed = [m for m in parsed.messages if m.kind is MessageKind.TASK_FAILED]
    assert [(m.process, m.native_id) for m in task_failed] == [
        ("align", "13964"),
        ("align", "13967"),
    ]
    assert "SLURM status is: 'FAILED'" in task_failed[0].text
    assert "For further error details" not in task_failed[0].text


def test_the_failed_run_counts_and_ends_in_failure() -> None:
    parsed = parse_all("fail/console.log")
    last = final(parsed)
    assert Counter(t.status for t in last.values()) == {
        TaskStatus.COMPLETED: 3,  # index, align s1, align s3
        TaskStatus.FAILED: 2,  # align s2, attempts 1 and 2
    }
    submitted = {t.native_id: t.name for t in parsed.tasks if t.status is TaskStatus.SUBMITTED}
    assert submitted == {
        "13963": "index",
        "13964": "align (sample=s2)",
        "13965": "align (sample=s1)",
        "13966": "align (sample=s3)",
        "13967": "align (sample=s2)",
    }
    said = [m for m in parsed.messages if m.kind is not MessageKind.PROGRESS]
    assert [m.kind for m in said] == [
        MessageKind.TASK_FAILED,
        MessageKind.RETRY,
        MessageKind.TASK_FAILED,
        MessageKind.FAILED,
    ]
    retry = said[1]
    assert (retry.process, retry.native_id) == ("align", "13964")
    assert parsed.messages[-1].text.startswith("Exiting because a job execution failed")


def test_the_resumed_run_does_only_what_was_left() -> None:
    parsed = parse_all("resume/console.log")
    last = final(parsed)
    assert {t.name: (t.status, t.native_id) for t in last.values()} == {
        "align (sample=s2)": (TaskStatus.COMPLETED, "13969"),
        "merge": (TaskStatus.COMPLETED, "13970"),
        # the target rule runs inside the head job: no Slurm job
        "all": (TaskStatus.COMPLETED, None),
    }
    assert last[("1", 1)].log == "/home/alice/smbwa/.snakemake/slurm_logs/rule_merge/13970.log"
    assert last[("0", 1)].log is None
    assert [(m.kind, m.text) for m in parsed.messages] == [
        (MessageKind.PROGRESS, "1 of 3 steps (33%) done"),
        (MessageKind.PROGRESS, "2 of 3 steps (67%) done"),
        (MessageKind.COMPLETED, "3 of 3 steps (100%) done"),
    ]


def test_every_submitted_job_ends_once_and_the_context_empties() -> None:
    parsed = parse_all("resume/console.log")
    by_key = Counter((t.key, t.status) for t in parsed.tasks)
    assert all(n == 1 for n in by_key.values())
    assert decode(parsed.context).jobs == {}
    assert decode(parsed.context).ended


def test_a_killed_head_job_leaves_its_rule_jobs_submitted() -> None:
    parsed = parse_all("killed/console-1.log")
    last = final(parsed)
    # Snakemake never said more about them: the head job's own Slurm state (cancelled)
    # is what tells the agent these ended
    assert sorted((t.native_id, t.status) for t in last.values()) == [
        ("13972", TaskStatus.COMPLETED),
        ("13973", TaskStatus.SUBMITTED),
        ("13974", TaskStatus.SUBMITTED),
        ("13975", TaskStatus.SUBMITTED),
    ]
    said = [m for m in parsed.messages if m.kind is not MessageKind.PROGRESS]
    assert [m.kind for m in said] == [MessageKind.ABORTED]
    assert "Will exit after finishing currently running jobs" in said[0].text


def test_the_relaunch_into_a_stale_lock_fails_with_the_reason() -> None:
    parsed = parse_all("killed/console-2.log")
    assert parsed.tasks == ()
    assert len(parsed.messages) == 1
    message = parsed.messages[0]
    assert message.kind is MessageKind.FAILED
    assert message.text.startswith("LockException: Error: Directory cannot be locked.")


def test_after_unlock_the_resume_completes() -> None:
    parsed = parse_all("killed/console-3.log")
    assert {t.native_id for t in parsed.tasks if t.native_id} == {"13978", "13979"}
    assert parsed.messages[-1].kind is MessageKind.COMPLETED


def test_any_chunking_tells_the_same_story() -> None:
    for name in ("fail/console.log", "resume/console.log", "killed/console-1.log"):
        lines = lines_of(name)
        whole = ENGINE.parse(CONSOLE, lines, ())
        for size in (1, 2, 3, 7, 50):
            tasks, messages, last = parse_in_chunks(lines, size)
            assert tasks == list(whole.tasks), (name, size)
            assert messages == [f"{m.kind}:{m.text}" for m in whole.messages], (name, size)
            assert last.context == whole.context


def test_a_chunk_ending_inside_the_error_block_waits_for_its_end() -> None:
    lines = lines_of("fail/console.log")
    cut = next(i for i, line in enumerate(lines) if line.startswith("Error in rule")) + 3
    first = ENGINE.parse(CONSOLE, lines[:cut], ())
    assert not any(t.status is TaskStatus.FAILED for t in first.tasks)
    rest = ENGINE.parse(CONSOLE, lines[cut:], first.context)
    assert rest.tasks[0].status is TaskStatus.FAILED
    assert rest.tasks[0].native_id == "13964"


def test_other_records_say_nothing_and_keep_the_context() -> None:
    other = RecordFile(path="x.csv", kind="efficiency")
    parsed = ENGINE.parse(other, lines_of("fail/console.log"), ('["ended"]',))
    assert parsed == Parsed(context=('["ended"]',))


def test_a_local_rule_failure_is_one_task_failure_not_a_run_failure() -> None:
    # as the jobstep prints it (fixtures' slurm_logs), and as a local rule would in the
    # head job: the RuleException header belongs to the "Error in rule" block after it
    lines = lines_of("fail/slurm_logs/rule_align/s2/13964.log")
    parsed = ENGINE.parse(CONSOLE, lines, ())
    kinds = [m.kind for m in parsed.messages]
    assert kinds.count(MessageKind.FAILED) == 1  # "Exiting because …", once
    assert MessageKind.TASK_FAILED in kinds
    assert not any(m.text.startswith("RuleException") for m in parsed.messages)


def test_submission_errors_and_user_termination() -> None:
    lines = [
        "rule align:\n",
        "    jobid: 7\n",
        "    wildcards: sample=x\n",
        "Job 7 has been submitted with SLURM jobid 99 (log: a.log).\n",
        "Exception in run_job for rule merge: SLURM job submission failed. "
        "The error message was sbatch: error: Invalid account\n",
        "Terminating processes on user request, this might take some time.\n",
    ]
    parsed = ENGINE.parse(CONSOLE, lines, ())
    assert [m.kind for m in parsed.messages] == [MessageKind.SUBMIT_ERROR, MessageKind.ABORTED]
    assert parsed.messages[0].process == "merge"
    assert [(t.key, t.status) for t in parsed.tasks] == [
        ("7", TaskStatus.SUBMITTED),
        ("7", TaskStatus.ABORTED),
    ]
    assert decode(parsed.context).jobs == {}


def test_array_submission_maps_jobids_to_array_tasks() -> None:
    # not captured (the profile does not ask for arrays): the line as the plugin's
    # run_array_jobs writes it (snakemake_executor_plugin_slurm 2.8.0)
    line = (
        "Submitted array job with Snakemake IDs 2,4,5 and SLURM job ID 700. "
        "The individual task IDs are 1-3.\n"
    )
    parsed = ENGINE.parse(CONSOLE, [line], ())
    assert [(t.key, t.native_id, t.status) for t in parsed.tasks] == [
        ("2", "700_1", TaskStatus.SUBMITTED),
        ("4", "700_2", TaskStatus.SUBMITTED),
        ("5", "700_3", TaskStatus.SUBMITTED),
    ]


def test_hostile_names_survive_the_context_round_trip() -> None:
    odd = 'we"ird\t[x], \\ \u2028 {"json": 1}'
    lines = [
        "rule align:\n",
        "    jobid: 3\n",
        f"    wildcards: sample={odd}\n",
    ]
    first = ENGINE.parse(CONSOLE, lines, ())
    then = ENGINE.parse(
        CONSOLE, ["Job 3 has been submitted with SLURM jobid 5 (log: x).\n"], first.context
    )
    assert then.tasks[0].name == f"align (sample={odd})"


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.one_of(
            st.text(max_size=80),
            st.sampled_from(lines_of("fail/console.log")),
            st.sampled_from(
                [
                    "Job 1 has been submitted with SLURM jobid 99999999999999999999999.\n",
                    "    threads: 99999999999999999999999999999\n",
                    "    threads: x\n",
                    "    jobid: \n",
                    "Finished jobid: 0 (Rule: )\n",
                    "0 of 0 steps (0%) done\n",
                    "LockException:\n",
                    "Trying to restart job 1.\n",
                ]
            ),
        ),
        max_size=30,
    ),
    context=st.lists(
        st.one_of(
            st.text(max_size=40),
            st.sampled_from(
                [
                    '["job","1","r","r","NOPE",null,1,null,null,null]',
                    '["job","1","r","r","SUBMITTED",null,-5,null,null,7]',
                    '["job","1","r","r","SUBMITTED",null,1,"x",null,null]',
                    '["block","error","r",null,null,null]',
                    '["block"]',
                    '{"job": 1}',
                    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
                    '["exception", 3]',
                ]
            ),
        ),
        max_size=5,
    ),
)
def test_arbitrary_lines_and_contexts_never_raise(lines: list[str], context: list[str]) -> None:
    parsed = ENGINE.parse(CONSOLE, lines, tuple(context))
    again = ENGINE.parse(CONSOLE, lines, parsed.context)
    assert isinstance(again, Parsed)
    assert all(len(m.text) <= 400 and "\n" not in m.text for m in parsed.messages)
