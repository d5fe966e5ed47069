"""What an environment passed onward may hold: the one rule for jobs and the login node.

sbatch hands the environment it runs in to the job, so whatever jobsmith's own process
holds (an API key, a database password, a webhook URL, a proxy URL with `user:pass@`)
would reach every job on every node. A denylist of secret-looking names was always one
name short (MYSQL_PWD, SLACK_WEBHOOK_URL and GH_PAT passed it), so the environment a
Slurm command runs in, and so a job's, is built positively, from this allowlist:

- what jobs need to run (ESSENTIAL_NAMES): the user and shell (PATH, HOME, USER,
  LOGNAME, SHELL, TERM), locale and time (LANG, LANGUAGE, LC_*, TZ), TMPDIR, the search
  paths module files extend (LD_LIBRARY_PATH, LIBRARY_PATH, CPATH, MANPATH,
  PKG_CONFIG_PATH), the module systems' own state (MODULEPATH, MODULESHOME,
  LOADEDMODULES, _LMFILES_, LMOD_*, MODULES_*), an activated conda or venv environment
  (CONDA_PREFIX, CONDA_DEFAULT_ENV, CONDA_EXE, CONDA_PYTHON_EXE, CONDA_SHLVL,
  VIRTUAL_ENV), and the proxies a compute node may need to reach a network
  (http_proxy, https_proxy, ftp_proxy, all_proxy, no_proxy, in both cases);
- none of Slurm's own variables. The commands' configuration is the site's
  (`scheduler.slurm_conf`, set as SLURM_CONF: `slurm_conf` below), never the caller's:
  a SLURM_CONF pointing at a copy of slurm.conf with a cli_filter plugin made sbatch
  rewrite a checked job's partition, account and time (issue 24), and
  SLURM_CONF_SERVER would send the commands to another controller. slurmd sets the
  job's SLURM_* itself; the ones a submitter
  carries (a head job's SLURM_CPUS_PER_TASK, SLURM_NTASKS, SLURM_MEM_PER_NODE,
  SLURM_EXPORT_ENV) would be read by srun inside the new job as its own options, and
  sbatch copies every SLURM_* into the job whatever --export says. SBATCH_* are folded
  or refused before anything runs (agent/runtime/submission/request/jobs.py, fold_sbatch_env);
- the names and shell patterns the site file or the user's own file lists under
  `jobs.environment.allow`.

A name that only a pattern admits (LC_*, LMOD_*, a site's `MYAPP_*`) is still dropped
when it looks like a credential (CREDENTIAL_LOOKING): to pass MYAPP_TOKEN, name it
exactly. The names a site lists under the older `policy.secret_env` (matched ignoring
case, as before) are never passed, whatever admits them. Every value passed has
credentials embedded in a URL (`scheme://user:pass@host`) removed, leaving
`scheme://host`; a proxy variable loses a scheme-less `user:pass@` too (curl reads
`user:pass@proxy:3128`).

Locally the rule is applied here (`JobEnvironmentRule.apply`); over SSH the same rule
runs on the login node as a POSIX shell snippet (`shell_snippet`), since the values are
there. Names and patterns are case-sensitive, as environment names are; the credential
guard ignores case.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from jobsmith.site_config.fieldtypes import SLURM_INPUT_PREFIXES, env_entry_problem

ESSENTIAL_NAMES: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "LIBRARY_PATH",
    "CPATH",
    "MANPATH",
    "PKG_CONFIG_PATH",
    "MODULEPATH",
    "MODULESHOME",
    "LOADEDMODULES",
    "_LMFILES_",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "CONDA_EXE",
    "CONDA_PYTHON_EXE",
    "CONDA_SHLVL",
    "VIRTUAL_ENV",
    *(f"{p}_proxy" for p in ("http", "https", "ftp", "all", "no")),
    *(f"{p}_PROXY" for p in ("HTTP", "HTTPS", "FTP", "ALL", "NO")),
)

ESSENTIAL_PATTERNS: tuple[str, ...] = ("LC_*", "LMOD_*", "MODULES_*")

#: name parts that mark a credential; a name admitted only by a pattern is dropped if it
#: holds one (matched ignoring case)
CREDENTIAL_LOOKING: tuple[str, ...] = (
    "*KEY*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*PASSPHRASE*",
    "*_PASS",
    "*PWD*",
    "*_PAT",
    "*_PAT_*",
    "*TOKEN*",
    "*CREDENTIAL*",
    "*WEBHOOK*",
    "*AUTH*",
    "*COOKIE*",
    "*SESSION*",
    "*_DSN",
    "*DATABASE_URL*",
)

#: `scheme://userinfo@`: the userinfo runs to the last @ before the authority ends
_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\n]*@")
#: a proxy's scheme-less `user:pass@host:port`
_LEADING_CREDENTIALS = re.compile(r"\A[^/?#\n]*@")


class NotAnEnvironmentEntry(ValueError):
    """An allowlist entry jobsmith cannot pass: not a name or name pattern, or one of
    Slurm's own input variables."""

    def __init__(self, entry: str, why: str) -> None:
        self.entry = entry
        super().__init__(f"{entry!r} cannot be allowed into a job's environment: {why}")


def check_entry(entry: str, *, passed: bool = True) -> str:
    """entry if it is a name or a name pattern (safe inside a shell `case`) and, when it
    passes variables, no Slurm input variable; else NotAnEnvironmentEntry saying which."""
    problem = env_entry_problem(entry, passed=passed)
    if problem is not None:
        raise NotAnEnvironmentEntry(entry, problem)
    return entry


def is_pattern(entry: str) -> bool:
    """True if entry holds a wildcard."""
    return "*" in entry or "?" in entry


def is_proxy(name: str) -> bool:
    """True for the proxy variables, whose values may start with a bare `user:pass@`."""
    return name.lower().endswith("_proxy")


def looks_like_credential(name: str) -> bool:
    """True if the name holds a part of CREDENTIAL_LOOKING, in any case."""
    upper = name.upper()
    return any(fnmatchcase(upper, c) for c in CREDENTIAL_LOOKING)


def strip_credentials(name: str, value: str) -> str:
    """value with every `scheme://user:pass@` reduced to `scheme://` (and, for a proxy
    variable, a leading scheme-less `user:pass@` removed)."""
    value = _URL_CREDENTIALS.sub(r"\1", value)
    if is_proxy(name):
        value = _LEADING_CREDENTIALS.sub("", value)
    return value


@dataclass(frozen=True)
class JobEnvironmentRule:
    """The allowlist (module docstring), extended by a site's or user's entries."""

    allowed: tuple[str, ...] = field(default=())
    withheld: tuple[str, ...] = field(default=())
    #: the site's slurm.conf (`scheduler.slurm_conf`), set as SLURM_CONF; None: the
    #: commands' built-in default (the system's), whatever the caller's environment says
    slurm_conf: str | None = None

    @classmethod
    def for_site(
        cls, allowed: Iterable[str], withheld: Iterable[str] = (), slurm_conf: str | None = None
    ) -> JobEnvironmentRule:
        """The rule with a site's `jobs.environment.allow` and `policy.secret_env` entries
        and its slurm.conf; NotAnEnvironmentEntry for an entry a shell pattern could not
        hold."""
        return cls(
            allowed=tuple(check_entry(e) for e in allowed),
            withheld=tuple(check_entry(e, passed=False) for e in withheld),
            slurm_conf=slurm_conf,
        )

    @property
    def names(self) -> tuple[str, ...]:
        """Every exact name the rule admits."""
        return (*ESSENTIAL_NAMES, *(e for e in self.allowed if not is_pattern(e)))

    @property
    def patterns(self) -> tuple[str, ...]:
        """Every pattern the rule admits (guarded by CREDENTIAL_LOOKING)."""
        return (*ESSENTIAL_PATTERNS, *(e for e in self.allowed if is_pattern(e)))

    def allows(self, name: str) -> bool:
        """True if a variable of this name may be passed onward."""
        if any(fnmatchcase(name.upper(), w.upper()) for w in self.withheld):
            return False
        if name in self.names:
            return True
        if not any(fnmatchcase(name, p) for p in self.patterns):
            return False
        return not name.startswith(SLURM_INPUT_PREFIXES) and not looks_like_credential(name)

    def apply(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The part of environ the rule passes, URL credentials stripped, and the site's
        SLURM_CONF."""
        passed = {k: strip_credentials(k, v) for k, v in environ.items() if self.allows(k)}
        return passed | self.pinned

    @property
    def pinned(self) -> dict[str, str]:
        """What the rule sets whatever the environment holds: the site's SLURM_CONF."""
        return {} if self.slurm_conf is None else {"SLURM_CONF": self.slurm_conf}

    def shell_snippet(self) -> str:
        """POSIX sh that applies this rule to its own environment, leaving `env -i`'s
        NAME=value arguments in "$@" (for the login node, where the values are)."""
        guarded = "|".join(
            [*(f"{p}*" for p in SLURM_INPUT_PREFIXES), *map(_any_case, CREDENTIAL_LOOKING)]
        )
        withheld = "|".join(map(_any_case, self.withheld)) or "''"
        proxies = _any_case("*_proxy")
        return (
            "set --; "
            "for _js_n in $(env | sed -n 's/^\\([A-Za-z_][A-Za-z0-9_]*\\)=.*/\\1/p'); do "
            f'case "$_js_n" in {withheld}) continue;; esac; '
            f'case "$_js_n" in {"|".join(self.names)}) ;; '
            f"{'|'.join(self.patterns)}) "
            f'case "$_js_n" in {guarded}) continue;; esac;; '
            "*) continue;; esac; "
            # a name seen only inside another value's line is not set: skip it
            'eval "[ -n \\"\\${$_js_n+x}\\" ]" || continue; '
            'eval "_js_v=\\${$_js_n}"; '
            'case "$_js_v" in *://*@*) _js_v=$(printf "%s\\n" "$_js_v" | '
            "sed 's|\\([A-Za-z][A-Za-z0-9+.-]*://\\)[^/?#]*@|\\1|g');; esac; "
            f'case "$_js_n" in {proxies}) _js_v=$(printf "%s\\n" "$_js_v" | '
            "sed '1s|^[^/?#]*@||');; esac; "
            'set -- "$@" "$_js_n=$_js_v"; '
            "done; unset _js_n _js_v"
            + "".join(f'; set -- "$@" {shlex.quote(f"{k}={v}")}' for k, v in self.pinned.items())
        )


def _any_case(pattern: str) -> str:
    """A shell case pattern matching pattern's letters in either case."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in pattern)
