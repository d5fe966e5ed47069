"""`jobsmith chat`: a conversation with the model at a login-node terminal.

Each line the person types goes to the model with jobsmith's tools (the same Run as `ask`,
agent/brains/conversation.py, on one session); its text streams as it comes, each tool
call is one line, and a submission the policy holds is shown whole before anything
reaches Slurm: the exact script, its cost, Slurm's start estimate (`sbatch --test-only`),
and three keys: approve, deny, or say what to change (the model hears it and proposes
again). Approving runs `jobsmith approve`'s own path (the script's sha256 bound), so
nothing the model says can approve anything.

Ctrl-C while the model streams cuts its turn (what it said and cost is recorded); while
a tool runs, the step finishes first and the turn stops after it (a submission is never
cut in half); at the prompt, a second Ctrl-C leaves, as does Ctrl-D or `/exit`.
`chat --session ID` continues from the session's log, which is the chat's memory: a chat
whose context grows past `model.chat_context_tokens` starts its next turn from the log,
compacted, instead of resending everything.

While the chat is open and no watcher runs for the user, the chat is the user's watcher:
it takes the per-user watcher lock and polls every interval, between the person's turns
(never during one), so there is still one poller per user. What the poll sees (jobs that
ended, a brain woken for them, this chat's included) is written above the prompt, and
the next turn shows the model what happened meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from jobsmith.agent.brains.ask_tools import ToolOutcome, as_data, step_outcome
from jobsmith.agent.brains.conversation import AskFailed, Interrupted, Run
from jobsmith.agent.faces.terminal import Terminal
from jobsmith.agent.runtime.session.readmodel import TokenTotals
from jobsmith.agent.runtime.submission.approval import answers
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded, pending_approvals
from jobsmith.agent.watcher.stopping import Stop, StopSignals
from jobsmith.agent.watcher.watcher import Watcher
from jobsmith.errors import JobsmithError

if TYPE_CHECKING:
    from jobsmith.agent.app import App
    from jobsmith.agent.runtime.submission.approval.approvals import PendingApproval
    from jobsmith.agent.watcher.cycle import WatchCycle

PROMPT = "you> "
HELP = (
    "Say what you want done on the cluster. /cost: what this chat cost so far; /exit or "
    "Ctrl-D: leave; Ctrl-C: interrupt the model (twice at the prompt: leave)."
)
#: a tool call's line shows at most this much of its input
MAX_CALL_CHARS = 100


@dataclass
class ChatListener:
    """Shows a run's turns on the terminal and asks the person about held steps."""

    app: App
    term: Terminal
    streaming: bool = True
    #: a Ctrl-C came while a tool ran: stop the turn once the step is recorded
    stop_requested: bool = False
    in_tool: bool = False
    #: the chat's stop signals (SIGTERM), checked once a running tool's step is recorded
    stop: StopSignals | None = None
    _mid_line: bool = False

    def text(self, delta: str) -> None:
        """The model's text, as it streams."""
        self.term.write(delta)
        self._mid_line = not delta.endswith("\n")

    def tool_call(self, name: str, arguments: object) -> None:
        """One line per call, before it runs."""
        self._end_line()
        shown = json.dumps(arguments, separators=(",", ":"), default=str)
        if len(shown) > MAX_CALL_CHARS:
            shown = shown[: MAX_CALL_CHARS - 1] + "…"
        self.term.write(f"  · {name} {shown}\n")
        self.in_tool = True

    def tool_done(self, name: str, outcome: ToolOutcome) -> None:
        """What came of it, in a few words."""
        self.in_tool = False
        self.term.write(f"    {_verdict(outcome)}\n")
        if self.stop is not None:
            self.stop.check()  # a SIGTERM kept while the step ran: the chat ends here
        if self.stop_requested:
            self.stop_requested = False
            raise KeyboardInterrupt  # the step is recorded; the turn stops here

    def held(self, err: ApprovalNeeded) -> ToolOutcome | None:
        """The held step shown whole; the person's key decides."""
        self._end_line()
        pending = pending_approvals(self.app.store, self.app.folds)
        item = next((p for p in pending if p.step_id == err.step_id), None)
        if item is None:  # answered elsewhere meanwhile (another terminal): say so
            return _told(f"step {err.step_id} was answered elsewhere meanwhile")
        estimate = answers.start_estimate(self.app.scheduler, item.script)
        self.term.write(approval_text(item, estimate))
        try:
            key = self.term.key("approve? [n]o / [y]es / [e] say what to change: ", "nye")
        except KeyboardInterrupt:
            step = item.step_id
            self.term.write(
                f"\n[step {step} is left pending: `jobsmith approve {step}` or "
                f"`jobsmith deny {step}`]\n"
            )
            raise
        except EOFError:
            # stdin ended (a script piped in, Ctrl-D): nobody is there to answer, as for
            # an ask; the step stays pending and the turn ends naming it (it was a
            # traceback: found by tests/test_model_turns_property_with_slurm_double.py)
            self.term.write("\n")
            return None
        if key == "y":
            return self._approve(item.step_id)
        said = self.term.line("what should change? ") if key == "e" else ""
        answers.deny(self.app, item.step_id, said or "denied in chat")
        return _told("the person did not approve it" + (f"; they said: {said}" if said else ""))

    def _approve(self, step_id: str) -> ToolOutcome:
        try:
            result = answers.approve(self.app, step_id)
        except JobsmithError as err:
            # judged afresh first (answers.approve): refused there, the step is still pending
            self.term.write(f"[not done: {err}; `jobsmith pending` lists it if it waits]\n")
            return _told(f"the person approved it, but it was not done: {err}")
        return step_outcome(result)

    def _end_line(self) -> None:
        if self._mid_line:
            self.term.write("\n")
            self._mid_line = False


def approval_text(item: PendingApproval, estimate: str | None) -> str:
    """What a person is asked to approve: why, the script, the cost, the start estimate."""
    lines = [f"\n── needs your approval: {item.reason}"]
    if item.script:
        lines += ["── the script:", *(f"   {line}" for line in item.script.splitlines())]
    if item.cost:
        cost = item.cost
        lines.append(
            f"── cost: {cost.get('tasks', 1)} task(s), {cost.get('core_hours', 0):g} core-hours, "
            f"{cost.get('gpu_hours', 0):g} GPU-hours"
        )
    lines.append(f"── estimated start: {estimate or 'unknown (Slurm gave no estimate)'}")
    return "\n".join(lines) + "\n"


@dataclass
class Chat:
    """One chat: the run, the terminal, and the in-process poller."""

    app: App
    term: Terminal
    session_id: str | None = None
    interval_s: float = 30.0
    run: Run | None = None
    listener: ChatListener = field(init=False)
    #: held while the person's turn runs, and while a poll runs: never both at once
    busy: threading.Lock = field(default_factory=threading.Lock)
    #: what the wakes this chat's polls made cost (other sessions' and its own): they
    #: are this chat's model calls too, though no line of the person's asked for them
    wakes: TokenTotals = field(default_factory=TokenTotals)
    #: the sessions those wakes were in
    woken_sessions: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.listener = ChatListener(self.app, self.term)

    def start(self) -> None:
        """Check the key (one paragraph and exit 2 without one), open --session's run."""
        self.app.conversation.require_key("chat")
        if self.session_id is not None:
            self.run = self._open(self.session_id)
        else:  # the SDK loads while the person types, not after their first Enter
            threading.Thread(target=_import_sdk, name="sdk-import", daemon=True).start()

    def loop(self) -> None:
        """Lines until the person leaves (or SIGTERM: agent/watcher/stopping.py, kept
        while a tool runs); the poller runs meanwhile."""
        poller = _Poller(self)
        interrupted_at_prompt = False
        stop = StopSignals(hold_while=lambda: self.listener.in_tool)
        self.listener.stop = stop
        with contextlib.suppress(Stop), stop, poller:
            # the banner once SIGTERM is handled: whoever sees it may stop the chat cleanly
            self.term.write(f"jobsmith chat. {HELP}\n")
            while True:
                try:
                    text = self.term.line(PROMPT).strip()
                except KeyboardInterrupt:
                    if interrupted_at_prompt:
                        break
                    interrupted_at_prompt = True
                    self.term.write("(Ctrl-C again, Ctrl-D or /exit to leave)\n")
                    continue
                except EOFError:
                    break
                interrupted_at_prompt = False
                if text in ("/exit", "/quit"):
                    break
                if text:
                    self.turn(text)

    def turn(self, text: str) -> None:
        """One line of the person's: a command, or a turn of the model's."""
        if text == "/cost":
            self.term.write(self.cost_line() + "\n")
            return
        if text == "/help":
            self.term.write(HELP + "\n")
            return
        with self.busy, _ToolsFinish(self.listener):
            try:
                run = self.run or self._open(None, text)
                self.run = run
                if run.last_input_tokens > self.app.site.config.model.chat_context_tokens:
                    run.forget()  # the log is the memory: compact by starting from it
                run.say(text)
                self.listener._end_line()
            except Interrupted:  # the streamed answer was cut: the messages say so
                self.listener._end_line()
                self.term.write("[interrupted]\n")
            except KeyboardInterrupt:
                # cut elsewhere (waiting for the model, between steps): the messages may
                # end half-way through a turn, so the next one starts from the log
                if self.run is not None:
                    self.run.forget()
                self.listener._end_line()
                self.term.write("[interrupted]\n")
            except (AskFailed, JobsmithError) as err:
                self.listener._end_line()
                self.term.write(f"jobsmith: {err}\n")

    def cost_line(self) -> str:
        """What the chat's model calls cost, in tokens: its own turns, then the wakes its
        polls made (an opening chat once woke 11 older sessions, uncounted)."""
        if self.run is None:
            said = "this chat made no model call"
        else:
            said = f"this chat: {self.run.totals.in_words()}; session {self.run.session_id}"
        if self.wakes.calls:
            sessions = ", ".join(sorted(self.woken_sessions))
            said += f"; the wakes its polls made: {self.wakes.in_words()} (session {sessions})"
        return said

    def summary(self) -> dict[str, object]:
        """`chat --json`'s document: the session and what the chat's calls cost (usage:
        its own turns; wakes: the wakes its polls made, in any session)."""
        run = self.run
        return {
            "session_id": None if run is None else run.session_id,
            "usage": (TokenTotals() if run is None else run.totals).model_dump(),
            "wakes": {**self.wakes.model_dump(), "sessions": sorted(self.woken_sessions)},
        }

    def _open(self, session_id: str | None, first_line: str = "") -> Run:
        conversation = self.app.conversation
        return conversation.open("chat", first_line, session_id, self.listener)

    def show_cycle(self, cycle: WatchCycle) -> None:
        """What a poll saw, above the prompt; its wakes counted into /cost."""
        for change in cycle.changes:
            if change.state.is_terminal:
                self.term.write(f"\n[job {change.job_id} {change.state.value}]\n")
        for woken in cycle.woken:
            if woken.usage.calls:
                self.wakes.plus(woken.usage)
                self.woken_sessions.add(woken.session_id)
            own = self.run is not None and woken.session_id == self.run.session_id
            where = "" if own else f" (session {woken.session_id})"
            self.term.write(f"\n[the model went on{where}: {woken.outcome}] {woken.detail}\n")


class _ToolsFinish:
    """A Ctrl-C while a tool runs waits for its step to be recorded (see the listener)."""

    def __init__(self, listener: ChatListener) -> None:
        self._listener = listener
        self._previous: Any = None

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self._listener.in_tool:
            self._listener.stop_requested = True
            return
        raise KeyboardInterrupt


class _Poller:
    """The chat as the user's watcher while no other one runs (module docstring): a
    Watcher (agent/watcher/watcher.py) polling between the person's turns."""

    def __init__(self, chat: Chat) -> None:
        self._chat = chat
        self._watcher = Watcher.of(chat.app, chat.interval_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="chat-poller", daemon=True)

    def __enter__(self) -> _Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with self._chat.busy:  # a poll in progress finishes first
            self._watcher.release()

    def _loop(self) -> None:
        while not self._stop.wait(self._chat.interval_s):
            with self._chat.busy:
                if self._stop.is_set():
                    return
                self._poll_once()

    def _poll_once(self) -> None:
        try:
            # None: a watcher runs: it polls, and wakes this chat's brain too
            cycle = self._watcher.cycle_if_free()
            if cycle is not None:
                self._chat.show_cycle(cycle)
        except JobsmithError as err:
            self._chat.term.write(f"\n[poll: {err}]\n")


def _import_sdk() -> None:
    import anthropic  # noqa: F401  (imported for its side effect: loaded once, ahead of use)


def _verdict(outcome: ToolOutcome) -> str:
    """'→ done', '→ submitted job 123', '→ refused: …' for a call's line."""
    step = outcome.step
    if step is not None and step.summary.get("submitted"):
        return f"→ submitted job {step.summary.get('job_id')}"
    if outcome.is_error:
        said = outcome.content.removeprefix("<tool_data>\n").removesuffix("\n</tool_data>")
        return f"→ not done: {said[:200]}"
    return f"→ {step.outcome.value if step is not None else 'done'}"


def _told(message: str) -> ToolOutcome:
    """An answer from the person (or from jobsmith), as the held call's outcome."""
    return ToolOutcome(content=as_data({"result": message}), is_error=True, step=None)
