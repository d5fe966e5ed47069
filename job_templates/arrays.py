"""How an array template's task count follows from its parameters.

Tasks are numbered from 0 and task i handles item i (file i, chunk i, frame block i), so
the body reads `$SLURM_ARRAY_TASK_ID` directly. The rule is declared in the template's
`array:` section and checked against the parameter schema when the template is loaded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.job_templates.params import LIST_TYPES, NUMBER_TYPES, ParamSpec, ParamType
from jobsmith.workload_caps import MAX_ARRAY_TASKS, check_count

# Float noise in a measured duration (4.0000001 s) must not add an empty last chunk.
_EPSILON = 1e-6


@dataclass(frozen=True)
class ArrayPlan:
    """The array a rendered template needs: `spec` goes to JobOptions.array."""

    count: int
    spec: str
    rule: str  # how the count was derived, for humans


class _Rule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def _needs(
        self, params: Mapping[str, ParamSpec], wanted: Mapping[str, frozenset[ParamType]]
    ) -> list[str]:
        """Problems with the referenced parameters: unknown, wrong type, or may be unset."""
        problems = []
        for field, types in wanted.items():
            name = getattr(self, field)
            spec = params.get(name)
            kinds = ", ".join(sorted(t.value for t in types))
            if spec is None or spec.type not in types:
                problems.append(f"array.{field}: {name!r} is not a parameter of type {kinds}")
            elif not spec.required and spec.default is None:
                problems.append(f"array.{field}: parameter {name!r} needs a default or required")
        return problems


class PerItem(_Rule):
    """One task per item of a list parameter (files, words or table rows)."""

    kind: Literal["per_item"]
    param: str = Field(description="a paths, args or table parameter")

    def check(self, params: Mapping[str, ParamSpec]) -> list[str]:
        """Problems with this rule for the given schema."""
        return self._needs(params, {"param": LIST_TYPES})

    def count(self, values: Mapping[str, object]) -> tuple[int, str]:
        """Task count and a description of why."""
        items = values[self.param]
        assert isinstance(items, Sized)  # a list type, validated before this is called
        return len(items), f"one task per item of {self.param!r}"


class PerChunk(_Rule):
    """One task per `size`-long chunk of a `total` length: ceil(total / size) tasks."""

    kind: Literal["per_chunk"]
    total: str = Field(description="an int or float parameter: the length to cover")
    size: str = Field(description="an int parameter: the length of one chunk")

    def check(self, params: Mapping[str, ParamSpec]) -> list[str]:
        """Problems with this rule for the given schema."""
        return self._needs(params, {"total": NUMBER_TYPES, "size": frozenset({ParamType.INT})})

    def count(self, values: Mapping[str, object]) -> tuple[int, str]:
        """Task count and a description of why."""
        total, size = _number(values, self.total), _number(values, self.size)
        if size <= 0:
            raise ValueError(f"{self.size!r} must be positive, got {size}")
        return math.ceil(total / size - _EPSILON), f"{self.total} / {self.size}, rounded up"


class PerBlock(_Rule):
    """One task per block of `size` integers from `start` to `end` inclusive (frames)."""

    kind: Literal["per_block"]
    start: str = Field(description="an int parameter: the first number")
    end: str = Field(description="an int parameter: the last number (inclusive)")
    size: str = Field(description="an int parameter: numbers per task")

    def check(self, params: Mapping[str, ParamSpec]) -> list[str]:
        """Problems with this rule for the given schema."""
        ints = frozenset({ParamType.INT})
        return self._needs(params, {"start": ints, "end": ints, "size": ints})

    def count(self, values: Mapping[str, object]) -> tuple[int, str]:
        """Task count and a description of why."""
        start, end = _number(values, self.start), _number(values, self.end)
        size = _number(values, self.size)
        if end < start:
            raise ValueError(f"{self.end!r} ({end}) is before {self.start!r} ({start})")
        if size <= 0:
            raise ValueError(f"{self.size!r} must be positive, got {size}")
        return math.ceil((end - start + 1) / size), f"blocks of {self.size} from {self.start}"


ArrayRule = Annotated[PerItem | PerChunk | PerBlock, Field(discriminator="kind")]


def plan_array(rule: PerItem | PerChunk | PerBlock, values: Mapping[str, object]) -> ArrayPlan:
    """The array for validated parameter values; ValueError if it would be empty."""
    count, why = rule.count(values)
    if count < 1:
        raise ValueError(f"the array would have no tasks ({why})")
    # from the numbers alone: a canary lists the indices, a per_chunk of 1e15 would not end
    check_count(count, MAX_ARRAY_TASKS, f"array tasks ({why})", "split the work over jobs")
    return ArrayPlan(count=count, spec="0" if count == 1 else f"0-{count - 1}", rule=why)


def _number(values: Mapping[str, object], name: str) -> float:
    value = values[name]
    assert isinstance(value, int | float)  # a number type, validated before this is called
    return value
