"""A Messages-API server on loopback for tests: the real anthropic SDK talks to it over HTTP.

It speaks the wire format of POST /v1/messages: a JSON reply, or (when the request says
`stream: true`) a server-sent-event stream of message_start, ping, content_block_start /
delta / stop (text in several text_delta events, tool input split across several
input_json_delta events), message_delta with the usage and message_stop. Errors use the
API's error body and may carry `retry-after`. Each test scripts the replies, in order,
and reads back every request it received, headers included. Only the standard library.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Json = dict[str, Any]
#: the API key the tests give the SDK (the server wants one; any value will do)
KEY = "sk-ant-test-" + secrets.token_hex(16)


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a message (sent as JSON or streamed, as the request asks), an
    error (status and body), or raw SSE events (for streams the message form cannot say)."""

    status: int = 200
    body: Json | None = None
    events: tuple[tuple[str, Json], ...] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    #: seconds to wait after each streamed event (a slow model, for Ctrl-C and kill tests)
    pause_s: float = 0.0
    #: a body sent as it is, with content_type (what a broken proxy or a cut reply sends)
    raw: bytes | None = None
    content_type: str = "application/json"


@dataclass(frozen=True)
class Recorded:
    """One request as received."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Json


@dataclass
class MessagesServer:
    """The server; `with MessagesServer() as server:` runs it on a free loopback port."""

    requests: list[Recorded] = field(default_factory=list)
    _replies: deque[Reply] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL to give the SDK."""
        assert self._httpd is not None, "the server is not running"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply | Json) -> None:
        """Queue replies, in order; a dict is a message (see `message`)."""
        with self._lock:
            self._replies.extend(r if isinstance(r, Reply) else Reply(body=r) for r in replies)

    def __enter__(self) -> MessagesServer:
        handler = type("Handler", (_Handler,), {"server_state": self})
        httpd = self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        # a short poll interval: shutdown() waits up to one, in every test's teardown
        poll = {"poll_interval": 0.02}
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs=poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if self._replies:
                return self._replies.popleft()
        return error(400, "invalid_request_error", "the test scripted no reply for this request")


class _Handler(BaseHTTPRequestHandler):
    server_state: MessagesServer
    # HTTP/1.0: the connection closes after each reply, which ends an SSE body cleanly
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest's output clean

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        body = json.loads(raw) if raw else {}
        headers = {k.lower(): v for k, v in self.headers.items()}
        recorded = Recorded("POST", self.path, headers, body)
        if self.path != "/v1/messages":
            return self._json(error(404, "not_found_error", f"no route {self.path}"))
        if not headers.get("x-api-key") and not headers.get("authorization"):
            return self._json(error(401, "authentication_error", "x-api-key header is required"))
        reply = self.server_state._next(recorded)
        if reply.raw is not None:
            return self._raw(reply, reply.raw)
        if reply.events is not None:
            return self._sse(reply, reply.events)
        if body.get("stream") and reply.status == 200 and reply.body is not None:
            return self._sse(reply, stream_events(reply.body))
        return self._json(reply)

    def _start(self, reply: Reply, content_type: str) -> None:
        self.send_response(reply.status)
        self.send_header("content-type", content_type)
        self.send_header("request-id", "req_" + secrets.token_hex(8))
        for name, value in reply.headers:
            self.send_header(name, value)

    def _json(self, reply: Reply) -> None:
        self._raw(reply, json.dumps(reply.body or {}).encode())

    def _raw(self, reply: Reply, data: bytes) -> None:
        self._start(reply, reply.content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, reply: Reply, events: tuple[tuple[str, Json], ...]) -> None:
        self._start(reply, "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for name, data in events:
            try:
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return  # the client went away mid-stream (interrupted, killed)
            time.sleep(reply.pause_s)


# --- building replies ------------------------------------------------------------------


def usage(
    input_tokens: int = 10, output_tokens: int = 5, cache_read: int = 0, cache_creation: int = 0
) -> Json:
    """A usage object as the API reports it."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_creation,
    }


def text(value: str) -> Json:
    """A text content block."""
    return {"type": "text", "text": value}


def tool_use(name: str, arguments: Json) -> Json:
    """A tool_use content block."""
    return {
        "type": "tool_use",
        "id": "toolu_" + secrets.token_hex(8),
        "name": name,
        "input": arguments,
    }


def message(
    *content: Json,
    stop_reason: str | None = None,
    model: str = "claude-test",
    tokens: Json | None = None,
) -> Json:
    """A complete Messages-API message; stop_reason defaults to tool_use if it calls one."""
    calls = any(block["type"] == "tool_use" for block in content)
    return {
        "id": "msg_" + secrets.token_hex(8),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
        "stop_sequence": None,
        "usage": tokens or usage(),
    }


def error(status: int, kind: str, detail: str, retry_after: str | None = None) -> Reply:
    """An API error reply (429 rate_limit_error, 529 overloaded_error …)."""
    headers = (("retry-after", retry_after),) if retry_after is not None else ()
    body = {"type": "error", "error": {"type": kind, "message": detail}}
    return Reply(status=status, body=body, headers=headers)


def stream_events(msg: Json, chunk: int = 7) -> tuple[tuple[str, Json], ...]:
    """msg as the API streams it: text and tool input cut into chunk-sized deltas."""
    start = {
        **msg,
        "content": [],
        "stop_reason": None,
        "usage": {**msg["usage"], "output_tokens": 1},
    }
    events: list[tuple[str, Json]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(msg["content"]):
        events += _block_events(index, block, chunk)
    delta = {"stop_reason": msg["stop_reason"], "stop_sequence": None}
    final_usage = {"output_tokens": msg["usage"]["output_tokens"]}
    events.append(
        ("message_delta", {"type": "message_delta", "delta": delta, "usage": final_usage})
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return tuple(events)


def _block_events(index: int, block: Json, chunk: int) -> list[tuple[str, Json]]:
    if block["type"] == "text":
        opening, whole, kind, key = {**block, "text": ""}, block["text"], "text_delta", "text"
    else:
        opening = {**block, "input": {}}
        whole, kind, key = json.dumps(block["input"]), "input_json_delta", "partial_json"
    deltas = [
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": kind, key: whole[i : i + chunk]},
            },
        )
        for i in range(0, len(whole), chunk)
    ]
    return [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        ),
        *deltas,
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


def content_text(sent: Json) -> str:
    """The text of one message as the SDK sent it: a string, or the text of its blocks (a
    message carrying a cache breakpoint is sent as blocks)."""
    content = sent["content"]
    if isinstance(content, str):
        return content
    return "".join(str(block.get("text", "")) for block in content)
