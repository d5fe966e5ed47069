"""The site configuration: units, loading and layering, error messages, live-cluster checks.

Cluster facts come from real output captured on the lab cluster (Slurm 22.05.8) in
tests/fixtures/lab-22.05/: `scontrol show partition -o`, `scontrol show node -o`, and
(site-sacctmgr-*.txt) `sacctmgr -P -n show assoc [user=alice]
format=Cluster,Account,User,Partition,QOS`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.slurm.commands.options import render_directives
from jobsmith.adapters.slurm.parsing.facts import (
    build_facts,
    parse_assoc,
    parse_gpu_gres,
    parse_nodes,
    parse_partitions,
)
from jobsmith.adapters.slurm.parsing.parse import parse_key_values
from jobsmith.agent.runtime.submission.judging.policy import Cost, thresholds_exceeded
from jobsmith.errors import ConfigError, SchedulerError
from jobsmith.site_config import (
    ClusterFacts,
    Severity,
    SiteConfig,
    check_site,
    dump_site,
    has_errors,
    init_site,
    load_site,
    load_site_files,
)
from jobsmith.site_config.model import ApprovalThresholds, Defaults
from jobsmith.units import (
    format_duration,
    format_memory,
    parse_duration,
    parse_memory,
)

ENV = {"USER": "alice", "HOME": "/home/alice"}
EXAMPLE = Path(str(files("jobsmith.site_config").joinpath("examples/lab.yaml")))
LAB = Path(__file__).parent / "fixtures" / "lab-22.05"
NOWHERE = Path("/nonexistent/jobsmith/site.yaml")


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def load(system: Path, user: Path = NOWHERE) -> SiteConfig:
    return load_site(None, environ=ENV, system_file=system, user_file=user).config


def load_error(system: Path, user: Path = NOWHERE, environ: dict[str, str] = ENV) -> str:
    with pytest.raises(ConfigError) as caught:
        load_site(None, environ=environ, system_file=system, user_file=user)
    message = str(caught.value)
    assert "\n" not in message, "the CLI shows one line"
    return message


def line_of(path: Path, text: str) -> int:
    """1-based line of the first line of path that contains text."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def lab_text(name: str) -> str:
    return (LAB / name).read_text()


@pytest.fixture(scope="module")
def lab_facts() -> ClusterFacts:
    return build_facts(
        lab_text("scontrol-show-partition.txt"),
        lab_text("scontrol-show-node.txt"),
        lab_text("site-sacctmgr-assoc-alice.txt"),
        user="alice",
    )


# ------------------------------------------------------------------------------ units


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        (30, 1800),  # an int is minutes, as sbatch -t reads it
        ("30", 1800),
        ("30:00", 1800),  # MM:SS
        ("90:00", 5400),  # the leading field may exceed its unit
        ("1:30:00", 5400),  # HH:MM:SS
        ("00:00:45", 45),
        ("1-00:00:00", 86400),  # D-HH:MM:SS
        ("2-12", 2 * 86400 + 12 * 3600),  # D-HH
        ("1-02:30", 86400 + 2 * 3600 + 30 * 60),  # D-HH:MM
    ],
)
def test_durations_follow_slurm_syntax(raw: object, seconds: int) -> None:
    assert parse_duration(raw) == seconds


@pytest.mark.parametrize("raw", ["4 hours", "1:70:00", "1-25:00:00", "", "-5", 0, True, 1.5, None])
def test_bad_durations_are_refused(raw: object) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(raw)


@pytest.mark.parametrize("seconds", [45, 1800, 5400, 86400, 2 * 86400 + 3661])
def test_formatted_durations_read_back_exactly(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    ("raw", "mib"),
    [
        (500, 500),
        ("500", 500),
        ("500M", 500),
        ("4G", 4096),
        ("4g", 4096),
        ("1T", 1024**2),
        ("2048K", 2),
    ],
)
def test_memory_sizes_follow_slurm_syntax(raw: object, mib: int) -> None:
    assert parse_memory(raw) == mib
    assert parse_memory(format_memory(mib)) == mib


@pytest.mark.parametrize("raw", ["4GB", "1.5G", "lots", 0, "0M", True, None])
def test_bad_memory_sizes_are_refused(raw: object) -> None:
    with pytest.raises(ValueError, match="invalid memory size"):
        parse_memory(raw)


def test_memory_below_one_mib_granularity_is_refused() -> None:
    with pytest.raises(ValueError, match="not a whole number of MiB"):
        parse_memory("1K")


def test_a_duration_built_in_code_is_seconds_but_an_int_in_a_file_is_minutes(
    tmp_path: Path,
) -> None:
    assert Defaults(time_limit_s=600).time_limit_s == 600
    user = write(tmp_path, "user.yaml", "defaults:\n  time_limit_s: 10\n")
    assert load(EXAMPLE, user).defaults.time_limit_s == 600


# -------------------------------------------------------------------------- the example


def test_the_example_describes_the_lab_cluster() -> None:
    loaded = load_site(None, environ=ENV, system_file=EXAMPLE, user_file=NOWHERE)
    config = loaded.config
    assert loaded.files == (EXAMPLE,)
    assert loaded.base_from == "system"
    assert config.cluster == "jobsmithlab"
    assert list(config.partitions) == ["debug", "long", "gpu", "preempt", "high"]
    assert config.default_partition() == ("debug", config.partitions["debug"])
    assert config.partitions["debug"].max_time == 30 * 60
    assert config.partitions["long"].max_time == 2 * 86400
    gpu = config.partitions["gpu"]
    assert (gpu.max_time, gpu.max_gpus_per_node, gpu.gpu_type) == (4 * 3600, 2, None)
    assert (config.accounts.allowed, config.accounts.default) == (["lab", "proj2"], "lab")
    assert (config.qos.allowed, config.qos.default) == (["normal"], "normal")
    assert config.scheduler.kind == "local"
    assert config.policy.max_concurrent_jobs == 2000
    approval = config.policy.approval
    assert (approval.core_hours, approval.gpu_hours, approval.nodes) == (100, 8, 4)


def test_example_paths_expand_home_and_user_from_the_given_environment() -> None:
    # a file of the user's own (no centre's file read: there the real user's passwd entry
    # is used, tests/test_site_ceiling.py)
    paths = load_site(EXAMPLE, environ=ENV, system_file=NOWHERE, user_file=NOWHERE).config.paths
    assert paths.scratch == Path("/scratch/alice")
    assert paths.allowed_roots == [Path("/home/alice"), Path("/scratch/alice")]
    other = load_site(
        EXAMPLE, environ={"USER": "bob", "HOME": "/u/b/bob"}, system_file=NOWHERE, user_file=NOWHERE
    ).config.paths
    assert other.allowed_roots == [Path("/u/b/bob"), Path("/scratch/bob")]


def test_user_falls_back_to_logname() -> None:
    env = {"LOGNAME": "carol", "HOME": "/home/carol"}
    config = load_site(EXAMPLE, environ=env, system_file=NOWHERE, user_file=NOWHERE).config
    assert config.paths.scratch == Path("/scratch/carol")


def test_example_defaults_are_sbatch_options() -> None:
    defaults = load(EXAMPLE).defaults
    opts = JobOptions(job_name="t", **defaults.model_dump())
    assert "#SBATCH --mem=1024M" in render_directives(opts)
    assert "#SBATCH --time=00:10:00" in render_directives(opts)
    assert "#SBATCH --cpus-per-task=1" in render_directives(opts)


def _exceeded(
    approval: ApprovalThresholds, core_hours: float, gpu_hours: float, nodes: int
) -> list[str]:
    """The thresholds a submission of this size is above (the policy reads them)."""
    cost = Cost(tasks=1, nodes=nodes, core_hours=core_hours, gpu_hours=gpu_hours, node_hours=0)
    return thresholds_exceeded(approval, cost)


def test_approval_is_needed_only_strictly_above_a_threshold() -> None:
    approval = ApprovalThresholds(core_hours=100, gpu_hours=8, nodes=4)
    assert _exceeded(approval, core_hours=100, gpu_hours=8, nodes=4) == []
    reasons = _exceeded(approval, core_hours=100.5, gpu_hours=0, nodes=5)
    assert len(reasons) == 2
    assert "core-hours" in reasons[0] and "nodes" in reasons[1]
    never = ApprovalThresholds(core_hours=None, gpu_hours=None, nodes=None)
    assert _exceeded(never, core_hours=1e9, gpu_hours=1e9, nodes=10**6) == []


def test_unquoted_slurm_times_are_not_read_as_base_60_numbers(tmp_path: Path) -> None:
    # Plain yaml.safe_load turns `30:00` into 1800, which as minutes would be 30 hours.
    user = write(tmp_path, "user.yaml", "partitions:\n  gpu:\n    max_time: 30:00\n")
    assert load(EXAMPLE, user).partitions["gpu"].max_time == 30 * 60


# ----------------------------------------------------------------------------- layering


def test_user_file_overrides_single_fields_and_keeps_the_rest(tmp_path: Path) -> None:
    user = write(
        tmp_path,
        "user.yaml",
        "accounts:\n  default: proj2\npartitions:\n  gpu:\n    max_time: '2:00:00'\n",
    )
    loaded = load_site(None, environ=ENV, system_file=EXAMPLE, user_file=user)
    config = loaded.config
    assert config.accounts.default == "proj2"
    assert config.accounts.allowed == ["lab", "proj2"]  # from the admin's file
    assert config.partitions["gpu"].max_time == 2 * 3600
    assert config.partitions["gpu"].max_gpus_per_node == 2  # the rest of gpu is kept
    assert list(config.partitions) == ["debug", "long", "gpu", "preempt", "high"]
    assert config.cluster == "jobsmithlab"
    assert loaded.files == (EXAMPLE, user)
    assert loaded.origin_of(("accounts", "default")) == f"{user}:2"
    allowed_line = line_of(EXAMPLE, "allowed: [lab, proj2]")
    assert loaded.origin_of(("accounts", "allowed")) == f"{EXAMPLE}:{allowed_line}"
    assert loaded.origin_of(("cluster",)) == f"{EXAMPLE}:{line_of(EXAMPLE, 'cluster:')}"


def test_lists_in_a_later_file_replace_the_earlier_list(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", "paths:\n  allowed_roots: [/scratch/$USER]\n")
    paths = load(EXAMPLE, user).paths
    assert paths.allowed_roots == [Path("/scratch/alice")]
    assert paths.scratch == Path("/scratch/alice")  # the mapping around it still merged


def test_jobsmith_site_overlays_the_admin_file_and_user_overrides_still_apply(
    tmp_path: Path,
) -> None:
    # it replaced the admin's file until issue 24: now the admin's file is a ceiling
    # for it (tests/test_site_ceiling.py), so it is read first and must be valid
    admin = write(tmp_path, "admin.yaml", EXAMPLE.read_text())
    named = write(tmp_path, "named.yaml", "partitions:\n  gpu:\n    max_time: 60\n")
    user = write(tmp_path, "user.yaml", "accounts:\n  default: proj2\n")
    env = {**ENV, "JOBSMITH_SITE": str(named)}
    loaded = load_site(None, environ=env, system_file=admin, user_file=user)
    assert loaded.base_from == "JOBSMITH_SITE"
    assert loaded.files == (admin, named, user)
    assert loaded.config.accounts.default == "proj2"
    assert loaded.config.partitions["gpu"].max_time == 3600
    assert loaded.config.partitions["gpu"].max_gpus_per_node == 2  # the admin's


def test_site_option_beats_jobsmith_site(tmp_path: Path) -> None:
    other = write(tmp_path, "other.yaml", EXAMPLE.read_text().replace("jobsmithlab", "other"))
    env = {**ENV, "JOBSMITH_SITE": str(EXAMPLE)}
    loaded = load_site(other, environ=env, system_file=NOWHERE, user_file=NOWHERE)
    assert loaded.base_from == "--site"
    assert loaded.config.cluster == "other"


def test_empty_jobsmith_site_counts_as_unset() -> None:
    env = {**ENV, "JOBSMITH_SITE": ""}
    loaded = load_site(None, environ=env, system_file=EXAMPLE, user_file=NOWHERE)
    assert loaded.base_from == "system"


@pytest.mark.parametrize(
    ("explicit", "environ", "named"),
    [
        (NOWHERE, ENV, "--site"),
        (None, {**ENV, "JOBSMITH_SITE": str(NOWHERE)}, "$JOBSMITH_SITE"),
    ],
)
def test_a_named_base_file_that_is_missing_is_an_error_not_a_fallback(
    explicit: Path | None, environ: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_site(explicit, environ=environ, system_file=EXAMPLE, user_file=NOWHERE)
    assert str(NOWHERE) in str(caught.value)
    assert named in str(caught.value)


def test_only_a_user_file_is_enough(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", EXAMPLE.read_text())
    loaded = load_site(None, environ=ENV, system_file=NOWHERE, user_file=user)
    assert loaded.files == (user,)
    assert loaded.base_from is None


def test_site_naming_the_user_file_reads_it_once(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", EXAMPLE.read_text())
    loaded = load_site(user, environ=ENV, system_file=NOWHERE, user_file=user)
    assert loaded.files == (user,)


def test_no_file_at_all_names_the_paths_tried_and_suggests_init(tmp_path: Path) -> None:
    admin, user = tmp_path / "admin.yaml", tmp_path / "user.yaml"
    message = load_error(admin, user)
    assert str(admin) in message and str(user) in message
    assert "jobsmith site init" in message


# ------------------------------------------------------------------------------ errors


def test_bad_type_names_file_line_field_and_value(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", "partitions:\n  gpu:\n    max_nodes: two\n")
    message = load_error(EXAMPLE, user)
    assert message.startswith(f"{user}:3: partitions.gpu.max_nodes: ")
    assert "valid integer" in message and "'two'" in message


def test_unknown_key_lists_the_valid_keys_and_the_closest(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", "partitions:\n  gpu:\n    max_tme: 10\n")
    message = load_error(EXAMPLE, user)
    assert message.startswith(f"{user}:3: partitions.gpu.max_tme: unknown key 'max_tme'")
    assert "did you mean 'max_time'?" in message
    assert "valid keys here: max_time, max_nodes, max_cpus_per_node" in message
    assert "gpu_type, default" in message


def test_unknown_top_level_key_lists_the_sections(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", "acounts:\n  default: lab\n")
    message = load_error(EXAMPLE, user)
    assert f"{user}:1: acounts: unknown key 'acounts' (did you mean 'accounts'?)" in message
    assert "cluster, scheduler, partitions, accounts, qos, defaults" in message


def test_bad_duration_says_what_slurm_accepts(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", "partitions:\n  gpu:\n    max_time: 4 hours\n")
    message = load_error(EXAMPLE, user)
    assert message.startswith(f"{user}:3: partitions.gpu.max_time: invalid duration '4 hours'")
    assert "D-HH:MM:SS" in message


def test_bad_memory_says_what_slurm_accepts(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", "defaults:\n  mem_mb: 4GB\n")
    message = load_error(EXAMPLE, user)
    assert message.startswith(f"{user}:2: defaults.mem_mb: invalid memory size '4GB'")


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", "accounts:\n  default: lab\n  allowed: [lab, proj2\n")
    message = load_error(EXAMPLE, user)
    assert message.startswith(f"{user}:4:")
    assert "YAML syntax error" in message


def test_error_names_the_user_file_when_it_set_the_bad_value(tmp_path: Path) -> None:
    admin = write(tmp_path, "admin.yaml", EXAMPLE.read_text())
    user = write(
        tmp_path, "user.yaml", "cluster: jobsmithlab\npolicy:\n  max_concurrent_jobs: -1\n"
    )
    message = load_error(admin, user)
    assert message.startswith(f"{user}:3: policy.max_concurrent_jobs: ")
    assert str(admin) not in message


def test_error_names_the_admin_file_when_it_set_the_bad_value(tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace("max_nodes: 1", "max_nodes: one")
    admin = write(tmp_path, "admin.yaml", text)
    user = write(tmp_path, "user.yaml", "accounts:\n  default: proj2\n")
    message = load_error(admin, user)
    line = line_of(admin, "max_nodes: one")
    assert message.startswith(f"{admin}:{line}: partitions.long.max_nodes: ")
    assert str(user) not in message


def test_cross_field_error_names_the_file_of_the_offending_field(tmp_path: Path) -> None:
    # allowed comes from the admin's file, the default that breaks it from the user's.
    user = write(tmp_path, "user.yaml", "accounts:\n  default: physics\n")
    message = load_error(EXAMPLE, user)
    assert message.startswith(f"{user}:2: accounts.default: ")
    assert "'physics' is not one of allowed: lab, proj2" in message


def test_two_default_partitions_name_both_places(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", "partitions:\n  gpu:\n    default: true\n")
    message = load_error(EXAMPLE, user)
    debug_default = line_of(EXAMPLE, "default: true")
    assert message.startswith(f"{EXAMPLE}:{debug_default}, {user}:3: ")
    assert "partitions.debug.default and partitions.gpu.default" in message


def test_defaults_must_fit_the_default_partition(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", "defaults:\n  time_limit_s: '2:00:00'\n")
    message = load_error(EXAMPLE, user)
    assert message.startswith(f"{user}:2: defaults.time_limit_s: 02:00:00 is above 00:30:00")
    assert "'debug'" in message


def test_several_problems_are_one_message_in_reading_order(tmp_path: Path) -> None:
    user = write(
        tmp_path, "user.yaml", "partitions:\n  gpu:\n    max_nodes: two\n    max_time: xx\n"
    )
    message = load_error(EXAMPLE, user)
    assert message.startswith(f"{user}:3: partitions.gpu.max_nodes: ")
    assert message.endswith("(and 1 more: partitions.gpu.max_time)")


def test_scheduler_kind_ssh_needs_the_login_host(tmp_path: Path) -> None:
    user = write(tmp_path, "user.yaml", "cluster: x\nscheduler:\n  kind: ssh\n")
    message = load_error(EXAMPLE, user)
    assert message.startswith(f"{user}:2: scheduler.host: kind 'ssh' needs host")


def test_missing_required_fields_say_no_file_sets_them(tmp_path: Path) -> None:
    admin = write(tmp_path, "admin.yaml", "# nothing yet\n")
    message = load_error(admin)
    assert message.startswith(f"{admin}: cluster: required, but no site file sets it")
    assert "partitions, paths" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("paths:\n  scratch: /scratch/$USR\n", "paths.scratch: $USR in '/scratch/$USR'"),
        ("paths:\n  scratch: scratch/x\n", "is not an absolute directory"),
        ("paths:\n  scratch: ~bob/x\n", "'~user' is not supported"),
        ("paths:\n  allowed_roots: [~]\n", "paths.allowed_roots[0]: a directory is required"),
        ("paths:\n  scratch: /data/x\n", "scratch /data/x is not under any of allowed_roots"),
        ("accounts:\n  default: lab\n  default: proj2\n", "duplicate key accounts.default"),
        ("partitions:\n  true:\n    max_time: 10\n", "key 'true' is read as a bool"),
        ("partitions:\n  'my part': {}\n", "'my part' is not a Slurm name"),
        ("scheduler:\n  host: login1\n", "scheduler.host: host applies only to a remote kind"),
        (
            "scheduler:\n  kind: slurmrestd\n",
            "scheduler.kind: input should be 'local', 'ssh' or 'openssh'",
        ),
        ("partitions:\n  gpu:\n    gpu_type: a100\n    max_gpus_per_node: 0\n", "gpu_type is set"),
        ('env_setup: ["module load x\\nrm -rf ~"]\n', "holds a line break"),
        ("- just\n- a list\n", "must be a mapping"),
        ("partitions: [debug, gpu]\n", "partitions: input should be a valid dictionary"),
    ],
)
def test_each_mistake_is_one_clear_config_error(tmp_path: Path, text: str, expected: str) -> None:
    user = write(tmp_path, "user.yaml", text)
    message = load_error(EXAMPLE, user)
    assert message.startswith(str(user))
    assert expected in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\xff\xfe\x00", "cannot read site file"),
        (b"partitions:\n\tgpu: {}\n", ":2:1: YAML syntax error"),
        (b"cluster: a\n---\ncluster: b\n", "expected a single document"),
        (b"cluster: !!python/object:os.system ls\n", "unsupported YAML"),
        (b"env_setup: &x [*x]\n", ":1:12: alias *x is used inside its own anchor"),
        (b"null\n", "must be a mapping of keys"),
    ],
)
def test_malformed_files_never_escape_as_tracebacks(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    user = tmp_path / "user.yaml"
    user.write_bytes(content)
    assert expected in load_error(EXAMPLE, user)


def test_expanding_user_needs_it_in_the_environment() -> None:
    with pytest.raises(ConfigError) as caught:
        environ = {"HOME": "/home/alice"}
        load_site(EXAMPLE, environ=environ, system_file=NOWHERE, user_file=NOWHERE)
    assert "$USER in '/scratch/$USER' is not set in the environment" in str(caught.value)


def test_unreadable_site_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    message = load_error(tmp_path / "dir.yaml")
    assert message.startswith(f"{tmp_path / 'dir.yaml'}: cannot read site file")


# ------------------------------------------------------------------- live-cluster facts


def test_partitions_parse_from_real_scontrol_output() -> None:
    parts = parse_partitions(lab_text("scontrol-show-partition.txt"))
    assert list(parts) == ["debug", "long", "gpu", "preempt", "high"]
    assert [p.name for p in parts.values() if p.default] == ["debug"]
    debug, long = parts["debug"], parts["long"]
    assert (debug.max_time_s, debug.max_nodes, debug.total_nodes) == (1800, None, 1)
    assert (long.max_time_s, long.max_nodes) == (2 * 86400, 1)
    assert debug.max_mem_per_node_mb is None and debug.max_cpus_per_node is None  # UNLIMITED
    assert debug.allow_accounts is None and debug.allow_qos is None  # ALL
    assert {p.state for p in parts.values()} == {"UP"}


def test_key_values_keep_equals_signs_inside_values() -> None:
    line = next(
        line
        for line in lab_text("scontrol-show-partition.txt").splitlines()
        if line.startswith("PartitionName=gpu ")
    )
    kv = parse_key_values(line)
    assert kv["JobDefaults"] == "DefCpuPerGPU=1"
    assert kv["TRESBillingWeights"] == "CPU=1.0,Mem=0.25G,GRES/gpu=4.0"
    assert kv["TRES"].startswith("cpu=2,mem=")


def test_nodes_parse_from_real_scontrol_output() -> None:
    [node] = parse_nodes(lab_text("scontrol-show-node.txt"))
    assert (node.name, node.cpus, node.mem_mb) == ("vm", 2, 21694)
    assert (node.gpus, node.gpu_types) == (2, ())
    assert node.partitions == ("debug", "long", "gpu", "preempt", "high")
    # OS= holds spaces; the keys after it must still be found.
    kv = parse_key_values(lab_text("scontrol-show-node.txt"))
    assert kv["OS"].startswith("Linux ") and " #1 SMP" in kv["OS"]
    assert kv["Sockets"] == "2"


@pytest.mark.parametrize(
    ("gres", "count", "types"),
    [
        # value forms as the scontrol man page documents them (the lab has only gpu:2)
        ("gpu:2", 2, ()),
        ("(null)", 0, ()),
        ("gpu:a100:4(S:0-1)", 4, ("a100",)),
        ("gpu:a100:2(S:0,1),gpu:v100:1(S:1),mps:200", 3, ("a100", "v100")),
    ],
)
def test_gpu_gres_values(gres: str, count: int, types: tuple[str, ...]) -> None:
    assert parse_gpu_gres(gres) == (count, types)


def test_associations_parse_from_real_sacctmgr_output() -> None:
    mine = parse_assoc(lab_text("site-sacctmgr-assoc-alice.txt"), "alice")
    assert [(a.cluster, a.account, a.partition) for a in mine] == [
        ("jobsmithlab", "proj2", None),
        ("jobsmithlab", "lab", None),
    ]
    assert mine[0].qos == ("high", "normal")
    # Unfiltered output also holds other users' and account-level rows: skipped.
    everyone = lab_text("site-sacctmgr-assoc-all.txt")
    assert {a.account for a in parse_assoc(everyone, "alice")} == {"lab", "proj2"}
    assert [a.account for a in parse_assoc(everyone, "root")] == ["root"]


def test_facts_combine_partitions_nodes_and_associations(lab_facts: ClusterFacts) -> None:
    gpu = lab_facts.partitions["gpu"]
    assert (gpu.node_cpus, gpu.node_mem_mb, gpu.gpus_per_node) == (2, 21694, 2)
    assert (gpu.cpu_limit(), gpu.mem_limit_mb(), gpu.node_limit()) == (2, 21694, 1)
    assert lab_facts.clusters() == ["jobsmithlab"]
    assert lab_facts.accounts("jobsmithlab") == ["proj2", "lab"]
    assert lab_facts.qos() == ["high", "normal"]
    assert lab_facts.default_partition() == "debug"


def test_unreadable_command_output_is_a_scheduler_error() -> None:
    real = lab_text("site-sacctmgr-assoc-alice.txt").splitlines()[0]
    with pytest.raises(SchedulerError, match="sacctmgr show assoc"):
        parse_assoc(real.rsplit("|", 1)[0], "alice")  # one column short
    line = lab_text("scontrol-show-partition.txt").splitlines()[0]
    with pytest.raises(SchedulerError, match="scontrol show partition"):
        parse_partitions(line.replace("MaxTime=00:30:00", "MaxTime=soon"))
    node = lab_text("scontrol-show-node.txt").replace("RealMemory=21694 ", "")
    with pytest.raises(SchedulerError, match="RealMemory"):
        parse_nodes(node)


# ------------------------------------------------------------------------------- check


def test_the_example_config_matches_the_lab(lab_facts: ClusterFacts) -> None:
    found = check_site(load(EXAMPLE), lab_facts)
    assert not has_errors(found)
    assert found == []  # every partition of the lab, preempt and high too (issue 27)


def test_a_wrong_config_gets_the_right_mismatches(tmp_path: Path, lab_facts: ClusterFacts) -> None:
    user = write(
        tmp_path,
        "user.yaml",
        """
cluster: otherlab
partitions:
  debug: {default: false, max_mem_per_node: 64G}
  long: {default: true, max_nodes: 2, max_cpus_per_node: 2}
  gpu: {max_time: "8:00:00", max_gpus_per_node: 4, gpu_type: a100}
  bigmem: {max_time: 60}
accounts: {allowed: [lab, physics], default: lab}
qos: {allowed: [normal, premium]}
""",
    )
    # EXAMPLE as --site, not the centre's file: the user's file may then loosen it
    config = load_site(EXAMPLE, environ=ENV, system_file=NOWHERE, user_file=user).config
    found = check_site(config, lab_facts)
    assert [(m.severity, m.field) for m in found] == [
        (Severity.ERROR, "cluster"),
        (Severity.ERROR, "partitions.debug.max_mem_per_node"),
        (Severity.ERROR, "partitions.long.max_nodes"),
        (Severity.ERROR, "partitions.gpu.max_time"),
        (Severity.ERROR, "partitions.gpu.max_gpus_per_node"),
        (Severity.ERROR, "partitions.gpu.gpu_type"),
        (Severity.ERROR, "partitions.bigmem"),
        (Severity.ERROR, "accounts.allowed[1]"),
        (Severity.ERROR, "qos.allowed[1]"),
        (Severity.WARNING, "partitions.long.default"),
    ]
    messages = {m.field: m.message for m in found}
    assert messages["partitions.gpu.max_time"] == (
        "08:00:00 is above the cluster's 04:00:00 (MaxTime)"
    )
    assert "64G is above the cluster's 21694M" in messages["partitions.debug.max_mem_per_node"]
    assert "'physics' is not available" in messages["accounts.allowed[1]"]
    assert "proj2, lab" in messages["accounts.allowed[1]"]
    assert "'long', Slurm's is 'debug'" in messages["partitions.long.default"]
    assert "otherlab" in messages["cluster"] and "jobsmithlab" in messages["cluster"]


def test_a_partition_that_is_down_is_a_warning(lab_facts: ClusterFacts) -> None:
    parts = dict(lab_facts.partitions)
    parts["gpu"] = parts["gpu"].model_copy(update={"state": "DOWN"})
    found = check_site(load(EXAMPLE), lab_facts.model_copy(update={"partitions": parts}))
    assert [(m.severity, m.field) for m in found if m.severity is not Severity.INFO] == [
        (Severity.WARNING, "partitions.gpu")
    ]


def test_accounts_are_checked_for_the_user_the_facts_are_about(lab_facts: ClusterFacts) -> None:
    root = lab_facts.model_copy(
        update={
            "user": "root",
            "associations": parse_assoc(lab_text("site-sacctmgr-assoc-all.txt"), "root"),
        }
    )
    found = check_site(load(EXAMPLE), root)
    errors = [m.field for m in found if m.severity is Severity.ERROR]
    assert errors == ["accounts.allowed[0]", "accounts.allowed[1]"]


# -------------------------------------------------------------------------------- init


def test_init_builds_a_config_that_checks_clean(lab_facts: ClusterFacts) -> None:
    config = init_site(lab_facts, "alice", home=Path("/home/alice"), scratch=Path("/scratch/alice"))
    assert config.cluster == "jobsmithlab"
    assert list(config.partitions) == ["debug", "long", "gpu", "preempt", "high"]
    assert config.default_partition() == ("debug", config.partitions["debug"])
    long = config.partitions["long"]
    assert (long.max_time, long.max_nodes, long.max_cpus_per_node) == (2 * 86400, 1, 2)
    assert (long.max_mem_per_node, long.max_gpus_per_node) == (21694, 2)
    assert config.accounts.allowed == ["proj2", "lab"]
    assert config.accounts.default is None  # two accounts: Slurm's default applies
    assert config.qos.allowed == ["high", "normal"]
    assert config.defaults.time_limit_s == 1800  # fits debug's 30 minutes
    assert config.paths.allowed_roots == [Path("/home/alice"), Path("/scratch/alice")]
    assert [m.severity for m in check_site(config, lab_facts)] == []


def test_init_round_trips_through_dump_and_the_loader(
    tmp_path: Path, lab_facts: ClusterFacts
) -> None:
    config = init_site(lab_facts, "alice")
    text = dump_site(config, header="written by jobsmith site init")
    assert text.startswith("# written by jobsmith site init\n")
    assert "max_time: 2-00:00:00" in text and "max_mem_per_node: 21694M" in text
    site = write(tmp_path, "site.yaml", text)
    # a different user's environment must not change an already expanded file
    reloaded = load_site_files([site], environ={"USER": "x", "HOME": "/x"}).config
    assert reloaded == config


def test_the_example_round_trips_through_dump(tmp_path: Path) -> None:
    config = load(EXAMPLE)
    site = write(tmp_path, "site.yaml", dump_site(config))
    assert load_site_files([site], environ=ENV).config == config


def test_init_needs_the_cluster_name_when_accounting_has_none(lab_facts: ClusterFacts) -> None:
    orphan = lab_facts.model_copy(update={"associations": ()})
    with pytest.raises(ConfigError, match="cannot tell the cluster's name"):
        init_site(orphan, "alice")
    assert init_site(orphan, "alice", cluster="jobsmithlab").accounts.allowed == []
