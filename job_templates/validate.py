"""Validation of a whole parameter set against a template's schema and the path policy.

Order per parameter: known name, present if required, coerced to its type, then for
path types resolved inside the allowed roots and (inputs) checked to exist; then the
files a job writes inside an output directory parameter (`inside`) resolved and checked
as outputs are. Every error names the template and the parameter; unknown names and bad
choices list what is valid.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from jobsmith.errors import TemplateError
from jobsmith.job_templates.params import ParamSpec, ParamType, PathKind, PathRole
from jobsmith.job_templates.paths import PathPolicy
from jobsmith.job_templates.spec import Template
from jobsmith.job_templates.tables import Table, read_table
from jobsmith.job_templates.values import check_pattern, coerce


@dataclass(frozen=True)
class ValidatedParams:
    """Typed parameter values (paths resolved, tables read) and the paths they name."""

    values: dict[str, object]
    inputs: tuple[Path, ...]
    outputs: tuple[Path, ...]


def validate_params(
    template: Template, raw: Mapping[str, object], policy: PathPolicy, *, check_inputs: bool
) -> ValidatedParams:
    """Check raw (CLI strings or params-file values) against the template; see the module doc."""
    _refuse_unknown(template, raw)
    policy.expect(_named_paths(template, raw))  # asked of the job's host at once
    values: dict[str, object] = {}
    paths: dict[PathRole, list[Path]] = {PathRole.INPUT: [], PathRole.OUTPUT: []}
    for name, spec in template.spec.params.items():
        where = f"template {template.name!r}: parameter {name!r}"
        value = _typed(spec, raw.get(name), where)
        if spec.role is not None and value is not None:
            value = _resolved(spec, value, where, policy, check_inputs)
            paths[spec.role] += _paths_in(value)
        values[name] = value
    paths[PathRole.OUTPUT] += _written_inside(template, values, policy)
    return ValidatedParams(
        values=values, inputs=tuple(paths[PathRole.INPUT]), outputs=tuple(paths[PathRole.OUTPUT])
    )


def _written_inside(
    template: Template, values: Mapping[str, object], policy: PathPolicy
) -> list[Path]:
    """The files the job writes inside an output directory parameter (`inside`), each
    resolved and checked against the roots as every output is: a symlink inside the
    directory, pointing out of the roots, is refused (issue 24: a pipeline head job's
    `.jobsmith` wrote its configuration and console log outside them). The value itself
    stays relative: the job writes it after changing into the resolved directory."""
    written = []
    for name, spec in template.spec.params.items():
        directory, value = values.get(spec.inside or ""), values[name]
        if isinstance(directory, Path) and value is not None:
            where = f"template {template.name!r}: parameter {name!r}"
            written.append(policy.resolve(directory / str(value), where))
    return written


def _named_paths(template: Template, raw: Mapping[str, object]) -> list[Path]:
    """The paths the parameters name as given (a value that is not one is left for the
    checks below to refuse), so the job's host is asked about all of them at once."""
    named: list[Path] = []
    for name, spec in template.spec.params.items():
        if spec.role is None or raw.get(name) is None:
            continue
        try:
            value = coerce(spec, raw[name])
        except ValueError:
            continue
        named += [
            p for p in (value if isinstance(value, tuple) else (value,)) if isinstance(p, Path)
        ]
    return named


def _refuse_unknown(template: Template, raw: Mapping[str, object]) -> None:
    valid = list(template.spec.params)
    for name in raw:
        if name not in template.spec.params:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TemplateError(
                f"template {template.name!r}: unknown parameter {name!r}{hint}; "
                f"valid: {', '.join(valid) or '(none)'}"
            )


def _typed(spec: ParamSpec, raw: object, where: str) -> object:
    if raw is None:
        if spec.required:
            raise TemplateError(
                f"{where} is required: {spec.description} (e.g. {_example(spec.example)})"
            )
        raw = spec.default
        if raw is None:
            return None
    try:
        return coerce(spec, raw)
    except ValueError as exc:
        raise TemplateError(f"{where}: {exc}") from None


def _example(example: object) -> str:
    return ",".join(example) if isinstance(example, list) else str(example)


def _resolved(
    spec: ParamSpec, value: object, where: str, policy: PathPolicy, check_inputs: bool
) -> object:
    if spec.type is ParamType.TABLE:
        assert isinstance(value, Path)  # coerce gives a Path for a table
        return _table(spec, value, where, policy, check_inputs)
    if spec.type is ParamType.PATHS:
        assert isinstance(value, tuple)  # coerce gives a tuple of Paths
        return tuple(_path(spec, p, where, policy, check_inputs) for p in value)
    assert isinstance(value, Path)  # the remaining path type is PATH
    return _path(spec, value, where, policy, check_inputs)


def _path(spec: ParamSpec, path: Path, where: str, policy: PathPolicy, check_inputs: bool) -> Path:
    resolved = policy.resolve(path, where)
    try:
        check_pattern(spec, resolved)
    except ValueError as exc:
        raise TemplateError(f"{where}: {exc}") from None
    if check_inputs and spec.checks_existence:
        policy.require_existing(resolved, spec.kind, where)
    return resolved


def _table(
    spec: ParamSpec, path: Path, where: str, policy: PathPolicy, check_inputs: bool
) -> Table:
    sheet = policy.resolve(path, where)
    # The table itself is always read now (its rows are rendered into the body), even
    # when the existence of the paths it names is not checked.
    policy.require_existing(sheet, PathKind.FILE, where)

    def check_cell(cell: Path, cell_where: str) -> Path:
        return _path(spec, cell, f"{where} ('{sheet}' {cell_where})", policy, check_inputs)

    read, cells = _once(policy), _Cells()
    assert spec.columns is not None  # ParamSpec requires columns for a table
    with contextlib.suppress(ValueError):  # the pass that checks them says what is wrong
        read_table(sheet, spec.columns, cells.note, read)
    policy.expect(cells.seen)  # every cell asked of the job's host at once
    try:
        return read_table(sheet, spec.columns, check_cell, read)
    except ValueError as exc:
        raise TemplateError(f"{where}: '{sheet}': {exc}") from None


def _once(policy: PathPolicy) -> Callable[[Path], bytes]:
    """policy.read, each file read once (a sheet is parsed twice, read once)."""
    read: dict[Path, bytes] = {}

    def once(path: Path) -> bytes:
        if path not in read:
            read[path] = policy.read(path)
        return read[path]

    return once


class _Cells:
    """The path cells of a sheet, noted unresolved by a first parse."""

    def __init__(self) -> None:
        self.seen: list[Path] = []

    def note(self, cell: Path, where: str) -> Path:
        self.seen.append(cell)
        return cell


def _paths_in(value: object) -> list[Path]:
    if isinstance(value, Table):
        return [value.path, *value.paths()]
    if isinstance(value, tuple):
        return [p for p in value if isinstance(p, Path)]
    return [value] if isinstance(value, Path) else []
