"""The value types of a site file: durations, memory sizes, Slurm names, directories.

Each type validates what a person writes and stores one plain value (seconds, MiB, a
checked string, an absolute Path). What a file may say follows Slurm's conventions and
is decided by the validation context the loader passes, `file_context(environ)`:

- a bare int duration is minutes in a file (as `sbatch -t 30`), but seconds when a
  SiteConfig is built in Python code (the fields are named `..._s` and hold seconds);
- directories are expanded from the given environment (see expand.py); without one, a
  path that needs expansion is an error instead of a guess.

Durations and memory serialise (in JSON mode) back to Slurm's notation, so a dumped
config reads as a person would write it and loads back to the same values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    StringConstraints,
    ValidationInfo,
)
from pydantic_core import PydanticCustomError

from jobsmith.site_config.expand import expand_path
from jobsmith.units import format_duration, format_memory, parse_duration, parse_memory

#: the validation context the loader passes: file values follow Slurm's conventions
FILE_CONTEXT_KEY = "from_file"


def file_context(environ: Mapping[str, str]) -> dict[str, object]:
    """Validation context for data read from a site file, with paths expanded from environ."""
    return {FILE_CONTEXT_KEY: True, "environ": environ}


def _context(info: ValidationInfo) -> dict[str, Any]:
    return info.context if isinstance(info.context, dict) else {}


def _duration(value: object, info: ValidationInfo) -> object:
    # In a file a bare int is minutes, as in `sbatch -t 30`; in Python code the field
    # holds seconds (its name says _s), so an int given there is taken as it is.
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and not _context(info).get(FILE_CONTEXT_KEY)
    ):
        return value
    return parse_duration(value)


#: seconds; in a file a Slurm duration (int minutes or a string), dumped as '[D-]HH:MM:SS'
Duration = Annotated[
    int,
    BeforeValidator(_duration),
    Field(gt=0),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]
#: MiB; written as int MiB or '4G'/'500M', dumped back in the shortest exact form
Memory = Annotated[
    int,
    BeforeValidator(parse_memory),
    PlainSerializer(format_memory, return_type=str, when_used="json"),
]
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


def _name(value: object) -> object:
    if isinstance(value, str) and not _NAME.match(value):
        raise PydanticCustomError(
            "name",
            "{value} is not a Slurm name: use letters, digits, '_', '.' and '-'",
            {"value": repr(value)},
        )
    return value


#: a Slurm object name (partition, account, QoS, cluster): safe as a directive value
Name = Annotated[str, AfterValidator(_name)]


#: the input variables of Slurm's commands: a site may not pass them to jobs (sbatch and
#: srun would read them as options nobody checked); adapters/environment_rule.py never
#: lets a pattern admit them either
SLURM_INPUT_PREFIXES: tuple[str, ...] = (
    "SLURM_",
    "SBATCH_",
    "SALLOC_",
    "SRUN_",
    "SQUEUE_",
    "SACCT_",
    "SCANCEL_",
    "SCONTROL_",
    "SINFO_",
)
#: a variable name, or a pattern of name characters with * and ? (safe in a shell `case`)
_ENV_ENTRY = re.compile(r"[A-Za-z_*?][A-Za-z0-9_*?]*\Z")


def env_entry_problem(entry: str, *, passed: bool = True) -> str | None:
    """Why entry cannot name variables (passed to a job, unless passed is False), or None."""
    if not _ENV_ENTRY.match(entry):
        return "use letters, digits and '_', with '*' or '?' as wildcards"
    if passed and entry.startswith(SLURM_INPUT_PREFIXES):
        return "Slurm's commands read such variables as options nobody checked; set the option"
    return None


def _env_entry(value: str) -> str:
    problem = env_entry_problem(value)
    if problem is not None:
        message = "{value} cannot pass to jobs: {problem}"
        raise PydanticCustomError(
            "site_config", message, {"value": repr(value), "problem": problem}
        )
    return value


def _env_pattern(value: str) -> str:
    problem = env_entry_problem(value, passed=False)
    if problem is not None:
        message = "{value} is not a variable name or pattern: {problem}"
        raise PydanticCustomError(
            "site_config", message, {"value": repr(value), "problem": problem}
        )
    return value


#: a variable name or name pattern passed to jobs (jobs.environment.allow)
EnvEntry = Annotated[str, AfterValidator(_env_entry)]
#: a variable name or name pattern (policy.secret_env, matched ignoring case)
EnvPattern = Annotated[str, AfterValidator(_env_pattern)]


def _one_line(value: str) -> str:
    # Each item is emitted as one script line; an embedded newline would smuggle in
    # lines that no longer read as items of this list.
    if "\n" in value or "\r" in value:
        raise PydanticCustomError(
            "site_config",
            "{value} holds a line break: give each line as its own item",
            {"value": repr(value)},
        )
    return value


#: one shell line emitted before each job body
SetupLine = Annotated[str, AfterValidator(_one_line)]


def _expand(value: object, info: ValidationInfo) -> object:
    if value is None:
        raise PydanticCustomError(
            "path_expansion", "a directory is required here (a bare ~ is YAML's null: quote it)"
        )
    if not isinstance(value, str | Path):
        return value  # let the Path type report what is wrong with it
    return expand_path(str(value), _context(info).get("environ"))


#: an absolute directory, `~`/`$USER`/`$HOME` expanded at load time (see expand.py)
Dir = Annotated[Path, BeforeValidator(_expand)]


#: one of sbatch's long option names, without its dashes (exclusive, reservation)
SbatchOptionName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z-]*$", max_length=40)]
