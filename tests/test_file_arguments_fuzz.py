"""Every parameter that names a file, of every command, given every kind of file, under a
memory cap (issue 24, parts 4 and 5; Done-when: "the CLI fuzz includes file arguments of
every kind and runs under a memory cap").

The kinds: a regular file, an empty one, an 8 GiB sparse one, the largest YAML list a
file may hold (4 MiB, two million values: it took 2.3 GB to parse), /dev/zero,
/dev/urandom, a FIFO, a directory, an unreadable file, a 300-character name and a name
that is not UTF-8. The parameters: every click.Path of every command, a Snakefile
(`pipeline run snakemake PIPELINE`) and the global --site (tests/file_fuzz_driver.py
finds them from click, so a new one is covered as it is added).

All cases run in one process of their own (tests/file_fuzz_driver.py) under a 1 GiB
address-space cap (RLIMIT_AS). Measured with the lab site and the Slurm double: a run of
every case peaks at about 170 MB resident, 180 MB of address space, and one normal
run (every parameter given the regular file) at 94 MB resident, 110 MB of address space,
so the cap leaves five times the headroom and a read of /dev/zero or a parse into
gigabytes ends the process, naming its case, instead of swapping the machine. Each
case: a status docs/exit-status.md documents, no traceback, no hang (CASE_SECONDS)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from file_fuzz_driver import file_targets
from test_cli_fuzz_with_slurm_double import DOCUMENTED_EXIT

#: the address space the fuzz process may have: five times what a run of every case needs
MEMORY_CAP = 1 << 30
TESTS = Path(__file__).resolve().parent


def _fuzz(root: Path, only: str | None = None) -> list[dict[str, object]]:
    """The driver's JSON lines, run under MEMORY_CAP; a failure naming the case it was
    running if it did not finish (killed, out of memory, hung as a whole)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    argv = [
        sys.executable,
        str(TESTS / "file_fuzz_driver.py"),
        str(root),
        *([only] if only else []),
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=900, preexec_fn=cap, env=env, check=False
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    started = [line["start"] for line in lines if "start" in line]
    last = started[-1] if started else None
    assert done.returncode == 0 and "peak" in lines[-1], (
        f"the fuzz ended with {done.returncode} in case {last}: {done.stderr[-800:]}"
    )
    return lines


def test_every_file_parameter_is_found() -> None:
    targets = set(file_targets())
    for needed in [
        ((), "site_file"),
        (("plan", "check"), "file"),
        (("plan", "run"), "file"),
        (("submit",), "params_file"),
        (("render",), "params_file"),
        (("pipeline", "run"), "params_file"),
        (("pipeline", "run"), "pipeline_name"),
        (("transcode",), "source"),
        (("render-frames",), "blend_file"),
        (("mcp",), "token_file"),
        (("site", "init"), "output"),
    ]:
        assert needed in targets, needed


def test_every_file_of_every_kind_at_every_file_parameter_under_a_memory_cap(
    tmp_path: Path,
) -> None:
    lines = _fuzz(tmp_path)
    cases = [line for line in lines if "case" in line]
    assert len(cases) == len(file_targets()) * 11
    bad = [
        c
        for c in cases
        if c.get("hung")
        or c.get("raised")
        or c.get("traceback")
        or c["exit"] not in DOCUMENTED_EXIT
    ]
    assert not bad, bad[:5]
    peak = lines[-1]["peak"]
    assert isinstance(peak, dict) and peak["vm_peak"] * 1024 < MEMORY_CAP


@pytest.mark.parametrize("kind", ["dev_zero", "dev_urandom", "fifo", "directory", "unreadable"])
def test_a_file_jobsmith_reads_is_refused_when_it_is_no_readable_regular_file(
    kind: str, tmp_path: Path
) -> None:
    """What jobsmith itself reads (a site file, a plan, a params file, a token file, a
    video source) answers exit 2 for these, or exit 3 where the path is outside the
    allowed roots: never 0, never a read without end."""
    read = {
        ((), "site_file"),
        (("plan", "check"), "file"),
        (("plan", "run"), "file"),
        (("submit",), "params_file"),
        (("render",), "params_file"),
        (("mcp",), "token_file"),
        (("transcode",), "source"),
    }
    cases = [line for line in _fuzz(tmp_path, kind) if "case" in line]
    for case in cases:
        where = case["case"]
        assert isinstance(where, dict)
        if (tuple(where["command"]), where["param"]) in read:
            assert case["exit"] in (2, 3), case
