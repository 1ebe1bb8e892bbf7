"""The service's Prometheus metrics, in a registry of its own (one per app: no process-wide state).

Families (all prefixed `reme_`):

- `http_requests_total{route,method,status}`, `http_request_duration_seconds{route}`: every HTTP request; `route`
  is the flow name for a flow, the path for the service's other routes, `other` for anything else (unknown paths
  never create new series);
- `flow_runs_total{flow,status}`, `flow_run_duration_seconds{flow}`: every flow run, over HTTP, MCP or Python;
- `llm_calls_total{llm,operation,outcome}` and `llm_calls_duration_seconds{llm,operation}`, the same for
  `embedding_calls_*{embedding_model,...}` and `store_operations_*{store,...}` (`outcome`: ok, error, cancelled);
- `resident_workspaces{store}`: workspaces held in memory by stores that hold them;
- `build_info{version}`, `process_info{pid}` (which worker answered), and the process collector's `process_*`
  (CPU, resident memory, open file descriptors).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from reme_service.version import __version__

F = TypeVar("F", Counter, Histogram)
ClientKind = Literal["llm", "embedding", "store"]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Seconds: from a cached embedding (sub-millisecond) to a slow LLM call (a minute).
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_CLIENT_FAMILIES: Mapping[ClientKind, tuple[str, str, str]] = {  # family stem, help, the label naming the client
    "llm": ("llm_calls", "LLM calls", "llm"),
    "embedding": ("embedding_calls", "embedding calls", "embedding_model"),
    "store": ("store_operations", "vector store operations", "store"),
}


class _Children(Generic[F]):
    """A family's children by their label values, each looked up once: `labels()` checks the values and takes the
    family's lock on every call, a few µs that a request paid eight times. The label values are bounded (flow
    names, routes, statuses, operations), so this holds exactly the series the family holds."""

    __slots__ = ("family", "_children")

    def __init__(self, family: F) -> None:
        self.family: F = family
        self._children: dict[tuple[str, ...], F] = {}

    def __call__(self, *values: str) -> F:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self.family.labels(*values)
        return child


class _Series:
    """A counter's and a histogram's children per key, the pair looked up once: a call, a request or a flow run is
    counted in one family and timed in another, and this is one dict lookup for both (two `_Children` calls were
    two)."""

    __slots__ = ("_pairs",)

    def __init__(self) -> None:
        self._pairs: dict[tuple[object, ...], tuple[Counter, Histogram]] = {}

    def record(
        self, key: tuple[object, ...], children: Callable[[], tuple[Counter, Histogram]], seconds: float
    ) -> None:
        """Count one under `key` and time it `seconds`; `children()` makes the pair on the key's first use."""
        pair = self._pairs.get(key)
        if pair is None:
            pair = self._pairs[key] = children()
        pair[0].inc()
        pair[1].observe(seconds)


@dataclass(frozen=True)
class Meter:
    """What a client records its calls with (`metered.py`): one client's slice of its kind's families."""

    name: str
    total: _Children[Counter]
    duration: _Children[Histogram]
    _series: _Series = field(default_factory=_Series, compare=False)  # by (operation, outcome)

    def observe(self, operation: str, outcome: str, seconds: float) -> None:
        self._series.record(
            (operation, outcome),
            lambda: (self.total(self.name, operation, outcome), self.duration(self.name, operation)),
            seconds,
        )


class _Resident(Collector):
    """`reme_resident_workspaces{store}`, read at scrape time from each store that reports it."""

    def __init__(self) -> None:
        self.sources: dict[str, Callable[[], int | None]] = {}

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily("reme_resident_workspaces", "workspaces held in memory, by store", labels=["store"])
        for store, count in self.sources.items():
            value = count()
            if value is not None:
                family.add_metric([store], value)
        yield family


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        self.http_requests = Counter(
            "reme_http_requests", "HTTP requests answered", ["route", "method", "status"], registry=reg
        )
        self.http_duration = Histogram(
            "reme_http_request_duration_seconds", "HTTP request time", ["route"], buckets=_BUCKETS, registry=reg
        )
        self.flow_runs = Counter("reme_flow_runs", "flow runs (HTTP, MCP and Python)", ["flow", "status"], registry=reg)
        self.flow_duration = Histogram(
            "reme_flow_run_duration_seconds", "flow run time", ["flow"], buckets=_BUCKETS, registry=reg
        )
        self._clients: dict[ClientKind, tuple[_Children[Counter], _Children[Histogram]]] = {}
        for kind, (stem, what, label) in _CLIENT_FAMILIES.items():
            total = Counter(f"reme_{stem}", what, [label, "operation", "outcome"], registry=reg)
            duration = Histogram(
                f"reme_{stem}_duration_seconds", f"{what}: time", [label, "operation"], buckets=_BUCKETS, registry=reg
            )
            self._clients[kind] = (_Children(total), _Children(duration))
        self._http_requests = _Children(self.http_requests)
        self._http_duration = _Children(self.http_duration)
        self._flow_runs = _Children(self.flow_runs)
        self._flow_duration = _Children(self.flow_duration)
        self._requests = _Series()  # by (route, method, status)
        self._runs = _Series()  # by (flow, status)
        self._resident = _Resident()
        reg.register(self._resident)
        Gauge("reme_build_info", "the running version (always 1)", ["version"], registry=reg).labels(__version__).set(1)
        # which process answered the scrape (`http.workers` > 1: each worker keeps its own counts)
        Gauge("reme_process_info", "this service process (always 1)", ["pid"], registry=reg).labels(
            str(os.getpid())
        ).set(1)
        ProcessCollector(registry=reg)

    def meter(self, kind: ClientKind, name: str) -> Meter:
        total, duration = self._clients[kind]
        return Meter(name, total, duration)

    def track_resident(self, store: str, count: Callable[[], int | None]) -> None:
        self._resident.sources[store] = count

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        self._requests.record(
            (route, method, status),
            lambda: (self._http_requests(route, method, str(status)), self._http_duration(route)),
            seconds,
        )

    def flow_run(self, flow: str, status: int, seconds: float) -> None:
        self._runs.record(
            (flow, status), lambda: (self._flow_runs(flow, str(status)), self._flow_duration(flow)), seconds
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
