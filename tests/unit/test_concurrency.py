"""`concurrency.run_all`, the one helper for running coroutines together: order, limit, failure, cancellation."""

from __future__ import annotations

import asyncio

import pytest

from reme_service.concurrency import run_all
from reme_service.errors import InvalidRequestError
from tests.conditions import until


class Meter:
    """Counts how many tracked coroutines run at once; each waits until released, so overlap is real."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.started = 0
        self.release = asyncio.Event()
        self.cancelled = 0

    async def job(self, value: int) -> int:
        self.running += 1
        self.started += 1
        self.peak = max(self.peak, self.running)
        try:
            await self.release.wait()
            return value * 10
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1


def test_results_come_back_in_order_and_all_run_at_once() -> None:
    async def scenario() -> list[int]:
        meter = Meter()
        task = asyncio.create_task(run_all(meter.job(i) for i in range(5)))
        await until(lambda: meter.started == 5)
        meter.release.set()
        result = await task
        assert meter.peak == 5
        return result

    assert asyncio.run(scenario()) == [0, 10, 20, 30, 40]


def test_limit_caps_how_many_run_at_once() -> None:
    async def scenario() -> None:
        meter = Meter()
        task = asyncio.create_task(run_all((meter.job(i) for i in range(6)), limit=2))
        await until(lambda: meter.started == 2)
        for _ in range(20):  # give the others every chance to start, were the gate missing
            await asyncio.sleep(0)
        assert meter.started == 2 and meter.peak == 2
        meter.release.set()
        assert await task == [0, 10, 20, 30, 40, 50]
        assert meter.peak == 2

    asyncio.run(scenario())


def test_the_first_failure_is_raised_as_itself_and_cancels_the_rest() -> None:
    async def scenario() -> None:
        meter = Meter()

        async def failing() -> int:
            await until(lambda: meter.started == 3)
            raise InvalidRequestError("bad value")

        with pytest.raises(InvalidRequestError, match="bad value"):
            await run_all([meter.job(1), failing(), meter.job(2), meter.job(3)])
        assert meter.cancelled == 3 and meter.running == 0

    asyncio.run(scenario())


def test_cancelling_the_caller_cancels_every_coroutine() -> None:
    async def scenario() -> None:
        meter = Meter()
        task = asyncio.create_task(run_all((meter.job(i) for i in range(4)), limit=3))
        await until(lambda: meter.started == 3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert meter.cancelled == 3 and meter.running == 0 and meter.started == 3

    asyncio.run(scenario())


@pytest.mark.anyio
async def test_a_lane_call_runs_inline_or_in_the_lane_as_asked() -> None:
    import threading

    from reme_service.concurrency import ThreadLane

    lane = ThreadLane("reme-test-lane", 1)
    try:
        here = await lane.call(True, lambda: threading.current_thread().name)
        there = await lane.call(False, lambda: threading.current_thread().name)
        assert here == threading.current_thread().name and there.startswith("reme-test-lane")
    finally:
        await lane.close()
