"""Workload caps: the most items of work one command may hold, checked before memory is
spent on them (issue 24, part 4).

Every count a person controls (frames, a video's chunks, array tasks, a list parameter's
items, a sample sheet's rows, a YAML document's values, a plan's steps) becomes a list
somewhere, and each was once checked only after the list was built: `render-frames
--frames 1-99999999` reached 8 GB before any check, and a 4 MiB YAML list of two million
values took 2.3 GB and 55 s to parse. Each count is now compared with its cap here first,
from the numbers alone (a range's ends, a file's line count, the nodes parsed so far).

These caps are about memory safety on the submitting host, not about what a cluster
allows: work above MaxArraySize or the site's submit limits is not refused for that
(the issue on work bigger than the site allows feeds it in parts). So each cap sits far
above real work and far below what would exhaust a login node's memory; the CLI fuzz
runs every command under a 1 GiB address-space cap (tests/test_file_arguments_fuzz.py).

The caps live in this one module so a newcomer finds them, and so a test can name them.
"""

from __future__ import annotations

#: frames in one `render-frames` (three hours at 60 frames a second is 648,000)
MAX_FRAMES = 1_000_000
#: chunks (segments) of one `transcode` (a day of video in 0.1 s chunks is 864,000)
MAX_CHUNKS = 1_000_000
#: tasks of one job array (Slurm's largest MaxArraySize is 4,000,001: listing that many
#: indices costs 150 MB; a million is above any site's default)
MAX_ARRAY_TASKS = 1_000_000
#: items of one list parameter (file_array's files, a command's arguments), from a params
#: file, a plan step or the model's tools
MAX_LIST_ITEMS = 1_000_000
#: data rows of one sample sheet (each row is a checked path and a mapping: ~1 KB)
MAX_TABLE_ROWS = 100_000
#: values (scalars, lists, mappings) in one YAML document: ruamel.yaml spends about 1 KB
#: and 27 us on each, so 100,000 is 0.1 GB and 3 s; a site file holds a few thousand
MAX_YAML_NODES = 100_000
#: entries (parameters) of one --params-file: a template has tens
MAX_PARAMS_ENTRIES = 1_000
#: steps of one plan: a plan larger than this is a workflow engine's job (Nextflow,
#: Snakemake), not a plan's
MAX_PLAN_STEPS = 100


class OverCap(ValueError):
    """A count above its workload cap; the message names the count, the cap and what to
    do. A ValueError, so the template and parameter checks that add their own context to
    ValueErrors add it to this one too."""


def check_count(count: int, cap: int, what: str, fix: str) -> None:
    """OverCap if count (of what: 'frames', 'rows') is above cap; fix says what to do."""
    if count > cap:
        raise OverCap(f"{count:,} {what}, above jobsmith's workload cap of {cap:,}: {fix}")
