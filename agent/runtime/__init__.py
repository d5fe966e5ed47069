"""The runtime: everything that acts goes through here, one sub-package per concern.

- session/: the append-only log (store, events, payloads), the folds that read it
  (readmodel), one actor per step (claims), the ledger of submissions, job states;
- submission/: a request assembled (jobs) and judged (judge, policy, limits, advice,
  approvals), typed steps and the executor that runs them;
- workflows/: plans and their runs, workflow engines' head jobs, transcode and frames;
- recovery/: resume, replay, adopt, re-run, stand-in rows;
- and beside them the documents the runtime returns (documents.py), the glance's facts,
  job logs, and the site file's check and init (sitefile.py).
"""
