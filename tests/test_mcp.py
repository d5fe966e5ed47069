"""`jobsmith mcp` (issue 13): the official MCP SDK's client against the server started as a
subprocess, over stdio and streamable HTTP, and, for the tests that run jobs, the real lab
cluster.

What is proved: the tools are listed with the executor's step schemas; a job is checked
(script, cost, `sbatch --test-only` start, a token bound to the script's sha256), submitted
with the token as exactly those bytes, waited for with `wait_for_jobs` (progress
notifications arriving meanwhile) until COMPLETED, its log read; a failing job is
diagnosed; every call is in `jobsmith sessions show`, in a session titled mcp, which a
new connection can continue. A submission the policy holds is never submitted by any
token: it waits in `jobsmith pending`. A token is refused when the script it names is not
the checked one, after it expired, and when it is used again. Over HTTP: no token and a
wrong token get 401; a token file others can read is refused at start; another local
user holding the right token gets 403 (run as root only: the test needs two uids).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from lab_cli import js
from mcp import ClientSession
from mcp_client import HttpServer, call, document, http_session, server_argv, stdio_session

from jobsmith.agent.faces.mcp_auth import read_token_file, socket_owner
from jobsmith.agent.faces.mcp_tools import tool_specs

#: a test on the real lab cluster (it fails, never skips, without it; conftest marks it lab)
lab = pytest.mark.usefixtures("lab_cluster")
TOKEN = "t0ken-" + "x" * 40


def events(session_id: str) -> list[dict[str, Any]]:
    out = js("sessions", "show", session_id, "--json")
    assert out.exit_code == 0, out.output
    return list(json.loads(out.stdout)["events"])


def ledger(jobsmith_home: Path) -> list[Path]:
    """One file per submission Slurm accepted."""
    return sorted((jobsmith_home / "state" / "jobs").glob("*.json"))


def job(workdir: Path, command: str, **resources: int) -> dict[str, Any]:
    request = {"template": "command", "params": {"command": command}, "log_dir": str(workdir)}
    return {"job": {**request, **resources}}


async def session_id(client: ClientSession) -> str:
    """The connection's session, from its resource."""
    read = await client.read_resource("jobsmith://session")
    assert isinstance(read, types.ReadResourceResult)
    (content,) = read.contents
    assert isinstance(content, types.TextResourceContents)
    return str(json.loads(content.text)["session_id"])


async def wait_until_ended(
    client: ClientSession, job_id: str, progress: list[str]
) -> dict[str, Any]:
    """wait_for_jobs until the job has ended (each call returns at a change of state)."""

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    for _ in range(10):
        result = await client.call_tool(
            "wait_for_jobs",
            {"job_ids": [job_id], "timeout_s": 120},
            progress_callback=on_progress,
        )
        doc = document(result)
        assert not result.is_error, doc
        if doc["all_ended"]:
            return doc
    raise AssertionError(f"job {job_id} did not end: {doc}")


# --- without Slurm ---------------------------------------------------------------------------


def test_the_tools_are_listed_with_the_step_schemas_and_calls_are_audited(
    jobsmith_home: Path,
) -> None:
    async def main() -> tuple[list[types.Tool], dict[str, Any], str, list[str]]:
        async with stdio_session() as client:
            listed = await client.list_tools()
            doc, failed = await call(client, "list_templates", {})
            assert not failed
            sid = await session_id(client)
            resources = await client.list_resources()
            return listed.tools, doc, sid, [str(r.uri) for r in resources.resources]

    tools, doc, sid, uris = anyio.run(main)
    names = [t.name for t in tools]
    assert names == [s.name for s in tool_specs()]
    assert {"check_job", "submit_job", "wait_for_jobs", "status", "logs", "diagnose"} <= set(names)
    check = next(t for t in tools if t.name == "check_job")
    assert check.input_schema["required"] == ["job"]  # the render step's schema
    assert "command" in [t["name"] for t in doc["templates"]]
    assert uris == ["jobsmith://templates", "jobsmith://site", "jobsmith://session"]

    listing = json.loads(js("sessions", "list", "--json").stdout)
    (mine,) = [s for s in listing["sessions"] if s["id"] == sid]
    assert mine["title"] == "mcp (jobsmith-tests)"
    kinds = [(e["kind"], e["data"].get("action")) for e in events(sid)]
    assert ("result", "list_templates") in kinds


def test_help_and_mcp_help_do_not_import_the_sdk() -> None:
    code = (
        "import sys\n"
        "from jobsmith.agent.faces.cli import cli\n"
        "for args in (['--help'], ['mcp', '--help']):\n"
        "    try:\n"
        "        cli(args)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('mcp' in sys.modules, 'mcp_types' in sys.modules, 'uvicorn' in sys.modules)\n"
    )
    python = server_argv()[0]
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "False False False"


def test_a_token_file_others_can_read_is_refused_naming_the_fix(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o644)
    out = subprocess.run(
        [*server_argv("--http", "--token-file", str(token_file))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert f"chmod 600 {token_file}" in out.stderr and str(token_file) in out.stderr
    token_file.chmod(0o600)
    assert read_token_file(token_file) == TOKEN
    missing = tmp_path / "none"
    with pytest.raises(Exception, match="does not exist"):
        read_token_file(missing)


def test_http_refuses_no_token_and_a_wrong_token_and_serves_the_right_one(
    jobsmith_home: Path, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    server = HttpServer(token_file)
    try:
        server.wait_listening()
        hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        accept = {"Accept": "application/json, text/event-stream"}
        bare = httpx2.post(server.url, json=hello, headers=accept)
        assert bare.status_code == 401
        assert bare.headers["www-authenticate"].startswith("Bearer")
        wrong = httpx2.post(
            server.url, json=hello, headers={**accept, "Authorization": "Bearer " + "y" * 46}
        )
        assert wrong.status_code == 401

        async def main() -> list[str]:
            async with http_session(server.url, TOKEN) as client:
                return [t.name for t in (await client.list_tools()).tools]

        assert "check_job" in anyio.run(main)
    finally:
        server.stop()


def test_the_socket_owner_is_read_from_the_kernels_table() -> None:
    """A real loopback connection: the kernel's table names this process's uid as the
    owner of the client's end; a line with another uid is found as that uid."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as client:
            accepted, _ = listener.accept()
            with accepted:
                lines = Path("/proc/net/tcp").read_text().splitlines()
                owner = socket_owner(lines, client.getsockname(), listener.getsockname())
                assert owner == os.getuid()
                # the server's end (local = server) is not mistaken for the client's
                assert socket_owner(lines, listener.getsockname(), client.getsockname()) in (
                    os.getuid(),
                    None,
                )
    line = "   0: 0100007F:D431 0100007F:223D 01 00000000:00000000 00:00000000 00000000  4242 0 1"
    assert socket_owner([line], ("127.0.0.1", 0xD431), ("127.0.0.1", 0x223D)) == 4242
    assert socket_owner([line], ("127.0.0.1", 1), ("127.0.0.1", 0x223D)) is None


def _other_user() -> str | None:
    """A local user other than the lab's who can run Python, for the two-uid test."""
    for name in ("bob", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    return None


@pytest.mark.skipif(
    os.getuid() != 0 or shutil.which("runuser") is None,
    reason="needs two local users: run as root (it starts the server as the lab user and "
    "the client as another user); the lab user cannot switch users",
)
def test_another_local_user_with_the_right_token_is_refused() -> None:
    owner = os.environ.get("JOBSMITH_LAB_USER", "alice")
    other = _other_user()
    assert other is not None
    # not pytest's tmp_path: root's is private, and the server runs as the lab user
    tmp_path = Path(tempfile.mkdtemp(prefix="jobsmith-mcp-"))
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "state").mkdir()
    token_file = home / "config" / "mcp_token"
    token_file.write_text(TOKEN)
    shutil.chown(tmp_path, owner)
    for path in [home, *home.rglob("*")]:
        shutil.chown(path, owner)
    token_file.chmod(0o600)
    tmp_path.chmod(0o755)
    env = [f"JOBSMITH_CONFIG_DIR={home / 'config'}", f"JOBSMITH_STATE_DIR={home / 'state'}"]
    server = HttpServer(token_file, prefix=["runuser", "-u", owner, "--", "env", *env])
    try:
        server.wait_listening()
        probe = (
            "import sys, httpx2; r = httpx2.post(sys.argv[1], json={'jsonrpc': '2.0', "
            "'id': 1, 'method': 'ping'}, headers={'Authorization': 'Bearer ' + sys.argv[2], "
            "'Accept': 'application/json, text/event-stream'}); print(r.status_code, r.text)"
        )
        python = server_argv()[0]

        def as_user(user: str) -> str:
            out = subprocess.run(
                ["runuser", "-u", user, "--", python, "-c", probe, server.url, TOKEN],
                capture_output=True,
                text=True,
                timeout=60,
                cwd="/",
            )
            assert out.returncode == 0, out.stderr
            return out.stdout

        refused = as_user(other)
        assert refused.startswith("403") and "not uid" in refused
        assert not as_user(owner).startswith(("401", "403"))  # the owner gets through
    finally:
        server.stop()
        shutil.rmtree(tmp_path, ignore_errors=True)


# --- on the lab cluster ----------------------------------------------------------------------


@lab
def test_check_submit_wait_and_read_a_real_job(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site()

    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], str]:
        async with stdio_session("--interval", "2") as client:
            checked, failed = await call(client, "check_job", job(workdir, "echo from-mcp"))
            assert not failed, checked
            submitted, failed = await call(
                client,
                "submit_job",
                {"token": checked["token"], "script_sha256": checked["script_sha256"]},
            )
            assert not failed, submitted
            progress: list[str] = []
            waited = await wait_until_ended(client, submitted["job_id"], progress)
            logs, failed = await call(client, "logs", {"job_id": submitted["job_id"]})
            assert not failed, logs
            return checked, submitted, waited, logs, await session_id(client)

    checked, submitted, waited, logs, sid = anyio.run(main)
    assert "echo from-mcp" in checked["script"]
    assert checked["policy"]["verdict"] == "allow" and checked["held_for_person"] is False
    assert checked["test_only"]["ok"] is True and checked["test_only"]["estimated_start"]
    assert checked["policy"]["cost"]["tasks"] == 1
    job_id = submitted["job_id"]
    assert submitted["submitted"] is True and job_id.isdigit()
    # exactly the checked bytes: the job name carries the check's tag
    assert submitted["tag"] == checked["tag"] and submitted["job_name"] == checked["job_name"]
    ((polled,),) = [waited["jobs"]]
    assert (polled["job_id"], polled["state"]) == (job_id, "COMPLETED")
    assert waited["poller"] == "this server"
    assert logs["lines"] == ["from-mcp"]

    log = events(sid)
    actions = [e["data"].get("action") for e in log if e["kind"] == "result"]
    assert actions[:2] == ["test_only", "submit"] and "read_output" in actions
    intent = next(
        e for e in log if e["kind"] == "intent" and e["data"]["step"]["action"] == "submit"
    )
    assert intent["data"]["script_sha256"] == checked["script_sha256"]
    assert any(e["kind"] == "note" and e["data"]["tool"] == "wait_for_jobs" for e in log)
    assert checked["token"] not in json.dumps(log)  # the token itself is never logged


@lab
def test_a_failing_job_is_waited_for_and_diagnosed_and_a_new_connection_continues(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site()

    async def first() -> tuple[str, str, list[str]]:
        async with stdio_session("--interval", "2") as client:
            checked, _ = await call(client, "check_job", job(workdir, "no-such-command-here"))
            sent, failed = await call(
                client,
                "submit_job",
                {"token": checked["token"], "script_sha256": checked["script_sha256"]},
            )
            assert not failed, sent
            progress: list[str] = []
            waited = await wait_until_ended(client, sent["job_id"], progress)
            assert waited["jobs"][0]["state"] == "FAILED"
            return sent["job_id"], await session_id(client), progress

    job_id, sid, _ = anyio.run(first)

    async def second() -> dict[str, Any]:
        async with stdio_session("--session", sid) as client:
            assert await session_id(client) == sid
            doc, failed = await call(client, "diagnose", {"job_id": job_id})
            assert not failed, doc
            return doc

    (diagnosis,) = anyio.run(second)["diagnoses"]
    assert diagnosis["job_id"] == job_id
    assert "127" in json.dumps(diagnosis) or "not found" in json.dumps(diagnosis).lower()
    actions = [e["data"].get("action") for e in events(sid) if e["kind"] == "result"]
    assert actions[-1] == "diagnose"  # the second connection recorded into the same session


@lab
def test_a_held_submission_is_never_submitted_by_a_token(
    user_site: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    user_site("policy:\n  approval:\n    core_hours: 0.01\n")

    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with stdio_session() as client:
            checked, failed = await call(client, "check_job", job(workdir, "echo held"))
            assert not failed, checked
            spend = {"token": checked["token"], "script_sha256": checked["script_sha256"]}
            held, failed = await call(client, "submit_job", spend)
            assert not failed, held
            again, failed_again = await call(client, "submit_job", spend)
            assert failed_again
            return checked, held, again, {"sid": await session_id(client)}

    checked, held, again, sid = anyio.run(main)
    assert checked["held_for_person"] is True and checked["policy"]["verdict"] == "approve"
    assert held["submitted"] is False and held["held_for_person"] is True
    assert "already used" in again["message"]
    (pending,) = json.loads(js("pending", "--json").stdout)["pending"]
    assert pending["step_id"] == held["step_id"]
    assert pending["script_sha256"] == checked["script_sha256"]  # the checked bytes, for a person
    assert ledger(jobsmith_home) == []  # nothing reached Slurm
    kinds = [e["kind"] for e in events(sid["sid"])]
    assert "approval_asked" in kinds and "note" in kinds  # the reuse is in the audit too


@lab
def test_a_token_is_refused_for_another_script_after_expiry_and_when_reused(
    user_site: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    user_site()

    async def main() -> dict[str, str]:
        messages: dict[str, str] = {}
        async with stdio_session("--token-ttl", "2") as client:
            one, _ = await call(client, "check_job", job(workdir, "echo one"))
            two, _ = await call(client, "check_job", job(workdir, "echo two"))
            assert one["script_sha256"] != two["script_sha256"]
            # the script changed: token one names script one, not script two
            doc, failed = await call(
                client, "submit_job", {"token": one["token"], "script_sha256": two["script_sha256"]}
            )
            assert failed
            messages["changed"] = doc["message"]
            # a refused token is spent: not even the right hash submits it now
            doc, failed = await call(
                client, "submit_job", {"token": one["token"], "script_sha256": one["script_sha256"]}
            )
            assert failed
            messages["spent"] = doc["message"]
            await anyio.sleep(2.5)
            doc, failed = await call(
                client, "submit_job", {"token": two["token"], "script_sha256": two["script_sha256"]}
            )
            assert failed
            messages["expired"] = doc["message"]
        async with stdio_session() as client:
            three, _ = await call(client, "check_job", job(workdir, "echo three"))
            spend = {"token": three["token"], "script_sha256": three["script_sha256"]}
            sent, failed = await call(client, "submit_job", spend)
            assert not failed, sent
            messages["job_id"] = sent["job_id"]
            doc, failed = await call(client, "submit_job", spend)
            assert failed
            messages["reused"] = doc["message"]
        return messages

    messages = anyio.run(main)
    assert "the script changed" in messages["changed"]
    assert "already used" in messages["spent"]
    assert "expired" in messages["expired"]
    assert "already used" in messages["reused"]
    (record,) = ledger(jobsmith_home)  # only the one good submission reached Slurm
    assert json.loads(record.read_text())["job_id"] == messages["job_id"]
    done = js("wait", messages["job_id"], "--timeout", "120")
    assert done.exit_code == 0, done.output


@lab
def test_over_http_a_job_is_checked_submitted_and_waited_for(
    user_site: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    user_site()
    token_file = jobsmith_home / "config" / "mcp_token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    server = HttpServer(token_file, extra=["--interval", "2"])
    try:
        server.wait_listening()

        async def main() -> tuple[dict[str, Any], list[str]]:
            async with http_session(server.url, TOKEN) as client:
                checked, _ = await call(client, "check_job", job(workdir, "sleep 3; echo http"))
                sent, failed = await call(
                    client,
                    "submit_job",
                    {"token": checked["token"], "script_sha256": checked["script_sha256"]},
                )
                assert not failed, sent
                progress: list[str] = []
                return await wait_until_ended(client, sent["job_id"], progress), progress

        waited, progress = anyio.run(main)
    finally:
        server.stop()
    assert waited["jobs"][0]["state"] == "COMPLETED"
    assert progress and all("polled by" in p for p in progress)  # notifications arrived
