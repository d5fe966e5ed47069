"""rsync's output read as put/get read it (adapters/ssh/staging.py): its progress2 updates
told as they come, and its --stats counts, from a real rsync copying on this machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from jobsmith.adapters.ssh.staging import PARTIAL, follow, moved


def rsync(source: Path, target: Path, seen: list[tuple[int, int]], size: int) -> str:
    argv = ["rsync", "-s", "-t", f"--partial-dir={PARTIAL}", "--info=progress2", "--stats"]
    proc = subprocess.Popen(
        [*argv, "--", str(source), str(target)],
        stdout=subprocess.PIPE,
        env={"PATH": os.environ["PATH"], "LC_ALL": "C"},
    )
    text = follow(proc.stdout, size, lambda done, total: seen.append((done, total)))
    assert proc.wait() == 0
    return text


def test_progress_and_counts_of_a_copy_then_of_one_already_there(tmp_path: Path) -> None:
    source, target = tmp_path / "a file.bin", tmp_path / "there"
    size = 3_000_001
    source.write_bytes(os.urandom(size))
    target.mkdir()
    seen: list[tuple[int, int]] = []
    stats = rsync(source, target, seen, size)
    assert seen and seen[-1] == (size, size), seen
    assert all(total == size and 0 <= done <= size for done, total in seen)
    assert moved(stats, "sent") > size  # the data and the protocol's own
    assert (target / source.name).read_bytes() == source.read_bytes()
    assert moved(rsync(source, target, [], size), "sent") == 0  # same size and time: skipped


def test_a_sessions_declared_outputs_are_its_templates_role_output_paths(tmp_path: Path) -> None:
    """get SESSION's list: the `role: output` path and paths parameters of the templates
    its jobs ran, as recorded, once each; other sessions' jobs, inputs and a user's own
    script (no template) add nothing."""
    from dataclasses import dataclass

    from test_staging_tree import submitted

    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.session.store import FileSessionStore
    from jobsmith.agent.runtime.staging import declared_outputs
    from jobsmith.job_templates import TemplateLibrary, shipped_library

    @dataclass
    class Parts:
        ledger: JobLedger
        library: TemplateLibrary
        store: FileSessionStore

    parts = Parts(
        JobLedger(tmp_path / "jobs"),
        TemplateLibrary([shipped_library()]),
        FileSessionStore(tmp_path / "sessions"),
    )
    mine, other = parts.store.create(), parts.store.create()
    runs = [
        (
            mine,
            "ffmpeg_concat",
            {"chunk_dir": "/s/a/chunks", "chunks": 3, "output": "/s/a/out.mkv"},
        ),
        (
            mine,
            "ffmpeg_concat",
            {"chunk_dir": "/s/b/chunks", "chunks": 3, "output": "/s/a/out.mkv"},
        ),
        (mine, "sbatch:align.sh", {}),
        (other, "ffmpeg_concat", {"chunk_dir": "/s/c", "chunks": 1, "output": "/s/c/x.mkv"}),
    ]
    for session, template, params in runs:
        submitted(parts, session, template, params)
    assert declared_outputs(parts, mine) == [Path("/s/a/out.mkv")]


def test_a_local_sheets_path_cells_are_rewritten_to_the_clusters_and_the_rest_kept(
    tmp_path: Path,
) -> None:
    """A sample sheet on the laptop, staged (agent/runtime/staging.py): each path cell
    (relative to the sheet, or absolute) becomes where its file went on the cluster;
    comments, blank lines, the header's order and the other cells stay as written, and the
    result is a sheet the template reads back with the cluster's paths."""
    from jobsmith.agent.runtime.staging import rewrite_cells
    from jobsmith.job_templates import TemplateLibrary, shipped_library
    from jobsmith.job_templates.tables import read_table

    columns = TemplateLibrary([shipped_library()]).get("bwa_align").spec.params["samples"].columns
    assert columns is not None
    reads = tmp_path / "reads"
    reads.mkdir()
    for name in ("a_1.fq", "a_2.fq", "b 1.fq"):
        (reads / name).write_text("@r\nA\n+\nI\n")
    text = (
        "# two samples\r\n"
        "r1\tsample\tr2\n"
        "\n"
        f"a_1.fq\tA.1\t{reads / 'a_2.fq'}\n"
        "# the second\n"
        "b 1.fq\tB-2\ta_2.fq\n"
    )

    def here(path: Path, where: str) -> Path:
        assert path.is_file(), where
        return path

    table = read_table(reads / "s.tsv", columns, here, read=lambda _: text.encode())
    there = {p: f"/scratch/u/jobsmith-staged/k/{p.name}" for p in table.paths()}
    rewritten = rewrite_cells(text, table, columns, there)
    assert rewritten == (
        "# two samples\n"
        "r1\tsample\tr2\n"
        "\n"
        "/scratch/u/jobsmith-staged/k/a_1.fq\tA.1\t/scratch/u/jobsmith-staged/k/a_2.fq\n"
        "# the second\n"
        "/scratch/u/jobsmith-staged/k/b 1.fq\tB-2\t/scratch/u/jobsmith-staged/k/a_2.fq\n"
    )
    again = read_table(Path("/x/s.tsv"), columns, lambda p, _: p, read=lambda _: rewritten.encode())
    assert [row["r1"] for row in again.rows] == [
        Path("/scratch/u/jobsmith-staged/k/a_1.fq"),
        Path("/scratch/u/jobsmith-staged/k/b 1.fq"),
    ]
    assert [row["sample"] for row in again.rows] == ["A.1", "B-2"]


def test_companions_are_suffixes_of_path_inputs_only() -> None:
    """`companions` (files the job reads beside a path input, staged with it by
    `@local:`): bwa_align's reference names its index; elsewhere the spec is refused."""
    from pydantic import ValidationError

    from jobsmith.job_templates import TemplateLibrary, shipped_library
    from jobsmith.job_templates.params import ParamSpec

    spec = TemplateLibrary([shipped_library()]).get("bwa_align").spec.params["reference"]
    assert spec.companions == (".amb", ".ann", ".bwt", ".pac", ".sa")
    base = {"type": "path", "role": "input", "description": "d"}
    assert ParamSpec(**base, companions=[".fai"]).companions == (".fai",)
    for bad, why in [
        ({**base, "type": "paths"}, "path parameters of role input only"),
        ({**base, "role": "output"}, "path parameters of role input only"),
        ({**base, "companions": ["bwt"]}, "not a suffix"),
        ({**base, "companions": ["./x"]}, "not a suffix"),
    ]:
        with pytest.raises(ValidationError, match=why):
            ParamSpec(**{"companions": [".bwt"], **bad})


def test_on_a_local_site_local_drops_its_prefix_in_every_kind_of_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where Slurm runs on this host the files are already where the job runs: `@local:`
    is dropped from a path, each item of a list (comma separated or a list) and a sheet,
    made absolute, and nothing is copied or noted."""
    from dataclasses import dataclass

    from jobsmith.agent.runtime.staging import LocalStaging
    from jobsmith.job_templates import TemplateLibrary, shipped_library

    @dataclass
    class Access:
        kind: str = "local"

    @dataclass
    class Parts:
        library: TemplateLibrary
        scheduler_access: Access
        transport: None = None

    parts = Parts(TemplateLibrary([shipped_library()]), Access())
    staging = LocalStaging(parts, lambda name: lambda done, total: None)  # type: ignore[arg-type]
    monkeypatch.chdir(tmp_path)
    bwa = staging.params(
        "bwa_align",
        {"reference": "@local:g.fa", "samples": "@local:r/s.tsv", "output_dir": "out"},
    )
    assert bwa == {
        "reference": str(tmp_path / "g.fa"),
        "samples": str(tmp_path / "r" / "s.tsv"),
        "output_dir": "out",
    }
    files = staging.params("file_array", {"files": "@local:a,/s/b", "program": "gzip"})
    assert files == {"files": [str(tmp_path / "a"), "/s/b"], "program": "gzip"}
    listed = staging.params("file_array", {"files": ["/s/b", "@local:c"]})
    assert listed == {"files": ["/s/b", str(tmp_path / "c")]}
    plain = {"files": "a,b", "program": "gzip"}
    assert staging.params("file_array", plain) == plain
    assert staging.file(Path("@local:clip.mp4"), "SOURCE") == tmp_path / "clip.mp4"
    assert staging.staged == []


def test_a_stream_pours_the_whole_file_telling_progress_and_a_shrunk_file_is_an_error(
    tmp_path: Path,
) -> None:
    """The stream's own loop (put of a new file over openssh): every byte into the pipe,
    counted as it goes; a file that ends before its size is an OSError, not a short copy
    called whole."""
    from jobsmith.adapters.ssh.staging import _Pace, _pour

    source = tmp_path / "src.bin"
    data = os.urandom(3_000_001)
    source.write_bytes(data)
    seen: list[tuple[int, int]] = []
    sent = [0]
    with source.open("rb") as f, (tmp_path / "out.bin").open("wb") as out:
        proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=out)
        assert proc.stdin is not None
        _pour(f, proc.stdin, len(data), sent, _Pace(0), lambda d, t: seen.append((d, t)))
        proc.stdin.close()
        assert proc.wait() == 0
    assert (tmp_path / "out.bin").read_bytes() == data
    assert sent == [len(data)] and seen[-1] == (len(data), len(data))
    with source.open("rb") as f, open(os.devnull, "wb") as sink, pytest.raises(OSError) as cut:
        _pour(f, sink, len(data) + 10, [0], _Pace(0), lambda d, t: None)
    assert "ended early" in str(cut.value)


def test_a_stream_nothing_reads_is_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """A far end that stops reading (a hung filesystem there) does not hang put: once
    nothing moved for IO_TIMEOUT_S the ssh is ended, as rsync's --timeout ends rsync."""
    from jobsmith.adapters.ssh import staging

    monkeypatch.setattr(staging, "IO_TIMEOUT_S", 1)
    proc = subprocess.Popen(["sleep", "60"], stdin=subprocess.PIPE)
    stall = staging._Stall(proc, [0])
    try:
        assert proc.wait(timeout=10) != 0
    finally:
        stall.stop()
    assert stall.fired


def test_how_far_a_process_read_a_file_is_its_offset(tmp_path: Path) -> None:
    """The direct stream's progress (ssh reading the file itself): a process's read
    offset in the file, from /proc; None for a descriptor that is not there."""
    from jobsmith.adapters.ssh.staging import _offset_of

    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(100_000))
    with path.open("rb", buffering=0) as f:
        f.read(12_345)
        assert _offset_of(os.getpid(), f.fileno()) == 12_345
    assert _offset_of(os.getpid(), 987_654) is None
