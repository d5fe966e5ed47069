"""The centre's site file is a ceiling (issue 24, item 8): real YAML files in tmp dirs.

The centre's file (`/etc/jobsmith/site.yaml`, here the lab example or a file built from
it) states limits; every other layer (`--site`, $JOBSMITH_SITE, the user's file) may
tighten them and is refused, naming its file, line, field, value and the centre's limit,
when it loosens one. Without a centre file nothing is a ceiling (today's layering).
"""

from __future__ import annotations

import json
import os
import tempfile
from importlib.resources import files
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsmith.agent.app import App, UserDirs
from jobsmith.agent.faces.cli import cli
from jobsmith.errors import ConfigError
from jobsmith.site_config import LoadedSite, load_site

ENV = {"USER": "alice", "HOME": "/home/alice"}
EXAMPLE = Path(str(files("jobsmith.site_config").joinpath("examples/lab.yaml")))
NOWHERE = Path("/nonexistent/jobsmith/site.yaml")
#: what the centre's file adds to the lab example's policy, for the rules it does not state
MORE_POLICY = """\
  canary:
    above_tasks: 10
    tasks: 3
  secret_env: [MYSQL_PWD]
model:
  tainted_actions: person
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def loaded(
    centre: Path,
    user: Path = NOWHERE,
    explicit: Path | None = None,
    environ: dict[str, str] = ENV,
) -> LoadedSite:
    return load_site(explicit, environ=environ, system_file=centre, user_file=user)


def refused(
    centre: Path,
    user: Path = NOWHERE,
    explicit: Path | None = None,
    environ: dict[str, str] = ENV,
) -> str:
    with pytest.raises(ConfigError) as caught:
        loaded(centre, user, explicit, environ)
    assert caught.value.exit_code == 2
    message = str(caught.value)
    assert "\n" not in message, "the CLI shows one line"
    return message


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture
def centre(tmp_path: Path) -> Path:
    """The lab example with a canary, a secret and tainted_actions stated too."""
    return write(tmp_path, "centre.yaml", EXAMPLE.read_text() + MORE_POLICY)


# ------------------------------------------------------------------- each kind of limit


@pytest.mark.parametrize(
    ("text", "field", "value", "limit"),
    [
        ("policy:\n  approval:\n    core_hours: 500\n", "policy.approval.core_hours", "500", "100"),
        (
            "policy:\n  approval:\n    gpu_hours: null\n",
            "policy.approval.gpu_hours",
            "no limit",
            "8",
        ),
        ("policy:\n  approval:\n    nodes: 5\n", "policy.approval.nodes", "5", "4"),
        ("policy:\n  max_concurrent_jobs: 5000\n", "policy.max_concurrent_jobs", "5000", "2000"),
        (
            "policy:\n  budgets:\n    submissions_per_hour: 601\n",
            "policy.budgets.submissions_per_hour",
            "601",
            "600",
        ),
        (
            "policy:\n  budgets:\n    gpu_hours_per_day: null\n",
            "policy.budgets.gpu_hours_per_day",
            "no limit",
            "48",
        ),
        (
            "policy:\n  budgets:\n    max_failures_in_a_row: 11\n",
            "policy.budgets.max_failures_in_a_row",
            "11",
            "10",
        ),
        (
            "policy:\n  approval:\n    risky_actions: [hold_foreign]\n",
            "policy.approval.risky_actions",
            "'cancel_foreign'",
            "cancel_foreign",
        ),
        ("policy:\n  canary: null\n", "policy.canary", "no canary", "above_tasks 10"),
        ("policy:\n  canary:\n    above_tasks: 50\n", "policy.canary.above_tasks", "50", "10"),
        ("policy:\n  canary:\n    tasks: 1\n", "policy.canary.tasks", "1", "3"),
        ("policy:\n  secret_env: [GH_PAT]\n", "policy.secret_env", "'MYSQL_PWD'", "MYSQL_PWD"),
        ("model:\n  tainted_actions: policy\n", "model.tainted_actions", "'policy'", "'person'"),
        (
            "partitions:\n  gpu:\n    max_time: '05:00:00'\n",
            "partitions.gpu.max_time",
            "05:00:00",
            "04:00:00",
        ),
        (
            "partitions:\n  debug:\n    max_mem_per_node: 32G\n",
            "partitions.debug.max_mem_per_node",
            "32G",
            "16G",
        ),
        ("partitions:\n  long:\n    max_nodes: 2\n", "partitions.long.max_nodes", "2", "1"),
        (
            "partitions:\n  long:\n    max_nodes: null\n",
            "partitions.long.max_nodes",
            "no limit",
            "1",
        ),
        (
            "partitions:\n  debug:\n    max_cpus_per_node: 4\n",
            "partitions.debug.max_cpus_per_node",
            "4",
            "2",
        ),
        (
            "partitions:\n  gpu:\n    max_gpus_per_node: 4\n",
            "partitions.gpu.max_gpus_per_node",
            "4",
            "2",
        ),
        # a partition the centre lists without GPUs has none
        (
            "partitions:\n  debug:\n    max_gpus_per_node: 1\n",
            "partitions.debug.max_gpus_per_node",
            "1",
            "0",
        ),
        (
            "partitions:\n  bigmem:\n    max_time: 60\n",
            "partitions.bigmem",
            "'bigmem'",
            "debug, long, gpu, preempt, high",
        ),
        ("accounts:\n  allowed: [lab, physics]\n", "accounts.allowed", "'physics'", "lab, proj2"),
        ("qos:\n  allowed: [normal, high]\n", "qos.allowed", "'high'", "normal"),
        # an empty list lets a request name any account (policy.py: _check_choice)
        ("accounts:\n  allowed: []\n  default: null\n", "accounts.allowed", "empty", "lab, proj2"),
        ("paths:\n  allowed_roots: [/]\n", "paths.allowed_roots[0]", "/", "/home/alice"),
    ],
)
def test_a_user_file_that_loosens_a_limit_is_refused_naming_file_field_value_and_limit(
    tmp_path: Path, centre: Path, text: str, field: str, value: str, limit: str
) -> None:
    user = write(tmp_path, "user.yaml", text)
    message = refused(centre, user)
    last_key = field.rsplit(".", 1)[-1].split("[")[0]
    assert message.startswith(f"{user}:{line_of(user, last_key)}: {field}: "), message
    assert value in message
    assert limit in message
    assert str(centre) in message, "the centre's file is named"
    assert "never loosen" in message


def test_tightening_every_kind_of_limit_applies(tmp_path: Path, centre: Path) -> None:
    user = write(
        tmp_path,
        "user.yaml",
        """\
policy:
  max_concurrent_jobs: 10
  approval:
    core_hours: 10
    gpu_hours: 0
    risky_actions: [cancel_foreign, hold_foreign]
  budgets:
    submissions_per_hour: 20
    node_hours_per_day: 5
  canary:
    above_tasks: 4
    tasks: 3
  secret_env: [MYSQL_PWD, GH_PAT]
partitions:
  gpu:
    max_time: '01:00:00'
    max_gpus_per_node: 1
    max_mem_per_node: 4G
  long: null
accounts:
  allowed: [lab]
qos:
  allowed: [normal]
  default: null
paths:
  allowed_roots: [/scratch/$USER]
""",
    )
    site = loaded(centre, user)
    config = site.config
    policy = config.policy
    assert policy.max_concurrent_jobs == 10
    assert (policy.approval.core_hours, policy.approval.gpu_hours) == (10, 0)
    assert policy.approval.risky_actions == ["cancel_foreign", "hold_foreign"]
    assert policy.budgets.submissions_per_hour == 20
    assert policy.budgets.node_hours_per_day == 5  # the centre set none: free
    assert policy.canary is not None and policy.canary.above_tasks == 4
    assert list(config.partitions) == ["debug", "gpu", "preempt", "high"]  # `long: null` removed it
    gpu = config.partitions["gpu"]
    assert (gpu.max_time, gpu.max_gpus_per_node, gpu.max_mem_per_node) == (3600, 1, 4096)
    assert config.accounts.allowed == ["lab"]
    assert (config.qos.allowed, config.qos.default) == (["normal"], None)
    assert config.paths.allowed_roots == [Path("/scratch/alice")]
    assert site.files == (centre, user)


def test_a_user_file_may_still_set_preferences_freely(tmp_path: Path, centre: Path) -> None:
    user = write(
        tmp_path,
        "user.yaml",
        """\
accounts:
  default: proj2
defaults:
  time_limit_s: '00:20:00'
env_setup: ['module load gcc/12']
policy:
  advice:
    right_size: apply
  budgets:
    pipeline_at_limit: cancel
partitions:
  gpu:
    default: true
  debug:
    default: false
model:
  max_tokens: 4000
brain: claude
""",
    )
    config = loaded(centre, user).config
    assert config.accounts.default == "proj2"
    assert config.default_partition() == ("gpu", config.partitions["gpu"])
    assert config.policy.advice.right_size == "apply"
    assert config.brain == "claude"


def test_what_the_centre_file_leaves_unsaid_is_no_limit(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    centre = write(tmp_path, "centre.yaml", text[: text.index("policy:")])
    user = write(tmp_path, "user.yaml", "policy:\n  approval:\n    core_hours: 1000\n")
    assert loaded(centre, user).config.policy.approval.core_hours == 1000


# --------------------------------------------------------------- --site and JOBSMITH_SITE


def test_a_site_option_file_overlays_the_centre_file_and_cannot_loosen_it(tmp_path: Path) -> None:
    other = write(tmp_path, "other.yaml", "policy:\n  approval:\n    core_hours: 1000\n")
    message = refused(EXAMPLE, explicit=other)
    assert message.startswith(f"{other}:3: policy.approval.core_hours: 1000 is above 100")
    assert f"{EXAMPLE}:{line_of(EXAMPLE, 'core_hours')}" in message


def test_jobsmith_site_cannot_loosen_the_centre_file_either(tmp_path: Path) -> None:
    other = write(tmp_path, "other.yaml", "partitions:\n  bigmem: {}\n")
    message = refused(EXAMPLE, environ={**ENV, "JOBSMITH_SITE": str(other)})
    assert message.startswith(f"{other}:2: partitions.bigmem: ")


def test_the_site_option_file_tightens_and_the_user_file_tightens_further(
    tmp_path: Path,
) -> None:
    other = write(tmp_path, "other.yaml", "policy:\n  approval:\n    core_hours: 50\n")
    user = write(tmp_path, "user.yaml", "policy:\n  approval:\n    core_hours: 20\n")
    site = loaded(EXAMPLE, user, explicit=other)
    assert site.files == (EXAMPLE, other, user)
    assert site.base_from == "--site"
    assert site.config.policy.approval.core_hours == 20
    assert site.config.cluster == "jobsmithlab"  # the rest is the centre's


def test_a_user_file_may_go_back_up_to_the_centre_limit_over_a_tighter_site_file(
    tmp_path: Path,
) -> None:
    # only the centre's file is a ceiling: --site is the user's own choice, like their file
    other = write(tmp_path, "other.yaml", "policy:\n  approval:\n    core_hours: 50\n")
    user = write(tmp_path, "user.yaml", "policy:\n  approval:\n    core_hours: 100\n")
    assert loaded(EXAMPLE, user, explicit=other).config.policy.approval.core_hours == 100


def test_without_a_centre_file_the_user_file_overlays_the_site_file_freely(
    tmp_path: Path,
) -> None:
    user = write(
        tmp_path, "user.yaml", f"paths:\n  allowed_roots: [/scratch/$USER, '{tmp_path}']\n"
    )
    site = loaded(NOWHERE, user, explicit=EXAMPLE)
    assert site.config.paths.allowed_roots == [Path("/scratch/alice"), tmp_path]


def test_a_broken_centre_file_is_not_escaped_by_naming_another(tmp_path: Path) -> None:
    centre = write(tmp_path, "centre.yaml", "this is: [not valid\n")
    assert refused(centre, explicit=EXAMPLE).startswith(f"{centre}:")


# ------------------------------------------------------------------------ allowed roots


@pytest.fixture
def rooted(tmp_path: Path) -> tuple[Path, Path]:
    """(a centre file whose one allowed root is tmp/root, that root)."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    return write(tmp_path, "centre.yaml", _with_root(root, root / "sub")), root


def _with_root(root: Path, scratch: Path) -> str:
    """The lab example with root as its one allowed root and scratch below it."""
    text = EXAMPLE.read_text()
    roots = '    - "~"                  # quoted: a bare ~ is YAML for null\n    - /scratch/$USER\n'
    assert roots in text and "  scratch: /scratch/$USER\n" in text
    text = text.replace(roots, f"    - {root}\n")
    return text.replace("  scratch: /scratch/$USER\n", f"  scratch: {scratch}\n")


def test_allowed_roots_may_narrow_to_a_subdirectory(
    tmp_path: Path, rooted: tuple[Path, Path]
) -> None:
    centre, root = rooted
    user = write(tmp_path, "user.yaml", f"paths:\n  allowed_roots: [{root}/sub, {root}/new/dir]\n")
    roots = loaded(centre, user).config.paths.allowed_roots
    assert roots == [root / "sub", root / "new" / "dir"]


@pytest.mark.parametrize("widened", ["{tmp}", "{tmp}/outside", "{root}/../outside", "/"])
def test_allowed_roots_may_not_widen(
    tmp_path: Path, rooted: tuple[Path, Path], widened: str
) -> None:
    centre, root = rooted
    value = widened.format(tmp=tmp_path, root=root)
    user = write(
        tmp_path,
        "user.yaml",
        f"paths:\n  scratch: {root}/sub\n  allowed_roots: [{root}/sub, {value}]\n",
    )
    message = refused(centre, user)
    shown = os.path.normpath(value)  # the loader folds `..` (expand.py); the check resolves links
    assert message.startswith(f"{user}:3: paths.allowed_roots[1]: {shown} "), message
    assert f"within the centre's allowed_roots ({root})" in message


def test_a_symlink_inside_a_root_that_leads_out_is_refused(
    tmp_path: Path, rooted: tuple[Path, Path]
) -> None:
    centre, root = rooted
    (root / "link").symlink_to(tmp_path / "outside")
    deeper = f"{root}/link/deeper"
    user = write(
        tmp_path, "user.yaml", f"paths:\n  scratch: {deeper}\n  allowed_roots: [{deeper}]\n"
    )
    message = refused(centre, user)
    assert f"{root}/link/deeper (resolves to {tmp_path}/outside/deeper)" in message


def test_a_centre_root_reached_through_a_symlink_compares_by_where_it_leads(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(real)
    alias = tmp_path / "alias"
    centre = write(tmp_path, "centre.yaml", _with_root(alias, alias))
    user = write(
        tmp_path, "user.yaml", f"paths:\n  scratch: {real}/sub\n  allowed_roots: [{real}/sub]\n"
    )
    assert loaded(centre, user).config.paths.allowed_roots == [real / "sub"]


# ------------------------------------------------------------------------------ property

LIMITED = [
    ("policy", "approval", "nodes"),
    ("policy", "max_concurrent_jobs"),
    ("policy", "budgets", "submissions_per_hour"),
    ("partitions", "long", "max_nodes"),
    ("partitions", "long", "max_cpus_per_node"),
]
ABSENT = object()


def _yaml(values: dict[tuple[str, ...], object]) -> str:
    """A nested YAML mapping, written out, of the key paths' values (None is null)."""
    tree: dict[str, object] = {}
    for path, value in values.items():
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})  # type: ignore[assignment]
        node[path[-1]] = value  # type: ignore[index]
    lines: list[str] = []

    def emit(mapping: dict[str, object], indent: int) -> None:
        for key, value in mapping.items():
            if isinstance(value, dict):
                lines.append(" " * indent + f"{key}:")
                emit(value, indent + 2)
            else:
                lines.append(" " * indent + f"{key}: {'null' if value is None else value}")

    emit(tree, 0)
    return "\n".join(lines) + "\n"


def _at(config: object, path: tuple[str, ...]) -> object:
    for key in path:
        config = config[key] if isinstance(config, dict) else getattr(config, key)
    return config


numbers = st.one_of(st.none(), st.integers(min_value=1, max_value=10_000))


@settings(max_examples=60, deadline=None)
@given(
    centre_values=st.fixed_dictionaries({p: numbers for p in LIMITED}),
    user_values=st.fixed_dictionaries({p: st.one_of(st.just(ABSENT), numbers) for p in LIMITED}),
)
def test_the_effective_value_is_never_above_the_centres(
    centre_values: dict[tuple[str, ...], int | None],
    user_values: dict[tuple[str, ...], object],
) -> None:
    base = {
        ("cluster",): "c",
        ("partitions", "long", "max_time"): 60,
        ("paths", "scratch"): "/scratch/$USER",
        ("paths", "allowed_roots"): "[/scratch/$USER]",
    }
    stated = {p: v for p, v in user_values.items() if v is not ABSENT}
    with tempfile.TemporaryDirectory() as tmp:
        centre = write(Path(tmp), "centre.yaml", _yaml({**base, **centre_values}))
        user = write(Path(tmp), "user.yaml", _yaml(stated) if stated else "{}\n")
        try:
            config = loaded(centre, user).config
        except ConfigError as exc:
            looser = [
                p
                for p, v in stated.items()
                if centre_values[p] is not None and (v is None or v > centre_values[p])  # type: ignore[operator]
            ]
            assert looser, f"refused with nothing looser: {exc}"
            assert str(exc).startswith(f"{user}:"), str(exc)
            assert any(".".join(p) in str(exc) for p in looser), str(exc)
            return
        for path, limit in centre_values.items():
            value = _at(config, path)
            if limit is not None:
                assert value is not None and value <= limit, (path, value, limit)  # type: ignore[operator]
            if path in stated:
                assert value == stated[path], "a tightening applies as written"


# ---------------------------------------------------------------- site show --explain


def show(tmp_path: Path, centre: Path, user_text: str, *args: str) -> Result:
    """`jobsmith site show ARGS` with centre as /etc/jobsmith/site.yaml and user_text as
    the user's file."""
    config, state = tmp_path / "home" / "config", tmp_path / "home" / "state"
    config.mkdir(parents=True)
    state.mkdir()
    (config / "site.yaml").write_text(user_text)
    app = App(paths=UserDirs(config, state, system_site_file=centre), environ=ENV)
    return CliRunner().invoke(cli, ["site", "show", *args], obj=app, catch_exceptions=False)


TIGHTER = "policy:\n  approval:\n    core_hours: 10\n"


def test_site_show_explain_names_the_file_and_line_that_set_each_value(tmp_path: Path) -> None:
    result = show(tmp_path, EXAMPLE, TIGHTER, "--explain")
    assert result.exit_code == 0, result.output
    user = tmp_path / "home" / "config" / "site.yaml"
    lines = result.stdout.splitlines()
    assert lines[0] == f"site files: {EXAMPLE}, {user}"
    assert f"limits: {EXAMPLE}" in lines[1]
    assert f"policy.approval.core_hours: 10  ({user}:3)" in lines
    assert f"policy.approval.nodes: 4  ({EXAMPLE}:{line_of(EXAMPLE, 'nodes: 4')})" in lines
    assert f"partitions.gpu.max_time: 04:00:00  ({EXAMPLE}:{line_of(EXAMPLE, '04:00:00')})" in lines
    assert "policy.budgets.node_hours_per_day: null  (jobsmith's default)" in lines
    assert (
        f'accounts.allowed: ["lab", "proj2"]  ({EXAMPLE}:{line_of(EXAMPLE, "[lab, proj2]")})'
        in lines
    )


def test_site_show_explain_as_json_gives_the_same_as_data(tmp_path: Path) -> None:
    result = show(tmp_path, EXAMPLE, TIGHTER, "--explain", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    user = tmp_path / "home" / "config" / "site.yaml"
    assert data["files"] == [str(EXAMPLE), str(user)]
    assert data["centre"] == str(EXAMPLE)
    assert data["config"]["policy"]["approval"]["core_hours"] == 10
    by_field = {entry["field"]: entry for entry in data["explained"]}
    assert by_field["policy.approval.core_hours"] == {
        "field": "policy.approval.core_hours",
        "value": 10,
        "file": str(user),
        "line": 3,
    }
    assert by_field["cluster"]["file"] == str(EXAMPLE)
    assert by_field["policy.budgets.node_hours_per_day"]["file"] is None
    assert by_field["partitions.debug.max_mem_per_node"]["value"] == "16G"
    # every value of the config is explained once
    assert len(by_field) == len(data["explained"])


def test_site_show_without_explain_prints_the_config(tmp_path: Path) -> None:
    result = show(tmp_path, EXAMPLE, TIGHTER, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"files", "centre", "config"}
    assert data["config"]["partitions"]["gpu"]["max_time"] == "04:00:00"
    text = show(tmp_path / "text", EXAMPLE, TIGHTER).stdout
    assert "core_hours: 10" in text and "cluster: jobsmithlab" in text


def test_site_show_refuses_a_loosening_in_one_line_with_exit_2(tmp_path: Path) -> None:
    result = show(tmp_path, EXAMPLE, "policy:\n  approval:\n    core_hours: 1000\n", "--explain")
    assert result.exit_code == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "policy.approval.core_hours: 1000 is above 100" in line


# ----------------------------------------------------- the slurm.conf and its adjustments


def test_the_slurm_conf_the_centre_names_is_the_one_the_commands_read(tmp_path: Path) -> None:
    stated = "scheduler:\n  slurm_conf: /etc/slurm/slurm.conf\n  adjusts: [partition, time]\n"
    centre_text = EXAMPLE.read_text().replace("scheduler:\n", stated, 1)
    centre = write(tmp_path, "centre.yaml", centre_text)
    mine = write(tmp_path, "user.yaml", "scheduler:\n  slurm_conf: /home/me/slurm.conf\n")
    message = refused(centre, mine)
    assert message.startswith(f"{mine}:2: scheduler.slurm_conf: /home/me/slurm.conf is not"), (
        message
    )
    assert "the centre's scheduler.slurm_conf (/etc/slurm/slurm.conf)" in message
    # the adjustments not held against a job may be fewer, never more
    fewer = write(tmp_path, "fewer.yaml", "scheduler:\n  adjusts: [time]\n")
    assert loaded(centre, fewer).config.scheduler.adjusts == ["time"]
    more = write(tmp_path, "more.yaml", "scheduler:\n  adjusts: [partition, account]\n")
    assert "scheduler.adjusts: 'account' is not in the centre's" in refused(centre, more)


def test_a_centre_silent_on_the_slurm_conf_leaves_it_to_the_user(tmp_path: Path) -> None:
    centre = write(tmp_path, "centre.yaml", EXAMPLE.read_text())
    mine = write(tmp_path, "user.yaml", "scheduler:\n  slurm_conf: /home/me/slurm.conf\n")
    assert str(loaded(centre, mine).config.scheduler.slurm_conf) == "/home/me/slurm.conf"
    # but an adjustment the centre did not declare is not the user's to declare
    more = write(tmp_path, "more.yaml", "scheduler:\n  adjusts: [partition]\n")
    assert "'partition' is not in the centre's scheduler.adjusts (none)" in refused(centre, more)


# ---------------------------------------------------------- `site init` beneath a centre


LAB = Path(__file__).parent / "fixtures" / "lab-22.05"


class _Facts:
    """The lab's Slurm as `site init` asks it: cluster_facts only (real captured output)."""

    def cluster_facts(self, user: str) -> object:
        from jobsmith.adapters.slurm.parsing.facts import build_facts

        return build_facts(
            *((LAB / name).read_text() for name in _FACTS),
            user=user,
        )


_FACTS = ("scontrol-show-partition.txt", "scontrol-show-node.txt", "site-sacctmgr-assoc-alice.txt")


def init_beneath(centre: Path | None, output: Path, environ: dict[str, str] = ENV) -> str:
    from jobsmith.agent.runtime.sitefile import Login, site_init
    from jobsmith.site_config.model import SchedulerAccess

    login = Login(user="alice", home=Path("/home/alice"), scratch=Path("/scratch/alice"))
    result = site_init(
        _Facts(),  # type: ignore[arg-type]
        login,
        SchedulerAccess(),
        output,
        force=False,
        to_stdout=False,
        centre=centre,
        environ=environ,
    )
    return result.yaml


def test_site_init_beneath_a_centre_writes_a_file_the_centre_admits(
    tmp_path: Path, centre: Path
) -> None:
    # what init writes without regard to the centre: the live cluster's five partitions
    # and both QoS the user may use, where the centre lists three and allows one
    alone = tmp_path / "alone.yaml"
    init_beneath(None, alone)
    assert "partitions" in refused(centre, alone)
    mine = tmp_path / "site.yaml"
    text = init_beneath(centre, mine)
    assert text.startswith("# Written by `jobsmith site init`")
    assert f"# The centre's {centre} is read first" in text
    site = loaded(centre, mine)  # every later command loads it: no exit 2
    assert site.files == (centre, mine)
    config = site.config
    assert list(config.partitions) == ["debug", "long", "gpu", "preempt", "high"]  # the centre's
    assert config.qos.allowed == ["normal"] and config.accounts.allowed == ["lab", "proj2"]
    assert config.policy.approval.core_hours == 100
    # what the centre states is left to it; what it leaves out is the user's, from the
    # cluster (here the scheduler block's defaults, which the centre does not state)
    assert "\npartitions:" not in text and "\nqos:" not in text and "\ncluster:" not in text
    assert "\nscheduler:\n" in text and "  port: 22\n" in text
    assert config.cluster == "jobsmithlab"


def test_site_init_fits_defaults_and_scratch_to_the_centre(tmp_path: Path) -> None:
    # a centre that states partitions (debug: 20 minutes, 1G) and roots, but neither
    # defaults nor scratch: the user's file brings them, fitted
    text = EXAMPLE.read_text()
    text = text.replace('    max_time: "00:30:00"\n', '    max_time: "00:20:00"\n', 1)
    text = text.replace("    max_mem_per_node: 16G\n", "    max_mem_per_node: 1G\n", 1)
    start = text.index("defaults:")
    text = text[:start] + text[text.index("env_setup:") :]
    text = text.replace("  scratch: /scratch/$USER\n", "")
    text = text.replace('    - "~"                  # quoted: a bare ~ is YAML for null\n', "")
    text = text.replace("    - /scratch/$USER\n", "    - /work/$USER\n")
    centre = write(tmp_path, "centre.yaml", text)
    mine = tmp_path / "site.yaml"
    init_beneath(centre, mine)
    config = loaded(centre, mine).config
    assert (config.defaults.time_limit_s, config.defaults.mem_mb) == (1200, 1024)
    assert config.paths.allowed_roots == [Path("/work/alice")]
    assert config.paths.scratch == Path("/work/alice")  # /scratch/alice is outside


def test_site_init_says_when_the_centre_leaves_no_file_it_would_admit(tmp_path: Path) -> None:
    # a centre whose file does not load (a time limit that is no duration): init writes
    # nothing and says why, naming the centre's value
    text = EXAMPLE.read_text().replace('max_time: "00:30:00"', "max_time: soon", 1)
    centre = write(tmp_path, "centre.yaml", text)
    mine = tmp_path / "site.yaml"
    with pytest.raises(ConfigError) as caught:
        init_beneath(centre, mine)
    message = str(caught.value)
    assert message.startswith("site init: the file it would write is refused beneath")
    assert f"write {mine} by hand" in message and "partitions.debug.max_time" in message
    assert not mine.exists()


# ------------------------------------------- the centre's ~ and $USER: the real user's


def _real() -> tuple[str, Path]:
    import pwd

    entry = pwd.getpwuid(os.getuid())
    return entry.pw_name, Path(entry.pw_dir)


def test_the_centres_home_and_user_are_the_real_users_not_the_environments(
    tmp_path: Path,
) -> None:
    """The centre's roots `~` and `/scratch/$USER` (the lab example) expand from the
    passwd entry of the uid running jobsmith: a caller who sets HOME=/ and USER=.. must
    not turn them into the whole file system."""
    name, home = _real()
    hostile = {"USER": "..", "HOME": "/", "LOGNAME": ".."}
    alone = loaded(EXAMPLE, environ=hostile).config  # the centre's file alone
    assert alone.paths.allowed_roots == [home, Path("/scratch") / name]
    assert alone.paths.scratch == Path("/scratch") / name
    # with a file of the user's over it: the ceiling is the real user's, and so are the
    # user's own `~` and $USER (one meaning for them in every layer)
    mine = write(tmp_path, "user.yaml", "paths:\n  allowed_roots: ['~', /scratch/$USER]\n")
    layered = loaded(EXAMPLE, mine, environ=hostile).config
    assert layered.paths.allowed_roots == [home, Path("/scratch") / name]
    wide = write(tmp_path, "wide.yaml", "paths:\n  allowed_roots: [/]\n")
    assert "/ is not within the centre's allowed_roots" in refused(EXAMPLE, wide, environ=hostile)
    # without a centre's file, the user's own file is the user's own choice (as before)
    own = load_site(EXAMPLE, environ=hostile, system_file=NOWHERE, user_file=mine)
    assert own.config.paths.allowed_roots == [Path("/"), Path("/")]
