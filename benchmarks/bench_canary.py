"""A 1,000-task array whose command is broken, with a canary and without one: time from the
submission to the watcher's failure report, array tasks that ran, and the lab user's
slurmctld RPCs (sdiag's per-user counts) over that window.

Both variants submit `jobsmith submit file_array` over 1,000 small files with the program
`false` (every task fails at once), then run `jobsmith watch --once` every second until a
cycle reports a decision. With `policy.canary: {above_tasks: 100, tasks: 2}` the first two
tasks run as a job of their own; their failure is decided and the other 998 are
cancelled before any starts. Without it, the array runs until its tasks have ended and
the decision comes then. Tasks that ran are counted from accounting: every task that
ended in a state other than CANCELLED.

    sudo .venv/bin/python benchmarks/bench_canary.py [--tasks 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from lab_user import AsUser, scratch_user
from slurm_stats import log, take_snapshot

from jobsmith.adapters.slurm.transport import LocalTransport

CANARY = "policy:\n  canary: {above_tasks: 100, tasks: 2}\n"


def run(user: AsUser, tasks: int, canary: bool) -> dict[str, object]:
    site = user.work / "config" / "site.yaml"
    site.write_text(site.read_text() + (CANARY if canary else ""))
    names = []
    for i in range(tasks):
        (user.work / f"f{i}.txt").write_text("x\n")
        names.append(f"f{i}.txt")
    (user.work / "params.yaml").write_text(
        json.dumps({"files": names, "program": "false"})  # JSON is YAML
    )
    for path in user.work.iterdir():
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    started = time.perf_counter()
    out = user.jobsmith(
        "submit", "file_array", "--params-file",
        str(user.work / "params.yaml"), "--log-dir", str(user.work / "logs"),
        "--time", "0:01:00", "--mem", "50", "--json",
    )  # fmt: skip
    doc = json.loads(out)
    decisions: list[dict[str, object]] = []
    while not decisions:
        cycle = json.loads(user.jobsmith("watch", "--once", "--json"))
        decisions = list(cycle["decisions"])
        if not decisions:
            time.sleep(1)
    reported = time.perf_counter() - started
    ids = [str(doc["job_id"])] + ([str(doc["canary_job_id"])] if canary else [])
    return {"seconds": reported, "decision": decisions[0], "ran": ran_tasks(ids)}


def ran_tasks(job_ids: list[str]) -> int:
    """Array tasks that ran (ended in any state but CANCELLED), from accounting; a
    cancelled pending remainder is one row (e.g. 11617_[2-999])."""
    deadline = time.monotonic() + 120
    while True:
        out = subprocess.run(
            ["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,State"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        rows = [line.split("|") for line in out.splitlines() if line]
        pending = [r for r in rows if r[1] in ("PENDING", "RUNNING", "REQUEUED")]
        if not pending or time.monotonic() > deadline:
            return sum(1 for r in rows if not r[1].startswith("CANCELLED"))
        time.sleep(2)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--user", default="alice")
    args = parser.parse_args()
    root = LocalTransport()
    print(f"{'variant':12} {'s to report':>12} {'tasks ran':>10} {'ctld RPCs':>10}  decision")
    for canary in (True, False):
        with scratch_user(args.user) as user:
            before = take_snapshot(root)
            result = run(user, args.tasks, canary)
            after = take_snapshot(root)
            subprocess.run(["scancel", "-u", args.user], check=False)
        rpcs = after.ctld_users.get(args.user, 0) - before.ctld_users.get(args.user, 0)
        decision = result["decision"]
        assert isinstance(decision, dict)
        said = f"{decision.get('action')} {decision.get('job_id')}"
        if decision.get("cancelled"):
            said += f", cancelled {decision['cancelled']}"
        name = "canary" if canary else "no canary"
        seconds = result["seconds"]
        assert isinstance(seconds, float)
        print(f"{name:12} {seconds:12.1f} {result['ran']!s:>10} {rpcs:>10}  {said}")
        log(f"{name}: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
