"""Shared by the Slurm load benchmarks: the scheduler's own RPC statistics, and a transport
that runs every command as the lab's unprivileged user.

`sdiag` (slurmctld) and `sacctmgr show stats` (slurmdbd) print one row per RPC message
type and per user, with a count and the total time the daemon spent handling them. The
benchmarks never reset these counters (other sessions may be reading them): they take a
snapshot before and after a window and keep the difference. Taking a snapshot costs a few
RPCs itself; `calibrate` measures that on empty windows so it can be subtracted.

The parsing functions are pure; `take_snapshot` and `RunAsTransport` run commands.
Imported by bench_scheduler_load.py, bench_watch_load.py and bench_rpc_table.py (run as
scripts, so this directory is first on sys.path), and by tests/test_rpc_counts_lab.py
(pytest's `pythonpath` in pyproject.toml lists benchmarks/ after tests/).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.transport import CommandResult

BY_TYPE = "Remote Procedure Call statistics by message type"
BY_USER = "Remote Procedure Call statistics by user"
_RPC_LINE = re.compile(
    r"^\s+(?P<name>\S+)\s+\(\s*(?P<id>\d+)\)\s+count:(?P<count>\d+)"
    r"(?:\s+ave_time:(?P<ave_time>\d+)\s+total_time:(?P<total_time>\d+))?"
)
_AGENT_QUEUE = re.compile(r"^DBD Agent queue size:\s*(?P<size>\d+)", re.MULTILINE)

#: every slurmctld RPC that reads job records, whichever squeue variant sends it
JOB_INFO_RPCS = ("REQUEST_JOB_INFO", "REQUEST_JOB_INFO_SINGLE", "REQUEST_JOB_USER_INFO")
#: slurmctld RPCs sent by the daemons, sdiag itself or a job, never by the command
#: measured: left out of a command's counts (bench_rpc_table.py, tests/test_rpc_counts_lab.py)
NOT_THE_COMMAND = frozenset(
    {
        "REQUEST_STATS_INFO",
        "MESSAGE_NODE_REGISTRATION_STATUS",
        "REQUEST_COMPLETE_BATCH_SCRIPT",
        "MESSAGE_EPILOG_COMPLETE",
        "REQUEST_STEP_COMPLETE",
        "REQUEST_JOB_STEP_CREATE",
        "REQUEST_COMPLETE_PROLOG",
        "REQUEST_PING",
        "REQUEST_NODE_REGISTRATION_STATUS",
        "MESSAGE_COMPOSITE",
    }
)


# --- parsing sdiag and sacctmgr show stats (pure) -----------------------------------------


def parse_rpc_section(text: str, heading: str, column: str = "count") -> dict[str, int]:
    """One column (count or total_time) of one RPC table of `sdiag` / `sacctmgr show stats`.

    The table starts after the line `heading` and holds tab-indented rows like
    `REQUEST_JOB_INFO   ( 2003) count:15  ave_time:276  total_time:4146` (times in
    microseconds); it ends at the first line that is not such a row. Both commands print
    the same row format, for message types and for users alike. A missing table gives {};
    a row without the column asked for counts as 0.
    """
    values: dict[str, int] = {}
    inside = False
    for line in text.splitlines():
        if not inside:
            inside = line.strip() == heading
            continue
        match = _RPC_LINE.match(line)
        if match is None:
            break
        values[match["name"]] = values.get(match["name"], 0) + int(match[column] or 0)
    return values


def parse_by_type(text: str) -> dict[str, int]:
    """RPC counts by message type from `sdiag` or `sacctmgr show stats` output."""
    return parse_rpc_section(text, BY_TYPE)


def parse_by_user(text: str) -> dict[str, int]:
    """RPC counts by user name from `sdiag` or `sacctmgr show stats` output."""
    return parse_rpc_section(text, BY_USER)


def parse_time_by_type(text: str) -> dict[str, int]:
    """Microseconds the daemon spent on each message type (total_time), cumulative."""
    return parse_rpc_section(text, BY_TYPE, "total_time")


def parse_dbd_agent_queue(sdiag_text: str) -> int | None:
    """slurmctld's queue of messages not yet sent to slurmdbd (sdiag); None if absent."""
    match = _AGENT_QUEUE.search(sdiag_text)
    return int(match["size"]) if match else None


def count_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """after - before for every name whose count changed (a restart shows as negative)."""
    names = set(before) | set(after)
    delta = {n: after.get(n, 0) - before.get(n, 0) for n in names}
    return {n: d for n, d in sorted(delta.items()) if d}


def floor_overhead(deltas: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """Per-name minimum over windows in which nothing was run: what measuring costs."""
    if not deltas:
        return {}
    names = set().union(*deltas)
    floor = {n: min(d.get(n, 0) for d in deltas) for n in names}
    return {n: c for n, c in sorted(floor.items()) if c > 0}


def subtract(delta: Mapping[str, int], overhead: Mapping[str, int]) -> dict[str, int]:
    """delta without the measuring overhead; names that drop to zero are left out."""
    names = set(delta) | set(overhead)
    net = {n: delta.get(n, 0) - overhead.get(n, 0) for n in names}
    return {n: c for n, c in sorted(net.items()) if c}


def net_time(
    gross_counts: Mapping[str, int], net_counts: Mapping[str, int], gross_us: Mapping[str, int]
) -> dict[str, int]:
    """Daemon time of a window's own RPCs: each type's time, scaled by its net/gross count.

    A message type that the snapshots also send (e.g. DBD_FINI) gets the share of its
    window time that its net count is of its gross count; types with no net RPCs get none.
    """
    out: dict[str, int] = {}
    for name, net in net_counts.items():
        gross = gross_counts.get(name, 0)
        if net > 0 and gross > 0:
            out[name] = round(gross_us.get(name, 0) * min(net, gross) / gross)
    return out


# --- snapshots ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """Both daemons' RPC counters (and cumulative handling times, µs) at one moment."""

    ctld: dict[str, int]
    dbd: dict[str, int]
    ctld_users: dict[str, int]
    dbd_users: dict[str, int]
    agent_queue: int | None
    ctld_us: dict[str, int] = field(default_factory=dict)
    dbd_us: dict[str, int] = field(default_factory=dict)


def take_snapshot(root: LocalTransport) -> Snapshot:
    """Run `sdiag` and `sacctmgr show stats` (as root) and parse their RPC tables."""
    sdiag = checked(root, ["sdiag"])
    stats = checked(root, ["sacctmgr", "show", "stats"])
    return Snapshot(
        ctld=parse_by_type(sdiag),
        dbd=parse_by_type(stats),
        ctld_users=parse_by_user(sdiag),
        dbd_users=parse_by_user(stats),
        agent_queue=parse_dbd_agent_queue(sdiag),
        ctld_us=parse_time_by_type(sdiag),
        dbd_us=parse_time_by_type(stats),
    )


def calibrate(root: LocalTransport, rounds: int = 3) -> tuple[dict[str, int], dict[str, int]]:
    """(slurmctld, slurmdbd) RPCs a snapshot costs: the floor of empty windows' deltas."""
    ctld, dbd = [], []
    before = take_snapshot(root)
    for _ in range(rounds):
        after = take_snapshot(root)
        ctld.append(count_delta(before.ctld, after.ctld))
        dbd.append(count_delta(before.dbd, after.dbd))
        before = after
    return floor_overhead(ctld), floor_overhead(dbd)


@dataclass
class Served:
    """What slurmctld and slurmdbd served between two snapshots, net of what taking the
    snapshots cost (the overheads `calibrate` measured): counts and times per RPC type,
    counts per user."""

    ctld: dict[str, int] = field(default_factory=dict)
    dbd: dict[str, int] = field(default_factory=dict)
    ctld_us: dict[str, int] = field(default_factory=dict)
    dbd_us: dict[str, int] = field(default_factory=dict)
    ctld_users: dict[str, int] = field(default_factory=dict)
    dbd_users: dict[str, int] = field(default_factory=dict)


@contextmanager
def served_around(
    root: LocalTransport, ctld_overhead: Mapping[str, int], dbd_overhead: Mapping[str, int]
) -> Iterator[Served]:
    """A window of both daemons' statistics around the with-block: the Served it yields
    is filled in when the block ends (the one measured window of both load benchmarks)."""
    before = take_snapshot(root)
    out = Served()
    yield out
    after = take_snapshot(root)
    ctld_gross, dbd_gross = count_delta(before.ctld, after.ctld), count_delta(before.dbd, after.dbd)
    out.ctld, out.dbd = subtract(ctld_gross, ctld_overhead), subtract(dbd_gross, dbd_overhead)
    out.ctld_us = net_time(ctld_gross, out.ctld, count_delta(before.ctld_us, after.ctld_us))
    out.dbd_us = net_time(dbd_gross, out.dbd, count_delta(before.dbd_us, after.dbd_us))
    out.ctld_users = count_delta(before.ctld_users, after.ctld_users)
    out.dbd_users = count_delta(before.dbd_users, after.dbd_users)


def job_info_rpcs(ctld: Mapping[str, int]) -> int:
    """RPCs that read job records from slurmctld (any squeue variant)."""
    return sum(ctld.get(k, 0) for k in JOB_INFO_RPCS)


def checked(transport: LocalTransport, command: list[str]) -> str:
    """stdout of a command that must succeed (else the benchmark stops, saying why)."""
    res = transport.run(command, timeout=60)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {res.stderr.strip() or res.stdout}")
    return res.stdout


# --- running commands as the lab user -----------------------------------------------------


class RunAsTransport:
    """A Transport that runs every command as another user (`runuser -u USER --`).

    Wraps LocalTransport, so timeouts and process-group handling are the project's own.
    It also keeps a tally of the programs it ran and the time spent in them, which is the
    client-side view of what each variant cost.
    """

    def __init__(self, user: str, inner: LocalTransport | None = None) -> None:
        """Run as `user`; `inner` (default LocalTransport()) does the actual running."""
        self.user = user
        self._inner = inner or LocalTransport()
        self.calls: dict[str, int] = {}
        self.seconds = 0.0

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run argv as the user; the result's argv is the Slurm command without the prefix."""
        started = time.perf_counter()
        res = self._inner.run(
            ["runuser", "-u", self.user, "--", *argv], timeout=timeout, stdin=stdin, env=env
        )
        self.seconds += time.perf_counter() - started
        self.calls[argv[0]] = self.calls.get(argv[0], 0) + 1
        return CommandResult(tuple(argv), res.returncode, res.stdout, res.stderr)

    def reset_tally(self) -> None:
        """Forget the programs counted so far."""
        self.calls = {}
        self.seconds = 0.0


def wait_for_accounting(
    sched: SlurmScheduler, root: LocalTransport, ids: Sequence[str], since: datetime
) -> None:
    """Until slurmctld has handed every job to slurmdbd and sacct returns all of them."""
    deadline = time.monotonic() + 300
    while True:
        queue = take_snapshot(root).agent_queue
        found = {r.job_id_raw for r in sched.accounting(ids, since)}
        missing = len(set(ids) - found)
        log(f"accounting has {len(ids) - missing}/{len(ids)} jobs, DBD agent queue {queue}")
        if missing == 0 and not queue:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{missing} jobs still missing from accounting after 300 s")
        time.sleep(2)


def log(message: str) -> None:
    """Progress on stderr, timestamped."""
    print(f"[{datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)
