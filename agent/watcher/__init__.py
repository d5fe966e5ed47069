"""The watcher: one batched poll per cycle for every open job, run once, forever or from cron.

cycle (one cycle), watcher (this process as the user's watcher: the lock taken,
heartbeaten and given back around the cycles, for `watch`, chat and the MCP server),
running (once, forever, installed), lock (one watcher per user), stopping (stop signals),
waiting (`jobsmith wait`), webhook and news (telling people what happened).
"""
