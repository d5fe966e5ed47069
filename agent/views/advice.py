"""Advice at submission, in words for the person at the terminal (stderr notes).

`--json` carries the SubmitAdvice document itself; this is its text face: one line per
offer, each ending with the option that takes it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobsmith.agent.runtime.submission.advising.advice import SubmitAdvice
    from jobsmith.agent.runtime.submission.advising.sizing import SizingProposal


def advice_lines(advice: SubmitAdvice) -> list[str]:
    """The advice as sentences (none when there is nothing to offer or say)."""
    lines: list[str] = []
    if advice.unavailable:
        lines.append(f"no advice this time: {advice.unavailable}")
    if advice.sizing is not None:
        lines.append(_sizing_line(advice, advice.sizing))
    if advice.earliest is not None:
        lines.append(_earliest_line(advice, advice.earliest))
    if _mentions_a_start(advice) and advice.caveats:
        lines.append("(" + "; ".join(advice.caveats) + ")")
    return lines


def _mentions_a_start(advice: SubmitAdvice) -> bool:
    was, now = advice.requested_start, advice.proposed_start
    return advice.earliest is not None or (was is not None and now is not None and now < was)


def _sizing_line(advice: SubmitAdvice, sizing: SizingProposal) -> str:
    usage = sizing.usage
    used = []
    if usage.peak_mem_mb_p95 is not None:
        used.append(f"peaked at {_mib(usage.peak_mem_mb_p95)}")
    if usage.elapsed_s_p95 is not None:
        used.append(f"took {_clock(usage.elapsed_s_p95)}")
    if usage.busy_cpus_p95 is not None:
        used.append(f"kept {usage.busy_cpus_p95:g} CPUs busy")
    what = f"{usage.runs} completed runs ({usage.basis}) {_and(used)} (95th percentile)"
    asked = ", ".join(
        f"{c.option.split()[0]} {_value(c.field, c.requested)}" for c in sizing.changes
    )
    gains = _gains(advice)
    taken = "right_size" in advice.applied
    if taken:
        return f"right-sized: {what}; submitted with {sizing.options()} instead of {asked}{gains}"
    return f"{what}; {sizing.options()} instead of {asked}{gains}: add --right-size to take it"


def _gains(advice: SubmitAdvice) -> str:
    parts = []
    before, after = advice.requested_cost, advice.proposed_cost
    if before is not None and after is not None and after.core_hours < before.core_hours:
        parts.append(f"{before.core_hours:g} -> {after.core_hours:g} core-hours requested")
    was, now = advice.requested_start, advice.proposed_start
    if was is not None and now is not None and now < was:
        parts.append(f"estimated start {_when(now)} instead of {_when(was)}")
    return f" ({'; '.join(parts)})" if parts else ""


def _earliest_line(advice: SubmitAdvice, earliest: str) -> str:
    starts = {e.partition: e.estimated_start for e in advice.partitions}
    best, mine = starts.get(earliest), starts.get(advice.partition or "")
    when = f"at {_when(best)}" if best else "earlier"
    against = f" than in {advice.partition} ({_when(mine)})" if mine else ""
    if "earliest" in advice.applied:
        return f"earliest start: submitted to partition {earliest}, {when}{against}"
    return (
        f"Slurm would start it earlier in partition {earliest}, {when}{against}: "
        f"--partition {earliest} (or --earliest) takes it"
    )


def _value(field: str, value: int) -> str:
    from jobsmith.units import format_duration, format_memory

    if field == "mem_mb":
        return format_memory(value)
    if field == "time_limit_s":
        return format_duration(value)
    return str(value)


def _mib(mib: int) -> str:
    return f"{mib / 1024:.1f}G" if mib >= 1024 else f"{mib}M"


def _clock(seconds: int) -> str:
    from jobsmith.units import format_duration

    return format_duration(seconds)


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M}" if moment else "unknown"


def _and(parts: list[str]) -> str:
    if len(parts) < 2:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]
