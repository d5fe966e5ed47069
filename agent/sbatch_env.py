"""Folding the user's SBATCH_* variables into a job request (see adapters/slurm/slurmenv.py).

A module file that exports `SBATCH_ACCOUNT=proj2` means "charge proj2 unless I say
otherwise"; jobsmith honours that by making it the request's account where the user gave
none, so policy checks it and the script's directives (and so its hash) carry it. What
jobsmith cannot model is refused by name before anything is rendered.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobsmith.adapters.slurm.slurmenv import FOLDED, sbatch_inputs
from jobsmith.agent.jobs import JobRequest, parse_unit
from jobsmith.errors import InputError
from jobsmith.units import parse_duration, parse_memory


class EnvironmentRefused(InputError):
    """An sbatch input variable jobsmith cannot check is set in the environment."""


def fold_sbatch_env(request: JobRequest, environ: Mapping[str, str]) -> tuple[JobRequest, str]:
    """The request with the environment's defaults folded in, and where they came from.

    The second value is empty when nothing came from the environment, else a phrase such
    as "from your environment: SBATCH_PARTITION=high" for error messages.
    """
    folded, refused = sbatch_inputs(environ)
    for name, value in folded.items():
        if any("\ud800" <= c <= "\udfff" for c in value):
            raise InputError(f"{name} in your environment holds bytes that are not UTF-8 text")
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
    for name, value in folded.items():
        field, converted = _convert(name, value)
        if getattr(request, field) is None:  # an explicit option wins, as it does in sbatch
            changes[field] = converted
            used.append(f"{name}={value}")
    if not changes:
        return request, ""
    return request.model_copy(update=changes), "from your environment: " + ", ".join(used)


def _convert(name: str, value: str) -> tuple[str, object]:
    """(JobRequest field, typed value) for one folded variable; InputError naming it."""
    kind = FOLDED[name]
    where = f"{name} in your environment:"
    if kind == "time_limit":
        return "time_limit_s", parse_unit(parse_duration, where, value)
    if kind == "mem":
        return "mem_mb", parse_unit(parse_memory, where, value)
    return kind, value
