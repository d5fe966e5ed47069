"""The user's ~/.ssh/config, as OpenSSH reads it, for the paramiko transport.

A site file names the login node as users know it: often an alias of their ~/.ssh/config
(`Host hpc` with its HostName, User, Port and IdentityFile). The OpenSSH transport gets
that from the system's ssh; the paramiko one reads the file here (paramiko's own parser,
which knows Host patterns, Match-less includes and tokens). As with OpenSSH, what is set
explicitly wins over the file: the site's user and key file, and its port where it is
not the default 22. ProxyJump and ProxyCommand are not followed by this transport: a
host that needs them is refused with the setting named and the transport that follows
them (scheduler.kind: openssh), never reached some other way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import paramiko

from jobsmith.errors import ConfigError

DEFAULT_PORT = 22


@dataclass(frozen=True)
class HostSettings:
    """Where and as whom to connect, after ~/.ssh/config."""

    hostname: str
    port: int
    user: str | None
    identity_files: tuple[Path, ...]


def resolve(
    alias: str, *, port: int, user: str | None, key_file: Path | None, config: Path
) -> HostSettings:
    """The settings for `alias`: the site's explicit ones over the file's (module docstring)."""
    found = _lookup(alias, config)
    for key in ("proxyjump", "proxycommand"):
        if key in found:
            raise ConfigError(
                f"{config}: host {alias} goes through {key} ({found[key]}), which the paramiko "
                "transport does not follow: set scheduler.kind: openssh in the site file"
            )
    files = (key_file,) if key_file is not None else _identity_files(found)
    hostname, found_user = found.get("hostname", alias), found.get("user")
    return HostSettings(
        hostname=hostname if isinstance(hostname, str) else alias,
        port=port if port != DEFAULT_PORT else _port(found, config, alias),
        user=user or (found_user if isinstance(found_user, str) else None),
        identity_files=files,
    )


def _lookup(alias: str, config: Path) -> dict[str, str | list[str]]:
    if not config.is_file():
        return {}
    try:
        found: dict[str, str | list[str]] = dict(
            paramiko.SSHConfig.from_path(str(config)).lookup(alias)
        )
    except (OSError, paramiko.ConfigParseError, ValueError) as exc:
        raise ConfigError(f"{config}: cannot read it: {exc}") from None
    return found


def _port(found: dict[str, str | list[str]], config: Path, alias: str) -> int:
    text = str(found.get("port", DEFAULT_PORT))
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ConfigError(f"{config}: host {alias}: Port {text!r} is no TCP port")
    return int(text)


def _identity_files(found: dict[str, str | list[str]]) -> tuple[Path, ...]:
    """The file's IdentityFile entries that exist (OpenSSH skips missing ones too)."""
    listed = found.get("identityfile", [])
    words = [listed] if isinstance(listed, str) else listed
    return tuple(p for w in words if (p := Path(w).expanduser()).is_file())
