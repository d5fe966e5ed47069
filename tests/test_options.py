"""sbatch options render to directives in a fixed order and refuse unsafe values."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jobsmith.adapters.options import Dependency, JobOptions, array_task_count
from jobsmith.adapters.slurm.commands.options import render_directives
from jobsmith.units import format_time_limit


def test_directives_in_fixed_order_with_array_throttle_and_dependencies() -> None:
    opts = JobOptions(
        job_name="ffmpeg_chunks.js-0123456789ab",
        partition="debug",
        account="lab",
        time_limit_s=90,
        mem_mb=512,
        cpus_per_task=2,
        gpus=1,
        array="0-999",
        array_throttle=10,
        dependencies=(Dependency(kind="afterok", job_ids=("12", "13_1")),),
        output="/scratch/alice/logs/%x_%A_%a.out",
    )
    assert render_directives(opts) == [
        "#SBATCH --job-name=ffmpeg_chunks.js-0123456789ab",
        "#SBATCH --partition=debug",
        "#SBATCH --account=lab",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --mem=512M",
        "#SBATCH --time=00:02:00",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --array=0-999%10",
        "#SBATCH --dependency=afterok:12:13_1",
        "#SBATCH --output=/scratch/alice/logs/%x_%A_%a.out",
    ]
    assert opts.tag() == "0123456789ab"
    assert opts.array_size() == 1000


@pytest.mark.parametrize(
    "field,value",
    [
        ("job_name", "x\n#SBATCH --partition=evil"),
        ("job_name", "a b"),
        ("partition", "debug --qos=high"),
        ("output", "/tmp/$(whoami)"),
        ("output", "/tmp/x;rm"),
        ("account", ""),
        ("array", "0-3%2"),
        ("array", "1;2"),
    ],
)
def test_unsafe_values_are_refused(field: str, value: str) -> None:
    kwargs = {"job_name": "ok"} | {field: value}
    with pytest.raises(ValidationError) as info:
        JobOptions(**kwargs)  # type: ignore[arg-type]
    assert field in str(info.value)


def test_throttle_without_array_is_refused() -> None:
    with pytest.raises(ValidationError, match="throttle needs an array"):
        JobOptions(job_name="x", array_throttle=2)


@pytest.mark.parametrize(
    "spec,count", [("0-999", 1000), ("1,3,7", 3), ("0-9:2", 5), ("5", 1), ("0-3,10-11", 6)]
)
def test_array_task_count(spec: str, count: int) -> None:
    assert array_task_count(spec) == count


@pytest.mark.parametrize(
    "seconds,text", [(1, "00:01:00"), (60, "00:01:00"), (3600, "01:00:00"), (90000, "1-01:00:00")]
)
def test_format_time_limit_rounds_up_to_minutes(seconds: int, text: str) -> None:
    assert format_time_limit(seconds) == text
