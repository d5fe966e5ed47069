"""The one hash an approval, a check token and the session log bind a script to.

What a person approved, what `check_job` showed an MCP client and what the intent of a
submission records must be the very bytes sbatch gets: each is compared by this hash, so
it is computed here alone (the sha256 of the script's UTF-8 text, in lowercase hex).
"""

from __future__ import annotations

import hashlib


def script_sha256(text: str) -> str:
    """The sha256 of a script or of a plan's approval text, as every record keeps it."""
    return hashlib.sha256(text.encode()).hexdigest()
