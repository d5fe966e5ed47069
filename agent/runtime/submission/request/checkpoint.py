"""A checkpointable job (`--checkpoint CMD`): warned before its end, it saves and requeues.

What a Slurm user writes by hand, written once (issue 27): `#SBATCH --signal=B:USR1@LEAD`
and `--requeue`, and a trap in the batch shell that runs the user's checkpoint command
when USR1 arrives, then `scontrol requeue`s the job while its restart count
(`SLURM_RESTART_COUNT`, which Slurm raises on every requeue, preemption and node failure
included) is under the bound. Slurm sends USR1 LEAD seconds before the time limit (up
to a minute earlier: its timer is coarse), and, where the site turns it on
(PreemptParameters=send_user_signal; SlurmctldParameters=preempt_send_user_signal on
22.05), at preemption, the partition's GraceTime then being the time to save.

Decisions, each said in docs/batch-scripts.md:

- **The batch shell alone gets the signal** (`B:`): a program that does not expect USR1
  would die of it (its default action), and a step started with srun gets nothing. The
  checkpoint command is how the program is told (touch a file it watches, send it a
  signal it handles: `$JOBSMITH_JOB_PID` is the job's commands' process).
- **The job's commands run in the background**, the shell waiting for them: bash runs a
  trap only once the foreground command returns, so a shell running the program in the
  foreground would hear USR1 only when the program had ended. After the trap the shell
  waits again, and exits with the commands' status.
- **The checkpoint command is user code, one line**, as a `command` template's command:
  one single-quoted word given to `bash -c`, so it runs as typed and adds nothing to the
  script around it.
- **At preemption the trap checkpoints but does not requeue**: the job's `PreemptTime`
  (scontrol show job) is set, and the partition's PreemptMode=REQUEUE requeues it when
  its GraceTime ends. Seen on 24.11.5: a job that requeued itself at preemption was
  requeued by Slurm once more when its next run ended, completed ("requeue ... per
  user/system request").
- **Past the bound the job is not requeued by the trap**: at the time limit it then ends
  TIMEOUT; a preemption still requeues it (the partition's PreemptMode decides that, not
  the job).
"""

from __future__ import annotations

import shlex
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from jobsmith.errors import InputError, PolicyError
from jobsmith.job_templates.values import check_text
from jobsmith.site_config import SiteConfig

#: the signal and its target: the batch shell only (see the module's doc)
SIGNAL = "USR1"
#: the most seconds sbatch's --signal=...@TIME takes (a 16-bit count)
MAX_SIGNAL_LEAD_S = 65535


def _one_line(text: str) -> str:
    """The checkpoint command's text as a `command` template's command must be: one line
    of printable text (no control, format or line-separator character: a newline would
    start a line of script), not blank."""
    if not text.strip():
        raise ValueError("is empty")
    return check_text(text)


#: one line of the user's shell code (job_templates' rule for a `command` parameter)
CheckpointCommand = Annotated[str, AfterValidator(_one_line)]


class Checkpoint(BaseModel):
    """What `--checkpoint` asked: the command, and the lead and bound if given (the site
    file's `jobs.checkpoint` gives the rest)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: CheckpointCommand = Field(
        description="shell command run in the job when the warning signal arrives"
    )
    signal_lead_s: int | None = Field(
        None, gt=0, le=MAX_SIGNAL_LEAD_S, description="seconds before the time limit to warn"
    )
    max_requeues: int | None = Field(
        None, ge=0, description="most times the job requeues itself (its restart count)"
    )


class CheckpointPlan(BaseModel):
    """A checkpoint with every value decided: what the script is written from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: CheckpointCommand
    signal_lead_s: int = Field(gt=0, le=MAX_SIGNAL_LEAD_S)
    max_requeues: int = Field(ge=0)

    def signal_option(self) -> str:
        """sbatch's --signal value: USR1 to the batch shell, signal_lead_s before the end."""
        return f"B:{SIGNAL}@{self.signal_lead_s}"


def plan(asked: Checkpoint, site: SiteConfig, time_limit_s: int | None) -> CheckpointPlan:
    """asked with the site's defaults filled in, judged against its policy: PolicyError
    naming the limit for more requeues than `policy.max_requeues`, InputError for a lead
    the time limit leaves no room for."""
    settings = site.jobs.checkpoint
    lead = asked.signal_lead_s if asked.signal_lead_s is not None else settings.signal_lead_s
    bound = asked.max_requeues if asked.max_requeues is not None else settings.max_requeues
    ceiling = site.policy.max_requeues
    if ceiling is not None and bound > ceiling:
        raise PolicyError(
            f"--max-requeues {bound} refused: the site allows at most {ceiling} "
            "(policy.max_requeues)"
        )
    if time_limit_s is not None and lead >= time_limit_s:
        raise InputError(
            f"--signal-lead {lead}s is not shorter than the time limit ({time_limit_s}s): "
            "the warning would come as the job starts; give a shorter lead or more time"
        )
    return CheckpointPlan(command=asked.command, signal_lead_s=lead, max_requeues=bound)


def wrap(body: str, checkpoint: CheckpointPlan) -> str:
    """body (a job's commands) run in the background under the trap (POSIX sh)."""
    bound = checkpoint.max_requeues
    command = shlex.quote(checkpoint.command)
    lines = [
        "# jobsmith --checkpoint: Slurm sends USR1 to this shell "
        f"{checkpoint.signal_lead_s} s before the time limit",
        "# and at preemption. The trap runs the checkpoint command, then requeues the job",
        f"# unless it was requeued {bound} times already. The job's commands run in the",
        "# background: a shell runs a trap only once its foreground command returns.",
        "__jobsmith_checkpoint() {",
        "    __jobsmith_trapped=1",
        '    echo "jobsmith: USR1 received (restart ${SLURM_RESTART_COUNT:-0}):'
        ' running the checkpoint command" >&2',
        f"    JOBSMITH_JOB_PID=$__jobsmith_pid bash -c -- {command} ||"
        ' echo "jobsmith: the checkpoint command exited $?" >&2',
        "    # preempted (PreemptTime set): the partition's PreemptMode requeues it after its",
        "    # GraceTime; a requeue of its own now would leave Slurm's pending, to requeue",
        "    # the next run when it ends",
        '    case $(scontrol show job "$SLURM_JOB_ID" 2>/dev/null) in',
        "    *PreemptTime=None* | '') ;;",
        "    *PreemptTime=*)",
        '        echo "jobsmith: preempted: Slurm requeues the job itself" >&2',
        "        return ;;",
        "    esac",
        f'    if [ "${{SLURM_RESTART_COUNT:-0}}" -lt {bound} ]; then',
        '        echo "jobsmith: requeueing job $SLURM_JOB_ID" >&2',
        '        scontrol requeue "$SLURM_JOB_ID" ||'
        ' echo "jobsmith: scontrol requeue exited $?" >&2',
        "    else",
        f'        echo "jobsmith: requeued {bound} times already: not again" >&2',
        "    fi",
        "}",
        f"trap __jobsmith_checkpoint {SIGNAL}",
        "(",
        body.rstrip("\n"),
        ") &",
        "__jobsmith_pid=$!",
        "# wait returns early when the trap ran (status 128+10): wait again then",
        "__jobsmith_status=",
        'while [ -z "$__jobsmith_status" ]; do',
        "    __jobsmith_trapped=0",
        '    wait "$__jobsmith_pid"; __jobsmith_waited=$?',
        '    [ "$__jobsmith_trapped" = 1 ] || __jobsmith_status=$__jobsmith_waited',
        "done",
        'exit "$__jobsmith_status"',
    ]
    return "\n".join(lines) + "\n"
