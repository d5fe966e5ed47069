"""The README's "Use it on your cluster", run as it is written by a second lab user.

That user (bob, made by `scripts/slurm-lab up` with a Slurm account and nothing else)
gets a fresh start each time: no jobsmith, no site file, no state, no crontab. The README's
block runs in a clean login environment as that user, with one change: the `git clone`
line is replaced by a copy of this checkout's tracked files at the same place. pip fetches
jobsmith's dependencies from PyPI, as it would for a user.

It needs root (to switch users), so `scripts/test` runs it as root after the lab user's
runs, as it does the MCP server's two-user test; as the lab user it is skipped.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USER = os.environ.get("JOBSMITH_NEW_USER", "bob")


def readme_block() -> str:
    """The first sh block of the README's "Use it on your cluster" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Use it on your cluster", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match, "README: no sh block under 'Use it on your cluster'"
    return match.group(1)


def test_the_readme_block_installs_from_a_clone_and_runs_a_first_job() -> None:
    """(Runs without root too: the block's shape, which the test below depends on.)"""
    block = readme_block()
    clones = [line for line in block.splitlines() if line.startswith("git clone ")]
    assert len(clones) == 1 and clones[0].endswith(" ~/src/jobsmith")
    for needed in ("pip install ~/src/jobsmith", "site init", "submit", "wait", "watch --install"):
        assert needed in block


def _fresh(home: Path, uid: int, gid: int) -> None:
    """The user as a colleague would be before reading the README."""
    for path in (".venvs", ".config/jobsmith", ".local/state/jobsmith", "src"):
        shutil.rmtree(home / path, ignore_errors=True)
    subprocess.run(["crontab", "-r", "-u", USER], capture_output=True, check=False)
    src = home / "src" / "jobsmith"
    src.mkdir(parents=True)
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        target = src / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target, follow_symlinks=False)
    for path in [home / "src", *(home / "src").rglob("*")]:
        os.lchown(path, uid, gid)


@pytest.mark.skipif(
    os.getuid() != 0 or shutil.which("runuser") is None,
    reason="switches to a second lab user: run as root (scripts/test does, after the lab "
    "user's runs)",
)
def test_a_new_user_follows_the_readme_to_a_first_job_and_a_watcher() -> None:
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        pytest.fail(f"no user {USER}: scripts/slurm-lab up makes one")
    home = Path(entry.pw_dir)
    _fresh(home, entry.pw_uid, entry.pw_gid)
    script = "\n".join(
        line for line in readme_block().splitlines() if not line.startswith("git clone ")
    )
    login = ["HOME=" + str(home), f"USER={USER}", f"LOGNAME={USER}", "PATH=/usr/bin:/bin"]
    run = subprocess.run(
        ["runuser", "-u", USER, "--", "env", "-i", *login,
         "bash", "-euo", "pipefail", "-c", f"cd ~\n{script}"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    output = run.stdout + run.stderr
    try:
        assert run.returncode == 0, output
        assert (home / ".config" / "jobsmith" / "site.yaml").is_file()
        assert "no mismatches" in output, output
        assert "hello from " in run.stdout, output
        job_id = re.search(r"submitted as Slurm job (\d+)", output)
        assert job_id, output
        owner = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", job_id.group(1), "-o", "User,State"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert owner == f"{USER}|COMPLETED", owner
        assert "submit command" in run.stdout  # the glance's line for the session
        crontab = subprocess.run(
            ["crontab", "-l", "-u", USER], capture_output=True, text=True, check=True
        ).stdout
        assert "jobsmith watch --once" in crontab
    finally:
        subprocess.run(["crontab", "-r", "-u", USER], capture_output=True, check=False)
