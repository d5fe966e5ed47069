"""`jobsmith status --json` prints, byte for byte, what it printed before its parse was
reworked (issue 26), for every captured sacct -P output: a real 1,000-task array of the
lab cluster and the small captures of many kinds of job (tests/status_reference.py)."""

from __future__ import annotations

import gzip
import json

import pytest
from status_reference import CAPTURES, read_capture, reference_path, status_json


@pytest.mark.parametrize("name", CAPTURES)
def test_status_json_is_byte_for_byte_the_reference(name: str) -> None:
    expected = gzip.decompress(reference_path(name).read_bytes()).decode()
    assert status_json(read_capture(name)) == expected


def test_the_array_reference_holds_all_1000_tasks_each_with_its_step() -> None:
    name = "lab-22.05/sacct-array-1000.txt.gz"
    document = json.loads(gzip.decompress(reference_path(name).read_bytes()))
    array = document["jobs"][0]
    assert array["task_counts"] == {"COMPLETED": 1000}
    assert [t["array_task_id"] for t in array["tasks"]] == list(range(1000))
    assert all([s["step"] for s in t["steps"]] == ["batch"] for t in array["tasks"])
