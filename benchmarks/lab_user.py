"""The lab user a benchmark drives jobsmith as: this checkout's jobsmith on the lab's site
file, run as that user in a throw-away /scratch workspace with a private jobsmith home.

The benchmarks that time the CLI as a user (bench_plan.py, bench_canary.py,
bench_status_array.py; bench_agent_overhead.py and bench_chat.py use the paths) set it up
here, the same way, so a change to that set-up (a path, the user's environment) is made
once and every benchmark measures the same thing. Nothing runs at import.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: the checkout these benchmarks belong to
ROOT = Path(__file__).resolve().parent.parent
#: the lab cluster's site file
SITE = ROOT / "site_config" / "examples" / "lab.yaml"


def add_checkout_options(parser: argparse.ArgumentParser) -> None:
    """`--checkout` (the jobsmith to time, this one unless told) and `--before` (another
    checkout timed in the same rounds), which every benchmark comparing two versions of
    jobsmith takes the same way; each is a path for jobsmith_argv."""
    parser.add_argument(
        "--checkout",
        type=Path,
        default=ROOT,
        help="the jobsmith checkout to time (default: this one)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="another checkout timed in the same rounds (e.g. `git archive` of the base)",
    )


def jobsmith_argv(checkout: Path) -> list[str]:
    """jobsmith on the lab's site file, the start of every command line the benchmarks
    time: the checkout's .venv script (made by scripts/setup), or (a worktree, an
    exported commit) this Python with the checkout's src/ first on PYTHONPATH."""
    script = checkout / ".venv" / "bin" / "jobsmith"
    if script.exists():
        return [str(script), "--site", str(SITE)]
    path = f"PYTHONPATH={checkout / 'src'}"
    return ["env", path, sys.executable, "-m", "jobsmith", "--site", str(SITE)]


class AsUser:
    """Commands as the lab user, with a private jobsmith home, from a scratch directory;
    jobsmith is the checkout's (this one unless told, see jobsmith_argv)."""

    def __init__(self, user: str, work: Path, checkout: Path = ROOT) -> None:
        self.user = user
        self.work = work
        self.checkout = checkout
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(Path("~" + user).expanduser()),
            "USER": user,
            "LOGNAME": user,
            "JOBSMITH_CONFIG_DIR": str(work / "config"),
            "JOBSMITH_STATE_DIR": str(work / "state"),
        }
        (work / "config").mkdir(parents=True)
        (work / "config" / "site.yaml").write_text(
            f"paths:\n  allowed_roots: ['~', '/scratch/$USER', '{work}']\n"
        )

    def run(self, *argv: str) -> str:
        """argv as the user; its stdout (a failure ends the benchmark, with its stderr)."""
        out = subprocess.run(
            ["runuser", "-u", self.user, "--", "env", "-i", *self._env(), *argv],
            capture_output=True,
            text=True,
            cwd=self.work,
        )
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({out.returncode}): {out.stderr}")
        return out.stdout

    def jobsmith(self, *argv: str) -> str:
        """`jobsmith --site <lab> argv…` as the user (see run)."""
        return self.run(*jobsmith_argv(self.checkout), *argv)

    def _env(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.env.items()]


@contextmanager
def scratch_user(user: str, checkout: Path = ROOT) -> Iterator[AsUser]:
    """The user in a fresh directory under /scratch that anyone may write (the user runs
    there, root set it up), removed with everything in it on leaving."""
    with tempfile.TemporaryDirectory(dir="/scratch") as tmp:
        os.chmod(tmp, 0o777)
        yield AsUser(user, Path(tmp), checkout)
