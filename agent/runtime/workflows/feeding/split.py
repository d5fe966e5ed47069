"""Splitting a workload's tasks into arrays the site accepts (pure).

Slurm refuses an array whole when it would pass a MaxSubmit limit (every array task counts
one job), and refuses any index above MaxArraySize - 1: MaxArraySize caps the highest
*index*, not the count, so `10000-19999` is invalid where MaxArraySize is 10001 although it
is 10,000 tasks. So every part is indexed from 0 (`0-(n-1)`), and the job adds the part's
offset to `$SLURM_ARRAY_TASK_ID` to find the workload's task (partscript.py): tasks
`offset .. offset+n-1` of a workload whose tasks are `first .. last`.

A part holds at most as many tasks as the tightest limit allows queued at once, so a part
fits once the ones before it have left the queue; each carries a `%N` throttle from the
policy's concurrency (and the request's own throttle, if lower).
"""

from __future__ import annotations

from dataclasses import dataclass

from jobsmith.errors import InputError

#: Slurm's default MaxArraySize (slurm.conf(5)): indices 0..1000
SLURM_DEFAULT_MAX_ARRAY_SIZE = 1001


@dataclass(frozen=True)
class Part:
    """One array of a workload: its tasks are the workload's `offset .. offset+count-1`,
    submitted as indices `0 .. count-1`."""

    index: int
    offset: int
    count: int
    throttle: int | None

    @property
    def array(self) -> str:
        """The part's --array spec, without its throttle."""
        return f"0-{self.count - 1}" if self.count > 1 else "0"

    @property
    def last(self) -> int:
        """The workload's last task in this part."""
        return self.offset + self.count - 1


def contiguous_range(spec: str) -> tuple[int, int]:
    """first and last index of an --array spec that names one contiguous range ('0-39',
    '7'); other specs (steps, lists) cannot be fed by one offset per part."""
    span = spec.strip()
    first, sep, last = span.partition("-")
    if not first.isdigit() or (sep and not last.isdigit()):
        raise InputError(
            f"--array {spec}: only one contiguous range (like 0-9999) can be split into parts "
            "that fit the site's limits"
        )
    lo, hi = int(first), int(last) if sep else int(first)
    if hi < lo:
        raise InputError(f"--array {spec}: the range ends before it starts")
    return lo, hi


def part_size(limits: list[int], max_array_size: int) -> int:
    """The most tasks one part may hold: the tightest submit limit (a part must fit an
    empty queue) and MaxArraySize (its indices run 0..size-1 <= MaxArraySize - 1)."""
    if max_array_size < 1:
        raise InputError(f"MaxArraySize {max_array_size}: no array fits")
    size = min([*limits, max_array_size])
    if size < 1:
        raise InputError("a submit limit of 0 jobs: no part fits")
    return size


def split(
    first: int, last: int, size: int, concurrency: int | None = None, throttle: int | None = None
) -> tuple[Part, ...]:
    """Tasks first..last in parts of at most size tasks, in order, each covering the next
    tasks once; every part's throttle is the lower of the policy's concurrency and the
    request's own throttle (None: neither), and never above its count."""
    if size < 1:
        raise InputError("parts need room for at least one task")
    caps = [c for c in (concurrency, throttle) if c is not None]
    parts = []
    for index, offset in enumerate(range(first, last + 1, size)):
        count = min(size, last + 1 - offset)
        cap = min([*caps, count]) if caps else None
        parts.append(Part(index=index, offset=offset, count=count, throttle=cap))
    return tuple(parts)


def in_words(parts: tuple[Part, ...]) -> str:
    """'fed in 2 parts of at most 5 tasks, %5 at once': what a dry run says of them."""
    most = max(p.count for p in parts)
    throttle = max((p.throttle for p in parts if p.throttle is not None), default=None)
    at_once = f", %{throttle} at once" if throttle is not None else ""
    return f"fed in {len(parts)} parts of at most {most} tasks{at_once}"
