"""What the watcher costs the scheduler per poll cycle, counted by the scheduler itself.

The claim (issue 4): one watcher cycle is one batched sacct (and at most one squeue) for
every open job of every session, however many jobs there are, so the controller's load
per cycle does not grow with the number of jobs watched. Measured here, in one run:

- `jobsmith.agent.watcher.cycle.watch_cycle(store, ledger, status, decide)` (the project's own
  code path: open jobs from the session store and ledger, one `status()` call, state
  changes recorded as job_state events) while watching 10, 100, 1,000 and 5,000 jobs. The
  status callable is `SlurmScheduler(transport).status`, the transport runs every command
  as the lab user (`runuser -u alice --`). For each size: the first cycle (which records
  one job_state event per job) and several steady-state cycles (which record nothing).
- Side by side, naive per-job polling of the same jobs up to 1,000: one `sacct -j ID`
  (the adapter's own query narrowed to one id) and one `squeue -j ID` per job.
- The watcher's own cost per cycle: CPU time of this process (`time.process_time`),
  CPU time of the Slurm commands it ran (`getrusage(RUSAGE_CHILDREN)` deltas), and its
  peak RSS during the cycle (VmHWM, reset before each cycle through
  /proc/self/clear_refs); at the largest size, two more fresh states are watched for a
  first and a steady cycle each: one under tracemalloc (peak of Python allocations),
  one under cProfile (where the time goes). Both run slower than the plain cycles.

Load is counted with `sdiag` (slurmctld) and `sacctmgr show stats` (slurmdbd): RPCs by
message type, and the daemons' own handling time of those RPCs (total_time, µs),
differences of snapshots around each cycle (counters are never reset; other sessions use
the same cluster, so anything they do inside a window is counted too: steady cycles are
repeated and every one is printed).

The watched jobs are individual jobs held at submission (pending array tasks are one
record until they start): one `sbatch --hold --parsable --wrap true -p debug --mem=10M
-o /dev/null --nice=1000 -J <run name>` per job, as the lab user. Held jobs stay pending
and cost nothing to run. The user's pending jobs count against jobsmith's
max_concurrent_jobs (2,000 in the lab's site file) for everyone submitting as that user,
so the time with thousands of them is kept short: the largest size goes first (its jobs
submitted 4 sbatch at a time), then all but the jobs of the next size are cancelled and,
once slurmctld has dropped them (MinJobAge), the smaller sizes are measured on those
(every `squeue --me` answer then holds that many of our jobs, as it would for a user with
that many jobs). Every job is cancelled at the end, even on failure (scancel as the user,
1,000 ids per call), and the temporary jobsmith state (a FileSessionStore and a JobLedger
under jobsmith's state directory) is removed.

Run as root on the lab cluster (scripts/slurm-lab up):

    .venv/bin/python benchmarks/bench_watch_load.py
    .venv/bin/python benchmarks/bench_watch_load.py --sizes 10,50 --naive-max 50 --repeat 2
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from slurm_stats import (
    RunAsTransport,
    calibrate,
    floor_overhead,
    job_info_rpcs,
    log,
    served_around,
    wait_for_accounting,
)

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.commands import argv
from jobsmith.adapters.slurm.parsing.parse import SACCT_FIELDS, SQUEUE_FORMAT, parse_sacct_parsable
from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.agent.app import UserDirs
from jobsmith.agent.runtime.session.events import Event
from jobsmith.agent.runtime.session.jobstate import StateChange
from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.watcher.cycle import open_jobs, watch_cycle

#: The held jobs' sbatch line (after it: -J <run name>). One job each, never run.
SBATCH_HELD = (
    "sbatch",
    "--hold",
    "--parsable",
    "--wrap",
    "true",
    "-p",
    "debug",
    "--mem=10M",
    "-o",
    "/dev/null",
    "--nice=1000",
)
#: what the ledger records as the script of every job (its hash, really)
WRAP_SCRIPT = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\ntrue\n"
#: ids per scancel call at clean-up
CANCEL_BATCH = 1000


# --- the process's own cost (pure helpers first) ------------------------------------------


def parse_vm_kib(status_text: str, key: str) -> int | None:
    """A `VmXxx:  1234 kB` line of /proc/PID/status, in KiB (None if absent)."""
    match = re.search(rf"^{key}:\s*(\d+)\s*kB", status_text, re.MULTILINE)
    return int(match[1]) if match else None


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS; False where not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def rss_kib() -> tuple[int | None, int | None]:
    """(current RSS, peak RSS since the last reset) of this process, KiB."""
    text = Path("/proc/self/status").read_text()
    return parse_vm_kib(text, "VmRSS"), parse_vm_kib(text, "VmHWM")


def children_cpu_s() -> float:
    """User + system CPU seconds of every waited-for child so far (runuser and below)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class TimedStatus:
    """The status callable handed to watch_cycle: SlurmScheduler.status, timed.

    Keeps the wall and CPU time spent inside status() (running sacct/squeue, parsing their
    output, merging), so the rest of a cycle is watch_cycle's own bookkeeping.
    """

    def __init__(self, sched: SlurmScheduler) -> None:
        """Wrap sched.status."""
        self._sched = sched
        self.wall_s = 0.0
        self.cpu_s = 0.0
        self.ids = 0

    def __call__(self, job_ids: list[str], since: datetime) -> Mapping[str, JobStatus]:
        """One SlurmScheduler.status() call."""
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return self._sched.status(job_ids, since)
        finally:
            self.wall_s += time.perf_counter() - wall
            self.cpu_s += time.process_time() - cpu
            self.ids += len(job_ids)

    def reset(self) -> None:
        """Forget the time counted so far."""
        self.wall_s = self.cpu_s = 0.0
        self.ids = 0


def no_decision(change: StateChange, status: JobStatus) -> dict[str, object] | None:
    """The decision-maker: held jobs never fail, and nothing is decided here."""
    return None


# --- one measured window ------------------------------------------------------------------


@dataclass
class Cycle:
    """One measured window: a watcher cycle or a naive polling round."""

    name: str
    kind: str  # "first", "steady", "naive"
    jobs: int
    variant: str  # "" (plain), "tracemalloc" or "cProfile": those run slower
    commands: dict[str, int]
    ctld: dict[str, int]
    dbd: dict[str, int]
    ctld_us: dict[str, int]
    dbd_us: dict[str, int]
    ctld_users: dict[str, int]
    dbd_users: dict[str, int]
    wall_s: float
    in_commands_s: float
    cpu_s: float
    children_cpu_s: float
    rss_start_kib: int | None
    rss_peak_kib: int | None
    traced_peak_kib: int | None = None
    status_wall_s: float | None = None
    status_cpu_s: float | None = None
    open_jobs_s: float | None = None
    log_events: int | None = None
    log_bytes: int | None = None
    changes: int = 0
    note: str = ""

    @property
    def job_info_rpcs(self) -> int:
        """RPCs that read job records from slurmctld (any squeue variant)."""
        return job_info_rpcs(self.ctld)


@dataclass
class Meter:
    """Snapshots around a callable; keeps the net differences and the process's costs."""

    root: LocalTransport
    user: RunAsTransport
    ctld_overhead: dict[str, int] = field(default_factory=dict)
    dbd_overhead: dict[str, int] = field(default_factory=dict)
    cycles: list[Cycle] = field(default_factory=list)

    def calibrate(self) -> None:
        """What a pair of snapshots costs, measured on empty windows."""
        self.ctld_overhead, self.dbd_overhead = calibrate(self.root)

    def measure(
        self,
        name: str,
        kind: str,
        jobs: int,
        action: Callable[[], str],
        *,
        traced: bool = False,
        profiler: cProfile.Profile | None = None,
    ) -> Cycle:
        """Run action between two snapshots; under tracemalloc or a profiler (slower)."""
        self.user.reset_tally()
        with served_around(self.root, self.ctld_overhead, self.dbd_overhead) as served:
            reset_peak_rss()
            rss_start, _ = rss_kib()
            if traced:
                tracemalloc.start()
            children = children_cpu_s()
            cpu = time.process_time()
            started = time.perf_counter()
            if profiler is not None:
                profiler.enable()
            try:
                note = action()
            finally:
                if profiler is not None:
                    profiler.disable()
                wall = time.perf_counter() - started
                cpu = time.process_time() - cpu
                children = children_cpu_s() - children
                traced_peak = tracemalloc.get_traced_memory()[1] // 1024 if traced else None
                if traced:
                    tracemalloc.stop()
            _, rss_peak = rss_kib()
        ctld, dbd = served.ctld, served.dbd
        cycle = Cycle(
            name=name,
            kind=kind,
            jobs=jobs,
            variant="tracemalloc" if traced else "cProfile" if profiler is not None else "",
            commands=dict(self.user.calls),
            ctld=ctld,
            dbd=dbd,
            ctld_us=served.ctld_us,
            dbd_us=served.dbd_us,
            ctld_users=served.ctld_users,
            dbd_users=served.dbd_users,
            wall_s=wall,
            in_commands_s=self.user.seconds,
            cpu_s=cpu,
            children_cpu_s=children,
            rss_start_kib=rss_start,
            rss_peak_kib=rss_peak,
            traced_peak_kib=traced_peak,
            note=note,
        )
        self.cycles.append(cycle)
        log(
            f"{name}: commands {cycle.commands}, slurmctld {sum(ctld.values())} RPCs, "
            f"slurmdbd {sum(dbd.values())} RPCs, {wall:.2f} s, CPU {cpu:.2f} s "
            f"(+{children:.2f} s children); {note}"
        )
        return cycle


# --- jobs and jobsmith state --------------------------------------------------------------


@dataclass(frozen=True)
class HeldJob:
    """A job the benchmark submitted (held), and when sbatch answered."""

    job_id: str
    submitted_at: datetime


def submit_held(
    user: RunAsTransport, count: int, job_name: str, out: list[HeldJob], threads: int
) -> None:
    """count × one sbatch --hold as the user, from `threads` threads at once (to keep short
    the time the user has thousands of pending jobs); each id lands in out at once, for
    clean-up, and out ends sorted by job id."""
    lock = threading.Lock()
    started = time.monotonic()

    def one(_: int) -> None:
        res = user.run([*SBATCH_HELD, "-J", job_name], timeout=60, env=argv.SLURM_ENV)
        job_id = res.stdout.strip().split(";")[0]
        if res.returncode != 0 or not job_id.isdigit():
            raise SystemExit(f"sbatch failed: {res.stderr.strip() or res.stdout}")
        with lock:
            out.append(HeldJob(job_id, datetime.now()))
            if len(out) % 500 == 0:
                log(f"{len(out)} held jobs submitted ({time.monotonic() - started:.0f} s)")

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        for _ in pool.map(one, range(count)):
            pass
    out.sort(key=lambda j: int(j.job_id))


@dataclass
class WatchState:
    """A temporary jobsmith state: one session whose ledger holds the watched jobs."""

    directory: Path
    store: CountingStore
    ledger: JobLedger
    session_id: str


class CountingStore:
    """The real FileSessionStore, counting the session-log events (and their files'
    bytes) every read returns: what a cycle reads of the logs."""

    def __init__(self, real: FileSessionStore, root: Path) -> None:
        self.real = real
        self.root = root
        self.events = 0
        self.bytes = 0

    def read(self, session_id: str, from_seq: int = 0, to_seq: int | None = None) -> list[Event]:
        """Events from_seq..to_seq, counted."""
        events = self.real.read(session_id, from_seq, to_seq)
        self.events += len(events)
        folder = self.root / session_id
        self.bytes += sum((folder / f"{e.seq:010d}.json").stat().st_size for e in events)
        return events

    def reset(self) -> None:
        """Start counting again."""
        self.events = self.bytes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def make_state(base: Path, label: str, jobs: Sequence[HeldJob], cluster: str) -> WatchState:
    """A fresh store and ledger under base/label: one session, one record per job."""
    directory = base / label
    store = CountingStore(FileSessionStore(directory / "sessions"), directory / "sessions")
    ledger = JobLedger(directory / "jobs")
    session_id = store.create({"title": f"bench-watch {label}"})
    sha = hashlib.sha256(WRAP_SCRIPT.encode()).hexdigest()
    for job in jobs:
        ledger.record(
            SubmissionRecord(
                job_id=job.job_id,
                cluster=cluster,
                template="command",
                params={"command": "true"},
                options=JobOptions(job_name=f"bench.js-{secrets.token_hex(6)}"),
                script_sha256=sha,
                submitted_at=job.submitted_at,
                session_id=session_id,
            )
        )
    return WatchState(directory, store, ledger, session_id)


def watch_action(
    state: WatchState, status: TimedStatus, holder: dict[str, Any], kept: bool = True
) -> Callable[[], str]:
    """One watch_cycle over state; what it saw goes to holder['cycle'] and the note.

    kept: the folds kept on disk, as `jobsmith watch` keeps them (each cycle a new
    process: a fresh SessionFolds on the same directory); else folds held by this cycle
    alone, which read every session log in full, as every cycle did before folds.
    """

    def run() -> str:
        status.reset()
        state.store.reset()
        store: Any = state.store  # the counting wrapper stands in for the store
        folds = SessionFolds(store, state.directory / "folds" if kept else None)
        cycle = watch_cycle(store, state.ledger, status, no_decision, folds=folds)
        holder["log_events"], holder["log_bytes"] = state.store.events, state.store.bytes
        holder["cycle"] = cycle
        holder["status_wall_s"], holder["status_cpu_s"] = status.wall_s, status.cpu_s
        states: dict[str, int] = {}
        for change in cycle.changes:
            states[change.state.value] = states.get(change.state.value, 0) + 1
        ok = "ok" if cycle.scheduler_ok else f"SLURM DID NOT ANSWER: {cycle.error}"
        return f"watched {cycle.watched}, {len(cycle.changes)} job_state events {states}, {ok}"

    return run


def naive_action(user: RunAsTransport, ids: Sequence[str], since: datetime) -> Callable[[], str]:
    """A naive watcher's cycle: per job, one `sacct -j ID` and one `squeue -j ID`."""

    def run() -> str:
        in_acct = in_ctld = 0
        for job_id in ids:
            res = user.run(
                argv.sacct_jobs([job_id], since, SACCT_FIELDS), timeout=60, env=argv.SLURM_ENV
            )
            in_acct += res.returncode == 0 and bool(
                parse_sacct_parsable(res.stdout, argv.DELIMITER)
            )
            res = user.run(
                ["squeue", "-j", job_id, "--noheader", "-t", "all", f"--Format={SQUEUE_FORMAT}"],
                timeout=60,
                env=argv.SLURM_ENV,
            )
            in_ctld += res.returncode == 0 and bool(res.stdout.strip())
        return f"{in_acct}/{len(ids)} in accounting, {in_ctld}/{len(ids)} in slurmctld"

    return run


def measure_size(
    meter: Meter,
    status: TimedStatus,
    base: Path,
    jobs: Sequence[HeldJob],
    args: argparse.Namespace,
    cluster: str,
) -> None:
    """For len(jobs): the first and steady watcher cycles, then the naive round."""
    n = len(jobs)
    t0 = time.monotonic()
    state = make_state(base, f"n{n}", jobs, cluster)
    log(f"{n} jobs: jobsmith state written in {time.monotonic() - t0:.1f} s ({state.directory})")
    for rep in range(args.repeat + 1):
        kind = "first" if rep == 0 else "steady"
        label = f"watch {n}: first cycle" if rep == 0 else f"watch {n}: steady [{rep}]"
        holder: dict[str, Any] = {}
        cycle = meter.measure(label, kind, n, watch_action(state, status, holder))
        finish_watch_cycle(cycle, holder, state)
    # side by side: a steady cycle that keeps no folds reads the whole log, as before
    holder = {}
    label = f"watch {n}: steady, no kept folds"
    cycle = meter.measure(label, "steady", n, watch_action(state, status, holder, kept=False))
    finish_watch_cycle(cycle, holder, state)
    if n <= args.naive_max:
        since = min(j.submitted_at for j in jobs) - timedelta(minutes=5)
        meter.measure(
            f"naive {n}: sacct+squeue -j per job",
            "naive",
            n,
            naive_action(meter.user, [j.job_id for j in jobs], since),
        )


def finish_watch_cycle(cycle: Cycle, holder: Mapping[str, Any], state: WatchState) -> None:
    """Add what only the watcher has: time in status(), open_jobs alone, changes."""
    cycle.log_events = holder.get("log_events")
    cycle.log_bytes = holder.get("log_bytes")
    cycle.status_wall_s = holder.get("status_wall_s")
    cycle.status_cpu_s = holder.get("status_cpu_s")
    watched = holder.get("cycle")
    cycle.changes = len(watched.changes) if watched is not None else 0
    # open_jobs again, alone, on the state the cycle started from (a steady cycle leaves
    # it as it found it; after a first cycle every job has one job_state event more)
    t0 = time.perf_counter()
    store: Any = state.store
    open_jobs(state.ledger, SessionFolds(store, state.directory / "folds"))
    cycle.open_jobs_s = time.perf_counter() - t0


def measure_memory(
    meter: Meter, status: TimedStatus, base: Path, jobs: Sequence[HeldJob], cluster: str
) -> None:
    """A fresh state of len(jobs) jobs, first and one steady cycle under tracemalloc."""
    n = len(jobs)
    state = make_state(base, f"n{n}-traced", jobs, cluster)
    for kind in ("first", "steady"):
        holder: dict[str, Any] = {}
        cycle = meter.measure(
            f"watch {n}: {kind}, tracemalloc",
            kind,
            n,
            watch_action(state, status, holder),
            traced=True,
        )
        finish_watch_cycle(cycle, holder, state)


def measure_profile(
    meter: Meter, status: TimedStatus, base: Path, jobs: Sequence[HeldJob], cluster: str
) -> dict[str, list[str]]:
    """A fresh state of len(jobs) jobs, first and one steady cycle under cProfile.

    Returns the hot spots of each (see hot_spots), to say where the watcher's time goes.
    """
    n = len(jobs)
    state = make_state(base, f"n{n}-profiled", jobs, cluster)
    spots: dict[str, list[str]] = {}
    for kind in ("first", "steady"):
        holder: dict[str, Any] = {}
        profiler = cProfile.Profile()
        cycle = meter.measure(
            f"watch {n}: {kind}, cProfile",
            kind,
            n,
            watch_action(state, status, holder),
            profiler=profiler,
        )
        finish_watch_cycle(cycle, holder, state)
        spots[f"{kind} cycle, {n} jobs ({cycle.wall_s:.1f} s under cProfile)"] = hot_spots(
            pstats.Stats(profiler)
        )
    return spots


def hot_spots(stats: pstats.Stats, top: int = 10) -> list[str]:
    """jobsmith's functions by cumulative time, then any function by its own time."""
    table: dict[tuple[str, int, str], tuple[int, int, float, float, object]]
    table = stats.stats  # type: ignore[attr-defined]
    head = f"{'own s':>7} {'cum s':>7} {'calls':>9}  function"
    ours = [kv for kv in table.items() if "/jobsmith/" in kv[0][0]]
    out = ["  jobsmith functions by cumulative time:", head]
    out += [_spot(k, v) for k, v in sorted(ours, key=lambda kv: -kv[1][3])[:top]]
    out += ["  all functions by own time:", head]
    out += [_spot(k, v) for k, v in sorted(table.items(), key=lambda kv: -kv[1][2])[:top]]
    return out


def _spot(key: tuple[str, int, str], value: tuple[int, int, float, float, object]) -> str:
    filename, line, func = key
    _cc, calls, own, cum, _callers = value
    path = Path(filename)
    where = func if filename == "~" else f"{path.parent.name}/{path.name}:{line}({func})"
    return f"{own:>7.2f} {cum:>7.2f} {calls:>9}  {where}"


# --- clean-up -----------------------------------------------------------------------------


def run_jobs(root: LocalTransport, user: str, job_name: str, states: str) -> set[str]:
    """Ids of the user's jobs with this run's name that slurmctld holds in these states."""
    command = ["squeue", "-h", "-u", user, "--name", job_name, "-t", states, "-o", "%i"]
    return set(root.run(command, timeout=120).stdout.split())


def clean_up(
    root: LocalTransport, user: RunAsTransport, job_name: str, ids: Sequence[str], keep: int
) -> int:
    """scancel (as the user) ids, CANCEL_BATCH per call, and wait; returns len(ids).

    keep > 0 (trimming to the smaller sizes): wait until slurmctld holds no more than keep
    jobs of this run in any state, as cancelled jobs stay in every `squeue --me` answer
    for MinJobAge. keep == 0 (the end): cancel whatever of this run is still live, by
    name, and wait until nothing is.
    """
    for i in range(0, len(ids), CANCEL_BATCH):
        batch = list(ids[i : i + CANCEL_BATCH])
        res = user.run(argv.scancel(batch), timeout=300)
        if res.returncode != 0:
            log(f"scancel of {len(batch)} ids: {res.stderr.strip()[:300]}")
    states = "all" if keep else "PD,R,CG,S"
    deadline = time.monotonic() + 240
    left = run_jobs(root, user.user, job_name, states)
    while len(left) > keep and time.monotonic() < deadline:
        if not keep:
            log(f"{len(left)} jobs named {job_name} still live; cancelling them")
            user.run(argv.scancel(sorted(left)[:CANCEL_BATCH]), timeout=300)
        time.sleep(3)
        left = run_jobs(root, user.user, job_name, states)
    if len(left) > keep:
        log(f"STILL IN SLURMCTLD after 240 s: {len(left)} jobs named {job_name}")
    return len(ids)


# --- the run ------------------------------------------------------------------------------


@dataclass
class Environment:
    """Where the numbers came from."""

    date: str
    host: str
    nproc: int
    slurm: str
    kernel: str
    user: str
    python: str
    commit: str
    state_dir: str


def git_commit() -> str:
    """HEAD of the checkout, with '+changes' if agent/ or adapters/ differ from it."""
    here = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "agent", "adapters"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" +uncommitted changes in agent/ or adapters/" if dirty else "")


def run(args: argparse.Namespace) -> tuple[Environment, Meter, dict[str, Any]]:
    """Everything, in order; cancels every job and removes the state even on failure."""
    root = LocalTransport()
    user = RunAsTransport(args.user)
    sched = SlurmScheduler(user, timeout_s=300)
    status = TimedStatus(sched)
    meter = Meter(root, user)
    base = UserDirs.for_user(os.environ).state_dir / f"bench-watch-{secrets.token_hex(4)}"
    env = Environment(
        date=datetime.now().astimezone().isoformat(timespec="seconds"),
        host=os.uname().nodename,
        nproc=os.cpu_count() or 0,
        slurm=sched.version(),
        kernel=os.uname().release,
        user=args.user,
        python=sys.version.split()[0],
        commit=git_commit(),
        state_dir=str(base),
    )
    log(f"Slurm {env.slurm} on {env.host} ({env.nproc} CPUs), jobs as {args.user}; {base}")
    cluster = args.cluster
    meter.calibrate()
    log(f"snapshot overhead: sdiag {meter.ctld_overhead}, slurmdbd {meter.dbd_overhead}")
    job_name = f"bench-watch-{secrets.token_hex(4)}"
    held: list[HeldJob] = []
    extra: dict[str, Any] = {"job_name": job_name, "sizes": args.sizes}
    sizes = sorted(set(args.sizes))
    top, smaller = sizes[-1], sizes[:-1]
    try:
        # the largest size first, so that the time with thousands of pending jobs is short
        t0 = time.monotonic()
        submit_held(RunAsTransport(args.user), top, job_name, held, args.submit_threads)
        extra["submit"] = f"{top} sbatch in {time.monotonic() - t0:.1f} s"
        log(extra["submit"] + f" ({args.submit_threads} at a time)")
        since = min(j.submitted_at for j in held) - timedelta(minutes=5)
        wait_for_accounting(sched, root, [j.job_id for j in held], since)
        measure_size(meter, status, base, held, args, cluster)
        if not args.no_tracemalloc:
            measure_memory(meter, status, base, held, cluster)
        if not args.no_profile:
            extra["profile"] = measure_profile(meter, status, base, held, cluster)
        if smaller:
            keep = smaller[-1]
            t0 = time.monotonic()
            clean_up(root, user, job_name, [j.job_id for j in held[keep:]], keep)
            del held[keep:]
            log(
                f"cancelled all but {keep} jobs; gone from slurmctld after "
                f"{time.monotonic() - t0:.0f} s"
            )
            for n in smaller:
                measure_size(meter, status, base, held[:n], args, cluster)
    finally:
        t0 = time.monotonic()
        extra["cancelled"] = clean_up(root, user, job_name, [j.job_id for j in held], 0)
        extra["cancel_s"] = round(time.monotonic() - t0, 1)
        log(f"cancelled {extra['cancelled']} jobs in {extra['cancel_s']} s")
        extra["state_bytes"] = _du(base)
        shutil.rmtree(base, ignore_errors=True)
    return env, meter, extra


def _du(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            total += p.lstat().st_blocks * 512
        except FileNotFoundError:
            continue
    return total


# --- report -------------------------------------------------------------------------------


def report(env: Environment, meter: Meter, extra: Mapping[str, Any]) -> str:
    """The tables printed at the end (and pasted into benchmarks/README.md)."""
    cycles = sorted(meter.cycles, key=lambda c: c.jobs)  # by size; in run order within one
    out = [
        f"date {env.date}  host {env.host}  nproc {env.nproc}  Slurm {env.slurm}  "
        f"kernel {env.kernel}  Python {env.python}  jobs run as {env.user}",
        f"jobsmith {env.commit}; state in {env.state_dir} (removed)",
        f"snapshot overhead subtracted per window: sdiag {meter.ctld_overhead}; "
        f"sacctmgr show stats {meter.dbd_overhead}",
        "",
        "Scheduler load per cycle (net RPCs; daemon time of those RPCs, ms):",
        f"{'cycle':<38} {'jobs':>5} {'cmds':>5} {'ctld':>5} {'JOBINFO':>7} {'dbd':>5} "
        f"{'JOBS_COND':>9} {'ctld ms':>8} {'dbd ms':>8} {'wall s':>7}",
    ]
    for c in cycles:
        out.append(
            f"{c.name:<38} {c.jobs:>5} {sum(c.commands.values()):>5} {sum(c.ctld.values()):>5} "
            f"{c.job_info_rpcs:>7} {sum(c.dbd.values()):>5} "
            f"{c.dbd.get('DBD_GET_JOBS_COND', 0):>9} {sum(c.ctld_us.values()) / 1000:>8.1f} "
            f"{sum(c.dbd_us.values()) / 1000:>8.1f} {c.wall_s:>7.2f}"
        )
    out += [
        "",
        "The client's cost per cycle (this process; Slurm commands are its children):",
        f"{'cycle':<38} {'wall s':>7} {'in cmds':>7} {'CPU s':>6} {'child CPU':>9} "
        f"{'status s':>8} {'open_jobs':>9} {'rest s':>6} {'RSS MB':>6} {'peak MB':>7} "
        f"{'traced MB':>9} {'events':>6} {'log read':>8} {'log KB':>7}",
    ]
    for c in cycles:
        rest = (
            c.wall_s - c.status_wall_s - c.open_jobs_s
            if c.status_wall_s is not None and c.open_jobs_s is not None
            else None
        )
        out.append(
            f"{c.name:<38} {c.wall_s:>7.2f} {c.in_commands_s:>7.2f} {c.cpu_s:>6.2f} "
            f"{c.children_cpu_s:>9.2f} {_opt(c.status_wall_s, 8, 2)} {_opt(c.open_jobs_s, 9, 2)} "
            f"{_opt(rest, 6, 2)} {_opt(_mb(c.rss_start_kib), 6, 1)} "
            f"{_opt(_mb(c.rss_peak_kib), 7, 1)} {_opt(_mb(c.traced_peak_kib), 9, 1)} "
            f"{c.changes if c.kind != 'naive' else '':>6} {_opt(c.log_events, 8, 0)} "
            f"{_opt(None if c.log_bytes is None else c.log_bytes / 1024, 7, 0)}"
        )
    out += [
        "",
        "cmds: Slurm commands run as the user in the window. ctld / dbd: all net slurmctld /",
        "slurmdbd RPCs (sdiag / sacctmgr show stats); JOBINFO = REQUEST_JOB_INFO[_SINGLE] +",
        "REQUEST_JOB_USER_INFO; JOBS_COND = DBD_GET_JOBS_COND; ctld ms / dbd ms: the daemons'",
        "total_time for those RPCs. Counters are cluster-wide: RPCs beyond what the commands",
        "explain are other users' traffic. Client: in cmds = wall time inside the Slurm",
        "commands (incl. runuser); CPU s = process_time of this process; child CPU = the",
        "commands' CPU (RUSAGE_CHILDREN); status s = wall time in SlurmScheduler.status",
        "(commands + parsing + merge); open_jobs = open_jobs() timed alone after the cycle;",
        "rest = wall - status - open_jobs (recording job states, mostly); RSS MB = RSS at the",
        "start, peak MB = peak RSS (VmHWM) during the window; traced MB = tracemalloc peak",
        "(those cycles run slower); events = job_state events the cycle appended; log read /",
        "log KB = session-log events the cycle read, and their files' size (the folds kept",
        "in the state directory, except in the 'no kept folds' cycles, which read as before).",
        "",
        "Every window in full (net RPCs by type; daemon µs by type; by user, gross):",
    ]
    for c in cycles:
        out += [
            f"- {c.name}: {c.note}",
            f"    commands {c.commands}"
            + ("" if c.status_cpu_s is None else f"; CPU in status() {c.status_cpu_s:.2f} s"),
            f"    slurmctld {c.ctld}",
            f"    slurmctld µs {c.ctld_us}",
            f"    slurmdbd  {c.dbd}",
            f"    slurmdbd µs {c.dbd_us}",
            f"    by user: slurmctld {c.ctld_users}, slurmdbd {c.dbd_users}",
        ]
    out += [
        "",
        f"held jobs: {extra.get('submit')} (one job each); cancelled at the end "
        f"{extra.get('cancelled')} in {extra.get('cancel_s')} s; jobsmith state on disk at the "
        f"end {extra.get('state_bytes', 0) / 1e6:.1f} MB",
        "",
        *summary(cycles),
    ]
    for title, spots in extra.get("profile", {}).items():
        out += ["", f"Where the time goes, {title}:", *spots]
    return "\n".join(out)


def summary(cycles: Sequence[Cycle]) -> list[str]:
    """Per size: the watcher's own RPCs per steady cycle, against naive polling.

    Other sessions' RPCs land in some windows, so a cycle's own cost is taken as the
    per-type minimum over every watcher cycle of that size (first, steady, traced and
    profiled cycles all ran the same two commands), and the number of cycles that show
    exactly that is given; daemon time is the median over those undisturbed cycles.
    """
    lines = ["Per watched-job count (watcher: per-type minimum over its cycles at that size):"]
    for n in sorted({c.jobs for c in cycles}):
        plain = [c for c in cycles if c.jobs == n and not c.variant]
        steady = [c for c in plain if c.kind == "steady"]
        if not steady:
            continue
        watcher = [c for c in cycles if c.jobs == n and c.kind != "naive"]
        ctld = floor_overhead([c.ctld for c in watcher])
        dbd = floor_overhead([c.dbd for c in watcher])
        quiet = [c for c in watcher if c.ctld == ctld and c.dbd == dbd]
        own = sum(ctld.values()) + sum(dbd.values())
        lines.append(
            f"  {n:>5} jobs: watcher {_cmds(steady[0])} = {sum(ctld.values())} slurmctld + "
            f"{sum(dbd.values())} slurmdbd RPCs ({_types(ctld, dbd)}); {len(quiet)} of "
            f"{len(watcher)} cycles exactly that; daemon time {_ms(quiet or watcher, 'ctld_us')}"
            f" + {_ms(quiet or watcher, 'dbd_us')} ms (median of those); steady cycles: CPU "
            f"{_median([c.cpu_s for c in steady]):.2f} s "
            f"(+{_median([c.children_cpu_s for c in steady]):.2f} s in commands), "
            f"wall {_median([c.wall_s for c in steady]):.2f} s"
        )
        for c in plain:
            if c.kind == "first":
                recording = c.wall_s - (c.status_wall_s or 0) - (c.open_jobs_s or 0)
                lines.append(
                    f"         first cycle: {c.changes} job_state events, {c.wall_s:.2f} s, CPU "
                    f"{c.cpu_s:.2f} s; recording them ~{recording:.2f} s = "
                    f"{1000 * recording / max(c.changes, 1):.2f} ms per event"
                )
            elif c.kind == "naive":
                lines.append(
                    f"         naive: {_cmds(c)} = {sum(c.ctld.values())} slurmctld + "
                    f"{sum(c.dbd.values())} slurmdbd RPCs (incl. other users'), daemon time "
                    f"{sum(c.ctld_us.values()) / 1000:.1f} + {sum(c.dbd_us.values()) / 1000:.1f} "
                    f"ms, {c.wall_s:.1f} s, CPU {c.cpu_s:.2f} s (+{c.children_cpu_s:.2f} s in "
                    f"commands); x{_ratio(_rpcs(c), own)} the watcher's RPCs, "
                    f"x{_ratio(_us(c), _median([_us(q) for q in quiet or watcher]))} its "
                    "daemon time"
                )
    return lines


def _types(ctld: Mapping[str, int], dbd: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in {**ctld, **dbd}.items())


def _us(c: Cycle) -> int:
    return sum(c.ctld_us.values()) + sum(c.dbd_us.values())


def _ms(cycles: Sequence[Cycle], attr: str) -> str:
    return f"{_median([sum(getattr(c, attr).values()) / 1000 for c in cycles]):.1f}"


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _rpcs(c: Cycle) -> int:
    return sum(c.ctld.values()) + sum(c.dbd.values())


def _cmds(c: Cycle) -> str:
    return " + ".join(f"{n} {prog}" for prog, n in sorted(c.commands.items())) or "no commands"


def _ratio(a: float, b: float) -> str:
    if b <= 0:
        return "inf"
    return f"{a / b:.0f}" if a / b >= 10 else f"{a / b:.1f}"


def _mb(kib: int | None) -> float | None:
    return None if kib is None else kib / 1024


def _opt(value: float | None, width: int, digits: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


# --- command line -------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    sizes = [int(x) for x in text.split(",") if x.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("sizes: comma-separated positive integers")
    return sizes


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # so the clean-up in run() still runs


def main(argv_: Sequence[str] | None = None) -> int:
    """Command line entry point; prints the report to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=_sizes, default=[10, 100, 1000, 5000], help="jobs watched (10,100,...)"
    )
    parser.add_argument(
        "--naive-max", type=int, default=1000, help="naive polling up to this size (1000)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="steady cycles per size (5)")
    parser.add_argument("--user", default="alice", help="unprivileged user to run jobs as")
    parser.add_argument("--cluster", default="jobsmithlab", help="cluster name for the ledger")
    parser.add_argument(
        "--no-tracemalloc", action="store_true", help="skip the tracemalloc pass at the top size"
    )
    parser.add_argument(
        "--no-profile", action="store_true", help="skip the cProfile pass at the top size"
    )
    parser.add_argument("--submit-threads", type=int, default=4, help="sbatch calls at once (4)")
    parser.add_argument("--json", type=Path, help="also write every window as JSON here")
    args = parser.parse_args(argv_)
    if os.geteuid() != 0:
        parser.error("run as root: `sacctmgr show stats` is admin-only (jobs run as --user)")
    if subprocess.run(["id", args.user], capture_output=True).returncode != 0:
        parser.error(f"no such user {args.user}")
    signal.signal(signal.SIGTERM, _terminate)
    env, meter, extra = run(args)
    print(report(env, meter, extra))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "environment": asdict(env),
                    "cycles": [asdict(c) for c in meter.cycles],
                    "overhead": {"slurmctld": meter.ctld_overhead, "slurmdbd": meter.dbd_overhead},
                    **extra,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
