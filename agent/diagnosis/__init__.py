"""Diagnosis: why a job ended as it did (table: the ordered rule table, pure) and the
forensics around one job (job: its status, failed tasks and their stderr)."""
