"""Finding the site files, merging them and validating the result into a SiteConfig.

Which files, in order (a later file overrides single fields of an earlier one, see
layers.py):

1. the centre's file, the admin's `/etc/jobsmith/site.yaml`, when it exists;
2. the file named by `--site FILE` (the `explicit` argument), else by `$JOBSMITH_SITE`
   from the environment given (an empty value counts as unset); a file named so must
   exist: naming a missing file is an error, never a silent fall-back to another file;
3. the user's file, `site.yaml` in platformdirs' user_config_dir("jobsmith") (usually
   ~/.config/jobsmith/site.yaml), so a personal default account follows the user to a
   test site too. It is optional.

The centre's file is a ceiling for the files after it (ceiling.py): they may tighten its
policy, partitions, accounts, QoS and allowed roots, and a file that loosens one is
refused. `--site` and $JOBSMITH_SITE used to replace the centre's file; now they overlay
it like the user's file, so naming another file cannot escape the centre's limits.
Without a centre file the first file read is the base and nothing is a ceiling, as
before. In `partitions`, a later file's `NAME: null` removes that partition. Where the
centre's file is read, `~`, `$HOME` and `$USER` in every file are the real user's, from
passwd, not the caller's environment (expand.py).

At least one file must exist. Nothing is looked up at import time: paths and the
environment are arguments, so tests and the CLI decide them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobsmith.errors import ConfigError
from jobsmith.site_config.ceiling import check_ceilings
from jobsmith.site_config.diagnostics import describe_validation_error
from jobsmith.site_config.expand import centre_environ
from jobsmith.site_config.fieldtypes import file_context
from jobsmith.site_config.layers import Origin, Provenance, merge_documents
from jobsmith.site_config.model import SchedulerAccess, SiteConfig
from jobsmith.site_config.yamlfile import KeyPath, YamlDocument, parse_yaml, read_yaml

SYSTEM_SITE_FILE = Path("/etc/jobsmith/site.yaml")
SITE_ENV_VAR = "JOBSMITH_SITE"

BaseSource = Literal["--site", "JOBSMITH_SITE", "system"]


class NoSiteFile(ConfigError):
    """No site file exists (none named, none at the usual places): commands that need
    none (`templates`, `render --no-slurm`) go on without one; the rest say to run
    `jobsmith site init`."""


@dataclass(frozen=True)
class LoadedSite:
    """A validated site configuration and where it came from."""

    config: SiteConfig
    #: the files merged, in the order applied (the centre's, the named one, the user's)
    files: tuple[Path, ...]
    #: how the base file was chosen: "system" (the centre's file, nothing named), the
    #: option or variable that named one (read after the centre's file, if it exists);
    #: None when only the user's file exists
    base_from: BaseSource | None
    #: which file and line set each value
    provenance: Provenance
    #: the centre's file when it was a ceiling for the files after it (ceiling.py)
    centre: Path | None = None

    def origin_of(self, path: KeyPath) -> str | None:
        """'FILE:LINE' of the file that set the value at path (e.g. ('accounts', 'default'))."""
        origins = self.provenance.origins_of(path)
        return ", ".join(str(o) for o in origins) or None

    def set_by(self) -> list[tuple[KeyPath, Any, Origin | None]]:
        """Every value in effect, as (field, value as JSON data, the file and line that
        set it; None where no file did and jobsmith's default holds), in the model's
        order. A list is one value; so is an empty mapping."""
        data = self.config.model_dump(mode="json")
        return [(path, value, self.provenance.origins.get(path)) for path, value in _leaves(data)]


def _leaves(data: dict[str, Any], prefix: KeyPath = ()) -> list[tuple[KeyPath, Any]]:
    found: list[tuple[KeyPath, Any]] = []
    for key, value in data.items():
        path = (*prefix, key)
        if isinstance(value, dict) and value:
            found += _leaves(value, path)
        else:
            found.append((path, value))
    return found


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
    expanded with; user_file None means default_user_file(). system_file, when it
    exists, is the centre's file and the ceiling of the others.
    """
    files, base_from = _site_files(explicit, environ, system_file, user_file)
    centre = system_file if files[0] == system_file and len(files) > 1 else None
    loaded = _load(files, _paths_environ(files, system_file, environ), centre)
    return LoadedSite(loaded.config, loaded.files, base_from, loaded.provenance, centre)


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
        files, _ = _site_files(explicit, environ, system_file, user_file)
        merged, provenance = merge_documents([read_yaml(f) for f in files], REMOVABLE)
    except ConfigError:
        return SchedulerAccess()
    try:
        paths_environ = _paths_environ(files, system_file, environ)
        only = _SchedulerOnly.model_validate(merged, context=file_context(paths_environ))
    except ValidationError as exc:
        block = merged.get("scheduler")
        if isinstance(block, dict) and block.get("kind", "local") != "local":
            message = describe_validation_error(exc, _SchedulerOnly, provenance, files)
            raise ConfigError(message) from exc
        return SchedulerAccess()
    return only.scheduler


#: the partition of the stand-in site when the request names none: a placeholder, so the
#: rendered script shows that a real one is wanted
STAND_IN_PARTITION = "PARTITION"


def stand_in_site(environ: Mapping[str, str], partition: str | None, cwd: Path) -> LoadedSite:
    """jobsmith's built-in defaults where no site file exists, for a script rendered
    without Slurm (`render --no-slurm`, which submits nothing): one partition with no
    limits of jobsmith's own, named as asked (else STAND_IN_PARTITION), the defaults of
    site_config/model.py for resources and policy, and jobs allowed under the home and
    the current directory. No file, so `files` is empty."""
    doc = {
        "cluster": "no-site-file",
        "partitions": {partition or STAND_IN_PARTITION: {"default": True}},
        "paths": {"scratch": "~", "allowed_roots": ["~", str(cwd)]},
    }
    try:
        config = SiteConfig.model_validate(doc, context=file_context(environ))
    except ValidationError as exc:
        message = describe_validation_error(exc, SiteConfig, Provenance(), [])
        raise ConfigError(f"jobsmith's built-in defaults: {message}") from exc
    return LoadedSite(config, (), None, Provenance())


def _site_files(
    explicit: Path | None,
    environ: Mapping[str, str],
    system_file: Path,
    user_file: Path | None,
) -> tuple[list[Path], BaseSource | None]:
    """The site files that exist, centre's first (module docstring), and how the base
    was chosen (None when only the user's file exists); ConfigError if none."""
    named = _named_file(explicit, environ)
    if named is not None and not _is_file(named[0]):
        raise ConfigError(
            f"site file {named[0]} (from {_describe_source(named[1])}) does not exist"
        )
    user = user_file if user_file is not None else default_user_file()
    candidates = [system_file, *([named[0]] if named else []), user]
    files = [f for f in _distinct(candidates) if _exists(f)]
    if not files:
        raise NoSiteFile(
            f"no site configuration found: tried {system_file} and {user}; "
            "run `jobsmith site init` to write one from what Slurm reports"
        )
    if named is not None:
        return files, named[1]
    return files, "system" if files[0] == system_file else None


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


#: mappings in which a later file's `NAME: null` removes the entry (layers.py)
REMOVABLE: tuple[KeyPath, ...] = (("partitions",),)


def load_site_files(files: Sequence[Path], *, environ: Mapping[str, str]) -> LoadedSite:
    """Merge exactly these files, in order, and validate (no searching, no user file,
    no ceiling)."""
    return _load(files, environ, centre=None)


def load_over_centre(
    centre: Path, text: str, file: Path, *, environ: Mapping[str, str]
) -> LoadedSite:
    """What loading would make of text, the contents of a site file to be written at
    file, read over the centre's file: ConfigError if the centre's ceiling refuses it
    (how `site init` checks a file before writing it beneath a centre's)."""
    docs = [read_yaml(centre), parse_yaml(text, file)]
    return _load_documents(docs, centre_environ(environ), centre)


def _paths_environ(
    files: Sequence[Path], system_file: Path, environ: Mapping[str, str]
) -> Mapping[str, str]:
    """The environment paths are expanded from: the real user's where the centre's file
    is read (expand.py's centre_environ), else the one given."""
    return centre_environ(environ) if files and files[0] == system_file else environ


def _load(files: Sequence[Path], environ: Mapping[str, str], centre: Path | None) -> LoadedSite:
    """Merge files in order and validate; centre, the first of them when given, is the
    ceiling of the rest (ceiling.py)."""
    return _load_documents([read_yaml(f) for f in files], environ, centre)


def _load_documents(
    docs: Sequence[YamlDocument], environ: Mapping[str, str], centre: Path | None
) -> LoadedSite:
    files = [doc.file for doc in docs]
    merged, provenance = merge_documents(docs, REMOVABLE)
    try:
        config = SiteConfig.model_validate(merged, context=file_context(environ))
    except ValidationError as exc:
        message = describe_validation_error(exc, SiteConfig, provenance, files)
        raise ConfigError(message) from exc
    if centre is not None:
        check_ceilings(docs[0], config, provenance, environ)
    return LoadedSite(config, tuple(files), None, provenance)


def _named_file(
    explicit: Path | None, environ: Mapping[str, str]
) -> tuple[Path, BaseSource] | None:
    """The file `--site` or $JOBSMITH_SITE names, and which of them named it."""
    if explicit is not None:
        return explicit, "--site"
    from_env = environ.get(SITE_ENV_VAR, "")
    if from_env:
        return Path(from_env), "JOBSMITH_SITE"
    return None


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
