"""The report page allows its own scripts by hash, and no other (issue 24, part 10): its
Content-Security-Policy had 'unsafe-inline', so escaping was the only defence against a
script a job's text might smuggle in. Now every inline script the page carries is listed
by its sha256; 'unsafe-eval' remains (plotly's plot functions need it). Checked in the
policy's text, and in headless Chromium (Debian's): plotly still draws, and a script
added to the page without a hash does not run. No Slurm."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_report import array_report

from jobsmith.agent.views.report_html import render_html

pytestmark = pytest.mark.host_only


def _policy(text: str) -> str:
    found = re.search(r"Content-Security-Policy' content=\"([^\"]*)\"", text)
    assert found is not None
    return found.group(1)


def test_every_inline_script_is_allowed_by_its_hash_and_nothing_inline_else() -> None:
    text = render_html(array_report())
    script_src = next(d for d in _policy(text).split(";") if d.strip().startswith("script-src"))
    assert "'unsafe-inline'" not in script_src
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", text, re.DOTALL)
    assert scripts
    for script in scripts:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in script_src


def test_plotly_draws_and_an_unhashed_script_does_not_run(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: scripts/setup installs it (apt: chromium)")
    text = render_html(array_report())
    planted = "<script>document.title = 'PWNED'</script>"
    page = tmp_path / "report.html"
    page.write_text(text.replace("</body>", planted + "</body>"))
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            "--virtual-time-budget=5000",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "main-svg" in dom, "plotly drew no figure: its hashed scripts did not run"
    assert "<title>PWNED</title>" not in dom and "jobsmith run report" in dom
