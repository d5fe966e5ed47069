"""What `jobsmith ask` costs over the call it makes (issue 23's performance goal: at most
0.5 s more than a bare Python script that imports the SDK and makes the same call).

Both run against the loopback Messages-API server of tests/messages_server.py, which
answers at once, so the time is all on the client: interpreter start, imports, the site
file, the session's events, the call. Side by side, alternating, each N times:

- bare: `python -c "import anthropic; anthropic.Anthropic(...).messages.create(...)"`;
- ask: `jobsmith ask hello` in a fresh state directory (no Slurm is asked: the answer
  calls no tool).

It prints each one's median and the difference, and the idle RSS of `jobsmith chat`
(VmRSS after its prompt, nothing typed), for the 90 MB goal.

    .venv/bin/python benchmarks/bench_ask_latency.py [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
#: the lab's site file (asking Slurm nothing: the answer calls no tool)
SITE = ROOT / "site_config" / "examples" / "lab.yaml"

from messages_server import KEY, MessagesServer, message, text  # noqa: E402

BARE = """\
import anthropic, sys
client = anthropic.Anthropic(api_key=sys.argv[2], base_url=sys.argv[1], max_retries=0)
client.messages.create(model="claude-test", max_tokens=1024,
                       messages=[{"role": "user", "content": "hello"}])
"""


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def _chat_rss_kb(jobsmith: str, env: dict[str, str]) -> int:
    """VmRSS of a chat waiting at its prompt (stdin held open, nothing typed)."""
    chat = subprocess.Popen(
        [jobsmith, "--site", str(SITE), "chat"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert chat.stdout is not None
        chat.stdout.readline()  # the greeting: the chat is up
        time.sleep(3)  # the SDK's import in the background ends
        status = Path(f"/proc/{chat.pid}/status").read_text()
        return int(next(x for x in status.splitlines() if x.startswith("VmRSS")).split()[1])
    finally:
        chat.terminate()
        chat.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    jobsmith = str(Path(sys.executable).with_name("jobsmith"))
    with MessagesServer() as server, tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "config").mkdir()
        (home / "config" / "site.yaml").write_text(
            f"model:\n  base_url: '{server.url}'\n  max_retries: 0\n"
        )
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": KEY,
            "JOBSMITH_CONFIG_DIR": str(home / "config"),
            "JOBSMITH_STATE_DIR": str(home / "state"),
        }
        bare, ask = [], []
        for _ in range(args.runs):
            server.script(message(text("Hi.")), message(text("Hi.")))
            bare.append(_timed([sys.executable, "-c", BARE, server.url, KEY], env))
            ask.append(_timed([jobsmith, "--site", str(SITE), "ask", "hello"], env))
        rss = _chat_rss_kb(jobsmith, env)
    b, a = statistics.median(bare), statistics.median(ask)
    print(f"bare SDK script: median {b:.3f} s of {args.runs} ({min(bare):.3f}-{max(bare):.3f})")
    print(f"jobsmith ask:    median {a:.3f} s of {args.runs} ({min(ask):.3f}-{max(ask):.3f})")
    print(f"ask - bare:      {a - b:+.3f} s (goal: at most +0.5 s)")
    print(f"chat idle RSS:   {rss / 1024:.1f} MB (goal: at most 90 MB)")


if __name__ == "__main__":
    main()
