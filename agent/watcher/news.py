"""What happened since the user last looked: a small append-only news file and a cursor.

Pollers (status, wait, the watcher) and the executor append one JSON line per event worth
telling (a job ended, a step waits for approval). The next interactive command prints one
line summarising the lines after the user's cursor and moves the cursor: reading is
O(new lines), so it never slows a command, and it never appears in --json output.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path


class News:
    """The news file and its read cursor in the user's state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "news.jsonl"
        self.cursor = state_dir / "news.seen"

    def add(self, kind: str, **fields: object) -> None:
        """Append one item (a single write of one line: appends from several processes
        on one host do not interleave)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"kind": kind, **fields}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def take(self, still_pending: Callable[[set[str]], set[str]] | None = None) -> str | None:
        """One line about everything added since the last take (None if nothing).

        still_pending, given the step ids whose approval was asked, returns those still
        waiting: a step approved or denied since it was asked is not news any more.
        """
        try:
            size = self.path.stat().st_size
            seen = int(self.cursor.read_text() or 0) if self.cursor.exists() else 0
        except (OSError, ValueError):
            return None
        if size <= seen:
            return None
        with self.path.open("rb") as fh:
            fh.seek(seen)
            items = [json.loads(line) for line in fh.read().splitlines() if line.strip()]
        self.cursor.write_text(str(size))
        asked = {str(i.get("step_id")) for i in items if i.get("kind") == "approval_asked"}
        if asked and still_pending is not None:
            waiting = still_pending(asked)
            items = [
                i for i in items if i.get("kind") != "approval_asked" or i.get("step_id") in waiting
            ]
        return summarise(items)


def summarise(items: list[dict[str, object]]) -> str | None:
    """'since you last looked: 3 jobs completed (12, 13, 14), 1 failed (15); 1 step awaits
    approval (jobsmith pending); the model went on in 1 conversation'."""
    ended: Counter[str] = Counter()
    ids: dict[str, list[str]] = {}
    approvals = 0
    brains: Counter[str] = Counter()
    budgets: list[str] = []
    gave_up: list[str] = []
    for item in items:
        if item.get("kind") == "job_ended":
            state = str(item.get("state", "?")).lower()
            ended[state] += 1
            ids.setdefault(state, []).append(str(item.get("job_id")))
        elif item.get("kind") == "approval_asked":
            approvals += 1
        elif item.get("kind") in ("brain_waiting", "brain_answered"):
            brains[str(item["kind"])] += 1
        elif item.get("kind") == "brain_gave_up":
            gave_up.append(str(item.get("session_id")))
        elif item.get("kind") == "pipeline_budget":
            budgets.append(_budget_news(item))
        elif item.get("kind") == "job_altered":
            budgets.append(_altered_news(item))
    parts = [
        f"{n} {'job' if n == 1 else 'jobs'} {state} ({', '.join(ids[state][:5])})"
        for state, n in sorted(ended.items())
    ]
    if approvals:
        parts.append(f"{approvals} step(s) await approval (jobsmith pending)")
    if brains["brain_answered"]:
        parts.append(f"the model went on in {_conversations(brains['brain_answered'])}")
    if brains["brain_waiting"]:
        n = brains["brain_waiting"]
        waits = "waits" if n == 1 else "wait"
        parts.append(f"{_conversations(n)} {waits} for a model key (jobsmith chat --session ID)")
    if gave_up:
        first = gave_up[0]
        parts.append(
            f"the model could not be asked in {_conversations(len(gave_up))} after every retry "
            f"(jobsmith sessions show {first})"
        )
    parts += budgets
    return "since you last looked: " + "; ".join(parts) if parts else None


def _budget_news(item: dict[str, object]) -> str:
    what = f"pipeline {item.get('session_id')}: {item.get('budget')} {item.get('used')}"
    what += f" of {item.get('limit')}"
    if item.get("level") != "reached":
        return what + " (near the budget)"
    done = "its head job cancelled" if item.get("action") == "cancel" else "pending tasks held"
    return f"{what}, budget reached: {done} (jobsmith pipeline status)"


def _altered_news(item: dict[str, object]) -> str:
    changes = item.get("altered")
    what = "; ".join(map(str, changes)) if isinstance(changes, list) else "?"
    done = {"hold": "held", "cancel": "cancelled"}.get(str(item.get("action")), "it had ended")
    return (
        f"Slurm changed job {item.get('job_id')} after jobsmith checked it ({what}): {done}"
        " (declare a site plugin's changes in scheduler.adjusts)"
    )


def _conversations(n: int) -> str:
    return f"{n} conversation" + ("" if n == 1 else "s")
