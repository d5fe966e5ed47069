"""A smoke test against the real model API: runs only where ANTHROPIC_API_KEY is set in the
environment pytest was started with (these build machines reach PyPI and Debian's mirrors
only, so here it is always skipped, and says so).

It asks one question through `jobsmith ask` with the real SDK, no loopback server: the
model must call `list_templates` and name a template that exists.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from lab_cli import js

#: read when the module is imported, before any fixture sets a test key
LIVE_KEY = os.environ.get("ANTHROPIC_API_KEY", "")

pytestmark = pytest.mark.skipif(
    not LIVE_KEY,
    reason="no ANTHROPIC_API_KEY in the environment: the live smoke test against the real "
    "model API did not run (it needs a key and a route to api.anthropic.com)",
)


def test_ask_against_the_real_api_lists_the_templates(
    jobsmith_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", LIVE_KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    out = js("ask", "Which job templates can I use? Name them, nothing else.", "--json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert [s["action"] for s in doc["steps"]][:1] == ["list_templates"]
    assert "command" in doc["answer"]
    assert doc["usage"]["calls"] >= 2
