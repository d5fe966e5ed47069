"""What of jobsmith's own environment reaches a job (adapters/environment_rule.py).

sbatch hands the environment it runs in to the job, so the environment the local
transport gives its commands is the job's. Issue 24 found MYSQL_PWD, SLACK_WEBHOOK_URL,
GH_PAT and a proxy URL carrying `user:pass@` arriving in real jobs past a denylist of
names; the lab test in tests/test_cli.py reads a real job's `env`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsmith.adapters.environment_rule import JobEnvironmentRule, NotAnEnvironmentEntry, is_proxy
from jobsmith.adapters.slurm.transport import LocalTransport

REPO = Path(__file__).resolve().parent.parent

#: what the hostile run found in jobs' environments, with values to look for
FOUND_IN_JOBS = {
    "MYSQL_PWD": "s3cr3t-mysql",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/s3cr3t-slack",
    "GH_PAT": "ghp_s3cr3tpat",
}
PROXY = "http://proxyuser:s3cr3t-proxy@proxy.example:3128"


def seen_by_commands(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]) -> dict[str, str]:
    """The environment the local transport gives a command (sbatch's, so the job's)."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    res = LocalTransport().run(["env", "-0"], timeout=10)
    assert res.returncode == 0, res.stderr
    return dict(entry.split("=", 1) for entry in res.stdout.split("\0") if entry)


def test_the_secrets_the_hostile_run_found_never_reach_a_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = seen_by_commands(monkeypatch, {**FOUND_IN_JOBS, "https_proxy": PROXY})
    for name, value in FOUND_IN_JOBS.items():
        assert name not in seen
        assert not any(value in v for v in seen.values()), name
    assert not any("s3cr3t-proxy" in v or "proxyuser" in v for v in seen.values())
    assert seen.get("PATH")  # the command still runs with the submitter's PATH


# --- the rule as a pure function: generated secret names and values --------------------

SECRET_SUFFIXES = (
    "_PWD",
    "_PAT",
    "_WEBHOOK",
    "_WEBHOOK_URL",
    "_KEY",
    "_API_KEY",
    "_CREDENTIALS",
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_PASS",
    "_AUTH",
)
#: prefixes a secret may hide behind, the allowlist's own patterns among them
PREFIXES = st.one_of(
    st.from_regex(r"[A-Z][A-Z0-9_]{0,12}", fullmatch=True),
    st.sampled_from(["LC", "LMOD", "MODULES", "MYAPP", "CONDA", "SLURM", "SBATCH"]),
)
SECRET_NAMES = st.builds(
    lambda prefix, suffix, lower: (prefix + suffix).lower() if lower else prefix + suffix,
    PREFIXES,
    st.sampled_from(SECRET_SUFFIXES),
    st.booleans(),
)
#: values marked so that finding one anywhere in the result is certain to be a leak
SECRET_VALUES = st.text(
    st.characters(codec="utf-8", exclude_characters="\0"), min_size=0, max_size=30
).map(lambda text: f"S3CR3T{text}")
#: `user[:password]`, marked so that finding it in the result is certain to be a leak; the
#: password may hold '@' (people write them unencoded)
USERINFO = st.from_regex(
    r"[A-Za-z0-9._~%!$&'()*+,;=-]{0,20}(:[A-Za-z0-9._~%!$&'()*+,;=:@-]{1,20})?", fullmatch=True
).map(lambda info: f"U5ER{info}")
NEEDED = {"PATH": "/usr/bin:/bin", "HOME": "/home/alice", "LANG": "C.UTF-8", "MODULEPATH": "/m"}


@settings(max_examples=300, deadline=None)
def _in_sh(rule: JobEnvironmentRule, environ: dict[str, str]) -> dict[str, str]:
    """What the login node's snippet passes of environ, run in a real sh."""
    res = subprocess.run(
        ["sh", "-c", rule.shell_snippet() + '; exec env -i "$@" env -0'],
        env=environ,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(entry.split("=", 1) for entry in res.stdout.split("\0") if entry)


@given(
    secrets=st.dictionaries(SECRET_NAMES, SECRET_VALUES, min_size=1, max_size=8),
    site_patterns=st.lists(st.sampled_from(["MYAPP_*", "LC_*", "*_URL", "CONDA_*"]), max_size=3),
)
def test_generated_secrets_never_reach_a_job(
    secrets: dict[str, str], site_patterns: list[str]
) -> None:
    rule = JobEnvironmentRule.for_site(site_patterns)
    built = rule.apply({**NEEDED, **secrets})
    assert built == NEEDED  # nothing of the secrets, by name or by value; the needs kept
    assert not any("S3CR3T" in value for value in built.values())


@settings(max_examples=300, deadline=None)
@given(
    userinfo=USERINFO,
    scheme=st.sampled_from(["http", "https", "socks5h", "git+ssh"]),
    name=st.sampled_from(["http_proxy", "HTTPS_PROXY", "all_proxy", "no_proxy", "MYAPP_URL"]),
    path=st.sampled_from(["", "/", "/p?q=1", ":3128"]),
    schemeless=st.booleans(),
)
def test_credentials_in_urls_never_reach_a_job(
    userinfo: str, scheme: str, name: str, path: str, schemeless: bool
) -> None:
    rule = JobEnvironmentRule.for_site(["MYAPP_URL"])
    url = f"{userinfo}@proxy.example{path}"
    # a proxy variable holds one URL, which curl reads without a scheme too; any other
    # variable may hold several, as a list or in prose
    value = url if schemeless and is_proxy(name) else f"localhost, {scheme}://{url}"
    built = rule.apply({name: value})
    assert userinfo not in built[name] and "@" not in built[name]
    assert built[name] == value.replace(f"{userinfo}@", "")


def test_a_pattern_never_passes_a_credential_looking_name_but_an_exact_name_does() -> None:
    rule = JobEnvironmentRule.for_site(["MYAPP_*", "MYAPP_TOKEN"])
    built = rule.apply({"MYAPP_HOME": "/opt/a", "MYAPP_KEY": "k", "MYAPP_TOKEN": "t"})
    assert built == {"MYAPP_HOME": "/opt/a", "MYAPP_TOKEN": "t"}


@pytest.mark.parametrize("entry", ["SBATCH_PARTITION", "SLURM_*", "A-B", "$(id)", "", "X Y"])
def test_entries_a_site_may_not_allow_are_refused_naming_them(entry: str) -> None:
    with pytest.raises(NotAnEnvironmentEntry, match=re.escape(repr(entry))):
        JobEnvironmentRule.for_site([entry])


@settings(max_examples=200, deadline=None)
@given(
    secrets=st.dictionaries(
        SECRET_NAMES.filter(lambda n: n.isascii()),
        SECRET_VALUES.map(lambda v: v.replace("\n", " ")),
        max_size=5,
    ),
    proxy_user=USERINFO,
)
def test_the_login_node_snippet_passes_exactly_what_the_rule_passes(
    secrets: dict[str, str], proxy_user: str
) -> None:
    """The SSH transport applies the rule on the login node, in sh: run it here, in a
    real sh, over the same environment, and compare with the Python rule."""
    rule = JobEnvironmentRule.for_site(["MYAPP_*", "KEEP_ME"], ["MYAPP_SECRETISH"])
    environ = {
        **NEEDED,
        **secrets,
        "LC_ALL": "C",
        "MYAPP_HOME": "/opt/a b",
        "MYAPP_SECRETISH": "x",
        "KEEP_ME": "it's $x\\",
        "https_proxy": f"http://{proxy_user}@proxy.example:3128/",
        "HTTP_PROXY": f"{proxy_user}@proxy.example:3128",
        "SQUEUE_FORMAT": "%i",
    }
    seen = _in_sh(rule, environ)
    assert seen == rule.apply(environ)


@pytest.mark.parametrize("site_conf", [None, "/etc/slurm site/slurm.conf"])
def test_the_commands_read_the_sites_slurm_conf_never_the_callers(site_conf: str | None) -> None:
    """A caller's SLURM_CONF (a copy with a cli_filter that rewrites jobs) or
    SLURM_CONF_SERVER never passes; the site's `scheduler.slurm_conf` is set, locally
    and by the login node's snippet alike."""
    rule = JobEnvironmentRule.for_site([], slurm_conf=site_conf)
    environ = {
        **NEEDED,
        "SLURM_CONF": "/tmp/mine/slurm.conf",
        "SLURM_CONF_SERVER": "evil.example:6817",
    }
    expected = {} if site_conf is None else {"SLURM_CONF": site_conf}
    passed = rule.apply(environ)
    assert {k: v for k, v in passed.items() if k.startswith("SLURM_")} == expected
    seen = _in_sh(rule, environ)
    assert seen == passed


# --- the site file's words for it ----------------------------------------------------------


def test_a_site_file_allows_names_and_a_bad_entry_names_its_file_and_line(tmp_path: Path) -> None:
    from jobsmith.errors import ConfigError
    from jobsmith.site_config.loader import load_site_files

    lab = REPO / "site_config" / "examples" / "lab.yaml"
    user = tmp_path / "site.yaml"
    user.write_text("jobs:\n  environment:\n    allow: [MYAPP_*, OMP_NUM_THREADS]\n")
    config = load_site_files([lab, user], environ={"USER": "alice", "HOME": "/home/alice"}).config
    assert config.jobs.environment.allow == ["MYAPP_*", "OMP_NUM_THREADS"]
    user.write_text("jobs:\n  environment:\n    allow: [OK, SBATCH_PARTITION]\n")
    with pytest.raises(ConfigError) as refused:
        load_site_files([lab, user], environ={"USER": "alice", "HOME": "/home/alice"})
    message = str(refused.value)
    assert f"{user}:3" in message and "'SBATCH_PARTITION' cannot pass to jobs" in message
    assert "\n" not in message
