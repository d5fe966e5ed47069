"""Finding the site files, merging them and validating the result into a SiteConfig.

Which files, in order (a later file overrides single fields of an earlier one, see
layers.py):

1. the base file, the first of:
   - `--site FILE` (the `explicit` argument), else
   - `$JOBSMITH_SITE` from the environment given (an empty value counts as unset), else
   - the admin's `/etc/jobsmith/site.yaml`;
   a base named by `--site` or JOBSMITH_SITE takes the admin file's place (the admin
   file is then not read at all), and must exist: naming a missing file is an error,
   never a silent fall-back to another file;
2. the user's file, `site.yaml` in platformdirs' user_config_dir("jobsmith") (usually
   ~/.config/jobsmith/site.yaml), applied on top whichever base was chosen, so a
   personal default account follows the user to a test site too. It is optional.

Either file may be missing but not both. Nothing is looked up at import time: paths and
the environment are arguments, so tests and the CLI decide them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobsmith.errors import ConfigError
from jobsmith.site_config.diagnostics import describe_validation_error
from jobsmith.site_config.fieldtypes import file_context
from jobsmith.site_config.layers import Provenance, merge_documents
from jobsmith.site_config.model import SchedulerAccess, SiteConfig
from jobsmith.site_config.yamlfile import KeyPath, read_yaml

SYSTEM_SITE_FILE = Path("/etc/jobsmith/site.yaml")
SITE_ENV_VAR = "JOBSMITH_SITE"

BaseSource = Literal["--site", "JOBSMITH_SITE", "system"]


@dataclass(frozen=True)
class LoadedSite:
    """A validated site configuration and where it came from."""

    config: SiteConfig
    #: the files merged, in the order applied (base first, then the user's overrides)
    files: tuple[Path, ...]
    #: how the base file was chosen; None when only the user's file exists
    base_from: BaseSource | None
    #: which file and line set each value
    provenance: Provenance

    def origin_of(self, path: KeyPath) -> str | None:
        """'FILE:LINE' of the file that set the value at path (e.g. ('accounts', 'default'))."""
        origins = self.provenance.origins_of(path)
        return ", ".join(str(o) for o in origins) or None


def default_user_file() -> Path:
    """The user's override file: site.yaml in platformdirs' user config dir for jobsmith."""
    return Path(platformdirs.user_config_dir("jobsmith")) / "site.yaml"


def load_site(
    explicit: Path | None = None,
    *,
    environ: Mapping[str, str],
    system_file: Path = SYSTEM_SITE_FILE,
    user_file: Path | None = None,
) -> LoadedSite:
    """Find, merge and validate the site files; raise ConfigError with one clear message.

    explicit is `--site FILE`; environ supplies JOBSMITH_SITE and the variables paths are
    expanded with; user_file None means default_user_file().
    """
    base, base_from = _base_file(explicit, environ, system_file)
    files = _site_files(base, base_from, user_file)
    loaded = load_site_files(files, environ=environ)
    used_from = base_from if base in files else None
    return LoadedSite(loaded.config, loaded.files, used_from, loaded.provenance)


class _SchedulerOnly(BaseModel):
    """The scheduler block of a site file whose other sections may be missing."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    scheduler: SchedulerAccess = Field(default_factory=SchedulerAccess)


def load_scheduler_access(
    explicit: Path | None = None,
    *,
    environ: Mapping[str, str],
    system_file: Path = SYSTEM_SITE_FILE,
    user_file: Path | None = None,
) -> SchedulerAccess:
    """Only the `scheduler` block of the files load_site would read, validated alone.

    `jobsmith site init` writes the rest of a site file from what Slurm reports, so it
    must reach a remote Slurm with a file that says no more than how (`scheduler:`
    with kind, host, ...). Without a readable site file: local, as commands that need
    no site config have always run. A block that asks for another kind but is wrong is
    a ConfigError naming the field, never a run on this host instead.
    """
    try:
        base, base_from = _base_file(explicit, environ, system_file)
        files = _site_files(base, base_from, user_file)
        merged, provenance = merge_documents([read_yaml(f) for f in files])
    except ConfigError:
        return SchedulerAccess()
    try:
        only = _SchedulerOnly.model_validate(merged, context=file_context(environ))
    except ValidationError as exc:
        block = merged.get("scheduler")
        if isinstance(block, dict) and block.get("kind", "local") != "local":
            message = describe_validation_error(exc, _SchedulerOnly, provenance, files)
            raise ConfigError(message) from exc
        return SchedulerAccess()
    return only.scheduler


def _site_files(base: Path, base_from: BaseSource, user_file: Path | None) -> list[Path]:
    """The site files that exist, base first (module docstring); ConfigError if none."""
    user = user_file if user_file is not None else default_user_file()
    if base_from != "system" and not _is_file(base):
        raise ConfigError(f"site file {base} (from {_describe_source(base_from)}) does not exist")
    files = [f for f in _distinct([base, user]) if _exists(f)]
    if not files:
        raise ConfigError(
            f"no site configuration found: tried {base} and {user}; "
            "run `jobsmith site init` to write one from what Slurm reports"
        )
    return files


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError as exc:  # a name too long, a loop of links: Path raises for those
        raise ConfigError(f"site file {str(path)[:200]}: {exc.strerror or exc}") from None


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError as exc:
        raise ConfigError(f"site file {str(path)[:200]}: {exc.strerror or exc}") from None


def load_site_files(files: Sequence[Path], *, environ: Mapping[str, str]) -> LoadedSite:
    """Merge exactly these files, in order, and validate (no searching, no user file)."""
    docs = [read_yaml(f) for f in files]
    merged, provenance = merge_documents(docs)
    try:
        config = SiteConfig.model_validate(merged, context=file_context(environ))
    except ValidationError as exc:
        message = describe_validation_error(exc, SiteConfig, provenance, files)
        raise ConfigError(message) from exc
    return LoadedSite(config, tuple(files), None, provenance)


def _base_file(
    explicit: Path | None, environ: Mapping[str, str], system_file: Path
) -> tuple[Path, BaseSource]:
    if explicit is not None:
        return explicit, "--site"
    from_env = environ.get(SITE_ENV_VAR, "")
    if from_env:
        return Path(from_env), "JOBSMITH_SITE"
    return system_file, "system"


def _describe_source(source: BaseSource) -> str:
    return "--site" if source == "--site" else f"${SITE_ENV_VAR}"


def _distinct(files: Sequence[Path]) -> list[Path]:
    """files without repeats, so `--site` naming the user's own file reads it once."""
    seen: set[Path] = set()
    kept = []
    for file in files:
        key = file.expanduser().resolve()
        if key not in seen:
            seen.add(key)
            kept.append(file)
    return kept
