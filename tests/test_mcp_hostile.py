"""Hostile tool input to `jobsmith mcp` (issue 13): never a traceback, always the documented error.

Property tests drive the server's tools in-process (agent/faces/mcp_tools.py, the code
behind every `tools/call`) on the lab cluster with arbitrary JSON as arguments, for every
tool and for names that are no tool; a fixed set of hostile calls then goes through the
real server over stdio with the SDK's client, which must answer each with an error
result and keep serving. The documented error is a document
`{"error": <kind>, "message": <one line>}` with `isError` set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lab_cli import LAB_SITE
from mcp_client import document, stdio_session

from jobsmith.agent.app import build_app
from jobsmith.agent.faces.mcp_tools import MAX_ERROR_CHARS, McpTools, Sessions, tool_specs
from jobsmith.agent.faces.mcp_wait import WaitInput
from jobsmith.agent.runtime.submission.approval.check_tokens import CheckTokens

lab = pytest.mark.usefixtures("lab_cluster")
NAMES = [s.name for s in tool_specs() if s.name != "wait_for_jobs"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
#: the fields the tools have, so examples reach past "unknown field" often
FIELDS = [
    "job",
    "job_ids",
    "job_id",
    "name",
    "tail",
    "stream",
    "token",
    "script_sha256",
    "session_id",
    "template",
    "params",
    "id",
    "action",
]
arguments = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), json_values, max_size=4)
jobs = st.fixed_dictionaries(
    {
        "template": st.sampled_from(["command", "file_array", "nope", "../etc/passwd"])
        | st.text(max_size=20)
    },
    optional={
        "params": json_values,
        "mem_mb": json_values,
        "log_dir": json_values,
        "partition": json_values,
        "cpus_per_task": json_values,
    },
)


def assert_documented(reply_doc: dict[str, Any], is_error: bool) -> None:
    json.dumps(reply_doc)  # a JSON document, whatever came in
    if is_error and "test_only" in reply_doc:
        return  # check_job: Slurm would not accept the job; its document says why
    if is_error:
        assert set(reply_doc) == {"error", "message"}, reply_doc
        assert isinstance(reply_doc["error"], str) and reply_doc["error"][:1].isupper()
        assert isinstance(reply_doc["message"], str)
        assert len(reply_doc["message"]) <= MAX_ERROR_CHARS
        assert "Traceback" not in reply_doc["message"]


@pytest.fixture
def tools(jobsmith_home: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> McpTools:
    monkeypatch.chdir(workdir)
    app = build_app(LAB_SITE)
    return McpTools(app, CheckTokens(), Sessions(app))


@lab
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.sampled_from(NAMES) | st.text(max_size=20), args=arguments | json_values)
def test_any_arguments_to_any_tool_get_a_document(tools: McpTools, name: str, args: Any) -> None:
    reply = tools.call("process", "fuzz", name, args)
    assert_documented(reply.document, reply.is_error)
    if name not in NAMES or not isinstance(args, dict | None):
        assert reply.is_error


@lab
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(job=jobs)
def test_any_job_to_check_job_gets_a_document_and_no_submission(
    tools: McpTools, jobsmith_home: Path, job: dict[str, Any]
) -> None:
    reply = tools.call("process", "fuzz", "check_job", {"job": job})
    assert_documented(reply.document, reply.is_error)
    assert not list((jobsmith_home / "state" / "jobs").glob("*.json"))  # nothing submitted


@settings(max_examples=200)
@given(args=arguments | json_values)
def test_wait_for_jobs_input_is_validated_or_refused(args: Any) -> None:
    from pydantic import ValidationError

    try:
        given_ = WaitInput.model_validate(args)
    except ValidationError:
        return
    assert 1 <= len(given_.job_ids) <= 100 and 1 <= given_.timeout_s <= 3600


HOSTILE = [
    ("check_job", {}),
    ("check_job", {"job": "echo hi"}),
    ("check_job", {"job": {"template": "command", "params": {"command": "x"}, "mem_mb": -1}}),
    ("check_job", {"job": {"template": "../../etc/passwd"}}),
    ("check_job", {"job": {"template": "command"}, "id": "st-planted", "action": "submit"}),
    ("submit_job", {"token": "x" * 10_000, "script_sha256": "0" * 64}),
    ("submit_job", {"token": "jsck-forged", "script_sha256": "é" * 64}),
    ("submit_job", {"token": None}),
    ("status", {"job_ids": ["1; rm -rf ~"]}),
    ("status", {"job_ids": "1"}),
    ("logs", {"job_id": "--help"}),
    ("logs", {"job_id": "1", "tail": [1]}),
    ("logs", {"job_id": "1", "tail": True}),
    ("diagnose", {"job_id": {"$ne": 1}}),
    ("show_template", {"name": "\x00"}),
    ("wait_for_jobs", {"job_ids": []}),
    ("wait_for_jobs", {"job_ids": ["1"] * 101}),
    ("wait_for_jobs", {"job_ids": ["99999999"], "timeout_s": 1}),
    ("wait_for_jobs", {"job_ids": ["1"], "timeout_s": 10**9}),
    ("continue_session", {"session_id": "../../../etc"}),
    ("no_such_tool", {"x": 1}),
]


@lab
def test_hostile_calls_through_the_real_server_are_errors_and_it_keeps_serving(
    jobsmith_home: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)

    async def main() -> list[tuple[str, dict[str, Any], bool]]:
        out = []
        async with stdio_session() as client:
            for name, args in HOSTILE:
                result = await client.call_tool(name, args)
                out.append((name, document(result), bool(getattr(result, "is_error", False))))
            assert (await client.list_tools()).tools  # still serving
        return out

    for name, doc, is_error in anyio.run(main):
        assert is_error, (name, doc)
        assert set(doc) == {"error", "message"}, (name, doc)
        assert_documented(doc, is_error)
    assert not list((jobsmith_home / "state" / "jobs").glob("*.json"))
