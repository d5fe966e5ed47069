"""The view layer: each document jobsmith shows (documents, results), and how it is
shown (render: text or `--json`; output: printing). Faces and brains read these models."""
