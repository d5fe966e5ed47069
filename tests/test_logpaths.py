"""Slurm's output-file patterns expand as sbatch expands them."""

from __future__ import annotations

from jobsmith.adapters.slurm.commands.logpaths import expand_log_pattern


def test_array_task_pattern() -> None:
    path = expand_log_pattern(
        "/s/%x_%A_%a.%j.out",
        job_id_raw="340",
        array_job_id="333",
        array_task_id=2,
        job_name="arr",
        user="alice",
    )
    assert path == "/s/arr_333_2.340.out"


def test_plain_job_padding_and_percent() -> None:
    path = expand_log_pattern(
        "%u/%5j-100%%.out",
        job_id_raw="42",
        array_job_id=None,
        array_task_id=None,
        job_name="x",
        user="alice",
    )
    assert path == "alice/00042-100%.out"
