"""The site configuration: what jobsmith knows about one cluster and its policy.

Public API (the CLI's entry points):

- `load_site(explicit, *, environ, system_file, user_file) -> LoadedSite`: find, merge
  and validate the site files (loader.py says which files and in what order);
- `SiteConfig` and its parts (model.py), `dump_site(config) -> str` (dump.py);
- `ClusterFacts`: what the live cluster says (facts.py; the scheduler adapter fills it);
- `check_site(config, facts) -> list[Mismatch]` (check.py) and
  `init_site(facts, user) -> SiteConfig` (generate.py).

Every problem with a site file is raised as jobsmith.errors.ConfigError with one message
naming the file, the line and the field.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobsmith.site_config.check import Mismatch, Severity, check_site, has_errors
    from jobsmith.site_config.dump import dump_site
    from jobsmith.site_config.facts import ClusterFacts
    from jobsmith.site_config.generate import init_site
    from jobsmith.site_config.loader import (
        SITE_ENV_VAR,
        SYSTEM_SITE_FILE,
        LoadedSite,
        default_user_file,
        load_site,
        load_site_files,
    )
    from jobsmith.site_config.model import SiteConfig

# Where each name lives. They are imported on first use, not with the package: importing
# one module of it (facts.py, which the scheduler adapter needs) must not load the YAML
# loader, the checker and the generator, which `jobsmith status` never uses.
_WHERE = {
    "Mismatch": "check",
    "Severity": "check",
    "check_site": "check",
    "has_errors": "check",
    "dump_site": "dump",
    "ClusterFacts": "facts",
    "init_site": "generate",
    "SITE_ENV_VAR": "loader",
    "SYSTEM_SITE_FILE": "loader",
    "LoadedSite": "loader",
    "default_user_file": "loader",
    "load_site": "loader",
    "load_site_files": "loader",
    "SiteConfig": "model",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "SITE_ENV_VAR",
    "SYSTEM_SITE_FILE",
    "ClusterFacts",
    "LoadedSite",
    "Mismatch",
    "Severity",
    "SiteConfig",
    "check_site",
    "default_user_file",
    "dump_site",
    "has_errors",
    "init_site",
    "load_site",
    "load_site_files",
]
