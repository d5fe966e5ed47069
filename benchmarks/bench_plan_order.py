"""A plan's order and depths against its size (issue 24, part 7), no Slurm.

The worst shape: every step waits on every earlier one (n(n-1)/2 edges). For each size,
one run builds the plan and asks `order()` and every step's `depth()` (what `plan status`
does), and, up to 22 steps, the first version's algorithms side by side in the same run
(its depth recursion had no memory: exponential). Plans above the file limit (MAX_STEPS,
100) are built with model_construct, which skips the checks a plan file gets.

    .venv/bin/python benchmarks/bench_plan_order.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

from jobsmith.agent.runtime.workflows.plans import Plan, PlanStep


def dense(n: int) -> Plan:
    names = [f"s{i:04d}" for i in range(n)]
    steps = {
        name: PlanStep(template="command", params={}, after_ok=tuple(names[:i]))
        for i, name in enumerate(names)
    }
    return Plan.model_construct(name="bench", steps=steps)


def first_version(plan: Plan) -> None:
    """The algorithms before issue 24: a rescan per step, and depth without memory."""
    done: list[str] = []
    left = list(plan.steps)
    while left:
        ready = [n for n in left if all(d in done for d in plan.steps[n].waits_for())]
        done.append(ready[0])
        left.remove(ready[0])

    def depth(name: str) -> int:
        waits = plan.steps[name].waits_for()
        return 0 if not waits else 1 + max(depth(d) for d in waits)

    for name in plan.steps:
        depth(name)


def now(plan: Plan) -> None:
    plan.order()
    for name in plan.steps:
        plan.depth(name)


def timed(fn: Callable[[Plan], None], plan: Plan) -> float:
    started = time.perf_counter()
    fn(plan)
    return time.perf_counter() - started


def main() -> None:
    print(f"{'steps':>6} {'edges':>9} {'now, s':>9} {'first version, s':>17}")
    for n in (16, 18, 20, 22, 100, 500, 1000, 2000):
        edges = n * (n - 1) // 2
        fresh = timed(now, dense(n))
        old = f"{timed(first_version, dense(n)):17.3f}" if n <= 22 else f"{'(not run)':>17}"
        print(f"{n:>6} {edges:>9} {fresh:>9.4f} {old}")


if __name__ == "__main__":
    main()
