"""The Brain seam (issue 8, item 1): a brain plugs in through configuration alone, its
decision is one typed event per failed job, and a person's re-run and the watcher's
never both happen.

The lab tests run real failing jobs on the lab cluster and real watcher cycles; the
brain that "always holds" is tests/hold_brain.py, named in the user's site file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hold_brain import HoldBrain
from lab_cli import js, submit_oom_array, watch_until

from jobsmith.agent.brains.protocol import Brain, load_brain
from jobsmith.agent.brains.rules import RuleBrain
from jobsmith.errors import ConfigError

BUILTINS = {"rules": RuleBrain}


def test_a_brain_is_named_by_configuration() -> None:
    assert isinstance(load_brain("rules", BUILTINS), RuleBrain)
    held = load_brain("hold_brain:HoldBrain", BUILTINS)
    assert isinstance(held, HoldBrain) and isinstance(held, Brain)


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("llama", "give one of rules, or a factory as module:attribute"),
        ("no_such_module_here:Brain", "cannot import it"),
        ("hold_brain:Nope", "cannot import it"),
        ("json:dumps", "calling it failed"),
        ("json:JSONDecoder", "made no brain"),
    ],
)
def test_a_bad_brain_name_is_a_config_error(spec: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        load_brain(spec, BUILTINS)


def _events(session: str) -> list[dict[str, object]]:
    return json.loads(js("sessions", "show", session, "--json").stdout)["events"]  # type: ignore[no-any-return]


def _session_of(job_id: str) -> str:
    status = json.loads(js("status", job_id, "--json").stdout)
    return str(status["jobs"][0]["session_id"])


def _until_decided(job_id: str, timeout_s: float = 180) -> list[dict[str, object]]:
    """Watcher cycles until one decides about job_id; every decision seen."""
    seen = watch_until(lambda s: any(d["job_id"] == job_id for d in s.decisions), timeout_s)
    if not any(d["job_id"] == job_id for d in seen.decisions):
        raise AssertionError(f"no decision about job {job_id} within {timeout_s}s")
    return seen.decisions


@pytest.mark.lab
@pytest.mark.usefixtures("lab_cluster")
def test_a_second_brain_plugs_in_through_configuration_alone(user_site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    user_site("brain: hold_brain:HoldBrain\n")
    array_id = submit_oom_array(workdir)  # the rules would re-run it with more memory
    (decision,) = _until_decided(array_id)
    assert decision["brain"] == "hold" and decision["action"] == "hold"
    assert "new_job_id" not in decision  # nothing re-run
    assert json.loads(js("watch", "--once", "--json").stdout)["decisions"] == []  # once only
    typed = [e for e in _events(_session_of(array_id)) if e["kind"] == "decision"]
    assert [e["data"]["brain"] for e in typed] == ["hold"]  # type: ignore[index]


@pytest.mark.lab
@pytest.mark.usefixtures("lab_cluster")
def test_a_person_is_told_when_the_watcher_already_reran_the_job(user_site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    array_id = submit_oom_array(workdir)
    decisions = _until_decided(array_id)
    assert decisions[0]["action"] == "rerun" and decisions[0].get("new_job_id")
    by_hand = js("rerun", array_id, "--mem", "1G")
    assert by_hand.exit_code == 1, by_hand.output
    assert "already decided on (rerun by rules" in by_hand.stderr
    reruns = [
        e
        for e in _events(_session_of(array_id))
        if e["kind"] == "intent" and e["data"].get("rerun_of") == array_id  # type: ignore[union-attr]
    ]
    assert len(reruns) == 1  # the watcher's only


@pytest.mark.lab
@pytest.mark.usefixtures("lab_cluster")
def test_the_watcher_leaves_a_job_a_person_reran_alone(user_site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    array_id = submit_oom_array(workdir)
    deadline = time.monotonic() + 120
    while json.loads(js("status", array_id, "--json").stdout)["jobs"][0]["state"] not in (
        "FAILED",
        "OUT_OF_MEMORY",
    ):
        assert time.monotonic() < deadline
        time.sleep(2)
    by_hand = js("rerun", array_id, "--mem", "1G")
    assert by_hand.exit_code == 0, by_hand.output
    cycle = json.loads(js("watch", "--once", "--json").stdout)
    assert [d for d in cycle["decisions"] if d["job_id"] == array_id] == []
    typed = [e for e in _events(_session_of(array_id)) if e["kind"] == "decision"]
    assert [e["data"]["brain"] for e in typed] == ["person (alice)"]  # type: ignore[index]
