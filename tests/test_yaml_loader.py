"""The one YAML loader, through the real entry points of every document kind.

Site files (load_site), template specs (TemplateLibrary) and params files
(JobRequest.from_cli, and the CLI's --params-file) must share its rules: YAML 1.2, numbers
only in plain decimal form, duplicate keys refused, alias expansion bounded, and every
problem one error of the document's kind naming file, line and column.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from lab_cli import js

from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.errors import ConfigError, JobsmithError, TemplateError
from jobsmith.job_templates import TemplateLibrary, render_body
from jobsmith.site_config import load_site
from jobsmith.site_config.yamlfile import (
    MAX_ALIAS_COPIES,
    DocumentKind,
    dump_yaml,
    parse_yaml,
    read_yaml,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "site_config" / "examples" / "lab.yaml"
ENV = {"USER": "alice", "HOME": "/home/alice"}
NOWHERE = Path("/nonexistent/jobsmith/site.yaml")
KINDS = ("site", "template", "params")

# A template with one parameter of each kind the number rules matter for.
SPEC = textwrap.dedent(
    """\
    description: numbers as typed
    params:
      label:
        type: str
        default: none
        description: any text
      count:
        type: int
        default: 1
        description: a count
    """
)
BODY = "set -e\necho {{ label | q }} {{ count | q }}\n"

# Nine levels of nine aliases: 9**9 (387 million) strings from under a kilobyte.
BOMB = 'lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + "".join(
    f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10)
)


def write_document(directory: Path, kind: str, text: str | bytes) -> Path:
    """text as a document of kind: the user's site file, a template 't', a params file."""
    if kind == "site":
        path = directory / "user.yaml"
    elif kind == "template":
        path = directory / "t.yaml"
        (directory / "t.sh.j2").write_text(BODY)
    else:
        path = directory / "params.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def params_request(path: Path) -> JobRequest:
    """A request for template 't' with path as its --params-file."""
    return JobRequest.from_cli(template="t", params_file=path)


def load_document(kind: str, path: Path) -> object:
    """Read path through the real entry point of its kind."""
    if kind == "site":
        return load_site(EXAMPLE, environ=ENV, system_file=NOWHERE, user_file=path)
    if kind == "template":
        return TemplateLibrary([path.parent]).get(path.stem)
    return params_request(path)


ERROR_OF = {"site": ConfigError, "template": TemplateError, "params": TemplateError}


def refusal(kind: str, path: Path) -> str:
    with pytest.raises(ERROR_OF[kind]) as caught:
        load_document(kind, path)
    return str(caught.value)


# --- alias bombs: refused fast, in a child process so a regression cannot hang the suite

_CHILD = """
import json, resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from test_yaml_loader import load_document
kind, path = sys.argv[1], Path(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a regression fails, not swaps
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    load_document(kind, path)
    outcome = {"error": None, "message": ""}
except Exception as exc:
    outcome = {"error": type(exc).__name__, "message": str(exc)}
outcome["seconds"] = time.perf_counter() - start
outcome["grew_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps(outcome))
"""


@pytest.mark.parametrize("kind", KINDS)
def test_billion_laughs_is_refused_within_a_second(tmp_path: Path, kind: str) -> None:
    prefix = "description: boom\n" if kind == "template" else ""
    path = write_document(tmp_path, kind, prefix + BOMB)
    try:
        child = subprocess.run(
            [sys.executable, "-c", _CHILD, kind, str(path), str(Path(__file__).parent)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"loading an alias bomb as a {kind} did not finish in 30 s")
    assert child.returncode == 0, child.stderr
    outcome = json.loads(child.stdout)
    assert outcome["error"] == ERROR_OF[kind].__name__, outcome
    assert outcome["message"].startswith(f"{path}:"), outcome
    assert f"aliases expand to more than {MAX_ALIAS_COPIES} values" in outcome["message"]
    assert outcome["seconds"] < 1.0, outcome
    assert outcome["grew_mb"] < 50, outcome


def test_aliases_and_merge_keys_within_the_bound_still_work(tmp_path: Path) -> None:
    text = (
        "partitions:\n"
        "  debug: &limits\n    max_time: 30:00\n    max_nodes: 1\n"
        "  long:\n    <<: *limits\n    max_nodes: 2\n"
    )
    path = write_document(tmp_path, "site", text)
    partitions = load_site(
        EXAMPLE, environ=ENV, system_file=NOWHERE, user_file=path
    ).config.partitions
    assert (partitions["long"].max_time, partitions["long"].max_nodes) == (30 * 60, 2)
    assert partitions["debug"].max_nodes == 1  # the override changed only its own copy


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    path = write_document(tmp_path, "params", "label: &x [a, *x]\n")
    assert refusal("params", path).startswith(f"{path}:1:8: alias *x is used inside its own")


# --- duplicate keys -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "text", "where", "key"),
    [
        ("site", "accounts:\n  default: lab\n  default: proj2\n", "3:3", "accounts.default"),
        ("template", SPEC + "description: again\n", "11:1", "description"),
        ("params", "count: 5\nlabel: x\ncount: 10000\n", "3:1", "count"),
    ],
)
def test_duplicate_keys_are_refused_with_file_line_column_and_key(
    tmp_path: Path, kind: str, text: str, where: str, key: str
) -> None:
    path = write_document(tmp_path, kind, text)
    message = refusal(kind, path)
    assert message.startswith(f"{path}:{where}: duplicate key {key} (first set at line ")


def test_params_file_duplicate_through_the_cli_is_one_error_line(
    user_site: Any, workdir: Path
) -> None:
    (workdir / "p.yaml").write_text("command: 'true'\ncommand: rm -rf ~\n")
    result = js("render", "command", "--params-file", str(workdir / "p.yaml"))
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert f"{workdir / 'p.yaml'}:2:1: duplicate key command" in lines[0]


# --- numbers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "value"),
    [
        ("42", 42),
        ("-7", -7),
        ("+3", 3),
        ("0", 0),
        ("0.5", 0.5),
        ("-.5", -0.5),
        ("1.5e3", 1500.0),
        ("true", True),
        ("False", False),
        ("null", None),
        ("~", None),
        ("", None),
        ("'42'", "42"),
        ("!!str 42", "42"),
        ("10:00", "10:00"),
        ("1:30:00", "1:30:00"),
        ("0x10", "0x10"),
        ("010", "010"),
        ("0o10", "0o10"),
        ("0b101", "0b101"),
        ("1_000", "1_000"),
        ("1e3", "1e3"),
        (".inf", ".inf"),
        (".nan", ".nan"),
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("off", "off"),
        ("2024-01-31", "2024-01-31"),
    ],
)
def test_only_plain_decimal_numbers_are_numbers(typed: str, value: object) -> None:
    data = parse_yaml(f"v: {typed}\n", Path("n.yaml")).data
    assert data == {"v": value} and type(data["v"]) is type(value)


@pytest.mark.parametrize("typed", ["10:00", "0x10", "010", "0o10", "0b1", "yes", "off"])
def test_a_string_parameter_keeps_the_text_typed_in_a_params_file(
    tmp_path: Path, typed: str
) -> None:
    write_document(tmp_path, "template", SPEC)
    request = params_request(write_document(tmp_path, "params", f"label: {typed}\n"))
    assert request.params == {"label": typed}
    template = TemplateLibrary([tmp_path]).get("t")
    body = render_body(template, request.params, allowed_roots=[tmp_path], base_dir=tmp_path)
    assert f"echo {typed} 1" in body.body


@pytest.mark.parametrize("typed", ["0x10", "0o10", "10:00", "1e3"])
def test_an_int_parameter_given_another_notation_gets_the_template_type_error(
    tmp_path: Path, typed: str
) -> None:
    write_document(tmp_path, "template", SPEC)
    request = params_request(write_document(tmp_path, "params", f"count: {typed}\n"))
    template = TemplateLibrary([tmp_path]).get("t")
    with pytest.raises(TemplateError, match=f"count.*expected an integer, got '{typed}'"):
        render_body(template, request.params, allowed_roots=[tmp_path], base_dir=tmp_path)


def test_template_defaults_follow_the_same_number_rules(tmp_path: Path) -> None:
    spec = SPEC.replace("default: none", "default: 10:00")
    path = write_document(tmp_path, "template", spec)
    assert TemplateLibrary([tmp_path]).get("t").spec.params["label"].default == "10:00"
    path.write_text(SPEC.replace("default: 1\n", "default: 0x10\n"))
    message = refusal("template", path)
    assert "field 'params.count.default': expected an integer, got '0x10'" in message


def test_site_file_names_that_look_like_numbers_stay_names(tmp_path: Path) -> None:
    text = "accounts:\n  allowed: [lab, proj2, 010]\n  default: 010\npartitions:\n  on: {}\n"
    path = write_document(tmp_path, "site", text)
    config = load_site(EXAMPLE, environ=ENV, system_file=NOWHERE, user_file=path).config
    assert config.accounts.default == "010"
    assert "on" in config.partitions


# --- bytes that are not text ----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_byte_that_is_not_utf8_names_file_line_and_column(tmp_path: Path, kind: str) -> None:
    prefix = b"description: d\n" if kind == "template" else b""
    path = write_document(tmp_path, kind, prefix + b"label: caf\xe9\n")
    line = 2 if kind == "template" else 1
    message = refusal(kind, path)
    assert message.startswith(f"{path}:{line}:11: cannot read ")
    assert "byte 0xe9 is not UTF-8" in message


def test_a_params_file_that_is_not_utf8_is_one_error_line_in_the_cli(
    user_site: Any, workdir: Path
) -> None:
    (workdir / "p.yaml").write_bytes(b"command: \xff\n")
    result = js("render", "command", "--params-file", str(workdir / "p.yaml"))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"{workdir / 'p.yaml'}:1:10: cannot read params file" in result.stderr


# --- properties -----------------------------------------------------------------------

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
# Pieces of YAML syntax, so the generated text exercises the parser, not only scalars.
FRAGMENTS = st.sampled_from(
    [
        *("\n", " ", "  ", "- ", ": ", "? ", ", ", "#", "'", '"', "|", ">", "\t", "\\"),
        *("[", "]", "{", "}", "&a ", "*a", "&b ", "*b", "<<: ", "!!str ", "!!int ", "!x "),
        *("!!python/object:os.system ", "---\n", "...\n", "%YAML 1.1\n", "%TAG ! !x\n"),
        *("key", "a", "10:00", "0x10", "010", "1.5", "1e3", "true", "null", "~", "yes"),
        *("\x00", "\x85", "\u2028", "\ufeff", "é", "\U0001f600"),
    ]
)
YAMLISH = st.lists(FRAGMENTS, max_size=40).map("".join)
KIND = DocumentKind("test document", "a:, b:", TemplateError)


def assert_plain(value: object) -> None:
    """value holds only what jobsmith documents may: scalars, lists, str-keyed dicts."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert type(key) is str
            assert_plain(item)
    elif isinstance(value, list):
        for item in value:
            assert_plain(item)
    else:
        assert value is None or type(value) in (str, int, float, bool), repr(value)


@PROPERTY
@given(text=st.one_of(st.text(), YAMLISH))
def test_any_text_gives_plain_data_or_the_document_error(text: str) -> None:
    try:
        document = parse_yaml(text, Path("h.yaml"), KIND)
    except JobsmithError as exc:
        assert type(exc) is TemplateError
        assert str(exc).startswith("h.yaml")
        return
    assert type(document.data) is dict
    assert_plain(document.data)


@PROPERTY
@given(raw=st.one_of(st.binary(), YAMLISH.map(str.encode)))
def test_any_bytes_give_plain_data_or_the_document_error(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes
) -> None:
    path = tmp_path_factory.mktemp("bytes") / "h.yaml"
    path.write_bytes(raw)
    try:
        document = read_yaml(path)
    except JobsmithError as exc:
        assert type(exc) is ConfigError
        assert str(exc).startswith(str(path))
        return
    assert_plain(document.data)


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
PLAIN = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@PROPERTY
@given(data=st.dictionaries(st.text(), PLAIN, max_size=5))
# found under CI: ruamel folded this long quoted string over two lines and added a space
@example(data={"": {"0" * 25 + "\x1f" * 4: "0" * 18 + "\x1f" * 4 + "0 0"}})
def test_what_dump_writes_reads_back_equal(data: dict[str, Any]) -> None:
    again = parse_yaml(dump_yaml(data), Path("d.yaml")).data
    assert again == data
    # json tells 1 from 1.0 and True, which == does not
    assert json.dumps(again, sort_keys=True) == json.dumps(data, sort_keys=True)


def test_a_text_parsed_again_gives_an_equal_copy_the_caller_may_change(tmp_path: Path) -> None:
    """parse_yaml keeps what it parsed, by the text (issue 26): the second parse of a text
    is a copy, a change to one copy is not seen by the next, and another text is parsed
    anew."""
    from jobsmith.site_config.yamlfile import parse_yaml

    file = tmp_path / "site.yaml"
    text = "cluster: memo\npartitions:\n  debug: {default: true}\n"
    first = parse_yaml(text, file)
    first.data["partitions"]["debug"]["default"] = False
    second = parse_yaml(text, file)
    assert second.data == {"cluster": "memo", "partitions": {"debug": {"default": True}}}
    assert second.lines == first.lines and second.data is not first.data
    assert parse_yaml(text.replace("memo", "other"), file).data["cluster"] == "other"


def test_a_text_that_fails_to_parse_fails_every_time(tmp_path: Path) -> None:
    from jobsmith.site_config.yamlfile import parse_yaml

    for _ in range(2):
        with pytest.raises(ConfigError, match=r"site\.yaml"):
            parse_yaml("cluster: [unclosed\n", tmp_path / "site.yaml")
