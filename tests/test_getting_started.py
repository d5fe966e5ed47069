"""Every shell block of README.md and docs/, run as it is written by a second lab user.

That user (bob, made by `scripts/slurm-lab up` with a Slurm account and nothing else)
gets a fresh start: no jobsmith, no site file, no state, no crontab. The blocks run in a
clean login environment as that user, in this order:

1. the README's blocks, in order, except its "Uninstall" section: install (the `git
   clone` line replaced by a copy of this checkout's tracked files at the same place;
   pip fetches jobsmith's dependencies from PyPI, as it would for a user), a first job,
   everyday tasks, a failure and its re-run, the watcher installed and stopped;
2. each page of docs/, its blocks in order, in a directory of its own under bob's home,
   with the README's venv on PATH;
3. the README's "Uninstall" blocks, after which nothing of jobsmith is left.

A block that cannot run on the lab has `<!-- not run: REASON -->` on the line above its
fence; NOT_RUN below lists the same blocks (file, first line, reason), and
test_the_not_run_markers_are_the_listed_ones checks that the two agree.

Steps 1-3 need root (to switch users), so `scripts/test` runs this file as root after
the lab user's runs, as it does the MCP server's two-user test; as the lab user they are
skipped. The tests of the blocks' shape and markers run anywhere.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USER = os.environ.get("JOBSMITH_NEW_USER", "bob")
README = ROOT / "README.md"
DOCS = ROOT / "docs"
UNINSTALL = "Uninstall"

#: (file, the block's first line, why it cannot run on the lab): the blocks marked
#: `<!-- not run: … -->` in the source, the same words
NOT_RUN: list[tuple[str, str, str]] = [
    (
        "README.md",
        "scripts/setup   # installs, starts a lab Slurm cluster, runs a real end-to-end job",
        "needs root; the test suite is what runs the other blocks",
    ),
    (
        "docs/following-jobs.md",
        "jobsmith watch --install         # cron runs `jobsmith watch --once` every 5 minutes",
        "job ids are placeholders; watch runs until stopped",
    ),
    (
        "docs/following-jobs.md",
        "jobsmith nodes                   # the nodes left out of your jobs, why, since and "
        "until when",
        "the blocklist is empty until a node fails under your jobs",
    ),
    (
        "docs/mcp.md",
        "claude mcp add jobsmith -- jobsmith --site /etc/jobsmith/site.yaml mcp",
        "needs Claude Code (the claude command)",
    ),
    (
        "docs/mcp.md",
        "claude mcp add --transport http jobsmith http://127.0.0.1:8765/mcp --header "
        '"Authorization: Bearer $(cat ~/.config/jobsmith/mcp_token)"',
        "needs Claude Code and a running jobsmith mcp --http",
    ),
    (
        "docs/media.md",
        "jobsmith transcode clip.mp4 clip.mkv --chunk-seconds 60 --preset fast   "
        "# one 'JOBID<TAB>STEP' per job",
        "needs a video file, clip.mp4",
    ),
    (
        "docs/media.md",
        "jobsmith render-frames scene.blend renders/ --frames 1-250 --frames-per-task 10 "
        "--video scene.mp4 --fps 24",
        "needs a Blender scene, scene.blend",
    ),
    (
        "docs/media.md",
        "jobsmith frames --open                 # the newest session's thumbnails, as a page",
        "needs a session that rendered or transcoded",
    ),
    (
        "docs/model.md",
        "jobsmith ask \"run 'python train.py --epochs 3' on the cluster\"   "
        "# prints the answer, then `submitted: ID`",
        "needs a live model and an API key",
    ),
    (
        "docs/pipelines.md",
        "jobsmith pipeline run snakemake workflow/Snakefile --launch-dir runs/cohort1 "
        "--params-file config.yaml",
        "needs Snakemake or Nextflow and a workflow to run",
    ),
    (
        "docs/policy.md",
        "jobsmith pending                 # held steps, with the exact script, its sha256 "
        "and its cost",
        "step and session ids are placeholders; a held step needs a job above a threshold",
    ),
    (
        "docs/ssh.md",
        "ssh -M -S ~/.ssh/jobsmith-login1.example.org.sock -o ControlPersist=yes -fN "
        "login1.example.org",
        "needs a login node that asks for a second factor",
    ),
    (
        "docs/templates.md",
        "jobsmith submit ffmpeg_chunks -P input=clip.mp4 -P output_dir=chunks "
        "-P duration_s=600 --throttle 8",
        "needs input files (clip.mp4, genome.fa, samples.tsv) and job ids",
    ),
    (
        "docs/testing.md",
        ".venv/bin/pytest -p no:cacheprovider tests/test_agent_logic_*.py -q   # ~2 s, no Slurm",
        "runs in a developer's checkout, with its .venv",
    ),
    (
        "docs/testing.md",
        ".venv/bin/pip install mutmut==3.8.1      # a dev tool, not in pyproject: only this "
        "note uses it",
        "runs in a developer's checkout, with its .venv, for minutes",
    ),
]

_FENCE = re.compile(r"^( *)```(\w*)\s*$")
_MARK = re.compile(r"^\s*<!-- not run: (.+?) -->\s*$")


@dataclass(frozen=True)
class Block:
    file: str  # relative to the checkout
    section: str  # the nearest heading above it
    code: str
    not_run: str | None  # the marker's reason, if it has one

    @property
    def first_line(self) -> str:
        return self.code.splitlines()[0].strip() if self.code.strip() else ""


def shell_blocks(path: Path) -> list[Block]:
    """The sh blocks of a Markdown file, in order (fences may be indented, in a list)."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    section, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#") and not line.startswith("#!"):
            section = line.lstrip("#").strip()
        fence = _FENCE.match(line)
        if fence is None:
            i += 1
            continue
        indent, language = len(fence.group(1)), fence.group(2)
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if language in ("sh", "bash", "shell", "console"):
            mark = _MARK.match(lines[i - 1]) if i else None
            code = "\n".join(x[indent:] for x in lines[i + 1 : end]) + "\n"
            name = str(path.relative_to(ROOT))
            blocks.append(Block(name, section, code, mark.group(1) if mark else None))
        i = end + 1
    return blocks


def doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def readme_blocks(*, uninstall: bool) -> list[Block]:
    """The README's runnable blocks: those of its Uninstall section, or all the others."""
    return [
        b
        for b in shell_blocks(README)
        if b.not_run is None and (b.section == UNINSTALL) == uninstall
    ]


def readme_script() -> str:
    """Steps 1's script: the README's blocks before Uninstall, the clone line taken out."""
    code = "".join(b.code for b in readme_blocks(uninstall=False))
    return "\n".join(line for line in code.splitlines() if not line.startswith("git clone "))


# --- anywhere: the shape the runs below depend on ------------------------------------------


def test_the_readme_installs_from_a_clone_runs_a_first_job_and_uninstalls() -> None:
    """(Runs without root too: the blocks' shape, which the runs below depend on.)"""
    code = "".join(b.code for b in readme_blocks(uninstall=False))
    clones = [line for line in code.splitlines() if line.startswith("git clone ")]
    assert len(clones) == 1 and clones[0].endswith(" ~/src/jobsmith")
    for needed in ("pip install ~/src/jobsmith", "site init", "submit", "wait", "watch --install"):
        assert needed in code
    assert "jobsmith watch --uninstall" in code  # the watcher is stopped again
    removed = "".join(b.code for b in readme_blocks(uninstall=True))
    for gone in ("~/.venvs/jobsmith", "~/.local/state/jobsmith", "~/.config/jobsmith"):
        assert gone in removed


def test_the_not_run_markers_are_the_listed_ones() -> None:
    marked = [
        (b.file, b.first_line, b.not_run)
        for path in [README, *doc_pages()]
        for b in shell_blocks(path)
        if b.not_run is not None
    ]
    assert sorted(marked) == sorted(NOT_RUN)


def test_the_readme_is_for_a_user() -> None:
    """Issue 25: at most about 250 lines; the lab and CI live in CONTRIBUTING.md."""
    text = README.read_text()
    assert len(text.splitlines()) <= 260
    for extra in ("[agent]", "[mcp]", "[ssh]"):
        assert extra in text
    for name in ("JOBSMITH_STATE_DIR", "JOBSMITH_CONFIG_DIR", "CONTRIBUTING.md"):
        assert name in text
    # the two commands are the README's, in one short section at its end (project rule:
    # .ci/run calls the README's test command); the lab's details stay in CONTRIBUTING.md
    ci = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip().startswith("scripts/")
    ]
    assert ci == ["scripts/test"]
    section = text.split("## From a checkout", 1)[1].split("\n## ", 1)[0]
    for command in ("scripts/setup", "scripts/test"):
        assert f"\n{command} " in section
        assert text.count(command) == section.count(command)
    assert len(section.splitlines()) <= 15


# --- as root: the blocks run, as a second user ---------------------------------------------

needs_root = pytest.mark.skipif(
    os.getuid() != 0 or shutil.which("runuser") is None,
    reason="switches to a second lab user: run as root (scripts/test does, after the lab "
    "user's runs)",
)


def _fresh(home: Path, uid: int, gid: int) -> None:
    """The user as a colleague would be before reading the README."""
    for path in (".venvs", ".config/jobsmith", ".local/state/jobsmith", "src", "docs-run"):
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


def _as_user(home: Path, script: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    login = ["HOME=" + str(home), f"USER={USER}", f"LOGNAME={USER}", "PATH=/usr/bin:/bin"]
    return subprocess.run(
        ["runuser", "-u", USER, "--", "env", "-i", *login,
         "bash", "-euo", "pipefail", "-c", f"cd ~\n{script}"],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def _crontab() -> str:
    return subprocess.run(
        ["crontab", "-l", "-u", USER], capture_output=True, text=True, check=False
    ).stdout


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        pytest.fail(f"no user {USER}: scripts/slurm-lab up makes one")
    home = Path(entry.pw_dir)
    _fresh(home, entry.pw_uid, entry.pw_gid)
    yield home
    subprocess.run(["crontab", "-r", "-u", USER], capture_output=True, check=False)


@needs_root
def test_a_new_user_follows_the_readme(home: Path) -> None:
    run = _as_user(home, readme_script())
    output = run.stdout + run.stderr
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
    assert "out_of_memory" in output.lower() or "out of memory" in output.lower(), output
    assert "jobsmith watch --once" in run.stdout, output  # `watch --install` said so
    assert "jobsmith watch" not in _crontab()  # and the README's last block stopped it


@needs_root
@pytest.mark.parametrize("page", [p.name for p in doc_pages()])
def test_each_page_of_docs_runs(home: Path, page: str) -> None:
    blocks = [b for b in shell_blocks(DOCS / page) if b.not_run is None]
    if not blocks:
        pytest.skip(f"docs/{page} has no shell block to run")
    if not (home / ".venvs" / "jobsmith" / "bin" / "jobsmith").exists():
        pytest.fail("the README's install did not run first (test_a_new_user_follows_the_readme)")
    stem = page.removesuffix(".md")
    script = (
        "export PATH=~/.venvs/jobsmith/bin:$PATH\n"
        f"mkdir -p ~/docs-run/{stem} && cd ~/docs-run/{stem}\n" + "".join(b.code for b in blocks)
    )
    run = _as_user(home, script)
    assert run.returncode == 0, f"docs/{page}:\n{run.stdout}{run.stderr}"


@needs_root
def test_the_readme_uninstall_leaves_nothing(home: Path) -> None:
    script = "".join(b.code for b in readme_blocks(uninstall=True))
    run = _as_user(home, script)
    assert run.returncode == 0, run.stdout + run.stderr
    for gone in (".venvs/jobsmith", "src/jobsmith", ".local/state/jobsmith", ".config/jobsmith"):
        assert not (home / gone).exists(), gone
