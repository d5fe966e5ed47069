"""Every file a person names is a regular file of bounded size, read with a bound (issue
24, part 4): `--params-file /dev/zero` grew to 12.8 GB, `plan check /dev/zero` to 17 GB,
/dev/urandom hung, a FIFO blocked `--params-file`, `plan check` and `transcode`, and a
50 MB YAML list passed 4 GB. Each is now one line and exit 2, at once. No Slurm."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from lab_cli import LAB_SITE

from jobsmith.files import MAX_INPUT_BYTES, read_bounded


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, under a 1 GiB address-space cap and a timeout."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    argv = [sys.executable, "-m", "jobsmith", "--site", str(LAB_SITE), *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, preexec_fn=cap)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return path


@pytest.fixture
def big(tmp_path: Path) -> Path:
    path = tmp_path / "big.yaml"
    line = b"- sample_with_a_long_name_0000000000\n"
    path.write_bytes(b"files:\n" + line * (MAX_INPUT_BYTES // len(line) + 10))
    return path


@pytest.mark.parametrize("which", ["/dev/zero", "/dev/urandom", "fifo", "big", "dir"])
@pytest.mark.parametrize("command", ["params-file", "plan check"])
def test_a_file_that_never_ends_or_is_no_file_is_one_line_and_exit_2(
    which: str, command: str, fifo: Path, big: Path, tmp_path: Path
) -> None:
    path = {"fifo": str(fifo), "big": str(big), "dir": str(tmp_path)}.get(which, which)
    if command == "params-file":
        out = _run("render", "command", "--params-file", path, cwd=tmp_path)
    else:
        out = _run("plan", "check", path, cwd=tmp_path)
    assert out.returncode == 2, (out.returncode, out.stderr[-500:])
    assert "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    said = ("not a regular file", f"larger than {MAX_INPUT_BYTES} bytes", "is a directory")
    assert any(reason in line for reason in said), line


def test_transcode_refuses_a_fifo_as_its_source(fifo: Path, tmp_path: Path) -> None:
    out = _run("transcode", str(fifo), str(tmp_path / "out.mkv"), cwd=tmp_path)
    assert out.returncode == 2 and "is not a regular file" in out.stderr, out.stderr


def test_read_bounded_reads_a_regular_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_bytes(b"a: 1\n" * 1000)
    assert read_bounded(path) == b"a: 1\n" * 1000
    with pytest.raises(OSError, match="larger than 10 bytes"):
        read_bounded(path, limit=10)
