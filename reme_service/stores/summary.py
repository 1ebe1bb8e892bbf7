"""`WorkspaceSummary`: what the management API's workspace list shows of a workspace — how many memories it holds,
how many of each `memory_type`, and the latest `time_modified` — and `Tally`, the one place that says how a node's
metadata counts.

A node counts under `str(metadata.get("memory_type", "task"))` (a memory without a type is a task memory, as ReMe
reads it) and contributes `str(metadata.get("time_modified", ""))` to the latest time; times compare as strings
(ReMe's `YYYY-MM-DD HH:MM:SS` sorts by time that way), and a workspace whose memories carry no time has
`last_modified` None. `VectorStore.summarize` computes this from `list_nodes` by default; backends that can count
without materialising every node override it (`stores/base.py`) and must agree with the default (the store
contract checks it on every backend).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TYPE = "task"


@dataclass(frozen=True, slots=True)
class WorkspaceSummary:
    """A workspace's size, its memories by `memory_type` (only types present), the latest `time_modified`."""

    size: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    last_modified: str | None = None


def kind_and_time(metadata: Mapping[str, Any]) -> tuple[str, str]:
    """The type a node counts under and the time it contributes ("" for none)."""
    return str(metadata.get("memory_type", DEFAULT_TYPE)), str(metadata.get("time_modified", ""))


class Tally:
    """Counts by type and the latest time of a set of nodes' metadata, kept up to date as nodes come and go.
    Removing a node whose time was the latest makes `latest` an upper bound only (`stale`) until a node at least as
    recent is added (an update of the latest memory removes it and adds it back, newer); a stale summary is counted
    afresh."""

    __slots__ = ("counts", "latest", "stale")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.latest = ""
        self.stale = False

    @classmethod
    def of(cls, metadatas: Iterable[Mapping[str, Any]]) -> Tally:
        tally = cls()
        counts, latest = tally.counts, ""
        for metadata in metadatas:
            kind, modified = kind_and_time(metadata)
            counts[kind] = counts.get(kind, 0) + 1
            if modified > latest:
                latest = modified
        tally.latest = latest
        return tally

    def add(self, metadata: Mapping[str, Any]) -> None:
        kind, modified = kind_and_time(metadata)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if modified >= self.latest:  # the latest now, even when `stale` (every other time is at most `latest`)
            self.latest = modified
            self.stale = False

    def remove(self, metadata: Mapping[str, Any]) -> None:
        kind, modified = kind_and_time(metadata)
        left = self.counts.get(kind, 0) - 1
        if left > 0:
            self.counts[kind] = left
        else:
            self.counts.pop(kind, None)
        if modified and modified >= self.latest:
            self.stale = True

    def size(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> WorkspaceSummary:
        return WorkspaceSummary(self.size(), dict(self.counts), self.latest or None)


def summarize_metadata(metadatas: Iterable[Mapping[str, Any]]) -> WorkspaceSummary:
    """The summary of nodes with these metadata dicts (the default `VectorStore.summarize`'s counting)."""
    return Tally.of(metadatas).summary()
