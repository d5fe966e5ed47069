"""A user's own batch script read as sbatch reads it (pure): its `#SBATCH` lines and
sbatch's option words, so `jobsmith sbatch SCRIPT` can judge what the script asks for.

sbatch's rules, followed here (sbatch(1), "The batch script may contain options preceded
with #SBATCH before any executable commands"):

- the first line is `#!` and an interpreter; a script with DOS line ends is refused (sbatch
  refuses it too: "Batch script contains DOS line breaks");
- directives are read from the lines after the shebang until the first line that is not
  blank and not a comment; an `#SBATCH` line after that is a comment, and is reported;
- a directive line holds option words split as a shell would (quotes, backslashes), up to
  a word that starts with `#`;
- option words follow getopt_long: `--name=value`, `--name value`, a unique prefix of a
  long name, `-xvalue`, `-x value`, and bundled short flags.

`#PBS` and `#BSUB` lines in the header are refused: sbatch reads some of them too.

One deviation, on the safe side: an *indented* `#SBATCH` line inside the header is taken
as a directive too. Whether sbatch reads it has varied; taking it means jobsmith judges
it either way, and removes it from the script it hands to sbatch.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from enum import Enum

from jobsmith.adapters.capabilities import ScriptOption, ScriptParts
from jobsmith.errors import InputError


class Arg(Enum):
    """Whether an sbatch option takes a value (getopt_long's has_arg)."""

    NONE = "none"
    REQUIRED = "required"
    OPTIONAL = "optional"  # only as --name=value


_R, _N, _O = Arg.REQUIRED, Arg.NONE, Arg.OPTIONAL

#: sbatch's long options (22.05 and 24.11's `sbatch --help`), for getopt's prefix rule
LONG_OPTIONS: dict[str, Arg] = {
    "account": _R, "acctg-freq": _R, "array": _R, "batch": _R, "bb": _R, "bbf": _R,
    "begin": _R, "chdir": _R, "clusters": _R, "cluster-constraint": _R, "comment": _R,
    "constraint": _R, "container": _R, "contiguous": _N, "core-spec": _R,
    "cores-per-socket": _R, "cpu-freq": _R, "cpus-per-gpu": _R, "cpus-per-task": _R,
    "deadline": _R, "delay-boot": _R, "dependency": _R, "distribution": _R, "error": _R,
    "exclude": _R, "exclusive": _O, "export": _O, "export-file": _R,
    "extra-node-info": _R, "get-user-env": _O, "gid": _R, "gpu-bind": _R, "gpu-freq": _R,
    "gpus": _R, "gpus-per-node": _R, "gpus-per-socket": _R, "gpus-per-task": _R,
    "gres": _R, "gres-flags": _R, "help": _N, "hint": _R, "hold": _N, "ignore-pbs": _N,
    "input": _R, "job-name": _R, "kill-on-invalid-dep": _R, "licenses": _R,
    "mail-type": _R, "mail-user": _R, "mcs-label": _R, "mem": _R, "mem-bind": _R,
    "mem-per-cpu": _R, "mem-per-gpu": _R, "mincpus": _R, "network": _R, "nice": _O,
    "no-kill": _O, "no-requeue": _N, "nodefile": _R, "nodelist": _R, "nodes": _R,
    "ntasks": _R, "ntasks-per-core": _R, "ntasks-per-gpu": _R, "ntasks-per-node": _R,
    "ntasks-per-socket": _R, "open-mode": _R, "output": _R, "overcommit": _N,
    "oversubscribe": _N, "parsable": _N, "partition": _R, "power": _R, "priority": _R,
    "profile": _R, "propagate": _O, "qos": _R, "quiet": _N, "reboot": _N, "requeue": _N,
    "reservation": _R, "signal": _R, "sockets-per-node": _R, "spread-job": _N,
    "switches": _R, "test-only": _N, "thread-spec": _R, "threads-per-core": _R,
    "time": _R, "time-min": _R, "tmp": _R, "uid": _R, "usage": _N, "use-min-nodes": _N,
    "verbose": _N, "version": _N, "wait": _N, "wait-all-nodes": _R, "wckey": _R,
    "wrap": _R,
}  # fmt: skip

#: sbatch's short options, by the long option each stands for
SHORT_OPTIONS: dict[str, str] = {
    "A": "account", "a": "array", "B": "extra-node-info", "b": "begin", "C": "constraint",
    "c": "cpus-per-task", "D": "chdir", "d": "dependency", "e": "error", "F": "nodefile",
    "G": "gpus", "H": "hold", "h": "help", "i": "input", "J": "job-name", "k": "no-kill",
    "L": "licenses", "M": "clusters", "m": "distribution", "N": "nodes", "n": "ntasks",
    "O": "overcommit", "o": "output", "p": "partition", "Q": "quiet", "q": "qos",
    "S": "core-spec", "s": "oversubscribe", "t": "time", "V": "version", "v": "verbose",
    "W": "wait", "w": "nodelist", "x": "exclude",
}  # fmt: skip


_DIRECTIVE = re.compile(r"^\s*#SBATCH(\s|$)")
#: other schedulers' directives, which sbatch also reads in a script's header
_FOREIGN = re.compile(r"^\s*#(PBS|BSUB)(\s|$)")


def parse_script(text: str, name: str) -> ScriptParts:
    """text, the batch script called name, taken apart; InputError naming the line."""
    if "\r\n" in text:
        raise InputError(
            f"{name}: the script has DOS line ends (\\r\\n), which sbatch refuses; "
            f"convert it first: dos2unix {name}"
        )
    if "\0" in text:
        raise InputError(f"{name}: the script holds a NUL byte; a batch script is text")
    lines = text.split("\n")
    if not lines[0].startswith("#!") or not lines[0][2:].strip():
        raise InputError(
            f"{name}: line 1 must name the interpreter, as sbatch requires "
            f"(for example #!/bin/bash); it is {lines[0][:60]!r}"
        )
    options: list[ScriptOption] = []
    rest: list[str] = []
    ignored: list[int] = []
    in_header = True
    for number, line in enumerate(lines[1:], 2):
        if in_header and line.strip() and not line.lstrip().startswith("#"):
            in_header = False
        if in_header and _FOREIGN.match(line):
            raise InputError(
                f"{name}: line {number}: {line.split()[0]} lines are read by sbatch too, but "
                "jobsmith judges only #SBATCH lines: write it as #SBATCH, or remove it"
            )
        if _DIRECTIVE.match(line):
            if in_header:
                words = directive_words(line.lstrip()[len("#SBATCH") :], f"line {number}")
                options += parse_options(words, f"line {number}")
                continue
            ignored.append(number)
        rest.append(line)
    return ScriptParts(
        shebang=lines[0], options=tuple(options), rest="\n".join(rest), ignored=tuple(ignored)
    )


def directive_words(text: str, where: str) -> list[str]:
    """The option words of a directive line: split on blanks, with double and single
    quotes and backslashes as a shell reads them, up to a word starting with '#'."""
    words: list[str] = []
    word: list[str] = []
    started = False
    quote: str | None = None
    chars = iter(text)
    for ch in chars:
        if quote is not None:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"':
                word.append(next(chars, ""))
            else:
                word.append(ch)
        elif ch in " \t":
            if started:
                words.append("".join(word))
                word, started = [], False
        elif ch == "#" and not started:
            break
        elif ch in "\"'":
            quote, started = ch, True
        elif ch == "\\":
            word.append(next(chars, ""))
            started = True
        else:
            word.append(ch)
            started = True
    if quote is not None:
        raise InputError(f"{where}: a quote ({quote}) is not closed")
    if started:
        words.append("".join(word))
    return words


def parse_options(words: list[str], where: str) -> list[ScriptOption]:
    """sbatch's option words as getopt_long reads them; InputError naming the word."""
    return _getopt(words, where, stop=False)[0]


def split_command_line(
    words: list[str], own: Collection[str] = (), own_valued: Collection[str] = ()
) -> tuple[list[ScriptOption], str, list[str]]:
    """sbatch's command line, `[OPTIONS] SCRIPT [ARGS]`, as its options, the script and the
    script's arguments (a `--` may end the options); InputError if no script is named.
    own: flags of the calling tool (`--json`), given back among the options as written;
    own_valued: its options that take a value (`--checkpoint CMD`), given back likewise."""
    where = "the command line"
    options, end = _getopt(words, where, stop=True, own=own, own_valued=own_valued)
    if end < len(words) and words[end] == "--":
        end += 1
    if end >= len(words):
        raise InputError("no batch script named: jobsmith sbatch [OPTIONS] SCRIPT [ARGS]")
    return options, words[end], words[end + 1 :]


def _getopt(
    words: list[str],
    where: str,
    *,
    stop: bool,
    own: Collection[str] = (),
    own_valued: Collection[str] = (),
) -> tuple[list[ScriptOption], int]:
    """Options read from words; stop: end at the first operand (or '--') and return its
    index, as sbatch's command line does; otherwise an operand is an error. own,
    own_valued: the calling tool's flags and its options that take a value."""
    out: list[ScriptOption] = []
    i = 0
    while i < len(words):
        word = words[i]
        if stop and (word == "--" or not word.startswith("-") or word == "-"):
            return out, i
        i += 1
        if word in own:
            out.append(ScriptOption(word.lstrip("-"), None, "own"))
            continue
        named, eq, given = word.partition("=")
        if named in own_valued:
            if not eq:
                if i >= len(words):
                    raise InputError(f"{where}: {named} needs a value")
                given, i = words[i], i + 1
            out.append(ScriptOption(named.lstrip("-"), given, "own"))
            continue
        if word.startswith("--") and len(word) > 2:
            given, eq, value = word[2:].partition("=")
            name = _long_name(given, where)
            arg = LONG_OPTIONS[name]
            if eq:
                if arg is Arg.NONE:
                    raise InputError(f"{where}: --{name} takes no value ({word!r})")
                out.append(ScriptOption(name, value, where))
            elif arg is Arg.REQUIRED:
                if i >= len(words):
                    raise InputError(f"{where}: --{name} needs a value")
                out.append(ScriptOption(name, words[i], where))
                i += 1
            else:
                out.append(ScriptOption(name, None, where))
        elif word.startswith("-") and len(word) > 1 and word != "--":
            i = _short(words, i, word, where, out)
        else:
            raise InputError(
                f"{where}: {word!r} is not an sbatch option (options start with - or --)"
            )
    return out, i


def _short(words: list[str], i: int, word: str, where: str, out: list[ScriptOption]) -> int:
    """Bundled short options in word ('-HW', '-c4', '-p debug'); the next index to read."""
    for pos, letter in enumerate(word[1:], 1):
        name = SHORT_OPTIONS.get(letter)
        if name is None:
            raise InputError(f"{where}: -{letter} is not an sbatch option ({word!r})")
        if LONG_OPTIONS[name] is Arg.REQUIRED:
            value = word[pos + 1 :]
            if not value:
                if i >= len(words):
                    raise InputError(f"{where}: -{letter} (--{name}) needs a value")
                value, i = words[i], i + 1
            out.append(ScriptOption(name, value, where))
            return i
        out.append(ScriptOption(name, None, where))  # -k's optional value is never bundled
    return i


def _long_name(given: str, where: str) -> str:
    """The long option given names, exactly or as getopt's unique prefix."""
    if given in LONG_OPTIONS:
        return given
    matches = sorted(n for n in LONG_OPTIONS if n.startswith(given))
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join("--" + m for m in matches)
        raise InputError(f"{where}: --{given} is ambiguous ({names})")
    raise InputError(f"{where}: --{given} is not an sbatch option (sbatch --help lists them)")


class SbatchScripts:
    """The OwnScripts capability of the Slurm adapter: this module's two readers."""

    def parse_script(self, text: str, name: str) -> ScriptParts:
        """text, the batch script called name, taken apart (parse_script)."""
        return parse_script(text, name)

    def split_command_line(
        self, words: list[str], own: Collection[str] = (), own_valued: Collection[str] = ()
    ) -> tuple[list[ScriptOption], str, list[str]]:
        """sbatch's `[OPTIONS] SCRIPT [ARGS]` (split_command_line)."""
        return split_command_line(words, own, own_valued)
