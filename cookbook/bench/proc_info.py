"""Small readings the benchmarks share: this process's resident memory, and a free loopback port."""

from __future__ import annotations

from pathlib import Path


def rss_mib() -> float:
    """This process's resident set size, MiB (Linux `/proc`; NaN elsewhere)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return float("nan")
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")
