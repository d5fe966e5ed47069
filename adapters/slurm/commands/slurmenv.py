"""The user's Slurm environment variables: folded into a request, refused, or pinned.

Slurm's commands read options from the environment, and for sbatch the environment wins
over the script's own `#SBATCH` lines: with `SBATCH_PARTITION=high` exported, a script
that says `--partition=debug` runs in `high`. What Slurm ran would then not be what
policy checked and an approval hashed. Sites set some of these on purpose (a module file
that exports a default account), so none is dropped silently:

- sbatch's resource variables jobsmith models (partition, account, QoS, time, memory)
  are folded into the request where the user gave no explicit value, so they appear as
  directives in the script, are checked by policy and covered by its hash;
- every other sbatch input variable (and SLURM_CLUSTERS, which sends a job to another
  cluster) refuses a submission with its name: jobsmith cannot check what it would do;
- for every command, the variables that shape or filter the output jobsmith parses
  (SQUEUE_FORMAT, SQUEUE_STATES, SACCT_FORMAT, SLURM_TIME_FORMAT, …), that change what a
  control command touches (SCANCEL_*, SCONTROL_*), or that change exit statuses
  (SLURM_EXIT_ERROR) are removed, and the few jobsmith needs are pinned, so parsing never
  depends on the user's shell. Every SBATCH_* variable is removed too, after folding,
  so the script alone says what runs.
Where the commands find their cluster is the site's (`scheduler.slurm_conf`), set by
the environment rule (adapters/environment_rule.py), never the caller's SLURM_CONF.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobsmith.adapters.scheduler import EnvironmentDefault, EnvironmentInputs

#: sbatch input variables jobsmith turns into request fields (JobRequest field names)
FOLDED: dict[str, str] = {
    "SBATCH_PARTITION": "partition",
    "SBATCH_ACCOUNT": "account",
    "SBATCH_QOS": "qos",
    "SBATCH_TIMELIMIT": "time_limit",
    "SBATCH_MEM_PER_NODE": "mem",
}

#: Set for every Slurm command: a user's own SLURM_TIME_FORMAT=relative would make times
#: unreadable, and squeue cuts long array ranges at 64 characters unless told not to.
PINNED: dict[str, str] = {"SLURM_TIME_FORMAT": "standard", "SLURM_BITSTR_LEN": "0"}

#: input-variable prefixes of the commands jobsmith runs (sbatch's are folded first)
_COMMAND_PREFIXES = ("SBATCH_", "SQUEUE_", "SACCT_", "SCANCEL_", "SCONTROL_", "SINFO_")
#: SLURM_* variables that change what the commands report or which cluster they ask
_DROPPED = frozenset({"SLURM_CLUSTERS", "SLURM_EXIT_ERROR", "SLURM_EXIT_IMMEDIATE", *PINNED})
#: refuse a submission: jobsmith cannot check where or how the job would run
_REFUSED_EXTRA = ("SLURM_CLUSTERS",)


def sbatch_inputs(environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The foldable sbatch variables set (name -> value) and the names to refuse."""
    folded = {name: environ[name] for name in FOLDED if environ.get(name, "") != ""}
    # an empty variable asks for nothing, and the transport removes it from sbatch's view
    refused = sorted(
        name
        for name, value in environ.items()
        if value != ""
        and ((name.startswith("SBATCH_") and name not in FOLDED) or name in _REFUSED_EXTRA)
    )
    return folded, refused


def environment_inputs(environ: Mapping[str, str]) -> EnvironmentInputs:
    """sbatch_inputs as the Scheduler protocol's neutral answer."""
    folded, refused = sbatch_inputs(environ)
    defaults = tuple(
        EnvironmentDefault(variable=name, field=FOLDED[name], value=value)
        for name, value in folded.items()
    )
    return EnvironmentInputs(defaults=defaults, refused=tuple(refused))


def command_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """environ as every Slurm command should see it: input variables removed, pins set."""
    kept = {
        name: value
        for name, value in environ.items()
        if not name.startswith(_COMMAND_PREFIXES) and name not in _DROPPED
    }
    return {**kept, **PINNED}
