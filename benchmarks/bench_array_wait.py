"""A 20-task array of short jobs, submitted and waited for to the end, four ways side by
side in one run (issue 26): wall time, and what each way asked Slurm.

- raw Slurm, `sbatch --array=0-19 --wrap 'sleep 2'`, then `squeue -h -j ID` every 2 s
  until it prints nothing: the loop a careful shell user writes (Slurm's docs warn
  against tighter loops);
- the same with squeue every 0.5 s (what bench_plan.py's raw variant does): the fastest
  a script sees the end, at four times the squeue;
- `jobsmith submit command -a 0-19 -P command='sleep 2'` then `jobsmith wait ID`, as a
  user types them (the submit's advice included);
- submitit (`SlurmExecutor.map_array` of a function sleeping 2 s, then every job's
  `result()`), from its own venv (default /tmp/bench-submitit, made with
  `python -m venv /tmp/bench-submitit && /tmp/bench-submitit/bin/pip install submitit`;
  it is not a jobsmith dependency). Its tasks run a Python that imports submitit and
  unpickles the function before sleeping, so each of its tasks lasts a little longer.

Every task asks the debug partition for 5 minutes and 200 MB. Each way runs as the lab's
second user (default bob: the tests run as alice, and sdiag's per-user counts include
every process of a user), from a fresh scratch directory with a private jobsmith home;
the order rotates between rounds, so a warm or busy node favours none. Counted per way:
the Slurm commands it ran (a wrapper first on its PATH logs each sbatch, squeue and
sacct), and the user's RPCs to slurmctld and to slurmdbd (`sdiag` and `sacctmgr show
stats` by user, before and after, as root). jobsmith is --checkout's (this one unless told;
lab_user.jobsmith_argv); --before adds another checkout's (`jobsmith before`), to compare a
change with what it replaces in the same run.

    sudo .venv/bin/python benchmarks/bench_array_wait.py [--rounds 5] [--user bob] \
        [--before ../main]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lab_user import AsUser, add_checkout_options, jobsmith_argv, scratch_user
from slurm_stats import log, take_snapshot

from jobsmith.adapters.slurm.transport import LocalTransport

TASKS = 20
SLEEP_S = 2
REQUEST = ["-p", "debug", "-t", "5", "--mem", "200M"]
COUNTED = ("sbatch", "squeue", "sacct")
SUBMITIT_SCRIPT = f"""\
import sys, time
import submitit

def task(i):
    time.sleep({SLEEP_S})
    return i

executor = submitit.SlurmExecutor(folder=sys.argv[1])
executor.update_parameters(partition="debug", time=5, mem="200M", array_parallelism={TASKS})
jobs = executor.map_array(task, range({TASKS}))
assert [j.result() for j in jobs] == list(range({TASKS}))
"""


def _counting_path(user: AsUser) -> None:
    """Put wrappers of the counted commands first on the user's PATH: each call appends
    the command's name to calls.log, then runs the real one."""
    shims = user.work / "shims"
    shims.mkdir()
    log_file = user.work / "calls.log"
    log_file.touch()
    os.chmod(log_file, 0o666)
    for name in COUNTED:
        real = next(
            p / name for p in map(Path, os.environ["PATH"].split(":")) if (p / name).is_file()
        )
        shim = shims / name
        shim.write_text(f'#!/bin/sh\necho {name} >> {log_file}\nexec {real} "$@"\n')
        shim.chmod(0o755)
    user.env["PATH"] = f"{shims}:{user.env['PATH']}"


def _calls(user: AsUser) -> dict[str, int]:
    names = (user.work / "calls.log").read_text().split()
    return {n: names.count(n) for n in COUNTED}


def raw(every_s: float) -> Callable[[AsUser], None]:
    def run(user: AsUser) -> None:
        out = user.run(
            "sbatch", "--parsable", f"--array=0-{TASKS - 1}", *REQUEST, "-o", "/dev/null",
            "--wrap", f"sleep {SLEEP_S}",
        )  # fmt: skip
        job = out.strip().split(";")[0]
        while user.run("squeue", "-h", "-j", job).strip():
            time.sleep(every_s)

    return run


def jobsmith(checkout: Path) -> Callable[[AsUser], None]:
    return lambda user: _jobsmith(user, checkout)


def _jobsmith(user: AsUser, checkout: Path) -> None:
    js = jobsmith_argv(checkout)
    job = user.run(
        *js, "submit", "command", "-a", f"0-{TASKS - 1}", *REQUEST,
        "-P", f"command=sleep {SLEEP_S}",
    ).strip()  # fmt: skip
    user.run(*js, "wait", job, "--timeout", "300")


def submitit(python: str) -> Callable[[AsUser], None]:
    def run(user: AsUser) -> None:
        script = user.work / "bench_submitit.py"
        script.write_text(SUBMITIT_SCRIPT)
        os.chmod(script, 0o644)
        user.run(python, str(script), str(user.work / "submitit"))

    return run


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--user", default="bob")
    parser.add_argument("--submitit-python", default="/tmp/bench-submitit/bin/python")
    add_checkout_options(parser)
    args = parser.parse_args()
    ways: dict[str, Callable[[AsUser], None]] = {
        "raw, squeue every 2 s": raw(2.0),
        "raw, squeue every 0.5 s": raw(0.5),
        "jobsmith submit + wait": jobsmith(args.checkout),
        "submitit": submitit(args.submitit_python),
    }
    if args.before is not None:
        ways["jobsmith before"] = jobsmith(args.before)
    if not os.access(args.submitit_python, os.X_OK):
        raise SystemExit(f"{args.submitit_python}: no such Python (see the docstring)")
    root = LocalTransport()
    rows: dict[str, list[tuple[float, dict[str, int], int, int]]] = {w: [] for w in ways}
    names = list(ways)
    for round_no in range(args.rounds):
        order = names[round_no % len(names) :] + names[: round_no % len(names)]
        for name in order:
            with scratch_user(args.user) as user:
                _counting_path(user)
                before = take_snapshot(root)
                started = time.perf_counter()
                ways[name](user)
                wall = time.perf_counter() - started
                after = take_snapshot(root)
                calls = _calls(user)
            ctld = after.ctld_users.get(args.user, 0) - before.ctld_users.get(args.user, 0)
            dbd = after.dbd_users.get(args.user, 0) - before.dbd_users.get(args.user, 0)
            rows[name].append((wall, calls, ctld, dbd))
            log(f"round {round_no + 1}: {name}: {wall:.2f} s, {calls}, ctld {ctld}, dbd {dbd}")
    base = statistics.median(r[0] for r in rows["raw, squeue every 2 s"])
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(
        f"{'way':24} {'median s':>8} {'x raw 2s':>8} {'per-round ratio':>16}  "
        f"{'sbatch/squeue/sacct (median)':>28} {'ctld':>5} {'dbd':>5}"
    )
    for name, got in rows.items():
        median = statistics.median(r[0] for r in got)
        ratios = [r[0] / b[0] for r, b in zip(got, rows["raw, squeue every 2 s"], strict=True)]
        calls = "/".join(str(statistics.median(r[1][c] for r in got)) for c in COUNTED)
        ctld = statistics.median(r[2] for r in got)
        dbd = statistics.median(r[3] for r in got)
        print(
            f"{name:24} {median:8.2f} {median / base:8.2f} "
            f"{statistics.median(ratios):16.2f}  {calls:>28} {ctld:5} {dbd:5}"
        )
        print(f"  each round, s: {' '.join(f'{r[0]:.2f}' for r in got)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
