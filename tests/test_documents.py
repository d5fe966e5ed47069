"""The view layer's documents are the shapes docs/json.md documents (issue 8, item 3).

docs/json.md's table is the interface promise; agent/views/documents.py builds each of these
documents in one place. This reads the table and checks, both ways, that the documented
keys are the model's fields, so neither can drift from the other.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from jobsmith.agent.diagnosis.table import Diagnosis
from jobsmith.agent.runtime.documents import (
    DiagnosisDocument,
    JobStatusDocument,
    PendingDocument,
    PendingItem,
    PipelineStatusDocument,
    PlanCheckDocument,
    PlanStatusDocument,
    PlanStepCheck,
    PlanStepStatus,
    RenderDocument,
    SessionDocument,
    SubmissionDocument,
)
from jobsmith.agent.runtime.session.events import Event

JSON_DOC = Path(__file__).resolve().parent.parent / "docs" / "json.md"


def documented_keys(command: str, inside: str | None = None) -> set[str]:
    """The top-level keys of the JSON document docs/json.md shows for command (or of the
    objects in its list `inside`)."""
    row = next(
        line for line in JSON_DOC.read_text().splitlines() if line.startswith(f"| {command} |")
    )
    cell = row.split("|")[2].strip().strip("`")
    if inside is not None:
        cell = cell.split(f'"{inside}": [', 1)[1]
    depth, keys = 0, set()
    for match in re.finditer(r'[{}\[\]]|"(\w+)"', cell):
        token = match.group(0)
        if token in "{[":
            depth += 1
        elif token in "}]":
            depth -= 1
            if depth == 0:
                break
        elif depth == 1:
            keys.add(match.group(1))
    return keys


@pytest.mark.parametrize(
    ("command", "inside", "model"),
    [
        ("`status`, `wait`", "jobs", JobStatusDocument),
        ("`submit`", None, SubmissionDocument),
        ("`render`, `submit --dry-run`", None, RenderDocument),
        ("`pending`", "pending", PendingItem),
        ("`pending`", None, PendingDocument),
        ("`sessions show`", "events", Event),
        ("`sessions show`", None, SessionDocument),
        ("`diagnose`", "diagnoses", Diagnosis),
        ("`diagnose`", None, DiagnosisDocument),
        ("`plan check`", None, PlanCheckDocument),
        ("`plan check`", "steps", PlanStepCheck),
        ("`plan status`", None, PlanStatusDocument),
        ("`plan status`", "steps", PlanStepStatus),
        ("`pipeline status`", None, PipelineStatusDocument),
    ],
)
def test_documented_keys_are_the_models_fields(
    command: str, inside: str | None, model: type[BaseModel]
) -> None:
    keys = documented_keys(command, inside)
    assert keys, f"no keys read for {command}"
    assert keys == set(model.model_fields), keys ^ set(model.model_fields)


# --- compact projections: bounded, whatever the size of what they show ----------------


def test_a_compact_session_shows_the_newest_events_each_cut_short() -> None:
    from datetime import UTC, datetime

    from jobsmith.agent.runtime.documents import MAX_COMPACT_EVENT_DATA, MAX_COMPACT_EVENTS
    from jobsmith.agent.runtime.session.events import EventKind

    at = datetime(2026, 11, 30, tzinfo=UTC)
    events = tuple(
        Event(session_id="s", seq=n, kind=EventKind.NOTE, at=at, data={"text": "x" * 5000})
        for n in range(10_000)
    )
    compact = SessionDocument(events=events).compact()
    assert compact["omitted"] == 10_000 - MAX_COMPACT_EVENTS
    assert [e["seq"] for e in compact["events"]] == list(range(10_000 - MAX_COMPACT_EVENTS, 10_000))
    assert all(len(e["data"]) == MAX_COMPACT_EVENT_DATA + 1 for e in compact["events"])
    assert len(SessionDocument(events=events).full()["events"]) == 10_000


def test_a_compact_pending_document_bounds_each_script_but_keeps_its_hash() -> None:
    from datetime import UTC, datetime

    from jobsmith.agent.runtime.documents import MAX_COMPACT_SCRIPT
    from jobsmith.agent.runtime.submission.approval.approvals import PendingApproval

    held = PendingApproval(
        session_id="s",
        step_id="st-1",
        asked_at=datetime(2026, 11, 30, tzinfo=UTC),
        action="submit",
        reason="over 100 core-hours",
        script="#!/bin/bash\n" + "echo hi\n" * 10_000,
        script_sha256="ab" * 32,
        cost={"core_hours": 120.0},
        data={"anything": "the event's raw data is not shown"},
    )
    doc = PendingDocument.of([held])
    assert "data" not in doc.full()["pending"][0]
    (item,) = doc.compact()["pending"]
    assert len(item["script"]) < MAX_COMPACT_SCRIPT + 100 and item["script_sha256"] == "ab" * 32
    assert doc.full()["pending"][0]["script"] == held.script


def test_a_compact_diagnosis_keeps_the_verdict_and_the_first_evidence() -> None:
    from jobsmith.agent.diagnosis.table import Efficiency, Verdict
    from jobsmith.agent.runtime.documents import MAX_COMPACT_EVIDENCE

    found = Diagnosis(
        job_id="12_3",
        verdict=Verdict.OUT_OF_MEMORY,
        evidence=tuple(f"line {n}" for n in range(50)),
        efficiency=Efficiency(),
        remedy="resubmit with --mem 2000M",
        retryable=True,
        suggested={"mem_mb": 2000},
    )
    (compact,) = DiagnosisDocument(diagnoses=(found,)).compact()["diagnoses"]
    assert compact["verdict"] == "out_of_memory" and compact["suggested"] == {"mem_mb": 2000}
    assert compact["evidence"] == [f"line {n}" for n in range(MAX_COMPACT_EVIDENCE)]
