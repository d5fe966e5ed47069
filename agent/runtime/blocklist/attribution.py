"""Which failures were a node's doing, read from accounting's records alone (pure).

Two kinds, as Slurm users tell them apart:

- Slurm says so: a task that ended NODE_FAIL (its node stopped answering) or BOOT_FAIL
  (its node could not be started for it). The record's NodeList names the node. A job
  that ran on several nodes and ended NODE_FAIL is not attributed: accounting does not
  say which of its nodes failed, and blocking all of them would keep healthy ones out.
- The same non-zero exit on one node while the same work succeeds elsewhere: tasks of
  one template (an array, or the template's other jobs seen in the same poll) that
  FAILED with one exit code on node X, where no task of that work failed with that code
  on another node and at least one completed on another node. A script that is wrong
  fails everywhere; one that fails only on X, the same way, points at X (a missing
  module, a full local disk, a bad GPU).

Out of memory, time limits, cancellations and preemptions are never a node's: they say
something about the job or the queue. Each failure carries the key of the run it comes
from (job id, node, when it started), so seeing it again in a later poll counts it once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.states import JobState

#: Slurm's own word that the node failed under the task
_NODE_STATES = frozenset({JobState.NODE_FAIL, JobState.BOOT_FAIL})


class NodeFailure(BaseModel):
    """One task's failure, attributed to one node."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node: str = Field(description="the node it is attributed to")
    job_id: str = Field(description="the task as Slurm displays it: '331' or '333_2'")
    job_id_raw: str = Field(description="the numeric id of the job or task")
    kind: Literal["node_fail", "same_exit"] = Field(
        description="node_fail: Slurm said the node failed (NODE_FAIL, BOOT_FAIL); "
        "same_exit: the same non-zero exit only on this node, while the work completed "
        "on others"
    )
    why: str = Field(description="one line, as the blocklist shows it")
    at: datetime = Field(description="when it failed (its end, else when it was seen)")
    run: str = Field(description="when that run started ('' if unknown): a requeued task's runs")

    @property
    def key(self) -> str:
        """One run of one task on one node: the same failure seen twice counts once."""
        return f"{self.job_id_raw}@{self.node}@{self.run}"


def node_failures(records: Iterable[JobRecord], seen_at: datetime) -> list[NodeFailure]:
    """The records that ended NODE_FAIL or BOOT_FAIL on exactly one node."""
    out = []
    for rec in records:
        if rec.state not in _NODE_STATES:
            continue  # most records: nothing to expand
        nodes = rec.nodes
        if len(nodes) == 1 and not rec.stand_in:
            why = f"{rec.state.value} of {rec.job_id}"
            out.append(_failure(rec, nodes[0], "node_fail", why, seen_at))
    return out


def same_exit_failures(
    work: Mapping[str, Sequence[JobRecord]], seen_at: datetime
) -> list[NodeFailure]:
    """For each piece of work (a template's records, by its name): the tasks that failed
    with one exit code on one node, where the same code is seen on no other node and some
    task completed on another node (module docstring)."""
    out = []
    for name, records in work.items():
        if not any(r.state is JobState.FAILED for r in records):
            continue  # most work, most cycles: nothing failed
        done_on: set[str] = set()
        failed: dict[tuple[str, int], list[JobRecord]] = defaultdict(list)
        for rec in records:
            nodes = rec.nodes
            if len(nodes) != 1 or rec.stand_in:
                continue
            if rec.state is JobState.COMPLETED:
                done_on.add(nodes[0])
            elif rec.state is JobState.FAILED and rec.exit_code:
                failed[(nodes[0], rec.exit_code)].append(rec)
        for (node, code), recs in failed.items():
            elsewhere = any(n != node and c == code for (n, c) in failed)
            if elsewhere or not done_on - {node}:
                continue
            others = ", ".join(sorted(done_on - {node}))
            for rec in recs:
                why = f"{rec.job_id} ({name}) exited {code} here, completed on {others}"
                out.append(_failure(rec, node, "same_exit", why, seen_at))
    return out


def _failure(
    rec: JobRecord,
    node: str,
    kind: Literal["node_fail", "same_exit"],
    why: str,
    seen_at: datetime,
) -> NodeFailure:
    return NodeFailure(
        node=node,
        job_id=rec.job_id,
        job_id_raw=rec.job_id_raw,
        kind=kind,
        why=why,
        at=aware(rec.end_time or seen_at),
        run=aware(rec.start_time).isoformat() if rec.start_time else "",
    )


def aware(at: datetime) -> datetime:
    """A naive time (sacct -P prints local time without a zone) as local time."""
    return at if at.tzinfo is not None else at.astimezone()
