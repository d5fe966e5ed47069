"""Numbers are read as people type them, and only then (issue 24, parts 4-6): ASCII digits
only (Python's int() and click's number types also read other scripts' digits, so
`--time ١٠` was ten minutes and `--mem ٤G` four GiB), never nan or inf (a NaN interval
ran, a NaN chunk length planned one segment), and a frame range is capped before any
memory is spent on it. Each is one line and exit 2, through the CLI; no Slurm."""

from __future__ import annotations

from pathlib import Path

import pytest
from lab_cli import js

from jobsmith.agent.runtime.workflows.frames import MAX_FRAMES, parse_frames
from jobsmith.errors import InputError
from jobsmith.units import parse_duration, parse_memory


@pytest.mark.parametrize("text", ["١٠", "१०", "１０", "1-٠٠:٠٠"])
def test_a_duration_in_other_digits_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["٤G", "４G", "٥٠٠"])
def test_a_memory_size_in_other_digits_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="invalid memory size"):
        parse_memory(text)


def test_ascii_forms_still_read() -> None:
    assert parse_duration("10") == 600 and parse_duration("1-00:00") == 86400
    assert parse_memory("4G") == 4096 and parse_frames(" 1-250 ") == (1, 250)


@pytest.mark.parametrize("text", ["١-٩", "1_000", "1 - 5", "-3", "5-2", "1-99999999"])
def test_frames_are_ascii_bounded_and_in_order(text: str) -> None:
    with pytest.raises(InputError, match="--frames"):
        parse_frames(text)
    assert parse_frames(f"0-{MAX_FRAMES - 1}") == (0, MAX_FRAMES - 1)


@pytest.mark.parametrize(
    "args",
    [
        ("render", "command", "-P", "command=true", "--time", "١٠"),
        ("render", "command", "-P", "command=true", "--mem", "٤G"),
        ("render", "command", "-P", "command=true", "--gpus", "١"),
        ("mcp", "--token-ttl", "NaN"),
        ("mcp", "--interval", "nan"),
        ("chat", "--interval", "inf"),
        ("watch", "--interval", "NaN"),
        ("wait", "1", "--timeout", "١٠"),
    ],
    ids=lambda a: " ".join(a[:1] + a[-2:]) if isinstance(a, tuple) else str(a),
)
def test_the_cli_refuses_them_in_one_line_with_exit_2(args: tuple[str, ...]) -> None:
    out = js(*args)
    assert out.exit_code == 2, out.output
    assert "Traceback" not in out.output


def test_transcode_and_render_frames_refuse_them_before_any_work(tmp_path: Path) -> None:
    source = tmp_path / "in.mp4"
    source.write_bytes(b"")
    out = js("transcode", str(source), str(tmp_path / "o.mkv"), "--chunk-seconds", "NaN")
    assert out.exit_code == 2 and "Traceback" not in out.output
    out = js("transcode", str(source), str(tmp_path / "o.mkv"), "--crf", "٢٣")
    assert out.exit_code == 2 and "Traceback" not in out.output
    blend = tmp_path / "s.blend"
    blend.write_bytes(b"")
    out = js("render-frames", str(blend), str(tmp_path / "f"), "--frames", "1-99999999")
    assert out.exit_code == 2 and f"workload cap of {MAX_FRAMES:,}" in out.output


@pytest.mark.parametrize(
    "option", ["--partition", "--account", "--qos", "--time", "--mem", "--log-dir"]
)
def test_an_empty_value_is_refused_not_taken_for_the_default(option: str) -> None:
    """`--partition ''` fell back to the site's default, `--log-dir ''` meant here."""
    out = js("render", "command", "-P", "command=true", option, "")
    assert out.exit_code == 2, out.output
    assert "is empty" in out.output and "Traceback" not in out.output
