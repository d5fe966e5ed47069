"""The SSH transports' cost (issue 12's benchmark): per command, against the local
transport, and a watcher cycle over SSH at many watched jobs.

Run as the lab user (it starts its own sshd on loopback, which can log in only the user
it runs as), from the checkout:

    runuser -u alice -- .venv/bin/python benchmarks/bench_ssh.py            # about 1 min
    runuser -u alice -- .venv/bin/python benchmarks/bench_ssh.py --jobs 100 --commands 10

1. Per command: `true` run N times through each transport, one after another: the local
   one (a subprocess here), paramiko on one reused connection, paramiko with a new
   connection per command (what a tool that does not keep one pays), and OpenSSH through
   a ControlMaster socket opened once. Medians and 90th percentiles, and each median's
   ratio to the local one's, from the same run.
2. A watcher cycle over SSH: N held jobs (`sbatch --hold`, one each), their ledger records
   in a temporary jobsmith state, then watch cycles through the paramiko transport. What
   one steady cycle costs is counted where it lands: the commands the login node ran (its
   sshd's "Starting session: command" lines) and the user's slurmctld RPCs (sdiag's
   per-user table). The held jobs are cancelled at the end, whatever happens.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from slurm_stats import parse_by_user  # noqa: E402
from sshd import Sshd, close_master, open_master, start_sshd  # noqa: E402

from jobsmith.adapters.options import JobOptions  # noqa: E402
from jobsmith.adapters.slurm.scheduler import SlurmScheduler  # noqa: E402
from jobsmith.adapters.slurm.transport import LocalTransport  # noqa: E402
from jobsmith.adapters.ssh.openssh import OpenSshTransport  # noqa: E402
from jobsmith.adapters.ssh.transport import ParamikoTransport  # noqa: E402
from jobsmith.adapters.transport import Transport  # noqa: E402
from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord  # noqa: E402
from jobsmith.agent.runtime.session.readmodel import SessionFolds  # noqa: E402
from jobsmith.agent.runtime.session.store import FileSessionStore  # noqa: E402
from jobsmith.agent.watcher.cycle import watch_cycle  # noqa: E402

HOST = "127.0.0.1"


def timed(run: Callable[[], object], n: int) -> list[float]:
    """Seconds each of n calls took."""
    took = []
    for _ in range(n):
        start = time.perf_counter()
        run()
        took.append(time.perf_counter() - start)
    return took


def per_command(sshd: Sshd, known_hosts: Path, socket: Path, n: int) -> list[str]:
    """The first part's table."""
    local = LocalTransport()
    reused = ParamikoTransport(
        HOST, port=sshd.port, key_file=sshd.client_key, known_hosts=known_hosts
    )
    master = OpenSshTransport(HOST, control_path=socket, port=sshd.port, known_hosts=known_hosts)

    def fresh() -> object:
        t = ParamikoTransport(
            HOST, port=sshd.port, key_file=sshd.client_key, known_hosts=known_hosts
        )
        try:
            return t.run(["true"], timeout=30)
        finally:
            t.close()

    variants: list[tuple[str, Callable[[], object]]] = [
        ("local (subprocess)", lambda: local.run(["true"], timeout=30)),
        ("paramiko, one connection", lambda: reused.run(["true"], timeout=30)),
        ("paramiko, new connection each", fresh),
        ("openssh, ControlMaster", lambda: master.run(["true"], timeout=30)),
    ]
    for _, run in variants:  # warm up: the reused connection opened, caches filled
        run()
    medians: dict[str, float] = {}
    rows = []
    for name, run in variants:
        took = sorted(timed(run, n))
        medians[name] = statistics.median(took)
        p90 = took[min(len(took) - 1, int(0.9 * len(took)))]
        rows.append((name, medians[name], p90))
    reused.close()
    base = medians["local (subprocess)"]
    lines = [f"{'transport':32} {'median ms':>10} {'p90 ms':>8} {'x local':>8}   ({n} x `true`)"]
    lines += [f"{name:32} {m * 1000:10.2f} {p * 1000:8.2f} {m / base:8.2f}" for name, m, p in rows]
    return lines


def submit_held(n: int, name: str) -> list[str]:
    """n held jobs of the user's, one sbatch each."""
    ids = []
    for _ in range(n):
        out = subprocess.run(
            ["sbatch", "--parsable", "--hold", "-J", name, "-o", "/dev/null", "-t", "1",
             "--mem", "10M", "--wrap", "true"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        ids.append(out.stdout.strip().split(";")[0])
    return ids


def ledger_of(state: Path, ids: Sequence[str]) -> tuple[FileSessionStore, JobLedger]:
    """A jobsmith state with one session whose ledger holds the jobs."""
    store = FileSessionStore(state / "sessions")
    ledger = JobLedger(state / "jobs")
    session = store.create({"title": "bench-ssh"})
    for job_id in ids:
        ledger.record(
            SubmissionRecord(
                job_id=job_id,
                cluster="jobsmithlab",
                template="command",
                params={"command": "true"},
                options=JobOptions(job_name=f"bench.js-{secrets.token_hex(6)}"),
                script_sha256="0" * 64,
                submitted_at=datetime.now(),
                session_id=session,
            )
        )
    return store, ledger


def my_rpcs() -> int:
    """The user's slurmctld RPCs so far (sdiag's per-user table)."""
    text = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    return int(parse_by_user(text).get(os.environ.get("USER") or "", 0))


def commands_run(sshd: Sshd) -> int:
    """Commands the login node has run so far (its sshd's log)."""
    return sshd.log.read_text().count("Starting session: command")


def watch_over_ssh(sshd: Sshd, known_hosts: Path, state: Path, n: int, cycles: int) -> list[str]:
    """The second part: cycles over SSH at n watched jobs."""
    name = f"bench-ssh-{secrets.token_hex(4)}"
    ids: list[str] = []
    try:
        start = time.monotonic()
        ids = submit_held(n, name)
        lines = [f"{n} held jobs submitted in {time.monotonic() - start:.1f} s"]
        store, ledger = ledger_of(state, ids)
        transport: Transport = ParamikoTransport(
            HOST, port=sshd.port, key_file=sshd.client_key, known_hosts=known_hosts
        )
        slurm = SlurmScheduler(transport, remote=True)
        since = datetime.now().replace(hour=0, minute=0, second=0)

        def status(job_ids: Sequence[str], _since: datetime) -> Any:
            return slurm.status(job_ids, since)

        lines.append(f"{'cycle':10} {'watched':>8} {'commands':>9} {'ctld RPCs':>10} {'wall s':>7}")
        for i in range(cycles):
            folds = SessionFolds(store, state / "folds")
            before_cmds, before_rpcs, t0 = commands_run(sshd), my_rpcs(), time.perf_counter()
            cycle = watch_cycle(store, ledger, status, lambda c, s: None, folds=folds)
            wall = time.perf_counter() - t0
            time.sleep(0.2)  # the sshd log line lands after the session
            cmds, rpcs = commands_run(sshd) - before_cmds, my_rpcs() - before_rpcs - 1
            label = "first" if i == 0 else f"steady {i}"
            lines.append(f"{label:10} {cycle.watched:8} {cmds:9} {rpcs:10} {wall:7.2f}")
        return lines
    finally:
        for chunk in range(0, len(ids), 500):
            subprocess.run(["scancel", *ids[chunk : chunk + 500]], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=30, help="`true` runs per transport")
    parser.add_argument("--jobs", type=int, default=1000, help="held jobs the watcher follows")
    parser.add_argument("--cycles", type=int, default=4, help="watch cycles (the first appends)")
    args = parser.parse_args()
    if os.getuid() == 0:
        raise SystemExit("run as the lab user: runuser -u alice -- .venv/bin/python " + __file__)
    with tempfile.TemporaryDirectory(prefix="bench-ssh-") as tmp:
        root = Path(tmp)
        sshd = start_sshd(root / "sshd")
        socket = Path(f"/tmp/js-bench-{os.getpid()}.sock")
        try:
            known_hosts = root / "known_hosts"
            known_hosts.write_text(sshd.known_hosts_line())
            open_master(sshd, known_hosts, socket)
            print("\n".join(per_command(sshd, known_hosts, socket, args.commands)))
            print()
            print(
                "\n".join(watch_over_ssh(sshd, known_hosts, root / "state", args.jobs, args.cycles))
            )
        finally:
            close_master(socket, sshd.port)
            sshd.stop()


if __name__ == "__main__":
    main()
