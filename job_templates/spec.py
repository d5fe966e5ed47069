"""The template file format: `<name>.yaml` (a `TemplateSpec`) plus `<name>.sh.j2` (the body).

The YAML holds everything but the commands: a description, the parameter schema, the
resource defaults and, for array jobs, the array rule. The body renders only the job's
commands; the caller adds `#!/bin/bash`, the `#SBATCH` lines and the site's setup.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobsmith.job_templates.arrays import ArrayRule
from jobsmith.job_templates.params import (
    IDENTIFIER,
    OneLine,
    ParamSpec,
    ParamType,
    PathRole,
    RawValue,
)
from jobsmith.job_templates.resources import ResourceDefaults

# Names a parameter cannot take: Jinja keywords and the sandbox's globals would shadow
# or be shadowed by it.
RESERVED_NAMES = frozenset(
    {
        *("and", "or", "not", "in", "is", "if", "else", "elif", "for", "endfor", "set"),
        *("true", "false", "none", "loop", "self", "varargs", "kwargs", "caller"),
        *("range", "dict", "lipsum", "cycler", "joiner", "namespace"),
    }
)


class TemplateSpec(BaseModel):
    """The contents of a template's YAML file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: OneLine = Field(description="one line saying what the job does")
    params: dict[str, ParamSpec] = Field(
        default_factory=dict, description="parameter name -> spec, in the order shown to users"
    )
    resources: ResourceDefaults = Field(
        default_factory=ResourceDefaults, description="sbatch resource defaults"
    )
    array: ArrayRule | None = Field(None, description="how the array is derived; absent: no array")

    @model_validator(mode="after")
    def _consistent(self) -> TemplateSpec:
        problems = [
            f"params.{name}: not a usable name (snake_case, not a Jinja keyword or global)"
            for name in self.params
            if not IDENTIFIER.match(name) or name in RESERVED_NAMES
        ]
        problems += self.resources.check_references(self.params)
        problems += [
            f"params.{name}.inside: {spec.inside!r} is not a path parameter with role output"
            for name, spec in self.params.items()
            if spec.inside is not None and not _an_output_directory(self.params.get(spec.inside))
        ]
        if self.array is not None:
            problems += self.array.check(self.params)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _an_output_directory(spec: ParamSpec | None) -> bool:
    """spec is a single path the job writes (what an `inside` parameter is relative to)."""
    return spec is not None and spec.type is ParamType.PATH and spec.role is PathRole.OUTPUT


class Template(BaseModel):
    """A loaded template: its name, spec and body source, and the files they came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="the template's name: its file name without .yaml")
    spec: TemplateSpec = Field(description="the parsed YAML")
    body: str = Field(description="the Jinja2 source of the body")
    spec_path: Path = Field(description="the YAML file")
    body_path: Path = Field(description="the .sh.j2 file")

    @property
    def description(self) -> str:
        """The one-line description."""
        return self.spec.description

    def examples(self) -> dict[str, RawValue]:
        """An example value for every required parameter (paths are relative)."""
        return {
            name: spec.example
            for name, spec in self.spec.params.items()
            if spec.required and spec.example is not None
        }
