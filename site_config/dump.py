"""A SiteConfig written back as a site file that the loader reads into an equal config.

Durations are written as '[D-]HH:MM:SS' strings and memory as '4G'/'500M' (the types'
JSON serialisers), paths as the absolute directories they were expanded to. A field left
at None is omitted when None is also its default (so `key_file: null` clutter is
avoided), but kept where None means something else than the default (e.g.
`core_hours: null`, "never ask for approval on core-hours"); an empty list that is
its field's default is omitted too.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from jobsmith.site_config.model import SiteConfig
from jobsmith.site_config.yamlfile import dump_yaml


def dump_site(config: SiteConfig, *, header: str | None = None) -> str:
    """config as YAML text; header, if given, is written first as '# ' comment lines."""
    return dump_site_data(site_data(config), header=header)


def dump_site_data(data: dict[str, Any], *, header: str | None = None) -> str:
    """site_data() (or a part of it) as YAML text, header first as '# ' comment lines."""
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines()) if header else ""
    return comment + dump_yaml(data)


def site_data(config: SiteConfig) -> dict[str, Any]:
    """config as the plain data of a site file (what dump_site writes)."""
    return _plain(config)


def _plain(model: BaseModel) -> dict[str, Any]:
    dumped = model.model_dump(mode="json")
    plain: dict[str, Any] = {}
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if value is None and info.default is None:
            continue
        if value == [] and info.default_factory is list:
            continue  # an empty list that is the default says nothing (scheduler.adjusts)
        if isinstance(value, BaseModel):
            plain[name] = _plain(value)
        elif isinstance(value, dict) and all(isinstance(v, BaseModel) for v in value.values()):
            plain[name] = {key: _plain(item) for key, item in value.items()}
        else:
            plain[name] = dumped[name]
    return plain
