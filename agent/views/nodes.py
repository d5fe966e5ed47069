"""`jobsmith nodes`: the user's node blocklist as text or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobsmith.agent.views.output import print_document, print_table
from jobsmith.units import format_duration

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jobsmith.agent.runtime.blocklist.store import BlockedNode, BlocklistDocument


def blocklist_line(entries: Sequence[BlockedNode]) -> str | None:
    """One line naming the nodes on the blocklist, for `status` (None if there are none)."""
    if not entries:
        return None
    nodes = ", ".join(
        f"{b.node} ({len(b.failures)} failures, until {b.expires.astimezone():%H:%M})"
        for b in entries
    )
    return f"left out of your jobs (your node blocklist): {nodes}; `jobsmith nodes` says why"


def report_notes(
    entries: Sequence[BlockedNode], job_ids: Sequence[str], kept_off: Sequence[str]
) -> list[str]:
    """What the blocklist did to a session's work, for its report: the blocked nodes its
    tasks failed on, and the requeued tasks kept off them (kept_off: one line each)."""
    mine = set(job_ids)
    notes = []
    for b in entries:
        failed = [f for f in b.failures if f.job_id.partition("_")[0] in mine]
        if failed:
            why = "; ".join(f.why for f in failed[:4])
            notes.append(
                f"node {b.node} is on your blocklist until {b.expires.astimezone():%Y-%m-%d %H:%M}"
                f" after this session's tasks failed there ({why}): later jobs exclude it"
            )
    return notes + list(kept_off)


def show_blocklist(doc: BlocklistDocument, as_json: bool) -> None:
    """Print the blocklist: one row a node, with why, since when and until when."""
    if as_json:
        print_document(doc)
        return
    for node in doc.cleared:
        print(f"cleared: {node} is no longer left out of your jobs")
    if doc.settings is None:
        print(f"cluster {doc.cluster}: the site turns the node blocklist off")
        return
    rows = [
        [
            b.node,
            f"{b.since.astimezone():%Y-%m-%d %H:%M}",
            f"{b.expires.astimezone():%Y-%m-%d %H:%M}",
            "; ".join(f.why for f in b.failures[-3:]),
        ]
        for b in doc.nodes
    ]
    s = doc.settings
    rule = (
        f"a node goes on it after {s.failures} failures of your tasks that were the node's "
        f"doing within {format_duration(s.window)}, for {format_duration(s.expires_after)}"
    )
    if not rows:
        print(f"cluster {doc.cluster}: no node is on your blocklist ({rule})")
        return
    print_table(
        f"Nodes left out of your jobs on {doc.cluster}", ["NODE", "SINCE", "UNTIL", "WHY"], rows
    )
    print(f"{rule}; `jobsmith nodes clear NODE` takes one off")
