"""The feeder's split (agent/runtime/workflows/feeding/split.py) and the offset line of a
part's script (partscript.py): parts within the submit limit and MaxArraySize - 1
indices, every task covered exactly once, the %N throttle; the offset really run by bash."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as s

from jobsmith.adapters.options import JobOptions
from jobsmith.agent.runtime.workflows.feeding.partscript import (
    offset_lines,
    part_options,
    part_script,
)
from jobsmith.agent.runtime.workflows.feeding.split import (
    Part,
    contiguous_range,
    part_size,
    split,
)
from jobsmith.errors import InputError


# no deadline: an example of 30,000 one-task parts takes a loaded machine past Hypothesis'
# 200 ms (it failed so once, and passed on every rerun); the work is linear in the tasks
@settings(database=None, deadline=None)
@given(
    first=s.integers(0, 50_000),
    tasks=s.integers(1, 30_000),
    limits=s.lists(s.integers(1, 6_000), max_size=3),
    max_array_size=s.integers(1, 4_001),
    concurrency=s.none() | s.integers(1, 500),
    throttle=s.none() | s.integers(1, 500),
)
def test_parts_fit_the_limits_and_cover_every_task_once(
    first: int,
    tasks: int,
    limits: list[int],
    max_array_size: int,
    concurrency: int | None,
    throttle: int | None,
) -> None:
    last = first + tasks - 1
    size = part_size(limits, max_array_size)
    parts = split(first, last, size, concurrency, throttle)
    covered = [p.offset + i for p in parts for i in range(p.count)]
    assert covered == list(range(first, last + 1))  # each task once, in order
    for p in parts:
        assert all(p.count <= limit for limit in limits)  # fits an empty queue
        assert p.count - 1 <= max_array_size - 1  # its highest index, not its count
        assert p.array == (f"0-{p.count - 1}" if p.count > 1 else "0")
        caps = [c for c in (concurrency, throttle) if c is not None]
        assert p.throttle == (min([*caps, p.count]) if caps else None)
    assert [p.index for p in parts] == list(range(len(parts)))


def test_maxarraysize_caps_the_index_not_the_count() -> None:
    # 10000-19999 is invalid where MaxArraySize is 10001: parts are indexed from 0
    parts = split(*contiguous_range("10000-19999"), part_size([], 10_001))
    assert [(p.offset, p.array) for p in parts] == [(10_000, "0-9999")]
    parts = split(0, 2_500, part_size([5_000], 1_001))
    assert [(p.offset, p.count) for p in parts] == [(0, 1001), (1001, 1001), (2002, 499)]


@pytest.mark.parametrize("spec", ["0-9:2", "1,3,7", "5-2", "x"])
def test_only_one_contiguous_range_is_split(spec: str) -> None:
    with pytest.raises(InputError):
        contiguous_range(spec)


def test_a_part_s_offset_reaches_the_job_s_task_id() -> None:
    part = Part(index=3, offset=1200, count=400, throttle=None)
    body = "\n".join([*offset_lines(part, 8), 'echo "$SLURM_ARRAY_TASK_ID $JOBSMITH_PART_TASK_ID"'])
    out = subprocess.run(
        ["bash", "-c", body], env={"SLURM_ARRAY_TASK_ID": "7"}, capture_output=True, text=True
    )
    assert out.stdout.split() == ["1207", "7"]


def test_a_part_s_script_has_its_directives_then_its_offset_then_the_body() -> None:
    from scheduler_double import SchedulerDouble

    options = JobOptions(job_name="file_array.js-0123456789ab", array="0-39", array_throttle=9)
    script = "#!/bin/bash\n#JOBSMITH {}\n# template: file_array\nset -euo pipefail\necho $f\n"
    part = split(0, 39, 5, concurrency=4, throttle=9)[2]
    opts = part_options(options, part)
    assert (opts.array, opts.array_throttle) == ("0-4", 4)
    assert opts.job_name.startswith("file_array.p2.js-") and opts.tag() != options.tag()
    text = part_script(script, opts, part, 8, SchedulerDouble())  # type: ignore[arg-type]
    lines = text.splitlines()
    at = lines.index("# jobsmith feeder: part 3 of 8, tasks 10-14")
    assert lines[at - 1] == "# template: file_array" and lines[-2:] == [
        "set -euo pipefail",
        "echo $f",
    ]
    assert "SLURM_ARRAY_TASK_ID=$((JOBSMITH_PART_TASK_ID + 10))" in lines


def test_a_part_is_known_by_its_job_name() -> None:
    from jobsmith.agent.runtime.workflows.feeding.record import is_part

    options = JobOptions(job_name="file_array.js-0123456789ab", array="0-39")
    part = part_options(options, split(0, 39, 5)[7])
    assert is_part(part.job_name) and not is_part(options.job_name)
    assert not is_part("render.p2.js-xyz")  # not a tag
