"""Tests for job_templates: loading, validation, path policy, quoting, rendering, real runs.

Rendered bodies are compared with tests/fixtures/rendered/<name>.sh (tests/golden.py);
the tests only compare. After an intended change, rewrite them with
`scripts/regen-fixtures` and review the diff. The real runs execute bodies with bash on
tiny generated data (ffmpeg, bwa, samtools); they skip where those tools are missing.
"""

from __future__ import annotations

import os
import random
import re
import shlex
import shutil
import stat
import subprocess
import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from golden import GOLDEN, golden_names, reference_text, regenerate
from template_examples import create_input, example_params, write_bwa_inputs, write_table

from jobsmith.adapters.options import JobOptions
from jobsmith.errors import PolicyError, TemplateError
from jobsmith.job_templates import (
    RenderedBody,
    Template,
    TemplateLibrary,
    render_body,
    shipped_library,
)
from jobsmith.job_templates.params import ParamSpec, ParamType, PathRole
from jobsmith.job_templates.quoting import EscapeError, concat_file, q, qlist

REPO = Path(__file__).resolve().parent.parent
SHIPPED = [
    "blender_frames",
    "blender_render",
    "bwa_align",
    "command",
    "ffmpeg_audio",
    "ffmpeg_chunks",
    "ffmpeg_concat",
    "ffmpeg_mux_verify",
    "ffmpeg_segments",
    "file_array",
    "frames_check",
    "frames_encode",
    "frames_thumbs",
    "nextflow_head",
    "pipeline_head",
    "samtools_merge",
    "torch_train",
    "video_keyframes",
]

# Programs the bodies call, replaced by no-op stubs when a body runs with hostile values.
STUBBED = [
    "blender",
    "bwa",
    "ffmpeg",
    "ffprobe",
    "gzip",
    "nextflow",
    "samtools",
    "scontrol",
    "snakemake",
    "srun",
    "torchrun",
]

# Each would create a file named PWNED if it ever ran as shell code.
PAYLOADS = [
    "x; touch PWNED",
    "$(touch PWNED)",
    "`touch PWNED`",
    "x' ; touch PWNED ; '",
    'x" ; touch PWNED ; "',
    "x && touch PWNED #",
    "${IFS}touch${IFS}PWNED",
    "-rf PWNED",
    "x\n#SBATCH --partition=PWNED",
    "x\r\n#SBATCH --partition=PWNED",
    "x\u2028touch PWNED",
    "x\ttouch PWNED",
    "x\x00touch PWNED",
]


# --- helpers ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def library() -> TemplateLibrary:
    return TemplateLibrary([shipped_library()])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def render(template: Template, params: Mapping[str, object], root: Path) -> RenderedBody:
    return render_body(template, params, allowed_roots=[root], base_dir=root)


def bash_syntax_ok(body: str) -> None:
    result = subprocess.run(["bash", "-n"], input=body, text=True, capture_output=True)
    assert result.returncode == 0, result.stderr


def run_body(body: str, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a body as a batch job would (from a file, not stdin), with SLURM_* vars in env."""
    script = cwd / f"job{random.randrange(10**9)}.sh"
    script.write_text(body)
    full_env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "SLURM_JOB_ID": "1",
        "SLURM_CPUS_PER_TASK": "1",
        "SLURM_JOB_NODELIST": "node1",
        **env,
    }
    return subprocess.run(
        ["bash", str(script)], cwd=cwd, env=full_env, text=True, capture_output=True, timeout=120
    )


_HEREDOC = re.compile(r"<<-?[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def unprotected(script: str) -> str:
    """The text bash would treat as code: all but single-quoted text, backslash-escaped
    characters and the bodies of here-documents with a quoted delimiter.

    Conservative: double-quoted text and comments count as code, since `$(…)` and
    backticks are live in double quotes (so `"$(cmd 'x')"` is flagged although bash
    would quote x: templates avoid that form).
    """
    kept: list[str] = []
    lines: Iterator[str] = iter(script.split("\n"))
    in_single = False
    for line in lines:
        code, in_single, heredocs = _scan(line, in_single)
        kept.append(code)
        for delimiter, quoted in heredocs:
            for doc_line in lines:
                if doc_line == delimiter:
                    break
                if not quoted:  # expansions are live in an unquoted here-document
                    kept.append(doc_line)
    return "\n".join(kept)


def _scan(line: str, in_single: bool) -> tuple[str, bool, list[tuple[str, bool]]]:
    code: list[str] = []
    heredocs: list[tuple[str, bool]] = []
    in_double = False
    i = 0
    while i < len(line):
        char = line[i]
        if in_single:
            in_single = char != "'"
            i += 1
        elif char == "\\":
            code.append(line[i : i + 2] if in_double else "")
            i += 2
        elif char == "'" and not in_double:
            in_single = True
            i += 1
        elif char == '"':
            in_double = not in_double
            code.append(char)
            i += 1
        elif not in_double and char == "#" and (i == 0 or line[i - 1] in " \t;&|()"):
            code.append(line[i:])  # a comment: kept (conservative), its quotes mean nothing
            break
        elif not in_double and (match := _HEREDOC.match(line, i)):
            heredocs.append((match.group(2), bool(match.group(1))))
            code.append(match.group(0))
            i = match.end()
        else:
            code.append(char)
            i += 1
    return "".join(code), in_single, heredocs


def has_control(text: str) -> bool:
    return any(unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp"} for c in text)


# --- the shipped library ---------------------------------------------------------------


def test_library_ships_the_templates(library: TemplateLibrary) -> None:
    assert set(SHIPPED) <= set(library.names())
    for template in library.list():
        assert template.description
        for name, spec in template.spec.params.items():
            assert spec.description, name
            assert not spec.required or spec.example is not None, name


@pytest.mark.parametrize("name", SHIPPED)
def test_renders_examples_like_the_reference(
    library: TemplateLibrary, root: Path, name: str
) -> None:
    template = library.get(name)
    text = reference_text(template, root)
    reference = GOLDEN / f"{name}.sh"
    assert reference.exists(), f"no {reference}; write it with scripts/regen-fixtures"
    assert text == reference.read_text(), f"{reference} differs: see scripts/regen-fixtures"
    bash_syntax_ok(render(template, example_params(template, root), root).body)


def test_each_shipped_template_has_exactly_one_golden_file() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.sh")) == golden_names() == sorted(SHIPPED)


def test_regeneration_is_a_command_that_names_what_changed(tmp_path: Path) -> None:
    assert regenerate(tmp_path) == golden_names()  # all new
    assert regenerate(tmp_path) == []
    for name in golden_names():  # the same text the committed files have
        assert (tmp_path / f"{name}.sh").read_text() == (GOLDEN / f"{name}.sh").read_text()
    (tmp_path / "command.sh").write_text("# edited by hand\n")
    assert regenerate(tmp_path) == ["command"]


def test_regeneration_is_refused_under_ci() -> None:
    before = {p.name: p.stat().st_mtime_ns for p in GOLDEN.iterdir()}
    env = {**os.environ, "CI": "true"}
    run = subprocess.run(
        [str(REPO / "scripts" / "regen-fixtures")], env=env, capture_output=True, text=True
    )
    assert run.returncode == 2
    assert "refused under CI" in run.stderr
    assert {p.name: p.stat().st_mtime_ns for p in GOLDEN.iterdir()} == before


@pytest.mark.parametrize("name", SHIPPED)
def test_resources_and_array_fit_sbatch_options(
    library: TemplateLibrary, root: Path, name: str
) -> None:
    template = library.get(name)
    rendered = render(template, example_params(template, root), root)
    options = JobOptions.model_validate({"job_name": "t", **rendered.sbatch_fields()})
    assert options.array_size() == (rendered.array.count if rendered.array else 1)
    assert not re.search(r"^\s*#\s*SBATCH", rendered.body, re.MULTILINE | re.IGNORECASE)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_body_starts_with_a_command(library: TemplateLibrary, root: Path, name: str) -> None:
    # sbatch reads directives only up to the first command; set -e… is that command.
    template = library.get(name)
    body = render(template, example_params(template, root), root).body
    assert body.startswith("set -euo pipefail\n")
    assert body.endswith("\n") and not body.endswith("\n\n")


# --- hostile values --------------------------------------------------------------------
#
# Every payload goes into every parameter of every shipped template. Before anything
# runs, each case is classified from the parameter's spec alone (not by the code under
# test): either the value is valid for its type, and then it must render, stay data and,
# where the body runs, let the body run to its end (exit 0) without the payload running;
# or it is refused, and then for the reason its class calls for. The two kinds are two
# tests, with the class in each refused case's id, so a run reports real renders apart
# from refusals (`pytest --co -q -k hostile` lists them; the tally test counts them).

# What check_text refuses in every text value (job_templates/values.py).
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
# Where a path payload goes: the pattern check sees the resolved path (any root here is
# one of plain names, as tmp_path's are).
_PATH_PREFIX = "/ROOT/hostile/"


def _first_control(text: str) -> str | None:
    return next((c for c in text if unicodedata.category(c) in _CONTROL_CATEGORIES), None)


def _expected_refusal(spec: ParamSpec, payload: str) -> tuple[str, str] | None:
    """(class, regex the refusal must match) for payload in a parameter like spec, or
    None if the value is valid for its type and must render."""
    control = _first_control(payload)
    kind = spec.type
    if kind is ParamType.INT:
        return "type", rf"expected an integer, got {re.escape(repr(payload))}"
    if kind is ParamType.FLOAT:  # no text of these payloads is a number, control or not
        return "type", rf"expected a number, got {re.escape(repr(payload))}"
    if kind is ParamType.BOOL:
        return "type", rf"expected true or false .*, got {re.escape(repr(payload))}"
    if kind is ParamType.TABLE and ("\n" in payload or "\t" in payload):
        # in a sheet a newline ends the row and a tab ends the cell: the row breaks apart
        assert spec.columns is not None
        return "sheet", rf"line 2: \d+ fields, expected {len(spec.columns)}$"
    if kind is ParamType.TEXT:  # a file's lines: newlines and tabs are its data
        control = _first_control(payload.replace("\n", "").replace("\t", ""))
        if control is None and re.search(r"^#SBATCH", payload, re.MULTILINE):
            # a line of the text would look like a directive in the script: refused whole
            return "directive", r"has a line starting with #SBATCH"
    if control is not None:
        return "control", rf"contains a control character \(U\+{ord(control):04X}\)"
    if spec.choices is not None:
        valid = ", ".join(str(choice) for choice in spec.choices)
        return "choice", rf"is not a valid choice; valid: {re.escape(valid)}$"
    texts = {
        ParamType.PATH: [_PATH_PREFIX + payload],
        ParamType.PATHS: [_PATH_PREFIX + payload],
        ParamType.ARGS: [payload, "ok"],
        ParamType.STR: [payload],
    }.get(kind, [])
    if spec.pattern is not None and any(not re.fullmatch(spec.pattern, t) for t in texts):
        return "pattern", rf"does not match the pattern {re.escape(spec.pattern)}"
    return None


def _hostile_cases() -> Iterator[tuple[str, str, int, str, tuple[str, str] | None]]:
    library = TemplateLibrary([shipped_library()])
    for name in SHIPPED:
        for param, spec in library.get(name).spec.params.items():
            for index, payload in enumerate(PAYLOADS):
                yield name, param, index, payload, _expected_refusal(spec, payload)


HOSTILE = list(_hostile_cases())
HOSTILE_RENDERS = [
    pytest.param(name, param, payload, id=f"{name}-{param}-{index}")
    for name, param, index, payload, refusal in HOSTILE
    if refusal is None
]
HOSTILE_REFUSALS = [
    pytest.param(name, param, payload, refusal[1], id=f"{refusal[0]}-{name}-{param}-{index}")
    for name, param, index, payload, refusal in HOSTILE
    if refusal is not None
]


def _hostile_value(spec: ParamSpec, payload: str, root: Path) -> object:
    """payload as a value of spec's type; for paths, a file named payload under root."""
    path = root / "hostile" / payload
    is_input_path = spec.type in {ParamType.PATH, ParamType.PATHS} and spec.role is PathRole.INPUT
    if is_input_path and not has_control(payload):
        create_input(path, spec.kind)
    if spec.type is ParamType.PATH:
        return str(path)
    if spec.type is ParamType.PATHS:
        return [str(path)]
    if spec.type is ParamType.ARGS:
        return [payload, "ok"]
    if spec.type is ParamType.TABLE:
        return str(_hostile_sheet(root / "hostile.tsv", spec, payload))
    return payload


def _hostile_sheet(sheet: Path, spec: ParamSpec, payload: str) -> Path:
    """A valid sheet whose first path cell (row 1, line 2) is hostile/<payload>; the file
    it names exists unless no file can have that name."""
    if not has_control(payload):
        write_table(sheet, spec, first_path=f"hostile/{payload}")
        return sheet
    write_table(sheet, spec)
    header, first, *rest = sheet.read_text().split("\n")
    assert spec.columns is not None
    cells = first.split("\t")
    column = next(i for i, kind in enumerate(spec.columns.values()) if kind.value == "path")
    cells[column] = f"hostile/{payload}"
    sheet.write_text("\n".join([header, "\t".join(cells), *rest]))
    return sheet


def _stub_bin(directory: Path) -> Path:
    """No-op programs, except that each writes the file its `-o` names, as the real
    ones would (samtools sort's output is renamed by the next line of the body)."""
    directory.mkdir(exist_ok=True)
    for program in STUBBED:
        stub = directory / program
        stub.write_text(
            "#!/bin/sh\n"
            'while [ $# -gt 0 ]; do [ "$1" = -o ] && [ $# -gt 1 ] && : > "$2"; shift; done\n'
            "exit 0\n"
        )
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    return directory


def _make_runnable(name: str, params: Mapping[str, object], root: Path) -> None:
    """What a body needs of its inputs beyond what the spec checks, to run to its end:
    ffmpeg_concat writes its list into chunk_dir (a directory; the spec says only that it
    is an input), frames_check reads the frames, torch_train sources venv/bin/activate."""
    if name == "ffmpeg_concat":
        chunks = root / str(params["chunk_dir"])
        if chunks.is_file():
            chunks.unlink()
        chunks.mkdir(parents=True, exist_ok=True)
    if name == "frames_check":  # the frames a render wrote (the spec cannot say so)
        frames = root / str(params["frames_dir"])
        if frames.is_file():
            frames.unlink()
        frames.mkdir(parents=True, exist_ok=True)
        for frame in range(int(str(params["frame_start"])), int(str(params["frame_end"])) + 1):
            (frames / f"frame_{frame:05d}.{params.get('extension', 'png')}").write_text("x")
    if name == "torch_train" and params.get("venv") is not None:
        (root / str(params["venv"]) / "bin").mkdir(parents=True, exist_ok=True)
        (root / str(params["venv"]) / "bin" / "activate").touch()


@pytest.mark.parametrize(("name", "param", "payload"), HOSTILE_RENDERS)
def test_hostile_value_renders_inert(
    library: TemplateLibrary, root: Path, tmp_path: Path, name: str, param: str, payload: str
) -> None:
    template = library.get(name)
    spec = template.spec.params[param]
    params = example_params(template, root)
    params[param] = _hostile_value(spec, payload, root)
    rendered = render(template, params, root)
    bash_syntax_ok(rendered.body)
    assert "PWNED" not in unprotected(rendered.body), rendered.body
    if spec.type is ParamType.COMMAND:
        # The user's command is code by design: it must stay one word of one line.
        last = rendered.body.rstrip("\n").split("\n")[-1]
        assert shlex.split(last) == ["exec", "bash", "-c", "--", payload]
        return
    _make_runnable(name, params, root)
    stubs = _stub_bin(tmp_path / "stubs")
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "SLURM_ARRAY_TASK_ID": "0"}
    job = run_body(rendered.body, root, env)
    # exit 0: the body ran to its end, through every line that uses the value
    assert job.returncode == 0, job.stderr
    assert not list(tmp_path.rglob("PWNED")), "the payload ran as shell code"


@pytest.mark.parametrize(("name", "param", "payload", "reason"), HOSTILE_REFUSALS)
def test_hostile_value_is_refused_for_its_class(
    library: TemplateLibrary, root: Path, name: str, param: str, payload: str, reason: str
) -> None:
    template = library.get(name)
    params = example_params(template, root)
    params[param] = _hostile_value(template.spec.params[param], payload, root)
    with pytest.raises(TemplateError) as refused:
        render(template, params, root)
    message = str(refused.value)
    assert message.startswith(f"template {name!r}: parameter {param!r}"), message
    assert re.search(reason, message), message


def test_hostile_cases_are_mostly_real_renders_of_every_template() -> None:
    """What the two tests above run, counted: most cases are real renders, and every
    template has renders whose body runs (not only type refusals)."""
    tally = Counter(refusal[0] if refusal else "render" for *_, refusal in HOSTILE)
    print(f"hostile values, {len(HOSTILE)} cases:", dict(tally.most_common()))
    assert set(tally) == {"render", "control", "sheet", "type", "choice", "pattern", "directive"}, (
        tally
    )
    library = TemplateLibrary([shipped_library()])
    for name in SHIPPED:
        runs = [
            p
            for n, p, _, _, refusal in HOSTILE
            if n == name
            and refusal is None
            and library.get(n).spec.params[p].type is not ParamType.COMMAND
        ]
        assert len(runs) >= len([x for x in PAYLOADS if not has_control(x)]), (name, runs)


def test_newline_cannot_inject_a_directive(library: TemplateLibrary, root: Path) -> None:
    template = library.get("command")
    with pytest.raises(TemplateError, match=r"parameter 'command': contains a control character"):
        render(template, {"command": "true\n#SBATCH --partition=gpu"}, root)


def test_unquoted_scanner_sees_unquoted_text() -> None:
    # The scanner must itself catch the mistakes it guards against.
    assert "PWNED" in unprotected("echo x; touch PWNED")
    assert "PWNED" in unprotected('echo "$(touch PWNED)"')
    assert "PWNED" in unprotected("cat <<EOF\n$(touch PWNED)\nEOF\n")
    assert "PWNED" not in unprotected("echo 'x; touch PWNED'")
    assert "PWNED" not in unprotected("cat <<'EOF'\n$(touch PWNED)\nEOF\necho")
    assert "PWNED" not in unprotected(f"echo {shlex.quote(PAYLOADS[3])}")
    assert "PWNED" in unprotected("# it's a comment\necho $(touch PWNED) '")
    assert "PWNED" in unprotected("echo ${#x} $(touch PWNED)")


# --- paths -----------------------------------------------------------------------------


def test_path_outside_roots_refused(library: TemplateLibrary, root: Path, tmp_path: Path) -> None:
    template = library.get("ffmpeg_chunks")
    params = example_params(template, root)
    outside = tmp_path / "outside.mp4"
    outside.touch()
    with pytest.raises(PolicyError) as info:
        render(template, {**params, "input": str(outside)}, root)
    message = str(info.value)
    assert "'input'" in message and str(outside) in message and str(root) in message


def test_dotdot_escape_refused(library: TemplateLibrary, root: Path, tmp_path: Path) -> None:
    template = library.get("ffmpeg_chunks")
    params = example_params(template, root)
    (tmp_path / "outside.mp4").touch()
    with pytest.raises(PolicyError, match=r"parameter 'input'.*resolves to"):
        render(template, {**params, "input": "media/../../outside.mp4"}, root)
    with pytest.raises(PolicyError, match="parameter 'output_dir'"):
        render(template, {**params, "output_dir": "../elsewhere"}, root)


def test_symlink_escape_refused(library: TemplateLibrary, root: Path, tmp_path: Path) -> None:
    template = library.get("ffmpeg_chunks")
    params = example_params(template, root)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "in.mp4").touch()
    (root / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(PolicyError, match=r"'link/in.mp4' \(resolves to .*secret/in.mp4'\)"):
        render(template, {**params, "input": "link/in.mp4"}, root)
    with pytest.raises(PolicyError, match="parameter 'output_dir'"):
        render(template, {**params, "output_dir": "link/chunks"}, root)


def test_symlinked_root_still_contains_its_files(
    library: TemplateLibrary, root: Path, tmp_path: Path
) -> None:
    template = library.get("ffmpeg_chunks")
    params = example_params(template, root)
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    rendered = render_body(template, params, allowed_roots=[alias], base_dir=alias)
    assert rendered.input_paths == (root.resolve() / "media/input.mp4",)


def test_missing_input_refused(library: TemplateLibrary, root: Path) -> None:
    template = library.get("ffmpeg_chunks")
    params = {**example_params(template, root), "input": "media/nope.mp4"}
    with pytest.raises(TemplateError, match=r"parameter 'input': input '.*media/nope.mp4' does"):
        render(template, params, root)
    rendered = render_body(
        template, params, allowed_roots=[root], base_dir=root, check_inputs=False
    )
    assert rendered.input_paths == (root / "media/nope.mp4",)


def test_input_of_wrong_kind_refused(library: TemplateLibrary, root: Path) -> None:
    template = library.get("command")
    (root / "afile").touch()
    with pytest.raises(TemplateError, match=r"parameter 'workdir'.* is not a directory"):
        render(template, {"command": "true", "workdir": "afile"}, root)


def test_tilde_is_not_expanded(library: TemplateLibrary, root: Path) -> None:
    template = library.get("ffmpeg_chunks")
    params = {**example_params(template, root), "input": "~/in.mp4"}
    with pytest.raises(TemplateError, match="starts with '~'"):
        render(template, params, root)


def test_no_roots_refuses_every_path(library: TemplateLibrary, root: Path) -> None:
    template = library.get("ffmpeg_chunks")
    with pytest.raises(PolicyError, match=r"\(none configured\)"):
        render_body(template, example_params(template, root), allowed_roots=[], base_dir=root)


# --- parameter validation --------------------------------------------------------------


def test_unknown_parameter_lists_valid_ones(library: TemplateLibrary, root: Path) -> None:
    template = library.get("ffmpeg_chunks")
    params = {**example_params(template, root), "inptu": "x"}
    with pytest.raises(TemplateError) as info:
        render(template, params, root)
    assert str(info.value).startswith(
        "template 'ffmpeg_chunks': unknown parameter 'inptu' (did you mean 'input'?); "
        "valid: input, output_dir, duration_s, chunk_seconds,"
    )


def test_bad_choice_lists_choices(library: TemplateLibrary, root: Path) -> None:
    template = library.get("ffmpeg_chunks")
    params = {**example_params(template, root), "video_codec": "h264"}
    with pytest.raises(TemplateError) as info:
        render(template, params, root)
    assert str(info.value) == (
        "template 'ffmpeg_chunks': parameter 'video_codec': 'h264' is not a valid choice; "
        "valid: libx264, libx265"
    )


def test_missing_required_names_it_with_an_example(library: TemplateLibrary, root: Path) -> None:
    template = library.get("ffmpeg_chunks")
    params = example_params(template, root)
    del params["duration_s"]
    with pytest.raises(TemplateError, match=r"parameter 'duration_s' is required: .*e\.g\. 600"):
        render(template, params, root)


@pytest.mark.parametrize(
    ("param", "value", "problem"),
    [
        ("chunk_seconds", "ten", "expected an integer, got 'ten'"),
        ("chunk_seconds", "1_0", "expected an integer"),
        ("chunk_seconds", True, "expected an integer"),
        ("chunk_seconds", "0", "0 is below the minimum 1"),
        ("crf", 99, "99 is above the maximum 51"),
        ("duration_s", "nan", "expected a finite number"),
        ("duration_s", "soon", "expected a number"),
        ("preset", 3.5, "expected text, got float"),
        ("input", "", "is empty"),
    ],
)
def test_bad_values_are_named(
    library: TemplateLibrary, root: Path, param: str, value: object, problem: str
) -> None:
    template = library.get("ffmpeg_chunks")
    params = {**example_params(template, root), param: value}
    with pytest.raises(TemplateError) as info:
        render(template, params, root)
    assert str(info.value).startswith(f"template 'ffmpeg_chunks': parameter {param!r}: ")
    assert problem in str(info.value)


def test_cli_strings_and_typed_values_agree(library: TemplateLibrary, root: Path) -> None:
    template = library.get("torch_train")
    params = example_params(template, root)
    (root / "venv").mkdir()
    as_strings = {
        **params,
        "gpus": "4",
        "nodes": "2",
        "script_args": "--lr 0.1 --name 'my run'",
        "venv": "venv",
    }
    typed = {
        **params,
        "gpus": 4,
        "nodes": 2,
        "script_args": ["--lr", "0.1", "--name", "my run"],
        "venv": "venv",
    }
    from_strings, from_typed = render(template, as_strings, root), render(template, typed, root)
    assert from_strings.body == from_typed.body
    assert from_strings.params == from_typed.params
    assert from_typed.params["script_args"] == ("--lr", "0.1", "--name", "my run")
    assert "--name 'my run'" in from_typed.body


def test_bool_and_paths_from_strings(library: TemplateLibrary, root: Path) -> None:
    template = library.get("file_array")
    params = example_params(template, root)
    rendered = render(template, {**params, "files": "data/a.txt,data/c.txt"}, root)
    assert rendered.params["files"] == (root / "data/a.txt", root / "data/c.txt")
    assert rendered.array is not None and rendered.array.spec == "0-1"
    bwa = library.get("bwa_align")
    for text, expected in [("no", False), ("YES", True), ("0", False), ("on", True)]:
        values = {**example_params(bwa, root), "read_group": text}
        assert render(bwa, values, root).params["read_group"] is expected
    with pytest.raises(TemplateError, match="expected true or false"):
        render(bwa, {**example_params(bwa, root), "read_group": "maybe"}, root)


def test_resources_follow_parameters(library: TemplateLibrary, root: Path) -> None:
    template = library.get("torch_train")
    params = {**example_params(template, root), "gpus": 4, "nodes": 2, "cpus": 16}
    rendered = render(template, params, root)
    assert rendered.resources.sbatch_fields() == {
        "cpus_per_task": 16,
        "mem_mb": 64000,
        "time_limit_s": 86400,
        "gpus": 4,
        "nodes": 2,
        "ntasks": 2,
    }
    assert "--nproc_per_node=4 " in rendered.body and "--nnodes=2 " in rendered.body


@pytest.mark.parametrize(
    ("name", "overrides", "spec"),
    [
        ("ffmpeg_chunks", {"duration_s": 4, "chunk_seconds": 1}, "0-3"),
        ("ffmpeg_chunks", {"duration_s": 4.0000001, "chunk_seconds": 1}, "0-3"),
        ("ffmpeg_chunks", {"duration_s": 4.5, "chunk_seconds": 1}, "0-4"),
        ("ffmpeg_chunks", {"duration_s": 30}, "0"),
        ("blender_render", {}, "0-9"),
        ("blender_render", {"frame_start": 1, "frame_end": 95}, "0-9"),
        ("blender_render", {"frame_start": 5, "frame_end": 5}, "0"),
        ("file_array", {}, "0-2"),
        ("bwa_align", {}, "0-1"),
    ],
)
def test_array_spec_follows_parameters(
    library: TemplateLibrary, root: Path, name: str, overrides: dict[str, object], spec: str
) -> None:
    template = library.get(name)
    rendered = render(template, {**example_params(template, root), **overrides}, root)
    assert rendered.array is not None and rendered.array.spec == spec


def test_empty_frame_range_refused(library: TemplateLibrary, root: Path) -> None:
    template = library.get("blender_render")
    params = {**example_params(template, root), "frame_start": 10, "frame_end": 2}
    with pytest.raises(TemplateError, match=r"'frame_end' \(2\) is before 'frame_start' \(10\)"):
        render(template, params, root)


def test_blender_output_with_hash_refused(library: TemplateLibrary, root: Path) -> None:
    template = library.get("blender_render")
    params = {**example_params(template, root), "output_dir": "out#1"}
    with pytest.raises(TemplateError, match="frame-number placeholder"):
        render(template, params, root)


# --- sample sheets ---------------------------------------------------------------------


def _sheet(root: Path, text: str) -> dict[str, object]:
    for name in ("a_1.fq", "a_2.fq", "b_1.fq", "b_2.fq"):
        (root / "reads" / name).parent.mkdir(exist_ok=True)
        (root / "reads" / name).touch()
    (root / "ref.fa").touch()
    (root / "reads" / "samples.tsv").write_text(text)
    return {"reference": "ref.fa", "samples": "reads/samples.tsv", "output_dir": "out"}


def test_sample_sheet_rows_are_rendered(library: TemplateLibrary, root: Path) -> None:
    # Columns may come in any order; comments and blank lines are skipped.
    text = "# comment\nr1\tsample\tr2\na_1.fq\tA\ta_2.fq\n\nb_1.fq\tB\tb_2.fq\n"
    rendered = render(library.get("bwa_align"), _sheet(root, text), root)
    reads = root.resolve() / "reads"
    assert "samples=(A B)\n" in rendered.body
    assert f"r1=({reads}/a_1.fq {reads}/b_1.fq)\n" in rendered.body
    assert rendered.array is not None and rendered.array.count == 2
    assert rendered.input_paths[:3] == (root / "ref.fa", reads / "samples.tsv", reads / "a_1.fq")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("sample r1 r2\n", "header 'sample r1 r2' must name exactly the columns"),
        ("sample\tr1\n", "must name exactly the columns sample, r1, r2"),
        ("sample\tr1\tr2\n", "has a header but no rows"),
        ("sample\tr1\tr2\na;b\ta_1.fq\ta_2.fq\n", "line 2, column 'sample': 'a;b' is not a safe"),
        ("sample\tr1\tr2\n../a\ta_1.fq\ta_2.fq\n", "'../a' is not a safe id"),
        ("sample\tr1\tr2\n-a\ta_1.fq\ta_2.fq\n", "'-a' is not a safe id"),
        ("sample\tr1\tr2\na\ta_1.fq\ta_2.fq\na\tb_1.fq\tb_2.fq\n", "id 'a' appears twice"),
        ("sample\tr1\tr2\na\ta_1.fq\n", "line 2: 2 fields, expected 3"),
        ("sample\tr1\tr2\na\ta_1.fq\t\n", "line 2, column 'r2': is empty"),
        ("sample\tr1\tr2\na\ta_1.fq\tmissing.fq\n", "line 2, column 'r2'): input '"),
        ("sample\tr1\tr2\na\ta_1.fq\ta_2.fq\x1b[2J\n", "control character (U+001B)"),
        ("", "is empty; expected a header: sample<TAB>r1<TAB>r2"),
    ],
)
def test_bad_sample_sheets_refused(
    library: TemplateLibrary, root: Path, text: str, problem: str
) -> None:
    with pytest.raises(TemplateError, match=r"template 'bwa_align': parameter 'samples'") as info:
        render(library.get("bwa_align"), _sheet(root, text), root)
    assert problem in str(info.value), str(info.value)


def test_sample_sheet_path_outside_roots_refused(
    library: TemplateLibrary, root: Path, tmp_path: Path
) -> None:
    (tmp_path / "evil.fq").touch()
    text = "sample\tr1\tr2\na\ta_1.fq\t../../evil.fq\n"
    with pytest.raises(PolicyError, match=r"parameter 'samples' \(.*line 2, column 'r2'\)"):
        render(library.get("bwa_align"), _sheet(root, text), root)


# --- escaping filters ------------------------------------------------------------------


def test_filters() -> None:
    assert q("a b") == "'a b'" and q(3) == "3" and q("plain") == "plain"
    assert qlist(["a", "b c"]) == "a 'b c'"
    assert concat_file("/x/it's.mkv") == "file '/x/it'\\''s.mkv'"
    with pytest.raises(EscapeError, match="qlist needs a list"):
        qlist("abc")
    with pytest.raises(EscapeError, match="cannot escape a bool"):
        q(True)


# --- the loader ------------------------------------------------------------------------


def _write_template(directory: Path, name: str, spec: str, body: str | None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.yaml").write_text(spec)
    if body is not None:
        (directory / f"{name}.sh.j2").write_text(body)
    return directory / f"{name}.yaml"


def test_user_template_overrides_shipped_one(tmp_path: Path) -> None:
    user, site = tmp_path / "user", tmp_path / "site"
    _write_template(user, "ffmpeg_chunks", "description: mine\n", "set -e\necho mine\n")
    _write_template(site, "ffmpeg_chunks", "description: site's\n", "set -e\n")
    _write_template(site, "site_only", "description: site's own\n", "set -e\n")
    library = TemplateLibrary([user, site, tmp_path / "missing", shipped_library()])
    assert library.get("ffmpeg_chunks").description == "mine"
    assert library.get("ffmpeg_chunks").spec_path == user / "ffmpeg_chunks.yaml"
    assert library.get("site_only").description == "site's own"
    assert library.get("bwa_align").spec_path.parent == shipped_library()
    assert library.names().count("ffmpeg_chunks") == 1
    assert {"site_only", *SHIPPED} <= {t.name for t in library.list()}


def test_unknown_template_lists_available(library: TemplateLibrary) -> None:
    listed = r"unknown template 'ffmpeg'; available: blender_frames, blender_rend"
    with pytest.raises(TemplateError, match=listed):
        library.get("ffmpeg")
    with pytest.raises(TemplateError, match="unknown template"):
        library.get("../library/command")


GOOD_PARAM = "params:\n  x:\n    type: int\n    default: 1\n    min: 1\n    description: a number\n"


@pytest.mark.parametrize(
    ("spec", "body", "problem"),
    [
        ("description: [unclosed\n", "", "t.yaml:2:1: YAML syntax error"),
        ("- a list\n", "", "t.yaml:1:1: a template must be a mapping"),
        ("descripton: typo\n", "", "field 'description': Field required"),
        ("description: d\nextra: 1\n", "", "field 'extra': Extra inputs are not permitted"),
        (
            "description: d\nparams:\n  x:\n    type: integer\n    description: n\n",
            "",
            "field 'params.x.type'",
        ),
        (
            "description: d\nparams:\n  x:\n    type: int\n    required: true\n"
            "    description: n\n",
            "",
            "field 'params.x': a required parameter needs an 'example'",
        ),
        (
            "description: d\nparams:\n  x:\n    type: int\n    default: many\n    description: n\n",
            "",
            "field 'params.x.default': expected an integer",
        ),
        (
            "description: d\nparams:\n  x:\n    type: choice\n    description: n\n",
            "",
            "type choice needs a non-empty 'choices'",
        ),
        (
            "description: d\nparams:\n  x:\n    type: path\n    description: n\n",
            "",
            "need a 'role'",
        ),
        (
            "description: d\nparams:\n  x:\n    type: int\n    inside: d\n    description: n\n",
            "",
            "'inside' applies to str parameters only",
        ),
        (
            "description: d\nparams:\n  d:\n    type: path\n    role: input\n"
            "    description: n\n  x:\n    type: str\n    inside: d\n    description: n\n",
            "",
            "params.x.inside: 'd' is not a path parameter with role output",
        ),
        (
            "description: d\nparams:\n  Bad:\n    type: int\n    description: n\n",
            "",
            "params.Bad: not a usable name",
        ),
        (
            "description: d\nparams:\n  range:\n    type: int\n    description: n\n",
            "",
            "params.range: not a usable name",
        ),
        (
            "description: d\nresources:\n  gpus: {param: nope}\n",
            "",
            "resources.gpus: 'nope' is not an int parameter",
        ),
        (f"description: d\n{GOOD_PARAM}resources:\n  mem_gb: 4\n", "", "field 'resources.mem_gb'"),
        (
            f"description: d\n{GOOD_PARAM}array:\n  kind: per_item\n  param: x\n",
            "",
            "array.param: 'x' is not a parameter of type args, paths, table",
        ),
        (f"description: d\n{GOOD_PARAM}array:\n  kind: per_frame\n", "", "field 'array'"),
        (f"description: d\n{GOOD_PARAM}", None, "cannot read the body of template 't'"),
        (f"description: d\n{GOOD_PARAM}", "echo {{ x | q }\n", "t.sh.j2:1: template syntax"),
        (f"description: d\n{GOOD_PARAM}", "echo {{ y | q }}\n", "t.sh.j2: uses y, not param"),
    ],
)
def test_malformed_template_named(
    tmp_path: Path, spec: str, body: str | None, problem: str
) -> None:
    spec_path = _write_template(tmp_path, "t", spec, body)
    with pytest.raises(TemplateError) as info:
        TemplateLibrary([tmp_path]).get("t")
    message = str(info.value)
    assert problem in message, message
    assert str(tmp_path) in message and ("t.yaml" in message or "t.sh.j2" in message)
    assert spec_path.exists()


def test_template_name_must_be_snake_case(tmp_path: Path) -> None:
    _write_template(tmp_path, "Bad-Name", "description: d\n", "set -e\n")
    with pytest.raises(TemplateError, match=r"Bad-Name.yaml: template names must be snake_case"):
        TemplateLibrary([tmp_path]).names()


# --- the renderer's own guards ---------------------------------------------------------


def _one_off(tmp_path: Path, body: str, params: str = GOOD_PARAM) -> Template:
    _write_template(tmp_path, "t", f"description: d\n{params}", body)
    return TemplateLibrary([tmp_path]).get("t")


WORD_PARAM = "params:\n  w:\n    type: str\n    default: hi\n    description: a word\n"
TABLE_PARAM = (
    "params:\n  t:\n    type: table\n    role: input\n    columns: {id: id}\n"
    "    default: t.tsv\n    description: a table\n"
)


@pytest.mark.parametrize(
    ("params", "body", "problem"),
    [
        (WORD_PARAM, "set -e\necho {{ w }}\n", "t.sh.j2:2: a str value is printed without"),
        (WORD_PARAM, "set -e\necho {{ w ~ 'x' }}\n", "pipe it through | q"),
        (WORD_PARAM, "set -e\necho {{ w | q ~ 'x' }}\n", "printed without escaping"),
        (WORD_PARAM, "set -e\n#SBATCH --partition=x\n", "rendered line 2 is an #SBATCH"),
        (WORD_PARAM, "set -e\n  # sbatch --mem=1\n", "rendered line 2 is an #SBATCH"),
        (WORD_PARAM, "{{ w.__class__ | q }}\n", "unsafe"),
        (WORD_PARAM, "{{ w | qlist }}\n", "qlist needs a list"),
        (TABLE_PARAM, "{{ (t.rows | first).nope | q }}\n", "has no attribute 'nope'"),
        (TABLE_PARAM, "{{ t.update(path='/') }}\n", "unsafe"),
    ],
)
def test_renderer_refuses_unsafe_bodies(
    tmp_path: Path, params: str, body: str, problem: str
) -> None:
    template = _one_off(tmp_path, body, params)
    (tmp_path / "t.tsv").write_text("id\nA\n")
    with pytest.raises(TemplateError, match=r"^template 't': ") as info:
        render_body(template, {}, allowed_roots=[tmp_path], base_dir=tmp_path)
    assert problem in str(info.value), str(info.value)


def test_numbers_print_unquoted(tmp_path: Path) -> None:
    template = _one_off(tmp_path, "set -e\nsleep {{ x }}\n")
    rendered = render_body(template, {"x": "7"}, allowed_roots=[tmp_path])
    assert rendered.body == "set -e\nsleep 7\n"


# --- real runs -------------------------------------------------------------------------


def _needs(*programs: str) -> pytest.MarkDecorator:
    missing = [p for p in programs if shutil.which(p) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {', '.join(missing)}")


def _probe_duration(path: Path) -> float:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(out)


@_needs("ffmpeg", "ffprobe")
@pytest.mark.parametrize("container", ["mkv", "mp4"])
def test_ffmpeg_chunks_then_concat_really_run(
    library: TemplateLibrary, tmp_path: Path, container: str
) -> None:
    # A directory name with a quote, spaces and $(…) exercises both the shell quoting
    # and the concat list's own escaping for real.
    work = tmp_path / "it's a $(dir)"
    work.mkdir()
    clip = work / "clip.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc=duration=4:size=160x120:rate=10",
            "-pix_fmt",
            "yuv420p",
            str(clip),
        ],
        check=True,
    )
    chunks = render_body(
        library.get("ffmpeg_chunks"),
        {
            "input": str(clip),
            "output_dir": str(work / "chunks"),
            "chunk_seconds": "1",
            "duration_s": str(_probe_duration(clip)),
            "preset": "ultrafast",
            "container": container,
        },
        allowed_roots=[tmp_path],
    )
    assert chunks.array is not None and chunks.array.spec == "0-3"
    for task in range(chunks.array.count):
        result = run_body(chunks.body, tmp_path, {"SLURM_ARRAY_TASK_ID": str(task)})
        assert result.returncode == 0, result.stderr
    concat = render_body(
        library.get("ffmpeg_concat"),
        {
            "chunk_dir": str(work / "chunks"),
            "chunks": chunks.array.count,
            "container": container,
            "output": str(work / f"joined.{container}"),
        },
        allowed_roots=[tmp_path],
    )
    result = run_body(concat.body, tmp_path, {})
    assert result.returncode == 0, result.stderr
    assert _probe_duration(work / f"joined.{container}") == pytest.approx(4.0, abs=0.15)


@_needs("bwa", "samtools")
def test_bwa_align_really_runs(library: TemplateLibrary, tmp_path: Path) -> None:
    work = tmp_path / "run dir's"
    (work / "reads").mkdir(parents=True)
    write_bwa_inputs(work, ("S1", "S2"))
    rendered = render_body(
        library.get("bwa_align"),
        {"reference": "genome.fa", "samples": "reads/samples.tsv", "output_dir": "aligned"},
        allowed_roots=[tmp_path],
        base_dir=work,
    )
    assert rendered.array is not None and rendered.array.count == 2
    for task in range(rendered.array.count):
        result = run_body(rendered.body, tmp_path, {"SLURM_ARRAY_TASK_ID": str(task)})
        assert result.returncode == 0, result.stderr
    for sample in ("S1", "S2"):
        bam = work / "aligned" / f"{sample}.bam"
        assert bam.exists() and Path(f"{bam}.bai").exists()
        mapped = subprocess.run(
            ["samtools", "view", "-c", "-F", "4", str(bam)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert int(mapped) > 0
        header = subprocess.run(
            ["samtools", "view", "-H", str(bam)], check=True, capture_output=True, text=True
        ).stdout
        assert f"@RG\tID:{sample}\tSM:{sample}" in header
