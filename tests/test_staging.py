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
