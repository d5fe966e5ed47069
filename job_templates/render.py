"""Rendering a template's body: validate parameters, render in the sandbox, check the result.

`render_body` is the one entry point. It returns the body (the job's commands only) with
everything the caller needs to compose and submit the script: typed parameter values,
resource defaults, the array (if any) and the paths the job reads and writes.
"""

from __future__ import annotations

import re
import traceback
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jobsmith.errors import TemplateError
from jobsmith.job_templates.arrays import ArrayPlan, plan_array
from jobsmith.job_templates.environment import compile_body, make_environment
from jobsmith.job_templates.paths import PathPolicy
from jobsmith.job_templates.resources import Resources
from jobsmith.job_templates.spec import Template
from jobsmith.job_templates.tables import Table
from jobsmith.job_templates.validate import validate_params

# sbatch reads `#SBATCH` lines until the first command; a body must never produce one.
_DIRECTIVE = re.compile(r"^\s*#\s*SBATCH", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class RenderedBody:
    """A rendered body and what the caller needs to build the sbatch submission."""

    template: str
    params: Mapping[str, object]  # typed: str, int, float, bool, Path, tuples, Table, None
    body: str
    resources: Resources
    array: ArrayPlan | None
    input_paths: tuple[Path, ...]
    output_paths: tuple[Path, ...]

    def sbatch_fields(self) -> dict[str, int | str]:
        """Resource defaults plus `array`, keyed by JobOptions field name."""
        fields: dict[str, int | str] = dict(self.resources.sbatch_fields())
        if self.array is not None:
            fields["array"] = self.array.spec
        return fields


def render_body(
    template: Template,
    params: Mapping[str, object],
    *,
    allowed_roots: Sequence[Path],
    check_inputs: bool = True,
    base_dir: Path | None = None,
    paths: PathPolicy | None = None,
) -> RenderedBody:
    """Validate params for template and render its body.

    params: values as strings (CLI) or typed (params file). allowed_roots: every path
    must resolve inside one. check_inputs: require input paths to exist (turn off only
    to preview on a host that cannot see the inputs). base_dir: what relative paths are
    relative to (default: the current directory). paths: the path policy to use instead
    of one made of those two on this host's files (a caller that checks more paths of the
    same job where it runs: agent/runtime/submission/request/jobs.py). Raises
    TemplateError or PolicyError.
    """
    policy = paths or PathPolicy(allowed_roots, base_dir if base_dir is not None else Path.cwd())
    checked = validate_params(template, params, policy, check_inputs=check_inputs)
    body = _render(template, _context(checked.values))
    _check_body(template, body)
    return RenderedBody(
        template=template.name,
        params=checked.values,
        body=body,
        resources=template.spec.resources.resolve(checked.values),
        array=_plan(template, checked.values),
        input_paths=checked.inputs,
        output_paths=checked.outputs,
    )


def _plan(template: Template, values: Mapping[str, object]) -> ArrayPlan | None:
    if template.spec.array is None:
        return None
    try:
        return plan_array(template.spec.array, values)
    except ValueError as exc:
        raise TemplateError(f"template {template.name!r}: {exc}") from None


def _context(values: Mapping[str, object]) -> dict[str, object]:
    """Values as plain data for the sandbox: Path objects would offer `.unlink()` & co."""
    return {name: _plain(value) for name, value in values.items()}


def _plain(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    if isinstance(value, Table):
        rows = tuple({key: _plain(cell) for key, cell in row.items()} for row in value.rows)
        return {"path": str(value.path), "columns": value.columns, "rows": rows}
    return value


def _render(template: Template, context: Mapping[str, object]) -> str:
    env = make_environment()
    compiled = compile_body(env, template.body, name=template.name, path=template.body_path)
    try:
        return compiled.render(context)
    except Exception as exc:  # anything raised while rendering is the template's fault
        line = _body_line(exc, template.body_path)
        raise TemplateError(f"template {template.name!r}: {line}: {exc}") from None


def _body_line(exc: BaseException, path: Path) -> str:
    """'file:line' of the body line being rendered when exc was raised, if known."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)


def _check_body(template: Template, body: str) -> None:
    """Refuse directives and control characters in the rendered text, whatever their source."""
    match = _DIRECTIVE.search(body)
    if match:
        line = body.count("\n", 0, match.start()) + 1
        raise TemplateError(
            f"template {template.name!r}: rendered line {line} is an #SBATCH directive; "
            "resources belong in the template's 'resources:' section"
        )
    for char in body:
        if char not in "\n\t" and unicodedata.category(char) in {"Cc", "Cf", "Zl", "Zp"}:
            raise TemplateError(
                f"template {template.name!r}: the rendered body contains control character "
                f"U+{ord(char):04X}"
            )
