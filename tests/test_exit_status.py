"""docs/exit-status.md's table is what the code does (issue 7, item 8).

Every expected error is a JobsmithError subclass whose `exit_code` the CLI exits with;
the table names the classes of each status. This test reads the table, imports every
jobsmith module, and checks both directions: each class named has that status, and
each error class in the code is in the table (itself, or through a base in the same
row). tests/test_hostile_input.py produces each status for real on the lab cluster.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import jobsmith
from jobsmith.errors import JobsmithError

EXIT_STATUS_DOC = Path(__file__).resolve().parent.parent / "docs" / "exit-status.md"


def readme_table() -> dict[int, set[str]]:
    """status -> the error class names its row lists."""
    text = EXIT_STATUS_DOC.read_text()
    table = text.split("| status | meaning | error classes |", 1)[1]
    rows: dict[int, set[str]] = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        status, _meaning, classes = (cell.strip() for cell in line.strip("|").split("|"))
        rows[int(status)] = set(re.findall(r"`(\w+)`", classes))
    return rows


def error_classes() -> dict[str, type[JobsmithError]]:
    """Every JobsmithError subclass defined anywhere in jobsmith."""
    for module in pkgutil.walk_packages(jobsmith.__path__, "jobsmith."):
        if not module.name.endswith("__main__"):  # that one runs the CLI
            importlib.import_module(module.name)
    found: dict[str, type[JobsmithError]] = {}
    todo: list[type[JobsmithError]] = [JobsmithError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("jobsmith."):
            found[cls.__name__] = cls
        todo += cls.__subclasses__()
    return found


def test_the_table_has_every_documented_status() -> None:
    assert sorted(readme_table()) == list(range(11))


def test_each_class_named_exits_with_its_row() -> None:
    classes = error_classes()
    for status, names in readme_table().items():
        for name in names:
            assert name in classes, f"exit-status.md names {name}, which jobsmith does not define"
            assert classes[name].exit_code == status, (name, classes[name].exit_code, status)


def test_every_error_class_is_in_the_table() -> None:
    rows = readme_table()
    for name, cls in error_classes().items():
        row = rows[cls.exit_code]
        bases = {b.__name__ for b in cls.__mro__}
        assert bases & row, f"{name} exits {cls.exit_code}, but that row lists none of {bases}"
