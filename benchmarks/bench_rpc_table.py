"""Controller RPCs per jobsmith command, counted by slurmctld itself (issue 26): the table
in benchmarks/README.md ("Controller RPCs per command").

Each command runs as the lab's second user (default bob) from a fresh scratch directory
with a private jobsmith home, three times in a row, each between two `sdiag` snapshots taken as
root. Counted: the RPCs by message type (sdiag counts every client, and its per-user
table every process of a user, other sessions' included), the least seen per type over
the three runs: what others send meanwhile only adds, so the least is the command's own
unless others were busy in all three windows (run it while the lab is quiet). sdiag's
own REQUEST_STATS_INFO, and what slurmd and the job itself send (a batch
script's completion, node pings), are not the command's and are left out. The submit
rows give the first run too (a fresh jobsmith home: nothing cached). The status, wait
and watch rows follow, in a second home, a `sleep 120` job that accounting has as
RUNNING, then also a held job.

    sudo .venv/bin/python benchmarks/bench_rpc_table.py [--user bob]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

from lab_user import AsUser, jobsmith_argv, scratch_user
from slurm_stats import NOT_THE_COMMAND, count_delta, floor_overhead, log, take_snapshot

from jobsmith.adapters.slurm.transport import LocalTransport

PLAN = """\
name: bench
steps:
  one: {template: command, params: {command: "true"}}
  two: {template: command, params: {command: "true"}}
  merge: {template: command, params: {command: "true"}, after_ok: [one, two]}
"""


def _js(user: AsUser, *argv: str) -> str:
    return user.jobsmith(*argv)


def measure(
    root: LocalTransport, name: str, user: AsUser, run: Callable[[], object], times: int = 3
) -> tuple[dict[str, int], dict[str, int]]:
    """The RPCs by message type that run() costs: (the first run's, the least seen per
    type over `times` runs). The first run is a fresh home's (nothing cached yet); what
    others send meanwhile only adds, so the least is the command's own in steady state."""
    windows = []
    for _ in range(times):
        before = take_snapshot(root)
        run()
        after = take_snapshot(root)
        delta = count_delta(before.ctld, after.ctld)
        windows.append({k: v for k, v in delta.items() if k not in NOT_THE_COMMAND})
        own = after.ctld_users.get(user.user, 0) - before.ctld_users.get(user.user, 0)
        log(f"{name}: {own} RPCs of {user.user}, {sum(windows[-1].values())} by type")
    return windows[0], floor_overhead(windows)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--user", default="bob")
    args = parser.parse_args()
    root = LocalTransport()
    rows: list[tuple[str, tuple[dict[str, int], dict[str, int]]]] = []
    quick = ("-P", "command=true", "-t", "5")
    with scratch_user(args.user) as user:
        plan = user.work / "plan.yaml"
        plan.write_text(PLAN)
        os.chmod(plan, 0o644)
        ids: list[str] = []

        def submit(*extra: str) -> None:
            ids.append(_js(user, "submit", "command", *quick, *extra).strip())

        def plan_run() -> None:
            ids.extend(json.loads(_js(user, "plan", "run", str(plan), "--json"))["jobs"].values())

        first: list[tuple[str, Callable[[], object]]] = [
            ("submit", submit),
            ("submit --no-advice", lambda: submit("--no-advice")),
            ("submit, 20-task array", lambda: submit("-a", "0-19")),
            ("plan run (3 steps)", plan_run),
        ]
        for name, run in first:
            rows.append((name, measure(root, name, user, run)))
        user.run("scancel", *ids)  # those that have not run yet: the lab is shared
    with scratch_user(args.user) as user:
        running = _js(user, "submit", "command", "-P", "command=sleep 120", "-t", "5").strip()
        try:
            _until_running(user, running)
        except SystemExit:
            user.run("scancel", running)
            raise
        alone: list[tuple[str, Callable[[], object]]] = [
            ("status, a running job", lambda: _js(user, "status", running)),
            ("wait, one poll, a running job", lambda: _wait_once(user, running)),
            ("watch --once, a running job", lambda: _js(user, "watch", "--once")),
        ]
        for name, run in alone:
            rows.append((name, measure(root, name, user, run)))
        held = _js(user, "submit", "command", *quick, "--no-advice").strip()
        user.run("scontrol", "hold", held)
        then: list[tuple[str, Callable[[], object]]] = [
            ("status, a pending job", lambda: _js(user, "status", held)),
            ("wait, one poll, a pending job", lambda: _wait_once(user, held)),
            ("watch --once, a running and a pending job", lambda: _js(user, "watch", "--once")),
        ]
        for name, run in then:
            rows.append((name, measure(root, name, user, run)))
        user.run("scancel", running, held)
    print("slurmctld RPCs per command (sdiag by message type): first run | least of 3 runs")
    for name, (once, least) in rows:
        cells = [str(sum(once.values())), _shown(once), str(sum(least.values())), _shown(least)]
        print(f"| {name} | {' | '.join(cells)} |")
    return 0


def _shown(kinds: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none"


def _until_running(user: AsUser, job: str) -> None:
    """Until accounting has job as RUNNING (a status of it then asks sacct alone)."""
    for _ in range(120):
        out = user.run("sacct", "-X", "-n", "-P", "-j", job, "--format=State").strip()
        if out == "RUNNING":
            return
        time.sleep(1)
    raise SystemExit(f"job {job} did not start within 2 minutes")


def _wait_once(user: AsUser, job: str) -> None:
    """One poll of `jobsmith wait` (it gives up with exit 7 after its first poll)."""
    subprocess.run(
        ["runuser", "-u", user.user, "--", "env", "-i", *[f"{k}={v}" for k, v in user.env.items()],
         *jobsmith_argv(user.checkout), "wait", job, "--timeout", "0.1"],
        cwd=user.work, capture_output=True, check=False,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
