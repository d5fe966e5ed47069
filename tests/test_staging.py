"""rsync's output read as put/get read it (adapters/ssh/staging.py): its progress2 updates
told as they come, and its --stats counts, from a real rsync copying on this machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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
