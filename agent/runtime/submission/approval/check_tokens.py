"""Check tokens: the second half of a two-step submission (the MCP server's check, then submit).

A check assembles a job and judges it; its token names exactly that assembled job (the
script, its random tag, its options) and is bound to the script's sha256. Submitting
with the token sends those very bytes, never a new rendering. A token is refused when it
is unknown, expired, already used, from another session, or when the sha256 the caller
names is not the checked script's (the caller must say which script it means, as a person
approving does). A refused or used token is gone: a new check is the only way on.

Tokens live in the memory of the process that issued them (the `jobsmith mcp` server):
they survive nothing, not even a restart of that server, which only costs a new check.
Nothing here decides policy: the submit path judges the job again when it is submitted,
and a job the policy holds for a person goes to `jobsmith pending` there.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jobsmith.agent.runtime.submission import hashing
from jobsmith.agent.runtime.submission.judging.judge import CheckedJob
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.errors import PolicyError

#: how long a check's token may be used, unless the server is told otherwise
DEFAULT_TTL = timedelta(minutes=10)
#: an expired token is remembered this long (then it is only "unknown")
_KEEP_EXPIRED = timedelta(hours=1)


class TokenRefused(PolicyError):
    """A submit_job token that cannot submit: unknown, expired, used, from another session,
    or naming another script. Nothing was submitted; check the job again."""


@dataclass(frozen=True)
class Issued:
    """What one token stands for."""

    session_id: str
    request: JobRequest
    checked: CheckedJob
    script_sha256: str
    expires_at: datetime


class CheckTokens:
    """The tokens of one process: issued by a check, spent once by a submit."""

    def __init__(
        self,
        ttl: timedelta = DEFAULT_TTL,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.ttl = ttl
        self._clock = clock
        self._issued: dict[str, Issued] = {}
        #: hashes of spent tokens, so reuse says "used" rather than "unknown"
        self._spent: set[str] = set()
        self._lock = threading.Lock()

    def issue(
        self, session_id: str, request: JobRequest, checked: CheckedJob
    ) -> tuple[str, Issued]:
        """A new token for checked (assembled from request), in session_id; returns it
        with what it stands for."""
        sha = hashing.script_sha256(checked.job.script)
        issued = Issued(session_id, request, checked, sha, self._clock() + self.ttl)
        token = "jsck-" + secrets.token_urlsafe(24)
        with self._lock:
            self._forget_expired()
            self._issued[_key(token)] = issued
        return token, issued

    def spend(self, token: str, session_id: str, script_sha256: str) -> Issued:
        """Take the token (once, however many callers race), or raise TokenRefused."""
        key = _key(token)
        with self._lock:
            issued = self._issued.pop(key, None)
            if issued is None:
                used = key in self._spent
                raise TokenRefused(
                    "submit_job: this token was already used; check the job again"
                    if used
                    else "submit_job: unknown token (tokens last until the server stops); "
                    "check the job again"
                )
            self._spent.add(key)
        return _valid(issued, session_id, script_sha256, self._clock())

    def _forget_expired(self) -> None:
        # kept a while past expiry, so a late submit hears "expired", not "unknown"
        cutoff = self._clock() - _KEEP_EXPIRED
        for key in [k for k, v in self._issued.items() if v.expires_at < cutoff]:
            del self._issued[key]


def _valid(issued: Issued, session_id: str, script_sha256: str, now: datetime) -> Issued:
    """issued, if it may be submitted now by this session for this script."""
    if now >= issued.expires_at:
        raise TokenRefused(
            f"submit_job: the token expired at {issued.expires_at:%H:%M:%S} UTC; "
            "check the job again"
        )
    if issued.session_id != session_id:
        raise TokenRefused("submit_job: the token was issued to another session")
    actual = hashing.script_sha256(issued.checked.job.script)
    named = script_sha256.lower().encode("utf-8", "replace")
    if not hmac.compare_digest(named, issued.script_sha256.encode()) or (
        actual != issued.script_sha256
    ):
        raise TokenRefused(
            "submit_job: script_sha256 is not the sha256 of the script this token checked "
            "(the script changed); check the job again and submit the new token"
        )
    return issued


def _key(token: str) -> str:
    """Tokens are kept by hash only (a dump of the process shows no usable token)."""
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()
