"""The login node's host key, checked against a known_hosts file before anything is sent.

An unknown host and a changed key are both refused: accepting a key unseen would hand
the user's login (and every script jobsmith submits) to whoever answers on that address.
The refusal is a ConfigError (exit 2, like any setting a person must fix), not
SchedulerUnavailable: retrying cannot help, someone has to compare the fingerprint with
the one the site publishes and then add the key, with the command the message names.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import paramiko

from jobsmith.errors import ConfigError


class HostKeyRefused(ConfigError):
    """The login node's host key is not in known_hosts, or differs from the one there."""


def fingerprint(key: Any) -> str:
    """A key as OpenSSH shows it: type and SHA256 fingerprint."""
    return f"{key.get_name()} {key.fingerprint}"


def known_hosts_entry(host: str, port: int) -> str:
    """How known_hosts (and ssh-keyscan, ssh-keygen -R) name host:port."""
    return host if port == 22 else f"[{host}]:{port}"


def unknown(host: str, port: int, key: Any, known_hosts: Path) -> HostKeyRefused:
    """The refusal of a host known_hosts does not list, with what to do."""
    scan = "ssh-keyscan" + ("" if port == 22 else f" -p {port}")
    return HostKeyRefused(
        f"host {known_hosts_entry(host, port)} is not in {known_hosts}; it offered "
        f"{fingerprint(key)}. If that is the login node's fingerprint (ask the site), "
        f"accept it with: {scan} {shlex.quote(host)} >> {shlex.quote(str(known_hosts))}"
    )


def changed(host: str, port: int, got: Any, expected: Any, known_hosts: Path) -> HostKeyRefused:
    """The refusal of a host whose key differs from the one in known_hosts."""
    entry = known_hosts_entry(host, port)
    return HostKeyRefused(
        f"host key of {entry} CHANGED: {known_hosts} has {fingerprint(expected)}, the host "
        f"offered {fingerprint(got)}; someone may be intercepting the connection. Only "
        "if the site confirms the new key, remove the old one with: ssh-keygen -R "
        f"{shlex.quote(entry)} -f {shlex.quote(str(known_hosts))}, then accept the new one"
    )


class RefuseUnknown(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]
    """paramiko's policy for a host not in known_hosts: refuse with its fingerprint."""

    def __init__(self, port: int, known_hosts: Path) -> None:
        self._port = port
        self._known_hosts = known_hosts

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
        """Raise HostKeyRefused (paramiko passes hostname as `[host]:port` off port 22)."""
        host = hostname.removeprefix("[").rsplit("]:", 1)[0] if self._port != 22 else hostname
        raise unknown(host, self._port, key, self._known_hosts)
