"""Node lists in the compressed form schedulers print them: `n[1-3,7],gpu01`.

Accounting names the nodes a job ran on as one hostlist (sacct's NodeList, squeue's
%N); attributing a failure to a node needs the names one by one. `scontrol show
hostnames` is Slurm's own expander, but it is one more command (and a transport round
trip over SSH) per list, for a grammar small enough to read here: comma-separated
names, each with at most bracketed ranges of zero-padded numbers. Pure; a malformed
list is a ValueError, never a guess.
"""

from __future__ import annotations

import itertools
import re

#: Slurm prints "None assigned" (sacct) or nothing for a job that has not run anywhere
_NONE = frozenset({"", "none", "none assigned", "(null)"})
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
#: the most names one list may expand to: Slurm's own limit on a hostlist is 64k
MAX_NAMES = 65536


def expand_hostlist(text: str | None) -> tuple[str, ...]:
    """The node names a hostlist stands for, in order, duplicates kept out.

    `n[01-03],gpu7` -> ('n01', 'n02', 'n03', 'gpu7'); `r[1-2]n[1-2]` -> r1n1, r1n2, r2n1,
    r2n2 (brackets multiply, as in Slurm); None or Slurm's placeholders -> ().
    """
    if text is None or text.strip().lower() in _NONE:
        return ()
    names: dict[str, None] = {}
    for item in _split_top(text.strip()):
        for name in _expand_one(item):
            names[name] = None
            if len(names) > MAX_NAMES:
                raise ValueError(f"hostlist {text[:80]!r} names more than {MAX_NAMES} nodes")
    return tuple(names)


def _split_top(text: str) -> list[str]:
    """The comma-separated items of a hostlist, commas inside brackets kept."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"hostlist {text!r}: nested brackets")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"hostlist {text!r}: ']' without '['")
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"hostlist {text!r}: '[' without ']'")
    items.append(text[start:])
    if any(not item for item in items):
        raise ValueError(f"hostlist {text!r}: an empty name")
    return items


def _expand_one(item: str) -> list[str]:
    """One item: literal parts and bracketed ranges, their product in order."""
    parts: list[list[str]] = []
    for literal, bracket in re.findall(r"([^\[\]]*)(?:\[([^\]]*)\])?", item):
        if literal:
            parts.append([literal])
        if bracket:
            parts.append(_numbers(bracket, item))
    if not parts or any(c.isspace() for c in item):
        raise ValueError(f"hostlist item {item!r} is not a node name")
    return ["".join(p) for p in itertools.product(*parts)]


def _numbers(inside: str, item: str) -> list[str]:
    """'01-03,7' -> ['01', '02', '03', '7']: each range keeps its first number's width."""
    out: list[str] = []
    for piece in inside.split(","):
        match = _RANGE.fullmatch(piece)
        if match is None:
            raise ValueError(f"hostlist item {item!r}: {piece!r} is not a number or range")
        first, last = match[1], match[2] if match[2] is not None else match[1]
        low, high = int(first), int(last)
        if high < low or high - low >= MAX_NAMES:
            raise ValueError(f"hostlist item {item!r}: range {piece!r} is empty or too large")
        width = len(first) if first.startswith("0") else 0
        out.extend(str(n).zfill(width) for n in range(low, high + 1))
    return out


def join_hostlist(names: list[str] | tuple[str, ...]) -> str:
    """Names as one list Slurm's options take (`--exclude`, `ExcNodeList=`): comma-joined,
    uncompressed (Slurm reads either; the plain form is the one a person can grep)."""
    return ",".join(names)
