"""The `logs` tool's schema and its behaviour agree (issue 23): ask, chat and the MCP
server advertise at most MAX_LOG_LINES lines, and a larger tail is refused naming the
bound (it was accepted up to 10**9 and silently cut to 40)."""

from __future__ import annotations

import json
from typing import Any

from jobsmith.agent.brains.ask_tools import MAX_LOG_LINES, AskTools, tool_definitions
from jobsmith.agent.faces.mcp_tools import tool_specs


def test_the_logs_schema_says_the_bound_it_keeps() -> None:
    (ask,) = [t for t in tool_definitions() if t["name"] == "logs"]
    tail: Any = ask["input_schema"]["properties"]["tail"]  # type: ignore[index]
    assert tail["maximum"] == MAX_LOG_LINES and tail["default"] == MAX_LOG_LINES
    (mcp,) = [s for s in tool_specs() if s.name == "logs"]
    assert mcp.input_schema["properties"]["tail"]["maximum"] == MAX_LOG_LINES


def test_a_tail_above_the_bound_is_refused_naming_it() -> None:
    tools = AskTools(executor=None, session_id="s", recent_jobs=list)  # type: ignore[arg-type]
    for tail in (MAX_LOG_LINES + 1, 10**9):
        outcome = tools.run("logs", {"job_id": "12", "tail": tail})
        said = json.loads(outcome.content.removeprefix("<tool_data>\n").split("\n</tool_data>")[0])
        assert outcome.is_error and outcome.step is None
        assert f"tail: at most {MAX_LOG_LINES} lines (asked for {tail})" in said["error"]
