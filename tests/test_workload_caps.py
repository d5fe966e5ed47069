"""Every count a person controls is checked against a hard workload cap before memory is
spent on it (issue 24, part 4): frames, a video's chunks, array tasks, a list
parameter's items, a sample sheet's rows, a YAML document's values, a params file's
entries and a plan's steps. Each refusal is one line naming the count, the cap and what
to do; the caps live in jobsmith/workload_caps.py. No Slurm."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from lab_cli import LAB_SITE, js

from jobsmith import workload_caps
from jobsmith.agent.runtime.submission.request.jobs import split_array
from jobsmith.agent.runtime.workflows import plans
from jobsmith.agent.runtime.workflows.transcode import Probe, segments
from jobsmith.errors import InputError
from jobsmith.job_templates import shipped_library
from jobsmith.job_templates.arrays import PerChunk, plan_array
from jobsmith.job_templates.loader import load_template
from jobsmith.job_templates.params import ColumnType, ParamSpec, ParamType
from jobsmith.job_templates.tables import read_table
from jobsmith.job_templates.values import coerce
from jobsmith.workload_caps import OverCap


def _capped(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own under a 1 GiB address-space cap and a timeout."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    argv = [sys.executable, "-m", "jobsmith", "--site", str(LAB_SITE), *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, preexec_fn=cap)


def test_the_message_names_the_count_the_cap_and_what_to_do() -> None:
    with pytest.raises(OverCap) as caught:
        workload_caps.check_count(12, 10, "rows", "split the sheet")
    assert str(caught.value) == "12 rows, above jobsmith's workload cap of 10: split the sheet"
    workload_caps.check_count(10, 10, "rows", "split the sheet")  # at the cap: fine


def test_a_transcode_of_too_many_chunks_is_refused_from_the_duration() -> None:
    """A day of video in 1 ms chunks: 86.4 million segments; refused before any is cut."""
    probed = Probe(duration_s=86_400.0, keyframes=(0.0, 10.0), has_audio=False)
    with pytest.raises(InputError) as caught:
        segments(probed, 0.001)
    line = str(caught.value)
    assert "86,400,000 chunks" in line and f"{workload_caps.MAX_CHUNKS:,}" in line
    assert "--chunk-seconds" in line and "\n" not in line
    assert len(segments(probed, 0.1)) == 2  # under the cap: planned as before


def test_the_join_template_takes_no_more_chunks_than_the_cap() -> None:
    """ffmpeg_concat renders one line per chunk: chunks=10^9 rendered without end."""
    template = load_template(shipped_library() / "ffmpeg_concat.yaml")
    assert template.spec.params["chunks"].max == workload_caps.MAX_CHUNKS


def test_a_list_parameter_is_counted_before_its_items_are_made() -> None:
    spec = ParamSpec(type=ParamType.PATHS, description="files", role="input")
    items = ["a.txt"] * (workload_caps.MAX_LIST_ITEMS + 1)
    with pytest.raises(OverCap, match=f"{workload_caps.MAX_LIST_ITEMS + 1:,} items"):
        coerce(spec, items)
    assert len(coerce(spec, items[:3])) == 3  # type: ignore[arg-type]


def test_a_sample_sheet_is_counted_before_a_row_is_read(tmp_path: Path) -> None:
    sheet = tmp_path / "samples.tsv"
    rows = workload_caps.MAX_TABLE_ROWS + 1
    sheet.write_text("sample\tr1\n" + "s\ta.fq\n" * rows)
    checked: list[Path] = []

    def check_path(path: Path, where: str) -> Path:
        checked.append(path)
        return path

    columns = {"sample": ColumnType.ID, "r1": ColumnType.PATH}
    with pytest.raises(OverCap, match=f"{rows:,} rows"):
        read_table(sheet, columns, check_path)
    assert checked == []  # no row's path was resolved first


def test_a_yaml_document_stops_at_the_cap_on_values(tmp_path: Path) -> None:
    """A params file of 150,000 list items: refused while parsing, naming the line."""
    path = tmp_path / "params.yaml"
    path.write_text("files:\n" + "- a\n" * 150_000)
    out = js("render", "file_array", "--params-file", str(path), "-P", "program=gzip")
    assert out.exit_code == 2, out.output
    assert f"more than {workload_caps.MAX_YAML_NODES:,} values" in out.output
    assert "params file" in out.output and "Traceback" not in out.output


def test_a_four_mib_yaml_list_is_refused_within_a_memory_cap(tmp_path: Path) -> None:
    """The largest list a file may hold (4 MiB, two million values) took 2.3 GB and 55 s
    to parse; under a 1 GiB address-space cap it is now exit 2 in seconds."""
    path = tmp_path / "params.yaml"
    path.write_text("files: [" + "1," * 2_000_000 + "1]\n")
    out = _capped("render", "file_array", "--params-file", str(path), cwd=tmp_path)
    assert out.returncode == 2, (out.returncode, out.stderr[-500:])
    (line,) = out.stderr.strip().splitlines()
    assert f"more than {workload_caps.MAX_YAML_NODES:,} values" in line


def test_a_params_file_of_too_many_entries_is_refused_by_its_count(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    entries = workload_caps.MAX_PARAMS_ENTRIES + 1
    path.write_text("".join(f"p{i}: 1\n" for i in range(entries)))
    out = js("render", "command", "--params-file", str(path))
    assert out.exit_code == 2, out.output
    assert f"{entries:,} entries, above jobsmith's workload cap" in out.output


def test_a_plan_of_too_many_steps_is_refused_before_a_step_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "plan.yaml"
    steps = workload_caps.MAX_PLAN_STEPS + 1
    body = "".join(
        f"  s{i}: {{template: command, params: {{command: 'true'}}}}\n" for i in range(steps)
    )
    path.write_text("name: big\nsteps:\n" + body)
    read: list[str] = []
    real = plans._file_step

    def counting(doc: object, name: str, step: object, old: dict[str, list[str]]) -> object:
        read.append(name)
        return real(doc, name, step, old)  # type: ignore[arg-type]

    monkeypatch.setattr(plans, "_file_step", counting)
    with pytest.raises(InputError) as caught:
        plans.load_plan(path)
    assert f"{steps} steps, above jobsmith's workload cap of {steps - 1}" in str(caught.value)
    assert read == []


def test_an_array_is_counted_from_its_ranges_before_any_index_is_listed() -> None:
    tasks = workload_caps.MAX_ARRAY_TASKS + 1
    with pytest.raises(InputError, match=f"{tasks:,} tasks, above jobsmith's workload cap"):
        split_array(f"0-{tasks - 1}", None)
    assert split_array(f"0-{tasks - 2}%4", None) == (f"0-{tasks - 2}", 4)


def test_an_array_template_is_counted_before_its_array_is_made() -> None:
    """per_chunk over a length of 10^15 made an array spec a canary would list."""
    rule = PerChunk(kind="per_chunk", total="duration_s", size="chunk_seconds")
    with pytest.raises(OverCap, match="1,000,000,000,000,000 array tasks"):
        plan_array(rule, {"duration_s": 10**15, "chunk_seconds": 1})
    assert plan_array(rule, {"duration_s": 12, "chunk_seconds": 4}).spec == "0-2"
