"""The generated nextflow.config: values from EngineSite, hostile names quoted, and the text
read back by a real Groovy ConfigSlurper (Nextflow's unit suffixes stood in, per
slurm-lab-notes.md), which also reads four real nf-core site configs to prove the reader."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from jobsmith.adapters.nextflow.config import render_config
from jobsmith.adapters.nextflow.files import AttemptFiles
from jobsmith.adapters.nextflow.groovy import string_literal
from jobsmith.adapters.workflow import EngineSite, PartitionLimits

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nextflow"
UNDER_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
GiB = 1024

SITE = EngineSite(
    partition="short",
    head_partition="head",
    account="lab",
    qos="normal",
    partitions=(
        PartitionLimits(name="short", max_cpus=64, max_mem_mb=256 * GiB, max_time_s=4 * 3600),
        PartitionLimits(name="long", max_cpus=32, max_mem_mb=128 * GiB, max_time_s=7 * 86400),
        PartitionLimits(name="bigmem", max_cpus=96, max_mem_mb=1536 * GiB, max_time_s=2 * 86400),
    ),
    max_concurrent_tasks=50,
    submissions_per_hour=600,
    default_cpus=2,
    default_mem_mb=3 * GiB,
    default_time_s=90 * 60,
    max_retries=3,
)
# names that would run code if written into the config raw; all single words, as Slurm's are
HOSTILE_PARTITION = "sh'ort\\"
HOSTILE_OTHER = "${System.exit(3)}"
HOSTILE_ACCOUNT = "x';System.exit(4);'"
HOSTILE_QOS = '"""+System.exit(5)+"""'
HOSTILE_SITE = SITE.model_copy(
    update={
        "partition": HOSTILE_PARTITION,
        "account": HOSTILE_ACCOUNT,
        "qos": HOSTILE_QOS,
        "partitions": (
            PartitionLimits(name=HOSTILE_PARTITION, max_mem_mb=64 * GiB),
            PartitionLimits(name=HOSTILE_OTHER),
        ),
    }
)
#: strings only string_literal sees (Slurm names may not hold spaces or line breaks)
HOSTILE_STRINGS = (
    "a'b",
    "\\",
    "\\'",
    "${System.exit(6)}",
    '$x and "${y}"',
    "\\u0027; System.exit(7); '",
    "\\\\u0027",
    "line\nbreak\r\ttab",
    "'''",
    '"""',
    "\x00\x01\x1b[31m\x7f",
    "naïve – 日本語 🧬",
    "\u2028",
)

# --- pure ------------------------------------------------------------------------------------


def test_string_literal_escapes_what_would_end_the_literal() -> None:
    assert string_literal("short") == "'short'"
    assert string_literal("a'b") == "'a\\'b'"
    assert string_literal("a\\b") == "'a\\\\b'"
    assert string_literal("${x}") == "'${x}'"  # single quotes: Groovy never interpolates
    assert string_literal("a\nb") == "'a\\nb'"
    assert string_literal("\x01") == "'\\u0001'"
    assert all("\n" not in string_literal(s) for s in HOSTILE_STRINGS)


def test_the_sites_values_appear_in_the_config() -> None:
    text = render_config(SITE, AttemptFiles(2))
    assert "    executor = 'slurm'\n" in text
    assert "    clusterOptions = '--account=lab --qos=normal'\n" in text
    assert "    queueSize = 50\n" in text
    assert "    submitRateLimit = '600/1h'\n" in text
    assert "    resourceLimits = [cpus: 96, memory: 1536.GB, time: 7.d]\n" in text
    assert "    cpus = 2\n" in text
    assert "    memory = { [3.GB * (2 ** (task.attempt - 1)), 1536.GB].min() }\n" in text
    assert "    time = { [90.m * (2 ** (task.attempt - 1)), 7.d].min() }\n" in text
    assert "    errorStrategy = { task.exitStatus in [137, 140] ? 'retry' : 'terminate' }\n" in text
    assert "    maxRetries = 3\n" in text
    assert "file = '.jobsmith/trace-2.tsv'" in text
    assert "file = '.jobsmith/report-2.html'" in text
    assert "file = '.jobsmith/timeline-2.html'" in text
    assert "    raw = true\n" in text


def test_one_partition_and_no_policy_extras_give_a_plain_config() -> None:
    site = EngineSite(partition="debug", head_partition="debug", max_concurrent_tasks=4)
    text = render_config(site, AttemptFiles(1))
    assert "    queue = 'debug'\n" in text
    assert "clusterOptions" not in text
    assert "submitRateLimit" not in text
    assert "resourceLimits" not in text
    assert "    memory = { 2.GB * (2 ** (task.attempt - 1)) }\n" in text


def test_a_partition_without_known_maxima_takes_the_tasks_no_earlier_one_fits() -> None:
    site = SITE.model_copy(
        update={
            "partitions": (
                PartitionLimits(name="short", max_time_s=3600),
                PartitionLimits(name="any"),
                PartitionLimits(name="never", max_cpus=4),
            )
        }
    )
    text = render_config(site, AttemptFiles(1))
    assert (
        "    queue = {\n"
        "        (!task.time || task.time.toSeconds() <= 3600) ? 'short' :\n"
        "        'any'\n"
        "    }\n"
    ) in text
    unknown = site.model_copy(update={"partition": "default"})
    assert "    queue = 'default'\n" in render_config(unknown, AttemptFiles(1))


def test_hostile_site_values_are_quoted() -> None:
    text = render_config(HOSTILE_SITE, AttemptFiles(1))
    assert "'sh\\'ort\\\\'" in text
    assert "'${System.exit(3)}'" in text
    assert '\'--account=x\\\';System.exit(4);\\\' --qos="""+System.exit(5)+"""\'' in text


@pytest.mark.parametrize(
    "update",
    [
        {"partition": "short\nrm -rf ~"},
        {"account": "lab --qos=high"},
        {"qos": "normal\r"},
        {"partitions": (PartitionLimits(name="short"), PartitionLimits(name="two words"))},
        {"partition": ""},
    ],
)
def test_a_name_that_is_not_one_slurm_word_is_refused(update: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="single word"):
        render_config(SITE.model_copy(update=update), AttemptFiles(1))


# --- read back by Groovy's ConfigSlurper ------------------------------------------------------

READER = r"""
import groovy.json.JsonOutput

// Nextflow's unit suffixes, stood in as text: `2.GB` reads as '2.GB'
['B', 'KB', 'MB', 'GB', 'TB', 'ms', 's', 'm', 'h', 'd'].each { unit ->
    Number.metaClass."get${unit}" = { -> "${delegate}.${unit}".toString() }
}

// tasks to ask a `queue` closure about: cpus, memory in MiB, time in seconds
def probes = [
    [cpus: 1, mem: 1024, time: 3600],
    [cpus: 8, mem: 300000, time: 3600],
    [cpus: 8, mem: 4096, time: 86400],
    [cpus: 500, mem: 1024, time: 60],
]

def plain
plain = { v ->
    if (v instanceof Closure) return '<closure>'
    if (v instanceof Map) return v.collectEntries { k, x -> [(k.toString()): plain(x)] }
    if (v instanceof Collection) return v.collect { plain(it) }
    if (v == null || v instanceof Number || v instanceof Boolean) return v
    return v.toString()
}

def queueFor = { Closure queue, Map probe ->
    def task = new Expando(
        cpus: probe.cpus,
        memory: new Expando(toMega: { -> probe.mem }),
        time: new Expando(toSeconds: { -> probe.time }),
        attempt: 1,
    )
    def c = queue.clone()
    c.resolveStrategy = Closure.DELEGATE_FIRST
    c.delegate = [task: task]
    c.call()
}

def results = [:]
args.each { path ->
    try {
        def flat = new ConfigSlurper().parse(new File(path).toURI().toURL()).flatten()
        def entry = [ok: true, values: plain(flat)]
        if (flat['process.queue'] instanceof Closure) {
            // a site's own closure may need more of Nextflow than stood in here
            entry.queue_probes = probes.collect { p ->
                try { queueFor(flat['process.queue'], p) } catch (Exception e) { e.class.name }
            }
        }
        results[path] = entry
    } catch (Throwable e) {
        results[path] = [ok: false, error: "${e.class.name}: ${e.message}".toString()]
    }
}
println JsonOutput.toJson(results)
"""


def read_with_groovy(tmp: Path, configs: dict[str, Path]) -> dict[str, Any]:
    """Each config read by ConfigSlurper in one Groovy run (it takes a second to start):
    name -> {ok, values: flattened settings, queue_probes?} or {ok: False, error}."""
    groovy = shutil.which("groovy")
    if groovy is None:
        reason = "groovy is not installed (scripts/setup installs it)"
        if UNDER_CI:
            pytest.fail(f"{reason}: under CI this check must run")
        pytest.skip(reason)
    script = tmp / "read_config.groovy"
    script.write_text(READER)
    env = dict(os.environ)
    if "JAVA_HOME" not in env and Path(JAVA_HOME).is_dir():  # Debian's groovy needs it
        env["JAVA_HOME"] = JAVA_HOME
    paths = [str(path) for path in configs.values()]
    run = subprocess.run(
        [groovy, str(script), *paths], capture_output=True, text=True, env=env, timeout=180
    )
    assert run.returncode == 0, run.stderr
    by_path = json.loads(run.stdout.strip().splitlines()[-1])
    return {name: by_path[str(path)] for name, path in configs.items()}


@pytest.fixture(scope="module")
def groovy_read(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("nextflow-config")
    configs: dict[str, Path] = {}
    for name, site, attempt in (("site", SITE, 2), ("hostile", HOSTILE_SITE, 1)):
        configs[name] = tmp / f"{name}.config"
        configs[name].write_text(render_config(site, AttemptFiles(attempt)))
    configs["strings"] = tmp / "strings.config"
    configs["strings"].write_text(
        "".join(f"s{i} = {string_literal(s)}\n" for i, s in enumerate(HOSTILE_STRINGS)),
        encoding="utf-8",
    )
    for path in sorted(FIXTURES.glob("config-site-*.config")):
        configs[path.stem.removeprefix("config-site-")] = path
    return read_with_groovy(tmp, configs)


def test_groovy_reads_the_generated_config_as_written(groovy_read: dict[str, Any]) -> None:
    site = groovy_read["site"]
    assert site["ok"], site
    values = site["values"]
    assert values["process.executor"] == "slurm"
    assert values["process.clusterOptions"] == "--account=lab --qos=normal"
    assert values["process.cpus"] == 2
    assert values["process.maxRetries"] == 3
    assert values["process.memory"] == values["process.errorStrategy"] == "<closure>"
    assert values["process.resourceLimits.cpus"] == 96
    assert values["process.resourceLimits.memory"] == "1536.GB"
    assert values["process.resourceLimits.time"] == "7.d"
    assert values["executor.name"] == "slurm"
    assert values["executor.queueSize"] == 50
    assert values["executor.submitRateLimit"] == "600/1h"
    assert values["trace.enabled"] is True and values["trace.raw"] is True
    assert values["trace.file"] == ".jobsmith/trace-2.tsv"
    assert "native_id" in values["trace.fields"].split(",")
    assert values["report.file"] == ".jobsmith/report-2.html"
    assert values["timeline.overwrite"] is True
    # the partition selector, asked about four tasks: fits the site's own partition; needs
    # 300000 MiB (only bigmem); needs a day (long); fits none (the site's partition anyway)
    assert site["queue_probes"] == ["short", "bigmem", "long", "short"]


def test_groovy_reads_hostile_names_back_unchanged(groovy_read: dict[str, Any]) -> None:
    hostile = groovy_read["hostile"]
    assert hostile["ok"], hostile
    assert hostile["values"]["process.clusterOptions"] == (
        f"--account={HOSTILE_ACCOUNT} --qos={HOSTILE_QOS}"
    )
    # the first partition holds 64 GiB: the probe asking 300000 MiB goes to the other one
    assert hostile["queue_probes"] == [HOSTILE_PARTITION, HOSTILE_OTHER] + [HOSTILE_PARTITION] * 2
    strings = groovy_read["strings"]
    assert strings["ok"], strings
    assert strings["values"] == {f"s{i}": s for i, s in enumerate(HOSTILE_STRINGS)}


def test_the_reader_reads_real_nf_core_site_configs(groovy_read: dict[str, Any]) -> None:
    cambridge = groovy_read["cambridge"]["values"]
    assert cambridge["process.executor"] == "slurm"
    assert cambridge["process.queue"] == "icelake"
    assert cambridge["executor.queueSize"] == 200
    assert cambridge["process.resourceLimits.memory"] == "256.GB"
    biowulf = groovy_read["biowulf"]["values"]
    assert biowulf["executor.submitRateLimit"] == "6/1min"
    assert biowulf["process.resourceLimits.time"] == "240.h"
    fred_hutch = groovy_read["fred_hutch"]["values"]
    assert fred_hutch["executor.queueSize"] == 16
    assert fred_hutch["process.process_high.cpus"] == 32  # a withLabel block
    assert fred_hutch["process.queue"] == "<closure>"
    assert groovy_read["fred_hutch"]["queue_probes"] == ["groovy.lang.GroovyRuntimeException"] * 4
    unity = groovy_read["unity"]["values"]
    assert unity["executor.queueSize"] == 1000
    assert unity["process.resourceLimits.memory"] == "2.TB"
    # the fifth calls Nextflow's own env(), which plain Groovy does not have
    humantechnopole = groovy_read["humantechnopole"]
    assert not humantechnopole["ok"] and "env()" in humantechnopole["error"]
