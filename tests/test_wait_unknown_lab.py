"""`wait` on an id Slurm never had (issue 24, part 9): it showed NOT_VISIBLE for the whole
wait (an hour by default); once the controller's MinJobAge has passed with the id shown
nowhere, it is an error naming the id (exit 6). A job jobsmith submitted is never taken
for one (it may be slow to show). On the lab cluster (MinJobAge 30 s)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from lab_cli import js

pytestmark = pytest.mark.usefixtures("lab_cluster")


def test_waiting_on_an_id_slurm_never_had_ends_with_exit_6_naming_it(user_site: Any) -> None:
    started = time.monotonic()
    out = js("wait", "99999990", "--timeout", "600")
    took = time.monotonic() - started
    assert out.exit_code == 6, out.output
    assert re.search(r"job 99999990: Slurm has shown no such job for \d+s", out.stderr), out.stderr
    assert took < 120, took  # MinJobAge and a poll or two, not the 600 s asked for
