"""The session log: the append-only event store, its events and payloads, the folds
that read it (readmodel), one actor per step (claims), the ledger of submissions, and
the job states and polls recorded in it."""
