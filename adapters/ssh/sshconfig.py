"""The user's ~/.ssh/config, as OpenSSH reads it, for the paramiko transport.

A site file names the login node as users know it: often an alias of their ~/.ssh/config
(`Host hpc` with its HostName, User, Port and IdentityFile). The OpenSSH transport gets
that from the system's ssh; the paramiko one reads the file here (paramiko's own parser,
which knows Host patterns, Match-less includes and tokens). As with OpenSSH, what is set
explicitly wins over the file: the site's user and key file, and its port where it is
not the default 22. ProxyJump is followed as OpenSSH does: each jump host (`[user@]host
[:port]`, several separated by commas) is itself looked up in the file, the connection to
it verified against known_hosts like the login node's, and the next hop reached through it
(a direct-tcpip channel). A jump host that has a ProxyJump of its own, and ProxyCommand
anywhere, are refused with the setting named and the transport that follows them
(scheduler.kind: openssh), never reached some other way.
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
    #: the jump hosts to go through first, in order (ProxyJump)
    jumps: tuple[HostSettings, ...] = ()


def resolve(
    alias: str, *, port: int, user: str | None, key_file: Path | None, config: Path
) -> HostSettings:
    """The settings for `alias`: the site's explicit ones over the file's (module docstring)."""
    found = _lookup(alias, config)
    _refuse(found, "proxycommand", alias, config)
    files = (key_file,) if key_file is not None else _identity_files(found)
    hostname, found_user = found.get("hostname", alias), found.get("user")
    return HostSettings(
        hostname=hostname if isinstance(hostname, str) else alias,
        port=port if port != DEFAULT_PORT else _port(found, config, alias),
        user=user or (found_user if isinstance(found_user, str) else None),
        identity_files=files,
        jumps=_jumps(found.get("proxyjump"), config),
    )


def _jumps(value: str | list[str] | None, config: Path) -> tuple[HostSettings, ...]:
    """The ProxyJump hops, each looked up in the file as a host of its own."""
    if not isinstance(value, str) or value.strip().lower() in ("", "none"):
        return ()
    hops = []
    for word in value.split(","):
        hop_user, _, rest = word.strip().rpartition("@")
        host, _, port_text = rest.partition(":")
        if not host or (port_text and not port_text.isdigit()):
            raise ConfigError(f"{config}: ProxyJump {value!r}: {word!r} is no [user@]host[:port]")
        found = _lookup(host, config)
        for key in ("proxyjump", "proxycommand"):
            _refuse(found, key, host, config)
        hops.append(
            resolve(
                host,
                port=int(port_text) if port_text else DEFAULT_PORT,
                user=hop_user or None,
                key_file=None,
                config=config,
            )
        )
    return tuple(hops)


def _refuse(found: dict[str, str | list[str]], key: str, alias: str, config: Path) -> None:
    if key in found and str(found[key]).strip().lower() != "none":
        raise ConfigError(
            f"{config}: host {alias} goes through {key} ({found[key]}), which the paramiko "
            "transport does not follow: set scheduler.kind: openssh in the site file"
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
