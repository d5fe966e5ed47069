"""sbatch's option names on `render` and `submit` (issue 25, item 2): each option reaches
its `#SBATCH` directive, the old `-p KEY=VALUE` and the dependency forms jobsmith does
not model are refused in one line, and on the lab cluster `-p long` lands in long.

The table these follow is docs/sbatch-options.md.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import Result
from lab_cli import js

from jobsmith.adapters.options import Dependency, DependencyKind, parse_dependency
from jobsmith.errors import InputError

lab = pytest.mark.usefixtures("lab_cluster")
pytestmark = pytest.mark.usefixtures("user_site")


def one_error_line(result: Result) -> str:
    """The CLI's error output must be one line, never a traceback."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output + result.stderr
    assert lines[0].startswith("jobsmith: error: ")
    return lines[0]


# --- refused before anything is rendered (no cluster needed) ----------------------------


@pytest.mark.parametrize("command", ["render", "submit"])
def test_an_old_p_key_value_is_one_line_naming_the_change(command: str) -> None:
    result = js(command, "command", "-p", "command=hostname")
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert "-p now names the partition, as in sbatch" in line
    assert "-P command=hostname" in line


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("singleton", "singleton is not supported"),
        ("aftercorr:12", "aftercorr is not supported"),
        ("after:12+5", "a '+minutes' delay is not supported"),
        ("afterok:12?afterany:13", "the any-of form ('?') is not supported"),
        ("expand:12", "expand is not supported"),
        ("afterwards:12", "unknown type 'afterwards'; supported: afterok, afterany"),
        ("afterok", "no job id"),
        ("afterok:abc", "job id 'abc'"),
    ],
)
def test_a_dependency_jobsmith_does_not_model_is_refused_by_name(spec: str, said: str) -> None:
    result = js("render", "command", "-P", "command=true", "-d", spec)
    assert result.exit_code == 2, result.output
    assert said in one_error_line(result)


def test_sbatch_dependency_syntax_reads_into_dependencies_that_all_must_hold() -> None:
    assert parse_dependency("afterok:1:2,afterany:3_4,after:5") == (
        Dependency(kind=DependencyKind.AFTEROK, job_ids=("1", "2")),
        Dependency(kind=DependencyKind.AFTERANY, job_ids=("3_4",)),
        Dependency(kind=DependencyKind.AFTER, job_ids=("5",)),
    )
    with pytest.raises(InputError):
        parse_dependency("afternotok:1,singleton")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--mem-per-cpu", "1G"], "'--mem-per-cpu': is not supported: jobsmith asks for memory"),
        (["-a", "0-9%x"], "--array '0-9%x': expected indices such as 0-9"),
        (["-a", "x"], "--array 'x': expected indices"),
        (["-a", "9-3"], "--array '9-3': expected indices"),
        (["-a", "0-9:0"], "--array '0-9:0': expected indices"),
        (["-a", "0-99999999999"], "above Slurm's largest possible (4000000"),
        (["-a", "0-9%2", "--throttle", "3"], "give the limit once"),
        (["-G", "1", "--gpus-per-node", "1"], "both per job and per node"),
        (["-J", "mine.js-0123456789ab"], "ends as jobsmith's tag does"),
        (["-J", "two words"], "job_name"),
        (["--constraint", "a b"], "constraint"),
        (["-p", ""], "is empty"),
    ],
)
def test_a_bad_sbatch_option_is_one_line_naming_it(args: list[str], said: str) -> None:
    result = js("render", "command", "-P", "command=true", *args)
    assert result.exit_code == 2, result.output
    assert said in one_error_line(result)


def test_help_shows_sbatchs_names_and_hides_the_older_ones() -> None:
    shown = js("submit", "--help").stdout
    for name in (
        "-P, --param", "-p, --partition", "-t, --time", "-c, --cpus-per-task", "--mem ",
        "-G, --gpus", "--gpus-per-node", "-N, --nodes", "-n, --ntasks", "--ntasks-per-node",
        "-A, --account", "-q, --qos", "-J, --job-name", "-a, --array", "-d, --dependency",
        "--constraint", "-x, --exclude",
    ):  # fmt: skip
        assert name in shown, name
    for old in ("--cpus ", "--cpus,", "--after-ok", "--after-any", "--after-not-ok"):
        assert old not in shown, old


# --- each option in the rendered script (render needs Slurm: the lab) --------------------


@lab
@pytest.mark.parametrize(
    ("args", "directives"),
    [
        (["-p", "long"], ["--partition=long"]),
        (["--partition", "long"], ["--partition=long"]),
        (["-t", "1:00:00", "-p", "long"], ["--time=01:00:00"]),
        (["-c", "2"], ["--cpus-per-task=2"]),
        (["--cpus", "2"], ["--cpus-per-task=2"]),  # the older name, hidden
        (["--mem", "2G"], ["--mem=2048M"]),
        (["-p", "gpu", "-G", "2"], ["--gres=gpu:2"]),  # one node: per job is per node
        (["-p", "gpu", "-G", "2", "-N", "2"], ["--nodes=2", "--gres=gpu:1"]),
        (["-p", "gpu", "--gpus-per-node", "2", "-N", "2"], ["--nodes=2", "--gres=gpu:2"]),
        (["-N", "1"], ["--nodes=1"]),
        (["-n", "2"], ["--ntasks=2"]),
        (["-N", "1", "--ntasks-per-node", "2"], ["--nodes=1", "--ntasks-per-node=2"]),
        (["-A", "proj2"], ["--account=proj2"]),
        (["-q", "normal"], ["--qos=normal"]),
        (["-J", "mine"], ["--job-name=mine.js-"]),
        (["-a", "0-3%2"], ["--array=0-3%2", "--output=", "_%A_%a.out"]),
        (["-a", "1,3", "--throttle", "1"], ["--array=1,3%1"]),
        (["-d", "afterok:11:12,afterany:13"], ["--dependency=afterok:11:12,afterany:13"]),
        (["-d", "after:14", "-d", "afternotok:15"], ["--dependency=after:14,afternotok:15"]),
        (["--after-ok", "11"], ["--dependency=afterok:11"]),  # the older name, hidden
        (["--constraint", "intel&ib"], ["--constraint=intel&ib"]),
        (["--exclude", "n[01-03],n7"], ["--exclude=n[01-03],n7"]),
        (["-x", "n5"], ["--exclude=n5"]),
    ],
)
def test_each_sbatch_option_reaches_its_directive(args: list[str], directives: list[str]) -> None:
    result = js("render", "command", "-P", "command=true", *args, "--json")
    assert result.exit_code == 0, result.output
    header = [ln for ln in json.loads(result.stdout)["script"].splitlines() if ln.startswith("#SB")]
    for directive in directives:
        assert any(directive in line for line in header), (directive, header)


@lab
def test_gpus_per_job_that_the_nodes_cannot_share_evenly_is_refused() -> None:
    result = js("render", "command", "-P", "command=true", "-p", "gpu", "-G", "3", "-N", "2")
    assert result.exit_code == 2, result.output
    assert "--gpus 3 over 2 nodes" in one_error_line(result)


@lab
def test_an_array_templates_tasks_may_be_picked_but_not_added(workdir: Path) -> None:
    for name in ("a.sh", "b.sh", "c.sh"):
        (workdir / name).write_text("true\n")
    base = ("render", "file_array", "-P", "files=a.sh,b.sh,c.sh", "-P", "program=bash")
    picked = js(*base, "-a", "1-2%1", "--json")
    assert picked.exit_code == 0, picked.output
    assert "#SBATCH --array=1-2%1\n" in json.loads(picked.stdout)["script"]
    added = js(*base, "-a", "0-5")
    assert added.exit_code == 2, added.output
    assert "template 'file_array' has tasks 0-2" in one_error_line(added)
    assert "it goes up to task 5, which would have no item" in one_error_line(added)


@lab
def test_submit_p_partition_lands_in_that_partition(workdir: Path) -> None:
    """The issue's done-when: `jobsmith submit command -p long -P command=hostname`."""
    sub = js("submit", "command", "-p", "long", "-P", "command=hostname", "-J", "onlong",
             "--log-dir", str(workdir))  # fmt: skip
    assert sub.exit_code == 0, sub.output
    job_id = sub.stdout.strip()
    assert js("wait", job_id, "--timeout", "120").exit_code == 0
    acct: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # accounting may hold the record half-written a moment
        acct = (
            subprocess.run(
                ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "Partition,JobName,State"],
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.strip()
            .split("|")
        )
        if acct[0]:
            break
        time.sleep(1)
    assert acct[0] == "long" and acct[1].startswith("onlong.js-"), acct
    assert acct[2] == "COMPLETED"
    assert (workdir / f"command_{job_id}.out").read_text().strip()  # hostname printed


def test_rerun_takes_t_for_its_time_as_sbatch_does() -> None:
    result = js("rerun", "123", "-t", "soon")
    assert result.exit_code == 2, result.output
    assert "--time 'soon': invalid duration" in one_error_line(result)
