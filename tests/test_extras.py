"""A missing pip extra names the pip command that installs it (issue 25, item 4).

Each extra's modules are hidden from a fresh jobsmith process (`sys.modules[name] = None`,
which makes Python's import fail as for a module that is not installed), and the command
that needs it must end in one line naming the extra and the pip command, exit 2.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import jobsmith
from jobsmith.errors import MissingExtra
from jobsmith.extras import EXTRAS, install_hint, needs_extra

REPO = Path(__file__).resolve().parent.parent

#: runs the CLI with the modules named in argv[1] (comma-separated) made unimportable
_HIDING = (
    "import sys\n"
    "for name in sys.argv[1].split(','):\n"
    "    sys.modules[name] = None\n"
    "sys.argv = ['jobsmith', *sys.argv[2:]]\n"
    "from jobsmith.agent.faces.cli import main\n"
    "main()\n"
)


def _without(
    modules: str, *args: str, home: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {
        "PATH": "/usr/bin:/bin",
        # this checkout's jobsmith, as the test process imports it
        "PYTHONPATH": str(Path(jobsmith.__file__).resolve().parent.parent),
        "HOME": str(home),
        "JOBSMITH_CONFIG_DIR": str(home / "config"),
        "JOBSMITH_STATE_DIR": str(home / "state"),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-c", _HIDING, modules, *args],
        capture_output=True, text=True, env=environ, timeout=120, check=False, cwd=home,
    )  # fmt: skip


def _one_line(run: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


def test_every_extra_named_is_one_of_pyprojects() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra, modules in EXTRAS.items():
        assert extra in extras, extra
        wanted = modules[0].replace("_", "-").lower()
        names = [req.split(">")[0].split("=")[0].split("<")[0].replace("_", "-").lower()
                 for req in extras[extra]]  # fmt: skip
        assert wanted in names, (extra, extras[extra])


def test_an_import_error_of_the_extras_module_becomes_one_line_with_the_pip_command() -> None:
    with pytest.raises(MissingExtra) as err, needs_extra("ssh", "scheduler.kind: ssh"):
        raise ModuleNotFoundError("No module named 'paramiko'", name="paramiko")
    message = str(err.value)
    assert message.startswith("scheduler.kind: ssh needs the [ssh] extra (paramiko ")
    assert message.endswith(f"install it with: {install_hint('ssh')}")
    assert install_hint("ssh").endswith(" -m pip install 'jobsmith[ssh]'")
    assert err.value.exit_code == 2


def test_an_import_error_of_another_module_is_not_called_a_missing_extra() -> None:
    """A broken import of jobsmith's own is a bug: it is not hidden behind advice."""
    with pytest.raises(ModuleNotFoundError), needs_extra("ssh", "scheduler.kind: ssh"):
        raise ModuleNotFoundError("No module named 'jobsmith.nope'", name="jobsmith.nope")


def test_ask_without_the_agent_extra_names_it(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    lab = (REPO / "site_config" / "examples" / "lab.yaml").read_text()
    (tmp_path / "config" / "site.yaml").write_text(lab + "model:\n  base_url: http://127.0.0.1:9\n")
    run = _without("anthropic", "ask", "hello", home=tmp_path, env={"ANTHROPIC_API_KEY": "k"})
    assert run.returncode == 2, run.stderr
    line = _one_line(run)
    assert "needs the [agent] extra" in line and "pip install 'jobsmith[agent]'" in line


def test_mcp_without_the_mcp_extra_names_it(tmp_path: Path) -> None:
    run = _without("mcp,mcp_types", "mcp", home=tmp_path)
    assert run.returncode == 2, run.stderr
    line = _one_line(run)
    assert "`jobsmith mcp` needs the [mcp] extra" in line and "jobsmith[mcp]'" in line


def test_an_ssh_site_without_the_ssh_extra_names_it_before_connecting(tmp_path: Path) -> None:
    site = tmp_path / "ssh.yaml"
    site.write_text(
        "cluster: x\nscheduler:\n  kind: ssh\n  host: login.invalid\n"
        "partitions: {a: {default: true}}\npaths: {scratch: '~', allowed_roots: ['~']}\n"
    )
    run = _without("paramiko", "--site", str(site), "cancel", "1", home=tmp_path)
    assert run.returncode == 2, run.stderr
    line = _one_line(run)
    assert "scheduler.kind: ssh needs the [ssh] extra" in line and "jobsmith[ssh]'" in line
