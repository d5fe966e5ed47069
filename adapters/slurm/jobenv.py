"""Which of the agent's environment variables may reach Slurm commands, and so jobs.

sbatch copies the submitter's whole environment into the job by default (--export=ALL),
so an API key in the agent's environment would reach every job on every node. The local
transport therefore runs every Slurm command with the agent's environment minus the
variables below; everything else a job legitimately needs (PATH, HOME, module and
conda settings, proxies, locale, the user's own variables) passes unchanged.

The rule, matched case-insensitively against variable names with shell patterns:
credentials by name (*API_KEY*, *APIKEY*, *SECRET*, *PASSWORD*, *PASSWD*, *PASSPHRASE*,
*CREDENTIAL*, *PRIVATE_KEY*, *TOKEN* except the harmless *TOKENIZERS_PARALLELISM*),
whole providers (ANTHROPIC_*, OPENAI_*, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN, AZURE_CLIENT_SECRET, GOOGLE_APPLICATION_CREDENTIALS), connection
strings that usually embed a password (DATABASE_URL, *_DSN), SSH_AUTH_SOCK (a forwarded
agent lets whoever holds it log in elsewhere as the user), plus the names a site lists in
its config (policy.secret_env). Over SSH nothing of the agent's environment is sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

DEFAULT_SECRET_PATTERNS: tuple[str, ...] = (
    "*API_KEY*",
    "*APIKEY*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*PASSPHRASE*",
    "*CREDENTIAL*",
    "*PRIVATE_KEY*",
    "*TOKEN*",
    "ANTHROPIC_*",
    "OPENAI_*",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "DATABASE_URL",
    "*_DSN",
    "SSH_AUTH_SOCK",
)

#: names a broad pattern would catch although they hold no secret
ALLOWED_NAMES: frozenset[str] = frozenset({"TOKENIZERS_PARALLELISM"})


@dataclass(frozen=True)
class SecretFilter:
    """Drops secret-looking variables from an environment (see the module docstring)."""

    patterns: tuple[str, ...] = DEFAULT_SECRET_PATTERNS
    extra: tuple[str, ...] = field(default=())

    @classmethod
    def with_site_names(cls, names: Iterable[str]) -> SecretFilter:
        """The default rule plus a site's own names or patterns."""
        return cls(extra=tuple(names))

    def is_secret(self, name: str) -> bool:
        """True if a variable of this name must not reach a job."""
        upper = name.upper()
        if upper in ALLOWED_NAMES:
            return False
        return any(fnmatchcase(upper, p.upper()) for p in (*self.patterns, *self.extra))

    def apply(self, environ: Mapping[str, str]) -> dict[str, str]:
        """environ without its secrets."""
        return {k: v for k, v in environ.items() if not self.is_secret(k)}
