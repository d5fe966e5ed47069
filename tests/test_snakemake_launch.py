"""SnakemakeEngine.launch and .records: the generated profile and the command line.

The profile is checked as YAML (what Snakemake's profile loader reads) and, where the
pinned Snakemake is installed (.venv-snakemake), by Snakemake itself in a dry run, which
prints the resources it would give the rule jobs without submitting any.
"""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from jobsmith.adapters.snakemake import SnakemakeEngine
from jobsmith.adapters.snakemake.command import unlock_argv
from jobsmith.adapters.snakemake.profile import PROFILE_FILE
from jobsmith.adapters.workflow import (
    EngineKind,
    EngineSite,
    LaunchRequest,
    PartitionLimits,
    RecordFile,
    WorkflowEngine,
)

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / "tests" / "workflows" / "snakemake_bwa" / "Snakefile"
SNAKEMAKE = REPO / ".venv-snakemake" / "bin" / "snakemake"
ENGINE: WorkflowEngine = SnakemakeEngine()

HOSTILE = (
    'debug\'\nexecutor: local\n"x": [1]',
    '__import__("os").system("touch PWNED")',
    "$HOME",
    "a=b, mem_mb=1",
    "config.yaml",
)


def site(**kw: object) -> EngineSite:
    values: dict[str, object] = {
        "partition": "debug",
        "head_partition": "debug",
        "account": "lab",
        "qos": "normal",
        "partitions": (PartitionLimits(name="debug", max_mem_mb=8000, max_time_s=1800),),
        "max_concurrent_tasks": 4,
        "default_mem_mb": 600,
        "default_time_s": 300,
        "max_retries": 1,
    }
    values.update(kw)
    return EngineSite.model_validate(values)


def request(**kw: object) -> LaunchRequest:
    values: dict[str, object] = {
        "engine": EngineKind.SNAKEMAKE,
        "pipeline": str(WORKFLOW),
        "launch_dir": "/home/alice/run",
    }
    values.update(kw)
    return LaunchRequest.model_validate(values)


def profile_of(s: EngineSite) -> dict[str, object]:
    text = ENGINE.launch(s, request(), attempt=1).files[PROFILE_FILE]
    loaded = YAML(typ="safe", pure=True).load(text)
    assert isinstance(loaded, dict)
    return loaded


def literal(value: object) -> str:
    """What Snakemake's resource evaluation makes of a profile string (after its
    environment-variable expansion, which finds no `$` to expand)."""
    assert isinstance(value, str)
    assert "$" not in value
    result = ast.literal_eval(value)
    assert isinstance(result, str)
    return result


def test_the_profile_carries_the_sites_values() -> None:
    profile = profile_of(site(submissions_per_hour=120))
    assert profile["executor"] == "slurm"
    assert profile["jobs"] == 4
    # 120 an hour is one per 30 s: never the hour's window, whose timer keeps a finished
    # Snakemake alive for up to an hour
    assert profile["max-jobs-per-timespan"] == "1/30s"
    assert profile["retries"] == 1
    assert profile["rerun-incomplete"] is True
    assert profile["keep-going"] is True
    assert profile["printshellcmds"] is True
    assert profile["slurm-efficiency-report"] is True
    assert profile["slurm-keep-successful-logs"] is True
    resources = profile["default-resources"]
    assert isinstance(resources, dict)
    assert literal(resources["slurm_partition"]) == "debug"
    assert literal(resources["slurm_account"]) == "lab"
    assert literal(resources["qos"]) == "normal"
    # memory and time double with each retry, up to the partition's maxima
    mem = resources["mem_mb"]
    runtime = resources["runtime"]
    assert isinstance(mem, str) and isinstance(runtime, str)
    assert [eval(mem, {"attempt": a}) for a in (1, 2, 5)] == [600, 1200, 8000]
    assert [eval(runtime, {"attempt": a}) for a in (1, 2, 5)] == [5, 10, 30]
    assert "cpus_per_task" not in resources  # one CPU: the rules' threads decide


def test_optional_values_are_left_out_and_many_cpus_are_a_floor() -> None:
    resources = profile_of(site(account=None, qos=None, partitions=(), default_cpus=4))[
        "default-resources"
    ]
    assert isinstance(resources, dict)
    assert set(resources) == {"slurm_partition", "mem_mb", "runtime", "cpus_per_task"}
    assert eval(str(resources["mem_mb"]), {"attempt": 3}) == 2400  # no partition cap
    assert eval(str(resources["cpus_per_task"]), {"threads": 1}) == 4
    assert eval(str(resources["cpus_per_task"]), {"threads": 8}) == 8


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_site_strings_stay_values(hostile: str) -> None:
    profile = profile_of(site(partition=hostile, account=hostile, qos=hostile))
    assert set(profile) == {
        "executor",
        "jobs",
        "default-resources",
        "retries",
        "rerun-incomplete",
        "keep-going",
        "printshellcmds",
        "slurm-efficiency-report",
        "slurm-efficiency-report-path",
        "slurm-keep-successful-logs",
    }
    assert profile["executor"] == "slurm"
    resources = profile["default-resources"]
    assert isinstance(resources, dict)
    for key in ("slurm_partition", "slurm_account", "qos"):
        assert literal(resources[key]) == hostile


def test_the_command_line_first_attempt_and_resume() -> None:
    req = request(
        params_file="-params.yaml",
        targets=("merged/all.bam", "--forceall"),
        extra_args=("--config", "fail_sample=s2"),
    )
    first = ENGINE.launch(site(), req, attempt=1)
    assert first.argv == (
        "snakemake",
        "--profile=.jobsmith/profile",
        f"--snakefile={WORKFLOW}",
        "--configfile=-params.yaml",
        "--config",
        "fail_sample=s2",
        "--",
        "merged/all.bam",
        "--forceall",
    )
    assert first.console_log == ".jobsmith/snakemake-1.log"
    assert set(first.files) == {".jobsmith/profile/config.yaml"}
    second = ENGINE.launch(site(), req, attempt=2)
    assert "--rerun-incomplete" in second.argv[: second.argv.index("--")]
    assert second.console_log == ".jobsmith/snakemake-2.log"
    assert second.files == first.files
    assert ENGINE.launch(site(), request(), attempt=1).argv[-1] == f"--snakefile={WORKFLOW}"


def test_records_are_the_attempts_console() -> None:
    assert ENGINE.kind is EngineKind.SNAKEMAKE
    assert ENGINE.records(request(), attempt=3) == (
        RecordFile(path=".jobsmith/snakemake-3.log", kind="console"),
    )


def test_unlock_is_the_same_workflow_with_unlock() -> None:
    assert unlock_argv(request()) == (
        "snakemake",
        "--profile=.jobsmith/profile",
        f"--snakefile={WORKFLOW}",
        "--unlock",
    )


def runnable(path: Path) -> bool:
    try:
        return subprocess.run([path, "--version"], capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.mark.skipif(not runnable(SNAKEMAKE), reason="no runnable .venv-snakemake here")
def test_snakemake_itself_reads_hostile_values_as_values(tmp_path: Path) -> None:
    hostile = '__import__("os").system("touch PWNED")'
    s = site(
        partition=hostile,
        account="lab=$HOME",
        qos="config.yaml",
        default_cpus=2,
        submissions_per_hour=120,
    )
    head = ENGINE.launch(s, request(launch_dir=str(tmp_path)), attempt=2)
    for rel, text in head.files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    argv = [str(SNAKEMAKE), *head.argv[1:], "--dry-run"]
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = done.stdout + done.stderr
    assert f"slurm_partition={hostile}," in out
    assert "slurm_account=lab=$HOME," in out
    assert "qos=config.yaml," in out
    assert "mem_mb=600," in out and "runtime=5," in out and "cpus_per_task=2" in out
    assert not (tmp_path / "PWNED").exists()
    assert "total        6" in out  # index, 3 x align, merge, all


def test_the_hourly_budget_becomes_short_windows_never_above_it() -> None:
    from jobsmith.adapters.snakemake.profile import rate_limit

    assert rate_limit(600) == "1/10s" and rate_limit(3600) == "10/10s"
    assert rate_limit(7) == "1/515s" and rate_limit(1) == "1/3600s"
    for per_hour in (1, 7, 359, 360, 361, 600, 5000):
        count, span = rate_limit(per_hour).rstrip("s").split("/")
        assert int(count) * 3600 / int(span) <= per_hour
