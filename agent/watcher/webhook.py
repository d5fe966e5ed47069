"""Telling a webhook (chat, pager, a lab's own service) when a watched job ends.

Best effort by design: a slow or broken endpoint must never stop the watcher, so each
POST has a short timeout and a failure is only reported back, never raised.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping


def post(url: str, payload: Mapping[str, object], timeout_s: float = 5.0) -> str | None:
    """POST payload as JSON; None on success, else why it failed."""
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "jobsmith"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status = int(response.status)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"webhook {url}: {exc}"
    return None if 200 <= status < 300 else f"webhook {url}: HTTP {status}"
