"""Controller RPCs per jobsmith command, counted by slurmctld itself (issue 26): the table
in benchmarks/README.md ("Controller RPCs per command").

Each command runs as the lab's second user (default bob) from a fresh scratch directory
with a private jobsmith home, between two `sdiag` snapshots taken as root. Counted: the
RPCs by message type (all users: run it while nothing else uses the lab) and the user's
own total (sdiag's by-user table), which must equal the sum of the types the command
sent: a row where they differ had company, and is measured again (up to 5 times).
sdiag's own REQUEST_STATS_INFO, and what slurmd and the job itself send (a batch
script's completion, node pings), are not the command's and are left out. The job that
the status, wait and watch rows follow runs `sleep 120`, so it is RUNNING throughout; the
pending rows follow a held job.

    sudo .venv/bin/python benchmarks/bench_rpc_table.py [--user bob]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable

from lab_user import ROOT, SITE, AsUser, scratch_user
from slurm_stats import count_delta, log, take_snapshot

from jobsmith.adapters.slurm.transport import LocalTransport

#: sent by the daemons, sdiag or the job itself, never by the command measured
NOT_THE_COMMAND = (
    "REQUEST_STATS_INFO",
    "MESSAGE_NODE_REGISTRATION_STATUS",
    "REQUEST_COMPLETE_BATCH_SCRIPT",
    "MESSAGE_EPILOG_COMPLETE",
    "REQUEST_STEP_COMPLETE",
    "REQUEST_JOB_STEP_CREATE",
    "REQUEST_COMPLETE_PROLOG",
    "REQUEST_PING",
    "REQUEST_NODE_REGISTRATION_STATUS",
    "MESSAGE_COMPOSITE",
)
PLAN = """\
name: bench
steps:
  one: {template: command, params: {command: "true"}}
  two: {template: command, params: {command: "true"}}
  merge: {template: command, params: {command: "true"}, after_ok: [one, two]}
"""


def _js(user: AsUser, *argv: str) -> str:
    user.env["PYTHONPATH"] = str(ROOT / "src")
    return user.run(sys.executable, "-m", "jobsmith", "--site", str(SITE), *argv)


def measure(
    root: LocalTransport, name: str, user: AsUser, run: Callable[[], object]
) -> dict[str, int]:
    for _ in range(5):
        before = take_snapshot(root)
        run()
        after = take_snapshot(root)
        kinds = {
            k: v
            for k, v in count_delta(before.ctld, after.ctld).items()
            if k not in NOT_THE_COMMAND
        }
        own = after.ctld_users.get(user.user, 0) - before.ctld_users.get(user.user, 0)
        if sum(kinds.values()) == own:
            return kinds
        log(f"{name}: {own} RPCs of {user.user} but {sum(kinds.values())} by type: again")
    raise SystemExit(f"{name}: the lab was never quiet enough to count it")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--user", default="bob")
    args = parser.parse_args()
    root = LocalTransport()
    rows: list[tuple[str, dict[str, int]]] = []
    with scratch_user(args.user) as user:
        plan = user.work / "plan.yaml"
        plan.write_text(PLAN)
        os.chmod(plan, 0o644)
        ids: dict[str, str] = {}

        def submit(key: str, *extra: str) -> Callable[[], None]:
            def run() -> None:
                ids[key] = _js(user, "submit", "command", *extra).strip()

            return run

        sleep = ("-P", "command=sleep 120", "-t", "5")
        quick = ("-P", "command=true", "-t", "5")
        first: list[tuple[str, Callable[[], object]]] = [
            ("submit", submit("job", *sleep)),
            ("submit --no-advice", submit("bare", *sleep, "--no-advice")),
            ("submit, 20-task array", submit("array", "-a", "0-19", *quick)),
            ("plan run (3 steps)", lambda: _js(user, "plan", "run", str(plan))),
        ]
        for name, run in first:
            rows.append((name, measure(root, name, user, run)))
        submit("held", *quick, "--no-advice")()
        user.run("scontrol", "hold", ids["held"])
        running, held = ids["job"], ids["held"]
        then: list[tuple[str, Callable[[], object]]] = [
            ("status, running job", lambda: _js(user, "status", running)),
            ("status, pending job", lambda: _js(user, "status", held)),
            ("wait, one poll, running job", lambda: _wait_once(user, running)),
            ("wait, one poll, pending job", lambda: _wait_once(user, held)),
            ("watch --once", lambda: _js(user, "watch", "--once")),
        ]
        for name, run in then:
            rows.append((name, measure(root, name, user, run)))
        user.run("scancel", *ids.values())
    print(f"slurmctld RPCs per command (sdiag by message type; {args.user}'s total checked):")
    for name, kinds in rows:
        shown = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
        print(f"| {name} | {sum(kinds.values())} | {shown} |")
    return 0


def _wait_once(user: AsUser, job: str) -> None:
    """One poll of `jobsmith wait` (it gives up with exit 7 after its first poll)."""
    user.env["PYTHONPATH"] = str(ROOT / "src")
    subprocess.run(
        ["runuser", "-u", user.user, "--", "env", "-i", *[f"{k}={v}" for k, v in user.env.items()],
         sys.executable, "-m", "jobsmith", "--site", str(SITE), "wait", job, "--timeout", "0.1"],
        cwd=user.work, capture_output=True, check=False,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
