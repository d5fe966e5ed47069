"""What the node blocklist adds to a watcher cycle (issue 27, item 3), without Slurm.

Each watcher cycle runs `agent/watcher/nodes.py: watch_nodes` on its one poll's answer:
it reads the user's blocklist file, looks each polled job's submission up in the ledger,
attributes failures to nodes and folds the blocklist. No Slurm command runs unless a job
was requeued, so its cost is the client's alone. Measured here on the real parts (a
JobLedger and a NodeBlocklist in a temporary directory, the statuses a poll of N running
jobs returns, each one 4-task array, with `lines` facts already in the blocklist file),
paired round by round in one run:

- `on`: watch_nodes with the blocklist on (the default policy);
- `off`: the same call with the site's `blocklist: null` (returns at once): the floor;
- `poll`: parsing the sacct text of the same jobs (parse_sacct_parsable), the client
  work every cycle already does, as a yardstick for `on`.

    .venv/bin/python benchmarks/bench_blocklist.py
    .venv/bin/python benchmarks/bench_blocklist.py --jobs 10,1000 --rounds 5 --lines 200
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.parsing.parse import parse_sacct_parsable
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.blocklist.attribution import NodeFailure
from jobsmith.agent.runtime.blocklist.store import NodeBlocklist
from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
from jobsmith.agent.watcher.nodes import watch_nodes
from jobsmith.site_config.model import Blocklist

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
FIELDS = "JobID|JobIDRaw|JobName|State|ExitCode|NodeList|Submit|Start|End"


class Parts:
    """What watch_nodes reads; the scheduler and executor are never reached here."""

    def __init__(self, ledger: JobLedger, blocklist: NodeBlocklist) -> None:
        self.ledger = ledger
        self.blocklist = blocklist
        self.scheduler = None
        self.executor = None


def _state(root: Path, jobs: int, lines: int) -> tuple[JobLedger, Path, str]:
    ledger = JobLedger(root / "jobs")
    rows = [FIELDS]
    for n in range(jobs):
        job_id = str(10_000 + 10 * n)
        ledger.record(
            SubmissionRecord(
                job_id=job_id,
                cluster="bench",
                template="command",
                params={},
                options=JobOptions(job_name=f"b.js-{n:012x}", array="0-3"),
                script_sha256="0" * 64,
                submitted_at=T0,
                session_id="s",
            )
        )
        for t in range(4):
            rows.append(
                f"{job_id}_{t}|{int(job_id) + t}|b|RUNNING|0:0|n{t % 3 + 1}|"
                "2026-12-02T12:00:00|2026-12-02T12:00:05|Unknown"
            )
    path = root / "blocklist.jsonl"
    failures = [
        NodeFailure(
            node=f"n{i % 50}", job_id=str(i), job_id_raw=str(i), kind="node_fail",
            why="NODE_FAIL", at=T0 - timedelta(hours=2, seconds=i), run="",
        )
        for i in range(lines)
    ]  # fmt: skip
    NodeBlocklist(path, Blocklist()).note(failures)
    return ledger, path, "\n".join(rows)


def _statuses(text: str) -> dict[str, JobStatus]:
    by_job: dict[str, list] = {}  # type: ignore[type-arg]
    for rec in parse_sacct_parsable(text, "|"):
        by_job.setdefault(str(rec.array_job_id), []).append(rec)
    return {
        j: JobStatus(job_id=j, state=JobState.RUNNING, tasks=tuple(r)) for j, r in by_job.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="10,100,1000,5000", help="jobs watched, comma list")
    parser.add_argument("--rounds", type=int, default=7, help="paired rounds per size")
    parser.add_argument("--lines", type=int, default=1000, help="facts in the blocklist file")
    args = parser.parse_args()
    print(f"blocklist file: {args.lines} lines; {args.rounds} rounds; times in ms")
    print(f"{'jobs':>6} {'on':>9} {'off':>7} {'poll':>9} {'on/poll':>8}")
    for jobs in (int(j) for j in args.jobs.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            ledger, path, text = _state(Path(tmp), jobs, args.lines)
            statuses = _statuses(text)
            on = Parts(ledger, NodeBlocklist(path, Blocklist()))
            off = Parts(ledger, NodeBlocklist(path, None))
            times: dict[str, list[float]] = {"on": [], "off": [], "poll": []}
            for _ in range(args.rounds):
                runs: tuple[tuple[str, Callable[[], object]], ...] = (
                    ("on", partial(watch_nodes, on, statuses)),  # type: ignore[arg-type]
                    ("off", partial(watch_nodes, off, statuses)),  # type: ignore[arg-type]
                    ("poll", partial(parse_sacct_parsable, text, "|")),
                )
                for name, run in runs:
                    start = time.perf_counter()
                    run()
                    times[name].append((time.perf_counter() - start) * 1000)
            med = {k: statistics.median(v) for k, v in times.items()}
            ratios = [a / b for a, b in zip(times["on"], times["poll"], strict=True)]
            print(
                f"{jobs:>6} {med['on']:>9.2f} {med['off']:>7.3f} {med['poll']:>9.2f} "
                f"{statistics.median(ratios):>8.2f}"
            )


if __name__ == "__main__":
    main()
