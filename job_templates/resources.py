"""A template's resource defaults, and their resolution against parameter values.

Field names match JobOptions (adapters/slurm/commands/options.py) so the resolved values can be
passed straight into it. A default is either a number or `{param: <name>}`, which takes
it from an int parameter: torch_train's `gpus` parameter sets both `--gres` and
torchrun's `--nproc_per_node`, so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt

from jobsmith.job_templates.params import ParamSpec, ParamType


class ParamRef(BaseModel):
    """A resource taken from an int parameter's value, written `{param: name}`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    param: str = Field(description="name of an int parameter of the same template")


class Resources(BaseModel):
    """Resolved resource defaults; `None` leaves the field to the site or the user."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpus_per_task: PositiveInt | None = Field(None, description="-c CPUs per task")
    mem_mb: PositiveInt | None = Field(None, description="--mem per node, MiB")
    time_limit_s: PositiveInt | None = Field(None, description="-t wall-time limit, seconds")
    gpus: NonNegativeInt | None = Field(None, description="GPUs per node (--gres=gpu:N)")
    nodes: PositiveInt | None = Field(None, description="-N number of nodes")
    ntasks: PositiveInt | None = Field(None, description="-n number of tasks")

    def sbatch_fields(self) -> dict[str, int]:
        """The set fields, keyed by their JobOptions name."""
        return {key: value for key, value in self.model_dump().items() if value is not None}


# The smallest value each resource accepts; a referenced parameter must guarantee it.
_MINIMUM = {"gpus": 0}


class ResourceDefaults(BaseModel):
    """The `resources:` section of a template file: numbers or parameter references."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpus_per_task: PositiveInt | ParamRef | None = Field(None, description="-c CPUs per task")
    mem_mb: PositiveInt | ParamRef | None = Field(None, description="--mem per node, MiB")
    time_limit_s: PositiveInt | ParamRef | None = Field(None, description="wall time, seconds")
    gpus: NonNegativeInt | ParamRef | None = Field(None, description="GPUs per node")
    nodes: PositiveInt | ParamRef | None = Field(None, description="-N number of nodes")
    ntasks: PositiveInt | ParamRef | None = Field(None, description="-n number of tasks")

    def references(self) -> dict[str, str]:
        """Resource field -> parameter name, for the fields given as `{param: …}`."""
        return {
            key: value.param for key, value in self._items().items() if isinstance(value, ParamRef)
        }

    def check_references(self, params: Mapping[str, ParamSpec]) -> list[str]:
        """Problems with the references: unknown, not int, or able to go below the minimum."""
        problems = []
        for key, name in self.references().items():
            spec = params.get(name)
            minimum = _MINIMUM.get(key, 1)
            if spec is None or spec.type is not ParamType.INT:
                problems.append(f"resources.{key}: {name!r} is not an int parameter")
            elif spec.min is None or spec.min < minimum:
                problems.append(f"resources.{key}: parameter {name!r} needs 'min: {minimum}'")
        return problems

    def resolve(self, values: Mapping[str, object]) -> Resources:
        """Replace each reference with the parameter's (already validated) value."""
        resolved = {
            key: values.get(value.param) if isinstance(value, ParamRef) else value
            for key, value in self._items().items()
        }
        return Resources.model_validate(resolved)

    def _items(self) -> dict[str, int | ParamRef | None]:
        return {key: getattr(self, key) for key in type(self).model_fields}
