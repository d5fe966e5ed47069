"""Failure diagnosis: why a Slurm job ended as it did, and the next step (pure).

`diagnose()` reads what accounting says about one job or array task (a JobRecord) and the
last lines of its stderr, and returns a Diagnosis: one Verdict, the evidence that decided
it, the job's CPU and memory efficiency, one concrete remedy, whether a retry with more
resources can fix it, and the resources such a retry should ask for.

Rules are tried in a fixed order, first match wins; the order is the design:
- the dependency reason and the requeue causes come first, because they apply to jobs
  that are still (or again) pending, where nothing else is known yet;
- then what Slurm itself decided (COMPLETED, PREEMPTED, NODE_FAIL, TIMEOUT): the state
  is a fact, while log lines can be stale or misleading;
- then memory (OUT_OF_MEMORY where cgroups enforce it), before cancellation and the log
  patterns: without cgroup enforcement a memory kill is no state of its own but FAILED
  0:9 with the batch step "CANCELLED by 0", told apart only by slurmstepd's line in
  stderr or by that accounting shape;
- then the log patterns, most specific first: a CUDA OOM or a full disk explain the
  errors after them; an unknown module explains the "command not found" that follows
  it; exit 127 (the shell's "not found") wins over a "No such file" for the same path;
- then any non-zero exit, then unknown.

Nothing here runs a command or reads a file: the caller passes the log lines, notes on
what it could not read (a verdict from accounting alone should say so), and the
partition's limits if it wants suggestions capped by them.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.records import JobRecord, StepRecord
from jobsmith.adapters.states import JobState

_MIB = 1024**2
#: suggested memory is a whole multiple of this, so retries ask for round numbers
_MEM_STEP_MB = 100
#: a quoted log line is cut here: a line can be megabytes long (a job that piped
#: /dev/zero to its stdout put 400 MB of NUL bytes before slurmstepd's message)
_QUOTE_MAX = 200
#: below this CPU efficiency a timed-out job was probably waiting, not computing
_IDLE_CPU = 0.05


class Verdict(StrEnum):
    """What happened to a job, in the terms a user or a rule acts on."""

    COMPLETED = "completed"
    OUT_OF_MEMORY = "out_of_memory"
    TIMEOUT = "timeout"
    NODE_FAILURE = "node_failure"
    PREEMPTED = "preempted"
    CANCELLED = "cancelled"
    NONZERO_EXIT = "nonzero_exit"
    MISSING_INPUT = "missing_input"
    COMMAND_NOT_FOUND = "command_not_found"
    MODULE_NOT_LOADED = "module_not_loaded"
    DISK_FULL = "disk_full"
    CUDA_OOM = "cuda_oom"
    DEPENDENCY_NEVER_SATISFIED = "dependency_never_satisfied"
    UNKNOWN = "unknown"


class _Model(BaseModel):
    # built when a diagnosis is first made, not by every command that imports it (issue 26)
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Efficiency(_Model):
    """How much of what it asked for the job used."""

    cpu_efficiency: float | None = Field(
        None,
        description="TotalCPU / (Elapsed x AllocCPUS), 0 to 1; None where accounting lacks "
        "one of them or the job never ran",
    )
    mem_efficiency: float | None = Field(
        None,
        description="MaxRSS / ReqMem; None where either is unknown. MaxRSS is sampled, so "
        "it can read below 1 for a job killed for memory, or above 1 before the kill",
    )


class Diagnosis(_Model):
    """The verdict on one job or array task, with its evidence and the next step."""

    job_id: str = Field(description="Slurm's id of the job or task: '123' or '123_4'")
    verdict: Verdict = Field(description="what happened")
    evidence: tuple[str, ...] = Field(
        description="short quotes of what decided it: the sacct state and exit code, the "
        "stderr line, the squeue reason"
    )
    efficiency: Efficiency = Field(description="CPU and memory used against requested")
    remedy: str = Field(description="one concrete sentence: what to do next")
    retryable: bool = Field(
        description="whether resubmitting (with the suggested resources) can fix it: true "
        "for memory, time, preemption and node failures; false for missing input, a bad "
        "command or module, a full disk, or a dependency that can never be satisfied"
    )
    suggested: dict[str, int] = Field(
        default_factory=dict,
        description="resources for the resubmission, e.g. {'mem_mb': 1200} or "
        "{'time_limit_s': 7200}; empty when the job should be resubmitted unchanged or not "
        "at all",
    )
    notes: tuple[str, ...] = Field(
        default=(),
        description="what could not be read for it (e.g. its stderr file, and why): the "
        "verdict then rests on accounting alone",
    )


def diagnose(
    record: JobRecord,
    stderr_tail: Sequence[str],
    *,
    reason: str | None = None,
    partition_max_mem_mb: int | None = None,
    partition_max_time_s: int | None = None,
    notes: Sequence[str] = (),
) -> Diagnosis:
    """Classify one job or array task from its accounting record and its stderr's tail.

    `reason` is the controller's pending reason (squeue), which accounting does not keep
    (sacct says 'Dependency' where squeue says 'DependencyNeverSatisfied'). The partition
    limits cap the suggested memory and time; a job already at a cap is not retryable.
    """
    facts = _Facts(
        record=record,
        lines=tuple(line for line in map(_clean, stderr_tail) if line),
        reason=reason or record.reason,
        max_mem_mb=partition_max_mem_mb,
        max_time_s=partition_max_time_s,
        efficiency=efficiency(record),
    )
    finding = _first_finding(facts)
    return Diagnosis(
        job_id=record.job_id,
        verdict=finding.verdict,
        evidence=finding.evidence,
        efficiency=facts.efficiency,
        remedy=finding.remedy,
        retryable=finding.retryable,
        suggested=dict(finding.suggested),
        notes=tuple(notes),
    )


def efficiency(record: JobRecord) -> Efficiency:
    """CPU and memory efficiency from accounting; None for whatever it does not know."""
    cpu = None
    if record.total_cpu_s is not None and record.elapsed_s and record.alloc_cpus:
        cpu = round(record.total_cpu_s / (record.elapsed_s * record.alloc_cpus), 4)
    mem = None
    if record.max_rss_bytes is not None and record.req_mem_bytes:
        mem = round(record.max_rss_bytes / record.req_mem_bytes, 4)
    return Efficiency(cpu_efficiency=cpu, mem_efficiency=mem)


# --- the rules ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Facts:
    """Everything a rule may look at."""

    record: JobRecord
    lines: tuple[str, ...]
    reason: str | None
    max_mem_mb: int | None
    max_time_s: int | None
    efficiency: Efficiency


@dataclass(frozen=True)
class _Finding:
    verdict: Verdict
    evidence: tuple[str, ...]
    remedy: str
    retryable: bool = False
    suggested: Mapping[str, int] = field(default_factory=dict)


_Rule = Callable[[_Facts], _Finding | None]


def _first_finding(facts: _Facts) -> _Finding:
    for rule in _RULES:
        found = rule(facts)
        if found is not None:
            return found
    return _unknown(facts)


def _dependency(facts: _Facts) -> _Finding | None:
    """A job whose dependency failed waits forever (or is cancelled by kill_invalid_depend)."""
    if facts.reason != "DependencyNeverSatisfied":
        return None
    rec = facts.record
    return _Finding(
        Verdict.DEPENDENCY_NEVER_SATISFIED,
        (f"reason {facts.reason}", _state(rec)),
        f"a job it depends on failed or was cancelled, so Slurm will never start it: cancel "
        f"it (scancel {rec.job_id}), fix and rerun the job it waits for, then resubmit it "
        f"depending on the new one",
    )


# slurmstepd's own words when it ends a job for the controller
_PREEMPTION = re.compile(r"CANCELLED AT \S+ DUE TO PREEMPTION")
_NODE_FAILURE = re.compile(r"DUE TO NODE FAIL")
_TIME_LIMIT = re.compile(r"CANCELLED AT \S+ DUE TO TIME LIMIT")
_CANCELLED_AT = re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+")


def _requeued(facts: _Facts) -> _Finding | None:
    """A job pending or running again after Slurm requeued it: its last run's log says why.

    Accounting shows only the newest run (PENDING, reason BeginTime), so the log line of
    the run that was ended is the evidence; the job needs no resubmission.
    """
    rec = facts.record
    if rec.state.is_terminal:
        return None
    preempted = _search(_PREEMPTION, facts.lines) or _matching_reason(facts.reason, "preempt")
    if preempted:
        return _Finding(
            Verdict.PREEMPTED,
            (_state(rec), preempted),
            "Slurm requeued it after a higher-priority job preempted it; it will run again "
            "by itself, so do not resubmit (have it checkpoint, and use --open-mode=append "
            "to keep each run's log)",
        )
    failed = _search(_NODE_FAILURE, facts.lines)
    if failed:
        return _Finding(
            Verdict.NODE_FAILURE,
            (_state(rec), failed),
            "Slurm requeued it after its node failed; it will run again by itself, so do "
            "not resubmit",
        )
    return None


def _not_finished(facts: _Facts) -> _Finding | None:
    rec = facts.record
    if rec.state.is_terminal:
        return None
    waiting = f", reason {facts.reason}" if facts.reason else ""
    return _Finding(
        Verdict.UNKNOWN,
        (_state(rec) + waiting,),
        f"it has not finished ({rec.state.value}): diagnose it once it has ended",
    )


def _completed(facts: _Facts) -> _Finding | None:
    rec = facts.record
    if rec.state is not JobState.COMPLETED:
        return None
    return _Finding(
        Verdict.COMPLETED, (_state(rec),), "nothing to fix" + _oversized(rec, facts.efficiency)
    )


def _oversized(rec: JobRecord, eff: Efficiency) -> str:
    """A hint to ask for less memory next time, where the job used under a quarter."""
    if eff.mem_efficiency is None or eff.mem_efficiency >= 0.25 or rec.max_rss_bytes is None:
        return ""
    enough = _round_up_mb(2 * rec.max_rss_bytes)
    return (
        f"; it used {_mb(rec.max_rss_bytes)} of {_mb(rec.req_mem_bytes)} requested, so "
        f"--mem {enough}M would do next time"
    )


def _preempted(facts: _Facts) -> _Finding | None:
    rec = facts.record
    line = _search(_PREEMPTION, facts.lines)
    if rec.state is not JobState.PREEMPTED and not (rec.state is JobState.CANCELLED and line):
        return None
    return _Finding(
        Verdict.PREEMPTED,
        _present(_state(rec), line),
        f"a higher-priority job preempted it in partition {rec.partition or '?'}: resubmit "
        f"it unchanged, with --requeue so Slurm requeues it itself next time, or to a "
        f"partition that is not preemptible",
        retryable=True,
    )


def _node_failure(facts: _Facts) -> _Finding | None:
    rec = facts.record
    if rec.state not in (JobState.NODE_FAIL, JobState.BOOT_FAIL):
        return None
    node = rec.node_list or "its node"
    return _Finding(
        Verdict.NODE_FAILURE,
        _present(_state(rec), f"nodes {rec.node_list}" if rec.node_list else None),
        f"{node} failed under it; Slurm requeues batch jobs after a node failure unless "
        f"--no-requeue was given, so check it is not pending again, then resubmit it "
        f"unchanged (with --exclude={node} while that node is down)",
        retryable=True,
    )


# jobacct_gather's kill without cgroups, and the cgroup OOM handler's report
_MEM_KILL = re.compile(
    r"exceeded memory limit \((?P<used>\d+) > (?P<limit>\d+)\)|Exceeded (?:job|step) memory "
    r"limit|oom[-_]kill event|out-of-memory handler",
    re.IGNORECASE,
)


def _out_of_memory(facts: _Facts) -> _Finding | None:
    rec = facts.record
    line = _search(_MEM_KILL, facts.lines)
    by_state = rec.state is JobState.OUT_OF_MEMORY or any(
        s.state is JobState.OUT_OF_MEMORY for s in rec.steps
    )
    if not (by_state or line or _killed_by_stepd(rec)):
        return None
    used, limit = _kill_figures(facts.lines)
    # slurmstepd's figure at the kill can exceed the last MaxRSS sample: take the larger
    peak = _max(rec.max_rss_bytes, used)
    label = "MaxRSS" if peak == rec.max_rss_bytes else "the usage at the kill"
    remedy, retryable, suggested = _more_memory(
        rec.req_mem_bytes or limit, peak, label, facts.max_mem_mb
    )
    evidence = _present(
        _state(rec),
        _batch_evidence(rec),
        line,
        f"MaxRSS {_mb(rec.max_rss_bytes)} of {_mb(rec.req_mem_bytes)} requested"
        if rec.max_rss_bytes is not None
        else None,
    )
    return _Finding(Verdict.OUT_OF_MEMORY, evidence, remedy, retryable, suggested)


def _killed_by_stepd(rec: JobRecord) -> bool:
    """FAILED by SIGKILL with the batch step 'CANCELLED by 0': slurmstepd's memory kill.

    An administrator's scancel reads CANCELLED on the job itself, and a time limit reads
    TIMEOUT, so this shape is left to the memory enforcement even without the log.
    """
    batch = _batch(rec)
    return (
        rec.state is JobState.FAILED
        and rec.signal == signal.SIGKILL
        and batch is not None
        and batch.state is JobState.CANCELLED
        and _is_root(batch.cancelled_by, batch.cancelled_by_user)
    )


def _kill_figures(lines: Sequence[str]) -> tuple[int | None, int | None]:
    """(bytes in use, limit in bytes) from slurmstepd's 'exceeded memory limit (A > B)'."""
    for line in lines:
        match = _MEM_KILL.search(line)
        if match and match["used"]:
            return int(match["used"]), int(match["limit"])
    return None, None


def _more_memory(
    req: int | None, peak: int | None, label: str, cap_mb: int | None
) -> tuple[str, bool, dict[str, int]]:
    """(remedy, retryable, suggestion) for a job killed for memory.

    MaxRSS is sampled (every JobAcctGatherFrequency seconds), so at a kill it is only a
    lower bound of what the job wanted: grow geometrically, to twice the request, or to
    1.5 x the peak seen when that is larger.
    """
    if req is None and peak is None:
        return "resubmit with more --mem (accounting has neither request nor MaxRSS)", True, {}
    new_mb = _round_up_mb(max(2 * (req or 0), 3 * (peak or 0) // 2))
    basis = _growth_basis(req, peak, label)
    if cap_mb is not None and max(req or 0, peak or 0) >= cap_mb * _MIB:
        return (
            f"it already asked for or used the partition's maximum of {cap_mb}M: reduce its "
            f"memory use or split the work, or use a partition with more memory per node",
            False,
            {},
        )
    if cap_mb is not None and new_mb > cap_mb:
        return (
            f"resubmit with --mem {cap_mb}M, the partition's maximum ({basis} would be "
            f"{new_mb}M, so it may still not be enough)",
            True,
            {"mem_mb": cap_mb},
        )
    return f"resubmit with --mem {new_mb}M ({basis})", True, {"mem_mb": new_mb}


def _growth_basis(req: int | None, peak: int | None, label: str) -> str:
    parts = [f"2 x {_mb(req)} requested"] if req else []
    if peak:
        parts.append(f"1.5 x {label} {_mb(peak)}")
    bound = f"{label} {_mb(peak)} is a lower bound at a sampled kill; " if peak else ""
    return f"{bound}max({', '.join(parts)}) rounded up to {_MEM_STEP_MB}M"


def _timeout(facts: _Facts) -> _Finding | None:
    rec = facts.record
    if rec.state not in (JobState.TIMEOUT, JobState.DEADLINE):
        return None
    evidence = _present(
        _state(rec),
        _batch_evidence(rec),
        _search(_TIME_LIMIT, facts.lines),
        f"Elapsed {_clock(rec.elapsed_s)} of a {_clock(rec.timelimit_s)} limit"
        if rec.elapsed_s is not None and rec.timelimit_s is not None
        else None,
    )
    if rec.state is JobState.DEADLINE:
        remedy = "it missed its --deadline: resubmit with a later --deadline or a shorter --time"
        return _Finding(Verdict.TIMEOUT, evidence, remedy, retryable=False)
    remedy, retryable, suggested = _more_time(rec.timelimit_s, facts.max_time_s)
    return _Finding(
        Verdict.TIMEOUT, evidence, remedy + _idle(facts.efficiency), retryable, suggested
    )


def _more_time(limit: int | None, cap: int | None) -> tuple[str, bool, dict[str, int]]:
    """(remedy, retryable, suggestion): twice the limit it hit, capped by the partition."""
    if limit is None:
        return "resubmit with a longer --time (accounting does not show its limit)", True, {}
    if cap is not None and limit >= cap:
        return (
            f"it already had the partition's maximum time ({_clock(cap)}): make it "
            f"checkpoint and restart, split the work, or use a partition with a longer limit",
            False,
            {},
        )
    new = 2 * limit if cap is None else min(2 * limit, cap)
    capped = ", the partition's maximum" if new != 2 * limit else ""
    return (
        f"resubmit with --time {_clock(new)}{capped} (2 x the {_clock(limit)} limit it hit)",
        True,
        {"time_limit_s": new},
    )


def _idle(eff: Efficiency) -> str:
    """A warning when a timed-out job hardly used its CPU: more time may not help."""
    if eff.cpu_efficiency is None or eff.cpu_efficiency >= _IDLE_CPU:
        return ""
    return (
        f"; it used only {eff.cpu_efficiency:.0%} of its CPU time, so check it was not "
        f"stuck waiting"
    )


def _cancelled(facts: _Facts) -> _Finding | None:
    rec = facts.record
    if rec.state is not JobState.CANCELLED:
        return None
    who, by_admin = _canceller(rec)
    started = "" if rec.start_time or rec.elapsed_s else " before it started"
    if by_admin:
        remedy = (
            f"cancelled by {who}{started}: ask the cluster's administrators why before "
            f"resubmitting it"
        )
    else:
        remedy = f"cancelled by {who}{started}: if that was not meant, resubmit it unchanged"
    return _Finding(
        Verdict.CANCELLED, _present(_state(rec), _search(_CANCELLED_AT, facts.lines)), remedy
    )


def _canceller(rec: JobRecord) -> tuple[str, bool]:
    """Who cancelled it, in words, and whether that was root (an administrator or Slurm).

    sacct -P names a uid, sacct --json a user name; a pure function cannot map one to the
    other, so a non-root uid is reported as it is.
    """
    uid, name = rec.cancelled_by, rec.cancelled_by_user
    if _is_root(uid, name):
        return "root (an administrator, or Slurm on its behalf)", True
    if name and name == rec.user:
        return f"its owner {name}", False
    if name:
        return f"user {name}", False
    if uid:
        return f"uid {uid} (not root: its owner or an operator)", False
    return "someone accounting does not name", False


# the CUDA caching allocator's and the driver's words for a full GPU
_CUDA_OOM = re.compile(
    r"CUDA out of memory|torch\.cuda\.OutOfMemoryError|CUDA error: out of memory|"
    r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation",
    re.IGNORECASE,
)


def _cuda_oom(facts: _Facts) -> _Finding | None:
    line = _search(_CUDA_OOM, facts.lines)
    if line is None:
        return None
    return _Finding(
        Verdict.CUDA_OOM,
        (_state(facts.record), line),
        "the GPU ran out of memory, not the host (more --mem will not help): reduce the "
        "batch or model size, or ask for a GPU with more memory (--gres=gpu:TYPE:1)",
    )


_DISK_FULL = re.compile(r"No space left on device|Disk quota exceeded")


def _disk_full(facts: _Facts) -> _Finding | None:
    line = _search(_DISK_FULL, facts.lines)
    if line is None:
        return None
    match = _DISK_FULL.search(line)
    assert match is not None  # _search found it
    where = _path_in(line, match.group(0))
    target = f" writing {where}" if where else ""
    return _Finding(
        Verdict.DISK_FULL,
        (_state(facts.record), line),
        f"the file system was full or over quota{target}: free space or raise the quota "
        f"(check with df or the site's quota command), or write to scratch, then resubmit",
    )


# Lmod's error, Environment Modules' error, and the shell's when `module` is not defined
_LMOD_UNKNOWN = re.compile(r"The following module\(s\) are unknown:?\s*(?P<names>.*)")
_TCL_UNKNOWN = re.compile(r"Unable to locate a modulefile for '(?P<names>[^']+)'")
_QUOTED_NAME = re.compile(r'"([^"]+)"')


def _module(facts: _Facts) -> _Finding | None:
    rec, lines = facts.record, facts.lines
    for i, line in enumerate(lines):
        match = _LMOD_UNKNOWN.search(line) or _TCL_UNKNOWN.search(line)
        if match:
            names = _module_names(match["names"], lines[i + 1 : i + 2])
            return _Finding(
                Verdict.MODULE_NOT_LOADED,
                _present(_state(rec), line, f"module {names}" if names else None),
                f"the cluster has no module {names or '(name in the log)'}: find the right "
                f"name with `module spider`, fix the `module load` line, then resubmit",
            )
    if _missing_command(facts) == "module":
        return _Finding(
            Verdict.MODULE_NOT_LOADED,
            (_state(rec), _search(_NOT_FOUND, lines) or "exit 127"),
            "the `module` command is not defined in the job's shell: start the script with "
            "`#!/bin/bash -l` or source the site's Lmod init before `module load`",
        )
    return None


def _module_names(same_line: str, next_lines: Sequence[str]) -> str:
    """Lmod prints the names quoted, on the error's line or on the next one."""
    names = _QUOTED_NAME.findall(same_line) or [
        n for ln in next_lines for n in _QUOTED_NAME.findall(ln)
    ]
    return ", ".join(names) or same_line.strip()


# bash: 'line 6: fastqc: command not found'; dash: '4: bwa: not found'; and dash's
# 'bwa: Permission denied' with exit 127 when a directory on PATH is unreadable
_NOT_FOUND = re.compile(r"(?:^|[\s:])(?P<cmd>[^\s:'\"]+): (?:command )?not found\s*$")
_NOT_FOUND_127 = re.compile(r"(?:^|[\s:])(?P<cmd>[^\s:'\"/]+): Permission denied\s*$")


def _missing_command(facts: _Facts) -> str | None:
    """The name the shell could not find, if the log names one."""
    match = _search_match(_NOT_FOUND, facts.lines)
    if match is None and facts.record.exit_code == 127:
        match = _search_match(_NOT_FOUND_127, facts.lines)
    return match["cmd"] if match else None


def _command(facts: _Facts) -> _Finding | None:
    rec = facts.record
    cmd = _missing_command(facts)
    if cmd is None and rec.exit_code not in (126, 127):
        return None
    line = _search(_NOT_FOUND, facts.lines) or (
        _search(_NOT_FOUND_127, facts.lines) if cmd else None
    )
    if rec.exit_code == 126 and cmd is None:
        what = "a command it ran is not executable (exit 126): fix its permissions or path"
    else:
        name = f"`{cmd}`" if cmd else "a command it ran"
        what = f"{name} is not on the job's PATH: install it, load its module, or use its full path"
    return _Finding(
        Verdict.COMMAND_NOT_FOUND, _present(_state(rec), line), f"{what}, then resubmit"
    )


_NO_SUCH_FILE = re.compile(r"No such file or directory|FileNotFoundError")


def _missing_input(facts: _Facts) -> _Finding | None:
    line = _search(_NO_SUCH_FILE, facts.lines)
    if line is None:
        return None
    path = _path_in(line, "No such file or directory")
    name = f"`{path}`" if path else "an input it reads"
    return _Finding(
        Verdict.MISSING_INPUT,
        (_state(facts.record), line),
        f"{name} does not exist: create it or fix the path, then resubmit (a retry as it is "
        f"cannot help)",
    )


# lines worth quoting when a program just exits non-zero
_ERRORISH = re.compile(
    r"error|exception|traceback|fatal|fail|abort|killed|segmentation fault|core dumped|"
    r"denied|invalid|cannot|can't",
    re.IGNORECASE,
)


def _nonzero_exit(facts: _Facts) -> _Finding | None:
    rec = facts.record
    if not rec.exit_code and not rec.signal:
        return None
    quoted = [ln for ln in facts.lines if _ERRORISH.search(ln)][-3:] or list(facts.lines[-3:])
    how = (
        f"it was killed by signal {rec.signal} ({_signal_name(rec.signal)})"
        if rec.signal
        else f"it exited with status {rec.exit_code}"
    )
    hint = f" ({quoted[-1]!r})" if quoted else ""
    return _Finding(
        Verdict.NONZERO_EXIT,
        (_state(rec), *quoted),
        f"{how}: read its error{hint} and fix the cause; more resources will not help",
    )


def _unknown(facts: _Facts) -> _Finding:
    rec = facts.record
    return _Finding(
        Verdict.UNKNOWN,
        _present(_state(rec), *facts.lines[-2:]),
        "neither accounting nor the log explains it: read the job's whole output before "
        "resubmitting",
    )


_RULES: tuple[_Rule, ...] = (
    _dependency,
    _requeued,
    _not_finished,
    _completed,
    _preempted,
    _node_failure,
    _timeout,
    _out_of_memory,
    _cancelled,
    _cuda_oom,
    _disk_full,
    _module,
    _command,
    _missing_input,
    _nonzero_exit,
)


# --- small helpers -------------------------------------------------------------------------


def _clean(line: str) -> str:
    """A log line fit to quote: NUL bytes and surrounding blanks gone, length bounded."""
    text = line.replace("\x00", "").strip()
    return text if len(text) <= _QUOTE_MAX else text[: _QUOTE_MAX - 1] + "…"


def _search(pattern: re.Pattern[str], lines: Sequence[str]) -> str | None:
    """The first line matching pattern, quoted."""
    return next((line for line in lines if pattern.search(line)), None)


def _search_match(pattern: re.Pattern[str], lines: Sequence[str]) -> re.Match[str] | None:
    return next((m for m in map(pattern.search, lines) if m is not None), None)


def _matching_reason(reason: str | None, word: str) -> str | None:
    return f"reason {reason}" if reason and word in reason.lower() else None


def _present(*items: str | None) -> tuple[str, ...]:
    return tuple(item for item in items if item)


def _state(rec: JobRecord) -> str:
    """'sacct State FAILED, ExitCode 0:9', as the user would read it in sacct."""
    by = rec.cancelled_by or rec.cancelled_by_user
    state = rec.state.value + (f" by {by}" if by else "")
    return f"sacct State {state}, ExitCode {_exit(rec.exit_code, rec.signal)}"


def _batch(rec: JobRecord) -> StepRecord | None:
    return next((s for s in rec.steps if s.step == "batch"), None)


def _batch_evidence(rec: JobRecord) -> str | None:
    batch = _batch(rec)
    if batch is None:
        return None
    by = batch.cancelled_by or batch.cancelled_by_user
    state = batch.state.value + (f" by {by}" if by else "")
    return f"batch step {state}, ExitCode {_exit(batch.exit_code, batch.signal)}"


def _exit(code: int | None, sig: int | None) -> str:
    return f"{'?' if code is None else code}:{'?' if sig is None else sig}"


def _is_root(uid: str | None, name: str | None) -> bool:
    return uid == "0" or name == "root"


# unanchored: on a line that is not only the path, e.g. 'cat: /data/in.mov: No such file'
_QUOTED_PATH = re.compile(r"""['"`‘](?P<path>[^'"`’\s]+)['"`’]""")


def _path_in(line: str, message: str) -> str | None:
    """The path a 'PATH: message' or "… 'PATH' …" line names, if any."""
    match = re.search(r"(?P<path>[^\s:'\"][^:'\"]*): " + re.escape(message), line)
    if match:
        return match["path"]
    quoted = _QUOTED_PATH.search(line)
    return quoted["path"] if quoted else None


def _round_up_mb(n_bytes: int) -> int:
    """Bytes to MiB, rounded up to a whole _MEM_STEP_MB (integers: no float edge cases)."""
    step = _MEM_STEP_MB * _MIB
    return -(-n_bytes // step) * _MEM_STEP_MB


def _max(*values: int | None) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _mb(n_bytes: int | None) -> str:
    """Bytes as Slurm writes memory: '405M' (MiB, rounded); '?' if unknown."""
    return "?" if n_bytes is None else f"{round(n_bytes / _MIB)}M"


def _clock(seconds: int | None) -> str:
    """Seconds as Slurm's time syntax: 'HH:MM:SS', or 'D-HH:MM:SS' from a day on."""
    if seconds is None:
        return "?"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    clock = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
