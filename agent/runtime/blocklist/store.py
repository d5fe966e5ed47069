"""The user's blocklist of one cluster: an append-only file of what was seen, folded into
the nodes left out now.

Several processes write it (the watcher cycles, `jobsmith nodes clear`, on one login
node or several sharing a home on NFS; submissions and `status` only read it), so
nothing is ever rewritten: each fact is one line appended with one write(2) (O_APPEND:
lines from several writers do not interleave, as the news file does it,
agent/watcher/news.py), and the blocklist is
computed from all of them each time it is read. A failure seen twice (two polls, two
processes) is one line twice with the same key and counts once. The lines, by their
`fact`:

- `failure`: a NodeFailure (attribution.py): a node, a task, why, when;
- `cleared`: a person took one node (or, without one, every node) off: failures before
  it no longer count;
- `looked`: a requeued run whose earlier runs were read from accounting (so a later poll
  does not ask again);
- `excluded`: the nodes set on a requeued, pending job (ExcNodeList), so it is set once.

A node is on the blocklist from the moment `failures` of its failures fall within one
`window` (policy.blocklist, site_config/model.py) after its last clearing, until
`expires_after` past the newest failure that completes such a count. Facts older than
every horizon are ignored when read; the file grows by a line per failure or requeue.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobsmith.agent.runtime.blocklist.attribution import NodeFailure, aware
from jobsmith.site_config.model import Blocklist


class BlockedNode(BaseModel):
    """A node on the user's blocklist, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node: str = Field(description="the node left out of the user's jobs")
    since: datetime = Field(description="when its failures reached the threshold")
    expires: datetime = Field(description="when it comes off by itself")
    failures: tuple[NodeFailure, ...] = Field(description="the failures counted, oldest first")


def _now() -> datetime:
    return datetime.now(UTC)


class NodeBlocklist:
    """The blocklist file of one user and cluster (module docstring); settings None: off
    (failures are neither kept nor counted, nothing is excluded)."""

    def __init__(
        self, path: Path, settings: Blocklist | None, clock: Callable[[], datetime] = _now
    ) -> None:
        self.path = path
        self.settings = settings
        self._clock = clock
        #: the file's lines as last read, and its (size, mtime) then: a cycle reads it once
        self._read: tuple[tuple[int, int], list[dict[str, Any]]] | None = None
        self._parsed: tuple[list[dict[str, Any]], list[NodeFailure]] | None = None

    @property
    def on(self) -> bool:
        """Whether the site's policy keeps a blocklist at all."""
        return self.settings is not None

    # --- writing ------------------------------------------------------------------

    def note(self, failures: Iterable[NodeFailure]) -> list[NodeFailure]:
        """Record the failures not recorded yet; returns those (none while off)."""
        if self.settings is None:
            return []
        known = {f.key for f in self._failures(self._lines())}
        new: dict[str, NodeFailure] = {}
        for failure in failures:
            if failure.key not in known:
                new.setdefault(failure.key, failure)
        for failure in new.values():
            self._append({**failure.model_dump(mode="json"), "fact": "failure"})
        return list(new.values())

    def clear(self, node: str | None = None) -> list[str]:
        """Take node (None: every node) off now; returns the nodes that were on."""
        was = [b.node for b in self.entries() if node is None or b.node == node]
        self._append({"fact": "cleared", "node": node, "at": self._clock().isoformat()})
        return was

    def note_looked(self, runs: Mapping[str, bool]) -> None:
        """Remember requeued runs whose history was read: by key, whether an earlier run
        of theirs ended in a node failure."""
        for key, node_failed in runs.items():
            self._append({"fact": "looked", "key": key, "node_failed": node_failed})

    def looked_up(self) -> dict[str, bool]:
        """The requeued runs whose history was read already (note_looked)."""
        return {
            str(line["key"]): bool(line.get("node_failed"))
            for line in self._lines()
            if line.get("fact") == "looked"
        }

    def note_excluded(self, job_key: str, nodes: Iterable[str]) -> None:
        """Remember the nodes set on a pending job's ExcNodeList."""
        self._append({"fact": "excluded", "key": job_key, "nodes": sorted(nodes)})

    def excluded(self) -> dict[str, set[str]]:
        """Per pending job (its key): the nodes set on it so far."""
        out: dict[str, set[str]] = defaultdict(set)
        for line in self._lines():
            if line.get("fact") == "excluded":
                out[str(line["key"])].update(str(n) for n in line.get("nodes", []))
        return dict(out)

    # --- reading ------------------------------------------------------------------

    def entries(self) -> list[BlockedNode]:
        """The nodes on the blocklist now, by node name."""
        settings = self.settings
        if settings is None:
            return []
        lines = self._lines()
        cleared: dict[str | None, datetime] = {}
        for line in lines:
            if line.get("fact") == "cleared":
                at, node = _time(line.get("at")), line.get("node")
                if at is not None and (node is None or isinstance(node, str)):
                    cleared[node] = max(at, cleared.get(node, at))
        by_node: dict[str, list[NodeFailure]] = defaultdict(list)
        for failure in self._failures(lines):
            cut = max(
                (c for c in (cleared.get(None), cleared.get(failure.node)) if c is not None),
                default=None,
            )
            if cut is None or failure.at > cut:
                by_node[failure.node].append(failure)
        now = self._clock()
        out = []
        for node, failures in sorted(by_node.items()):
            entry = blocked_by(node, failures, settings)
            if entry is not None and entry.expires > now:
                out.append(entry)
        return out

    def blocked(self) -> tuple[str, ...]:
        """The names of the nodes on the blocklist now."""
        return tuple(b.node for b in self.entries())

    def _failures(self, lines: list[dict[str, Any]]) -> list[NodeFailure]:
        if self._parsed is not None and self._parsed[0] is lines:
            return self._parsed[1]  # the same read's failures, validated once
        seen: dict[str, NodeFailure] = {}
        for line in lines:
            if line.get("fact") != "failure":
                continue
            try:
                failure = NodeFailure.model_validate({k: v for k, v in line.items() if k != "fact"})
            except ValidationError:
                continue  # a line a newer jobsmith wrote, or a torn one
            seen.setdefault(failure.key, failure)
        failures = sorted(seen.values(), key=lambda f: f.at)
        self._parsed = (lines, failures)
        return failures

    def _lines(self) -> list[dict[str, Any]]:
        try:
            st = self.path.stat()
            if self._read is not None and self._read[0] == (st.st_size, st.st_mtime_ns):
                return self._read[1]  # unchanged since read: appends only ever grow it
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        out = []
        for raw in text.splitlines():
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if isinstance(line, dict):
                out.append(line)
        self._read = ((st.st_size, st.st_mtime_ns), out)
        return out

    def _append(self, line: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = (json.dumps(line, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            end = os.fstat(fd).st_size
            if end and os.pread(fd, 1, end - 1) != b"\n":  # a torn last line stays alone
                data = b"\n" + data
            os.write(fd, data)
        finally:
            os.close(fd)


def blocked_by(node: str, failures: list[NodeFailure], settings: Blocklist) -> BlockedNode | None:
    """The blocklist entry node's failures (oldest first) make, or None: the newest
    failure that has `failures - 1` others within `window` before it blocks the node
    until `expires_after` past it; the entry lists the failures of its first such count
    onwards."""
    window = timedelta(seconds=settings.window)
    first: int | None = None
    last: NodeFailure | None = None
    for i, failure in enumerate(failures):
        start = i - settings.failures + 1
        if start >= 0 and failure.at - failures[start].at <= window:
            first = start if first is None else first
            last = failure
    if first is None or last is None:
        return None
    since = failures[first + settings.failures - 1].at
    expires = last.at + timedelta(seconds=settings.expires_after)
    return BlockedNode(node=node, since=since, expires=expires, failures=tuple(failures[first:]))


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return aware(datetime.fromisoformat(value))
    except ValueError:
        return None


class BlocklistDocument(BaseModel):
    """`jobsmith nodes --json`: the user's blocklist of one cluster, and its rules."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster: str = Field(description="the site's cluster")
    on: bool = Field(description="false where the site's policy turns the blocklist off")
    settings: Blocklist | None = Field(description="policy.blocklist: threshold, window, expiry")
    nodes: tuple[BlockedNode, ...] = Field(description="the nodes left out of the user's jobs now")
    cleared: tuple[str, ...] = Field((), description="nodes `nodes clear` just took off")

    @classmethod
    def of(cls, cluster: str, blocklist: NodeBlocklist, cleared: Iterable[str] = ()) -> Self:
        """The blocklist as it stands now."""
        return cls(
            cluster=cluster,
            on=blocklist.on,
            settings=blocklist.settings,
            nodes=tuple(blocklist.entries()),
            cleared=tuple(cleared),
        )
