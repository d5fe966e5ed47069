"""Following a pipeline: reading from the recorded offset vs re-reading the whole trace.

A Nextflow run's trace grows by a few rows per watcher cycle; a long pipeline writes
thousands. jobsmith reads each record from the byte where the last read stopped (the
offset is in the session's pipeline_progress events) and parses only the new lines. This
runs both ways side by side in one process, over the same growing file:

- follow: `Pipelines.follow` as the watcher calls it (a real FileSessionStore under a
  temporary directory, the real LocalTransport running `tail -c +N | head -c`, the real
  Nextflow trace parser; one pipeline_progress event appended, fsync'ed, per cycle that
  saw new rows);
- reread: what a reader without offsets would do each cycle: read the whole file and
  parse every row again (the same parser, no store).

The rows are the real capture tests/fixtures/nextflow/trace-slurm-cached-failed-retry.tsv
(619 rows of an nf-core run), repeated with fresh task ids to the size asked.

    .venv/bin/python benchmarks/bench_pipeline_follow.py [--cycles 200] [--rows-per-cycle 25]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from jobsmith.adapters.nextflow import NextflowEngine
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.workflow import EngineKind, EngineSite, LaunchRequest, RecordFile
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.payloads import (
    PipelinePayload,
    PipelineProgressPayload,
    payload,
)
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.runtime.workflows.pipelinerun import ORIGIN, Pipelines

CAPTURE = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "fixtures"
    / "nextflow"
    / "trace-slurm-cached-failed-retry.tsv"
)


def _rows(n: int) -> tuple[str, list[str]]:
    header, *rows = CAPTURE.read_text().splitlines()
    out = []
    for i in range(n):
        fields = rows[i % len(rows)].split("\t")
        fields[0] = str(i + 1)  # a task id of its own
        out.append("\t".join(fields))
    return header, out


def _session(store: FileSessionStore, launch_dir: Path) -> str:
    sid = store.create({"title": "bench", "origin": ORIGIN})
    request = LaunchRequest(
        engine=EngineKind.NEXTFLOW, pipeline="nf-core/sarek", launch_dir=str(launch_dir)
    )
    site = EngineSite(partition="debug", head_partition="debug", max_concurrent_tasks=100)
    log = SessionLog(store, sid)
    data = PipelinePayload(request=request, site=site, attempt=1, step_id="st-bench")
    log.append(EventKind.PIPELINE, data.model_dump(mode="json"), "st-bench")
    result = {"outcome": "done", "submitted": True, "job_id": "4242"}
    log.append(EventKind.RESULT, result, "st-bench")
    return sid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--rows-per-cycle", type=int, default=25)
    args = parser.parse_args()
    header, rows = _rows(args.cycles * args.rows_per_cycle)
    engine = NextflowEngine()
    with tempfile.TemporaryDirectory() as tmp:
        launch = Path(tmp) / "run"
        store = FileSessionStore(Path(tmp) / "sessions")
        sid = _session(store, launch)
        trace_record = next(
            r
            for r in engine.records(
                LaunchRequest(engine=EngineKind.NEXTFLOW, pipeline="x", launch_dir=str(launch)),
                attempt=1,
            )
            if r.kind == "trace"
        )
        trace = launch / trace_record.path
        trace.parent.mkdir(parents=True)
        trace.write_text(header + "\n")
        pipes = Pipelines(
            cast(Any, None), store, LocalTransport(), lambda ids: {}, {EngineKind.NEXTFLOW: engine}
        )
        follow_s = reread_s = 0.0
        reread_bytes = 0
        follow_tail: list[float] = []
        reread_tail: list[float] = []
        for cycle in range(args.cycles):
            chunk = rows[cycle * args.rows_per_cycle : (cycle + 1) * args.rows_per_cycle]
            with trace.open("a") as fh:
                fh.write("\n".join(chunk) + "\n")
            size = trace.stat().st_size

            t0 = time.perf_counter()
            run = pipes.follow(sid)
            took = time.perf_counter() - t0
            follow_s += took

            t0 = time.perf_counter()
            text = trace.read_text()
            parsed = engine.parse(
                RecordFile(path=trace_record.path, kind="trace"), text.splitlines(), ()
            )
            took_reread = time.perf_counter() - t0
            reread_s += took_reread
            reread_bytes += size
            if cycle >= args.cycles - 10:
                follow_tail.append(took)
                reread_tail.append(took_reread)
        events = store.read(sid)
        follow_bytes = sum(run.offsets.values())  # where the reads stopped: each byte once
        seen = sum(
            len(p.tasks) for e in events if isinstance(p := payload(e), PipelineProgressPayload)
        )
        assert seen == len(parsed.tasks) == len(rows) and follow_bytes == size, (seen, len(rows))
        n_events = len(events)
    n = len(rows)
    print(f"{args.cycles} cycles, {args.rows_per_cycle} new trace rows each: {n} tasks, "
          f"final trace {size:,} bytes")  # fmt: skip
    print(f"  follow (offsets, store):  {follow_s:7.3f} s in all, last 10 cycles "
          f"{1000 * sum(follow_tail) / 10:6.2f} ms each, {follow_bytes:,} bytes read, "
          f"{n_events} session events")  # fmt: skip
    print(f"  reread (whole file):      {reread_s:7.3f} s in all, last 10 cycles "
          f"{1000 * sum(reread_tail) / 10:6.2f} ms each, {reread_bytes:,} bytes read")  # fmt: skip
    print(f"  bytes read, reread / follow: {reread_bytes / follow_bytes:.0f}x")


if __name__ == "__main__":
    main()
