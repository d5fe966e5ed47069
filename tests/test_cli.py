"""The `jobsmith` command line, end to end: pure errors in-process, jobs on the real lab cluster.

Every CLI test runs with its own config and state directories (jobsmith_home) and the
lab's example site file layered under a user file that adds the test's directory to the
allowed roots, as a user's own ~/.config/jobsmith/site.yaml would.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from lab_cli import js
from template_examples import example_params, write_bwa_inputs

from jobsmith.agent.faces.cli import cli
from jobsmith.job_templates import TemplateLibrary, shipped_library
from jobsmith.job_templates.params import ParamType

REPO = Path(__file__).resolve().parent.parent
SHIPPED = sorted(TemplateLibrary([shipped_library()]).names())


@pytest.fixture
def run(user_site):  # type: ignore[no-untyped-def]
    """Invoke the CLI in-process from workdir; returns click's Result."""
    return js


def one_error_line(result: Result) -> str:
    """The CLI's error output must be one line, never a traceback."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output + result.stderr
    assert lines[0].startswith("jobsmith: error: ")
    return lines[0]


# --- no cluster needed ----------------------------------------------------------------


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys, jobsmith.agent.faces.cli; "
        "print(sorted(m for m in ('pydantic', 'jinja2', 'ruamel.yaml', 'rich', 'platformdirs') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    helped = subprocess.run(
        [sys.executable, "-m", "jobsmith", "--help"], capture_output=True, text=True, check=True
    )
    for command in ("submit", "status", "logs", "cancel", "hold", "release", "site", "wait"):
        assert command in helped.stdout


def test_templates_list_json_shape(run) -> None:  # type: ignore[no-untyped-def]
    result = run("templates", "list", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert sorted(t["name"] for t in data["templates"]) == SHIPPED
    assert all(t["description"] and t["file"].endswith(".yaml") for t in data["templates"])


def test_unknown_template_is_one_line_listing_the_valid_ones(run) -> None:  # type: ignore[no-untyped-def]
    result = run("templates", "show", "ffmpeg_chunk")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "ffmpeg_chunk" in line and "ffmpeg_chunks" in line and "bwa_align" in line


def test_json_errors_are_json(run) -> None:  # type: ignore[no-untyped-def]
    result = run("render", "command", "-P", "nosuch=1", "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"] == "TemplateError"


def test_newline_directive_injection_refused(run) -> None:  # type: ignore[no-untyped-def]
    result = run("render", "command", "-P", "command=true\n#SBATCH --partition=high")
    assert result.exit_code == 2
    assert "command" in one_error_line(result)


def test_out_of_root_path_refused_and_nothing_recorded(run, jobsmith_home: Path) -> None:  # type: ignore[no-untyped-def]
    result = run(
        "submit",
        "ffmpeg_chunks",
        "-P",
        "input=/etc/passwd",
        "-P",
        "output_dir=out",
        "-P",
        "duration_s=10",
    )
    assert result.exit_code == 3
    line = one_error_line(result)
    assert "/etc/passwd" in line and "input" in line
    assert not (jobsmith_home / "state" / "jobs").exists()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--time", "2:00:00"], "partition 'debug' allows at most 00:30:00"),
        (["--partition", "nosuch"], "allowed: debug, long, gpu, preempt, high"),
        (["--gpus", "1"], "partition 'debug' has 0 GPUs"),
        (["--account", "other"], "allowed: lab, proj2"),
        (["--cpus", "64"], "at most 2 CPUs"),
        (["--log-dir", "/etc"], "outside the allowed roots"),
    ],
)
def test_over_policy_refused_with_the_limit_named(
    run,
    jobsmith_home: Path,
    args: list[str],  # type: ignore[no-untyped-def]
    needle: str,
) -> None:
    result = run("submit", "command", "-P", "command=true", *args)
    assert result.exit_code == 3, result.output
    assert needle in one_error_line(result)
    assert not (jobsmith_home / "state" / "jobs").exists()


def test_missing_site_config_says_what_to_do(jobsmith_home: Path) -> None:
    result = CliRunner().invoke(cli, ["render", "command", "-P", "command=true"])
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "site init" in line


def test_bad_time_syntax_named(run) -> None:  # type: ignore[no-untyped-def]
    result = run("render", "command", "-P", "command=true", "--time", "soon")
    assert result.exit_code != 0
    assert "--time" in one_error_line(result)


# --- on the real lab cluster ----------------------------------------------------------

lab = pytest.mark.usefixtures("lab_cluster")


@lab
def test_dry_run_submits_nothing(run, jobsmith_home: Path) -> None:  # type: ignore[no-untyped-def]
    result = run("submit", "command", "-P", "command=echo hi", "--dry-run", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["script"].startswith("#!/bin/bash\n#SBATCH --job-name=command.js-")
    found = subprocess.run(
        ["squeue", "--me", "-h", "--name", data["job_name"]],
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == ""
    assert not (jobsmith_home / "state" / "jobs").exists()


@lab
def test_submit_wait_status_logs(run, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    result = run(
        "submit",
        "command",
        "-P",
        "command=echo out-line; echo err-line >&2",
        "--log-dir",
        str(workdir / "logs"),
    )
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    assert job_id.isdigit()
    waited = run("wait", job_id, "--timeout", "120", "--json")
    assert waited.exit_code == 0, waited.output
    status = json.loads(run("status", job_id, "--json").stdout)
    (job,) = status["jobs"]
    assert job["job_id"] == job_id and job["state"] == "COMPLETED"
    assert job["record"]["exit_code"] == 0
    listed = json.loads(run("status", "--json").stdout)
    assert [j["job_id"] for j in listed["jobs"]] == [job_id]
    out = json.loads(run("logs", job_id, "--json").stdout)
    assert out["lines"] == ["out-line"] and out["path"] == f"{workdir}/logs/command_{job_id}.out"
    err = run("logs", job_id, "--stderr")
    assert err.stdout.strip() == "err-line"


@lab
def test_failed_job_exit_code_and_wait_status(run, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    job_id = run(
        "submit", "command", "-P", "command=ls /nonexistent-input", "--log-dir", str(workdir)
    ).stdout.strip()
    waited = run("wait", job_id, "--timeout", "120")
    assert waited.exit_code == 1
    job = json.loads(run("status", job_id, "--json").stdout)["jobs"][0]
    assert job["state"] == "FAILED" and job["record"]["exit_code"] == 2
    assert "No such file or directory" in run("logs", job_id, "--stderr").stdout


@lab
def test_hold_release_cancel(run, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    # `scontrol hold` of a job that already started succeeds and leaves it RUNNING (seen in
    # CI on an idle lab), so the job waits on a blocker until it has been held.
    submit = ("submit", "command", "-P", "command=sleep 60", "--log-dir", str(workdir))
    blocker = run(*submit).stdout.strip()
    job_id = run(*submit, "-d", f"afterok:{blocker}").stdout.strip()
    assert json.loads(run("hold", job_id, "--json").stdout) == {
        "action": "hold",
        "job_ids": [job_id],
        "already_running": [],  # it waits on the blocker: the hold keeps it from starting
    }
    job = json.loads(run("status", job_id, "--json").stdout)["jobs"][0]
    assert job["state"] == "PENDING" and job["reason"] == "JobHeldUser"
    assert run("release", job_id).exit_code == 0
    assert run("cancel", job_id, blocker).exit_code == 0
    final = json.loads(run("wait", job_id, "--json", "--timeout", "60").stdout)["jobs"][0]
    assert final["state"] == "CANCELLED"


@lab
def test_hold_of_a_running_job_says_it_runs_on(run, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    """`scontrol hold` of a running job exits 0 and the job runs on (RUNNING, JobHeldUser):
    hold says so, in text and in --json, rather than a bare "held"."""
    job_id = run(
        "submit", "command", "-P", "command=sleep 60", "--log-dir", str(workdir)
    ).stdout.strip()
    try:
        deadline = time.monotonic() + 120
        while json.loads(run("status", job_id, "--json").stdout)["jobs"][0]["state"] != "RUNNING":
            assert time.monotonic() < deadline, f"job {job_id} not RUNNING after 120 s"
            time.sleep(1)
        text = run("hold", job_id)
        assert text.exit_code == 0, text.output
        assert text.stdout.splitlines() == [
            f"held: {job_id}",
            f"  {job_id} was already running: the hold does not stop it, only keeps it from "
            f"starting again if it is requeued (jobsmith cancel {job_id} stops it)",
        ]
        doc = json.loads(run("hold", job_id, "--json").stdout)
        assert doc == {"action": "hold", "job_ids": [job_id], "already_running": [job_id]}
        job = json.loads(run("status", job_id, "--json").stdout)["jobs"][0]
        assert job["state"] == "RUNNING", job  # the truth told: held, and running on
    finally:
        run("cancel", job_id)


@lab
def test_control_of_unknown_job_is_a_clear_error(run) -> None:  # type: ignore[no-untyped-def]
    result = run("hold", "999999")
    assert result.exit_code == 6  # unknown job (docs/exit-status.md)
    assert "999999" in one_error_line(result) or "Invalid job id" in result.stderr


@lab
def test_site_check_and_init_against_the_live_cluster(run, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    check = run("site", "check", "--json")
    assert check.exit_code == 0, check.output
    report = json.loads(check.stdout)
    assert report["cluster"] == "jobsmithlab"
    assert not [m for m in report["mismatches"] if m["severity"] == "error"]
    out = workdir / "site.yaml"
    assert run("site", "init", "-o", str(out)).exit_code == 0
    assert "cluster: jobsmithlab" in out.read_text()
    again = run("site", "init", "-o", str(out))
    assert again.exit_code == 2 and "--force" in one_error_line(again)


@lab
@pytest.mark.parametrize("name", SHIPPED)
def test_every_template_passes_sbatch_test_only(run, workdir: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    template = TemplateLibrary([shipped_library()]).get(name)
    params = example_params(template, workdir)
    extra = ["--partition", "gpu"] if template.spec.resources.references().get("gpus") else []
    if name == "torch_train":
        params["cpus"] = 2  # the lab node has 2 CPUs
    kinds = {k: spec.type for k, spec in template.spec.params.items()}
    args = [a for k, v in params.items() for a in ("-P", f"{k}={_cli_value(v, kinds.get(k))}")]
    result = run("submit", name, *args, *extra, "--test-only", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["test_only"]["ok"], data["test_only"]["message"]


def _cli_value(value: object, kind: object = None) -> str:
    """A value as typed after -p: a list is comma-separated, except `args`, which the CLI
    splits like a shell command line."""
    if not isinstance(value, list):
        return str(value)
    if kind is ParamType.ARGS:
        return shlex.join(map(str, value))
    return ",".join(map(str, value))


@lab
def test_ffmpeg_chunks_then_concat_run_on_slurm(run, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-loglevel",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc=duration=6:size=160x120:rate=10",
            "-c:v",
            "libx264",
            "clip.mp4",
        ],
        check=True,
        cwd=workdir,
    )
    chunks = run(
        "submit",
        "ffmpeg_chunks",
        "-P",
        "input=clip.mp4",
        "-P",
        "output_dir=chunks",
        "-P",
        "duration_s=6",
        "-P",
        "chunk_seconds=2",
        "-P",
        "audio=none",
        "--throttle",
        "2",
        "--log-dir",
        str(workdir / "logs"),
    )
    assert chunks.exit_code == 0, chunks.output
    chunk_id = chunks.stdout.strip()
    concat = run(
        "submit",
        "ffmpeg_concat",
        "-P",
        "chunk_dir=chunks",
        "-P",
        "chunks=3",
        "-P",
        "output=joined.mkv",
        "--after-ok",
        chunk_id,
        "--log-dir",
        str(workdir / "logs"),
    )
    concat_id = concat.stdout.strip()
    waited = run("wait", chunk_id, concat_id, "--timeout", "300", "--json")
    assert waited.exit_code == 0, waited.output
    jobs = {j["job_id"]: j for j in json.loads(waited.stdout)["jobs"]}
    assert jobs[chunk_id]["task_counts"] == {"COMPLETED": 3}
    duration = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-show_entries",
            "format=duration",
            "-of",
            "csv=p=0",
            str(workdir / "joined.mkv"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert abs(float(duration) - 6.0) < 0.3


@lab
def test_bwa_align_runs_on_slurm(run, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    write_bwa_inputs(workdir, ("S1", "S2"))
    sub = run(
        "submit",
        "bwa_align",
        "-P",
        "reference=genome.fa",
        "-P",
        "samples=reads/samples.tsv",
        "-P",
        "output_dir=aligned",
        "--log-dir",
        str(workdir / "logs"),
    )
    assert sub.exit_code == 0, sub.output
    job_id = sub.stdout.strip()
    waited = run("wait", job_id, "--timeout", "300", "--json")
    assert waited.exit_code == 0, waited.output
    for sample in ("S1", "S2"):
        count = subprocess.run(
            ["samtools", "view", "-c", "-F", "4", str(workdir / "aligned" / f"{sample}.bam")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert int(count) > 0


def test_the_job_environment_rule() -> None:
    from jobsmith.adapters.environment_rule import JobEnvironmentRule

    rule = JobEnvironmentRule.for_site(["LAB_KEEP_*", "OMP_NUM_THREADS"], ["LAB_*"])
    for name in (
        "ANTHROPIC_API_KEY",
        "github_token",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "SSH_AUTH_SOCK",
        "LAB_THING",
        "LAB_KEEP_ME",  # allowed by a pattern, withheld by policy.secret_env: withheld wins
        "HF_TOKEN",
        "DATABASE_URL",
        "TOKENIZERS_PARALLELISM",  # harmless, but no one named it
        "SBATCH_PARTITION",
        "SLURM_CPUS_PER_TASK",  # a head job's own would become the new job's srun option
        "SLURM_CONF",  # the site's, never the caller's (scheduler.slurm_conf)
        "SLURM_CONF_SERVER",
    ):
        assert not rule.allows(name), name
    for name in (
        "PATH",
        "HOME",
        "LD_LIBRARY_PATH",
        "MODULEPATH",
        "LMOD_CMD",
        "LC_ALL",
        "CONDA_PREFIX",
        "http_proxy",
        "OMP_NUM_THREADS",  # named by the site
    ):
        assert rule.allows(name), name


@lab
def test_a_real_job_never_sees_the_agents_secrets(  # type: ignore[no-untyped-def]
    run, user_site, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_site(
        "policy:\n  secret_env: [LAB_SITE_*]\n"
        "jobs:\n  environment:\n    allow: [JOBSMITH_TEST_KEEP, LAB_SITE_*]\n"
    )
    secrets = {
        "ANTHROPIC_API_KEY": "sk-ant-sekrit1",
        "GITHUB_TOKEN": "ghp_sekrit2",
        "AWS_SECRET_ACCESS_KEY": "sekrit3",
        "LAB_SITE_LICENSE": "sekrit4",
        # what issue 24's hostile run found arriving in jobs
        "MYSQL_PWD": "sekrit5",
        "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/sekrit6",
        "GH_PAT": "ghp_sekrit7",
    }
    proxy = "http://proxyuser:sekrit8@proxy.example:3128"
    needed = {"LANG": "C.UTF-8", "MODULEPATH": f"{workdir}/modulefiles"}
    passed = {**needed, "https_proxy": proxy, "JOBSMITH_TEST_KEEP": "kept-value"}
    for key, value in {**secrets, **passed, "JOBSMITH_TEST_UNNAMED": "dropped"}.items():
        monkeypatch.setenv(key, value)
    job_id = run("submit", "command", "-P", "command=env", "--log-dir", str(workdir)).stdout
    job_id = job_id.strip()
    assert run("wait", job_id, "--timeout", "120").exit_code == 0
    printed = (workdir / f"command_{job_id}.out").read_text()
    assert "JOBSMITH_TEST_KEEP=kept-value" in printed and "PATH=" in printed
    job_env = dict(line.split("=", 1) for line in printed.splitlines() if "=" in line)
    assert {k: job_env.get(k) for k in needed} == needed and job_env.get("HOME")
    assert job_env["PATH"] == os.environ["PATH"]
    for key, value in secrets.items():
        assert key not in printed and value not in printed
    assert "sekrit8" not in printed and "proxyuser" not in printed
    assert job_env["https_proxy"] == "http://proxy.example:3128"
    assert "JOBSMITH_TEST_UNNAMED" not in printed  # no one named it: a denylist would pass it


#: a cli_filter that moves every job to partition long (what a hostile copy of the
#: site's slurm.conf can do to a checked job through SLURM_CONF)
CLI_FILTER_LUA = """
function slurm_cli_setup_defaults(options, early_pass) return slurm.SUCCESS end
function slurm_cli_pre_submit(options, offset)
  options["partition"] = "long"; return slurm.SUCCESS
end
function slurm_cli_post_submit(offset, jobid, stepid) return slurm.SUCCESS end
"""


def _slurm_conf_copy(into: Path, extra: str, lua: str = CLI_FILTER_LUA) -> Path:
    """A copy of the lab's /etc/slurm (what alice can read) with extra slurm.conf lines
    (a key given twice: the later wins) and `lua` as its cli_filter."""
    into.mkdir()
    for item in Path("/etc/slurm").iterdir():
        if item.is_file() and os.access(item, os.R_OK):
            (into / item.name).write_bytes(item.read_bytes())
    conf = into / "slurm.conf"
    conf.write_text(conf.read_text() + extra)
    (into / "cli_filter.lua").write_text(lua)
    return conf


def _partition_of(job_id: str) -> str:
    """The partition accounting recorded (its first rows may still be half written)."""
    for _ in range(60):
        argv = ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "partition"]
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
        if out:
            return out
        time.sleep(0.5)
    raise AssertionError(f"sacct never recorded a partition for job {job_id}")


@lab
def test_a_callers_slurm_conf_cannot_rewrite_a_checked_job(  # type: ignore[no-untyped-def]
    run, user_site, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = _slurm_conf_copy(tmp_path / "etc", "CliFilterPlugins=cli_filter/lua\n")
    monkeypatch.setenv("SLURM_CONF", str(hostile))
    monkeypatch.setenv("SLURM_CONF_SERVER", "elsewhere.example:6817")
    submitted = run("submit", "command", "-p", "debug", "-P", "command=true")
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.stdout.strip()
    assert run("wait", job_id, "--timeout", "120").exit_code == 0
    assert _partition_of(job_id) == "debug"  # with the caller's slurm.conf: long


@lab
def test_the_site_names_the_slurm_conf_the_commands_read(  # type: ignore[no-untyped-def]
    run, user_site, tmp_path: Path
) -> None:
    # the site's copy sends the commands to a port no controller listens on
    unreachable = _slurm_conf_copy(tmp_path / "etc", "SlurmctldPort=9\n")
    user_site(f"scheduler:\n  slurm_conf: {unreachable}\n  command_timeout_s: 20\n")
    result = run("submit", "command", "-P", "command=true")
    assert result.exit_code in (4, 5), result.output  # Slurm's error, or no answer
    assert one_error_line(result)


@lab
def test_a_job_slurm_changed_after_the_check_is_stopped_at_the_first_poll(  # type: ignore[no-untyped-def]
    run, user_site, tmp_path: Path
) -> None:
    # the site's own slurm.conf has a cli_filter that moves every job to long, and the
    # site did not declare it (scheduler.adjusts): the job runs, but not as checked
    rewriting = _slurm_conf_copy(tmp_path / "etc", "CliFilterPlugins=cli_filter/lua\n")
    user_site(f"scheduler:\n  slurm_conf: {rewriting}\n")
    submitted = run("submit", "command", "-p", "debug", "-P", "command=sleep 300")
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.stdout.strip()
    assert _partition_of(job_id) == "long"  # what Slurm made of it
    try:
        # the first poll that reads the job's accounting record holds it if it waits (a
        # busy lab), cancels it if it runs; under CI's load slurmdbd has taken over 60 s
        # to write a running job's record (the bound is for a hang, not a speed)
        deadline = time.monotonic() + 180
        while True:
            job = json.loads(run("status", job_id, "--json").stdout)["jobs"][0]
            held = job["state"] == "PENDING" and "Held" in str(job.get("reason"))
            if job["state"] == "CANCELLED" or held or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert job["state"] == "CANCELLED" or held, job
        told = run("status", job_id)  # the next interactive command tells it
        done = "held" if held else "cancelled"
        said = f"Slurm changed job {job_id} after jobsmith checked it (partition debug -> long)"
        assert f"{said}: {done}" in told.stderr, told.stderr
    finally:
        subprocess.run(["scancel", job_id], check=False)


@lab
def test_a_job_slurm_moved_to_another_qos_is_held_or_cancelled_at_the_first_poll(  # type: ignore[no-untyped-def]
    run, user_site, tmp_path: Path
) -> None:
    # the site's cli_filter puts every job in QoS high (alice may use it): the same poll
    # that reads the job's record (QOS, ReqTRES in sacct's fields) sees it
    lua = CLI_FILTER_LUA.replace('options["partition"] = "long"', 'options["qos"] = "high"')
    rewriting = _slurm_conf_copy(tmp_path / "etc", "CliFilterPlugins=cli_filter/lua\n", lua)
    user_site(f"scheduler:\n  slurm_conf: {rewriting}\n")
    submitted = run("submit", "command", "--qos", "normal", "-P", "command=sleep 300")
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.stdout.strip()
    try:
        deadline = time.monotonic() + 180  # as above
        while True:
            job = json.loads(run("status", job_id, "--json").stdout)["jobs"][0]
            held = job["state"] == "PENDING" and "Held" in str(job.get("reason"))
            if job["state"] == "CANCELLED" or held or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert job["state"] == "CANCELLED" or held, job
        told = run("status", job_id)
        said = f"Slurm changed job {job_id} after jobsmith checked it (QoS normal -> high)"
        assert said in told.stderr, told.stderr
    finally:
        subprocess.run(["scancel", job_id], check=False)
