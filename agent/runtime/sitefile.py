"""`jobsmith site check` and `site init`: the site file against the live cluster.

Both ask Slurm through the site's transport, so from a laptop (scheduler.kind ssh or
openssh) they ask the login node's Slurm, about the remote user, and `site init` takes
the home and scratch directories from there too; the file it writes stays on this
machine and keeps the scheduler block it used, so the next command goes the same way.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.errors import ConfigError, SchedulerUnavailable
from jobsmith.site_config import Mismatch

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import Scheduler
    from jobsmith.adapters.transport import Transport
    from jobsmith.site_config import LoadedSite
    from jobsmith.site_config.model import SchedulerAccess, SiteConfig


class SiteCheckReport(BaseModel):
    """What `jobsmith site check` found."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    files: list[str] = Field(description="site files read, in the order applied")
    cluster: str = Field(description="cluster name in the config")
    slurm_version: str = Field(description="the live cluster's Slurm version")
    via: str = Field("local", description="how Slurm was reached: local, or kind user@host:port")
    mismatches: list[Mismatch] = Field(description="differences, errors first")


class SiteInitResult(BaseModel):
    """What `jobsmith site init` produced."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str | None = Field(description="file written, or None if only printed")
    via: str = Field("local", description="how Slurm was reached: local, or kind user@host:port")
    yaml: str = Field(description="the generated config")


class SetBy(BaseModel):
    """One value in effect and the site file that set it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str = Field(description="dotted field, e.g. policy.approval.core_hours")
    value: Any = Field(description="the value in effect, as the config's JSON has it")
    file: str | None = Field(description="the site file that set it; null: jobsmith's default")
    line: int | None = Field(description="its line in that file, when known")


class SiteShow(BaseModel):
    """What `jobsmith site show` prints: the configuration in effect after every layer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    files: list[str] = Field(description="site files read, in the order applied")
    centre: str | None = Field(
        description="the centre's file when it limits the others (site_config/ceiling.py)"
    )
    config: dict[str, Any] = Field(description="the merged, validated configuration")
    explained: list[SetBy] | None = Field(
        None, description="with --explain: each value and the file that set it"
    )


def site_show(site: LoadedSite, *, explain: bool) -> SiteShow:
    """The configuration in effect; with explain, the layer that set each value."""
    from jobsmith.site_config.diagnostics import dotted

    explained = None
    if explain:
        explained = [
            SetBy(
                field=dotted(path),
                value=value,
                file=str(origin.file) if origin else None,
                line=origin.line if origin else None,
            )
            for path, value, origin in site.set_by()
        ]
    return SiteShow(
        files=[str(f) for f in site.files],
        centre=str(site.centre) if site.centre else None,
        config=site.config.model_dump(mode="json"),
        explained=explained,
    )


@dataclass(frozen=True)
class Login:
    """The account Slurm is asked about, on the host where Slurm's commands run."""

    user: str
    home: Path
    #: /scratch/USER when that directory exists there, else None
    scratch: Path | None
    #: how that host was reached (SiteCheckReport.via)
    via: str = "local"


def local_login() -> Login:
    """The user running jobsmith, on this host."""
    user = getpass.getuser()
    scratch = Path("/scratch") / user
    return Login(user, Path.home(), scratch if scratch.is_dir() else None)


def remote_login(transport: Transport, via: str, timeout_s: float) -> Login:
    """The remote user, home and scratch, asked through transport (~/.ssh/config's User
    and the remote passwd file, not this laptop, say who and where that is)."""
    said = transport.run(["sh", "-c", 'id -un && printf "%s\\n" "$HOME"'], timeout=timeout_s)
    lines = said.stdout.splitlines()
    if said.returncode != 0 or len(lines) != 2 or not lines[1].startswith("/"):
        raise SchedulerUnavailable(
            f"could not read the remote user and home over {via} (exit {said.returncode}: "
            f"{' '.join(said.stderr.split())[:200]}); check the login works, then try again"
        )
    user, home = lines[0], Path(lines[1])
    scratch = Path("/scratch") / user
    found = transport.run(["test", "-d", str(scratch)], timeout=timeout_s).returncode == 0
    return Login(user, home, scratch if found else None, via)


class LoginParts(Protocol):
    """How Slurm is reached (the composition root, agent/app.py, has them all)."""

    @property
    def scheduler_access(self) -> SchedulerAccess: ...
    @property
    def transport(self) -> Transport: ...
    @property
    def scheduler_via(self) -> str: ...


def login_of(parts: LoginParts) -> Login:
    """Whose Slurm account `site` commands ask about, on the host Slurm runs on: this
    user here, or the remote user when the site reaches Slurm over SSH."""
    if parts.scheduler_access.kind == "local":
        return local_login()
    timeout_s = parts.scheduler_access.command_timeout_s
    return remote_login(parts.transport, parts.scheduler_via, timeout_s)


def site_check(site: LoadedSite, scheduler: Scheduler, login: Login) -> SiteCheckReport:
    """Compare the loaded site config with the live cluster."""
    from jobsmith.site_config import check_site

    facts = scheduler.cluster_facts(login.user)
    return SiteCheckReport(
        files=[str(f) for f in site.files],
        cluster=site.config.cluster,
        slurm_version=scheduler.version(),
        via=login.via,
        mismatches=check_site(site.config, facts),
    )


def _beneath(
    config: SiteConfig, centre: Path, output: Path, header: str, environ: Mapping[str, str]
) -> str:
    """config's file beneath the centre's: what the centre's file leaves out, refused
    (ConfigError) if the centre's ceiling would still refuse it."""
    from jobsmith.site_config.dump import dump_site_data
    from jobsmith.site_config.generate import beneath_centre
    from jobsmith.site_config.loader import load_over_centre
    from jobsmith.site_config.yamlfile import read_yaml

    data = beneath_centre(config, read_yaml(centre).data, environ)
    note = f"The centre's {centre} is read first: what it states is left to it."
    text = dump_site_data(data, header=f"{header}\n{note}")
    try:
        load_over_centre(centre, text, output, environ=environ)
    except ConfigError as exc:
        raise ConfigError(
            f"site init: the file it would write is refused beneath the centre's {centre}: "
            f"{exc}; write {output} by hand within the centre's limits"
        ) from None
    return text


def site_init(
    scheduler: Scheduler,
    login: Login,
    access: SchedulerAccess,
    output: Path,
    *,
    force: bool,
    to_stdout: bool,
    centre: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> SiteInitResult:
    """Discover a starting config that reaches Slurm as access did; write it to output
    (on this machine) unless to_stdout. centre: the centre's site file, when it exists:
    the file written is read over it, so it leaves out what the centre's states
    (site_config/generate.py, beneath_centre) and is checked against its ceiling first;
    environ expands the centre's paths as every later load will."""
    from jobsmith.site_config import dump_site, init_site

    found = init_site(
        scheduler.cluster_facts(login.user), login.user, home=login.home, scratch=login.scratch
    )
    config = found.model_copy(update={"scheduler": access})
    header = "Written by `jobsmith site init`: read it and tighten it."
    if centre is None:
        text = dump_site(config, header=header)
    else:
        text = _beneath(config, centre, output, header, environ or {})
    if to_stdout:
        return SiteInitResult(path=None, via=login.via, yaml=text)
    if output.exists() and not force:
        raise ConfigError(f"{output} already exists: pass --force to replace it, or -o FILE")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"site init -o {output}: cannot write it ({exc.strerror or exc})"
        ) from None
    return SiteInitResult(path=str(output), via=login.via, yaml=text)
