"""A file the user names to write (-o, --save-plan) is written, never replaced by a plain
file where it is something else (src/jobsmith/files.py, write_output): as root, a fuzz
test's `--save-plan /dev/zero` once put a plan where /dev/zero was."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from jobsmith.files import write_output


def test_a_regular_file_is_replaced_whole_and_a_new_one_made(tmp_path: Path) -> None:
    old = tmp_path / "plan.yaml"
    old.write_text("old and longer\n")
    write_output(old, b"new\n")
    assert old.read_bytes() == b"new\n"
    write_output(tmp_path / "fresh.yaml", b"x")
    assert (tmp_path / "fresh.yaml").read_bytes() == b"x"


def test_a_symlink_stays_and_its_target_gets_the_data(tmp_path: Path) -> None:
    target = tmp_path / "real.html"
    target.write_text("before")
    link = tmp_path / "report.html"
    link.symlink_to(target)
    write_output(link, b"after")
    assert link.is_symlink() and target.read_bytes() == b"after"
    dangling = tmp_path / "to-be.html"
    dangling.symlink_to(tmp_path / "made.html")
    write_output(dangling, b"made")
    assert dangling.is_symlink() and (tmp_path / "made.html").read_bytes() == b"made"


def test_dev_null_is_written_into_and_stays_a_device() -> None:
    write_output(Path("/dev/null"), b"a plan nobody keeps\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_fifo_is_written_into_when_read_and_refused_at_once_when_not(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError):  # no reader: ENXIO now, not a hang
        write_output(fifo, b"lost")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    while True:  # the reader's open must come first, or the write is refused as above
        try:
            write_output(fifo, b"through the pipe" * 10_000)
            break
        except OSError:
            continue
    reader.join(10)
    assert got == [b"through the pipe" * 10_000]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_directory_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        write_output(tmp_path, b"x")
