"""What the QoS and TRES columns cost a status poll's sacct (issue 26): the same jobs asked
with every field jobsmith reads (SACCT_FIELDS) and without QOS, AllocTRES and ReqTRES
(USAGE_FIELDS, what `wait` and plain `status` ask once a job was compared with what was
checked), alternating, in the same run.

sacct asks slurmdbd for the QoS and TRES tables to print those columns by name, a cost of
its own whatever the number of rows: the script times one job and one array of each size
given, so that shows. The jobs are the newest of the lab user's that ended (a plain job,
and the arrays of at least --tasks tasks), found with one sacct first; run it after
bench_array_wait.py or bench_status_array.py has left some.

    .venv/bin/python benchmarks/bench_sacct_fields.py [--pairs 10] [--user bob]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta

from jobsmith.adapters.slurm.commands import argv
from jobsmith.adapters.slurm.parsing.parse import SACCT_FIELDS, USAGE_FIELDS


def _timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def _ended_jobs(user: str, since: datetime, min_tasks: list[int]) -> dict[str, str]:
    """A plain job and, per size, the newest array of at least that many tasks, of the
    user's jobs that ended since `since`: label -> job id."""
    window = ["-S", since.isoformat(timespec="seconds"), "-E", "now"]  # -s needs -E
    command = ["sacct", "-X", "-n", "-P", "-u", user, "-s", "CD", *window, "-o", "JobID"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()
    tasks: dict[str, int] = {}
    plain: list[str] = []
    for job in out:
        array, _, task = job.partition("_")
        if task:
            tasks[array] = tasks.get(array, 0) + 1
        else:
            plain.append(job)
    found = {"plain job": plain[-1]} if plain else {}
    for size in min_tasks:
        arrays = [a for a, n in tasks.items() if n >= size]
        if arrays:
            found[f"array of {tasks[arrays[-1]]} tasks"] = arrays[-1]
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--user", default="bob")
    parser.add_argument("--tasks", type=int, nargs="*", default=[20, 1000])
    args = parser.parse_args()
    since = datetime.now() - timedelta(days=7)
    jobs = _ended_jobs(args.user, since, args.tasks)
    if not jobs:
        raise SystemExit(f"no ended jobs of {args.user} in 7 days: run bench_array_wait.py first")
    heading = f"{'jobs':24} {'with terms s':>12} {'without s':>10} {'ratio':>6}"
    print(f"{heading}  (medians of {args.pairs} pairs)")
    for label, job in jobs.items():
        full = argv.sacct_jobs([job], since, SACCT_FIELDS)
        light = argv.sacct_jobs([job], since, USAGE_FIELDS)
        with_terms, without = [], []
        for _ in range(args.pairs):
            with_terms.append(_timed(full))
            without.append(_timed(light))
        a, b = statistics.median(with_terms), statistics.median(without)
        print(f"{label:24} {a:12.3f} {b:10.3f} {a / b:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
