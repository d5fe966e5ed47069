"""How fast the default session store is: appends per second, p99 append latency, resume.

One writer appends N events (default 10,000) to one new session of the default store
(`FileSessionStore`, one fsync'ed file per event, claimed by link(2)), each with a payload
the size of a typical step result. Every append is timed. The same session is then
resumed the way `jobsmith sessions resume` will: `last_seq` and a read of every event,
timed several times (the first read is the one after the appends, so the page cache is
warm; a resume on another login node over NFS pays network round trips instead).

By default the store is a fresh directory next to the real one, under jobsmith's state
directory ($JOBSMITH_STATE_DIR or platformdirs' user state dir), so the figures are those
of the filesystem the store really lives on; it is removed afterwards.

    .venv/bin/python benchmarks/bench_store.py
    .venv/bin/python benchmarks/bench_store.py --events 2000 --root /tmp/bench-sessions
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from jobsmith.agent.app import UserDirs
from jobsmith.agent.runtime.session.events import EventData, EventKind
from jobsmith.agent.runtime.session.store import FileSessionStore

# Roughly what a step's result event carries (a few hundred bytes of JSON).
PAYLOAD: EventData = {
    "state": "COMPLETED",
    "job_id": "123456_7",
    "exit_code": 0,
    "elapsed_s": 5423,
    "max_rss_bytes": 3_221_225_472,
    "outputs": ["/scratch/alice/bam/sample_07.bam", "/scratch/alice/bam/sample_07.bam.bai"],
    "stderr_tail": ["[M::mem_process_seqs] Processed 100000 reads in 41.2 CPU sec"] * 3,
}


def percentile(samples: list[float], pct: float) -> float:
    """The pct-th percentile (nearest rank) of samples."""
    ordered = sorted(samples)
    rank = max(1, round(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def filesystem_of(path: Path) -> str:
    """The filesystem type holding path, as `stat -f` names it."""
    out = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def bench_appends(store: FileSessionStore, events: int) -> tuple[str, list[float]]:
    """Append events notes to a new session; its id and each append's seconds."""
    sid = store.create({"title": "bench_store"})
    latencies = []
    for seq in range(1, events + 1):
        start = time.perf_counter()
        store.append(sid, seq, EventKind.RESULT, PAYLOAD, step_id=f"step-{seq}")
        latencies.append(time.perf_counter() - start)
    return sid, latencies


def bench_resume(store: FileSessionStore, sid: str, repeats: int) -> list[float]:
    """Seconds to find the newest event and read the whole session, repeats times."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        last = store.last_seq(sid)
        events = store.read(sid)
        times.append(time.perf_counter() - start)
        assert len(events) == last + 1
    return times


def report(root: Path, events: int, latencies: list[float], resumes: list[float]) -> None:
    """Print the figures."""
    total = sum(latencies)
    ms = [x * 1000 for x in latencies]
    print(f"store root: {root} ({filesystem_of(root)})")
    print(f"appends: {events} events, one writer, {total:.2f} s")
    print(f"  throughput: {events / total:,.0f} events/s")
    print(
        f"  latency ms: p50 {statistics.median(ms):.3f}  p99 {percentile(ms, 99):.3f}"
        f"  max {max(ms):.3f}"
    )
    runs = "  ".join(f"{t:.3f}" for t in resumes)
    print(f"resume (last_seq + read all {events + 1} events), s: {runs}")
    print(f"  best {min(resumes):.3f} s = {(events + 1) / min(resumes):,.0f} events/s")


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=10_000, help="events to append")
    parser.add_argument("--repeats", type=int, default=3, help="resume measurements")
    parser.add_argument("--root", type=Path, help="store directory (default: a fresh one)")
    parser.add_argument("--keep", action="store_true", help="do not delete the store")
    args = parser.parse_args()
    state = UserDirs.for_user(os.environ).state_dir
    root = args.root or state / f"bench-sessions-{secrets.token_hex(4)}"
    store = FileSessionStore(root)
    try:
        sid, latencies = bench_appends(store, args.events)
        resumes = bench_resume(store, sid, args.repeats)
        report(root, args.events, latencies, resumes)
        print(f"store size: {store.size_bytes():,} bytes allocated")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
