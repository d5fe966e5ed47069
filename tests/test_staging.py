"""rsync's output read as put/get read it (adapters/ssh/staging.py): its progress2 updates
told as they come, and its --stats counts, from a real rsync copying on this machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

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
    from datetime import datetime

    from jobsmith.adapters.options import JobOptions
    from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
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
    for n, (session, template, params) in enumerate(runs):
        parts.ledger.record(
            SubmissionRecord(
                job_id=str(100 + n),
                cluster="lab",
                template=template,
                params=params,
                options=JobOptions(job_name=f"t.js-{n:012x}"),
                script_sha256="0" * 64,
                submitted_at=datetime.now(),
                session_id=session,
            )
        )
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


# --- a directory got: Stager.tree and get_tree, and get SESSION's directory outputs -------


class LocalCopier:
    """A Copier that copies on this host (the staging rules are the Stager's)."""

    def __init__(self) -> None:
        self.downloads: list[tuple[Path, Path]] = []

    def upload(self, local: Path, remote: Path, progress: object) -> object:
        raise AssertionError("not used")

    def download(self, remote: Path, local: Path, progress: object) -> object:
        import shutil

        from jobsmith.adapters.ssh.staging import Copied

        shutil.copyfile(remote, local)
        self.downloads.append((remote, local))
        size = local.stat().st_size
        return Copied(str(remote), str(local), size, size, "local")


def local_stager(root: Path) -> tuple[object, LocalCopier, list[tuple[str, ...]]]:
    """A Stager whose 'cluster' is this host below root (its one allowed root), through
    the remote lookup's own commands run here; the copier, and the commands asked."""
    from test_files_there import Counting

    from jobsmith.adapters.files_there import FilesThere
    from jobsmith.adapters.ssh.staging import Stager

    transport = Counting()
    copier = LocalCopier()
    stager = Stager(copier, FilesThere(transport, "alice@login1:22"), [root])
    return stager, copier, transport.calls


def aligned(root: Path) -> Path:
    """bwa_align's output_dir as its array leaves it: a BAM and its index per sample, and
    a sub-directory of logs."""
    out = root / "aligned"
    (out / "qc").mkdir(parents=True)
    for sample in ("S1", "S2"):
        (out / f"{sample}.bam").write_bytes(os.urandom(1000))
        (out / f"{sample}.bam.bai").write_bytes(os.urandom(100))
    (out / "qc" / "S1.txt").write_text("ok\n")
    return out


def test_a_directory_is_got_file_by_file_below_its_own_name_keeping_paths(
    tmp_path: Path,
) -> None:
    """Stager.tree lists and resolves the directory there in one command (after the one
    look at it and the roots), and get_tree copies each regular file to
    DIR/NAME/its path below it; a symlink to a file inside the roots is got as a file, one
    to a directory or to nothing is skipped saying so; what an interrupted put left there
    is not got."""
    from jobsmith.adapters.ssh.staging import Stager

    root = tmp_path / "scratch"
    out = aligned(root)
    (out / "latest.bam").symlink_to(out / "S2.bam")
    (out / "refs").symlink_to(root)
    (out / "gone.bam").symlink_to(out / "never.bam")
    (out / "S3.bam.jobsmith-partial").write_bytes(b"half")
    stager, _copier, calls = local_stager(root)
    assert isinstance(stager, Stager)
    tree = stager.tree(out)
    assert len(calls) == 2  # the directory and the roots looked at, then the listing
    assert tree.skipped == (
        f"{out / 'gone.bam'}: a symlink to nothing there ('{out / 'never.bam'}') "
        "on alice@login1:22",
        f"{out / 'refs'}: a symlink to a directory, not followed on alice@login1:22",
    )
    back = tmp_path / "back"
    done = stager.get_tree(tree, back, lambda name: lambda done, total: None)
    got = sorted(str(Path(c.target).relative_to(back)) for c in done)
    assert got == [
        "aligned/S1.bam",
        "aligned/S1.bam.bai",
        "aligned/S2.bam",
        "aligned/S2.bam.bai",
        "aligned/latest.bam",
        "aligned/qc/S1.txt",
    ]
    for name in got:
        source = out / Path(name).relative_to("aligned")
        assert (back / name).read_bytes() == source.read_bytes()
    assert not (back / "aligned" / "S3.bam.jobsmith-partial").exists()


def test_a_file_below_a_directory_leading_out_of_the_roots_refuses_it_all(
    tmp_path: Path,
) -> None:
    """A symlink there out of the allowed roots is refused naming it, where it leads and
    the login node, before any file of the directory is copied (exit 3); so is the
    directory itself leading out."""
    from jobsmith.adapters.ssh.staging import Stager
    from jobsmith.errors import PolicyError

    root = tmp_path / "scratch"
    out = aligned(root)
    (tmp_path / "secret").write_text("x")
    (out / "z.bam").symlink_to(tmp_path / "secret")
    stager, copier, _ = local_stager(root)
    assert isinstance(stager, Stager)
    with pytest.raises(PolicyError) as err:
        stager.tree(out)
    assert err.value.exit_code == 3
    assert str(err.value) == (
        f"get: path '{out / 'z.bam'}' (resolves to '{tmp_path / 'secret'}') on "
        f"alice@login1:22 is outside the allowed roots: {root}"
    )
    assert copier.downloads == []
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(PolicyError, match=r"'.*/link' \(resolves to '.*'\) on alice@login1:22"):
        stager.tree(root / "link")


def test_a_symlink_here_on_the_way_is_refused_before_anything_is_copied(
    tmp_path: Path,
) -> None:
    """On the laptop a fetched file never lands through a symlink: DIR/NAME, a directory
    below it or the file itself being one (or not a directory, not a file) is refused
    naming it, and nothing of the tree is copied."""
    from jobsmith.adapters.ssh.staging import Stager
    from jobsmith.errors import PolicyError

    root = tmp_path / "scratch"
    out = aligned(root)
    stager, copier, _ = local_stager(root)
    assert isinstance(stager, Stager)
    tree = stager.tree(out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    quiet = lambda name: lambda done, total: None  # noqa: E731
    for i, make in enumerate(
        [
            lambda back: (back / "aligned").symlink_to(elsewhere),
            lambda back: (back / "aligned" / "qc").symlink_to(elsewhere),
            lambda back: (back / "aligned" / "qc").write_text("a file"),
            lambda back: (back / "aligned" / "S2.bam").symlink_to(elsewhere / "S2.bam"),
            lambda back: (back / "aligned" / "S2.bam").mkdir(),
        ]
    ):
        back = tmp_path / f"back{i}"
        (back / "aligned").mkdir(parents=True) if i else back.mkdir()
        make(back)
        with pytest.raises(PolicyError, match="remove it or choose another --to"):
            stager.get_tree(tree, back, quiet)
        assert copier.downloads == [] and list(elsewhere.iterdir()) == []


def test_a_directory_of_more_files_than_the_limit_is_refused_naming_it(tmp_path: Path) -> None:
    from jobsmith.adapters.ssh.staging import Stager, TooManyFiles

    root = tmp_path / "scratch"
    out = aligned(root)
    stager, _copier, _ = local_stager(root)
    assert isinstance(stager, Stager)
    with pytest.raises(TooManyFiles) as err:
        stager.tree(out, limit=4)
    assert str(err.value) == (
        f"{out}: a directory of more than 4 files on alice@login1:22: not got (the limit "
        f"of one get); get the files you want by name (jobsmith get {out}/NAME …)"
    )
    assert len(stager.tree(out, limit=5).files) == 5


def session_parts(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What get SESSION uses, its 'cluster' this host below root through the remote
    lookup's commands (local_stager)."""
    from dataclasses import dataclass, field
    from types import SimpleNamespace

    from test_files_there import Counting

    from jobsmith.adapters.files_there import FilesThere
    from jobsmith.agent.runtime import staging
    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.session.store import FileSessionStore
    from jobsmith.job_templates import TemplateLibrary, shipped_library

    @dataclass
    class Parts:
        ledger: JobLedger
        library: TemplateLibrary
        store: FileSessionStore
        job_files: FilesThere
        site: Any
        scheduler_access: Any = field(default_factory=lambda: SimpleNamespace(kind="ssh"))
        transport: Any = field(default_factory=lambda: SimpleNamespace(where="alice@login1:22"))

    stager, _copier, _ = local_stager(root)
    monkeypatch.setattr(staging, "stager", lambda parts, bwlimit_kbps=0: stager)
    return Parts(
        JobLedger(tmp_path / "jobs"),
        TemplateLibrary([shipped_library()]),
        FileSessionStore(tmp_path / "sessions"),
        FilesThere(Counting(), "alice@login1:22"),
        SimpleNamespace(config=SimpleNamespace(paths=SimpleNamespace(scratch=root))),
    )


def submitted(parts: Any, session: str, template: str, params: dict[str, object]) -> str:
    from datetime import datetime

    from jobsmith.adapters.options import JobOptions
    from jobsmith.agent.runtime.session.ledger import SubmissionRecord

    job_id = str(100 + len(parts.ledger.all()))
    parts.ledger.record(
        SubmissionRecord(
            job_id=job_id,
            cluster="lab",
            template=template,
            params=params,
            options=JobOptions(job_name=f"t.js-{int(job_id):012x}"),
            script_sha256="0" * 64,
            submitted_at=datetime.now(),
            session_id=session,
        )
    )
    return job_id


def test_get_session_gets_a_declared_output_directorys_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29's leftover: `get SESSION` of a bwa_align session (its `output_dir` a
    declared output that is a directory) brings the BAMs back below DIR/aligned/; a
    declared output not there yet (a samtools_merge's that has not run, a directory
    another bwa_align has not made) is one line each of not_got, saying so."""
    from jobsmith.agent.runtime.staging import get_files

    root = tmp_path / "scratch"
    out = aligned(root)
    parts = session_parts(tmp_path, root, monkeypatch)
    session = parts.store.create()
    bwa = {"reference": str(root / "g.fa"), "samples": str(root / "s.tsv")}
    submitted(parts, session, "bwa_align", {**bwa, "output_dir": str(out)})
    submitted(
        parts, session, "samtools_merge", {"bam_dir": str(out), "output": str(root / "all.bam")}
    )
    submitted(parts, session, "bwa_align", {**bwa, "output_dir": str(root / "later")})
    back = tmp_path / "back"
    got = get_files(parts, [session], back, lambda name: lambda done, total: None)
    assert sorted(Path(f.target).relative_to(back).as_posix() for f in got.files) == [
        "aligned/S1.bam",
        "aligned/S1.bam.bai",
        "aligned/S2.bam",
        "aligned/S2.bam.bai",
        "aligned/qc/S1.txt",
    ]
    assert (back / "aligned" / "S2.bam").read_bytes() == (out / "S2.bam").read_bytes()
    why = "not there (not written yet, or its job failed) on alice@login1:22"
    assert got.not_got == [f"{root / 'all.bam'}: {why}", f"{root / 'later'}: {why}"]

    (root / "empty").mkdir()
    none = parts.store.create()
    submitted(parts, none, "bwa_align", {**bwa, "output_dir": str(root / "empty")})
    got = get_files(parts, [none], back, lambda name: lambda done, total: None)
    assert got.files == []
    assert got.not_got == [
        f"{root / 'empty'}: a directory with no file below it on alice@login1:22"
    ]
