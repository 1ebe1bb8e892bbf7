"""Percentiles of latency samples, one definition for the benches and the tests."""

from __future__ import annotations

from collections.abc import Iterable


def percentile(samples: Iterable[float], q: float) -> float:
    """The `q`-th percentile (`q` from 0 to 100) of `samples`, interpolated linearly between the two nearest ranks
    (numpy's default "linear" method); NaN for no samples. The samples need not be sorted."""
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, not {q}")
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
