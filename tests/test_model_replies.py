"""A model turn counts only when it is whole (issue 23, parts 2 and 3), through the real
anthropic SDK against the loopback Messages server, no Slurm.

- A 200 reply the client cannot read (JSON cut short, JSON of another shape, a proxy's
  HTML page) is one line and exit 1 (AskFailed), never a traceback.
- A streamed answer cut at any event boundary before its message_stop runs none of its
  tool calls (a call whose input was cut between fields would run with defaults the
  model never chose) and says so in one line; the chat goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lab_cli import js
from messages_server import (
    MessagesServer,
    Reply,
    error,
    message,
    stream_events,
    text,
    tool_use,
)

UNREADABLE = {
    "cut JSON": (
        b'{"id": "msg_01", "type": "message", "role": "assistant", "cont',
        "application/json",
    ),
    "another shape": (b'{"hello": "world", "content": 7}', "application/json"),
    "an HTML page": (b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"),
}


@pytest.mark.parametrize("kind", list(UNREADABLE))
def test_an_unreadable_200_reply_is_one_line_and_exit_1(
    kind: str, server: MessagesServer, offline: Callable[[str], None]
) -> None:
    body, content_type = UNREADABLE[kind]
    server.script(Reply(raw=body, content_type=content_type))
    out = js("ask", "hello")
    assert out.exit_code == 1, out.output
    assert "Traceback" not in out.output
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("jobsmith: error: the model API's answer"), line


def _submit_turn() -> dict[str, Any]:
    job = {"template": "command", "params": {"command": "echo cut"}, "time_limit_s": 300}
    return message(text("Submitting now."), tool_use("submit", {"job": job}))


def _intents(session_id: str) -> list[dict[str, Any]]:
    shown = json.loads(js("sessions", "show", session_id, "--json").stdout)["events"]
    return [e for e in shown if e["kind"] == "intent"]


def test_a_stream_cut_at_any_event_boundary_runs_no_tool_call(
    server: MessagesServer, offline: Callable[[str], None]
) -> None:
    events = stream_events(_submit_turn(), chunk=9)
    assert events[-1][0] == "message_stop"
    for cut in range(1, len(events)):
        server.script(Reply(events=events[:cut]), message(text("Still here.")))
        out = js("chat", input="run echo cut\nand now?\n")
        assert out.exit_code == 0, (cut, out.output)
        assert "Traceback" not in out.output, cut
        assert "cut off before its end" in out.stdout, (cut, out.stdout)
        assert "Still here." in out.stdout, cut  # the chat went on
        session = out.stdout.rsplit("session ", 1)[1].split()[0]
        assert _intents(session) == [], cut  # no step ran, not even its intent
        turns = [
            e
            for e in json.loads(js("sessions", "show", session, "--json").stdout)["events"]
            if e["kind"] == "model_output"
        ]
        if turns and turns[0]["data"]["stop_reason"] == "cut_off":
            assert turns[0]["data"]["usage"]["input_tokens"] >= 0  # what it cost is kept


def test_an_answer_longer_than_max_tokens_is_not_believed(
    server: MessagesServer, offline: Callable[[str], None]
) -> None:
    """A 2 MB answer claiming 500,000 output tokens, with max_tokens 1024: ask exits 1 and
    prints none of it; chat stops reading it at the bound and goes on."""
    huge = "flood " * 350_000
    claimed = {"input_tokens": 10, "output_tokens": 500_000}
    server.script(message(text(huge), tokens=claimed))
    out = js("ask", "hello")
    assert out.exit_code == 1, out.output[:300]
    assert "passed max_tokens (1024)" in out.stderr and "flood" not in out.stdout
    server.script(message(text(huge), tokens=claimed), message(text("Short.")))
    chatted = js("chat", input="hello\nagain\n")
    assert chatted.exit_code == 0
    assert "passed max_tokens (1024)" in chatted.stdout and "Short." in chatted.stdout
    assert chatted.stdout.count("flood") <= 1024 * 16 // 6 + 1


def test_api_errors_are_one_plain_line_naming_what_helps(
    server: MessagesServer, offline: Callable[[str], None]
) -> None:
    """The API's own words, not the SDK's 'Error code: 429 - {…}'; a refused key names
    where it came from; an error event in the middle of a stream is said as such."""
    server.script(error(429, "rate_limit_error", "Number of requests has exceeded your limit"))
    out = js("ask", "hello")
    assert out.exit_code == 1
    (line,) = out.stderr.strip().splitlines()
    assert "HTTP 429: Number of requests has exceeded your limit" in line
    assert "Error code" not in line and "{" not in line

    server.script(error(401, "authentication_error", "invalid x-api-key"))
    out = js("ask", "hello")
    assert "refused the key from ANTHROPIC_API_KEY (HTTP 401): invalid x-api-key" in out.stderr

    broken = stream_events(message(text("Half of an answer")))[:4]
    failure = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.script(Reply(events=(*broken, ("error", failure))), message(text("Back.")))
    chatted = js("chat", input="first\nsecond\n")
    said = next(x for x in chatted.stdout.splitlines() if x.startswith("jobsmith: "))
    assert "failed in the middle of its answer (overloaded_error): Overloaded" in said
    assert "HTTP 200" not in chatted.stdout


def test_sessions_show_says_what_the_sessions_model_calls_cost(
    server: MessagesServer, offline: Callable[[str], None]
) -> None:
    """No command showed a session's token totals (issue 23): `sessions show` does, from
    the session's fold, in text and in --json."""
    server.script(message(text("One."), tokens={"input_tokens": 70, "output_tokens": 30}))
    asked = js("ask", "hello", "--json")
    assert asked.exit_code == 0, asked.output
    session = json.loads(asked.stdout)["session_id"]
    shown = json.loads(js("sessions", "show", session, "--json").stdout)
    assert (shown["usage"]["calls"], shown["usage"]["input_tokens"]) == (1, 70)
    assert shown["usage"]["output_tokens"] == 30 and shown["usage"]["charged"] == 100
    text_out = js("sessions", "show", session).stdout
    assert "1 model call(s), 100 tokens charged (70 in, 30 out" in text_out


def test_report_says_what_the_sessions_model_calls_cost(
    server: MessagesServer, offline: Callable[[str], None], tmp_path: Path
) -> None:
    """`report` showed no token totals (issue 23): it gives the fold's, as `sessions show`
    does, at the terminal, in --json and on the page."""
    server.script(message(text("One."), tokens={"input_tokens": 70, "output_tokens": 30}))
    asked = js("ask", "hello", "--json")
    assert asked.exit_code == 0, asked.output
    session = json.loads(asked.stdout)["session_id"]
    page = tmp_path / "report.html"
    reported = js("report", session, "--output", str(page), "--json")
    assert reported.exit_code == 0, reported.output
    usage = json.loads(reported.stdout)["usage"]
    assert (usage["calls"], usage["input_tokens"], usage["charged"]) == (1, 70, 100)
    said = "1 model call(s), 100 tokens charged (70 in, 30 out"
    assert f"model: {said}" in js("report", session, "--output", str(page)).stdout
    assert said in page.read_text()
