"""The parameter schema of a job template: one `ParamSpec` per parameter.

A spec says what a parameter is (its type, default, allowed values, whether a path is
read or written) so values can be checked before anything is rendered or submitted.
The spec is pure data, loaded from the template's YAML; values are checked in values.py.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

#: a one-line, non-empty human text (descriptions end up in `--help`-style listings)
OneLine = Annotated[str, StringConstraints(min_length=1, max_length=300, pattern=r"^[^\n\r]+$")]

#: what a default or example may be in YAML: a scalar, or a list of strings
RawValue = str | int | float | bool | list[str]

IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]*$")
#: a companion file's suffix: a dot, then a file name's safe characters
COMPANION = re.compile(r"^\.[A-Za-z0-9._-]{1,32}$")


class ParamType(StrEnum):
    """The type of a parameter, which decides how its value is coerced and checked."""

    STR = "str"  # one line of text
    INT = "int"
    FLOAT = "float"  # finite only
    BOOL = "bool"  # true/false, yes/no, on/off, 1/0 from the CLI
    CHOICE = "choice"  # one of `choices`
    PATH = "path"  # a file or directory, resolved and checked against the allowed roots
    PATHS = "paths"  # a list of paths; from the CLI, comma separated
    ARGS = "args"  # a list of words (program arguments); from the CLI, split like a shell
    COMMAND = "command"  # one line of shell code the user wants run as given
    TEXT = "text"  # a file's contents (a generated config): lines and tabs, quoted as data
    TABLE = "table"  # a TSV file whose rows are checked against `columns`


PATH_TYPES = frozenset({ParamType.PATH, ParamType.PATHS, ParamType.TABLE})
LIST_TYPES = frozenset({ParamType.PATHS, ParamType.ARGS, ParamType.TABLE})
NUMBER_TYPES = frozenset({ParamType.INT, ParamType.FLOAT})


class PathRole(StrEnum):
    """Whether the job reads a path (it must exist at render time) or writes it."""

    INPUT = "input"
    OUTPUT = "output"


class PathKind(StrEnum):
    """What an input path must be, checked with its existence."""

    FILE = "file"
    DIR = "dir"
    ANY = "any"


class ColumnType(StrEnum):
    """The type of one column of a table parameter."""

    ID = "id"  # a safe, unique identifier: [A-Za-z0-9][A-Za-z0-9._-]*, usable in file names
    STR = "str"
    INT = "int"
    PATH = "path"  # relative to the table's directory; checked like the table's own role


class ParamSpec(BaseModel):
    """One template parameter: its type, default, constraints and documentation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: ParamType = Field(description="how the value is coerced and checked")
    description: OneLine = Field(description="one line saying what the parameter does")
    required: bool = Field(False, description="the user must give a value (no default)")
    default: RawValue | None = Field(None, description="value used when none is given")
    example: RawValue | None = Field(
        None, description="a valid value, shown in help and used by tests; paths are relative"
    )
    choices: tuple[str | int, ...] | None = Field(
        None, description="the only values allowed (required for type choice)"
    )
    min: float | None = Field(None, description="smallest allowed number (int, float)")
    max: float | None = Field(None, description="largest allowed number (int, float)")
    pattern: str | None = Field(
        None, description="regex the whole text must match (str, path, paths, args items)"
    )
    pattern_help: OneLine | None = Field(
        None, description="what the pattern means, shown when a value does not match"
    )
    role: PathRole | None = Field(
        None, description="input (read, must exist) or output (written); path types only"
    )
    must_exist: bool | None = Field(
        None, description="override the existence check (default: inputs yes, outputs no)"
    )
    kind: PathKind = Field(
        PathKind.ANY, description="what an existing input must be: file, dir, any (tables: cells)"
    )
    columns: dict[str, ColumnType] | None = Field(
        None, description="table only: column name -> type; the header must name them all"
    )
    companions: tuple[str, ...] = Field(
        (),
        description="path inputs only: suffixes of files beside it the job reads too (an "
        "index: .bwt, .pac), each appended to its name; `@local:` stages them with it",
    )
    inside: str | None = Field(
        None,
        description="str only: the value is a relative path the job writes inside this output "
        "directory parameter, resolved and checked against the allowed roots as the directory is",
    )

    @property
    def checks_existence(self) -> bool:
        """Whether the path(s) must exist before submission."""
        if self.must_exist is not None:
            return self.must_exist
        return self.role is PathRole.INPUT

    @model_validator(mode="after")
    def _consistent(self) -> ParamSpec:
        problems = _problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _problems(spec: ParamSpec) -> list[str]:
    """Everything inconsistent in a spec, as messages naming the offending field."""
    kind = spec.type
    problems: list[str] = []
    if spec.required and spec.example is None:
        problems.append("a required parameter needs an 'example'")
    if spec.required and spec.default is not None:
        problems.append("a required parameter cannot have a 'default'")
    if kind is ParamType.CHOICE and not spec.choices:
        problems.append("type choice needs a non-empty 'choices' list")
    if spec.choices is not None and kind not in {ParamType.CHOICE, ParamType.STR, ParamType.INT}:
        problems.append("'choices' applies to choice, str and int parameters only")
    if (spec.min is not None or spec.max is not None) and kind not in NUMBER_TYPES:
        problems.append("'min'/'max' apply to int and float parameters only")
    if (kind in PATH_TYPES) != (spec.role is not None):
        problems.append("path, paths and table parameters (only) need a 'role': input or output")
    if (kind is ParamType.TABLE) != bool(spec.columns):
        problems.append("table parameters (only) need 'columns'")
    if spec.companions and (kind is not ParamType.PATH or spec.role is not PathRole.INPUT):
        problems.append("'companions' applies to path parameters of role input only")
    bad_suffixes = [s for s in spec.companions if not COMPANION.match(s)]
    problems += [f"companion {s!r} is not a suffix like '.bwt'" for s in bad_suffixes]
    if spec.inside is not None and kind is not ParamType.STR:
        problems.append("'inside' applies to str parameters only")
    problems += _pattern_problems(spec)
    bad_columns = [name for name in spec.columns or {} if not IDENTIFIER.match(name)]
    problems += [f"column name {name!r} is not snake_case" for name in bad_columns]
    return problems


def _pattern_problems(spec: ParamSpec) -> list[str]:
    if spec.pattern is None:
        return []
    if spec.type not in {ParamType.STR, ParamType.PATH, ParamType.PATHS, ParamType.ARGS}:
        return ["'pattern' applies to str, path, paths and args parameters only"]
    try:
        re.compile(spec.pattern)
    except re.error as exc:
        return [f"'pattern' is not a valid regular expression: {exc}"]
    return []
