"""Site files as YAML: read one into plain data plus the line of every key, and dump back.

Reading uses a SafeLoader subclass (safe_load's loader, constructing only plain data)
with one change: YAML 1.1's base-60 numbers are switched off. Plain safe_load reads an
unquoted `max_time: 30:00` as the integer 1800, which as a Slurm duration in minutes
would silently mean 30 hours; here it stays the string "30:00".

The document is composed to nodes first so every key's line is known (for error
messages), and so that duplicate keys and non-string keys, which safe_load accepts
silently, are reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from jobsmith.errors import ConfigError

KeyPath = tuple[str | int, ...]

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
# YAML 1.1 int and float patterns (as in PyYAML's resolver) without the base-60 forms.
_INT = re.compile(
    r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"
)
_FLOAT = re.compile(
    r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)


class _SiteLoader(yaml.SafeLoader):
    """SafeLoader without sexagesimal numbers (so '30:00' stays a Slurm time string)."""


_SiteLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT_TAG, _FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_SiteLoader.add_implicit_resolver(_INT_TAG, _INT, list("-+0123456789"))
_SiteLoader.add_implicit_resolver(_FLOAT_TAG, _FLOAT, list("-+0123456789."))


@dataclass(frozen=True)
class YamlDocument:
    """One parsed site file: its mapping and the 1-based line of every key and list item."""

    file: Path
    data: dict[str, Any]
    lines: dict[KeyPath, int]


def read_yaml(file: Path) -> YamlDocument:
    """Parse file; raise ConfigError naming file (and line) if it is not a YAML mapping."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read site file: {_reason(exc)}") from exc
    return parse_yaml(text, file)


def parse_yaml(text: str, file: Path) -> YamlDocument:
    """Parse text (read from file, which names it in errors) into a YamlDocument."""
    loader = _SiteLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else {}
    except yaml.YAMLError as exc:
        # Constructor errors come from valid YAML that asks for more than plain data.
        kind = "unsupported YAML" if isinstance(exc, ConstructorError) else "YAML syntax error"
        raise ConfigError(f"{_where(file, exc)}: {kind}: {_problem(exc)}") from exc
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        line = node.start_mark.line + 1 if node is not None else 1
        raise ConfigError(
            f"{file}:{line}: a site file must be a mapping of keys (cluster:, partitions:, "
            f"...), not {_yaml_kind(data)}"
        )
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _index(node, (), file, lines, frozenset())
    return YamlDocument(file=file, data=data, lines=lines)


def _index(
    node: yaml.Node, path: KeyPath, file: Path, lines: dict[KeyPath, int], above: frozenset[int]
) -> None:
    """Record the line of every key below node; refuse duplicate and non-string keys."""
    if id(node) in above:  # an alias of an enclosing node: already indexed, would not end
        return
    above = above | {id(node)}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == _MERGE_TAG:  # `<<: *anchor` keys come from elsewhere
                continue
            if key_node.tag != _STR_TAG:
                raise ConfigError(
                    f"{file}:{line}: key {key_node.value!r} is read as a "
                    f"{key_node.tag.rsplit(':', 1)[-1]}, not a name; quote it"
                )
            key_path = (*path, key_node.value)
            if key_path in lines:
                raise ConfigError(
                    f"{file}:{line}: duplicate key {_dotted(key_path)} "
                    f"(first set at line {lines[key_path]})"
                )
            lines[key_path] = line
            _index(value_node, key_path, file, lines, above)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _index(item, (*path, index), file, lines, above)


def _yaml_kind(data: object) -> str:
    if data is None:
        return "null"
    return "a list" if isinstance(data, list) else f"a single value ({data!r:.40})"


def _where(file: Path, exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is None:
        return str(file)
    return f"{file}:{mark.line + 1}:{mark.column + 1}"


def _problem(exc: yaml.YAMLError) -> str:
    parts = [getattr(exc, "context", None), getattr(exc, "problem", None)]
    text = "; ".join(p for p in parts if p)
    return text or str(exc).splitlines()[0]


def _reason(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def _dotted(path: KeyPath) -> str:
    return ".".join(str(p) for p in path)


def dump_yaml(data: dict[str, Any]) -> str:
    """Block-style YAML of plain data, keys in the given order, readable by read_yaml."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
