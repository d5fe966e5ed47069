"""`jobsmith watch --install` and `--uninstall` against stand-in tables (issue 25, item 4).

The user's real crontab is never touched: `crontab` and `scrontab` here are stand-in
programs first on PATH (the same `-l` and FILE interface, the same "no crontab for"
answer), each keeping its table in a file of the test's own and counting its writes.
A stand-in scrontab may also answer as a site that disables it does.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from lab_cli import LAB_SITE

from jobsmith.agent.faces.cli import cli
from jobsmith.agent.watcher.running import trim_log

MARK = "# jobsmith watch"


class StandInTable:
    """A stand-in `crontab` or `scrontab` program and the table it keeps."""

    def __init__(self, bin_dir: Path, tool: str, *, disabled: bool = False) -> None:
        self.table = bin_dir / f"{tool}.table"
        self.writes = bin_dir / f"{tool}.writes"
        refuse = f'echo "{tool}: disabled on this cluster" >&2; exit 1\n' if disabled else ""
        script = bin_dir / tool
        script.write_text(
            "#!/bin/sh\n" + refuse + f"T={shlex.quote(str(self.table))}\n"
            'if [ "$1" = "-l" ]; then\n'
            '  [ -f "$T" ] && exec /bin/cat "$T"\n'
            '  echo "no crontab for alice" >&2; exit 1\n'
            "fi\n"
            f"echo write >> {shlex.quote(str(self.writes))}\n"
            'exec /bin/cp "$1" "$T"\n'
        )
        script.chmod(0o755)

    def lines(self) -> list[str]:
        return self.table.read_text().splitlines() if self.table.exists() else []

    def write_count(self) -> int:
        return len(self.writes.read_text().split()) if self.writes.exists() else 0


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """First on PATH: the tables' stand-ins (made by each test), and Slurm's commands as
    stand-ins that fail, so no cluster is asked anything (the install's warnings ask
    whether the cluster keeps accounting: a failed answer gives none)."""
    path = tmp_path / "stand-in-bin"
    path.mkdir()
    for name in ("sbatch", "squeue", "sacct", "scontrol", "sacctmgr", "sinfo", "sdiag"):
        (path / name).write_text("#!/bin/sh\nexit 1\n")
        (path / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{path}:/usr/bin:/bin")
    return path


def _watch(*args: str) -> Result:
    return CliRunner().invoke(cli, ["--site", str(LAB_SITE), "watch", *args])


def test_install_uses_scrontab_where_allowed_says_so_and_logs_in_the_state_dir(
    jobsmith_home: Path, bin_dir: Path
) -> None:
    scrontab, crontab = StandInTable(bin_dir, "scrontab"), StandInTable(bin_dir, "crontab")
    out = _watch("--install", "--interval", "600")
    assert out.exit_code == 0, out.output
    log = jobsmith_home / "state" / "watch.log"
    [line] = scrontab.lines()
    assert line.startswith("*/10 * * * * ") and line.endswith(f">>{log} 2>&1 {MARK}")
    assert "--site" in line and "watch --once" in line
    assert crontab.write_count() == 0
    assert f"installed with scrontab on this machine: {line}" in out.stdout
    assert f"each run's output goes to {log}" in out.stdout
    assert "to stop it: jobsmith watch --uninstall" in out.stdout


def test_install_crontab_chooses_the_crontab_over_a_usable_scrontab(
    jobsmith_home: Path, bin_dir: Path
) -> None:
    scrontab, crontab = StandInTable(bin_dir, "scrontab"), StandInTable(bin_dir, "crontab")
    out = _watch("--install", "--crontab", "--json")
    assert out.exit_code == 0, out.output
    done = json.loads(out.stdout)
    assert (done["with"], done["where"]) == ("crontab", "local")
    assert done["log"] == str(jobsmith_home / "state" / "watch.log")
    assert crontab.lines() == [done["installed"]] and scrontab.write_count() == 0


def test_install_falls_back_to_the_crontab_where_scrontab_is_disabled(
    jobsmith_home: Path, bin_dir: Path
) -> None:
    StandInTable(bin_dir, "scrontab", disabled=True)
    crontab = StandInTable(bin_dir, "crontab")
    out = _watch("--install")
    assert out.exit_code == 0, out.output
    assert "installed with crontab on this machine" in out.stdout
    assert len(crontab.lines()) == 1


def test_install_twice_keeps_one_line_and_the_users_own(jobsmith_home: Path, bin_dir: Path) -> None:
    crontab = StandInTable(bin_dir, "crontab")
    crontab.table.write_text("0 3 * * * /home/alice/backup.sh\n")
    assert _watch("--install", "--crontab").exit_code == 0
    assert _watch("--install", "--crontab", "--interval", "120").exit_code == 0
    lines = crontab.lines()
    assert lines[0] == "0 3 * * * /home/alice/backup.sh"
    assert len(lines) == 2 and lines[1].startswith("*/2 ") and lines[1].endswith(MARK)


def test_uninstall_removes_only_jobsmiths_lines_from_both_tables(
    jobsmith_home: Path, bin_dir: Path
) -> None:
    scrontab, crontab = StandInTable(bin_dir, "scrontab"), StandInTable(bin_dir, "crontab")
    scrontab.table.write_text(f"#SCRON -p debug\n*/5 * * * * /x/jobsmith watch --once {MARK}\n")
    crontab.table.write_text(f"0 3 * * * backup.sh\n*/5 * * * * /y/jobsmith watch --once {MARK}\n")
    out = _watch("--uninstall", "--json")
    assert out.exit_code == 0, out.output
    done = json.loads(out.stdout)
    assert done["from"] == ["scrontab", "crontab"] and len(done["removed"]) == 2
    assert scrontab.lines() == ["#SCRON -p debug"] and crontab.lines() == ["0 3 * * * backup.sh"]
    again = _watch("--uninstall")
    assert again.exit_code == 0, again.output
    assert "nothing removed" in again.stdout
    assert (scrontab.write_count(), crontab.write_count()) == (1, 1)  # not written again


def test_uninstall_crontab_leaves_scrontab_alone(jobsmith_home: Path, bin_dir: Path) -> None:
    scrontab, crontab = StandInTable(bin_dir, "scrontab"), StandInTable(bin_dir, "crontab")
    scrontab.table.write_text(f"*/5 * * * * a {MARK}\n")
    crontab.table.write_text(f"*/5 * * * * b {MARK}\n")
    out = _watch("--uninstall", "--crontab")
    assert out.exit_code == 0, out.output
    assert "removed from crontab on this machine" in out.stdout
    assert scrontab.lines() == [f"*/5 * * * * a {MARK}"] and crontab.lines() == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--install", "--uninstall"), "not both"),
        (("--crontab",), "--crontab goes with --install or --uninstall"),
        (("--uninstall", "--remote"), "--remote needs a site whose scheduler.kind is ssh"),
    ],
)
def test_wrong_combinations_are_one_line(
    jobsmith_home: Path, bin_dir: Path, args: tuple[str, ...], said: str
) -> None:
    crontab = StandInTable(bin_dir, "crontab")
    out = _watch(*args)
    assert out.exit_code == 2 and said in out.stderr, out.output
    assert crontab.write_count() == 0


def test_the_installed_line_runs_and_writes_its_log(
    jobsmith_home: Path, bin_dir: Path, tmp_path: Path
) -> None:
    """The command cron would run, run by sh: its output lands in watch.log (Slurm's
    commands are the failing stand-ins)."""
    crontab = StandInTable(bin_dir, "crontab")
    assert _watch("--install", "--crontab").exit_code == 0
    [line] = crontab.lines()
    command = line.split(" ", 5)[5].removesuffix(MARK)
    log = jobsmith_home / "state" / "watch.log"
    log.unlink(missing_ok=True)
    subprocess.run(["sh", "-c", command], env=dict(os.environ), timeout=120, check=False)
    assert log.is_file()


def test_the_log_is_cut_to_its_newer_half_at_a_line(tmp_path: Path) -> None:
    log = tmp_path / "watch.log"
    log.write_bytes(b"".join(b"line %04d\n" % n for n in range(300)))  # 3000 bytes
    trim_log(log, limit=4000)
    assert len(log.read_bytes()) == 3000  # under the limit: untouched
    trim_log(log, limit=1000)
    kept = log.read_bytes()
    assert len(kept) <= 500 and kept.endswith(b"line 0299\n")
    assert kept.startswith(b"line ")  # from a line's start
    trim_log(tmp_path / "missing.log")  # no log: nothing to do
