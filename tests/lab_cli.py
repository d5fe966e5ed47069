"""Running the jobsmith CLI in-process against the lab cluster, for the CLI-level tests."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from jobsmith.agent.faces.cli import cli

LAB_SITE = Path(__file__).resolve().parent.parent / "site_config" / "examples" / "lab.yaml"


def js(*args: str, input: str | None = None) -> Result:
    """`jobsmith --site <lab example> ARGS…`, with the environment the test set up (and
    input as its stdin)."""
    argv = ["--site", str(LAB_SITE), *args]
    return CliRunner().invoke(cli, argv, input=input, catch_exceptions=False)


def write_user_site(config_dir: Path, workdir: Path, extra_yaml: str = "") -> None:
    """The user's own site file: the test's directory as an allowed root, plus extra_yaml."""
    (config_dir / "site.yaml").write_text(
        f"paths:\n  allowed_roots: ['~', '/scratch/$USER', '{workdir}']\n{extra_yaml}"
    )


def submit_oom_array(workdir: Path) -> str:
    """A 4-task file_array under --mem 100M whose task 2 holds ~300 MB for 6 s (long enough
    for the 2-second memory sampler to kill it); returns Slurm's array id."""
    hog = "python3 -c 'import time; x = bytearray(300 << 20); time.sleep(6)'\n"
    for i in range(4):
        (workdir / f"t{i}.sh").write_text(hog if i == 2 else "echo fine\n")
    files = ",".join(f"t{i}.sh" for i in range(4))
    sub = js(
        "submit",
        "file_array",
        "-P",
        f"files={files}",
        "-P",
        "program=bash",
        "--mem",
        "100M",
        "--log-dir",
        str(workdir),
    )
    assert sub.exit_code == 0, sub.output
    return sub.stdout.strip()


def jobs_named(name: str) -> set[str]:
    """Ids of the jobs named name that Slurm has (accounting or the queue, last 30 min)."""
    since = (datetime.now() - timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%S")
    acct = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-S", since, f"--name={name}", "--format=JobIDRaw"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    queue = subprocess.run(
        ["squeue", "--me", "-h", "-t", "all", f"--name={name}", "-o", "%A"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return set(acct) | set(queue)


def queued_in_tiny() -> list[str]:
    """The caller's pending or running jobs in QoS tiny (array tasks one per line)."""
    out = subprocess.run(
        ["squeue", "--me", "--noheader", "-r", "-q", "tiny", "-t", "PD,R,CG", "-o", "%i"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return out.split()


@contextmanager
def fill_tiny(seconds: int) -> Iterator[list[str]]:
    """QoS tiny (MaxSubmitJobsPerUser 5, made by `scripts/slurm-lab up`) filled with
    five sleeps of `seconds` submitted by the user, not by jobsmith (when they end, the
    room is none of jobsmith's jobs' making); their job ids, cancelled after the block.
    How the feeder's lab tests make a workload none of whose parts fits at first."""
    assert queued_in_tiny() == [], "another run left jobs in QoS tiny"
    own = [
        subprocess.run(
            ["sbatch", "--parsable", "--qos=tiny", "-t", "1", "-o", "/dev/null",
             "--wrap", f"sleep {seconds}"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        for _ in range(5)
    ]  # fmt: skip
    try:
        yield own
    finally:
        subprocess.run(["scancel", *own], check=False)


@dataclass
class Peak:
    """The most of the caller's jobs (array tasks) queued or running in QoS tiny at once."""

    most: int = 0


@contextmanager
def most_queued_in_tiny(every_s: float = 0.3) -> Iterator[Peak]:
    """Sample queued_in_tiny every every_s while the block runs, all along (a fed workload
    must never hold more than the QoS's 5): the peak seen, final once the block ends."""
    peak = Peak()
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak.most = max(peak.most, len(queued_in_tiny()))
            time.sleep(every_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        stop.set()
        sampler.join()


@dataclass
class Watched:
    """What watcher cycles (`watch --once --json`) reported: every decision, in order, and
    the last state each job changed to."""

    decisions: list[dict[str, Any]] = field(default_factory=list)
    states: dict[str, str] = field(default_factory=dict)

    def rerun_id(self) -> str | None:
        """The job id of the first re-run decided, if any."""
        return next((str(d["new_job_id"]) for d in self.decisions if d.get("new_job_id")), None)

    def rerun_completed(self) -> bool:
        """A re-run was decided and has completed."""
        rerun = self.rerun_id()
        return rerun is not None and self.states.get(rerun) == "COMPLETED"


def watch_until(done: Callable[[Watched], bool], timeout_s: float, every_s: float = 2) -> Watched:
    """Watcher cycles until done(what was seen) holds or timeout_s passed (the caller's
    assertions then say what is missing); what the cycles reported."""
    seen = Watched()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        cycle = json.loads(js("watch", "--once", "--json").stdout)
        seen.decisions += cycle["decisions"]
        seen.states |= {c["job_id"]: c["state"] for c in cycle["changes"]}
        if done(seen):
            break
        time.sleep(every_s)
    return seen


@contextmanager
def webhook_receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local HTTP receiver for `notify.webhook_url`: its URL and the JSON bodies POSTed
    to it, in order (answered 204)."""
    received: list[dict[str, Any]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(json.loads(body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook", received
    finally:
        server.shutdown()
