"""A plan's order and depths are linear in its edges (issue 24, part 7): a 30-step plan in
which each step waits on every earlier one took `plan status` past 60 s (the depth
recursion had no memory). The order is the one the first version defined: of the steps
ready, always the one written first; hypothesis checks it against that definition."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from jobsmith.agent.runtime.workflows.plans import Plan, PlanStep


def _reference_order(steps: dict[str, list[str]]) -> list[str]:
    """The first version's algorithm: the definition the fast one must keep."""
    done: list[str] = []
    left = list(steps)
    while left:
        ready = [n for n in left if all(d in done for d in steps[n])]
        if not ready:
            raise ValueError(f"steps {', '.join(left)} wait for each other in a cycle")
        done.append(ready[0])
        left.remove(ready[0])
    return done


def _plan(steps: dict[str, list[str]]) -> Plan:
    doc: dict[str, Any] = {
        name: {"template": "command", "params": {"command": "true"}, "after_ok": waits}
        for name, waits in steps.items()
    }
    return Plan.model_validate({"name": "p", "steps": doc})


@st.composite
def _graphs(draw: st.DrawFn) -> dict[str, list[str]]:
    names = draw(st.lists(st.sampled_from([f"s{i}" for i in range(12)]), min_size=1, unique=True))
    return {
        n: draw(st.lists(st.sampled_from([m for m in names if m != n] or [n]), unique=True))
        if len(names) > 1
        else []
        for n in names
    }


@settings(max_examples=300, deadline=None)
@given(_graphs())
def test_the_order_is_the_first_versions_and_cycles_are_named_alike(
    steps: dict[str, list[str]],
) -> None:
    try:
        expected = _reference_order(steps)
    except ValueError as exc:
        with pytest.raises(ValidationError) as err:
            _plan(steps)
        assert str(exc) in str(err.value)
        return
    plan = _plan(steps)
    assert plan.order() == expected
    for name in expected:  # a depth is one more than its deepest dependency's
        waits = steps[name]
        assert plan.depth(name) == (1 + max(plan.depth(d) for d in waits) if waits else 0)


def test_depths_and_order_read_each_step_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """18 steps, each waiting on every earlier one (153 edges): the recursion read the
    steps' dependencies about 2**18 times; now a few times per step. Counted, not timed
    (benchmarks/bench_plan_order.py times it up to 2,000 steps)."""
    names = [f"s{i:02d}" for i in range(18)]
    plan = _plan({n: names[:i] for i, n in enumerate(names)})
    reads = 0
    real = PlanStep.waits_for

    def counted(self: PlanStep) -> list[str]:
        nonlocal reads
        reads += 1
        return real(self)

    monkeypatch.setattr(PlanStep, "waits_for", counted)
    fresh = Plan.model_validate(plan.model_dump())
    assert [fresh.depth(n) for n in names] == list(range(18))
    assert fresh.order() == names
    assert reads <= 10 * len(names), reads  # linear: the recursion made about 2**18
