"""A small DAG (three parallel steps, then a merge) four ways, side by side in one run:
wall time and the lab user's slurmctld RPCs (sdiag's per-user counts).

- raw Slurm: four `sbatch --parsable`, each `--dependency=afterok:` on what it waits for,
  then `squeue -h -j IDS` every 0.5 s until none is left (what a careful script does);
- `jobsmith plan run` then `jobsmith wait` on the four job ids, with a fresh jobsmith
  state directory each round (a user's very first command), and again with one state
  directory kept over the rounds (every later command: what jobsmith remembers there);
- by hand with jobsmith's CLI: `submit` four times (`-d afterok:`), then `wait`;
- Snakemake 9 with its Slurm executor plugin (`Snakefile.plan` beside this script: three
  jobs, then a merge), `snakemake --executor slurm --jobs 4`, timed until it exits.

Every job is `true` in the debug partition (Snakemake's jobs `touch` their output file, which
it needs to see a step done). Each variant runs as the lab's unprivileged
user (default alice), with a private jobsmith config and state directory; the order of the
variants rotates between rounds, so a warm or busy cluster favours none. RPCs are the
user's own (sdiag's "by user" table, before and after): the snapshots themselves run as
root and are not counted. Snakemake runs from its own venv, `.venv-snakemake` (made by
`scripts/setup` from `scripts/snakemake-requirements.txt`); `--no-snakemake` leaves it out.
Its plugin checks job states on a ~40 s cycle, so a round lasts about two minutes with it.

    sudo .venv/bin/python benchmarks/bench_plan.py [--rounds 3] [--user alice] [--no-snakemake]

`--checkout DIR` runs another checkout's jobsmith (a worktree without its own .venv:
`python -m jobsmith` with its src/ first on PYTHONPATH, lab_user.jobsmith_argv); `--before
DIR` adds `plan run` by a second checkout as one more variant of the same rounds, so a
before and after are paired like the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from lab_user import ROOT, AsUser, add_checkout_options, scratch_user
from slurm_stats import Snapshot, log, take_snapshot

from jobsmith.adapters.slurm.transport import LocalTransport

SNAKEMAKE = ROOT / ".venv-snakemake" / "bin" / "snakemake"
SNAKEFILE = Path(__file__).resolve().parent / "Snakefile.plan"
#: Each Snakemake job runs a Python of about 140 MB (the lab's notes; 133 MB MaxRSS seen):
#: the lab kills a job over its --mem, so 200 MB, not the 50 MB the other variants ask.
SNAKEMAKE_ARGS = [
    "--executor", "slurm", "--jobs", "4",
    "--default-resources", "slurm_partition=debug", "slurm_account=lab", "mem_mb=200",
    "runtime=5",
]  # fmt: skip
PLAN = """\
name: bench
steps:
  one: {template: command, params: {command: "true"}}
  two: {template: command, params: {command: "true"}}
  three: {template: command, params: {command: "true"}}
  merge: {template: command, params: {command: "true"}, after_ok: [one, two, three]}
"""


def raw(user: AsUser, submitted: Callable[[], None]) -> list[str]:
    def sbatch(*deps: str) -> str:
        dep = [f"--dependency=afterok:{':'.join(deps)}"] if deps else []
        out = user.run(
            "sbatch", "--parsable", "-p", "debug", "-t", "5", "--mem", "50M",
            "-o", "/dev/null", *dep, "--wrap", "true",
        )  # fmt: skip
        return out.strip().split(";")[0]

    first = [sbatch() for _ in range(3)]
    ids = [*first, sbatch(*first)]
    submitted()
    while user.run("squeue", "-h", "-j", ",".join(ids)).strip():
        time.sleep(0.5)
    return ids


def plan(user: AsUser, submitted: Callable[[], None]) -> list[str]:
    path = user.work / "plan.yaml"
    path.write_text(PLAN)
    os.chmod(path, 0o644)
    doc = json.loads(user.jobsmith("plan", "run", str(path), "--json"))
    ids = list(doc["jobs"].values())
    submitted()
    user.jobsmith("wait", *ids, "--timeout", "300")
    return ids


def by_hand(user: AsUser, submitted: Callable[[], None]) -> list[str]:
    def submit(*deps: str) -> str:
        after = ["-d", "afterok:" + ":".join(deps)] if deps else []
        return user.jobsmith("submit", "command", "-P", "command=true", *after).strip()

    first = [submit() for _ in range(3)]
    ids = [*first, submit(*first)]
    submitted()
    user.jobsmith("wait", *ids, "--timeout", "300")
    return ids


def snakemake(user: AsUser, submitted: Callable[[], None]) -> list[str]:
    # its submissions are spread over the run (the merge only after the plugin has seen
    # the first three end), so there is no "submitted" moment to mark
    snakefile = user.work / "Snakefile"
    snakefile.write_text(SNAKEFILE.read_text())
    os.chmod(snakefile, 0o644)
    out = user.run(str(SNAKEMAKE), "--snakefile", str(snakefile), *SNAKEMAKE_ARGS)
    if not (user.work / "merge.done").exists():
        raise SystemExit(f"snakemake ended without merge.done:\n{out}")
    return []


VARIANTS: dict[str, Callable[[AsUser, Callable[[], None]], list[str]]] = {
    "raw Slurm": raw,
    "jobsmith plan run": plan,
    "jobsmith submit x4": by_hand,
    "Snakemake + slurm": snakemake,
}
#: the variant --before adds: plan run by the other checkout
BEFORE = "plan run (before)"
#: plan run with one jobsmith state directory kept over the rounds, as a user's is from
#: their second command on (what jobsmith remembers there: adapters/slurm/remembered.py)
KEPT = "plan run, state kept"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--user", default="alice")
    parser.add_argument("--no-snakemake", action="store_true", help="leave Snakemake out")
    add_checkout_options(parser)
    args = parser.parse_args()
    variants = dict(VARIANTS)
    variants[KEPT] = plan
    if args.before is not None:
        variants[BEFORE] = plan
    names = list(variants)
    if args.no_snakemake:
        names.remove("Snakemake + slurm")
    elif not os.access(SNAKEMAKE, os.X_OK):
        raise SystemExit(
            f"{SNAKEMAKE} not found: run scripts/setup (it builds .venv-snakemake from "
            "scripts/snakemake-requirements.txt), or pass --no-snakemake"
        )
    root = LocalTransport()
    kept = Path(tempfile.mkdtemp(dir="/scratch", prefix="bench-plan-kept-"))
    os.chmod(kept, 0o777)
    try:
        return run(args, variants, names, root, kept)
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def run(
    args: argparse.Namespace,
    variants: dict[str, Callable[[AsUser, Callable[[], None]], list[str]]],
    names: list[str],
    root: LocalTransport,
    kept: Path,
) -> int:
    results: dict[str, list[tuple[float, int, dict[str, int], int | None]]] = {v: [] for v in names}
    for round_no in range(args.rounds):
        order = names[round_no % len(names) :] + names[: round_no % len(names)]
        for name in order:
            checkout = args.before if name == BEFORE else args.checkout
            with scratch_user(args.user, checkout) as user:
                if name == KEPT:
                    user.env["JOBSMITH_STATE_DIR"] = str(kept / "state")
                before = take_snapshot(root)
                marks: list[Snapshot] = []

                def mark(marks: list[Snapshot] = marks) -> None:
                    marks.append(take_snapshot(root))

                started = time.perf_counter()
                variants[name](user, mark)
                wall = time.perf_counter() - started
                after = take_snapshot(root)
            mine = before.ctld_users.get(args.user, 0)
            rpcs = after.ctld_users.get(args.user, 0) - mine
            at_submit = marks[0].ctld_users.get(args.user, 0) - mine if marks else None
            kinds = {
                k: after.ctld.get(k, 0) - before.ctld.get(k, 0)
                for k in after.ctld
                if after.ctld.get(k, 0) != before.ctld.get(k, 0)
            }
            results[name].append((wall, rpcs, kinds, at_submit))
            log(f"round {round_no + 1}: {name}: {wall:.2f} s, {rpcs} RPCs of {args.user}")
    head = (
        f"{'variant':22} {'wall s (each round)':22} {'median':>7} {'RPCs: submit':>13} {'all':>9}"
    )
    print(head)
    raw_median = statistics.median(row[0] for row in results["raw Slurm"])
    for name, rows in results.items():
        walls = " ".join(f"{row[0]:.2f}" for row in rows)
        median = statistics.median(row[0] for row in rows)
        submit = "/".join("-" if row[3] is None else str(row[3]) for row in rows)
        every = "/".join(str(row[1]) for row in rows)
        ratio = f"({median / raw_median:.2f}x raw)"
        print(f"{name:22} {walls:22} {median:7.2f} {submit:>13} {every:>9}  {ratio}")
    print("slurmctld RPCs by type in the last round (all users, snapshots included):")
    for name, rows in results.items():
        kinds = rows[-1][2]
        shown = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()) if "STATS" not in k)
        print(f"  {name}: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
