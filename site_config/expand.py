"""How directory names in a site file are expanded: `~`, `$USER` and `$HOME`, nothing else.

One admin file serves every user of a cluster, so its paths must be able to say "this
user's home" and "this user's scratch". They are expanded once, when the file is loaded,
from the environment the loader was given (never from os.environ behind its back):

- a leading `~` or `~/` is the home directory, `$HOME`;
- `$USER` / `${USER}` and `$HOME` / `${HOME}` anywhere; USER falls back to LOGNAME,
  which cron and some batch environments set instead;
- any other `$NAME` is an error rather than silently left in or dropped: a typo such as
  `$USR` would otherwise widen or break where jobs may write, and the meaning of an
  admin's policy must not depend on arbitrary variables in each user's shell;
- `~otheruser` is refused (it would need a passwd lookup that an admin file should not
  depend on);
- the result must be absolute, and is normalised lexically (`..` and `//` folded) but
  symlinks are not resolved: resolving is for the policy check at submission time, on
  the machine where the job's paths are used.

Where the centre's file is read (`/etc/jobsmith/site.yaml`), `~`, `$HOME` and `$USER` are
the user's whom the process runs as, from the passwd entry of its real uid
(centre_environ): a caller can set HOME and USER, and HOME=/ would otherwise turn the
centre's `~` root into the whole file system. That holds for every layer read with it,
so `~` means one directory in the centre's file and the user's.
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic_core import PydanticCustomError

_VARIABLE = re.compile(r"\$(?:\{(?P<braced>[^}]*)\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")
_KNOWN = ("USER", "HOME")


def expand_path(raw: str, environ: Mapping[str, str] | None) -> Path:
    """The absolute path raw names once `~`, `$USER` and `$HOME` are replaced from environ.

    environ None means "no environment given" (a SiteConfig built in code): then a
    path that needs expansion is an error instead of a guess.
    """
    text = raw.strip()
    if text == "~" or text.startswith("~/"):
        text = "$HOME" + text[1:]
    elif text.startswith("~"):
        raise _error("'~user' is not supported in {path}; write the directory out", raw)
    expanded = _VARIABLE.sub(lambda m: _lookup(m, raw, environ), text)
    if "$" in expanded:
        raise _error("stray '$' in {path}; only $USER and $HOME are expanded", raw)
    if not expanded.startswith("/"):
        raise _error("{path} is not an absolute directory (start it with /, ~ or $HOME)", raw)
    return Path(os.path.normpath(expanded))


def _lookup(match: re.Match[str], raw: str, environ: Mapping[str, str] | None) -> str:
    name = match["braced"] if match["braced"] is not None else match["bare"]
    if name not in _KNOWN:
        raise _error(f"${name} in {{path}} is not expanded; only $USER and $HOME are", raw)
    if environ is None:
        raise _error(f"${name} in {{path}} needs an environment to expand", raw)
    value = environ.get(name) or (environ.get("LOGNAME") if name == "USER" else None)
    if not value:
        raise _error(f"${name} in {{path}} is not set in the environment", raw)
    return value


def _error(template: str, raw: str) -> PydanticCustomError:
    return PydanticCustomError("path_expansion", template, {"path": repr(raw)})


def centre_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """environ with USER, LOGNAME and HOME from the passwd entry of the real uid, to expand
    paths where the centre's file is read (module doc); where the system has no entry for
    the uid, without them, so a path that needs them is an error, never the caller's."""
    trusted = {k: v for k, v in environ.items() if k not in ("USER", "LOGNAME", "HOME")}
    try:
        entry = pwd.getpwuid(os.getuid())
    except KeyError:
        return trusted
    return {**trusted, "USER": entry.pw_name, "LOGNAME": entry.pw_name, "HOME": entry.pw_dir}
