"""A Snakemake pipeline end to end on the lab cluster (issue 11), through the CLI.

The real Snakemake 9 and its Slurm executor plugin (pinned in scripts/snakemake-
requirements.txt, installed by scripts/setup in .venv-snakemake) run as a head job that
jobsmith submits from the pipeline_head template, with a profile generated from the site
config. The workflow (tests/workflows/snakemake_bwa) aligns three samples with bwa and
merges them with samtools; the first run makes one alignment fail on purpose. What is
proved: the head job is a Slurm job of the session; the engine's own console tells which
rule job failed, with Slurm's job id, which `diagnose` then explains; `sessions resume`
launches Snakemake again in the same directory, which runs only what is left; and the
engine ran under the site's concurrency limit (its `jobs` is the limit less the head).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from lab_cli import js

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / "tests" / "workflows" / "snakemake_bwa"
# scripts/setup's venv, or where scripts/slurm-other installed it in the other release's root
SNAKEMAKE_BIN = Path(os.environ.get("JOBSMITH_SNAKEMAKE_BIN", REPO / ".venv-snakemake" / "bin"))

lab = pytest.mark.usefixtures("lab_cluster")

# The person's own engine arguments, passed through: the plugin's status checks every 5 s
# instead of 40 (a 4-job run takes about 30 s instead of 3 minutes on the lab's one node),
# and no retries of the rule that fails on purpose (more memory would not help it)
FAST = (
    "--slurm-init-seconds-before-status-checks=5",
    "--seconds-between-status-checks=5",
    "--retries=0",
)


def _status(session_id: str) -> dict[str, object]:
    res = js("pipeline", "status", session_id, "--json")
    assert res.exit_code == 0, res.output
    doc: dict[str, object] = json.loads(res.stdout)
    return doc


@lab
@pytest.mark.lab
@pytest.mark.alone  # its head job holds one of the lab's two CPUs for about a minute
def test_a_snakemake_pipeline_fails_one_rule_is_diagnosed_and_resumes(  # type: ignore[no-untyped-def]
    user_site, workdir: Path
) -> None:
    assert (SNAKEMAKE_BIN / "snakemake").exists(), "scripts/setup installs .venv-snakemake"
    shutil.copytree(WORKFLOW, workdir / "wf")
    user_site(
        f"env_setup: ['export PATH={SNAKEMAKE_BIN}:$PATH']\npolicy:\n  max_concurrent_jobs: 50\n"
    )
    run_dir = workdir / "run"
    config = workdir / "config.yaml"  # the person's config: one sample made to fail
    config.write_text("fail_sample: s2\n")
    launched = js(
        "pipeline", "run", "snakemake", str(workdir / "wf" / "Snakefile"),
        "--launch-dir", str(run_dir), "--max-tasks", "80", "--json",
        "--params-file", str(config), "--", *FAST,
    )  # fmt: skip
    assert launched.exit_code == 0, launched.output
    first = json.loads(launched.stdout)
    session, head = first["session_id"], first["job_id"]
    assert any("at most 49 tasks at once" in n for n in first["notes"]), first
    profile = (run_dir / ".jobsmith" / "profile" / "config.yaml").read_text
    waited = js("wait", head, "--timeout", "600")
    assert waited.exit_code == 1, waited.output  # the head job failed: a rule failed
    assert "jobs: 49" in profile()  # the engine's queue: the limit less the head job

    # the watcher reads the engine's records as it polls: its cycle names the pipeline
    cycle = js("watch", "--once", "--json")
    assert cycle.exit_code == 0 and session in json.loads(cycle.stdout)["pipelines"], cycle.output
    doc = _status(session)
    assert (doc["head_job_id"], doc["head_state"], doc["attempt"]) == (head, "FAILED", 1)
    # the head job's own diagnosis quotes the engine's words (its console is its stderr)
    head_diagnosis = js("diagnose", head, "--json")
    assert head_diagnosis.exit_code == 0, head_diagnosis.output
    (said,) = json.loads(head_diagnosis.stdout)["diagnoses"]
    assert any("Exiting because a job execution failed" in e for e in said["evidence"]), said
    failed = doc["failed"]
    assert isinstance(failed, list) and len(failed) == 1, doc
    (task,) = failed
    assert task["process"] == "align" and "s2" in task["name"], task
    native = task["native_id"]
    assert native and native != head
    assert doc["next"] == f"jobsmith pipeline resume {session}"

    # the rule job is no job of jobsmith's ledger, and Slurm forgets its log paths: its
    # log is where Snakemake's console said it is, and diagnose and logs read it there
    diagnosed = js("diagnose", native, "--json")
    assert diagnosed.exit_code == 0, diagnosed.output
    (diagnosis,) = json.loads(diagnosed.stdout)["diagnoses"]
    assert diagnosis["verdict"] == "nonzero_exit" and not diagnosis["retryable"], diagnosis
    assert not any("not read" in n for n in diagnosis["notes"]), diagnosis
    logs = js("logs", native, "--stderr")
    assert logs.exit_code == 0 and "sample s2 fails on purpose" in logs.stdout, logs.output

    config.write_text("fail_sample: none\n")  # the person fixes the cause
    # `sessions resume` resumes a pipeline like any session: nothing was in flight, so
    # its engine is launched again (`pipeline resume SESSION` does the same)
    resumed = js("sessions", "resume", session, "--json")
    assert resumed.exit_code == 0, resumed.output
    second_head = json.loads(resumed.stdout)["relaunched"]
    assert second_head != head
    waited = js("wait", second_head, "--timeout", "600")
    assert waited.exit_code == 0, waited.output
    assert (run_dir / "merged" / "all.bam").stat().st_size > 0

    doc = _status(session)
    assert (doc["head_state"], doc["attempt"], doc["failed"], doc["next"]) == (
        "COMPLETED",
        2,
        [],
        None,
    )
    counts = doc["task_counts"]
    # index, three alignments, merge, and `all` (which Snakemake runs in the head job)
    assert counts == {"COMPLETED": 6}, counts
    # the second attempt ran what was left: the failed alignment and the merge
    second_log = (run_dir / ".jobsmith" / "snakemake-2.log").read_text()
    assert "rule align:" in second_log and "rule merge:" in second_log
    assert "rule index:" not in second_log

    listed = js("pipeline", "status", "--list")
    assert listed.exit_code == 0 and session in listed.stdout and "6 completed" in listed.stdout
    glance = js("status")  # the at-a-glance status: the pipeline in one line
    assert glance.exit_code == 0, glance.output
    (line,) = [x for x in glance.stdout.splitlines() if session.rpartition("-")[2][:8] in x]
    assert "pipeline" in line and "6/6 done" in line, glance.stdout
    every = js("status", "--all")  # every job, under its session's headline
    assert f"pipeline {session}  snakemake" in every.stdout and "6 completed" in every.stdout
