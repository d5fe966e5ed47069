"""Agent overhead per step, excluding Slurm: what jobsmith itself adds to each step.

Runs N submit steps (the `command` template, real sbatch on the lab cluster) and N render
steps (no Slurm at all) through the real executor and session store, as the lab user.
Every Slurm command goes through a timing transport; overhead = step wall time minus the
time spent inside Slurm commands. Run as the lab user, from the repository root:

    runuser -u alice -- .venv/bin/python benchmarks/bench_agent_overhead.py [N]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from lab_user import SITE

from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.transport import CommandResult
from jobsmith.agent.app import App, UserDirs
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.submission.steps import Render, Submit


class TimingTransport(LocalTransport):
    """The real local transport, adding up the time spent in Slurm commands."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds = 0.0
        self.calls: list[str] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        start = time.perf_counter()
        try:
            return super().run(argv, timeout=timeout, stdin=stdin, env=env)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls.append(argv[0])


def measure(app: App, transport: TimingTransport, step_factory, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    """Per-step overhead in ms (wall time minus time inside Slurm commands)."""
    session = app.store.create({"title": "overhead benchmark"})
    overheads = []
    for _ in range(n):
        transport.seconds = 0.0
        start = time.perf_counter()
        app.executor.run(session, step_factory())
        overheads.append((time.perf_counter() - start - transport.seconds) * 1000)
    return overheads


def report(label: str, values: list[float]) -> None:
    """Print median, p90 and max."""
    ordered = sorted(values)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    print(
        f"{label}: n={len(values)} median {statistics.median(values):.1f} ms, "
        f"p90 {p90:.1f} ms, max {ordered[-1]:.1f} ms"
    )


def main(n: int) -> None:
    """Run both measurements in one temporary jobsmith home."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("HOME")) as home:
        work = Path(home)
        (work / "config").mkdir()
        (work / "config" / "site.yaml").write_text(
            f"paths:\n  allowed_roots: ['~', '/scratch/$USER', '{work}']\n"
        )
        transport = TimingTransport()
        app = App(
            paths=UserDirs(config_dir=work / "config", state_dir=work / "state"),
            environ=dict(os.environ),
            site_file=SITE,
            transport_override=transport,
        )
        request = JobRequest(template="command", params={"command": "true"}, log_dir=work)
        report("render (no Slurm)", measure(app, transport, lambda: Render(job=request), n))
        transport.calls.clear()
        report("submit, excluding Slurm", measure(app, transport, lambda: Submit(job=request), n))
        per_step = {c: transport.calls.count(c) / n for c in sorted(set(transport.calls))}
        print(f"Slurm commands per submit step: {per_step}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
