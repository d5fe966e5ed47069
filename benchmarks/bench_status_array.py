"""`jobsmith status --json` of a finished 1,000-task array against the one sacct it makes.

The claim (issue 8): reporting an array costs at most twice the accounting query behind
it, so what jobsmith adds (start-up, parsing 1,000 task records, merging, the document,
recording the state in its session) stays below the query's own cost.

As the lab user, in one run: a `--array=0-999` job of `true` is submitted with
`jobsmith submit file_array` over as many empty files, program `true` (so the status
also records into its session, as for any job jobsmith submitted) and run to the end;
then, alternating, `--repeat` times each:

- `sacct`: the adapter's own query for that array (argv.sacct_jobs with SACCT_FIELDS,
  exactly what `SlurmScheduler.status` runs), through the same `runuser -u USER --`;
- `jobsmith status --json ID`: the whole command, a new process each time.

Wall time of each (runuser included in both). jobsmith runs with the lab's site file
(site_config/examples/lab.yaml). The array is cancelled at the end, even on
failure. Run as root on the lab cluster:

    .venv/bin/python benchmarks/bench_status_array.py            # 1,000 tasks, 9 rounds
    .venv/bin/python benchmarks/bench_status_array.py --tasks 50 --repeat 3   # quick check

`--checkout DIR` times another checkout's jobsmith (a worktree without its own .venv runs
as `python -m jobsmith` with its src/ first on PYTHONPATH, lab_user.jobsmith_argv);
`--before DIR` adds a second checkout's `status --json` to the same rounds, so a before
and after are paired like the rest, and checks that both print the same document.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

from lab_user import add_checkout_options, jobsmith_argv

from jobsmith.adapters.slurm.commands import argv
from jobsmith.adapters.slurm.parsing.parse import SACCT_FIELDS, parse_sacct_parsable

USER_ENV = ["env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"]


def as_user(user: str, command: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    """command as user, in a clean environment (as the tests run jobsmith)."""
    home = f"/home/{user}"
    env = [*USER_ENV, f"HOME={home}", f"USER={user}", f"LOGNAME={user}"]
    full = ["runuser", "-u", user, "--", *env, *command]
    return subprocess.run(full, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload, no-any-return]


def submit_array(user: str, tasks: int, workdir: str, checkout: Path) -> str:
    """The array (the file_array template over tasks empty files, program `true`),
    submitted by jobsmith itself; its Slurm id."""
    folder = Path(workdir) / "bench-status-array"
    as_user(user, ["mkdir", "-p", str(folder)])
    names = [str(folder / f"f{i:05d}") for i in range(tasks)]
    as_user(user, ["touch", *names])
    params = folder / "params.json"
    as_user(user, ["tee", str(params)], input=json.dumps({"files": names, "program": "true"}))
    command = [*jobsmith_argv(checkout), "submit", "file_array", "--params-file", str(params)]
    res = as_user(user, [*command, "--mem", "50M", "--time", "1"], cwd=workdir)
    if res.returncode != 0:
        sys.exit(f"submit failed: {res.stderr.strip()}")
    return res.stdout.strip()


def finished_tasks(user: str, job_id: str, since: datetime) -> int:
    """Tasks of the array that ended, per accounting."""
    res = as_user(user, argv.sacct_jobs([job_id], since, SACCT_FIELDS))
    records = parse_sacct_parsable(res.stdout, argv.DELIMITER)
    return sum(1 for r in records if r.state.is_terminal and r.array_task_id is not None)


def timed(user: str, command: list[str]) -> tuple[float, str]:
    """Wall seconds of one run of command as user, and its stdout."""
    started = time.perf_counter()
    res = as_user(user, command)
    took = time.perf_counter() - started
    if res.returncode != 0:
        sys.exit(f"{command[0]} failed ({res.returncode}): {res.stderr.strip()[:300]}")
    return took, res.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--user", default="alice")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--workdir", default="/scratch/alice")
    parser.add_argument("--wait-timeout", type=float, default=1800)
    parser.add_argument(
        "--existing", metavar="JOB_ID", help="measure an array this benchmark ran before"
    )
    parser.add_argument("--since-hours", type=float, default=0.1, help="with --existing")
    add_checkout_options(parser)
    args = parser.parse_args()
    since = datetime.now() - timedelta(hours=args.since_hours if args.existing else 0.1)
    job_id = args.existing or submit_array(args.user, args.tasks, args.workdir, args.checkout)
    print(f"array {job_id} ({args.tasks} tasks)", file=sys.stderr)
    try:
        deadline = time.monotonic() + args.wait_timeout
        while (done := finished_tasks(args.user, job_id, since)) < args.tasks:
            if time.monotonic() > deadline:
                sys.exit(f"only {done}/{args.tasks} tasks ended in time")
            print(f"  {done}/{args.tasks} tasks ended", file=sys.stderr)
            time.sleep(10)
        sacct = argv.sacct_jobs([job_id], since, SACCT_FIELDS)
        ways = {
            "sacct": sacct,
            "status": [*jobsmith_argv(args.checkout), "status", "--json", job_id],
        }
        if args.before is not None:
            ways["before"] = [*jobsmith_argv(args.before), "status", "--json", job_id]
        times: dict[str, list[float]] = {name: [] for name in ways}
        printed: dict[str, str] = {}
        for _ in range(args.repeat):
            for name, command in ways.items():
                took, printed[name] = timed(args.user, command)
                times[name].append(took)
        document = json.loads(printed["status"])
        counts = document["jobs"][0].get("task_counts")
        report(job_id, args, times, counts)
        if "before" in printed:
            same = printed["before"] == printed["status"]
            print(f"status and before printed the same document: {same}")
    finally:
        if not args.existing:
            as_user(args.user, ["scancel", job_id])


def report(
    job_id: str, args: argparse.Namespace, times: dict[str, list[float]], counts: object
) -> None:
    """The medians and their ratios, as pasted into benchmarks/README.md."""
    sacct = statistics.median(times["sacct"])
    print(f"array {job_id}: {args.tasks} tasks; task_counts in the document: {counts}")
    for name, values in times.items():
        shown = " ".join(f"{v:.3f}" for v in values)
        print(f"{name:>7}: median {statistics.median(values):.3f} s  ({shown})")
    for name in [n for n in times if n != "sacct"]:
        ratio = statistics.median(times[name]) / sacct
        print(f"ratio {name}/sacct (medians): {ratio:.2f}")


if __name__ == "__main__":
    main()
