"""The chat's costs (issue 9's benchmarks): start-up, memory, tokens per turn, and the time
from Enter to the first streamed token with slurmctld up and stopped.

- `jobsmith --help`: median of 21 runs (the SDK and prompt_toolkit load only in chat/ask).
- A scripted 200-turn chat (`jobsmith chat` fed through a pipe, the real SDK streaming
  from the loopback Messages-API server of tests/messages_server.py; every tenth turn
  calls `list_templates`): the process's peak resident memory (VmHWM) at the end.
- Tokens per turn, with and without prompt caching, estimated from what the SDK sent
  (4 characters a token: the loopback server cannot count a real model's tokens): the
  cached prefix (system, site, tools) and the rest (the conversation) of each request.
  With caching the prefix is read from the cache at a tenth of the price after the first
  turn; without it every turn pays for it whole.
- Enter to first token: a chat is open; a line is sent and the time until the answer's
  first text appears is measured, 10 times with slurmctld up, then (with --ctld-down,
  on the lab cluster, as root: it stops slurmctld through the lab script) 10 times while
  slurmctld is stopped. The brain reads nothing from Slurm before it asks the model.

    .venv/bin/python benchmarks/bench_chat.py [--turns 200] [--ctld-down]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab_user import ROOT, SITE

sys.path.insert(0, str(ROOT / "tests"))

from messages_server import MessagesServer, message, text, tool_use

JOBSMITH = str(Path(sys.executable).with_name("jobsmith"))
KEY = "sk-ant-bench-0000"


def help_time() -> list[float]:
    times = []
    for _ in range(21):
        started = time.perf_counter()
        subprocess.run([JOBSMITH, "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return times


class Chat:
    """A `jobsmith chat` process fed through a pipe; reads its stdout as it comes."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [JOBSMITH, "--site", str(SITE), "chat", "--interval", "3600"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.seen = b""

    def send(self, line: str) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return time.perf_counter()

    def wait_for(self, wanted: bytes, timeout: float = 60) -> float:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while wanted not in self.seen:
            if time.monotonic() > deadline:
                raise SystemExit(f"chat never printed {wanted!r}: {self.seen[-400:]!r}")
            chunk = self.proc.stdout.read()
            if chunk:
                self.seen += chunk
            else:
                time.sleep(0.0005)
        found = time.perf_counter()
        self.seen = self.seen.split(wanted, 1)[1]
        return found

    def peak_rss_mb(self) -> tuple[float, float]:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        kb = {k: int(fields[k].split()[0]) for k in ("VmHWM", "VmRSS")}
        return kb["VmHWM"] / 1024, kb["VmRSS"] / 1024

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def environment(home: Path, server: MessagesServer) -> dict[str, str]:
    (home / "config").mkdir(parents=True)
    (home / "state").mkdir()
    (home / "config" / "site.yaml").write_text(
        f"model:\n  base_url: '{server.url}'\n  max_retries: 0\n"
    )
    return {
        **os.environ,
        "JOBSMITH_CONFIG_DIR": str(home / "config"),
        "JOBSMITH_STATE_DIR": str(home / "state"),
        "ANTHROPIC_API_KEY": KEY,
    }


def long_chat(turns: int) -> None:
    with MessagesServer() as server, tempfile.TemporaryDirectory() as tmp:
        for turn in range(turns):
            if turn % 10 == 9:
                server.script(message(text("Looking."), tool_use("list_templates", {})))
            server.script(message(text(f"answer {turn} " + "lorem ipsum " * 20 + "END")))
        chat = Chat(environment(Path(tmp), server))
        started = time.perf_counter()
        for turn in range(turns):
            chat.send(f"question {turn}: what about my jobs?")
            chat.wait_for(f"answer {turn} ".encode())
            chat.wait_for(b"END")
        elapsed = time.perf_counter() - started
        peak, now = chat.peak_rss_mb()
        chat.close()
        print(f"{turns}-turn chat: {elapsed:.1f} s, {elapsed / turns * 1000:.0f} ms per turn")
        print(f"  resident memory: peak (VmHWM) {peak:.1f} MB, at the end {now:.1f} MB")
        tokens_per_turn(server)


def tokens_per_turn(server: MessagesServer) -> None:
    """Input tokens per request, estimated from what was sent (4 characters a token).

    With the rolling breakpoint each request reads from the cache everything up to the
    previous request's breakpoint (its whole body) and writes the rest; priced as the API
    prices them (a cache read at 0.1, a cache write at 1.25 of an input token).
    """
    sizes = [
        len(json.dumps({k: r.body[k] for k in ("system", "tools", "messages")})) / 4
        for r in server.requests
    ]
    prefix = len(json.dumps({k: server.requests[0].body[k] for k in ("system", "tools")})) / 4
    read = [0.0] + [min(prev, now) for prev, now in itertools.pairwise(sizes)]
    written = [now - r for now, r in zip(sizes, read, strict=True)]
    priced = [0.1 * r + 1.25 * w for r, w in zip(read, written, strict=True)]
    print(f"  requests: {len(sizes)}; the cached prefix (system, site, tools) ~{prefix:.0f} tokens")
    for label, series in (
        ("sent, no caching (full price)", sizes),
        ("new per request with caching (cache writes)", written),
        ("with caching, priced as full-price tokens", priced),
    ):
        print(
            f"  {label}: first {series[0]:,.0f}, median {statistics.median(series):,.0f}, "
            f"last {series[-1]:,.0f}, total {sum(series):,.0f}"
        )


def first_token(label: str, rounds: int = 10) -> list[float]:
    with MessagesServer() as server, tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            server.script(message(text(f"FIRST{i} then the rest of the answer")))
        chat = Chat(environment(Path(tmp), server))
        chat.wait_for(b"you> ")
        times = []
        for i in range(rounds):
            sent = chat.send("is anything running?")
            times.append(chat.wait_for(f"FIRST{i}".encode()) - sent)
            chat.wait_for(b"you> ")
        chat.close()
    ms = sorted(t * 1000 for t in times)
    print(
        f"Enter to first token, slurmctld {label}: median {statistics.median(ms):.1f} ms, "
        f"max {ms[-1]:.1f} ms over {rounds}"
    )
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--ctld-down", action="store_true")
    args = parser.parse_args()
    times = sorted(help_time())
    print(
        f"jobsmith --help: median {statistics.median(times):.3f} s "
        f"(min {times[0]:.3f}, max {times[-1]:.3f}) over {len(times)}"
    )
    long_chat(args.turns)
    first_token("up")
    if args.ctld_down:
        lab = "/usr/local/sbin/jobsmith-slurm-lab"
        outage = subprocess.Popen(["sudo", "-n", lab, "restart-ctld", "--pause", "30"])
        time.sleep(3)
        down = subprocess.run(["scontrol", "ping"], capture_output=True, text=True).stdout
        print("scontrol ping during the outage:", " ".join(down.split()))
        first_token("stopped")
        outage.wait(timeout=120)


if __name__ == "__main__":
    main()
