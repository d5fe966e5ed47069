"""The view layer: how the documents the runtime returns (agent/runtime/documents.py) are
shown (render: text or `--json`; output: printing; the glance; the run report in text and
HTML). Faces and brains use it."""
