"""What the feeding index costs a watcher cycle (issue 28 item 1: a workload none of
whose parts fitted is found by the index, agent/runtime/workflows/feeding/index.py).

Every watcher cycle now lists the index (`FeedingIndex.sessions()`: one directory read,
one small file read per workload still feeding) before it decides whom to feed. The
claim: that is negligible beside the cycle itself, and it does not grow with the jobs
the ledger holds, only with the workloads still feeding. Measured here, in one run,
round by round (each round times every case once, in a shuffled order, so the machine's
noise falls on all of them alike):

- `empty`: no workload ever fed (the directory does not exist), what most users have;
- `N entries`: N workloads still feeding (1, 10, 100);
- `ledger scan`: for scale, what the same cycle already spent before the index existed
  to find part jobs when a job ended: `open_jobs(ledger, folds)` over a ledger of
  --jobs records in one session (their states recorded as RUNNING, so every one is open),
  each record read from its file.

No Slurm is asked (the index and the ledger are files). Run from a checkout:

    PYTHONPATH=src .venv/bin/python benchmarks/bench_feeding_index.py
    PYTHONPATH=src .venv/bin/python benchmarks/bench_feeding_index.py --rounds 30 --jobs 5000
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.session.readmodel import SessionFolds


def _ledger(root: Path, jobs: int) -> tuple[JobLedger, SessionFolds]:
    """A ledger of jobs records in one session whose states are RUNNING, and its folds."""
    from jobsmith.adapters.options import JobOptions
    from jobsmith.agent.runtime.session.events import EventKind
    from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
    from jobsmith.agent.runtime.session.readmodel import SessionFolds
    from jobsmith.agent.runtime.session.session_log import SessionLog
    from jobsmith.agent.runtime.session.store import FileSessionStore

    store = FileSessionStore(root / "sessions")
    ledger = JobLedger(root / "jobs")
    session = store.create()
    log = SessionLog(store, session)
    for n in range(jobs):
        job_id = str(100000 + n)
        ledger.record(
            SubmissionRecord(
                job_id=job_id, cluster="bench", template="command", params={},
                options=JobOptions(job_name=f"bench.js-{n:012x}"), script_sha256="0" * 64,
                submitted_at=datetime.now(), session_id=session,
            )
        )  # fmt: skip
    for n in range(jobs):
        log.append(EventKind.JOB_STATE, {"job_id": str(100000 + n), "state": "RUNNING"}, None)
    folds = SessionFolds(store, root / "folds")
    return ledger, folds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=1000, help="ledger records for the scan")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-feeding-"))
    try:
        _run(root, args.rounds, args.jobs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(root: Path, rounds: int, jobs: int) -> None:
    from jobsmith.agent.runtime.workflows.feeding.index import FeedingIndex
    from jobsmith.agent.watcher.cycle import open_jobs

    cases: dict[str, Callable[[], object]] = {
        "empty": FeedingIndex(root / "none" / "feeding").sessions
    }
    for n in (1, 10, 100):
        index = FeedingIndex(root / f"i{n}" / "feeding")
        for k in range(n):
            index.add(f"20261203T000000.000Z-{k:012x}", f"st-{k:010x}")
        cases[f"{n} entries"] = index.sessions
    ledger, folds = _ledger(root / "ledger", jobs)
    open_jobs(ledger, folds)  # the folds kept, as a watcher's are
    cases[f"ledger scan ({jobs} jobs)"] = lambda: open_jobs(ledger, folds)
    times: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for _ in range(rounds):
        random.shuffle(names)
        for name in names:
            start = time.perf_counter()
            cases[name]()
            times[name].append(time.perf_counter() - start)
    print(f"load: {os.getloadavg()}; rounds {rounds}")
    scan = statistics.median(times[f"ledger scan ({jobs} jobs)"])
    for name, seen in times.items():
        median = statistics.median(seen)
        print(
            f"{name:28s} median {median * 1e6:10.1f} us  min {min(seen) * 1e6:10.1f} us  "
            f"max {max(seen) * 1e6:10.1f} us  median/scan {median / scan:.5f}"
        )


if __name__ == "__main__":
    main()
