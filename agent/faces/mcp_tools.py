"""The MCP server's tools and resources, without the SDK: what each call does in jobsmith.

Every call runs in a session of the store (one per MCP connection, see `Sessions`), so
`jobsmith sessions show ID` audits what an external agent did. The read-only tools
(`list_templates`, `show_template`, `status`, `logs`, `diagnose`) are the executor's
steps, run through `ask`'s own tool runner (agent/brains/ask_tools.py: its input schemas,
bounds and data marking). Submission is two calls:

- `check_job` assembles the job, judges it on the submit path's policy, asks
  `sbatch --test-only` when it would start, and returns the script, its cost, the
  verdict and a token bound to the script's sha256
  (agent/runtime/submission/approval/check_tokens.py).
  It is recorded as a `test_only` step. A refused job, or one Slurm would not accept,
  gets no token.
- `submit_job(token, script_sha256)` submits exactly the checked bytes through the
  executor's one submit path, which judges policy again; a job the policy holds for a
  person becomes a step in `jobsmith pending` (approved there by a person, never by a
  token), and the token is spent either way.

A result is the view layer's compact document, as JSON (`ToolReply.document`); its text
form marks it as data as `ask` does (`as_data`), since job output reaches it. Bad input
is an error reply naming the field, never a traceback; refusals are recorded in the
session as notes.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobsmith.agent.brains.ask_tools import AskTools, as_data, first_error, tool_definitions
from jobsmith.agent.runtime.documents import SessionDocument
from jobsmith.agent.runtime.session.claims import append_result
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded
from jobsmith.agent.runtime.submission.approval.check_tokens import CheckTokens, TokenRefused
from jobsmith.agent.runtime.submission.orders import Checked
from jobsmith.agent.runtime.submission.steps import Outcome, Submit, TestOnly, step_adapter
from jobsmith.errors import InputError, JobsmithError, NotFound, PolicyError

if TYPE_CHECKING:
    from jobsmith.agent.app import App
    from jobsmith.agent.runtime.submission.approval.check_tokens import Issued

#: the read-only tools that are ask's own (same schemas, same bounds)
ASK_TOOLS = ("list_templates", "show_template", "status", "logs", "diagnose")
#: an error message longer than this is cut (a hostile input can be long)
MAX_ERROR_CHARS = 500
#: a session's title says where its calls came from
TITLE = "mcp"


class ToolInputError(InputError):
    """A tool's arguments are not what its input schema says; nothing ran."""


class SubmitInput(BaseModel):
    """submit_job's arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    token: str = Field(min_length=1, max_length=200, description="the token check_job gave")
    script_sha256: str = Field(
        pattern=r"^[0-9a-fA-F]{64}$",
        description="the script_sha256 check_job showed: the script you mean to submit",
    )


class ContinueInput(BaseModel):
    """continue_session's arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str = Field(
        min_length=1, max_length=100, description="a session id, e.g. from an earlier call"
    )


@dataclass(frozen=True)
class ToolReply:
    """One call's answer: the document (JSON), and whether it is an error."""

    document: dict[str, Any]
    is_error: bool = False

    def text(self) -> str:
        """The document as text for a model: compact JSON, marked as data."""
        return as_data(self.document)


@dataclass(frozen=True)
class ToolSpec:
    """A tool as clients list it."""

    name: str
    description: str
    input_schema: dict[str, Any]


def tool_specs() -> list[ToolSpec]:
    """Every tool, in a fixed order."""
    ask = {str(t["name"]): t for t in tool_definitions()}
    specs = [
        ToolSpec(name, str(ask[name]["description"]), dict(ask[name]["input_schema"]))
        for name in ASK_TOOLS
    ]
    check = dict(ask["render"]["input_schema"])
    return [
        *specs,
        ToolSpec(
            "check_job",
            "Render a job from a template, judge it on the site's policy and ask Slurm "
            "(sbatch --test-only) when it would start; submits nothing. Returns the exact "
            "script, its cost, the policy's verdict and a short-lived single-use token for "
            "submit_job.",
            check,
        ),
        ToolSpec(
            "submit_job",
            "Submit exactly the script a check_job call returned, with its token and the "
            "script's sha256. Policy judges it again; a job the policy holds for a person "
            "is not submitted: it waits in `jobsmith pending` for the person to approve.",
            _schema(SubmitInput),
        ),
        ToolSpec(
            "wait_for_jobs",
            "Block until one of the given jobs changes state (or all have ended, or the "
            "timeout passes), sending progress notifications meanwhile. Reads jobsmith's "
            "batched poll; never asks Slurm per job. A fed workload (status lists each with "
            "its step id) is waited for as one job by that id in workloads.",
            _schema_of_wait(),
        ),
        ToolSpec(
            "continue_session",
            "Carry on in an earlier jobsmith session (its id from an earlier connection): "
            "this connection's next calls are recorded there.",
            _schema(ContinueInput),
        ),
    ]


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    return schema


def _schema_of_wait() -> dict[str, Any]:
    from jobsmith.agent.faces.mcp_wait import WaitInput

    return _schema(WaitInput)


@dataclass
class Sessions:
    """Which jobsmith session each MCP connection records into.

    A connection's key is the transport's: the server process for stdio, the
    Mcp-Session-Id for HTTP (requests without one share the process's key). A session
    is opened at a connection's first call, titled `mcp` and the client's name, unless
    the server was started with `--session` or the client called continue_session.
    """

    app: App
    start_with: str | None = None
    _by_key: dict[str, str] = field(default_factory=dict)

    def of(self, key: str, client: str | None) -> str:
        """The connection's session, opened on first use."""
        sid = self._by_key.get(key)
        if sid is None:
            if self.start_with is not None:
                sid = self.start_with
            else:
                title = f"{TITLE} ({client})" if client else TITLE
                sid = self.app.store.create({"title": title[:100], "origin": "mcp"})
            self._by_key[key] = sid
        return sid

    def move(self, key: str, session_id: str) -> str:
        """Record the connection's next calls in session_id (NotFound if there is none)."""
        self.app.store.info(session_id)  # a clear error for an unknown session
        self._by_key[key] = session_id
        return session_id


@dataclass
class McpTools:
    """Runs MCP tool calls against the application (synchronously; callers serialize)."""

    app: App
    tokens: CheckTokens
    sessions: Sessions
    #: every App call runs under this lock (the App's parts are built lazily, once)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def call(self, key: str, client: str | None, name: str, arguments: object) -> ToolReply:
        """One call of any tool but wait_for_jobs (which the server runs itself)."""
        with self.lock:
            try:
                return self._call(key, client, name, arguments)
            except (ValidationError, ToolInputError) as exc:
                return _error(f"{name}: invalid input: {first_error(exc)}", "ToolInputError")
            except JobsmithError as err:
                return _error(str(err), type(err).__name__)

    def _call(self, key: str, client: str | None, name: str, arguments: object) -> ToolReply:
        args = _object(arguments)
        if name == "continue_session":
            target = ContinueInput.model_validate(args).session_id
            sid = self.sessions.move(key, target)
            return ToolReply({"session_id": sid, "continued": True})
        sid = self.sessions.of(key, client)
        if name in ASK_TOOLS:
            return self._ask_tool(sid, name, args)
        if name == "check_job":
            return self.check_job(sid, args)
        if name == "submit_job":
            return self.submit_job(sid, args)
        raise ToolInputError(f"no tool named {name[:100]!r}")

    def session_of(self, key: str, client: str | None) -> str:
        """The connection's session id (opened if it has none yet)."""
        with self.lock:
            return self.sessions.of(key, client)

    # --- the read-only tools: ask's ----------------------------------------------------

    def _ask_tool(self, sid: str, name: str, args: dict[str, Any]) -> ToolReply:
        if name == "logs" and "tail" in args:
            tail = args["tail"]
            if not isinstance(tail, int) or isinstance(tail, bool):
                raise ToolInputError("tail: must be a whole number of lines")
        runner = AskTools(self.app.executor, sid, self.app.ledger.recent_job_ids)
        outcome = runner.run(name, args)
        doc = _unmarked(outcome.content)
        if outcome.is_error and set(doc) == {"error"}:
            # ask's refusals are one line: in the shape every other error here has
            kind = "StepFailed" if outcome.step is not None else "ToolInputError"
            return _error(str(doc["error"]), kind)
        return ToolReply(doc, outcome.is_error)

    # --- check, then submit --------------------------------------------------------------

    def check_job(self, sid: str, args: dict[str, Any]) -> ToolReply:
        """Assemble and judge the job, ask Slurm when it would start, issue a token."""
        step = step_adapter().validate_python({**_own_fields(args), "action": "test_only"})
        assert isinstance(step, TestOnly)
        log = SessionLog(self.app.store, sid)
        log.intent(step.id, {"step": step.model_dump(mode="json"), "risk": step.risk})
        try:
            checked = self.app.executor.judge.job(step.job)
            checked.raise_if_refused()
            verdict = self.app.scheduler.test_only(checked.job.script)
        except JobsmithError as err:
            outcome = Outcome.REFUSED if isinstance(err, PolicyError) else Outcome.FAILED
            failed = {"outcome": outcome, "action": step.action, "error": str(err)}
            append_result(log, step.id, failed)
            raise
        doc = checked.document().compact()
        doc["test_only"] = verdict.model_dump(mode="json")
        # what the site's policy took (in the script), or what there is to offer
        advice = checked.advice or self.app.executor.judge.advise(step.job)
        if advice.offers():
            doc["advice"] = advice.model_dump(mode="json", exclude_none=True)
        held = checked.decision.verdict == "approve"
        if not verdict.ok:
            doc["next"] = f"Slurm would not accept it as is: {verdict.message}; no token"
            append_result(log, step.id, {"outcome": Outcome.FAILED, "action": step.action, **doc})
            return ToolReply(doc, is_error=True)
        token, issued = self.tokens.issue(sid, step.job, checked)
        doc["expires_at"] = issued.expires_at.isoformat()
        doc["held_for_person"] = held
        doc["next"] = (
            "submit_job would put it in `jobsmith pending` for a person to approve "
            f"({checked.decision.message}); it is not submitted by the token"
            if held
            else "submit_job with this token and script_sha256 submits exactly this script"
        )
        append_result(log, step.id, {"outcome": Outcome.DONE, "action": step.action, **doc})
        return ToolReply({**doc, "token": token})

    def submit_job(self, sid: str, args: dict[str, Any]) -> ToolReply:
        """Spend the token and submit the bytes it names (or hold them for a person)."""
        given = SubmitInput.model_validate(args)
        try:
            issued = self.tokens.spend(given.token, sid, given.script_sha256)
        except TokenRefused as err:
            self._note(sid, "submit_job", str(err))
            raise
        step = Submit(job=issued.request)
        try:
            result = self.app.executor.submit(sid, Checked(step, issued.checked))
        except ApprovalNeeded as err:
            self.app.news.add("approval_asked", step_id=err.step_id)
            return ToolReply(_held(err.step_id, issued, str(err)))
        doc = {**result.summary, "session_id": sid, "step_id": result.step_id}
        return ToolReply(doc, is_error=result.outcome is not Outcome.DONE)

    def _note(self, sid: str, tool: str, message: str) -> None:
        SessionLog(self.app.store, sid).append(
            EventKind.NOTE, {"tool": tool, "refused": message[:MAX_ERROR_CHARS]}, None
        )

    # --- resources -------------------------------------------------------------------------

    def resource(self, key: str, client: str | None, uri: str) -> dict[str, Any]:
        """The document a resource URI names (NotFound for any other URI)."""
        with self.lock:
            return self._resource(key, client, uri)

    def _resource(self, key: str, client: str | None, uri: str) -> dict[str, Any]:
        if uri == "jobsmith://templates":
            listed = self.app.library.list()
            return {"templates": [{"name": t.name, "description": t.description} for t in listed]}
        if uri.startswith("jobsmith://templates/"):
            t = self.app.library.get(uri.removeprefix("jobsmith://templates/"))
            return {"name": t.name, "spec": t.spec.model_dump(mode="json", exclude_none=True)}
        if uri == "jobsmith://site":
            return site_document(self.app)
        if uri == "jobsmith://session":
            return self._history(self.sessions.of(key, client))
        if uri.startswith("jobsmith://sessions/"):
            return self._history(uri.removeprefix("jobsmith://sessions/"))
        raise NotFound(f"no resource {uri[:200]!r}; see resources/list")

    def _history(self, session_id: str) -> dict[str, Any]:
        return SessionDocument(events=tuple(self.app.store.read(session_id))).compact()


def site_document(app: App) -> dict[str, Any]:
    """The site's partitions and limits, accounts, QoS, defaults and policy thresholds."""
    config = app.site.config.model_dump(mode="json", exclude_none=True)
    keep = ("cluster", "partitions", "accounts", "qos", "defaults", "policy")
    return {k: config[k] for k in keep if k in config}


def _held(step_id: str, issued: Issued, message: str) -> dict[str, Any]:
    return {
        "submitted": False,
        "held_for_person": True,
        "step_id": step_id,
        "script_sha256": issued.script_sha256,
        "message": message,
    }


def _object(arguments: object) -> dict[str, Any]:
    if arguments is None:
        return {}
    if not isinstance(arguments, dict) or not all(isinstance(k, str) for k in arguments):
        raise ToolInputError("the arguments must be an object of the tool's own fields")
    return dict(arguments)


def _own_fields(args: dict[str, Any]) -> dict[str, Any]:
    """args, refusing what jobsmith fills in itself (a step's id and action)."""
    if {"id", "action"} & set(args):
        raise ToolInputError("the arguments must be an object of the tool's own fields")
    return args


def _unmarked(content: str) -> dict[str, Any]:
    """The document inside ask's <tool_data> block (its '<' escapes are JSON's own)."""
    body = content.removeprefix("<tool_data>\n").removesuffix("\n</tool_data>")
    doc = json.loads(body)
    return doc if isinstance(doc, dict) else {"result": doc}


def _error(message: str, kind: str) -> ToolReply:
    return ToolReply({"error": kind, "message": message[:MAX_ERROR_CHARS]}, is_error=True)
