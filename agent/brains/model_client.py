"""Reaching a model: settings, the API key, and the anthropic SDK client built from them.

The settings (model, endpoint, limits) may come from the site's or the user's config; the
key never does. It comes only from the environment (`ANTHROPIC_API_KEY`) or from the
user's own key file, `anthropic-api-key` in jobsmith's user config directory, which must
be owned by the user and give group and others no access at all; anything else is
refused with the fix named. The key is held as a `SecretStr`, so no repr, log line or
error message of ours can show it.

The SDK is imported inside `make_client` only: importing this module costs nothing, so
`jobsmith --help` and every command that uses no model stay as fast as without it.
"""

from __future__ import annotations

import email.utils
import os
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from jobsmith.errors import ConfigError
from jobsmith.site_config.model import ModelSettings

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message

#: the user's key file, in jobsmith's user config directory
KEY_FILE_NAME = "anthropic-api-key"
#: a key file longer than this is not a key (and is not read into memory whole)
_KEY_FILE_MAX = 4096


class RetryWaitTooLong(Exception):
    """The API asked to wait longer before a retry than the settings allow."""


class UnreadableReply(Exception):
    """An answer that is no whole Messages-API message: JSON cut short, JSON of another
    shape, a web page from a proxy, or a stream that ended before its message_stop."""


def whole_message(call: Callable[[], object]) -> Message:
    """What call() (the SDK's messages.create, or a finished stream's final message)
    returned, checked to be a whole message; UnreadableReply with one line if not.

    The SDK builds its reply without validating it, so a 200 whose body is not a
    message surfaced later as a JSONDecodeError or an AttributeError (a traceback, and
    in the watcher a wake that crashed its cycle). Every model call of jobsmith's (the
    Claude brain, ask, chat, wakes) reads its answer here instead.
    """
    import anthropic
    from anthropic.types import Message
    from pydantic import ValidationError

    try:
        reply = call()
    except (anthropic.APIResponseValidationError, ValueError, TypeError, KeyError) as exc:
        said = _first_line(exc)
        raise UnreadableReply(f"the model API's answer could not be read ({said})") from None
    if not isinstance(reply, Message):
        raise UnreadableReply(f"the model API's answer is not a message ({type(reply).__name__})")
    try:
        return Message.model_validate(reply.model_dump(mode="python", warnings=False))
    except (ValidationError, AttributeError, TypeError, ValueError) as exc:
        said = _first_line(exc)
        raise UnreadableReply(f"the model API's answer is not a whole message ({said})") from None


def key_source(environ: Mapping[str, str], key_file: Path) -> str:
    """Where load_api_key takes the key from, for an error that names it."""
    if environ.get("ANTHROPIC_API_KEY", "").strip():
        return "ANTHROPIC_API_KEY"
    return f"the key file {key_file}"


def api_error_line(exc: anthropic.APIStatusError, key_from: str) -> str:
    """One plain line for an error the API answered: its own message (the body's
    error.message, not the SDK's 'Error code: 429 - {…}'), the status where it means
    something, and for a refused key where the key came from. An error event in the
    middle of a stream arrives under the stream's 200: it is said as such."""
    body = exc.body
    error = body.get("error") if isinstance(body, dict) else None
    said = error.get("message") if isinstance(error, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    message = " ".join(str(said or exc.message).split())
    if exc.status_code == 200:
        return f"the model API failed in the middle of its answer ({kind or 'error'}): {message}"
    if exc.status_code in (401, 403):
        return f"the model API refused the key from {key_from} (HTTP {exc.status_code}): {message}"
    return f"the model API answered HTTP {exc.status_code}: {message}"


def _first_line(exc: BaseException) -> str:
    said = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {said[0][:200]}" if said else type(exc).__name__


def default_key_file(environ: Mapping[str, str]) -> Path:
    """The user's key file (JOBSMITH_CONFIG_DIR overrides the config directory, as for
    the user's site.yaml)."""
    config = environ.get("JOBSMITH_CONFIG_DIR")
    if not config:
        import platformdirs  # only when a model is used: keeps imports of this module cheap

        config = platformdirs.user_config_dir("jobsmith")
    return Path(config) / KEY_FILE_NAME


def load_api_key(
    environ: Mapping[str, str], key_file: Path, uid: int | None = None
) -> SecretStr | None:
    """The API key from ANTHROPIC_API_KEY, else from key_file; None if neither has one.

    key_file must be owned by uid (default: this process's user) and give group and
    others no access; ConfigError names the file and the fix otherwise.
    """
    from_env = environ.get("ANTHROPIC_API_KEY", "").strip()
    if from_env:
        return SecretStr(from_env)
    try:
        # O_NONBLOCK: a FIFO planted at the path must not hang the watcher (refused below)
        fd = os.open(key_file, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"API key file {key_file}: cannot read it ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        # judge the file opened, not the path: it cannot be swapped between check and read
        _check_private(key_file, os.fstat(handle.fileno()), os.getuid() if uid is None else uid)
        text = handle.read(_KEY_FILE_MAX + 1).decode("utf-8", "replace").strip()
    if not text or len(text) > _KEY_FILE_MAX or len(text.split()) != 1:
        raise ConfigError(f"API key file {key_file}: it should hold the key alone, on one line")
    return SecretStr(text)


def _check_private(key_file: Path, st: os.stat_result, uid: int) -> None:
    """Refuse a key file another user owns or that group or others may access."""
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"API key file {key_file}: not a regular file")
    if st.st_uid != uid:
        raise ConfigError(
            f"API key file {key_file}: owned by uid {st.st_uid}, not by you (uid {uid}); "
            "refused: put your own key there and run `chmod 600` on it"
        )
    if st.st_mode & 0o077:
        mode = stat.S_IMODE(st.st_mode)
        raise ConfigError(
            f"API key file {key_file}: mode {mode:04o} lets others read it; "
            f"refused: run `chmod 600 {key_file}`"
        )


def no_key_message(key_file: Path) -> str:
    """One line: how to give jobsmith a key."""
    return (
        f"no API key: set ANTHROPIC_API_KEY, or put the key in {key_file} "
        f"and run `chmod 600 {key_file}`"
    )


def base_url(settings: ModelSettings, environ: Mapping[str, str]) -> str | None:
    """The endpoint: the settings', else ANTHROPIC_BASE_URL, else None (Anthropic's)."""
    return settings.base_url or environ.get("ANTHROPIC_BASE_URL") or None


def make_client(
    settings: ModelSettings, key: SecretStr, environ: Mapping[str, str]
) -> anthropic.Anthropic:
    """An SDK client with the settings' endpoint, timeout and retries.

    The SDK's own retry loop retries 429, 529 and 5xx and honours `retry-after`; a
    middleware ends the call instead when the wait asked for exceeds max_retry_wait_s,
    so a decision is never stuck behind an hour-long retry-after.
    """
    from jobsmith.extras import needs_extra

    with needs_extra("agent", "a model (ask, chat, wakes, brain: claude)"):
        import anthropic

    def cap_retry_wait(request: anthropic.APIRequest, call_next: anthropic.CallNext) -> Any:
        response = call_next(request)
        wait = retry_after_s(response.headers)
        if response.status_code >= 429 and wait is not None and wait > settings.max_retry_wait_s:
            raise RetryWaitTooLong(
                f"the model API answered HTTP {response.status_code} and asked to wait "
                f"{wait:.0f} s, more than max_retry_wait_s ({settings.max_retry_wait_s:.0f} s)"
            )
        return response

    # an explicit api_key: the SDK then consults no environment variable or profile for
    # credentials, so the key used is exactly the one judged above
    return anthropic.Anthropic(
        api_key=key.get_secret_value(),
        base_url=base_url(settings, environ),
        timeout=settings.timeout_s,
        max_retries=settings.max_retries,
        middleware=[cap_retry_wait],
    )


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for (retry-after-ms, retry-after seconds or date)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return float(headers.get(name, "")) * scale
        except ValueError:
            continue
    parsed = email.utils.parsedate_tz(headers.get("retry-after", ""))
    return None if parsed is None else email.utils.mktime_tz(parsed) - time.time()
