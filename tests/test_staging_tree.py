"""A directory got from the cluster (issue 29's leftover): Stager.tree lists and checks it
through the remote lookup's own command (run here through the local transport, this
host's files standing for the cluster's), get_tree copies its files below DIR/NAME, and
`get SESSION` fetches a declared output that is a directory. Over SSH to another
filesystem: tests/test_staging_laptop.py (the bwa_align array)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest


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
