"""Who may talk to `jobsmith mcp --http`: the user who started it, holding its token.

localhost is shared by everyone on a login node, so a port on 127.0.0.1 is no fence.
Two checks guard each request, before the MCP SDK sees it:

1. The connecting socket must belong to the server's own user. The kernel knows: on
   Linux `/proc/net/tcp` (and `tcp6`) lists every socket with its owner's uid, and the
   client's end of the connection is the one whose local address is the client's and
   whose remote address is the server's. A request from another uid is refused (403)
   even with the right token, so a token that leaked (a file copied, a `ps` line) does
   not let another user submit under this one's name. Where the owner cannot be found
   (no /proc: not Linux), requests are refused too.
2. The request must carry `Authorization: Bearer <token>`, the token read at start from
   a file only the user can read (`read_token_file`); otherwise 401.

Pure ASGI, so it wraps whatever app the SDK builds.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import stat
import struct
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from pathlib import Path
from typing import Any

from jobsmith.errors import ConfigError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

#: a token shorter than this is refused (guessable)
MIN_TOKEN_CHARS = 16
#: the socket tables the kernel keeps, IPv4 and IPv6
PROC_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
#: /proc/net/tcp's state of a connected socket
_ESTABLISHED = "01"


class TokenFileError(ConfigError):
    """The HTTP server's token file is missing, empty, or readable by others."""


def read_token_file(path: Path) -> str:
    """The bearer token in path, if only its owner (this user) can read it."""
    fix = f"(umask 077; openssl rand -hex 32 > {path})"
    try:
        st = path.stat()
    except FileNotFoundError:
        raise TokenFileError(f"token file {path} does not exist; create one: {fix}") from None
    except OSError as exc:
        raise TokenFileError(f"token file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise TokenFileError(f"token file {path} is not a regular file")
    if st.st_uid != os.getuid():
        raise TokenFileError(f"token file {path} belongs to uid {st.st_uid}, not to you")
    if st.st_mode & 0o077:
        raise TokenFileError(
            f"token file {path} can be read by others (mode {stat.S_IMODE(st.st_mode):o}); "
            f"make it yours alone: chmod 600 {path}"
        )
    token = path.read_text(encoding="utf-8", errors="replace").strip()
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise TokenFileError(
            f"token file {path} must hold one token of at least {MIN_TOKEN_CHARS} "
            f"characters and no spaces; e.g. {fix}"
        )
    return token


def _endpoint(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """'0100007F:1F90' (/proc's native-order hex) as an address and a port."""
    address, port = text.split(":")
    raw = bytes.fromhex(address)
    # each 32-bit word is in the host's byte order
    words = struct.unpack(f"={len(raw) // 4}I", raw)
    packed = b"".join(struct.pack(">I", w) for w in words)
    ip = ipaddress.ip_address(packed)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, int(port, 16)


def socket_owner(
    lines: Iterable[str], client: tuple[str, int], server: tuple[str, int]
) -> int | None:
    """The uid owning the connected socket client -> server in a /proc/net/tcp table."""
    try:
        want_local = (ipaddress.ip_address(client[0]), client[1])
        want_remote = (ipaddress.ip_address(server[0]), server[1])
    except ValueError:
        return None  # not an IP connection (a Unix socket): no owner to find here
    for line in lines:
        fields = line.split()
        if len(fields) < 8 or fields[3] != _ESTABLISHED:
            continue
        try:
            local, remote = _endpoint(fields[1]), _endpoint(fields[2])
        except ValueError:
            continue  # the header line
        if local == want_local and remote == want_remote:
            return int(fields[7])
    return None


def peer_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid of the process that opened the connection client -> server, if found."""
    for table in PROC_TABLES:
        try:
            lines = table.read_text().splitlines()
        except OSError:
            continue
        uid = socket_owner(lines, client, server)
        if uid is not None:
            return uid
    return None


class OwnerOnly:
    """ASGI middleware: only this user's processes, with the token, reach the app."""

    def __init__(
        self,
        app: Asgi,
        token: str,
        *,
        uid: int | None = None,
        find_uid: Callable[[tuple[str, int], tuple[str, int]], int | None] = peer_uid,
    ) -> None:
        self.app = app
        self._token = token.encode()
        self.uid = os.getuid() if uid is None else uid
        self._find_uid = find_uid

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan: the server's own start-up
            return
        client, server = scope.get("client"), scope.get("server")
        owner = self._find_uid(tuple(client), tuple(server)) if client and server else None
        if owner != self.uid:
            who = "an unknown user" if owner is None else f"uid {owner}"
            await _refuse(send, 403, f"this jobsmith serves uid {self.uid} only, not {who}")
            return
        if not self._authorized(scope):
            await _refuse(send, 401, "missing or wrong bearer token", bearer=True)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(
                    given.strip(), self._token
                )
        return False


async def _refuse(send: Send, status: int, message: str, *, bearer: bool = False) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if bearer:
        headers.append((b"www-authenticate", b'Bearer realm="jobsmith"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
