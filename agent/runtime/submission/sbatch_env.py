"""Folding the user's SBATCH_* variables into a job request (see adapters/slurm/slurmenv.py).

The scheduler says which variables are set and what they mean
(`Scheduler.submission_environment`); this module applies them to a request.

A module file that exports `SBATCH_ACCOUNT=proj2` means "charge proj2 unless I say
otherwise"; jobsmith honours that by making it the request's account where the user gave
none, so policy checks it and the script's directives (and so its hash) carry it. What
jobsmith cannot model is refused by name before anything is rendered.
"""

from __future__ import annotations

from jobsmith.adapters.scheduler import EnvironmentDefault, EnvironmentInputs
from jobsmith.agent.runtime.submission.jobs import JobRequest, parse_unit
from jobsmith.errors import InputError
from jobsmith.text import holds_undecodable
from jobsmith.units import parse_duration, parse_memory


class EnvironmentRefused(InputError):
    """An sbatch input variable jobsmith cannot check is set in the environment."""


def fold_sbatch_env(request: JobRequest, inputs: EnvironmentInputs) -> tuple[JobRequest, str]:
    """The request with the environment's defaults folded in, and where they came from.

    The second value is empty when nothing came from the environment, else a phrase such
    as "from your environment: SBATCH_PARTITION=high" for error messages.
    """
    refused = inputs.refused
    for default in inputs.defaults:
        if holds_undecodable(default.value):
            raise InputError(
                f"{default.variable} in your environment holds bytes that are not UTF-8 text"
            )
    if refused:
        names = ", ".join(refused)
        raise EnvironmentRefused(
            f"{names} set in your environment: sbatch would apply "
            f"{'it' if len(refused) == 1 else 'them'} over the checked script, and jobsmith "
            f"cannot check {'it' if len(refused) == 1 else 'them'} against the site's policy; "
            f"unset {'it' if len(refused) == 1 else 'them'} for jobsmith "
            f"(env -u {refused[0]} jobsmith …) or pass the matching option instead"
        )
    changes: dict[str, object] = {}
    used = []
    for default in inputs.defaults:
        field, converted = _convert(default)
        if getattr(request, field) is None:  # an explicit option wins, as it does in sbatch
            changes[field] = converted
            used.append(f"{default.variable}={default.value}")
    if not changes:
        return request, ""
    return request.model_copy(update=changes), "from your environment: " + ", ".join(used)


def _convert(default: EnvironmentDefault) -> tuple[str, object]:
    """(JobRequest field, typed value) for one folded variable; InputError naming it."""
    where = f"{default.variable} in your environment:"
    if default.field == "time_limit":
        return "time_limit_s", parse_unit(parse_duration, where, default.value)
    if default.field == "mem":
        return "mem_mb", parse_unit(parse_memory, where, default.value)
    return default.field, default.value
