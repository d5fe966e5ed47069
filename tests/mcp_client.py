"""The official MCP SDK's client against `jobsmith mcp` started as a subprocess, for tests.

`stdio_session` starts `python -m jobsmith --site <lab> mcp …` through the SDK's own stdio
client, in the environment the test set up (its JOBSMITH_* directories, its cwd); `HttpServer`
starts `jobsmith mcp --http` on a free loopback port and `http_session` connects with the
SDK's streamable HTTP client and a bearer token.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
from lab_cli import LAB_SITE
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def server_argv(*extra: str) -> list[str]:
    """`python -m jobsmith --site <lab example> mcp EXTRA…`."""
    return [sys.executable, "-m", "jobsmith", "--site", str(LAB_SITE), "mcp", *extra]


@asynccontextmanager
async def stdio_session(*extra: str, name: str = "jobsmith-tests") -> AsyncIterator[ClientSession]:
    """An initialized client session with a `jobsmith mcp` subprocess over stdio."""
    argv = server_argv(*extra)
    params = StdioServerParameters(
        command=argv[0], args=argv[1:], env=dict(os.environ), cwd=os.getcwd()
    )
    info = types.Implementation(name=name, version="0")
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, client_info=info) as session,
    ):
        await session.initialize()
        yield session


def document(result: types.CallToolResult | types.Result) -> dict[str, Any]:
    """A tool result's JSON document (its structured content, checked against its text)."""
    assert isinstance(result, types.CallToolResult)
    doc = result.structured_content
    assert isinstance(doc, dict)
    (text,) = result.content
    assert isinstance(text, types.TextContent)
    body = text.text.removeprefix("<tool_data>\n").removesuffix("\n</tool_data>")
    assert json.loads(body) == doc
    return doc


async def call(
    session: ClientSession, name: str, args: dict[str, Any]
) -> tuple[dict[str, Any], bool]:
    """(document, is_error) of one tool call."""
    result = await session.call_tool(name, args)
    assert isinstance(result, types.CallToolResult)
    return document(result), result.is_error


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpServer:
    """`jobsmith mcp --http` as a subprocess (optionally run by another command prefix)."""

    def __init__(self, token_file: Path, *, prefix: Sequence[str] = (), extra: Sequence[str] = ()):
        self.port = free_port()
        argv = [*server_argv("--http", "--port", str(self.port), "--token-file", str(token_file))]
        self.proc = subprocess.Popen(
            [*prefix, *argv, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def wait_listening(self, timeout_s: float = 20) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                _, err = self.proc.communicate()
                raise AssertionError(f"jobsmith mcp --http exited {self.proc.returncode}: {err}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise AssertionError("jobsmith mcp --http did not listen")

    def stop(self) -> str:
        """Stop it; its stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


@asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    """An initialized client session over streamable HTTP with the bearer token."""
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
