"""Running the jobsmith CLI in-process against the lab cluster, for the CLI-level tests."""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta
from pathlib import Path

from click.testing import CliRunner, Result

from jobsmith.agent.faces.cli import cli

LAB_SITE = Path(__file__).resolve().parent.parent / "site_config" / "examples" / "lab.yaml"


def js(*args: str, input: str | None = None) -> Result:
    """`jobsmith --site <lab example> ARGS…`, with the environment the test set up (and
    input as its stdin)."""
    argv = ["--site", str(LAB_SITE), *args]
    return CliRunner().invoke(cli, argv, input=input, catch_exceptions=False)


def write_user_site(config_dir: Path, workdir: Path, extra_yaml: str = "") -> None:
    """The user's own site file: the test's directory as an allowed root, plus extra_yaml."""
    (config_dir / "site.yaml").write_text(
        f"paths:\n  allowed_roots: ['~', '/scratch/$USER', '{workdir}']\n{extra_yaml}"
    )


def submit_oom_array(workdir: Path) -> str:
    """A 4-task file_array under --mem 100M whose task 2 holds ~300 MB for 6 s (long enough
    for the 2-second memory sampler to kill it); returns Slurm's array id."""
    hog = "python3 -c 'import time; x = bytearray(300 << 20); time.sleep(6)'\n"
    for i in range(4):
        (workdir / f"t{i}.sh").write_text(hog if i == 2 else "echo fine\n")
    files = ",".join(f"t{i}.sh" for i in range(4))
    sub = js(
        "submit",
        "file_array",
        "-P",
        f"files={files}",
        "-P",
        "program=bash",
        "--mem",
        "100M",
        "--log-dir",
        str(workdir),
    )
    assert sub.exit_code == 0, sub.output
    return sub.stdout.strip()


def jobs_named(name: str) -> set[str]:
    """Ids of the jobs named name that Slurm has (accounting or the queue, last 30 min)."""
    since = (datetime.now() - timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%S")
    acct = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-S", since, f"--name={name}", "--format=JobIDRaw"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    queue = subprocess.run(
        ["squeue", "--me", "-h", "-t", "all", f"--name={name}", "-o", "%A"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return set(acct) | set(queue)
