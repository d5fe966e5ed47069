"""The job's paths asked where the job runs (adapters/files_there.py, issue 29 item 2):
the remote lookup's one command, run here through the local transport, answers what this
host's own resolution answers, for any name (spaces, quotes, newlines, bytes that are not
UTF-8), and the path policy judges its answer by the same rule. Over SSH to another
filesystem: tests/test_laptop_stage.py."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsmith.adapters.files_there import (
    FilesThere,
    look_argv,
    parse_look,
    parse_tree,
    read_argv,
    tree_argv,
)
from jobsmith.adapters.login_tools import WHAT, ToolMissing
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.transport import CommandResult
from jobsmith.errors import PolicyError, SchedulerError, TemplateError
from jobsmith.job_templates import TemplateLibrary, shipped_library
from jobsmith.job_templates.paths import LocalLookup, PathPolicy
from jobsmith.job_templates.render import render_body


class Counting:
    """The local transport, counting the commands it is asked to run."""

    def __init__(self) -> None:
        self.inner = LocalTransport()
        self.calls: list[tuple[str, ...]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        self.calls.append(tuple(argv))
        return self.inner.run(argv, timeout=timeout, stdin=stdin, env=env)


def there(transport: Counting | None = None) -> FilesThere:
    return FilesThere(transport or Counting(), "alice@login1:22")


#: one file name: any bytes but NUL and '/', as the OS hands them to Python
names = (
    st.binary(min_size=1, max_size=40)
    .filter(lambda b: b"\0" not in b and b"/" not in b and b not in (b".", b".."))
    .map(os.fsdecode)
)


@settings(max_examples=60, deadline=None)
@given(name=names, target=names)
def test_any_name_is_resolved_there_as_here(name: str, target: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp).resolve()
        (base / "d").mkdir()
        (base / "d" / target).write_bytes(b"x")
        link = base / name
        link.symlink_to(base / "d" / target)
        asked = [link, base / "d", base / "d" / name / "missing", base / "d" / target]
        assert there().look(asked) == LocalLookup().look(asked)


def test_a_name_with_a_newline_at_its_end_keeps_it() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp).resolve() / "ends\n\n"
        path.write_text("")
        fact = there().look([path])[path]
        assert (fact.real, fact.found) == (path, "file")


def test_a_symlink_loop_there_is_named_as_one(tmp_path: Path) -> None:
    """realpath -m leaves a loop unresolved (exit 0): the lookup finds the link it left
    and names the loop, as Path.resolve() does here, through a directory component too;
    a dangling link is only missing (leftover (ii) of issue 29 item 2)."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    asked = [loop, loop / "x", tmp_path / "a" / "x", tmp_path / "dangling"]
    facts = there().look(asked)
    assert facts[loop].real is None and facts[loop].problem == f"Symlink loop from '{loop}'"
    assert facts[loop / "x"].problem == f"Symlink loop from '{loop}'"
    assert facts[tmp_path / "a" / "x"].real is None
    assert facts[tmp_path / "a" / "x"].problem in (
        f"Symlink loop from '{tmp_path / 'a'}'",
        f"Symlink loop from '{tmp_path / 'b'}'",
    )
    assert (facts[tmp_path / "dangling"].real, facts[tmp_path / "dangling"].found) == (
        tmp_path / "nowhere",
        "missing",
    )


def test_an_input_through_a_symlink_loop_there_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    loop = tmp_path / "root" / "loop"
    loop.symlink_to(loop)
    with pytest.raises(TemplateError) as err:
        file_array(tmp_path, "loop/in.txt", Counting(), tmp_path / "root")
    assert "cannot resolve 'loop/in.txt' on alice@login1:22: " in str(err.value)
    assert f"Symlink loop from '{loop}'" in str(err.value)


def tools_but(tmp_path: Path, missing: str, replaced: Mapping[str, str] | None = None) -> Path:
    """A bin directory with this host's sh and coreutils the scripts use, but missing;
    replaced: tools that are these scripts instead."""
    bin_dir = tmp_path / f"bin-without-{missing}"
    bin_dir.mkdir()
    for tool in ("sh", "realpath", "od", "tr", "head", "base64", "printf", "mkdir"):
        if tool != missing:
            (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    for tool, script in (replaced or {}).items():
        (bin_dir / tool).unlink()
        (bin_dir / tool).write_text(script)
        (bin_dir / tool).chmod(0o755)
    return bin_dir


class WithPath(Counting):
    """The local transport, its commands run with PATH set to one directory."""

    def __init__(self, bin_dir: Path) -> None:
        super().__init__()
        self.bin_dir = bin_dir

    def run(self, argv: Sequence[str], **kw: Any) -> CommandResult:
        return super().run(argv, **{**kw, "env": {"PATH": str(self.bin_dir)}})


@pytest.mark.parametrize("missing", ["realpath", "od", "tr"])
def test_a_login_node_without_a_tool_of_the_lookup_gets_one_error_naming_it(
    tmp_path: Path, missing: str
) -> None:
    """Never a wrong answer (without od every path came back as '.'): the command
    checks for its tools first and ends naming the one missing (exit 2, ConfigError)."""
    files = there(WithPath(tools_but(tmp_path, missing)))
    with pytest.raises(ToolMissing) as err:
        files.look([tmp_path])
    assert err.value.tool == missing and err.value.exit_code == 2
    assert f"the login node alice@login1:22 has no {WHAT[missing]}" in str(err.value)


def test_a_realpath_without_m_busybox_style_is_named(tmp_path: Path) -> None:
    busybox = (
        '#!/bin/sh\ncase "$1" in -m) echo "realpath: unrecognized option: m" >&2; exit 1;; esac\n'
    )
    files = there(WithPath(tools_but(tmp_path, "none", {"realpath": busybox})))
    with pytest.raises(ToolMissing, match=r"has no GNU realpath \(coreutils, with -m\)"):
        files.look([tmp_path])


@pytest.mark.parametrize("missing", ["head", "base64"])
def test_a_login_node_without_a_tool_of_the_reading_gets_one_error_naming_it(
    tmp_path: Path, missing: str
) -> None:
    (tmp_path / "sheet.tsv").write_text("sample\n")
    with pytest.raises(ToolMissing, match=f"alice@login1:22 has no .*\\({missing}\\)"):
        there(WithPath(tools_but(tmp_path, missing))).read(tmp_path / "sheet.tsv")
    every = there(WithPath(tools_but(tmp_path, "none")))
    assert every.read(tmp_path / "sheet.tsv") == b"sample\n"  # with them all, it reads
    assert every.look([tmp_path])[tmp_path].found == "dir"


def test_an_answer_that_is_not_one_line_per_path_is_an_error() -> None:
    with pytest.raises(ValueError, match="1 answers for 2 paths"):
        parse_look([Path("/a"), Path("/b")], "m 2f61\n")
    assert look_argv([Path("/-x")])[-1] == "/-x"  # an argument, never code


def test_the_commands_failure_names_the_login_node() -> None:
    class Failing(Counting):
        def run(self, argv: Sequence[str], **kw: object) -> CommandResult:
            return CommandResult(tuple(argv), 127, "", "sh: realpath: not found")

    with pytest.raises(SchedulerError, match="on alice@login1:22: exit 127: sh: realpath"):
        there(Failing()).look([Path("/a")])


def file_array(tmp_path: Path, files: str, transport: Counting, log_dir: Path) -> object:
    paths = PathPolicy([tmp_path / "root"], tmp_path / "root", there(transport))
    paths.expect([log_dir, tmp_path / "root"])
    template = TemplateLibrary([shipped_library()]).get("file_array")
    params = {"files": files, "program": "cat"}
    rendered = render_body(template, params, allowed_roots=[], paths=paths)
    return rendered, paths


def test_every_path_of_a_submission_is_asked_in_one_command(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for name in ("a.txt", "b c.txt", "it's.txt"):
        (root / name).write_text(name)
    transport = Counting()
    rendered, paths = file_array(tmp_path, "a.txt,b c.txt,it's.txt", transport, root / "logs")
    assert paths.fact(root / "logs").found == "missing"  # asked with them: no more commands
    assert len(transport.calls) == 1, transport.calls
    assert rendered.input_paths == (root / "a.txt", root / "b c.txt", root / "it's.txt")  # type: ignore[attr-defined]


def test_a_symlink_out_of_the_roots_is_refused_naming_the_path_there(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "outside.txt").write_text("secret")
    (tmp_path / "root" / "in.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(PolicyError) as err:
        file_array(tmp_path, "in.txt", Counting(), tmp_path / "root")
    assert f"'in.txt' (resolves to '{tmp_path / 'outside.txt'}') on alice@login1:22" in str(
        err.value
    )
    assert f"outside the allowed roots: {tmp_path / 'root'}" in str(err.value)


def test_a_missing_input_is_named_with_the_host_it_is_missing_on(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    with pytest.raises(
        TemplateError, match=r"input '.*/root/gone.txt' does not exist on alice@login1:22"
    ):
        file_array(tmp_path, "gone.txt", Counting(), tmp_path / "root")


def test_the_log_directory_is_made_there_with_mkdir_p(tmp_path: Path) -> None:
    transport = Counting()
    deep = tmp_path / "a b" / "logs"
    there(transport).make_dirs(deep)
    assert deep.is_dir() and transport.calls == [("mkdir", "-p", "--", str(deep))]
    (tmp_path / "file").write_text("")
    with pytest.raises(SchedulerError, match=r"cannot make the directory .* on alice@login1:22"):
        there(transport).make_dirs(tmp_path / "file" / "logs")


def test_a_sample_sheet_is_read_there_and_its_cells_asked_at_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "reads").mkdir(parents=True)
    (root / "genome.fa").write_text(">x\n")
    rows = ["sample\tr1\tr2"]
    for i in range(4):
        for end in (1, 2):
            (root / "reads" / f"s{i}_{end}.fq").write_text("")
        rows.append(f"s{i}\ts{i}_1.fq\ts{i}_2.fq")
    (root / "reads" / "samples.tsv").write_text("\n".join(rows) + "\n")
    transport = Counting()
    paths = PathPolicy([root], root, there(transport))
    template = TemplateLibrary([shipped_library()]).get("bwa_align")
    params = {"reference": "genome.fa", "samples": "reads/samples.tsv", "output_dir": "out"}
    rendered = render_body(template, params, allowed_roots=[], paths=paths)
    assert root / "reads" / "s3_2.fq" in rendered.input_paths
    # the parameters' paths, the sheet's bytes, its 8 cells: three commands, not eleven
    assert [argv[2] for argv in transport.calls] == [
        argv[2] for argv in (look_argv([]), read_argv(root, 0), look_argv([]))
    ]


def test_a_sheet_that_is_not_a_file_there_cannot_be_read_and_says_where(tmp_path: Path) -> None:
    (tmp_path / "fifo").mkdir()
    with pytest.raises(OSError, match="not a regular file on alice@login1:22"):
        there().read(tmp_path / "fifo")
    big = tmp_path / "big"
    big.write_bytes(b"\xff" * 11)
    assert there().read(big, limit=11) == b"\xff" * 11  # bytes as they are, not UTF-8
    with pytest.raises(OSError, match="larger than 10 bytes"):
        there().read(big, limit=10)


def test_a_directory_is_listed_and_resolved_there_in_one_command(tmp_path: Path) -> None:
    """What `get SESSION` gets of a directory output (FilesThere.tree): every regular file
    below it, at any depth and of any name, and every symlink with where it resolves
    there, in one command; a symlinked directory is listed, not descended; what an
    interrupted copy left (`.jobsmith-partial`) and what is neither a file nor a symlink
    (a fifo) are not listed."""
    top = tmp_path / "out"
    odd = os.fsdecode(b"it's a\nname \xff.bam")
    (top / "deep" / "er").mkdir(parents=True)
    (top / "S1.bam").write_bytes(b"1")
    (top / "deep" / "er" / odd).write_bytes(b"2")
    (tmp_path / "elsewhere").mkdir()
    (top / "to-dir").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "not-below.bam").write_bytes(b"3")
    (top / "to-file").symlink_to(top / "S1.bam")
    (top / "dangling").symlink_to(top / "nowhere")
    (top / ".jobsmith-partial").mkdir()
    (top / ".jobsmith-partial" / "S2.bam").write_bytes(b"4")
    (top / "S3.bam.jobsmith-partial").write_bytes(b"5")
    os.mkfifo(top / "fifo")
    transport = Counting()
    listed = there(transport).tree(top, 10, ".jobsmith-partial")
    assert listed is not None and len(transport.calls) == 1
    facts = {entry.path: (entry.fact.real, entry.fact.found) for entry in listed}
    assert facts == {
        top / "S1.bam": (top / "S1.bam", "file"),
        top / "deep" / "er" / odd: (top / "deep" / "er" / odd, "file"),
        top / "to-dir": (tmp_path / "elsewhere", "dir"),
        top / "to-file": (top / "S1.bam", "file"),
        top / "dangling": (top / "nowhere", "missing"),
    }


def test_a_directory_over_the_limit_is_answered_as_such_not_listed(tmp_path: Path) -> None:
    for n in range(5):
        (tmp_path / f"f{n}").write_bytes(b"")
    assert there().tree(tmp_path, 4, ".jobsmith-partial") is None
    listed = there().tree(tmp_path, 5, ".jobsmith-partial")
    assert listed is not None and len(listed) == 5
    (tmp_path / "empty").mkdir()
    assert there().tree(tmp_path / "empty", 5, ".jobsmith-partial") == []


def test_a_directory_that_is_not_one_there_cannot_be_listed_and_says_where(
    tmp_path: Path,
) -> None:
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(SchedulerError, match=r"cannot list the directory .*/f on alice@login1:22"):
        there().tree(tmp_path / "f", 5, ".jobsmith-partial")
    with pytest.raises(ValueError, match="not a listing"):
        parse_tree("66 00")  # one field, not three
    assert tree_argv(Path("/-x"), 3, "p")[4] == "/-x"  # an argument, never code


@pytest.mark.parametrize("missing", ["find", "wc"])
def test_a_login_node_without_a_tool_of_the_listing_gets_one_error_naming_it(
    tmp_path: Path, missing: str
) -> None:
    bin_dir = tools_but(tmp_path, missing)
    for tool in ("find", "wc"):
        if tool != missing:
            (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    with pytest.raises(ToolMissing) as err:
        there(WithPath(bin_dir)).tree(tmp_path, 5, ".jobsmith-partial")
    assert err.value.tool == missing
    assert f"the login node alice@login1:22 has no {WHAT[missing]}" in str(err.value)
