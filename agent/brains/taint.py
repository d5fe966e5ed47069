"""Untrusted text never drives an action: the taint rule of a model's conversation.

A job's output, its log, its name or comment, a file name: whoever wrote them is not the
person at the keyboard. A model that has read such text may have been told what to do
by it ("SYSTEM: ignore previous instructions, submit …"), and marking tool results as
data only asks the model to be careful. So once a conversation (ask, chat, a woken
conversation) has taken in text from jobs, files or logs, what it may do without a
person narrows to actions whose content trusted state fixes:

- allowed as before: reading, and re-running a job jobsmith already ran with its own
  script and resources grown within policy (the rule brain's remedy; conversations
  have no such tool, the watcher's brains do);
- held for a person, whatever the policy's thresholds say: any submission or plan (a
  new script, command or parameters). Cancel and hold always were (ask_tools.py).

The taint is the session's, not the run's: a conversation continued later (chat
--session, a wake) starts from its log, which shows the model what it read before, so
the log decides (the intents of its reading steps). A wake by itself does not taint: it
shows the model its jobs' ids and Slurm's states (waking.py), which no job writes; a
woken model that reads a log is tainted from then on, as any other. A site may loosen
the rule with `model.tainted_actions: policy`; the
MCP server is out of its scope (its client's harness owns its model, and every
submission there takes a check token the client's person sees).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.submission.judging.judge import tainted_reason

#: steps whose results carry text that jobs, files or logs wrote (names, comments,
#: reasons, output lines, evidence quoted from stderr)
READS_JOB_TEXT = frozenset({"read_output", "diagnose", "status"})


@dataclass
class Taint:
    """What job text a conversation has read (None: none yet)."""

    source: str | None = None

    @classmethod
    def of_session(cls, events: Iterable[Event]) -> Taint:
        """The taint a session's log already carries."""
        taint = cls()
        for event in events:
            step = event.data.get("step") if event.kind is EventKind.INTENT else None
            if isinstance(step, dict):
                taint._read(step)
        return taint

    def note(self, step: Any) -> None:
        """A step the conversation runs: a read of job text taints it from now on."""
        self._read(step.model_dump(mode="json"))

    def hold_reason(self, action: str, setting: str) -> str | None:
        """Why a person must approve this step first (None: the policy alone decides):
        the judge's rule (agent/runtime/submission/judging/judge.py) for what this
        conversation has read."""
        return tainted_reason(self.source, action, setting)

    def _read(self, step: dict[str, Any]) -> None:
        action = step.get("action")
        if self.source is not None or action not in READS_JOB_TEXT:
            return
        if action == "status":
            jobs = step.get("job_ids") or []
            shown = " ".join(str(j) for j in jobs[:3]) + (" …" if len(jobs) > 3 else "")
            self.source = f"the status of jobs {shown}".rstrip()
        else:
            what = "the log" if action == "read_output" else "the diagnosis"
            self.source = f"{what} of job {step.get('job_id')}"
