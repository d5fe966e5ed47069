"""One hash binds a script to its approval, its check token and its intent
(agent/runtime/submission/hashing.py): the sha256 of its UTF-8 text, as sha256sum prints it."""

from __future__ import annotations

import subprocess

from jobsmith.agent.runtime.submission.hashing import script_sha256


def test_the_script_hash_is_sha256sum_of_its_utf8_bytes() -> None:
    script = "#!/bin/bash\n#SBATCH -J café\necho 'ünïcode'\n"
    printed = subprocess.run(
        ["sha256sum"], input=script.encode(), capture_output=True, check=True
    ).stdout.split()[0]
    assert script_sha256(script) == printed.decode()
    assert script_sha256("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
