"""Every file-taking parameter of every command, given every kind of file (issue 24, parts 4
and 5), in one process that tests/test_file_arguments_fuzz.py starts under an
address-space cap: a parameter that reads /dev/zero or a 4 MiB YAML list into memory
ends this process, and the test names the case it was running, instead of the machine
swapping.

    python tests/file_fuzz_driver.py ROOT

makes the files under ROOT, then prints one JSON line as each case starts ("start") and
one when it ends (its exit status, whether it raised, hung, or printed a traceback), and
last the process's peak memory ("peak": ru_maxrss and VmPeak, in KiB). Slurm is the
fuzz's recording double (tests/test_cli_fuzz_with_slurm_double.py), in-process.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

import click
from click.testing import CliRunner
from lab_cli import LAB_SITE
from test_cli_fuzz_with_slurm_double import RecordingSlurmDouble, _argv, _commands, _within

from jobsmith.agent.app import App, UserDirs
from jobsmith.agent.faces.cli import cli
from jobsmith.files import MAX_INPUT_BYTES

#: seconds one case may take before it counts as a hang (a hang detector, not a timing):
#: most cases take under 2 s on an idle machine, the 4 MiB YAML list 3-6 s (its parse),
#: and CI runs it beside 3 workers: there `plan run` of the list once took over 60 s
#: (2026-12-03, other runs going), so the bound is generous
CASE_SECONDS = 180


def file_kinds(root: Path) -> dict[str, str]:
    """Every kind of file a person might name, made under root (by name)."""
    root.mkdir(parents=True, exist_ok=True)
    regular = root / "regular.yaml"
    regular.write_text(LAB_SITE.read_text())
    empty = root / "empty.yaml"
    empty.write_bytes(b"")
    sparse = root / "sparse.yaml"  # 8 GiB, none of it on disk
    with sparse.open("wb") as handle:
        handle.truncate(8 << 30)
    big_list = root / "list.yaml"  # the largest YAML list a file may hold: 2 million values
    big_list.write_text("files: [" + "1," * ((MAX_INPUT_BYTES - 20) // 2) + "1]\n")
    fifo = root / "pipe.yaml"
    os.mkfifo(fifo)
    directory = root / "dir"
    directory.mkdir()
    unreadable = root / "unreadable.yaml"
    unreadable.write_text("a: 1\n")
    unreadable.chmod(0)
    undecodable = os.fsdecode(bytes(root) + b"/caf\xe9.yaml")
    Path(undecodable).write_text("a: 1\n")
    return {
        "regular": str(regular),
        "empty": str(empty),
        "sparse": str(sparse),
        "yaml_list": str(big_list),
        "dev_zero": "/dev/zero",
        "dev_urandom": "/dev/urandom",
        "fifo": str(fifo),
        "directory": str(directory),
        "unreadable": str(unreadable),
        "long_name": str(root / ("n" * 300 + ".yaml")),
        "undecodable_name": undecodable,
    }


def file_targets() -> list[tuple[tuple[str, ...], str]]:
    """(command, parameter) for every parameter that names a file or directory: a
    click.Path, a Snakefile (pipeline run's PIPELINE), and the global --site."""
    found: list[tuple[tuple[str, ...], str]] = [((), "site_file")]
    for path, command in _commands(cli):
        for param in command.params:
            if isinstance(param.type, click.Path) or (path, param.name) == (
                ("pipeline", "run"),
                "pipeline_name",
            ):
                found.append((path, str(param.name)))
    return found


def _case_argv(path: tuple[str, ...], target: str, value: str, home: Path) -> list[str]:
    if target == "site_file":
        return ["--site", value, "site", "show"]
    argv = _argv(path, target, value, home)
    if target == "pipeline_name":  # a Snakefile is a file; a Nextflow pipeline a name
        argv[argv.index("nextflow")] = "snakemake"
    return argv


def run_case(path: tuple[str, ...], target: str, value: str, home: Path) -> dict[str, object]:
    """One invocation, in-process, as the hostile-text fuzz makes it."""
    env = {
        "HOME": str(home.parent),  # the lab site's allowed root `~`: the files are inside
        "USER": "alice",
        "JOBSMITH_CONFIG_DIR": str(home / "config"),
        "JOBSMITH_STATE_DIR": str(home / "state"),
        "PATH": "/usr/bin:/bin",
    }
    site = Path(value) if target == "site_file" else LAB_SITE
    app = App(
        paths=UserDirs(config_dir=home / "config", state_dir=home / "state"),
        environ=env,
        site_file=site,
        transport_override=RecordingSlurmDouble(),
    )
    argv = _case_argv(path, target, value, home)
    os.chdir(home)
    try:
        result = _within(
            CASE_SECONDS, lambda: CliRunner().invoke(cli, argv, obj=app, env=env), argv
        )
    except AssertionError as hang:
        return {"hung": str(hang)}
    raised = result.exception is not None and not isinstance(result.exception, SystemExit)
    return {
        "exit": result.exit_code,
        "raised": repr(result.exception) if raised else None,
        "traceback": "Traceback" in result.output,
        "output": result.output[-300:],
    }


def _peak_kib() -> dict[str, int]:
    vm_peak = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmPeak:"):
            vm_peak = int(line.split()[1])
    return {"maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "vm_peak": vm_peak}


def main(root: Path, only: str | None = None) -> None:
    """Every case, one JSON line as it starts and one as it ends, then the peak."""
    kinds = file_kinds(root / "files")
    number = 0
    for path, target in file_targets():
        for kind, value in kinds.items():
            if only is not None and kind != only:
                continue
            number += 1
            home = root / f"home-{number}"
            home.mkdir()
            case = {"command": list(path), "param": target, "kind": kind}
            print(json.dumps({"start": case}), flush=True)
            print(json.dumps({"case": case, **run_case(path, target, value, home)}), flush=True)
    print(json.dumps({"peak": _peak_kib()}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
