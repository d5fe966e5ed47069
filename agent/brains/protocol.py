"""The Brain seam: what decides the next step when one of a session's jobs fails.

A brain is shown a typed view (`FailureView`: the session, the job that failed, what
Slurm says about it, the diagnosis of every failed task, the session's events) and
answers with a `Decision`: what to do, as steps for the executor, and why. It never
touches Slurm, the store or the executor: the runner (agent/brains/deciding.py) records the
decision as one typed `decision` event, at most one per failed job, and only then runs
its steps through the executor, under the same policy and approvals as any other step.
So a brain is a function of what it is shown, and swapping one changes nothing else.

A brain that calls a model is also a `ModelBrain`: it says what it decides without the
model (its rules, which cost nothing). The runner checks the policy's model token
budgets before asking it and, when one is reached, asks only that: the model is never
called over budget. A brain without that method calls no model, so existing brains and
one's own need nothing new.

Which brain runs is configuration: the site or user file's `brain:` names a built-in
(`rules`, the default) or a factory as `module:attribute` (importable, called with no
arguments, returning an object with a `name` and a `decide` method), so a brain of one's
own plugs in through its own file alone.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.agent.diagnosis.table import Diagnosis
from jobsmith.agent.runtime.session.events import Event
from jobsmith.agent.runtime.session.jobstate import StateChange
from jobsmith.agent.runtime.submission.steps import Step
from jobsmith.errors import ConfigError


class Action(StrEnum):
    """What a decision does about a failed job."""

    RERUN = "rerun"  # its steps re-run the failed tasks (through policy)
    REPORT = "report"  # nothing can be done automatically: a person is told
    HOLD = "hold"  # leave it to a person, without a verdict
    ERROR = "error"  # deciding failed (recorded so the watcher does not loop)


class FailureView(BaseModel):
    """What a brain may see when a job fails."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    change: StateChange = Field(description="the session, the job and its new state")
    status: JobStatus = Field(description="what Slurm says about the job and its tasks")
    diagnoses: tuple[Diagnosis, ...] = Field(description="one per failed task (or the job)")
    events: tuple[Event, ...] = Field(description="the session's log, oldest first")


class TokenUsage(BaseModel):
    """What a model call cost, in the Messages API's own token counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field("", description="the model that answered (prices differ per model)")
    input_tokens: int = Field(0, ge=0, description="uncached input tokens")
    output_tokens: int = Field(0, ge=0, description="tokens the model wrote")
    cache_read_input_tokens: int = Field(0, ge=0, description="input read from the cache")
    cache_creation_input_tokens: int = Field(0, ge=0, description="input written to the cache")


class Decision(BaseModel):
    """A brain's answer: an action, the steps that carry it out, and the rationale."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    brain: str = Field(description="which brain decided (rules, a model, a person)")
    job_id: str = Field(description="the failed job decided about")
    action: Action = Field(description="rerun, report, hold or error")
    reason: str = Field(description="one line: why")
    steps: tuple[Step, ...] = Field((), description="what the executor runs, in order")
    verdicts: tuple[str, ...] = Field((), description="the diagnoses' verdicts")
    remedies: tuple[str, ...] = Field((), description="what the diagnoses suggest")
    evidence: tuple[str, ...] = Field((), description="lines that support the verdicts")
    notes: tuple[str, ...] = Field((), description="what could not be read (a task's stderr)")
    # None for brains that call no model (rules, a person) and for logs written before it
    usage: TokenUsage | None = Field(None, description="what a model call cost, if one ran")

    @model_serializer(mode="wrap")
    def _usage_only_if_spent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a decision that cost no tokens dumps as before usage existed: the events and
        # `watch --json` documents of the rule brain and of people stay unchanged
        data: dict[str, Any] = handler(self)
        if data.get("usage") is None:
            data.pop("usage", None)
        return data


@runtime_checkable
class Brain(Protocol):
    """Decides what to do about a failed job; runs nothing itself."""

    @property
    def name(self) -> str:
        """Recorded with each decision: which brain took it."""
        ...

    def decide(self, view: FailureView) -> Decision:
        """The decision about view's job (steps for the executor, and why)."""
        ...


@runtime_checkable
class ModelBrain(Brain, Protocol):
    """A brain that may call a model, charged to the policy's model token budgets."""

    def decide_without_model(self, view: FailureView, refused: str) -> Decision:
        """The decision at no token cost, the model being refused for the reason given:
        what rules decide where they can, else a HOLD that says why (refused)."""
        ...


def load_brain(spec: str, builtins: dict[str, Callable[[], Brain]]) -> Brain:
    """The brain a configuration names: a built-in's name, or 'module:attribute'."""
    if spec in builtins:
        return builtins[spec]()
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        valid = ", ".join(sorted(builtins))
        raise ConfigError(f"brain {spec!r}: give one of {valid}, or a factory as module:attribute")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"brain {spec!r}: cannot import it ({exc})") from None
    try:
        brain = factory()
    except Exception as exc:  # the site's own code: whatever it raises is a config problem
        raise ConfigError(f"brain {spec!r}: calling it failed ({exc})") from None
    if not isinstance(brain, Brain):
        raise ConfigError(f"brain {spec!r}: {factory!r} made no brain (a `name` and `decide`)")
    return brain
