"""What Slurm accepted, against what was checked.

sbatch is not the last word on a job: a job_submit or cli_filter plugin, a site's
defaults or a user's own Slurm configuration can move a checked job to another
partition, charge another account or QoS, grow its time limit, memory, GPUs or array, or
make it wait for other jobs after policy judged it and a person approved its hash. So
the first poll that reads a job's own record (never a stand-in row) compares what Slurm
recorded with the options the ledger kept, at no extra controller call: the poll reads
the record anyway (agent/watcher/polling.py acts on what this module finds).

Where each field comes from, and what cannot be compared:
- partition, account, QoS, time limit, memory: accounting's record of the job (for an
  array, of its first task);
- GPUs: the record's ReqTRES (`gres/gpu=N`, `gres/gpu:TYPE=N`), counted per node. A site
  that does not account gres/gpu (AccountingStorageTRES) records none: then GPUs taken
  away cannot be told from GPUs not accounted, and only GPUs recorded are compared;
- the array: the indices and throttle of all its task records. Asked indices missing
  count only where both accounting and the controller answered in the same poll
  (JobStatus.accounted and in_queue): the controller forgets ended tasks (MinJobAge),
  and accounting can miss a task for a moment just after it started or ended, so either
  alone can show a gap Slurm never made. A compare from a poll without the controller
  (the array ended long ago) does not look for missing indices. Indices never asked
  always count;
- dependencies: accounting keeps none (sacct has no dependency field), only the
  controller shows them (squeue's %E), and only those still unsatisfied. They are
  compared where the same poll asked the controller about the job (JobStatus.in_queue:
  every poll of a job still queued does): a dependency shown that was not asked, of
  another kind or any-of ('?') is a change. One taken away cannot be told from one
  satisfied, so that is not compared.

A site whose plugins change jobs on purpose names what they change in its site file
(`scheduler.adjusts`); those fields are not compared. Only what was asked is compared:
a job that named no account is charged the user's default, and that is no change. GPUs
are the exception: no GPUs asked is zero GPUs, which policy judged.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence

from jobsmith.adapters.options import Dependency, JobOptions
from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.site_config.model import Compared
from jobsmith.units import format_time_limit

_MIB = 1 << 20


def altered(options: JobOptions, status: JobStatus, adjusts: Collection[str] = ()) -> list[str]:
    """What Slurm recorded of the job that differs from the checked options, in words
    ("partition debug -> long"); empty when it runs as checked. adjusts: the fields the
    site's `scheduler.adjusts` names, not compared. A field Slurm's record leaves blank
    (accounting not written yet) is not a difference."""
    found: list[str] = []
    own = status.record or next(iter(status.tasks), None)
    if own is not None:
        found += _record_changes(options, own, adjusts)
    if Compared.ARRAY not in adjusts:
        found += _array_changes(options, status)
    if Compared.DEPENDENCY not in adjusts and status.in_queue and status.dependency:
        found += _dependency_changes(options.dependencies, status.dependency)
    return found


def _record_changes(options: JobOptions, record: JobRecord, adjusts: Collection[str]) -> list[str]:
    found: list[str] = []
    asked, got = options.partition, record.partition
    # a pending job asked for several partitions shows them all; a started one, its own
    moved = asked and got and set(got.split(",")) - set(asked.split(","))
    if Compared.PARTITION not in adjusts and moved:
        found.append(f"partition {asked} -> {got}")
    asked, got = options.account, record.account
    # Slurm keeps account and QoS names in lower case
    if Compared.ACCOUNT not in adjusts and asked and got and got.lower() != asked.lower():
        found.append(f"account {asked} -> {got}")
    asked, got = options.qos, record.qos
    if Compared.QOS not in adjusts and asked and got and got.lower() != asked.lower():
        found.append(f"QoS {asked} -> {got}")
    asked_s, got_s = options.time_limit_s, record.timelimit_s
    if Compared.TIME not in adjusts and asked_s and got_s is not None and got_s != asked_s:
        found.append(f"time limit {format_time_limit(asked_s)} -> {format_time_limit(got_s)}")
    if Compared.MEM not in adjusts:
        found += _memory_changes(options, record)
    if Compared.GRES not in adjusts and record.req_tres:
        found += _gpu_changes(options, record.req_tres)
    return found


# --- GPUs ---------------------------------------------------------------------------------


def _memory_changes(options: JobOptions, record: JobRecord) -> list[str]:
    """Memory per node (--mem) against the record's ReqMem, which is the whole job's: per
    node times its nodes (a pending 2-node job asked --mem=2000M reads 4000M on the lab's
    22.05 and 24.11). The node count is ReqTRES's, else what was asked; a record that
    shows the per-node figure itself (older accounting, one node) is no change either."""
    asked = options.mem_mb
    if not asked or not record.req_mem_bytes:
        return []
    got = record.req_mem_bytes // _MIB
    nodes = _tres_nodes(_tres(record.req_tres or "")) or options.nodes or 1
    if got in (asked, asked * nodes):
        return []
    if nodes > 1 and got % nodes == 0:
        return [f"memory {asked}M -> {got // nodes}M per node"]
    return [f"memory {asked}M -> {got}M" + (f" over {nodes} nodes" if nodes > 1 else "")]


def _tres(req_tres: str) -> dict[str, str]:
    return dict(item.partition("=")[::2] for item in req_tres.split(",") if "=" in item)


def _tres_nodes(tres: dict[str, str]) -> int | None:
    text = tres.get("node", "")
    return int(text) if text.isdigit() and int(text) > 0 else None


def _gpu_changes(options: JobOptions, req_tres: str) -> list[str]:
    """GPUs per node and their type, from ReqTRES ('gres/gpu:a100=2,gres/gpu=2,node=1')."""
    tres = _tres(req_tres)
    total = tres.get("gres/gpu")
    if total is None or not total.isdigit():
        return []  # gres/gpu not accounted at this site: nothing to compare
    nodes = _tres_nodes(tres) or 1
    asked = options.gpus or 0
    got = int(total)
    if got != asked * nodes:
        per_node = str(got // nodes) if got % nodes == 0 else f"{got} over {nodes} nodes"
        return [f"GPUs {asked or 'none'} -> {per_node}"]
    types = {kind.partition(":")[2] for kind in tres if kind.startswith("gres/gpu:")}
    if options.gpu_type and types and options.gpu_type not in types:
        return [f"GPU type {options.gpu_type} -> {','.join(sorted(types))}"]
    return []


# --- arrays ---------------------------------------------------------------------------------

#: a set of indices as sorted, merged, inclusive spans: ((0, 3), (7, 7))
_Spans = tuple[tuple[int, int], ...]


def _array_changes(options: JobOptions, status: JobStatus) -> list[str]:
    """The array's indices and throttle as its task records show them, against the spec
    (a poll of one task by its own id, '7_3', says nothing of the whole array)."""
    if "_" in status.job_id:
        return []
    in_array = [t for t in status.tasks if t.array_job_id is not None]
    if status.record is not None and status.record.array_job_id is not None:
        in_array.append(status.record)
    asked = _spans(_spec_spans(options.array)) if options.array else ()
    if not in_array:
        # a record that is no array at all (a lone record without array ids)
        if options.array and status.record is not None:
            return [f"array {options.array} -> none"]
        return []
    got = _spans(span for t in in_array for span in _task_spans(t))
    found: list[str] = []
    extra = _minus(got, asked)
    missing = _minus(asked, got) if status.accounted and status.in_queue else ()
    if extra or missing:
        found.append(f"array {options.array or 'none'} -> {_text(got)}")
    throttles = {t.array_task_range.partition("%")[2] for t in in_array if t.array_task_range}
    throttles.discard("")
    if options.array_throttle is not None and throttles - {str(options.array_throttle)}:
        shown = ",".join(f"%{t}" for t in sorted(throttles))
        found.append(f"array throttle %{options.array_throttle} -> {shown}")
    return found


def _spec_spans(spec: str) -> Iterable[tuple[int, int]]:
    """Spans of an --array spec or a printed range: '0-9', '1,3,7', '0-20:5', '2-5%2'."""
    for part in spec.partition("%")[0].split(","):
        span, _, step = part.strip().partition(":")
        first, _, last = span.partition("-")
        start, stop = int(first), int(last or first)
        if not step or int(step) == 1:
            yield start, stop
        else:
            yield from ((i, i) for i in range(start, stop + 1, int(step)))


def _task_spans(task: JobRecord) -> Iterable[tuple[int, int]]:
    if task.array_task_range:
        yield from _spec_spans(task.array_task_range)
    elif task.array_task_id is not None:
        yield task.array_task_id, task.array_task_id


def _spans(spans: Iterable[tuple[int, int]]) -> _Spans:
    merged: list[list[int]] = []
    for start, stop in sorted(spans):
        if merged and start <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return tuple((a, b) for a, b in merged)


def _minus(these: _Spans, those: _Spans) -> _Spans:
    """The indices of `these` that are not in `those`."""
    left: list[tuple[int, int]] = []
    for start, stop in these:
        for other_start, other_stop in those:
            if other_stop < start or other_start > stop:
                continue
            if other_start > start:
                left.append((start, other_start - 1))
            start = other_stop + 1
            if start > stop:
                break
        if start <= stop:
            left.append((start, stop))
    return tuple(left)


def _text(spans: _Spans) -> str:
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


# --- dependencies ---------------------------------------------------------------------------

#: one dependency as the controller prints it: 'afterok:5(unfulfilled)', 'afterok:6_*(failed)',
#: 'singleton(unfulfilled)'; the parts are joined by ',' (all must hold) or '?' (any)
_SHOWN = re.compile(r"(?P<kind>[a-z_]+)(?::(?P<ids>[^()]*))?(?:\([^)]*\))?")


def _dependency_changes(asked: Sequence[Dependency], shown: str) -> list[str]:
    """A dependency the controller still shows that was not asked (another job, another
    kind, or the any-of form) is a change; the asked ones it no longer shows may have been
    satisfied, so their absence is not."""
    pairs = {(d.kind.value, job_id) for d in asked for job_id in d.job_ids}
    asked_text = ",".join(f"{d.kind.value}:{':'.join(d.job_ids)}" for d in asked) or "none"
    change = [f"dependency {asked_text} -> {shown}"]
    if "?" in shown and len(pairs) > 1:
        return change
    for part in re.split(r"[,?]", shown):
        match = _SHOWN.fullmatch(part.strip())
        if match is None:
            return change
        ids = [i.removesuffix("_*") for i in (match["ids"] or "").split(":") if i]
        if not ids or any((match["kind"], i) not in pairs for i in ids):
            return change
    return []
