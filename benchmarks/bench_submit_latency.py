"""`jobsmith submit` against the sbatch it wraps, side by side in one run (issue 26).

The claim: a submit with advice costs at most 0.3 s over `sbatch`, without advice at
most 0.15 s over it. The machine is shared and noisy, so each round times, one after
another, the same `true` job three ways, and the figures are medians and their
differences within the one run:

- `sbatch --parsable --wrap true`: the yardstick;
- `jobsmith submit command -P command=true --no-advice`;
- `jobsmith submit command -P command=true` (the advice: per-partition start
  estimates, the template's history once it has one).

All as the lab user, through the same `runuser -u USER -- env -i …`, in a throw-away
/scratch workspace with a private jobsmith home (lab_user.py), on the lab's site file.
The first round's submit has no history; later rounds have the template's earlier runs.
Every job submitted is cancelled at the end, even on failure. Then `--help`, and the
imports of one cold `submit --no-advice` (JOBSMITH_WARM=0; PYTHONPROFILEIMPORTTIME,
Python's `-X importtime`): the jobsmith modules that cost most, and the whole.

Since the warm process (docs/warm.md), a checkout that has one runs the first round's
submits cold and leaves a warm process; the later rounds are served by it, as a user's
commands are. The medians are over all rounds, the first included.

Run as root on the lab cluster, from the repository root:

    .venv/bin/python benchmarks/bench_submit_latency.py             # 9 rounds
    .venv/bin/python benchmarks/bench_submit_latency.py --repeat 3  # quick check

In a git worktree without its own .venv, run it with the main checkout's Python: this
checkout's jobsmith is then run as `python -m jobsmith` with this checkout's src/ first
on PYTHONPATH. `--checkout DIR` times another checkout's jobsmith; `--before DIR` times a second one
in the same rounds (a before and after paired like the rest; both share the one jobsmith
home, so the before's submissions are history for the after's advice and the reverse).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from lab_user import AsUser, add_checkout_options, jobsmith_argv, scratch_user

#: the `true` job of every round, as jobsmith's template and as raw sbatch
JOBSMITH_SUBMIT = ("submit", "command", "-P", "command=true", "-t", "1", "--mem", "50M")
RAW_SBATCH = ("sbatch", "--parsable", "-t", "1", "--mem", "50M", "--wrap", "true")


def timed(
    user: AsUser, argv: list[str], extra_env: dict[str, str] | None = None
) -> tuple[float, str, str]:
    """Wall seconds of argv as the user (runuser included), its stdout and stderr."""
    env = [f"{k}={v}" for k, v in {**user.env, **(extra_env or {})}.items()]
    started = time.perf_counter()
    out = subprocess.run(
        ["runuser", "-u", user.user, "--", "env", "-i", *env, *argv],
        capture_output=True,
        text=True,
        cwd=user.work,
    )
    took = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({out.returncode}): {out.stderr[-500:]}")
    return took, out.stdout, out.stderr


def job_id(stdout: str) -> str:
    """The job id a submission printed: its last line of stdout (any advice comes first)."""
    last = stdout.strip().splitlines()[-1].strip() if stdout.strip() else ""
    if not last.isdigit():
        raise SystemExit(f"no job id in {stdout!r}")
    return last


def imports(user: AsUser, base: list[str], submitted: list[str]) -> None:
    """The jobsmith modules one cold `submit --no-advice` spends most on importing (what
    a command costs where no warm process serves it: the first of a session, or with
    JOBSMITH_WARM=0; docs/warm.md)."""
    cold = {"PYTHONPROFILEIMPORTTIME": "1", "JOBSMITH_WARM": "0"}
    _, out, err = timed(user, [*base, *JOBSMITH_SUBMIT, "--no-advice"], cold)
    submitted.append(job_id(out))
    rows = []
    total = 0
    for line in err.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if not line.startswith("import time:") or len(parts) != 3 or "self" in parts[0]:
            continue
        cumulative, name = int(parts[1]), parts[2]
        if not name.startswith("  "):  # top level: its cumulative counts once in the whole
            total += cumulative
        if name.strip().startswith("jobsmith"):
            rows.append((cumulative, name.rstrip()))
    print(f"imports of one cold submit --no-advice: {total / 1000:.0f} ms in all")
    for cumulative, name in sorted(rows, reverse=True)[:12]:
        print(f"  {cumulative / 1000:7.1f} ms cumulative {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--user", default="alice")
    parser.add_argument("--repeat", type=int, default=9)
    add_checkout_options(parser)
    args = parser.parse_args()
    with scratch_user(args.user) as user:
        submitted: list[str] = []
        base = jobsmith_argv(args.checkout)
        print(f"jobsmith: {' '.join(base[:3])} (checkout {args.checkout})")
        ways = {
            "sbatch": list(RAW_SBATCH),
            "submit --no-advice": [*base, *JOBSMITH_SUBMIT, "--no-advice"],
            "submit": [*base, *JOBSMITH_SUBMIT],
        }
        if args.before is not None:
            before = jobsmith_argv(args.before)
            print(f"before: {' '.join(before[:3])} (checkout {args.before})")
            ways["before --no-advice"] = [*before, *JOBSMITH_SUBMIT, "--no-advice"]
            ways["before submit"] = [*before, *JOBSMITH_SUBMIT]
        times: dict[str, list[float]] = {name: [] for name in ways}
        try:
            for _ in range(args.repeat):
                for name, argv in ways.items():
                    took, out, _ = timed(user, argv)
                    times[name].append(took)
                    submitted.append(job_id(out))
            helps = [timed(user, [*base, "--help"])[0] for _ in range(args.repeat)]
            report(times, helps)
            imports(user, base, submitted)
        finally:
            if submitted:
                user.run("scancel", *submitted)


def report(times: dict[str, list[float]], helps: list[float]) -> None:
    """Medians, and each submit's median over sbatch's, as pasted into the README."""
    raw = statistics.median(times["sbatch"])
    for name, values in times.items():
        shown = " ".join(f"{v:.3f}" for v in values)
        med = statistics.median(values)
        over = "" if name == "sbatch" else f"  over sbatch {med - raw:+.3f} s"
        print(f"{name:>19}: median {med:.3f} s{over}  ({shown})")
    print(f"{'--help':>19}: median {statistics.median(helps):.3f} s")


if __name__ == "__main__":
    main()
