"""`PgRateLimiter`: the token bucket of `auth.rate_limit.RateLimiter`, one row per API key in the `buckets` table, so
every node takes from the same bucket (N nodes give a key its limit once, not N times).

One statement per request refills the bucket by the time elapsed since its stamp and takes a token if one is
there, atomically: `INSERT ... ON CONFLICT DO UPDATE` locks the key's row, so concurrent requests on any node are
applied one after the other, each to the row the previous one left. Time is the database's (`clock_timestamp()`,
as epoch seconds in `stamp`), never a node's, so the nodes' clocks need not agree; a stamp never goes back.
A refused request leaves the bucket as it was (only `granted` records the refusal, for the statement to report it).

`wait` blocks on the database: `Access.admit` runs it in a worker thread. PostgreSQL down → StoreError (503
`store_unavailable`): a keyed request is refused rather than let through unlimited, as keys are.
"""

from __future__ import annotations

from reme_service.state.pg.db import StateDb

_REFILLED = "least(%(burst)s, b.tokens + greatest(0, excluded.stamp - b.stamp) * %(rate)s)"

_TAKE = f"""
    INSERT INTO {{table}} AS b (key_id, tokens, stamp, granted)
    VALUES (%(key)s, %(burst)s - 1, extract(epoch FROM clock_timestamp()), true)
    ON CONFLICT (key_id) DO UPDATE SET
        granted = {_REFILLED} >= 1,
        tokens = CASE WHEN {_REFILLED} >= 1 THEN {_REFILLED} - 1 ELSE b.tokens END,
        stamp = CASE WHEN {_REFILLED} >= 1 THEN greatest(b.stamp, excluded.stamp) ELSE b.stamp END
    RETURNING granted, tokens, greatest(0, extract(epoch FROM clock_timestamp()) - stamp)
"""  # noqa: S608 - the table name is the validated prefix's


class PgRateLimiter:
    """`wait(key_id)` takes a token and returns 0, or returns the seconds until one will be there (nothing taken);
    the same contract as `auth.rate_limit.RateLimiter`, on the bucket every node shares."""

    blocking = True

    def __init__(self, db: StateDb, rate: float, burst: int) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate limit needs rate > 0 and burst >= 1")
        self.db = db
        self.rate = rate
        self.burst = burst
        self._query = _TAKE.format(table=db.table("buckets"))

    def wait(self, key_id: str) -> float:
        params = {"key": key_id, "burst": float(self.burst), "rate": float(self.rate)}
        row = self.db.run(lambda conn: conn.execute(self._query, params).fetchone())
        assert row is not None  # INSERT ... ON CONFLICT DO UPDATE without a WHERE returns its row
        granted, tokens, elapsed = row
        if granted:
            return 0.0
        refilled = min(float(self.burst), float(tokens) + float(elapsed) * self.rate)
        return max(0.0, (1.0 - refilled) / self.rate)
