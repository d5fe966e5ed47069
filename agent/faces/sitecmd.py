"""`jobsmith site check` and `site init`: the site file against the live cluster."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.errors import ConfigError
from jobsmith.site_config import Mismatch

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import Scheduler
    from jobsmith.site_config import LoadedSite


class SiteCheckReport(BaseModel):
    """What `jobsmith site check` found."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    files: list[str] = Field(description="site files read, in the order applied")
    cluster: str = Field(description="cluster name in the config")
    slurm_version: str = Field(description="the live cluster's Slurm version")
    mismatches: list[Mismatch] = Field(description="differences, errors first")


class SiteInitResult(BaseModel):
    """What `jobsmith site init` produced."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str | None = Field(description="file written, or None if only printed")
    yaml: str = Field(description="the generated config")


def site_check(site: LoadedSite, scheduler: Scheduler) -> SiteCheckReport:
    """Compare the loaded site config with the live cluster."""
    from jobsmith.site_config import check_site

    facts = scheduler.cluster_facts(getpass.getuser())
    return SiteCheckReport(
        files=[str(f) for f in site.files],
        cluster=site.config.cluster,
        slurm_version=scheduler.version(),
        mismatches=check_site(site.config, facts),
    )


def site_init(
    scheduler: Scheduler, output: Path, *, force: bool, to_stdout: bool
) -> SiteInitResult:
    """Discover a starting config; write it to output unless to_stdout."""
    from jobsmith.site_config import dump_site, init_site

    user = getpass.getuser()
    scratch = Path("/scratch") / user
    config = init_site(
        scheduler.cluster_facts(user),
        user,
        home=Path.home(),
        scratch=scratch if scratch.is_dir() else None,
    )
    text = dump_site(config, header="Written by `jobsmith site init`: read it and tighten it.")
    if to_stdout:
        return SiteInitResult(path=None, yaml=text)
    if output.exists() and not force:
        raise ConfigError(f"{output} already exists: pass --force to replace it, or -o FILE")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    return SiteInitResult(path=str(output), yaml=text)
