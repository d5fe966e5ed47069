"""`jobsmith sbatch SCRIPT` (issue 25, item 1), without the cluster: a user's own batch
script read as sbatch reads it (adapters/slurm/commands/sbatch_script.py), the request it becomes
and the script jobsmith hands to sbatch (agent/runtime/submission/request/user_scripts.py), and
every refusal as one line before anything is submitted.

The lab half, real scripts through Slurm, is tests/test_batch_scripts_lab.py.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lab_cli import js
from scheduler_double import site_config

from jobsmith.adapters.capabilities import ScriptOption
from jobsmith.adapters.options import Dependency, DependencyKind
from jobsmith.adapters.slurm.commands.options import render_directives
from jobsmith.adapters.slurm.commands.sbatch_script import (
    LONG_OPTIONS,
    SbatchScripts,
    directive_words,
    parse_options,
    parse_script,
    split_command_line,
)
from jobsmith.agent.runtime.submission.judging.policy import Cost
from jobsmith.agent.runtime.submission.request.user_scripts import (
    assemble_script,
    read_request,
    script_request,
)
from jobsmith.agent.runtime.workflows.plans import ScriptSource, read_plan_file
from jobsmith.errors import InputError, PolicyError

CLI = "the command line"


def opt(name: str, value: str | None, where: str = "line 2") -> ScriptOption:
    return ScriptOption(name, value, where)


# --- reading the script as sbatch does ---------------------------------------------------


def test_directives_end_at_the_first_command_and_the_rest_is_kept_as_written() -> None:
    text = (
        "#!/bin/bash -l\n"
        "# a comment\n"
        "#SBATCH -p long\n"
        "\n"
        "#SBATCH --mem=4G   # enough\n"
        "module load bwa\n"
        "#SBATCH --mem=100G\n"
        "cat <<EOF\n#SBATCH -p debug\nEOF\n"
    )
    script = parse_script(text, "align.sh")
    assert script.shebang == "#!/bin/bash -l"
    assert [(o.name, o.value, o.where) for o in script.options] == [
        ("partition", "long", "line 3"),
        ("mem", "4G", "line 5"),
    ]
    assert script.ignored == (7, 9)
    assert script.rest == (
        "# a comment\n\nmodule load bwa\n#SBATCH --mem=100G\ncat <<EOF\n#SBATCH -p debug\nEOF\n"
    )


def test_an_indented_directive_in_the_header_is_judged_too() -> None:
    script = parse_script("#!/bin/sh\n   #SBATCH -t 5\necho hi\n", "x.sh")
    assert [(o.name, o.value) for o in script.options] == [("time", "5")]
    assert "#SBATCH" not in script.rest


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("#!/bin/bash\r\necho hi\r\n", "DOS line ends"),
        ("echo hi\n", "line 1 must name the interpreter"),
        ("#!\necho hi\n", "line 1 must name the interpreter"),
        ("#!/bin/bash\necho \0\n", "NUL byte"),
        ("#!/bin/bash\n#SBATCH --mem\n", "--mem needs a value"),
        ("#!/bin/bash\n#SBATCH --frobnicate=1\n", "--frobnicate is not an sbatch option"),
        ("#!/bin/bash\n#SBATCH --p=x\n", "--p is ambiguous"),
        ("#!/bin/bash\n#SBATCH -y\n", "-y is not an sbatch option"),
        ("#!/bin/bash\n#SBATCH long\n", "'long' is not an sbatch option"),
        ("#!/bin/bash\n#SBATCH --hold=yes\n", "--hold takes no value"),
        ('#!/bin/bash\n#SBATCH -J "open\n', 'a quote (") is not closed'),
    ],
)
def test_a_script_sbatch_would_refuse_is_one_error_naming_the_line(text: str, said: str) -> None:
    with pytest.raises(InputError, match=None) as err:
        parse_script(text, "job.sh")
    assert said in str(err.value)


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["--mem=4G"], [("mem", "4G")]),
        (["--mem", "4G"], [("mem", "4G")]),
        (["-c4"], [("cpus-per-task", "4")]),
        (["-c", "4"], [("cpus-per-task", "4")]),
        (["--part=long"], [("partition", "long")]),  # getopt's unique prefix
        (["-HQ"], [("hold", None), ("quiet", None)]),  # bundled flags
        (["-Hpdebug"], [("hold", None), ("partition", "debug")]),
        (["--nice"], [("nice", None)]),  # optional value, not taken from the next word
        (["--exclusive=user"], [("exclusive", "user")]),
    ],
)
def test_option_words_follow_getopt(words: list[str], expected: list[tuple[str, str]]) -> None:
    assert [(o.name, o.value) for o in parse_options(words, "line 2")] == expected


def test_directive_words_split_as_a_shell_would_up_to_a_comment() -> None:
    assert directive_words(' -J "my job" --comment=a\\ b # -p x', "line 2") == [
        "-J",
        "my job",
        "--comment=a b",
    ]
    assert directive_words(" --comment='#1'", "line 2") == ["--comment=#1"]


def test_the_command_line_is_options_then_the_script_then_its_arguments() -> None:
    options, script, args = split_command_line(
        ["-p", "long", "--json", "job.sh", "-p", "x"], own=("--json",)
    )
    assert [(o.name, o.value, o.where) for o in options] == [
        ("partition", "long", CLI),
        ("json", None, "own"),
    ]
    assert (script, args) == ("job.sh", ["-p", "x"])
    assert split_command_line(["--", "-weird.sh", "a"])[1:] == ("-weird.sh", ["a"])
    with pytest.raises(InputError, match="no batch script named"):
        split_command_line(["-p", "long"])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_a_script_or_one_input_error(text: str) -> None:
    with contextlib.suppress(InputError):
        parse_script("#!/bin/bash\n" + text, "fuzz.sh")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["-p", "-c4", "--mem", "--", "-H", "--nice", "--exclusive=x"]),
            st.sampled_from([f"--{name}" for name in LONG_OPTIONS]),
            st.text(max_size=12),
        ),
        max_size=8,
    )
)
def test_any_command_line_is_split_or_one_input_error(words: list[str]) -> None:
    try:
        options, script, args = split_command_line(words)
    except InputError:
        return
    assert script in words and len(options) + len(args) < len(words)


# --- the request and the script handed to sbatch ------------------------------------------


@pytest.fixture
def site(tmp_path: Path):  # type: ignore[no-untyped-def]
    return site_config(tmp_path)


def _assemble(request, site, cwd: Path) -> tuple[str, object]:  # type: ignore[no-untyped-def]
    job = assemble_script(request, site, cwd=cwd, header=render_directives)
    return job.script, job.options


def test_the_command_line_wins_and_the_body_runs_as_written(site, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = parse_script(
        "#!/bin/bash\n#SBATCH -p debug\n#SBATCH --mem=1G\n#SBATCH -t 10\n"
        "#SBATCH -a 0-5%2\n#SBATCH --signal=B:USR1@60\n"
        'echo "$1 $2" # a body line\n',
        "job.sh",
    )
    request = script_request(
        script, "job.sh", [opt("mem", "2G", CLI)], ["a b", "c'd"], site_allows=()
    )
    assert (request.partition, request.mem_mb, request.time_limit_s) == ("debug", 2048, 600)
    assert (request.array, request.array_throttle) == ("0-5", 2)
    assert request.template == "sbatch:job.sh"
    text, options = _assemble(request, site, tmp_path)
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert "#SBATCH --mem=2048M" in lines and "#SBATCH --array=0-5%2" in lines
    assert "#SBATCH --signal=B:USR1@60" in lines
    assert lines[-2:] == ["set -- 'a b' 'c'\"'\"'d'", 'echo "$1 $2" # a body line']
    assert options.output == f"{tmp_path}/slurm-%A_%a.out"  # sbatch's default, written out
    assert options.error is None  # sbatch's default: stderr with stdout
    assert options.job_name.startswith("job.sh.js-")


def test_percent_x_is_the_users_name_not_the_tagged_one(site, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = parse_script(
        "#!/bin/bash\n#SBATCH -J align\n#SBATCH -o logs/%x-%j.out\n"
        "#SBATCH -e logs/%x-%%x-%j.err\ntrue\n",
        "a.sh",
    )
    _, options = _assemble(script_request(script, "a.sh", [], [], ()), site, tmp_path)
    assert options.output == f"{tmp_path}/logs/align-%j.out"
    assert options.error == f"{tmp_path}/logs/align-%%x-%j.err"
    assert options.job_name.startswith("align.js-")


def test_an_accented_script_name_becomes_a_name_slurm_takes(site, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = parse_script("#!/bin/bash\ntrue\n", "scène 1.sh")
    _, options = _assemble(script_request(script, "scène 1.sh", [], [], ()), site, tmp_path)
    assert options.job_name.startswith("scene_1.sh.js-")


def test_gres_gpu_and_dependencies_become_the_requests_fields() -> None:
    script = parse_script(
        "#!/bin/bash\n#SBATCH --gres=gpu:2\n#SBATCH -d afterok:12:13\n#SBATCH -N 1\ntrue\n",
        "g.sh",
    )
    request = script_request(script, "g.sh", [], [], ())
    assert request.gpus == 2
    assert request.dependencies == (Dependency(kind=DependencyKind.AFTEROK, job_ids=("12", "13")),)


@pytest.mark.parametrize(
    ("directive", "said"),
    [
        ("--export=ALL", "--export is refused (jobsmith builds the job's environment"),
        ("--get-user-env", "--get-user-env is refused"),
        ("--mem-per-cpu=1G", "--mem-per-cpu is refused (jobsmith asks for memory per node"),
        ("--wrap=true", "--wrap is refused"),
        ("--exclusive", "--exclusive is not one jobsmith judges; the site file may pass it"),
        ("--gres=tmpfs:10G", "jobsmith models GPUs as gpu:N"),
        ("-N 2-4", "expected a whole number (jobsmith asks for an exact count)"),
        ("--ntasks-per-node=0x2", "--ntasks-per-node='0x2': expected a whole number"),
        ("-c ٤", "expected a whole number"),
        ("-t soon", "--time='soon'"),
        ("--mem=lots", "--mem='lots'"),
        ("-d singleton", "singleton is not supported"),
        ("-J 'two words'", "job_name"),
    ],
)
def test_an_option_jobsmith_cannot_judge_is_refused_naming_it_and_the_line(
    directive: str, said: str
) -> None:
    script = parse_script(f"#!/bin/bash\n# x\n#SBATCH {directive}\ntrue\n", "s.sh")
    with pytest.raises(InputError) as err:
        script_request(script, "s.sh", [], [], ())
    assert said in str(err.value)
    if "job_name" not in said:
        assert "line 3" in str(err.value)


def test_tasks_per_node_are_judged_counted_and_passed_as_written(site, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = parse_script(
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\nsrun hostname\n",
        "spread.sh",
    )
    request = script_request(script, "spread.sh", [], [], ())
    assert (request.nodes, request.ntasks_per_node, request.ntasks) == (2, 1, None)
    text, options = _assemble(request, site, tmp_path)
    header = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --nodes=2" in header and "#SBATCH --ntasks-per-node=1" in header
    assert not any(line.startswith("#SBATCH --ntasks=") for line in header)  # as written
    # 2 nodes x 1 task x 1 CPU (the site's default) for the default 10 minutes
    assert Cost.of(options).core_hours == round(2 * 600 / 3600, 3)
    crowded = parse_script("#!/bin/bash\n#SBATCH --ntasks-per-node=3\ntrue\n", "c.sh")
    with pytest.raises(PolicyError) as err:
        _assemble(script_request(crowded, "c.sh", [], [], ()), site, tmp_path)
    assert str(err.value) == (
        "--ntasks-per-node=3 x 1 CPUs per task (3 CPUs per node) refused: "
        "partition 'debug' has at most 2 CPUs per node"
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    nodes=st.integers(1, 5),
    per_node=st.integers(1, 4),
    cpus=st.integers(1, 3),
    ntasks=st.one_of(st.none(), st.integers(1, 9)),
)
def test_any_tasks_per_node_count_as_slurm_counts_them_or_are_refused_at_the_cpus_per_node(  # type: ignore[no-untyped-def]
    site, tmp_path: Path, nodes: int, per_node: int, cpus: int, ntasks: int | None
) -> None:
    lines = [f"--nodes={nodes}", f"--ntasks-per-node={per_node}", f"-c {cpus}", "-t 30"]
    lines += [f"--ntasks={ntasks}"] if ntasks is not None else []
    text = "#!/bin/bash\n" + "".join(f"#SBATCH {line}\n" for line in lines) + "true\n"
    request = script_request(parse_script(text, "p.sh"), "p.sh", [], [], ())
    if per_node * cpus > 2:  # the site's debug partition has 2 CPUs a node
        refused = "refused: partition 'debug' has at most 2 CPUs per node$"
        with pytest.raises(PolicyError, match=refused):
            _assemble(request, site, tmp_path)
        return
    script, options = _assemble(request, site, tmp_path)
    assert f"#SBATCH --ntasks-per-node={per_node}\n" in script
    tasks = ntasks if ntasks is not None else nodes * per_node  # -n wins where given
    assert Cost.of(options).core_hours == round(tasks * cpus * 0.5, 3)


def test_the_site_may_pass_more_options_as_written(site, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = parse_script("#!/bin/bash\n#SBATCH --exclusive\n#SBATCH --reservation=r1\nx\n", "s")
    allows = ["exclusive", "reservation"]
    request = script_request(script, "s", [], [], site_allows=allows)
    with pytest.raises(PolicyError, match="--exclusive is not passed to sbatch at this site"):
        _assemble(request, site, tmp_path)  # a site file that allows none of them
    jobs = site.jobs.model_copy(update={"sbatch_options": allows})
    text, _ = _assemble(request, site.model_copy(update={"jobs": jobs}), tmp_path)
    assert "#SBATCH --exclusive\n#SBATCH --reservation=r1\n" in text


def test_pbs_lines_are_refused_and_args_need_a_shell() -> None:
    with pytest.raises(InputError, match="line 2: #PBS lines are read by sbatch too"):
        parse_script("#!/bin/bash\n#PBS -q long\ntrue\n", "p.sh")
    with pytest.raises(InputError, match=r"p\.sh: line 4: #BSUB lines are read by sbatch too"):
        parse_script("#!/bin/bash\n#SBATCH -t 5\n#SBATCH --mem=1G\n #BSUB -q x\ntrue\n", "p.sh")
    parse_script("#!/bin/bash\ntrue\n#PBS -q long\n", "p.sh")  # after the first command: a comment
    python = parse_script("#!/usr/bin/env python3\n#SBATCH -t 5\nprint(1)\n", "p.py")
    with pytest.raises(InputError, match="arguments are given to a shell script only"):
        script_request(python, "p.py", [], ["x"], ())
    assert script_request(python, "p.py", [], [], ()).time_limit_s == 300
    shell = parse_script("#!/usr/bin/env bash\ntrue\n", "s.sh")
    assert script_request(shell, "s.sh", [], ["x"], ()).script.args == ("x",)  # type: ignore[union-attr]


def test_limits_and_roots_are_the_sites(site, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    big = parse_script("#!/bin/bash\n#SBATCH --mem=900G\ntrue\n", "big.sh")
    with pytest.raises(PolicyError, match="memory"):
        _assemble(script_request(big, "big.sh", [], [], ()), site, tmp_path)
    out = parse_script("#!/bin/bash\n#SBATCH -o /etc/x.out\ntrue\n", "o.sh")
    with pytest.raises(PolicyError, match="outside the allowed roots"):
        _assemble(script_request(out, "o.sh", [], [], ()), site, tmp_path)
    with pytest.raises(PolicyError, match="working directory"):
        _assemble(
            script_request(parse_script("#!/bin/sh\n", "w"), "w", [], [], ()), site, Path("/")
        )
    pattern = parse_script("#!/bin/bash\n#SBATCH -o logs/%u/x.out\ntrue\n", "p.sh")
    with pytest.raises(InputError, match="only the file name may hold % patterns"):
        _assemble(script_request(pattern, "p.sh", [], [], ()), site, tmp_path)


def test_the_file_is_read_bounded_and_as_utf8(tmp_path: Path) -> None:
    reader = SbatchScripts()
    (tmp_path / "latin.sh").write_bytes(b"#!/bin/bash\necho caf\xe9\n")
    with pytest.raises(InputError, match="line 2 holds bytes that are not UTF-8"):
        read_request(reader, ["latin.sh"], (), tmp_path)
    with pytest.raises(InputError, match="cannot read it"):
        read_request(reader, ["missing.sh"], (), tmp_path)
    with pytest.raises(InputError, match="cannot read it"):
        read_request(reader, [str(tmp_path)], (), tmp_path)  # a directory
    (tmp_path / "ok.sh").write_text("#!/bin/bash\ntrue\n#SBATCH -p x\n")
    read = read_request(reader, ["--json", "-p", "long", "ok.sh"], (), tmp_path, own=["--json"])
    assert (read.request.partition, read.flags) == ("long", frozenset({"--json"}))
    assert read.notes and "line 3" in read.notes[0]


# --- the CLI: every refusal is one line, exit 2, nothing submitted -----------------------


@pytest.mark.usefixtures("user_site")
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["nope.sh"], "batch script nope.sh: cannot read it"),
        (["-p"], "-p (--partition) needs a value"),
        ([], "no batch script named"),
        (["--export=ALL", "job.sh"], "the command line: --export is refused"),
        (["bad.sh"], "bad.sh: line 2: --exclusive is not one jobsmith judges"),
    ],
)
def test_the_cli_refuses_in_one_line(args: list[str], said: str) -> None:
    Path("job.sh").write_text("#!/bin/bash\n#SBATCH -t 5\ntrue\n")
    Path("bad.sh").write_text("#!/bin/bash\n#SBATCH --exclusive\ntrue\n")
    result = js("sbatch", *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert said in lines[0]


# --- a plan step may name a script ----------------------------------------------------------


def _plan(tmp_path: Path, step: str) -> Path:
    (tmp_path / "scripts").mkdir(exist_ok=True)
    (tmp_path / "scripts" / "use.sh").write_text(
        "#!/bin/bash\n#SBATCH -p long\n#SBATCH --mem=1G\n#SBATCH -J use\necho $1\n"
    )
    (tmp_path / "deps.sh").write_text("#!/bin/bash\n#SBATCH -d afterok:5\ntrue\n")
    path = tmp_path / "plan.yaml"
    path.write_text(
        "name: mixed\nsteps:\n  make:\n    template: command\n"
        "    params: {command: 'true'}\n  use:\n" + step
    )
    return path


def test_a_plan_step_names_a_script_whose_fields_the_step_overrides(tmp_path: Path) -> None:
    path = _plan(
        tmp_path,
        "    script: scripts/use.sh\n    args: [s1, 2]\n    mem: 2G\n    after_ok: [make]\n",
    )
    plan, _ = read_plan_file(path, ScriptSource(SbatchScripts()))
    request = plan.request("use", {"make": "41"})
    assert request.template == "sbatch:use.sh" and request.script is not None
    assert (request.partition, request.mem_mb, request.job_name) == ("long", 2048, "use")
    assert request.script.args == ("s1", "2")
    assert request.dependencies == (Dependency(kind=DependencyKind.AFTEROK, job_ids=("41",)),)


@pytest.mark.parametrize(
    ("step", "said"),
    [
        ("    script: scripts/use.sh\n    template: command\n", "a template or a script, not both"),
        ("    template: command\n    args: [x]\n", "args go with script: FILE"),
        ("    script: deps.sh\n", "its --dependency is the plan's to say"),
        ("    script: nope.sh\n", "batch script nope.sh: cannot read it"),
        ("    script: scripts/use.sh\n    args: {a: 1}\n", "expected a list of words"),
    ],
)
def test_a_plan_script_step_is_refused_naming_the_file_line_and_key(
    tmp_path: Path, step: str, said: str
) -> None:
    with pytest.raises(InputError) as err:
        read_plan_file(_plan(tmp_path, step), ScriptSource(SbatchScripts()))
    assert said in str(err.value) and "plan.yaml:" in str(err.value)
    with pytest.raises(InputError, match="cannot read batch scripts"):
        read_plan_file(_plan(tmp_path, "    script: scripts/use.sh\n"), None)


# --- however a request is made (a model's or an MCP client's JSON), nothing is smuggled -----


@pytest.mark.parametrize(
    ("job", "said"),
    [
        ({"rest": "#SBATCH -p long\ntrue\n"}, "line 2 is a directive (#SBATCH)"),
        ({"rest": "# c\n  #PBS -q long\ntrue\n"}, "line 3 is a directive (#PBS)"),
        ({"rest": "\n#BSUB -q x\n"}, "line 3 is a directive (#BSUB)"),
        ({"shebang": "#!/bin/bash\n#SBATCH -p long"}, "the first line must be #! and a path"),
        ({"shebang": "echo"}, "the first line must be #! and a path"),
        ({"args": ["a\0b"]}, "NUL byte"),
        ({"rest": "true\n\udcff\n"}, "not UTF-8"),
    ],
)
def test_a_script_job_sent_as_json_cannot_carry_a_directive(
    job: dict[str, object], said: str
) -> None:
    from pydantic import ValidationError

    from jobsmith.agent.runtime.submission.request.jobs import JobRequest

    sent = {"name": "x.sh", "shebang": "#!/bin/bash", "rest": "true\n", **job}
    with pytest.raises(ValidationError) as err:
        JobRequest.model_validate({"template": "sbatch:x.sh", "script": sent})
    assert said in str(err.value)
    # a directive after the first command is a comment to sbatch: allowed
    late = {"name": "x.sh", "shebang": "#!/bin/bash", "rest": "true\n#SBATCH -p long\n"}
    JobRequest.model_validate({"template": "sbatch:x.sh", "script": late})


def test_options_passed_as_written_are_the_sites_to_allow_however_sent(
    site, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from jobsmith.agent.runtime.submission.request.jobs import JobRequest

    sent = {"name": "x.sh", "shebang": "#!/bin/bash", "rest": "true\n"}
    ok = JobRequest.model_validate(
        {"template": "sbatch:x.sh", "script": {**sent, "passed": ["--signal=B:USR1@60"]}}
    )
    assert "#SBATCH --signal=B:USR1@60" in _assemble(ok, site, tmp_path)[0]
    smuggled = JobRequest.model_validate(
        {"template": "sbatch:x.sh", "script": {**sent, "passed": ["--exclusive"]}}
    )
    with pytest.raises(PolicyError, match="--exclusive is not passed to sbatch at this site"):
        _assemble(smuggled, site, tmp_path)


def test_an_output_directory_leading_out_of_the_roots_where_the_job_runs_is_refused(
    site, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Over SSH the script's -o directory is resolved on the login node (issue 29): here
    the lookup's command runs through the local transport, as it would over SSH."""
    from test_files_there import Counting, there

    (tmp_path / "logs").symlink_to("/etc")
    script = parse_script("#!/bin/bash\n#SBATCH -o logs/%j.out\ntrue\n", "a.sh")
    request = script_request(script, "a.sh", [], [], ())
    transport = Counting()
    with pytest.raises(PolicyError, match=r"\(resolves to /etc\) on alice@login1:22 is outside"):
        assemble_script(
            request, site, cwd=tmp_path, header=render_directives, files=there(transport)
        )
    assert {argv[0] for argv in transport.calls} == {"sh"}  # asked there, in sh
