"""What one `jobsmith submit` and one watcher cycle cost slurmctld, counted by slurmctld
(issue 26): `sdiag` before and after each, by message type, against the table
"Controller RPCs per command" in benchmarks/README.md (bench_rpc_table.py measures it).
A change that makes either ask the controller more fails here, not only in a benchmark.

sdiag counts every client of the controller, and its per-user table every process of
the user (all test workers run as the same user), so the test runs alone, after the
rest. The lab lets any user run sdiag (PrivateData is not set); the RPCs that slurmd,
sdiag itself and the jobs send are not the command's and are left out (NOT_THE_COMMAND).
"""

from __future__ import annotations

import getpass
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from lab_cli import js
from slurm_stats import NOT_THE_COMMAND, parse_by_type, parse_by_user

pytestmark = [pytest.mark.alone, pytest.mark.usefixtures("lab_cluster")]

README = Path(__file__).resolve().parent.parent / "benchmarks" / "README.md"
_ROW = re.compile(r"^\|\s*`?(?P<name>[^|`]+?)`?\s*\|\s*(?P<total>\d+)\s*\|(?P<kinds>[^|]*)\|")


def documented(command: str) -> dict[str, int]:
    """The README's row for command: RPC counts by message type."""
    for line in README.read_text().splitlines():
        row = _ROW.match(line)
        if row and row["name"] == command:
            kinds = (k.split() for k in row["kinds"].split(",") if k.strip())
            return {name: int(count) for name, count in kinds}
    raise AssertionError(f"benchmarks/README.md has no RPC row for {command!r}")


def sdiag() -> tuple[dict[str, int], dict[str, int]]:
    """(counts by message type, counts by user) from `sdiag`."""
    text = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    return parse_by_type(text), parse_by_user(text)


def served(before: tuple[dict[str, int], dict[str, int]]) -> tuple[dict[str, int], int]:
    """What the controller served since before: by message type (the command's kinds
    only), and this user's total."""
    kinds, users = sdiag()
    delta = {
        k: n - before[0].get(k, 0)
        for k, n in kinds.items()
        if n != before[0].get(k, 0) and k not in NOT_THE_COMMAND
    }
    me = getpass.getuser()
    return delta, users.get(me, 0) - before[1].get(me, 0)


def within(seen: dict[str, int], limit: dict[str, int]) -> list[str]:
    """The message types seen more often than the limit allows (unlisted: none allowed)."""
    return [f"{k} {n} > {limit.get(k, 0)}" for k, n in sorted(seen.items()) if n > limit.get(k, 0)]


def test_a_submit_and_a_watcher_cycle_ask_the_controller_no_more_than_documented(
    user_site: object, workdir: Path
) -> None:
    before = sdiag()
    sub = js("submit", "command", "-P", "command=sleep 120", "-t", "5", "--log-dir", str(workdir))
    assert sub.exit_code == 0, sub.output
    job_id = sub.stdout.strip()
    try:
        submit_kinds, submit_mine = served(before)
        _until_running_in_accounting(job_id)  # the row's case: a running job, accounted
        before = sdiag()
        cycle = js("watch", "--once", "--json")
        assert cycle.exit_code == 0, cycle.output
        watch_kinds, watch_mine = served(before)
    finally:
        subprocess.run(["scancel", job_id], check=False)
    limit = documented("submit")
    assert within(submit_kinds, limit) == [], (submit_kinds, limit)
    assert submit_mine <= sum(limit.values()), (submit_mine, submit_kinds)
    limit = documented("watch --once")
    assert within(watch_kinds, limit) == [], (watch_kinds, limit)
    assert watch_mine <= sum(limit.values()), (watch_mine, watch_kinds)
    # the counts are real: the submit was seen, and the cycle polled the job
    assert submit_kinds.get("REQUEST_SUBMIT_BATCH_JOB") == 1
    doc = json.loads(cycle.stdout)
    assert doc["watched"] == 1 and doc["scheduler_ok"], doc


def _until_running_in_accounting(job_id: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", job_id, "--format=State"],
            capture_output=True, text=True, check=False,
        ).stdout  # fmt: skip
        if out.strip() == "RUNNING":
            return
        time.sleep(1)
    raise AssertionError(f"job {job_id} not RUNNING in accounting after {timeout_s:.0f}s")
