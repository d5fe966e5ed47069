"""The watcher: one batched poll per cycle for every open job, run once, forever or from cron.

cycle (one cycle), running (once, forever, installed), lock (one watcher per user),
waiting (`jobsmith wait`), webhook and news (telling people what happened).
"""
