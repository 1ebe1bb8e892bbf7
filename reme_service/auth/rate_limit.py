"""A token bucket per API key: `rate` requests a second on average, bursts of up to `burst`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """`wait(key_id)` takes a token and returns 0, or returns the seconds until one will be there (nothing taken).
    The buckets are this process's (`state/pg/buckets.py` keeps them in PostgreSQL, shared by every node)."""

    blocking = False  # in memory: cheap enough for the event loop

    def __init__(self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate limit needs rate > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def wait(self, key_id: str) -> float:
        now = self._clock()
        bucket = self._buckets.get(key_id)
        if bucket is None:
            bucket = self._buckets[key_id] = _Bucket(tokens=float(self.burst), stamp=now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.stamp) * self.rate)
        bucket.stamp = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate

    @staticmethod
    def retry_after(seconds: float) -> int:
        """The `Retry-After` header value (whole seconds, at least 1) for a wait of `seconds`."""
        return max(1, math.ceil(seconds))
