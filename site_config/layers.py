"""Merging site files in order, remembering which file (and line) set each value.

Layering follows how sites work: the admin's file describes the cluster, a user's file
changes single fields on top (their default account, one partition's limit). So:

- mappings merge key by key, recursively: a user file that says only
  `partitions: {gpu: {max_time: "2:00:00"}}` keeps every other partition and field;
- everything else, lists included, replaces what an earlier file said: a user who sets
  `accounts.allowed` states the whole list (merging lists item by item has no one
  obvious meaning, and a list that only grows could never drop an entry);
- null is a value like any other, not a deletion (`max_time: null` means "no limit"),
  except for an entry of a mapping the caller names as removable: there a later file's
  null removes the entry (`partitions: {long: null}`: this user never uses `long`; the
  centre's file is a ceiling, ceiling.py, so a user may drop a partition, never add one).

Provenance is kept per key path, so an error in a merged value can name the file that
put it there.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobsmith.site_config.yamlfile import KeyPath, YamlDocument


@dataclass(frozen=True)
class Origin:
    """Where a value was set: a file, and the line of its key when known."""

    file: Path
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else str(self.file)


@dataclass
class Provenance:
    """For every key path of the merged data, the file and line that last set it."""

    origins: dict[KeyPath, Origin] = field(default_factory=dict)

    def origins_of(self, path: KeyPath) -> list[Origin]:
        """Where the value at path came from, most specific first.

        A key set by one file gives that file. A mapping assembled from several files
        gives each file that set something inside it. A path below a value that was set
        whole (an item of a list, a key of a mapping that replaced a scalar) gives the
        file that set the enclosing value. A path nobody set (a missing required key)
        gives nothing.
        """
        inside = [o for p, o in self.origins.items() if p[: len(path)] == path and p != path]
        if inside:
            own = self.origins.get(path)
            return _unique_files([own, *inside] if own else inside)
        for depth in range(len(path), 0, -1):
            origin = self.origins.get(path[:depth])
            if origin is not None:
                return [origin]
        return []

    def forget(self, path: KeyPath) -> None:
        """Drop path and everything below it (a later file replaced that value)."""
        for p in [p for p in self.origins if p[: len(path)] == path]:
            del self.origins[p]

    def record(self, doc: YamlDocument, path: KeyPath) -> None:
        """Attribute path and everything below it to doc."""
        for p, line in doc.lines.items():
            if p[: len(path)] == path:
                self.origins[p] = Origin(doc.file, line)


def _unique_files(origins: Iterable[Origin]) -> list[Origin]:
    by_file: dict[Path, Origin] = {}
    for origin in origins:
        by_file.setdefault(origin.file, origin)
    return list(by_file.values())


def merge_documents(
    docs: Sequence[YamlDocument], removable: Collection[KeyPath] = ()
) -> tuple[dict[str, Any], Provenance]:
    """Merge docs in order (later wins, mappings merge key by key) and record provenance;
    in the mappings at the paths in removable, an entry set to null is removed."""
    merged: dict[str, Any] = {}
    provenance = Provenance()
    for doc in docs:
        _merge_into(merged, doc.data, (), doc, provenance, removable)
    return merged, provenance


def _merge_into(
    base: dict[str, Any],
    over: dict[str, Any],
    prefix: KeyPath,
    doc: YamlDocument,
    provenance: Provenance,
    removable: Collection[KeyPath],
) -> None:
    for key, value in over.items():
        path = (*prefix, key)
        if isinstance(base.get(key), dict) and isinstance(value, dict):
            provenance.origins[path] = Origin(doc.file, doc.lines.get(path))
            _merge_into(base[key], value, path, doc, provenance, removable)
            continue
        provenance.forget(path)  # what the earlier value held below path is gone
        if value is None and prefix in removable:
            base.pop(key, None)
            continue
        base[key] = copy.deepcopy(value)
        provenance.record(doc, path)
