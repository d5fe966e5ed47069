"""The one YAML loader: every document jobsmith reads, and the site files it writes.

Site files, template specs and `--params-file` all go through `read_yaml`, so they share
one set of rules, and every error names the file, line and column:

- ruamel.yaml parses (YAML 1.2) and composes nodes; plain Python data is built here from
  the nodes, never by ruamel's constructors, so nothing but str, int, float, bool, None,
  list and dict can come out, and every key's line is known for later error messages.
- Numbers: a plain (unquoted) scalar is a number only in plain decimal form: `42`, `-7`,
  `0.5`, `1.5e3`. Everything else a YAML library might read as a number stays the text
  the user typed: `10:00` (YAML 1.1 base 60, i.e. 600, which as a Slurm time in minutes
  would mean ten hours), `0x10`, `010` and `0o10` (octal), `0b1`, `1_000`, `.inf`, and an
  exponent without a decimal point (`1e3`, which is also what a short git hash can look
  like). A string parameter keeps its text; an int parameter given `0x10` gets the
  template's own type error. `true`/`false` and `null`/`~`/empty are YAML 1.2's; `yes`,
  `no`, `on` and `off` are strings (YAML 1.2 too).
- Duplicate keys are an error naming both lines; keys must be strings (`true:` or `1:`
  as a key is refused: quote it).
- Explicit tags: only YAML's own (`!!str`, `!!int`, ...) and only where they agree with
  the rules above; `!!python/...`, `!!set`, `!!binary` and the like are refused.
- Anchors, aliases and `<<` merge keys work, but every alias is expanded into a copy
  (so a later override of one copy cannot change another), and copying is bounded: at
  most MAX_ALIAS_COPIES values in a document may come from aliases. Sharing a block of
  partition limits or merging a defaults block costs tens of values per use, so real
  documents stay far below the bound; a "billion laughs" document (aliases of aliases
  of aliases, 10^9 values from a few hundred bytes) is refused after 10,000 copies, in
  milliseconds and a few MB, instead of exhausting memory in whatever walks it next
  (the key index, a merge, pydantic). Counting copies rather than refusing aliases
  outright keeps `<<: *limits` (the previous loader accepted it) for sites that share
  limits between partitions. An alias of a node inside itself (a cycle) is refused.
  Nesting is bounded by MAX_DEPTH, far above any jobsmith document and far below
  Python's recursion limit.
- A document is one mapping (every jobsmith file is); an empty file is an empty mapping.

Errors are raised as the document kind's error class (ConfigError for site files,
TemplateError for templates and params files), never anything else.
"""

from __future__ import annotations

import copy
import functools
import io
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer, MaxDepthExceededError
from ruamel.yaml.error import MarkedYAMLError, ReusedAnchorWarning, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.representer import SafeRepresenter
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.tag import Tag

from jobsmith.errors import ConfigError, JobsmithError
from jobsmith.files import read_bounded
from jobsmith.workload_caps import MAX_YAML_NODES

KeyPath = tuple[str | int, ...]

#: values a document may get from aliases (copies), in total
MAX_ALIAS_COPIES = 10_000
#: how deeply lists and mappings may nest
MAX_DEPTH = 64


@dataclass(frozen=True)
class DocumentKind:
    """What a file is, for error messages: its name, the keys it holds, its error class."""

    name: str
    keys: str
    error: type[JobsmithError]


SITE_FILE = DocumentKind("site file", "cluster:, partitions:, ...", ConfigError)


@dataclass(frozen=True)
class YamlDocument:
    """One parsed file: its mapping and the 1-based line of every key and list item."""

    file: Path
    data: dict[str, Any]
    lines: dict[KeyPath, int]


def read_yaml(file: Path, kind: DocumentKind = SITE_FILE) -> YamlDocument:
    """Read and parse file; raise kind.error naming the file and line on any problem."""
    try:
        raw = read_bounded(file)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise kind.error(f"{file}: cannot read {kind.name}: {reason}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _position(raw[: exc.start].decode("utf-8", "replace"))
        raise kind.error(
            f"{file}:{line}:{column}: cannot read {kind.name}: byte 0x{raw[exc.start]:02x} "
            "is not UTF-8 text; save the file as UTF-8"
        ) from None
    return parse_yaml(text, file, kind)


def parse_yaml(text: str, file: Path, kind: DocumentKind = SITE_FILE) -> YamlDocument:
    """Parse text (read from file, which names it in errors) into a YamlDocument.

    A text parsed before in this process is not parsed again: ruamel's composer is pure
    Python, and the site files and a template's spec were a fifth of a warm submit (issue
    26; the warm process parses them ahead, warmserver.py). The memo is keyed by the
    text itself, so a changed file is parsed anew, and what it returns is a copy the
    caller may change. Texts that fail raise every time; large ones are not kept."""
    if len(text) > _MEMO_MAX_CHARS:
        return _parse_yaml(text, file, kind)
    return copy.deepcopy(_parse_yaml_memo(text, file, kind))


#: the largest text parse_yaml keeps (site files and template specs are a few KB; a
#: long-lived process, the watcher or the MCP server, must not keep big plan files)
_MEMO_MAX_CHARS = 64 << 10


@functools.lru_cache(maxsize=32)
def _parse_yaml_memo(text: str, file: Path, kind: DocumentKind) -> YamlDocument:
    return _parse_yaml(text, file, kind)


def _parse_yaml(text: str, file: Path, kind: DocumentKind) -> YamlDocument:
    node = _compose(text, file, kind)
    if node is None:
        return YamlDocument(file=file, data={}, lines={})
    builder = _Builder(file, kind)
    data = builder.build(node, (), node.start_mark, 0)
    if not isinstance(data, dict):
        raise kind.error(
            f"{_at(file, node.start_mark)}: a {kind.name} must be a mapping of keys "
            f"({kind.keys}), not {_describe(data)}"
        )
    return YamlDocument(file=file, data=data, lines=builder.lines)


def dump_yaml(data: dict[str, Any]) -> str:
    """Block-style YAML of plain data, keys in the given order, read back as equal data
    (floats must be finite: read_yaml reads `.inf` and `.nan` as text)."""
    yaml = YAML(typ="safe", pure=True)
    yaml.Representer = _Representer
    yaml.default_flow_style = False
    # never fold a long scalar over lines: ruamel's folding of a quoted string can add a
    # space where it breaks (found by the round-trip property test)
    yaml.width = 1 << 30
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


class _Representer(SafeRepresenter):
    """Quotes every string that read_yaml would not read back as that same string."""

    def represent_str(self, data: str) -> Any:
        if any(char in _YAML11_BREAKS for char in data):
            # The emitter folds these as line breaks (YAML 1.1); escaped, they survive.
            return self.represent_scalar(f"{_YAML_TAG}str", data, style='"')
        if data == "<<" or not isinstance(_plain_value(data), str):
            return self.represent_scalar(f"{_YAML_TAG}str", data, style="'")
        return super().represent_str(data)

    def represent_float(self, data: float) -> Any:
        text = repr(data)
        if math.isfinite(data) and "." not in text:  # 1e-06: read_yaml wants a point
            text = text.replace("e", ".0e", 1)
        return self.represent_scalar(f"{_YAML_TAG}float", text)


_Representer.add_representer(str, _Representer.represent_str)
_Representer.add_representer(float, _Representer.represent_float)


# --- parsing --------------------------------------------------------------------------

_YAML11_BREAKS = frozenset("\x85\u2028\u2029")
_PLAIN = "tag:jobsmith:plain"  # an untagged, unquoted scalar, resolved by _plain_value
_YAML_TAG = "tag:yaml.org,2002:"
_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_BOOL = {word: word[0] in "tT" for word in ("true", "True", "TRUE", "false", "False", "FALSE")}
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
# Explicit tags accepted on a scalar, with the type its text must resolve to.
_SCALAR_TAGS: dict[str, type] = {"int": int, "float": float, "bool": bool, "null": type(None)}


class _Resolver(VersionedResolver):
    """Marks untagged plain scalars for _plain_value; everything else is a string."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode:
            return Tag(suffix=_PLAIN if implicit[0] else f"{_YAML_TAG}str")
        return super().resolve(kind, value, implicit)


class _TooManyNodes(Exception):
    """More than MAX_YAML_NODES values composed; carries where the last one starts."""

    def __init__(self, mark: Any) -> None:
        super().__init__(mark)
        self.mark = mark


class _CountingComposer(Composer):
    """ruamel's composer, counting the values it composes and stopping above
    MAX_YAML_NODES: a node costs about 1 KB, so a 4 MiB list of two million values took
    2.3 GB before anything here saw it; counting as they are made stops it at 0.1 GB."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.composed = getattr(self, "composed", 0) + 1
        if self.composed > MAX_YAML_NODES:
            raise _TooManyNodes(self.parser.peek_event().start_mark)
        return super().compose_node(parent, index)


def _compose(text: str, file: Path, kind: DocumentKind) -> Node | None:
    yaml = YAML(typ="base", pure=True)
    yaml.Resolver = _Resolver
    yaml.Composer = _CountingComposer
    yaml.max_depth = MAX_DEPTH
    try:
        with warnings.catch_warnings():
            # Redefining an anchor is valid YAML; the later definition wins.
            warnings.simplefilter("ignore", ReusedAnchorWarning)
            node: Node | None = yaml.compose(text)
    except _TooManyNodes as exc:
        raise kind.error(
            f"{_at(file, exc.mark)}: more than {MAX_YAML_NODES:,} values in this {kind.name}, "
            "above jobsmith's workload cap: split the work over several files"
        ) from None
    except MaxDepthExceededError as exc:
        raise kind.error(f"{_at(file, exc.problem_mark)}: {_too_deep(kind)}") from None
    except ReaderError as exc:  # a character YAML does not allow, e.g. a control code
        line, column = _position(text[: exc.position])
        code = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or " ")
        raise kind.error(
            f"{file}:{line}:{column}: YAML syntax error: character U+{code:04X} "
            "is not allowed in YAML; remove it"
        ) from None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        raise kind.error(f"{_at(file, mark)}: YAML syntax error: {_problem(exc)}") from None
    return node


@dataclass
class _Builder:
    """Plain data from composed nodes, with the line of every key path and the bounds."""

    file: Path
    kind: DocumentKind
    lines: dict[KeyPath, int] = field(default_factory=dict)
    _built: set[int] = field(default_factory=set)  # ids of nodes built once already
    _open: set[int] = field(default_factory=set)  # ids of nodes being built (for cycles)
    _copies: int = 0
    _alias_use: tuple[KeyPath, Any] | None = None  # path and mark of the alias being copied

    def build(self, node: Node, path: KeyPath, where: Any, depth: int) -> Any:
        """The value of node at path; where is the mark to name in errors about it."""
        if depth > MAX_DEPTH:
            self._fail(where, _too_deep(self.kind))
        if id(node) in self._open:
            self._fail(where, f"alias *{node.anchor} is used inside its own anchor; remove it")
        outermost = self._alias_use is None and id(node) in self._built
        if outermost:
            self._alias_use = (path, where)
        try:
            return self._build(node, path, depth)
        finally:
            if outermost:
                self._alias_use = None

    def _build(self, node: Node, path: KeyPath, depth: int) -> Any:
        if self._alias_use is not None:
            self._copies += 1
            if self._copies > MAX_ALIAS_COPIES:
                use_path, use_mark = self._alias_use
                self._fail(
                    use_mark,
                    f"{_dotted(use_path) or 'the document'}: aliases expand to more than "
                    f"{MAX_ALIAS_COPIES} values in this {self.kind.name}; write the values "
                    "out instead",
                )
        self._built.add(id(node))
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        self._open.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                return self._sequence(node, path, depth)
            if isinstance(node, MappingNode):
                return self._mapping(node, path, depth)
            self._unsupported(node)
        finally:
            self._open.discard(id(node))

    def _scalar(self, node: ScalarNode) -> Any:
        tag = str(node.tag)
        if tag == _PLAIN:
            if _INT.fullmatch(node.value) and len(node.value.lstrip("+-")) > _MAX_INT_DIGITS:
                # Python refuses to convert so many digits (ValueError: a traceback)
                self._fail(
                    node.start_mark,
                    f"a number of {len(node.value)} digits; at most {_MAX_INT_DIGITS}",
                )
            return _plain_value(node.value)
        short = tag.removeprefix(_YAML_TAG)
        if short == "str":
            return str(node.value)
        if short not in _SCALAR_TAGS:
            self._unsupported(node)
        value = _plain_value(node.value)
        if short == "float" and type(value) is int:
            value = float(value)
        if type(value) is not _SCALAR_TAGS[short]:
            self._fail(node.start_mark, f"{node.value!r} is not a valid !!{short}")
        return value

    def _sequence(self, node: SequenceNode, path: KeyPath, depth: int) -> list[Any]:
        if str(node.tag) != f"{_YAML_TAG}seq":
            self._unsupported(node)
        items = []
        for index, item in enumerate(node.value):
            where = node.start_mark if id(item) in self._built else item.start_mark
            self.lines[(*path, index)] = where.line + 1
            items.append(self.build(item, (*path, index), where, depth + 1))
        return items

    def _mapping(self, node: MappingNode, path: KeyPath, depth: int) -> dict[str, Any]:
        if str(node.tag) != f"{_YAML_TAG}map":
            self._unsupported(node)
        out: dict[str, Any] = {}
        merges = []
        for key_node, value_node in node.value:
            if str(key_node.tag) == _PLAIN and key_node.value == "<<":
                merges.append((key_node, value_node))
                continue
            key = self._key(key_node)
            key_path = (*path, key)
            if key in out:
                self._fail(
                    key_node.start_mark,
                    f"duplicate key {_dotted(key_path)} (first set at line "
                    f"{self.lines[key_path]}); keep one",
                )
            self.lines[key_path] = key_node.start_mark.line + 1
            out[key] = self.build(value_node, key_path, key_node.start_mark, depth + 1)
        for key_node, value_node in merges:
            self._merge(out, key_node, value_node, path, depth)
        return out

    def _merge(
        self, out: dict[str, Any], key_node: Node, value: Node, path: KeyPath, depth: int
    ) -> None:
        """`<<: *base` (or a list of them): keys not set here come from the base mappings,
        the mapping's own keys winning, then earlier bases over later ones; their lines
        are those in the base, where the value is written."""
        sources = value.value if isinstance(value, SequenceNode) else [value]
        for source in sources:
            if not isinstance(source, MappingNode):
                self._fail(key_node.start_mark, "<< (merge) takes a mapping or a list of them")
            own_lines, self.lines = self.lines, {}
            try:
                merged = self.build(source, path, key_node.start_mark, depth + 1)
                base_lines = self.lines
            finally:
                self.lines = own_lines
            for key, item in merged.items():
                if key not in out:
                    out[key] = item
                    below = {p: n for p, n in base_lines.items() if p[len(path)] == key}
                    self.lines.update(below)

    def _key(self, node: Node) -> str:
        if not isinstance(node, ScalarNode):
            self._fail(node.start_mark, "a key must be a name, not a list or mapping")
        key = self._scalar(node)
        if not isinstance(key, str):
            self._fail(
                node.start_mark,
                f"key {node.value!r} is read as {_describe(key)}, not a name; quote it",
            )
        return key

    def _unsupported(self, node: Node) -> NoReturn:
        self._fail(
            node.start_mark,
            f"unsupported YAML: tag {node.tag} (only plain strings, numbers, true/false, "
            "null, lists and mappings are read); remove the tag",
        )

    def _fail(self, mark: Any, message: str) -> NoReturn:
        raise self.kind.error(f"{_at(self.file, mark)}: {message}")


#: the longest integer read (Python's own limit on converting digits is 4300)
_MAX_INT_DIGITS = 100


def _plain_value(text: str) -> Any:
    if text in _NULL:
        return None
    if text in _BOOL:
        return _BOOL[text]
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


# --- messages -------------------------------------------------------------------------


def _at(file: Path, mark: Any) -> str:
    if mark is None:
        return str(file)
    return f"{file}:{mark.line + 1}:{mark.column + 1}"


def _position(before: str) -> tuple[int, int]:
    """1-based line and column just after the text before."""
    line = before.count("\n") + 1
    return line, len(before) - (before.rfind("\n") + 1) + 1


def _too_deep(kind: DocumentKind) -> str:
    return f"lists and mappings nest more than {MAX_DEPTH} deep; a {kind.name} needs a few"


def _problem(exc: YAMLError) -> str:
    parts = [exc.context, exc.problem] if isinstance(exc, MarkedYAMLError) else [None, None]
    text = "; ".join(str(p) for p in parts if p)
    return text or next(iter(str(exc).splitlines()), type(exc).__name__)


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    return "a list" if isinstance(value, list) else f"a single value ({value!r:.40})"


def _dotted(path: KeyPath) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
    return text
